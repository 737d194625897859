"""Ownership: `coord own`, `release`, `owners` and `watch-owners`.

`coord own` with many resources (a bulk own) takes names from a file as well as the
command line (a shell cannot pass a hundred thousand arguments) and, with --batch,
claims them in commands of at most N (coord.client.recipes.bulk_own), with a progress bar
for a person at a terminal. Without --batch the claim is one command, all or none."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from coord.cli.client_commands.command import (
    EXIT_ERROR,
    Interrupt,
    UsageError,
    add_command,
    client,
    command,
    nonneg,
    watch_loop,
)
from coord.cli.client_commands.output import emit, jsonable
from coord.cli.tables import print_table
from coord.client.calls import BARE_CLAIM_GENERATION
from coord.client.recipes.bulk_own import own_in_batches
from coord.client.session_state import describe_end
from coord.progress_bars import Phases, on_terminal

BAR_FROM = 1_000  # resources from which a terminal gets a bar


def resource_args(names: list[str], source: str | None) -> list[str]:
    """The RESOURCE[=GENERATION] arguments and the lines of `source` (a file, '-' for
    stdin; blank lines skipped)."""
    out = list(names)
    if source:
        if source == "-":
            out += [line.strip() for line in sys.stdin if line.strip()]
        else:
            with open(source, encoding="utf-8") as f:
                out += [line.strip() for line in f if line.strip()]
    return out


def resource_claim(s: str) -> tuple[str, int]:
    """RESOURCE or RESOURCE=GENERATION."""
    name, sep, gen = s.rpartition("=")
    if sep and name and gen.isdigit():
        return name, int(gen)
    return s, BARE_CLAIM_GENERATION


def _own_all(own: Callable[[list[Any]], Any], claims: list[Any], args: argparse.Namespace,
             show: Callable[[list[Any]], None]) -> None:
    """Every claim through `own`, in --batch commands under a bar, then `show(results)`
    (after the bar: a terminal gets the grants below it). A refused command stops the
    rest: what was granted before is shown, the refusal says how far it got, and is
    raised."""
    shown = on_terminal(args) and len(claims) >= BAR_FROM
    with Phases(shown) as phases, phases.phase(
            f"own {len(claims):,} in {args.group}", total=len(claims), unit="claims") as step:
        done = own_in_batches(own, claims, args.batch, step)
    show(done.results)
    if done.refused is not None:
        if done.claimed:
            kept = "they stay held" if args.session else "the session releases them"
            print(f"coord: {done.claimed:,} of {len(claims):,} resources were claimed, in "
                  f"{len(done.results)} command(s), before this one was refused; {kept}",
                  file=sys.stderr)
        raise done.refused


def _grant_lines(result: Any) -> list[str]:
    out = [f"granted {g.resource} generation {g.generation} revision {g.revision}"
           for g in result.grants]
    out += [f"severed session {s}" for s in result.severed]
    return out


@command
def cmd_own(args: argparse.Namespace) -> int:
    """Claim resources; without --session, open one and hold it until Ctrl-C."""
    names = resource_args(args.resources, args.resources_from)
    if not names:
        raise UsageError("no resources: name them, or give --resources-from FILE")
    if args.batch < 0:
        raise UsageError(f"--batch must be 1 or more (0, the default: one command), not "
                         f"{args.batch}")
    claims = [resource_claim(r) for r in names]
    with client(args) as c:
        if args.session:
            def granted(results: list[Any]) -> None:
                for result in results:
                    emit(args, result, lambda result=result: _grant_lines(result))
            _own_all(lambda batch: c.own(args.session, args.group, batch), claims, args,
                     granted)
            return 0
        with Interrupt() as stop:
            session = c.session(name=args.name, ttl=args.ttl, on_severed=lambda ev: stop.set())

            def held(results: list[Any]) -> None:
                if args.json:
                    for result in results:
                        print(json.dumps({"session_id": session.id, **jsonable(result)}),
                              flush=True)
                    return
                print(f"session {session.id}", flush=True)
                for result in results:
                    for line in _grant_lines(result):
                        print(line, flush=True)
            try:
                _own_all(lambda batch: session.own(args.group, batch), claims, args, held)
                if not args.json:
                    print(f"holding (ttl {session.ttl:g}s); Ctrl-C releases", flush=True)
                stop.wait()
            finally:
                ended = session.ended
                session.close()
        if ended is not None:
            print(f"coord: {ended.type.upper()}: {describe_end(ended)}", file=sys.stderr)
            return EXIT_ERROR
        if not args.json:
            print(f"released (session {session.id} closed)", flush=True)
        return 0


@command
def cmd_release(args: argparse.Namespace) -> int:
    """Release resources held by a session."""
    with client(args) as c:
        result = c.release(args.session, args.group, args.resources)
        emit(args, result, lambda: [f"released {r}" for r in result.released])
    return 0


def _owner_line(o: Any) -> str:
    who = "free" if o.session_id == 0 else f"session {o.session_id}"
    return f"{o.resource}  {who}  generation {o.generation}  revision {o.revision}"


@command
def cmd_owners(args: argparse.Namespace) -> int:
    """One resource's owner, or every owner in a group (under --prefix)."""
    with client(args) as c:
        if args.resource:
            owner = c.get_owner(args.group, args.resource, serializable=args.serializable)
            emit(args, owner, lambda: [_owner_line(owner)])
        else:
            owners = c.list_owners(args.group, args.prefix, serializable=args.serializable)
            if args.json:
                emit(args, owners, lambda: [])
            else:
                print_table(("RESOURCE", "SESSION", "GENERATION", "REVISION"),
                            ((o.resource, o.session_id, o.generation, o.revision)
                             for o in owners),
                            caption=f"{len(owners)} owned in {args.group}")
    return 0


@command
def cmd_watch_owners(args: argparse.Namespace) -> int:
    """Current owners (or, with --from-revision, every change since then), then every
    change, one line each."""
    with client(args) as c:
        stream = c.watch_owners(args.group, args.prefix, from_revision=args.from_revision)
        return watch_loop(args, stream, lambda ch: f"MODE  {ch.mode}" if ch.mode else (
            f"{'SNAPSHOT' if ch.snapshot else 'CHANGE ' + ch.kind}  "
            f"{ch.group}/{_owner_line(ch.owner)}"))


def register(sub: Any) -> None:
    p = add_command(sub, "own", cmd_own,
                    "claim resources in a group (without --session: open a session, hold "
                    "until Ctrl-C, then release)")
    p.add_argument("group")
    p.add_argument("resources", nargs="*", metavar="RESOURCE[=GENERATION]",
                   help="a bare name claims at generation 1 (takes a free resource at its last"
                        " generation + 1); =0 takes over whatever the owner's generation")
    p.add_argument("--resources-from", metavar="FILE",
                   help="more resources, one RESOURCE[=GENERATION] a line ('-': stdin)")
    p.add_argument("--batch", type=int, default=0, metavar="N",
                   help="claim in commands of at most N resources, each all or none (a "
                        "refused one stops the rest; those before stay held); default: one "
                        "command for all. A terminal shows a progress bar from 1,000")
    p.add_argument("--session", type=int, default=0, help="claim for this existing session")
    p.add_argument("--ttl", type=float, default=10.0, help="TTL of the session opened here")
    p.add_argument("--name", default="coord-cli", help="name of the session opened here")

    p = add_command(sub, "release", cmd_release, "release resources held by a session")
    p.add_argument("group")
    p.add_argument("resources", nargs="+", metavar="RESOURCE")
    p.add_argument("--session", type=int, required=True)

    p = add_command(sub, "owners", cmd_owners,
                    "show the owner of a resource or list a group's owners")
    p.add_argument("group")
    p.add_argument("resource", nargs="?")
    p.add_argument("--prefix", default="", help="only resources starting with this")
    p.add_argument("--serializable", action="store_true",
                   help="read the answering member's state (no quorum round; may be stale)")

    p = add_command(sub, "watch-owners", cmd_watch_owners,
                    "print current owners, then each ownership change, until Ctrl-C")
    p.add_argument("group")
    p.add_argument("--prefix", default="")
    p.add_argument("--from-revision", type=nonneg, default=0,
                   help="replay every change from this revision, then follow (0: list current "
                   "owners first); fails with COMPACTED if that history was compacted")
    p.add_argument("--limit", type=nonneg, default=0, help="stop after N lines")
