"""`coord bench readonly`: a side-by-side benchmark of read-only mode, coord vs ZooKeeper
3.8 (Debian's `zookeeper`, `-Dreadonlymode.enabled=true`, kazoo `read_only=True`).

One run measures both systems with the same procedure, one system at a time (so they do
not compete for the machine's 2 cores): a 3-member cluster, a read-only client whose first
endpoint is the survivor, a session on it; SIGSTOP the two other members at t0, SIGCONT
them at t1. Per trial, in milliseconds:

- `ro_read`: t0 -> the first read answered in read-only mode (coord: a response with
  `header.read_only`; ZooKeeper: a read that completed while kazoo's `client_state` was
  CONNECTED_RO, i.e. served by the survivor's ReadOnlyZooKeeperServer). Fresh reads are
  fired every `FIRE_S` without waiting for the previous ones (each on the client's own
  connection, 1 s deadline), so this is when the member first *can* answer, not when a
  read that was already waiting gets its answer.
- `ro_read_api`: the same, seen by an application thread calling the client's blocking
  read back to back with the client's default timeout (coord `Client.range`, 5 s per try;
  kazoo `get`): what a program that was reading at t0 experiences.
- `switch`: t0 -> the survivor's own switch, from its log (coord: "read-write ->
  read-only"; ZooKeeper: "Read-only server started"); log timestamps have 1 ms resolution.
- `notify`: that switch -> the connected session is told (coord: the session's
  `mode_changed` read-only event via `on_event`; ZooKeeper: kazoo's state listener firing
  CONNECTED while `client_state` is CONNECTED_RO — kazoo's listener only ever says
  CONNECTED, `client_state` is where read-only shows).
- `notify_vs_read`: session told - first read-only read observed (the client-only measure;
  negative when the event came first).
- `event`: t0 -> session told.
- `write`: t1 -> the first write that succeeds through the same client.
- `ro_open`: a new application's session on the read-only survivor (a second read-only
  client given the survivor alone, opened once the first read-only read was seen): the
  open's duration (coord: a member-local session, `Client.session`; ZooKeeper: kazoo
  `start()` until CONNECTED_RO).
- `ro_rw`: t1 -> that session is a read-write one (coord: its `registered` event, same
  id; ZooKeeper: kazoo's state CONNECTED with `client_state` CONNECTED — the trial's note
  says whether ZooKeeper kept the session id).

Client-side times are wall-clock (`time.time()`), because they are compared with the
members' log timestamps (same machine, same clock). Prints figures; asserts nothing."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass

import grpc

from coord.bench import log
from coord.bench.readonly_trials import POLL_S, SESSION_TTL_S, Trial, run_coord, run_zk
from coord.bench.run_record import print_json
from coord.bench.stats import ratio, summarize
from coord.bench.tables import BenchTable
from coord.testing import ClusterError

COORD_TICK_MS, COORD_ELECTION_TICKS = 50, 12  # coord serve's defaults


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    target: str  # "election" (2 election timeouts), a number of ms, or "" for none


METRICS = (
    Metric("ro_read", "t0 -> first RO read (fresh reads)", "election"),
    Metric("ro_read_api", "t0 -> first RO read (blocking)", "election"),
    Metric("switch", "t0 -> member switch (its log)", ""),
    Metric("notify", "switch -> session notified", "100"),
    Metric("notify_vs_read", "notified - first RO read", ""),
    Metric("event", "t0 -> session notified", ""),
    Metric("write", "t1 (SIGCONT) -> first write OK", "1000"),
    Metric("ro_open", "open a session on the RO member", ""),
    Metric("ro_rw", "t1 -> that session read-write", ""),
)


def _fmt(v: float | int | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def render_table(trials: list[Trial], targets: dict[str, float],
                 systems: list[str]) -> BenchTable:
    """The table: per metric and survivor role, each system's median / max (n), the
    coord/ZK ratio of medians and the issue's target. `targets` maps a metric's target
    kind ("election", or ms as text) to ms."""
    roles = sorted({t.survivor_role for t in trials}, key=lambda r: (r != "follower", r))
    headers = ["metric (ms)", "survivor", "target", *(f"{s} median/max (n)" for s in systems)]
    if len(systems) == 2:
        headers.append("/".join(systems) + " med")
    rows = []
    for m in METRICS:
        for role in roles:
            target = targets.get(m.target) if m.target else None
            row = [m.label, role, "" if target is None else f"<={target:.0f}"]
            medians = []
            for s in systems:
                vals = [t.values.get(m.key) for t in trials
                        if t.system == s and t.survivor_role == role]
                st = summarize(vals)
                medians.append(st["median"])
                miss = f"+{st['missing']}?" if st["missing"] else ""
                row.append(f"{_fmt(st['median'])} / {_fmt(st['max'])} ({st['n']}{miss})")
            if len(systems) == 2:
                r = ratio(medians[0], medians[1])
                row.append("-" if r is None else f"{r:.2f}")
            rows.append(row)
    return BenchTable(headers, rows)


def targets_of(config: dict) -> dict[str, float]:
    """Each target kind's ms: "election" is twice coord's election timeout."""
    coord = config["coord"]
    return {"election": 2.0 * coord["tick_ms"] * coord["election_ticks"], "100": 100.0,
            "1000": 1000.0}


def table(figures: dict) -> BenchTable:
    """The table `coord bench readonly` prints, from its figures (as --json gives them)."""
    trials = [Trial(**t) for t in figures["trials"]]
    systems = ["coord", "zk"] if any(t.system == "zk" for t in trials) else ["coord"]
    return render_table(trials, targets_of(figures["config"]), systems)


def run_readonly_bench(args: argparse.Namespace) -> int:
    """`coord bench readonly`: both systems in one run; table on stdout (on stderr with
    --json, which prints the raw trials on stdout)."""
    roles = [r for r in args.survivor.split(",") if r]
    if not roles or any(r not in ("follower", "leader") for r in roles):
        raise SystemExit("coord bench readonly: --survivor takes follower,leader")
    if args.zk:
        try:
            import kazoo  # noqa: F401
        except ImportError:
            raise SystemExit("coord bench readonly --zk needs kazoo: pip install -e '.[bench]'"
                             " (or pass --no-zk)") from None
    trials: list[Trial] = []
    started = time.time()
    errors: list[str] = []
    try:
        run_coord(args.trials, roles, trials)
        if args.zk:
            try:
                run_zk(args.trials, roles, trials, args.zk_tick_ms, args.zk_sync_limit,
                       args.zk_init_limit)
            except ClusterError as e:
                errors.append(f"zk: {e}")
                log(f"zk: {e}")
    except KeyboardInterrupt:
        log("interrupted: processes stopped and temp dirs removed; partial results follow")
    except (ClusterError, grpc.RpcError) as e:
        errors.append(f"coord: {e}")
        log(f"coord: {e}")
    election_ms = COORD_TICK_MS * COORD_ELECTION_TICKS
    figures = {
        "config": {"trials": args.trials, "survivor": roles,
                   "coord": {"tick_ms": COORD_TICK_MS, "election_ticks": COORD_ELECTION_TICKS},
                   "zk": {"tick_ms": args.zk_tick_ms, "sync_limit": args.zk_sync_limit,
                          "init_limit": args.zk_init_limit} if args.zk else None,
                   "session_ttl_s": SESSION_TTL_S, "poll_s": POLL_S},
        "errors": errors,
        "trials": [asdict(t) for t in trials],
    }
    title = (
        f"coord bench readonly: {args.trials} trials per row, one system at a time, 127.0.0.1;"
        f" coord election timeout {election_ms} ms (target read-only <= 2x);"
        f" ZK tickTime {args.zk_tick_ms} ms x syncLimit {args.zk_sync_limit}"
        f" = {args.zk_tick_ms * args.zk_sync_limit} ms"
    )
    shown = "\n".join(table(figures).text()) if trials else "(no trials completed)"
    text = "\n".join([title, shown, f"{time.time() - started:.0f} s in all", *errors])
    if args.json:
        log(text)
        print_json(args.run, figures)
    else:
        print(text)
    return 1 if errors else 0
