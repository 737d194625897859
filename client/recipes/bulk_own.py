"""Bulk own: a session claims more resources than one command should carry (the cluster
refuses one of more than 100,000) in commands of at most `batch` claims, in order.

Each command is all or none, but together they are not: a refused one stops the rest,
and the resources claimed before it stay the session's. The caller learns how far it
got (`BulkOwn.claimed`) and decides: `coord own` reports it and, holding its own
session, releases them on exit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from coord.client.errors import CoordError

C = TypeVar("C")  # a claim: whatever `own` takes a list of
R = TypeVar("R")  # what one command returns (an OwnResult)


@dataclass(slots=True)
class BulkOwn(Generic[R]):
    results: list[R] = field(default_factory=list)  # one per granted command, in order
    claimed: int = 0  # the claims those commands carried
    refused: CoordError | None = None  # the refusal that stopped the rest, if one did


def own_in_batches(own: Callable[[list[C]], R], claims: Sequence[C], batch: int = 0,
                   progress: Callable[[int], None] | None = None) -> BulkOwn[R]:
    """`own(batch)` for each run of at most `batch` claims (0: all in one command), in
    order, `progress(n)` after each granted one; a refusal stops there (not raised: it is
    in the result beside what was granted before it)."""
    if batch < 0:
        raise ValueError(f"batch must be 0 (one command) or more, not {batch}")
    size = batch or len(claims)
    done: BulkOwn[R] = BulkOwn()
    for first in range(0, len(claims), size):
        chunk = list(claims[first:first + size])
        try:
            done.results.append(own(chunk))
        except CoordError as e:
            done.refused = e
            break
        done.claimed += len(chunk)
        if progress is not None:
            progress(len(chunk))
    return done
