"""The differential test: the same seeded etcd operation sequences against real etcd
(Debian's etcd-server, 3.4, one member) and a one-member coord, every answer compared.

    python -m coord.testing.etcd_diff --seeds 0:1000      # or: make diff SEEDS=1000
    python -m coord.testing.etcd_diff --seeds 417:418 -v  # one seed again, with its transcript
    python -m coord.testing.etcd_diff --auth --seeds 200    # auth sequences (etcd_diff.auth)

Each system is started once per run; sequences take turns (both systems play the same
sequence at once, each on its own thread). A difference prints the seed, the step and
both answers; any difference not written down as a divergence is a bug in coord.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format

from coord.testing import LocalCluster
from coord.testing.etcd_diff.auth import AuthPlayer, auth_sequence
from coord.testing.etcd_diff.generate import Step, sequence
from coord.testing.etcd_diff.play import Player, System, play
from coord.testing.peer_etcd import EtcdCluster


@dataclass
class Difference:
    seed: int | None  # None: before any seed (the initial revision)
    label: str  # "index:kind" of the step, or what part of the watch report
    step: Step | None
    etcd: Any
    coord: Any
    auth: bool = False  # of an auth sequence

    def __str__(self) -> str:
        req = "" if self.step is None or self.step.req is None else \
            text_format.MessageToString(self.step.req, as_one_line=True)
        if self.seed is None:
            return (f"before any seed: {self.label}\n  etcd:  {self.etcd!r}\n"
                    f"  coord: {self.coord!r}")
        return (f"seed {self.seed}: {self.label} {req}\n  etcd:  {self.etcd!r}\n"
                f"  coord: {self.coord!r}\n  rerun: python -m coord.testing.etcd_diff "
                f"{'--auth ' if self.auth else ''}--seeds {self.seed}:{self.seed + 1} -v")


def compare(seed: int, steps: list[Step], etcd: list, coord: list) -> Difference | None:
    """The first answer that differs (transcripts are (label, answer) lists)."""
    for i in range(max(len(etcd), len(coord))):
        a = etcd[i] if i < len(etcd) else ("(nothing)", None)
        b = coord[i] if i < len(coord) else ("(nothing)", None)
        if a != b:
            head = a[0].split(":", 1)[0]
            step = steps[int(head)] if head.isdigit() else None
            label = a[0] if a[0] == b[0] else f"{a[0]} / {b[0]}"
            return Difference(seed, label, step, a[1], b[1])
    return None


def initial_difference(etcd: System, coord: System) -> Difference | None:
    """The empty stores' revisions, compared as they are (the sequences compare revisions
    relative to each system's start): etcd's empty store is at 1, its first write at 2,
    and etcd's own clients depend on it (an election's campaign waits forever at 0)."""
    a, b = etcd.revision(), coord.revision()
    return None if a == b else Difference(None, "initial revision", None, a, b)


def run_seed(etcd: System, coord: System, seed: int, pool: ThreadPoolExecutor,
             verbose: bool = False, auth: bool = False) -> Difference | None:
    steps = auth_sequence(seed) if auth else sequence(seed)
    player: type[Player] = AuthPlayer if auth else Player
    a = pool.submit(play, etcd, seed, steps, player)
    b = pool.submit(play, coord, seed, steps, player)
    etcd_t, coord_t = a.result()[1], b.result()[1]
    if verbose:
        for (label, x), (_, y) in zip(etcd_t, coord_t, strict=False):
            print(f"{label}\n  etcd:  {x!r}\n  coord: {y!r}")
    diff = compare(seed, steps, etcd_t, coord_t)
    if diff is not None:
        diff.auth = auth
    return diff


@contextmanager
def systems() -> Iterator[tuple[System, System]]:
    """A one-member etcd and a one-member coord on loopback, for the whole run."""
    with EtcdCluster(1) as e, LocalCluster(1) as c:
        etcd = System("etcd", e.endpoints[0])
        coord = System("coord", c.etcd_endpoints[0])
        try:
            yield etcd, coord
        finally:
            etcd.close()
            coord.close()


def run(seeds: range, etcd: System, coord: System, verbose: bool = False,
        progress: int = 0, stop_after: int = 10, auth: bool = False) -> list[Difference]:
    """Every seed in `seeds` (auth sequences with `auth`), on systems nothing was written
    to yet (as `systems` gives them): first their initial revisions, then each seed; the
    differences (at most `stop_after`)."""
    found = [d for d in [initial_difference(etcd, coord)] if d is not None]
    for diff in found:
        print(diff, flush=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        for n, seed in enumerate(seeds, 1):
            diff = run_seed(etcd, coord, seed, pool, verbose, auth)
            if diff is not None:
                found.append(diff)
                print(diff, flush=True)
                if len(found) >= stop_after:
                    break
            if progress and n % progress == 0:
                print(f"{n}/{len(seeds)} sequences, {len(found)} differences, "
                      f"{time.monotonic() - t0:.1f} s", flush=True)
    return found


def parse_seeds(text: str) -> range:
    """"N" (seeds 0..N-1) or "A:B" (A..B-1)."""
    lo, _, hi = text.rpartition(":")
    return range(int(lo) if lo else 0, int(hi))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coord.testing.etcd_diff", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=parse_seeds, default=range(1000),
                    help="N or A:B (default 1000)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every answer")
    ap.add_argument("--stop-after", type=int, default=10, help="differences before stopping")
    ap.add_argument("--auth", action="store_true",
                    help="auth sequences: users, roles, permissions, calls as users")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with systems() as (etcd, coord):
        ready = time.monotonic()
        found = run(args.seeds, etcd, coord, args.verbose, progress=100,
                    stop_after=args.stop_after, auth=args.auth)
    took = time.monotonic() - ready
    print(f"{len(args.seeds)} seeds ({args.seeds.start}..{args.seeds.stop - 1}): "
          f"{len(found)} differences; sequences took {took:.1f} s "
          f"(start-up {ready - t0:.1f} s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
