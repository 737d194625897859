"""The simulator's command line: many seeds (in worker processes with ``--jobs``), or
one seed replayed with a trace.

    python -m coord.rafttest --seeds 10000 [--start 0] [--nodes 3|5|both] [--steps N]
    python -m coord.rafttest --seed S --nodes N -v      # replay one seed with a trace

``-v`` traces events (faults, roles, commits, workload); ``-vv`` adds every message."""

from __future__ import annotations

import argparse
import sys
import time

from coord.rafttest.outcome import DEFAULT_STEPS, InvariantViolation
from coord.rafttest.simulation import run


def _run_one(job: tuple[int, int, int]) -> tuple[int, int, str | None]:
    seed, nodes, steps = job
    try:
        run(seed, nodes, steps)
    except InvariantViolation as v:
        return seed, nodes, str(v)
    return seed, nodes, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m coord.rafttest",
        description="Deterministic fault-injection simulator for coord's Raft core.",
    )
    ap.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--seed", type=int, help="run just this seed (use with -v to trace it)")
    ap.add_argument("--nodes", choices=["3", "5", "both"], default="both")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="ticks of faults per seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--progress", type=int, default=500, help="report every N seeds")
    ap.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="trace events (-vv: and every message)")
    args = ap.parse_args(argv)
    sizes = [3, 5] if args.nodes == "both" else [int(args.nodes)]

    if args.seed is not None:
        failed = 0
        for n in sizes:
            try:
                stats = run(args.seed, n, args.steps, args.verbose)
            except InvariantViolation as v:
                print(v, file=sys.stderr)
                failed += 1
            else:
                print(f"seed {args.seed}, {n} nodes: ok  {stats}")
        return 1 if failed else 0

    jobs = [(s, n, args.steps) for s in range(args.start, args.start + args.seeds) for n in sizes]
    started = time.monotonic()
    failures: list[str] = []
    seeds_done = 0
    pool = None
    if args.jobs > 1:
        import multiprocessing

        pool = multiprocessing.Pool(args.jobs)
        results = pool.imap(_run_one, jobs, chunksize=4)
    else:
        results = map(_run_one, jobs)
    try:
        for i, (seed, _, failure) in enumerate(results, 1):
            if failure is not None:
                failures.append(failure)
                print(failure, file=sys.stderr, flush=True)
                if args.fail_fast:
                    break
            if i % len(sizes) == 0:
                seeds_done += 1
                if args.progress and seeds_done % args.progress == 0:
                    rate = seeds_done / (time.monotonic() - started)
                    print(
                        f"... {seeds_done}/{args.seeds} seeds (up to {seed}), "
                        f"{len(failures)} failed, {rate:.1f} seeds/s",
                        flush=True,
                    )
    finally:
        if pool is not None:
            pool.terminate()
    elapsed = time.monotonic() - started
    print(
        f"{len(jobs)} runs ({args.seeds} seeds x {sizes} nodes, {args.steps} ticks) in "
        f"{elapsed:.1f}s: {len(failures)} failed"
    )
    return 1 if failures else 0
