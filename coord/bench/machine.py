"""`coord bench machine`: the state machine alone, in this process — one `own()` of
10,000 resources, split into decoding the command, applying it, and encoding the result,
then the same command through a second machine's whole `apply()`. No cluster, no
network: what the log's apply step costs for the largest claim a client sends at once.
Each figure is the median of MEASURES runs, with the collector tuned as in a member
(`tune_collector`): untuned, a full collection lands inside some runs' own() and not
others', which no member sees.
Then the history rows (`coord.bench.history_reads`): a watch's start and reads far back
in a long KV history, by the index and by a scan."""

from __future__ import annotations

import argparse
import statistics
import time

from coord.bench import history_reads
from coord.bench.run_record import print_json
from coord.bench.tables import BenchTable, cell
from coord.event_loop import tune_collector
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.sm.results import encode_result

RESOURCES = 10_000
MEASURES = 5


def measure() -> dict[str, float | int]:
    """One measurement: milliseconds per step, and the payload and result sizes."""
    m = CoordMachine()
    session = m.execute(c.OpenSession("bench", 60_000), 1).session_id
    claims = tuple(c.Claim(f"topic-{i // 64}/{i % 64}", 0) for i in range(RESOURCES))
    payload = c.encode_command(c.Own(session, "g", claims))
    t0 = time.perf_counter()
    cmd = c.decode_command(payload)
    t1 = time.perf_counter()
    result = m.ownership.own(cmd.session_id, cmd.group, cmd.claims)
    t2 = time.perf_counter()
    out = encode_result(result)
    t3 = time.perf_counter()
    m.drain_events()
    if not result.ok or len(result.grants) != RESOURCES:
        raise RuntimeError(f"own() of {RESOURCES} resources did not grant them all")
    second = CoordMachine()
    second.execute(c.OpenSession("bench", 60_000), 1)
    t4 = time.perf_counter()
    second.apply(2, 1, 2, payload)
    t5 = time.perf_counter()
    return {
        "decode_ms": 1e3 * (t1 - t0),
        "apply_ms": 1e3 * (t2 - t1),
        "encode_result_ms": 1e3 * (t3 - t2),
        "result_bytes": len(out),
        "whole_apply_ms": 1e3 * (t5 - t4),
        "payload_bytes": len(payload),
    }


def run_machine_bench(args: argparse.Namespace) -> int:
    tune_collector()
    runs = [measure() for _ in range(MEASURES)]
    r = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    history = (history_reads.measure(args.history_revisions) if args.history_revisions > 0
               else None)
    if args.json:
        print_json(args.run, {**r, "history_reads": history})
        return 0
    print("\n".join(table({**r, "history_reads": history}).text()))
    return 0


def table(figures: dict) -> BenchTable:
    """The table `coord bench machine` prints, from its figures (as --json gives them):
    a row per step of the own(), the history rows below it."""
    steps = (("decode the command", "decode_ms", "payload_bytes"),
             ("apply: own()", "apply_ms", None),
             ("encode the result", "encode_result_ms", "result_bytes"),
             ("the whole apply()", "whole_apply_ms", None))
    rows = [[step, cell(figures[ms]), cell(figures[size]) if size else ""]
            for step, ms, size in steps]
    history = figures["history_reads"]
    return BenchTable([f"own() of {RESOURCES:,} resources", "ms", "bytes"], rows,
                      history_reads.lines(history) if history else ())
