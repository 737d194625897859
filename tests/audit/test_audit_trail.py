"""`coord audit` reports the audit trail a history holds: each auth and admin change the
real state machine committed (replayed from commands, as a member's export replays its
log), with who made it and when, a refused one included, and the logins per user — in
the summary, the command's lines and the HTML report."""

from __future__ import annotations

import json

import pytest

from coord.audit.changes import changes, describe, trail_lines
from coord.audit.load import load_history
from coord.history.replay import CONF_CHANGE, NORMAL, Replayer
from coord.history.rows import AUTH_COMMANDS, KIND_OF
from coord.history.schema import AUTH_CHANGE_KINDS
from coord.history.sink import HistorySink
from coord.raft import ConfChange, ConfChangeType
from coord.raft.confchange import encode_conf_change
from coord.server.storage.log_format import entry_data
from coord.sm import commands as c
from tests.history.test_rows import SECRET_HASH

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
ENTRIES = [
    c.UserAdd("root", SECRET_HASH), c.UserGrantRole("root", "root"), c.AuthEnable(),
    c.RoleAdd("reader", actor="root"),
    c.RoleGrantPermission("reader", 2, b"a/", b"a0", actor="root"),  # READWRITE
    c.UserAdd("alice", SECRET_HASH, actor="root"),
    c.UserGrantRole("alice", "reader", actor="root"),
    c.Authenticate("alice", "d" * 64), c.Authenticate("alice", "e" * 64),
    c.Put(b"a/1", b"v", actor="alice"),  # a write: not a change of the trail
    c.RoleRevokePermission("reader", b"a/", b"a0", actor="alice"),  # refused: not root
    c.Compact(2, actor="root", native=True), c.SetPidCapacity(70_000, actor="root"),
]


def test_the_trail_kinds_are_the_auth_commands_but_a_login():
    assert set(AUTH_CHANGE_KINDS) == {KIND_OF[t] for t in AUTH_COMMANDS} - {"authenticate"}


def test_the_audit_lists_each_auth_and_admin_change_with_who_made_it(spark, tmp_path):
    replayer, rows = Replayer(), []
    for i, cmd in enumerate(ENTRIES, 1):
        rows += replayer.apply(i, 2, NORMAL, entry_data(T0_MS + i, c.encode_command(cmd)))[0]
    added = ConfChange(ConfChangeType.ADD_LEARNER, 4, json.dumps(
        {"name": "n4", "peer_address": "127.0.0.1:9", "client_address": "", "actor": "root"}
    ).encode())
    rows += replayer.apply(len(ENTRIES) + 1, 2, CONF_CHANGE, encode_conf_change(added))[0]
    HistorySink(tmp_path / "h").write(rows + replayer.flush())

    trail = changes(load_history(spark, tmp_path / "h"))
    assert [(x["index"], x["kind"], x["actor"], x["ok"]) for x in trail["listed"]] == [
        (1, "user_add", None, True), (2, "user_grant_role", None, True),
        (3, "auth_enable", None, True), (4, "role_add", "root", True),
        (5, "role_grant_permission", "root", True), (6, "user_add", "root", True),
        (7, "user_grant_role", "root", True), (11, "role_revoke_permission", "alice", False),
        (12, "compact", "root", True), (13, "set_pid_capacity", "root", True),
        (14, "conf_change", "root", True)]
    assert trail["count"] == 11
    assert trail["by_actor"] == {"(none)": 3, "alice": 1, "root": 7}
    assert trail["logins"] == {"alice": 2}

    lines = trail_lines(trail, shown=8)
    assert lines[0] == ("auth and admin changes: 11 (by actor: (none) 3, alice 1, root 7); "
                        "logins: alice 2")
    assert lines[5] == ("  index 5 at 2026-01-01T00:00:00Z: role_grant_permission by root "
                        "role='reader' perm='READWRITE' key='a/' range_end='a0'")
    assert lines[8] == ("  index 11 at 2026-01-01T00:00:00Z: role_revoke_permission by alice "
                        "role='reader' key='a/' range_end='a0' refused (PERMISSION_DENIED)")
    assert lines[-1] == "  ... 3 more (--report or --json lists the first 200)"
    assert describe(trail["listed"][-1]) == "conf_change by root mode='add_learner' member='n4'"
