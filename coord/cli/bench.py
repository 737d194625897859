"""`coord bench TARGET`: the command-line face of coord.bench (each target is a module
there that starts its own clusters and prints its figures)."""

from __future__ import annotations

import argparse
import signal

TARGETS = ["raft", "own", "pid", "kv", "etcd", "startup", "readonly", "machine", "scale",
           "audit", "spark"]


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmarks")
    b.add_argument(
        "target",
        choices=TARGETS,
        help="etcd: coord and a real etcd 3.4 side by side (put, get, claim txns); "
        "startup: a fresh member's time to first served request, coord and etcd; "
        "readonly: read-only mode vs ZooKeeper 3.8; "
        "machine: the state machine alone, one own() of 10,000 resources; "
        "scale: memory and disk over a hot-key soak and a growing key space, beside etcd; "
        "audit: history synth, export and the PySpark audit, rows/s; "
        "spark: the fenced Spark writer vs a plain write to the same sink",
    )
    b.add_argument("--commands", default="1000000",
                   help="audit: history sizes to synthesize and audit (comma-separated)")
    b.add_argument("--masters", default="local[2]",
                   help="audit: Spark masters to audit with (comma-separated), e.g. "
                   "local[2],local-cluster[2,1,1024]")
    b.add_argument("--export-entries", type=int, default=5000,
                   help="audit: entries a real member writes before its data dir is exported "
                   "(0: no export phase)")
    b.add_argument("--history-dir", default="",
                   help="audit: keep the synthesized histories in DIR/synth-N and reuse "
                   "one already there (default: a temporary dir, deleted)")
    b.add_argument("--resources", type=int, default=10_000, help="own: resources to claim")
    b.add_argument("--concurrency", default="1,16,256")
    b.add_argument("--seconds", type=float, default=5.0)
    b.add_argument("--failover-trials", type=int, default=10)
    b.add_argument("--claims", type=int, default=10_000, help="etcd: keys claimed per level")
    b.add_argument("--members", type=int, default=3, help="etcd: members per cluster")
    b.add_argument("--profile", metavar="DIR", default="",
                   help="etcd: py-spy flame graphs (SVG) of every coord member during the "
                   "stream put at the most clients, written to DIR (the bench extra)")
    b.add_argument(
        "--trials", type=int, default=10, help="readonly, startup: trials per system and row"
    )
    b.add_argument(
        "--zk",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="readonly: also run ZooKeeper 3.8 (Debian's zookeeper + kazoo) side by side",
    )
    b.add_argument(
        "--survivor", default="follower,leader", help="readonly: which member survives"
    )
    b.add_argument("--zk-tick-ms", type=int, default=200, help="readonly: ZooKeeper tickTime")
    b.add_argument(
        "--zk-sync-limit",
        type=int,
        default=3,
        help="readonly: ZooKeeper syncLimit (ticks); x tickTime is its failure detection",
    )
    b.add_argument("--zk-init-limit", type=int, default=10, help="readonly: ZooKeeper initLimit")
    b.add_argument("--phases", default="soak,keys",
                   help="scale: comma-separated, of soak, keys, restart (kill -9 of "
                   "every member to serving, and a wiped follower's catch-up, per decade) "
                   "sessions (CPU, RSS and keepalive round trips per decade of sessions, "
                   "etcd: leases, kept alive), owners (RSS and claim latency per decade "
                   "of owned resources, coord only) and pids (the same per decade of live "
                   "pid leases, coord only)")
    b.add_argument("--sessions", type=int, default=100_000,
                   help="scale: sessions to grow to (the sessions phase)")
    b.add_argument("--session-ttl", type=float, default=30.0,
                   help="scale: the sessions' TTL in seconds; keepalives every TTL/3")
    b.add_argument("--keepalives-to", choices=("leader", "spread"), default="leader",
                   help="scale: the sessions phase's keepalive streams go to the leader, or "
                   "to every member in turn (followers batch theirs to the leader)")
    b.add_argument("--keys", type=int, default=1_000_000, help="scale: keys to grow to")
    b.add_argument("--owners", type=int, default=1_000_000,
                   help="scale: owned resources to grow to (the owners phase)")
    b.add_argument("--pids", type=int, default=1_000_000,
                   help="scale: live pid leases to grow to (the pids phase)")
    b.add_argument("--probe-ops", type=int, default=2_000,
                   help="scale: put and get latency samples at each decade of keys")
    b.add_argument("--sample-s", type=float, default=30.0,
                   help="scale: soak sample period; the sessions phase's CPU window")
    b.add_argument("--auto-compaction-mode", default="periodic",
                   help="scale: given to both systems")
    b.add_argument("--auto-compaction-retention", default="5m",
                   help="scale: given to both systems (0: off)")
    b.add_argument("--etcd", action=argparse.BooleanOptionalAction, default=True,
                   help="scale: also run etcd 3.4 beside coord")
    b.add_argument("--rows", type=int, default=1_000_000, help="spark: rows per write")
    b.add_argument("--partitions", type=int, default=8, help="spark: partitions per write")
    b.add_argument("--runs", type=int, default=3, help="spark: runs per writer and sink")
    b.add_argument("--cost-partitions", type=int, default=200,
                   help="spark: claims timed for the fence's cost per partition")
    b.add_argument("--many-partitions", type=int, default=1000,
                   help="spark: the partition count of the many-partitions write")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_bench(args: argparse.Namespace) -> int:
    # SIGTERM stops a benchmark as Ctrl-C does, through its clean-up: the clusters it
    # started are stopped and their temp dirs removed (a killed driver used to leave its
    # members running).
    signal.signal(signal.SIGTERM, _interrupt)
    # Only the chosen benchmark is imported: they bring clusters, etcd and ZooKeeper
    # drivers that the others (and the parser) have no use for.
    if args.target == "readonly":
        from coord.bench.readonly import run_readonly_bench

        return run_readonly_bench(args)
    if args.target == "raft":
        from coord.bench.raft import run_raft_bench

        return run_raft_bench(args)
    if args.target == "etcd":
        from coord.bench.etcd import run_etcd_bench

        return run_etcd_bench(args)
    if args.target == "startup":
        from coord.bench.startup import run_startup_bench

        return run_startup_bench(args)
    if args.target == "scale":
        from coord.bench.scale import run_scale_bench

        return run_scale_bench(args)
    if args.target == "audit":
        from coord.bench.audit import run_audit_bench

        return run_audit_bench(args)
    if args.target == "spark":
        from coord.bench.spark_writer import run_spark_bench

        return run_spark_bench(args)
    if args.target == "machine":
        from coord.bench.machine import run_machine_bench

        return run_machine_bench(args)
    from coord.bench.api import run_api_bench

    return run_api_bench(args)
