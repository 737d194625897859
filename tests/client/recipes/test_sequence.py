"""The sink-side sequence validator (coord.client.recipes.sequence)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coord.client.recipes.sequence import (
    ACCEPT,
    DUPLICATE_SEQUENCE,
    FENCED_GENERATION,
    OUT_OF_ORDER_SEQUENCE,
    SequenceValidator,
)


def test_first_sequence_must_be_zero_at_any_generation():
    v = SequenceValidator()
    assert v.check(7, 0, 1234, 1) == OUT_OF_ORDER_SEQUENCE
    assert len(v) == 0  # a refusal records nothing
    assert v.check(7, 0, 1234, 0) == ACCEPT
    assert v.highwater(7, 0) == (1234, 0)


def test_accepts_exactly_highwater_plus_one():
    v = SequenceValidator()
    assert [v.check(1, 0, 5, s) for s in (0, 1, 2)] == [ACCEPT] * 3
    assert v.check(1, 0, 5, 2) == DUPLICATE_SEQUENCE
    assert v.check(1, 0, 5, 0) == DUPLICATE_SEQUENCE
    assert v.check(1, 0, 5, 4) == OUT_OF_ORDER_SEQUENCE
    assert v.check(1, 0, 5, 3) == ACCEPT


def test_partitions_and_pids_are_independent():
    v = SequenceValidator()
    assert v.check(1, 0, 0, 0) == ACCEPT
    assert v.check(1, 1, 0, 0) == ACCEPT
    assert v.check(2, 0, 0, 0) == ACCEPT
    assert v.check(1, 1, 0, 1) == ACCEPT
    assert v.highwater(1, 0) == (0, 0) and v.highwater(1, 1) == (0, 1)


def test_generation_equal_or_one_greater_and_a_bump_fences_the_old_one():
    v = SequenceValidator()
    v.check(1, 0, 3, 0)
    v.check(1, 0, 3, 1)
    # the restarted producer resumes its sequence with generation + 1
    assert v.check(1, 0, 4, 1) == DUPLICATE_SEQUENCE  # already stored
    assert v.check(1, 0, 4, 2) == ACCEPT
    assert v.highwater(1, 0) == (4, 2)
    assert v.check(1, 0, 3, 3) == FENCED_GENERATION  # the zombie
    assert v.check(1, 0, 3, 1) == FENCED_GENERATION  # fenced beats duplicate
    assert v.check(1, 0, 6, 3) == FENCED_GENERATION  # more than one ahead
    assert v.check(1, 0, 4, 3) == ACCEPT


def test_out_of_order_new_generation_does_not_fence():
    v = SequenceValidator()
    v.check(1, 0, 0, 0)
    assert v.check(1, 0, 1, 5) == OUT_OF_ORDER_SEQUENCE
    assert v.check(1, 0, 0, 1) == ACCEPT  # the old generation is still current


def test_pid_zero_is_not_tracked():
    v = SequenceValidator()
    assert v.check(0, 0, 0, 17) == ACCEPT and v.check(0, 0, 0, 17) == ACCEPT
    assert len(v) == 0


def test_bad_arguments_raise():
    v = SequenceValidator()
    for args in ((-1, 0, 0, 0), (1, -1, 0, 0), (1, 0, -1, 0), (1, 0, 0, -1), (1, 0, 0, True)):
        with pytest.raises(ValueError):
            v.check(*args)


def test_snapshot_restore_and_garbage():
    v = SequenceValidator()
    for pid in (3, 1, 2):
        v.check(pid, pid % 2, 9, 0)
        v.check(pid, pid % 2, 9, 1)
    snap = v.snapshot()
    w = SequenceValidator()
    w.restore(snap)
    assert w.snapshot() == snap and w.check(1, 1, 9, 2) == ACCEPT
    # the same state built in another order gives the same bytes
    u = SequenceValidator()
    for pid in (1, 2, 3):
        u.check(pid, pid % 2, 9, 0)
        u.check(pid, pid % 2, 9, 1)
    assert u.snapshot() == snap
    for bad in (b"", b"XXXX" + snap[4:], snap[:-1], snap + b"\0"):
        with pytest.raises(ValueError):
            w.restore(bad)
    assert w.highwater(1, 1) == (9, 2)  # untouched by failed restores


def model_verdict(stored: tuple[int, int] | None, gen: int, seq: int, restart: bool) -> str:
    """The rules written out plainly: (generation, high water) stored -> verdict."""
    if stored is None or (restart and gen > stored[0]):
        return ACCEPT if seq == 0 else OUT_OF_ORDER_SEQUENCE
    if gen < stored[0] or gen > stored[0] + 1:
        return FENCED_GENERATION
    if seq <= stored[1]:
        return DUPLICATE_SEQUENCE
    return ACCEPT if seq == stored[1] + 1 else OUT_OF_ORDER_SEQUENCE


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.integers(0, 1), st.integers(0, 3),
                          st.integers(0, 6)), max_size=60))
def test_matches_a_simple_model(writes):
    v = SequenceValidator()
    model: dict[tuple[int, int], tuple[int, int]] = {}
    for pid, part, gen, seq in writes:
        expected = model_verdict(model.get((pid, part)), gen, seq, restart=False)
        if expected == ACCEPT:
            model[(pid, part)] = (gen, seq)
        assert v.check(pid, part, gen, seq) == expected
    # accepted sequences per (pid, partition) are exactly 0, 1, 2, ...
    restored = SequenceValidator()
    restored.restore(v.snapshot())
    assert {k: restored.highwater(*k) for k in model} == model


def test_restart_policy_new_generation_starts_at_zero_and_fences_the_old():
    v = SequenceValidator(restart_on_new_generation=True)
    assert [v.check(1, 0, 3, s) for s in (0, 1, 2)] == [ACCEPT] * 3
    assert v.check(1, 0, 7, 3) == OUT_OF_ORDER_SEQUENCE  # a new instance must start at 0
    assert v.highwater(1, 0) == (3, 2)  # and the refusal changed nothing
    assert v.check(1, 0, 7, 0) == ACCEPT  # any higher generation, not just +1
    assert v.highwater(1, 0) == (7, 0)
    assert v.check(1, 0, 3, 3) == FENCED_GENERATION  # the zombie's next write
    assert v.check(1, 0, 6, 0) == FENCED_GENERATION
    assert v.check(1, 0, 7, 0) == DUPLICATE_SEQUENCE
    assert v.check(1, 0, 7, 1) == ACCEPT


def test_remember_loads_state_kept_elsewhere():
    v = SequenceValidator(restart_on_new_generation=True)
    v.remember(5, 2, 4, 9)
    assert v.highwater(5, 2) == (4, 9)
    assert v.check(5, 2, 4, 10) == ACCEPT
    assert v.check(5, 2, 3, 11) == FENCED_GENERATION
    for args in ((0, 0, 0, 0), (1, -1, 0, 0), (1, 0, 0, -2)):
        with pytest.raises(ValueError):
            v.remember(*args)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=60))
def test_restart_policy_matches_a_simple_model(writes):
    v = SequenceValidator(restart_on_new_generation=True)
    stored: tuple[int, int] | None = None
    for gen, seq in writes:
        expected = model_verdict(stored, gen, seq, restart=True)
        if expected == ACCEPT:
            stored = (gen, seq)
        assert v.check(9, 0, gen, seq) == expected
    assert v.highwater(9, 0) == stored
