"""The fence rule a sink applies (coord.client.recipes.fence), on planted zombie writes."""

from __future__ import annotations

from coord.client.recipes.fence import FenceRow, Token, judge, refused
from coord.client.recipes.sequence import (
    ACCEPT,
    DUPLICATE_SEQUENCE,
    FENCED_GENERATION,
    OUT_OF_ORDER_SEQUENCE,
)

OLD = Token(generation=1, pid=7, epoch=0)
NEW = Token(generation=2, pid=7, epoch=1)


def test_a_first_write_must_be_sequence_zero():
    assert judge(None, OLD, 0) == ACCEPT
    assert judge(None, OLD, 1) == OUT_OF_ORDER_SEQUENCE


def test_same_attempt_sequence_rules():
    row = FenceRow(1, 7, 0, last_sequence=3)
    assert judge(row, OLD, 4) == ACCEPT
    assert judge(row, OLD, 3) == DUPLICATE_SEQUENCE
    assert judge(row, OLD, 6) == OUT_OF_ORDER_SEQUENCE


def test_a_newer_attempt_restarts_at_zero_and_the_zombie_is_refused():
    row = FenceRow(1, 7, 0, last_sequence=3)
    assert judge(row, NEW, 0) == ACCEPT
    assert judge(row, NEW, 4) == OUT_OF_ORDER_SEQUENCE
    taken = FenceRow(2, 7, 1, last_sequence=0)
    for seq in (0, 1, 4, 5):  # whatever the zombie sends next
        assert judge(taken, OLD, seq) == FENCED_GENERATION


def test_both_fields_must_not_go_back():
    row = FenceRow(2, 7, 1, last_sequence=5)
    # an older ownership generation with a newer epoch: refused
    assert judge(row, Token(1, 7, 9), 0) == FENCED_GENERATION
    # a newer ownership generation that did not bump the epoch: refused
    assert judge(row, Token(3, 7, 1), 6) == FENCED_GENERATION
    assert judge(row, Token(3, 7, 0), 0) == FENCED_GENERATION


def test_a_new_pid_needs_a_newer_ownership_generation():
    row = FenceRow(2, 7, 1, last_sequence=5)
    assert judge(row, Token(2, 8, 0), 0) == FENCED_GENERATION
    assert judge(row, Token(3, 8, 0), 0) == ACCEPT


def test_refused_is_everything_but_accept_and_duplicate():
    assert not refused(ACCEPT) and not refused(DUPLICATE_SEQUENCE)
    assert refused(FENCED_GENERATION) and refused(OUT_OF_ORDER_SEQUENCE)
