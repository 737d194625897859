"""`coord history export --endpoints`: the live export's command line. What the export
does (commits, compactions, resumes, moves between members) is coord.history.live_export;
here are its arguments, its progress bar, why it stopped (stderr and the exit code: Ctrl-C
is 0 when following, else 130) and its summary (JSON on stdout). Over TLS with `--cacert
--cert --key` (or $COORD_CACERT...), as every client command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from coord.cli.client_commands.command import UsageError, login_of, tls_of
from coord.client.history import HistoryPage
from coord.client.sync import Client


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def export_live(args: argparse.Namespace) -> int:
    from coord.client.endpoints import parse_endpoints
    from coord.client.errors import CompactedError, CoordError
    from coord.history.live_export import LiveExport
    from coord.history.sink import HistoryDirError, HistorySink
    from coord.progress_bars import progress_bar

    if args.compact_runs < 0 or args.compact_runs == 1:
        _say("coord history export: --compact-runs must be 0 (never) or >= 2")
        return 2
    try:
        endpoints = parse_endpoints(args.endpoints)
        tls, login = tls_of(args), login_of(args)
        sink = HistorySink(args.out, args.format, f"live {','.join(endpoints)}")
    except (ValueError, HistoryDirError, UsageError) as exc:
        _say(f"coord history export: {exc}")
        return 2
    after = sink.last_index
    if after:
        _say(f"resuming after index {after} (revision {sink.manifest['last_revision']})")
    started = time.monotonic()
    code = 0
    with sink, Client(endpoints, read_only_ok=args.read_only_ok,  # the first listed first
                      randomize_endpoints=False, tls=tls, **login) as client, \
            progress_bar() as progress:
        task = progress.add_task("export", total=None, rate="")
        export = LiveExport(sink, client, lambda m: progress.console.print(m, soft_wrap=True),
                            from_revision=args.from_revision, follow=args.follow,
                            compact_runs=args.compact_runs)

        def show(page: HistoryPage) -> None:
            start = max(after, page.snapshot_index)
            rate = export.rows_seen / max(time.monotonic() - started, 1e-9)
            progress.update(task, total=max(page.commit_index - start, 1),
                            completed=page.replayed_index - start,
                            rate=f"{page.member}: {rate:,.0f} rows/s")

        try:
            export.run(show)
        except KeyboardInterrupt:
            code = 0 if args.follow else 130
        except CompactedError as exc:
            oldest = exc.metadata.get("oldest_revision", "?")
            _say(f"coord history export: {exc.message}; to start there, export into a new "
                 f"--out (with --from-revision {oldest})")
            code = 2
        except CoordError as exc:
            hint = ("; no member with a quorum answered: --read-only-ok exports what a member "
                    "without one has committed (flagged stale)"
                    if exc.reason == "NO_QUORUM" and not args.read_only_ok else "")
            _say(f"coord history export: {exc}{hint}")
            code = 1
        stale = export.read_only.current
        if stale is not None:
            export.say(
                f"[bold yellow]warning:[/] the export ends with entries served by member "
                f"{stale['member']} without a quorum (to index {stale['commit_index']}): the "
                "cluster may have committed more; export again into this --out (it resumes) "
                "once a member with a quorum answers")
    seconds = time.monotonic() - started
    print(json.dumps({"out": args.out, "rows": export.rows,
                      "first_index": export.first_index,
                      "last_index": sink.last_index,
                      "last_revision": sink.manifest["last_revision"],
                      "seconds": round(seconds, 3),
                      "rows_per_second": round(export.rows / seconds if seconds else 0),
                      "read_only": export.read_only.episodes,
                      "stale": stale is not None}))
    return code
