"""`coord history synth|export` and `coord audit`: the command-line face of
coord.history (the committed history as rows, to Parquet or JSONL) and coord.audit (the
PySpark job that checks it). Heavy imports (pyarrow, pyspark) happen in the commands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coord.cli.client_commands.command import add_tls_flags, add_user_flags, command

FORMAT_HELP = "parquet (partitioned by date and kind) or jsonl"


def _refuse(message: str) -> int:
    """`message` on stderr, and the exit code of a command that refused its input."""
    print(message, file=sys.stderr)
    return 2


def register(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser("history", help="export coord's committed history as rows")
    hs = h.add_subparsers(dest="history_command", required=True)
    s = hs.add_parser("synth", help="a large realistic history, made by the real state machine")
    s.add_argument("--commands", type=int, default=0,
                   help="raft entries to make (at least, with --sink-rows)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="history directory to write")
    s.add_argument("--sink-rows", type=int, default=0, metavar="N",
                   help="fenced Spark jobs run in the history too (their drivers and tasks "
                   "claim, init producers and publish in coord as a real job does; now "
                   "and then a task is retried, a speculative copy loses, a driver dies) "
                   "until their sink's log holds N rows: it goes to --sink-log, as coord "
                   "history export-sink-log writes one, for coord audit --sink-log")
    s.add_argument("--sink-log", metavar="DIR", help="with --sink-rows: the directory to "
                   "write sink_log.parquet and refusals.parquet in")
    s.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help=FORMAT_HELP)
    s.set_defaults(func=cmd_synth)
    e = hs.add_parser("export", help="the committed history: live from running members "
                      "(--endpoints) or from a stopped member's --data-dir")
    source = e.add_mutually_exclusive_group(required=True)
    source.add_argument("--endpoints",
                        help="client endpoints HOST:PORT,...: a member replays what it retains "
                        "and streams the rows (another takes over if it fails)")
    source.add_argument("--data-dir",
                        help="a stopped member's data dir (opened read-only)")
    e.add_argument("--out", required=True,
                   help="history directory; an existing one is resumed after its last index")
    e.add_argument("--from-revision", type=int, default=0,
                   help="rows from this revision on (default: the oldest retained); a "
                   "compacted revision is refused with the oldest available")
    e.add_argument("--follow", action="store_true",
                   help="with --endpoints: keep exporting entries as they commit, committing "
                   "to --out at least every second; Ctrl-C ends it")
    e.add_argument("--read-only-ok", action="store_true",
                   help="with --endpoints: accept a member cut off from a quorum (its "
                   "committed history, which the majority may have passed): its pages are "
                   "flagged, warned about and recorded in the manifest, and the export moves "
                   "to a member with a quorum once one answers. Default: such a member "
                   "refuses and the export goes to one with a quorum, or stops")
    e.add_argument("--compact-runs", type=int, default=60, metavar="N",
                   help="with --follow: once N small runs (one a second while entries come) "
                   "are committed, rewrite them into one (default 60; 0: never)")
    e.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help=FORMAT_HELP)
    add_tls_flags(e)  # with --endpoints (a --data-dir export refuses them)
    add_user_flags(e)  # with --endpoints, when the cluster has auth on
    e.set_defaults(func=cmd_export)
    k = hs.add_parser("export-sink-log", help="a fenced sink's log of accepted writes "
                      "(appends, seals, publishes) and its refused writes as Parquet, for "
                      "coord audit --sink-log")
    k.add_argument("--sink", required=True, choices=("sqlite", "postgres", "parquet"))
    k.add_argument("--path", help="sqlite: the database file; parquet: the sink directory")
    k.add_argument("--url", help="postgres: a libpq URL or connection string")
    k.add_argument("--table", help="sqlite, postgres: the fenced table")
    k.add_argument("--out", required=True, help="directory to write sink_log.parquet and "
                   "refusals.parquet in")
    k.set_defaults(func=cmd_export_sink_log)
    c = hs.add_parser("compact", help="rewrite a history's small runs into bigger ones "
                      "(one manifest commit; replaced files kept --retain seconds for readers)")
    c.add_argument("out", help="a history directory")
    c.add_argument("--target-rows", type=int, default=None, metavar="N",
                   help="rows per compacted run (default 1,000,000)")
    c.add_argument("--retain", type=float, default=None, metavar="S",
                   help="seconds the replaced files stay for readers that took the old "
                   "manifest (default 3600)")
    c.set_defaults(func=cmd_compact)

    a = sub.add_parser("audit", help="check a history with PySpark and report")
    a.add_argument("history", help="a directory written by coord history export/synth")
    a.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (default), local[2], spark://HOST:7077, ...")
    a.add_argument("--report", help="write index.html, PNG plots and summary.json here")
    a.add_argument("--checks", help="comma-separated checks to run (default: all)")
    a.add_argument("--combined", action="store_true",
                   help="run every check in one Spark job (fewer jobs; no time per check)")
    a.add_argument("--oplog", metavar="F",
                   help="a recorded oplog (JSONL: invoke/ok/fail/info events) whose "
                   "keys are checked for linearizability, one search per key on the executors")
    a.add_argument("--key-time-limit", type=float, default=None, metavar="S",
                   help="seconds the search may spend on one key before it says unknown "
                   "(default 10)")
    a.add_argument("--oplog-budget", type=float, default=None, metavar="S",
                   help="seconds the whole --oplog check may take (from its start; "
                   "executors' clocks assumed in step): keys not decided by then are unknown, "
                   "never guessed (default: no budget)")
    a.add_argument("--sink-log", metavar="DIR",
                   help="a fenced sink's log exported by coord history export-sink-log: "
                   "also check that the sink accepted no write of a fenced attempt, that "
                   "every producer's sequences are gap-free and unrepeated, that each "
                   "publish was of the attempt holding the partition, and, joined with "
                   "the history, that coord granted every token and had not fenced it "
                   "by the time the sink had seen its successor, and that each publish's "
                   "run was the newest when its driver checked")
    a.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, as spark-submit's --conf (repeatable): for "
                   "example spark.driver.memory=4g, the heap of a local master's only JVM")
    a.add_argument("--json", action="store_true", help="print the summary as JSON")
    a.set_defaults(func=cmd_audit)


def _tracked(rows: Iterator[dict], progress: Any, task: Any, done: Callable[[dict], int],
             unit: str) -> Iterator[dict]:
    """`rows`, updating the bar with `done(row)` (how far the rows have got, in `unit`s)
    every 0.2 s and at the end."""
    started, last_shown, row = time.monotonic(), 0.0, None
    for row in rows:
        now = time.monotonic()
        if now - last_shown > 0.2:
            last_shown, completed = now, done(row)
            rate = completed / max(now - started, 1e-9)
            progress.update(task, completed=completed, rate=f"{rate:,.0f} {unit}/s")
        yield row
    if row is not None:
        progress.update(task, completed=done(row))


def _entries_after(first: int) -> Callable[[dict], int]:
    """A history's progress: the entries its rows have got to, after `first`."""
    return lambda row: row["index"] - first


def _write(rows: Iterator[dict], out: str, fmt: str, source: str, total: int,
           done: Callable[[dict], int], what: str, unit: str = "entries",
           figures: Callable[[], dict] = dict, parquet_in_child: bool = False) -> int:
    """Write `rows` into the history `out` under a progress bar of `total` `unit`s
    (`done`: how far a row has got), then print what was written (and `figures()`)."""
    from coord.history.sink import HistoryDirError, HistorySink
    from coord.progress_bars import progress_bar

    try:
        sink = HistorySink(out, fmt, source, parquet_in_child=parquet_in_child)
    except HistoryDirError as exc:
        return _refuse(f"coord history: {exc}")
    started = time.monotonic()
    with sink, progress_bar() as progress:
        task = progress.add_task(what, total=total, rate="")
        written = sink.write(_tracked(rows, progress, task, done, unit))
    seconds = time.monotonic() - started
    print(json.dumps({"out": out, "rows": written.rows, "first_index": written.first_index,
                      "last_index": written.last_index, "last_revision": written.last_revision,
                      "seconds": round(seconds, 3),
                      "rows_per_second": round(written.rows / seconds if seconds else 0),
                      **figures()}))
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from coord.history.sink import read_manifest
    from coord.history.synth import synthesize
    from coord.spark.sink_log_files import LOG_FILE

    if args.commands < (0 if args.sink_rows else 1) or args.sink_rows < 0:
        return _refuse("coord history synth: --commands must be >= 1 (or give --sink-rows), "
                       "--sink-rows >= 0")
    if bool(args.sink_rows) != bool(args.sink_log):
        return _refuse("coord history synth: --sink-rows and --sink-log go together")
    if read_manifest(args.out) is not None:
        return _refuse(f"coord history synth: {args.out} already holds a history; give a new "
                       "--out")
    if args.sink_log and (Path(args.sink_log) / LOG_FILE).exists():
        return _refuse(f"coord history synth: {args.sink_log} already holds a sink log; give a "
                       "new --sink-log")
    source = f"synth commands={args.commands} seed={args.seed}"
    if not args.sink_rows:
        return _write(synthesize(args.commands, args.seed), args.out, args.format, source,
                      args.commands, _entries_after(0), "synth", parquet_in_child=True)
    from coord.spark.synth import SinkLogSynth

    made = SinkLogSynth(args.sink_log, args.sink_rows, args.seed, commands=args.commands)
    return _write(made.rows(), args.out, args.format, f"{source} sink_rows={args.sink_rows}",
                  args.sink_rows, lambda _row: made.log_rows, "synth with a sink log",
                  "sink rows", lambda: {"sink_log": args.sink_log, **made.figures()},
                  parquet_in_child=True)


@command
def cmd_export(args: argparse.Namespace) -> int:
    from coord.history import datadir
    from coord.history.sink import HistoryDirError, read_manifest

    if args.endpoints is not None:
        from coord.cli.history_live import export_live

        return export_live(args)
    if args.read_only_ok:
        return _refuse("coord history export: --read-only-ok needs --endpoints (it is about "
                       "members serving without a quorum)")
    if args.follow:
        return _refuse("coord history export: --follow needs --endpoints (a stopped member's "
                       "history does not grow)")
    if args.tls_cacert or args.tls_cert or args.tls_key:
        return _refuse("coord history export: --cacert, --cert and --key need --endpoints (a "
                       "data dir is read from disk, over no connection)")
    if args.user or args.password:
        return _refuse("coord history export: --user and --password need --endpoints (a "
                       "data dir is read from disk, which the file's owner may read whole)")
    try:
        info = datadir.info(args.data_dir)
        manifest = read_manifest(args.out)
    except (datadir.DataDirError, HistoryDirError) as exc:
        return _refuse(f"coord history export: {exc}")
    after = manifest["last_index"] if manifest else 0
    if after:
        print(f"resuming after index {after} (revision {manifest['last_revision']})",
              file=sys.stderr)
    rows = datadir.read_rows(args.data_dir, after_index=after, from_revision=args.from_revision)
    start = max(after, info.snapshot_index)
    try:
        return _write(rows, args.out, args.format, f"data-dir {args.data_dir} ({info.member})",
                      max(info.commit_index - start, 0), _entries_after(start),
                      f"export {info.member}")
    except datadir.Compacted as exc:
        return _refuse(f"coord history export: {exc} (export into a new --out to start from "
                       "the oldest retained)")
    except datadir.DataDirError as exc:
        return _refuse(f"coord history export: {exc}")


def cmd_compact(args: argparse.Namespace) -> int:
    from coord.history.compact import RETAIN_S, TARGET_ROWS, compact
    from coord.history.sink import HistoryDirError, HistorySink, read_manifest

    target = TARGET_ROWS if args.target_rows is None else args.target_rows
    retain = RETAIN_S if args.retain is None else args.retain
    if target < 2 or retain < 0:
        return _refuse("coord history compact: --target-rows must be >= 2 and --retain >= 0")
    try:
        manifest = read_manifest(args.out)
        if manifest is None:
            raise HistoryDirError(f"{args.out}: not a coord history directory")
        sink = HistorySink(args.out, manifest["format"])
    except HistoryDirError as exc:
        return _refuse(f"coord history compact: {exc}")
    from rich.console import Console

    started, before = time.monotonic(), len(sink.manifest["runs"])
    with sink, Console(stderr=True).status(f"compacting {args.out}"):
        done = compact(sink, target, retain)
    print(json.dumps({"out": args.out, "runs_before": before,
                      "runs_after": len(sink.manifest["runs"]),
                      "files_replaced": sum(d.files for d in done),
                      "files_written": sum(d.into_files for d in done),
                      "rows_rewritten": sum(d.rows for d in done),
                      "retain_s": retain, "seconds": round(time.monotonic() - started, 3)}))
    return 0


def cmd_export_sink_log(args: argparse.Namespace) -> int:
    from coord.spark.sinks import open_sink
    from coord.spark.sinks.log import export_log

    options = {k: v for k, v in (("sink", args.sink), ("path", args.path), ("url", args.url),
                                 ("table", args.table)) if v is not None}
    try:
        sink = open_sink(options)
    except ValueError as exc:
        return _refuse(f"coord history export-sink-log: {exc}")
    try:
        log, refusals = sink.log(), sink.refusals()
    finally:
        sink.close()
    out = export_log(log, args.out, refusals)
    print(json.dumps({"out": str(out), "rows": log.num_rows, "refusals": len(refusals)}))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from coord.history.sink import HistoryDirError, committed_files

    try:
        committed_files(args.history)
    except HistoryDirError as exc:
        return _refuse(f"coord audit: {exc}")
    if args.sink_log is not None and not Path(args.sink_log).is_dir():
        return _refuse(f"coord audit: --sink-log {args.sink_log}: no such directory")
    if args.sink_log is not None:
        from coord.spark.sink_log_files import LOG_FILE, REFUSALS_FILE
        missing = [n for n in (LOG_FILE, REFUSALS_FILE) if not (Path(args.sink_log) / n).is_file()]
        if missing:
            return _refuse(f"coord audit: --sink-log {args.sink_log}: no {' or '.join(missing)}"
                           " (not a finished export of coord history export-sink-log)")
    if args.oplog is not None and not Path(args.oplog).exists():
        return _refuse(f"coord audit: --oplog {args.oplog}: no such file or directory")
    for flag, value in (("--key-time-limit", args.key_time_limit),
                        ("--oplog-budget", args.oplog_budget)):
        if value is not None and not value > 0:
            return _refuse(f"coord audit: {flag} must be positive")
        if value is not None and args.oplog is None:
            return _refuse(f"coord audit: {flag} needs --oplog")
    from coord.audit.spark import parse_conf
    try:
        conf = parse_conf(args.conf)
    except ValueError as exc:
        return _refuse(f"coord audit: {exc}")
    from rich.console import Console

    from coord.audit.job import run_audit
    from coord.audit.spark import session

    console = Console(stderr=True)
    checks = args.checks.split(",") if args.checks else None
    with console.status("starting Spark") as status:
        spark = session(args.master, conf=conf)
        try:
            result = run_audit(spark, args.history, checks=checks, report_dir=args.report,
                               combined=args.combined, oplog=args.oplog,
                               key_time_limit_s=args.key_time_limit,
                               oplog_budget_s=args.oplog_budget,
                               sink_log=args.sink_log, on_step=lambda s: status.update(s))
        except ValueError as exc:
            return _refuse(f"coord audit: {exc}")
        finally:
            spark.stop()
    s = result.summary
    if args.json:
        print(json.dumps({k: v for k, v in s.items() if k != "stats"}, default=str))
    else:
        o = s["overview"]
        print(f"{s['history']}: {o['rows']:,} rows, entries {o['first_index']}..{o['last_index']}"
              f", revisions {o['first_revision']}..{o['last_revision']}, {o['terms']} terms; "
              f"{s['seconds']:.1f} s ({s['rows_per_second']:,.0f} rows/s) on {s['master']}")
        if s["read_only"]:
            r = s["read_only"]
            print(f"  note: the history ends with entries member {r['member']} served without a "
                  f"quorum (to index {r['commit_index']}): the cluster may have committed more")
        for name, c in s["checks"].items():
            mark = "FAIL" if c["violations"] else "ok"
            took = "" if c["seconds"] is None else f"  {c['seconds']:6.2f} s"
            print(f"  {mark:4} {name:36} {c['violations']:>8} violations{took}")
        for v in result.examples:
            print(f"  {v['check']} at index {v['index']} (revision {v['revision']}) "
                  f"{v['subject']}: {v['detail']}")
            for e in v["evidence"] or []:
                print(f"      {e}")
        if "changes" in s:
            from coord.audit.changes import trail_lines

            print("\n".join(trail_lines(s["changes"])))
        if result.report:
            print(f"report: {result.report}")
        if "clients" in s:
            k = s["clients"]
            budget = "" if k["budget_s"] is None else f" (budget {k['budget_s']:g} s)"
            print(f"oplog {k['oplog']}{budget}: {k['keys']} keys: {k['ok']} ok, "
                  f"{k['illegal']} illegal, {k['unknown']} unknown, {k['malformed']} malformed")
            for u in k["undecided"]:
                print(f"  {u['verdict']:9} key {u['key']}: {u['reason']}")
    if result.violations:
        return 1
    return 2 if s.get("clients", {}).get("malformed") else 0
