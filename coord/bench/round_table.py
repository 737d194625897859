"""`coord bench etcd`'s second table: what one operation cost each member in steps, per
row and role, beside its CPU and that CPU's ratio to the gRPC floor's and to etcd's for
the same op and clients in the same run. Context switches come from /proc for every
system alike; a coord member's own round counts (`coord.server.node.round_counts`)
follow. These are the figures that carry over between machines: a VM with slow thread
wake-ups makes every context switch dearer, but not more numerous."""

from __future__ import annotations

from coord.bench.tables import BenchTable

COLUMNS = (
    ("vcsw", "vcsw", "voluntary context switches, all threads"),
    ("ivcsw", "ivcsw", "involuntary context switches, all threads"),
    ("loop_vcsw", "loop-sleeps", "the main (event-loop) thread's voluntary switches"),
    ("driver_turns", "turns", "coord: the Raft driver's wake-ups"),
    ("readies", "readies", "coord: Readies carried out"),
    ("storage_handoffs", "handoffs", "coord: calls handed to the storage thread"),
    ("inline_saves", "inline", "coord: Readies made durable on the loop's thread"),
    ("store_writes", "writes",
     "coord: write transactions of the log (each fsync'd, but a commit index alone)"),
)
"""(count, column header, what it is) of each column after the CPU ones."""


def _ratio(cpu: float, other: dict | None, role: str) -> str:
    theirs = (other or {}).get("cpu_us_per_op", {}).get(role)
    return f"{cpu / theirs:.2f}" if theirs else "-"


def round_table(rows: list[dict]) -> BenchTable:
    """One row per metered row and role: µs of CPU per op, its ratio to the floor's
    (whose one process is its leader) and to etcd's same role, then each count per op;
    below it, what each count is."""
    floor = {(r["op"], r["clients"]): r for r in rows if r["system"] == "floor"}
    etcd = {(r["op"], r["clients"]): r for r in rows if r["system"] == "etcd"}
    lines = []
    for r in rows:
        counts = r.get("counts_per_op")
        if not counts:
            continue
        key = (r["op"], r["clients"])
        for role, per_op in counts.items():
            cpu = r["cpu_us_per_op"][role]
            to_floor = _ratio(cpu, floor.get(key), "leader") if r["system"] != "floor" else "-"
            to_etcd = _ratio(cpu, etcd.get(key), role) if r["system"] != "etcd" else "-"
            lines.append([r["system"], r["op"], r["api"], str(r["clients"]), role,
                          f"{cpu:.0f}", to_floor, to_etcd,
                          *(f"{per_op[k]:.2f}" if k in per_op else "-" for k, _, _ in COLUMNS)])
    return BenchTable(["system", "op", "api", "clients", "role", "CPU us", "/floor", "/etcd",
                       *(header for _, header, _ in COLUMNS)], lines,
                      [f"{header}: {about}" for _, header, about in COLUMNS],
                      title="what one op cost each member in steps (per op; followers: their "
                      "mean; CPU's ratio to the floor's and etcd's same op and clients in this "
                      "run):")
