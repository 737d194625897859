"""The differential test against real etcd (Debian's etcd-server 3.4): the same seeded
sequences against one etcd and one coord member, every answer compared
(coord.testing.etcd_diff.run). CI runs the first 150 seeds and the first 20 auth seeds
(they cover every auth call and caller);
`make diff SEEDS=1000` runs more of both."""

from __future__ import annotations

import pytest

from coord.testing.etcd_diff.auth import _ADMIN_METHODS, auth_sequence
from coord.testing.etcd_diff.generate import sequence
from coord.testing.etcd_diff.play import Revisions
from coord.testing.etcd_diff.run import (
    Difference,
    compare,
    initial_difference,
    run,
    systems,
)
from tests.etcdtools import require

SEEDS = range(150)
AUTH_SEEDS = range(20)


def test_sequences_are_a_pure_function_of_the_seed_and_cover_every_operation():
    assert sequence(7) == sequence(7) and sequence(7) != sequence(8)
    kinds = {s.kind for seed in SEEDS for s in sequence(seed)}
    assert kinds == {"put", "range", "delete", "txn", "compact", "grant", "revoke", "ttl",
                     "leases", "watch", "cancel"}
    assert all(10 <= len(sequence(seed)) <= 30 for seed in SEEDS)


def test_the_first_differing_answer_is_reported_with_its_step():
    steps = sequence(3)
    same = [("0:" + steps[0].kind, {"rev": 1}), ("watch 0 (id 0) events", [])]
    assert compare(3, steps, same, list(same)) is None
    other = [same[0], ("watch 0 (id 0) events", [{"kv": {}}])]
    diff = compare(3, steps, same, other)
    assert isinstance(diff, Difference) and diff.label == "watch 0 (id 0) events"
    assert "seed 3" in str(diff) and "--seeds 3:4" in str(diff)
    assert compare(3, steps, same, same[:1]).coord is None  # a missing answer differs too


def test_revisions_are_compared_exactly_relative_to_the_start():
    """No revision is skipped on either side: coord moves the revision for exactly what
    etcd does (a lease grant, or a revoke that deletes no keys, moves neither)."""
    revs = Revisions(base=10)
    assert [revs.relative(r) for r in (0, 10, 11, 12, 15)] == [0, 0, 1, 2, 5]
    assert [revs.real(v) for v in (0, 1, 2, 5)] == [0, 11, 12, 15]


class _AtRevision:
    """A system whose empty store is at `revision` (the initial check's planted input)."""

    def __init__(self, revision: int) -> None:
        self._revision = revision

    def revision(self) -> int:
        return self._revision


def test_the_initial_revisions_are_compared_as_they_are():
    """Relative revisions cannot see where a store starts: etcd's empty store is at 1,
    and a coord at 0 made `etcdctl elect` wait forever on a fresh cluster."""
    assert initial_difference(_AtRevision(1), _AtRevision(1)) is None  # type: ignore[arg-type]
    diff = initial_difference(_AtRevision(1), _AtRevision(0))  # type: ignore[arg-type]
    assert diff is not None and (diff.label, diff.etcd, diff.coord) == ("initial revision", 1, 0)
    assert str(diff).startswith("before any seed: initial revision")


@pytest.mark.cluster
@pytest.mark.etcd
def test_coord_answers_every_seeded_sequence_as_etcd_does():
    require("etcd")
    with systems() as (etcd, coord):
        found = run(SEEDS, etcd, coord, stop_after=3)
    assert not found, "\n".join(map(str, found))


def test_auth_sequences_are_a_pure_function_of_the_seed_and_cover_every_auth_call():
    assert auth_sequence(7) == auth_sequence(7) and auth_sequence(7) != auth_sequence(8)
    steps = [s for seed in AUTH_SEEDS for s in auth_sequence(seed)]
    assert {s.kind for s in steps} == {"auth", "login", "put", "range", "delete", "txn",
                                       "watch_as", "grant", "revoke", "hash", "alarms"}
    assert {type(s.req) for s in steps if s.kind == "auth"} == set(_ADMIN_METHODS)
    assert {s.caller for s in steps} == {"", "?", "root", "ann", "bob", "cid"}
    txns = [s.req for s in steps if s.kind == "txn"]
    assert not any(op.HasField("request_txn") for t in txns for op in (*t.success, *t.failure))


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.etcd
def test_coord_answers_every_seeded_auth_sequence_as_etcd_does():
    """Users, roles, permissions, auth on and off, and calls as each user: the same
    status codes and messages as etcd 3.4's."""
    require("etcd")
    with systems() as (etcd, coord):
        found = run(AUTH_SEEDS, etcd, coord, stop_after=3, auth=True)
    assert not found, "\n".join(map(str, found))
