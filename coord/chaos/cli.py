"""`coord chaos`: a randomized workload under a randomized nemesis against a fresh local
cluster, then every oplog checker (coord.chaos.runner)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from coord.chaos.nemesis import DEFAULT_NEMESES, NEMESES
from coord.chaos.workloads import PLANTS, WORKLOADS
from coord.check.linearizable import DEFAULT_TIME_LIMIT_S


def _names(text: str) -> list[str]:
    return [] if text in ("", "none") else [n.strip() for n in text.split(",") if n.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chaos", help="run workloads under faults against a fresh local "
                       "cluster and check the oplog (linearizability, ownership, pids)")
    p.add_argument("--seconds", type=float, default=60.0, help="how long the faults run")
    p.add_argument("--seed", type=int, default=0, help="seeds the schedule and workers")
    p.add_argument("--nemesis", default=",".join(DEFAULT_NEMESES),
                   help=f"comma-separated: {', '.join(NEMESES)} (or all, or none; default: "
                   f"{', '.join(DEFAULT_NEMESES)}; delay runs partitions on TCP gates; skew runs "
                   "members as coord.chaos.skewed_member)")
    p.add_argument("--workload", default=",".join(WORKLOADS),
                   help=f"comma-separated: {', '.join(WORKLOADS)}")
    p.add_argument("--workers", type=int, default=8, help="concurrent client processes")
    p.add_argument("--members", type=int, default=3, choices=(3, 5))
    p.add_argument("--netns", choices=("auto", "on", "off"), default="auto",
                   help="partitions in network namespaces the run creates (needs root; "
                   "auto: when root), else TCP gates on loopback")
    p.add_argument("--plant", choices=PLANTS, default="",
                   help="a known-bad client setting, to see the checkers catch it "
                   "(serializable-reads: register reads skip the ReadIndex)")
    p.add_argument("--overlap", action="store_true",
                   help="faults in pairs whose windows overlap (a partition while a member "
                   "is down, a pause during a membership change), not one at a time")
    p.add_argument("--tls", action="store_true",
                   help="the cluster over TLS with client certificates required on both "
                   "ports (a CA made in the run directory), every client of the run over TLS")
    p.add_argument("--out", type=Path, help="run directory (default chaos-runs/TIME-seedS)")
    p.add_argument("--lin-time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                   metavar="SECONDS", help="the linearizability check's time limit per key "
                   "(past it the key is undecided; long runs have long keys)")
    p.add_argument("--check", type=Path, metavar="OPLOG",
                   help="only check an existing oplog (JSONL) and print the verdicts")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    if args.check is not None:
        return _check_only(console, args.check, args.lin_time_limit)
    from coord.chaos.runner import RunConfig, run

    if args.seconds <= 0 or args.workers < 1:
        console.print("[red]--seconds must be > 0 and --workers >= 1[/]")
        return 2
    # SIGTERM ends the run as Ctrl-C does: through the runner's clean-up (faults healed,
    # members stopped, network namespaces removed).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = RunConfig(seconds=args.seconds, seed=args.seed, workloads=_names(args.workload),
                    nemeses=list(NEMESES) if args.nemesis == "all" else _names(args.nemesis),
                    workers=args.workers,
                    members=args.members, out=args.out, netns=args.netns,
                    plant=args.plant, tls=args.tls, overlap=args.overlap,
                    lin_time_limit_s=args.lin_time_limit)
    try:
        result = run(cfg, console)
    except ValueError as e:
        from rich.markup import escape

        console.print(f"[red]{escape(str(e))}[/]")
        return 2
    return {"ok": 0, "illegal": 1}.get(result.verdict, 3)


def _check_only(console, path: Path, lin_time_limit_s: float) -> int:
    from coord.chaos.recorder import latest_faults
    from coord.check import CheckOptions, check_all
    from coord.check.oplog import OplogError, read_jsonl
    from coord.check.sessions import fault_windows

    faults_file = path.with_name("faults.jsonl")  # a run directory's, if it has one
    try:
        faults = latest_faults(read_jsonl(faults_file)) if faults_file.exists() else []
        checks = check_all(read_jsonl(path), CheckOptions(tuple(fault_windows(faults)),
                                                          lin_time_limit_s))
    except (OSError, OplogError) as e:
        from rich.markup import escape

        console.print(f"[red]{escape(str(e))}[/]")
        return 2
    for c in checks:
        console.print(f"{c.checker}: {c.verdict} {c.stats} {c.reason}")
        for v in c.violations[:5]:
            console.print(f"  [red]{v['message']}[/]")
    verdicts = {c.verdict for c in checks}
    return 1 if "illegal" in verdicts else (3 if "unknown" in verdicts or not checks else 0)
