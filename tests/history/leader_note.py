"""Waiting for a leader's note before a test reads its history."""

from __future__ import annotations

import time

import pytest

from coord.client import Client


def wait_for_the_leader_note(client: Client) -> None:
    """A leader names itself right after its election (server/upkeep/leader_note.py), but
    a client's first writes can still commit before the note: rows exported then carry
    no leader, while an offline read once the note is in the log has it. Wait until
    every row has one."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = [r for p in client.export_history() for r in p.rows]
        if rows and all(r.get("leader") for r in rows):
            return
        time.sleep(0.05)
    pytest.fail("the leader did not name itself within 10 s")
