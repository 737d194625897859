"""`coord status`'s table (coord.cli.status), from a member's row without a server."""

from __future__ import annotations

from coord.cli.status import table_rows


def test_status_table_counts_a_members_local_sessions():
    row = {"endpoint": "e", "name": "n3", "role": "follower", "term": 2, "leader_name": "",
           "commit_index": 5, "applied_index": 5, "has_quorum": False,
           "quorum_lost_ms": 1500, "mode": "read-only", "local_sessions": 2}
    assert table_rows([row])[0][-1].plain == "read-only, 2 local session(s)"
    assert table_rows([{**row, "local_sessions": 0}])[0][-1].plain == "read-only"
