"""`coord bench TARGET`: the command-line face of coord.bench (each target is a module
there that starts its own clusters and prints its figures).

Each target is a subcommand with only the flags its benchmark reads, so `coord bench
readonly --help` lists ZooKeeper's tick and not Spark's rows. A flag two targets share
(`--seconds`, `--concurrency`, ...) is declared once, in FLAGS, with one name and one
default wherever it appears."""

from __future__ import annotations

import argparse
import signal
from typing import Any

FLAGS: dict[str, dict[str, Any]] = {
    "--json": {"action": "store_true", "help": "print the figures as JSON"},
    "--concurrency": {"default": "1,16,256", "help": "concurrent clients, comma-separated levels"},
    "--seconds": {"type": float, "default": 5.0, "help": "seconds each level runs"},
    "--members": {"type": int, "default": 3, "help": "members per cluster"},
    "--trials": {"type": int, "default": 10, "help": "trials per system and row"},
    # raft
    "--failover-trials": {"type": int, "default": 10,
                          "help": "times the leader is killed and a write timed after"},
    # own
    "--resources": {"type": int, "default": 10_000, "help": "resources to claim"},
    # etcd
    "--claims": {"type": int, "default": 10_000, "help": "keys claimed per level"},
    "--tls": {"action": "store_true",
              "help": "also run coord over TLS, client certificates required on both ports,"
              " and print each row beside plaintext's with the ratio (etcd and the floor"
              " stay plaintext)"},
    "--auth": {"action": "store_true",
               "help": "also run coord with auth on, its clients logged in as a user that"
                       " is not root, and print each row beside plaintext's with the ratio"},
    "--metrics": {"action": "store_true",
                  "help": "also run coord with every member serving --listen-metrics-urls,"
                  " each scraped every second, and print each row beside plaintext's with"
                  " the ratio"},
    "--profile": {"metavar": "DIR", "default": "",
                  "help": "py-spy flame graphs (SVG) of every coord member during the etcd-API "
                  "put and the stream put at the most clients, written to DIR (the bench "
                  "extra)"},
    # readonly
    "--zk": {"action": argparse.BooleanOptionalAction, "default": True,
             "help": "also run ZooKeeper 3.8 (Debian's zookeeper + kazoo) side by side"},
    "--survivor": {"default": "follower,leader", "help": "which member survives"},
    "--zk-tick-ms": {"type": int, "default": 200, "help": "ZooKeeper tickTime"},
    "--zk-sync-limit": {"type": int, "default": 3,
                        "help": "ZooKeeper syncLimit (ticks); x tickTime is its failure "
                        "detection"},
    "--zk-init-limit": {"type": int, "default": 10, "help": "ZooKeeper initLimit"},
    # scale
    "--phases": {"default": "soak,keys",
                 "help": "comma-separated, of soak, keys, restart (kill -9 of every member "
                 "to serving, and a wiped follower's catch-up, per decade) sessions (CPU, RSS "
                 "and keepalive round trips per decade of sessions, etcd: leases, kept "
                 "alive), owners (RSS and claim latency per decade of owned resources, coord "
                 "only) and pids (the same per decade of live pid leases, coord only)"},
    "--sessions": {"type": int, "default": 100_000,
                   "help": "sessions to grow to (the sessions phase)"},
    "--session-ttl": {"type": float, "default": 30.0,
                      "help": "the sessions' TTL in seconds; keepalives every TTL/3"},
    "--keepalives-to": {"choices": ("leader", "spread"), "default": "leader",
                        "help": "the sessions phase's keepalive streams go to the leader, or "
                        "to every member in turn (followers batch theirs to the leader)"},
    "--keys": {"type": int, "default": 1_000_000, "help": "keys to grow to"},
    "--owners": {"type": int, "default": 1_000_000,
                 "help": "owned resources to grow to (the owners phase)"},
    "--pids": {"type": int, "default": 1_000_000,
               "help": "live pid leases to grow to (the pids phase)"},
    "--probe-ops": {"type": int, "default": 2_000,
                    "help": "put and get latency samples at each decade of keys"},
    "--sample-s": {"type": float, "default": 30.0,
                   "help": "soak sample period; the sessions phase's CPU window"},
    "--auto-compaction-mode": {"default": "periodic", "help": "given to both systems"},
    "--auto-compaction-retention": {"default": "5m", "help": "given to both systems (0: off)"},
    "--etcd": {"action": argparse.BooleanOptionalAction, "default": True,
               "help": "also run etcd 3.4 beside coord"},
    # snapshot
    "--random-values": {"action": "store_true",
                        "help": "random values (they do not compress: the snapshot is as"
                        " big as the state) instead of one repeated value"},
    # audit
    "--commands": {"default": "1000000",
                   "help": "history sizes to synthesize and audit (comma-separated; 0: none)"},
    "--sink-rows": {"type": int, "default": 0,
                    "help": "also synthesize a history with fenced Spark jobs in it until "
                    "their sink's log holds this many rows, and audit the two together "
                    "(coord audit --sink-log; 0: no such phase)"},
    "--masters": {"default": "local[2]",
                  "help": "Spark masters to audit with (comma-separated), e.g. "
                  "local[2],local-cluster[2,1,1024]"},
    "--export-entries": {"type": int, "default": 5000,
                         "help": "entries a real member writes before its data dir is "
                         "exported (0: no export phase)"},
    "--history-dir": {"default": "",
                      "help": "keep the synthesized histories in DIR/synth-N (with a sink "
                      "log: DIR/sink-N) and reuse one already there (default: a temporary dir, "
                      "deleted)"},
    # machine
    "--history-revisions": {"type": int, "default": 1_000_000,
                            "help": "how far back (in revisions of a history that long) the "
                            "history-read rows watch and read (0: no history rows)"},
    # spark
    "--rows": {"type": int, "default": 1_000_000, "help": "rows per write"},
    "--partitions": {"type": int, "default": 8, "help": "partitions per write"},
    "--runs": {"type": int, "default": 3, "help": "runs per writer and sink"},
    "--cost-partitions": {"type": int, "default": 200,
                          "help": "claims timed for the fence's cost per partition"},
    "--many-partitions": {"type": int, "default": 1000,
                          "help": "the partition count of the many-partitions write"},
}
"""Every benchmark flag, once: its name, default and help."""

_API = ("--concurrency", "--seconds", "--json")
TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "raft": ("replicated-log throughput (proposers inside the leader) and leader failover",
             ("--concurrency", "--seconds", "--failover-trials", "--json")),
    "own": ("client-API claims: throughput and latency", ("--resources", *_API)),
    "pid": ("client-API pid leases: throughput and latency", _API),
    "kv": ("client-API puts and gets: throughput and latency", _API),
    "etcd": ("coord and a real etcd 3.4 side by side (put, get, claim txns)",
             ("--claims", "--resources", "--members", "--profile", "--tls", "--auth",
              "--metrics", *_API)),
    "startup": ("a fresh member's time to first served request, coord and etcd",
                ("--trials", "--json")),
    "readonly": ("read-only mode vs ZooKeeper 3.8",
                 ("--trials", "--zk", "--survivor", "--zk-tick-ms", "--zk-sync-limit",
                  "--zk-init-limit", "--json")),
    "machine": ("the state machine alone: one own() of 10,000 resources, and reads far back "
                "in a long KV history", ("--history-revisions", "--json")),
    "scale": ("memory and disk over a hot-key soak and a growing key space, beside etcd",
              ("--phases", "--members", "--sessions", "--session-ttl", "--keepalives-to",
               "--keys", "--owners", "--pids", "--probe-ops", "--sample-s",
               "--auto-compaction-mode", "--auto-compaction-retention", "--etcd", *_API)),
    "snapshot": ("a wiped follower's peak and steady RSS while a large snapshot reaches it",
                 ("--keys", "--random-values", "--concurrency", "--json")),
    "audit": ("history synth, export and the PySpark audit, rows/s",
              ("--commands", "--sink-rows", "--masters", "--export-entries", "--history-dir",
               "--json")),
    "tui": ("the console on 10,000 owners and keys: time to its rows, and its CPU",
            ("--json",)),
    "spark": ("the fenced Spark writer vs Spark's JDBC writer, foreachPartition and a plain "
              "write",
              ("--rows", "--partitions", "--runs", "--cost-partitions", "--many-partitions",
               "--json")),
}
"""Each target: its help, and the flags its benchmark reads."""

OWN_HELP = {
    ("raft", "--concurrency"): "proposers inside the leader, comma-separated levels",
    ("scale", "--concurrency"): "concurrent clients, comma-separated: the largest is used",
    ("scale", "--seconds"): "the soak's length in seconds",
    ("snapshot", "--keys"): "keys the cluster holds before the follower is wiped",
    ("snapshot", "--concurrency"): "concurrent loaders filling the keys: the largest is used",
    ("etcd", "--resources"): "resources coord claims in one native own request (each "
                             "variant; 0: none)",
}
"""A shared flag whose meaning is the target's own: (target, flag) -> its help there."""


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmarks", description="benchmarks: `coord bench "
                       "TARGET --help` lists a target's own flags")
    targets = b.add_subparsers(dest="target", required=True, metavar="TARGET")
    for name, (about, flags) in TARGETS.items():
        t = targets.add_parser(name, help=about, description=about)
        for flag in flags:
            t.add_argument(flag, **{**FLAGS[flag], "help": OWN_HELP.get((name, flag),
                                                                       FLAGS[flag]["help"])})
        t.set_defaults(func=cmd_bench)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_bench(args: argparse.Namespace) -> int:
    # SIGTERM stops a benchmark as Ctrl-C does, through its clean-up: the clusters it
    # started are stopped and their temp dirs removed.
    signal.signal(signal.SIGTERM, _interrupt)
    # Taken before the benchmark starts, so its load average is the one the run began in;
    # every --json output carries it (coord.bench.run_record).
    from coord.bench.run_record import begin

    args.run = begin(args.target)
    # Only the chosen benchmark is imported: they bring clusters, etcd and ZooKeeper
    # drivers that the others (and the parser) have no use for.
    if args.target == "readonly":
        from coord.bench.readonly import run_readonly_bench as run
    elif args.target == "raft":
        from coord.bench.raft import run_raft_bench as run
    elif args.target == "etcd":
        from coord.bench.etcd import run_etcd_bench as run
    elif args.target == "startup":
        from coord.bench.startup import run_startup_bench as run
    elif args.target == "scale":
        from coord.bench.scale import run_scale_bench as run
    elif args.target == "snapshot":
        from coord.bench.snapshot_transfer import run_snapshot_bench as run
    elif args.target == "audit":
        from coord.bench.audit import run_audit_bench as run
    elif args.target == "spark":
        from coord.bench.spark_writer import run_spark_bench as run
    elif args.target == "machine":
        from coord.bench.machine import run_machine_bench as run
    elif args.target == "tui":
        from coord.bench.tui import run_tui_bench as run
    else:
        from coord.bench.api import run_api_bench as run
    return run(args)
