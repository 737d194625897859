"""`coord own` with many resources (a bulk own): names from a file as well as the command
line (a shell cannot pass a hundred thousand arguments), claimed in commands of at most
`--batch` resources, with a progress bar for a person at a terminal.

Without --batch the claim is one command, all or none, as ever (the cluster refuses one
of more than 100,000 resources). With it, each command is all or none but together they
are not: a refused one stops the rest, and the resources claimed before it stay the
session's (the message says how many).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from coord.client.errors import CoordError
from coord.progress import Phases, on_terminal

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


def own_in_batches(own: Callable[[list[Any]], Any], claims: list[Any],
                   args: argparse.Namespace, emit: Callable[[list[Any]], None]) -> None:
    """`own(batch)` for each batch of at most `args.batch` claims (0: one batch), in
    order, then `emit(results)` (after the bar: a terminal gets the grants below it). A
    refused batch stops the rest: what was granted before is emitted, the refusal says
    how far it got, and is raised."""
    size = args.batch or len(claims)
    shown = on_terminal(args) and len(claims) >= BAR_FROM
    results: list[Any] = []
    refused: CoordError | None = None
    done = 0
    with Phases("own", shown) as phases, phases.phase(
            f"own {len(claims):,} in {args.group}", total=len(claims), unit="claims") as step:
        for first in range(0, len(claims), size):
            batch = claims[first:first + size]
            try:
                results.append(own(batch))
            except CoordError as e:
                refused = e
                break
            done += len(batch)
            step(len(batch))
    emit(results)
    if refused is not None:
        if done:
            kept = "they stay held" if args.session else "the session releases them"
            print(f"coord: {done:,} of {len(claims):,} resources were claimed, in "
                  f"{len(results)} command(s), before this one was refused; {kept}",
                  file=sys.stderr)
        raise refused
