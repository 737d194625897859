"""History rows: what the real state machine did, per entry, in the versioned schema."""

from __future__ import annotations

from pathlib import Path

from coord.history.replay import NORMAL, Replayer
from coord.history.schema import COLUMNS, KINDS, markdown_table
from coord.history.synth import synthesize
from coord.server.storage.log_format import entry_data
from coord.sm import commands as c
from coord.sm.records import Claim

ROOT = Path(__file__).resolve().parents[2]


def test_a_takeover_is_a_command_row_and_the_effects_the_machine_reported():
    r = Replayer()
    entries = [c.OpenSession("a", 5_000), c.OpenSession("b", 5_000),
               c.Own(1, "orders", (Claim("p0", 1),)), c.Own(2, "orders", (Claim("p0", 1),)),
               c.NoteLeader("n2"), c.Own(1, "orders", (Claim("p0", 1),))]
    rows = []
    for i, cmd in enumerate(entries, 1):
        rows += r.apply(i, 3, NORMAL, entry_data(1_000 + i, c.encode_command(cmd)))[0]
    assert [(x["index"], x["seq"], x["kind"]) for x in rows] == [
        (1, 0, "open_session"), (2, 0, "open_session"), (3, 0, "own"), (3, 1, "owner.grant"),
        (4, 0, "own"), (4, 1, "session.severed"), (4, 2, "owner.grant"),
        (5, 0, "note_leader"), (6, 0, "own")]
    takeover = [x for x in rows if x["index"] == 4]
    # from revision 1 (an empty machine's): the first claim at 2, the takeover at 3
    assert takeover[0]["revision"] == 3 and takeover[0]["ok"] and takeover[0]["generation"] == 2
    assert takeover[1]["session"] == 1 and takeover[1]["owner"] == 2
    assert takeover[2] == {**takeover[2], "owner": 2, "generation": 2, "revision": 3}
    # n2 named itself at index 5: the term's rows before the note wait for it
    assert {x["leader"] for x in rows} == {"n2"}
    refused = rows[-1]  # session 1 was severed: the machine refused its claim
    assert not refused["ok"] and refused["error"] == "UNKNOWN_SESSION"
    assert all(x["time_ms"] == 1_000 + x["index"] for x in rows)


def test_a_term_without_a_note_goes_out_without_a_leader_when_the_next_term_begins():
    r = Replayer()
    put = entry_data(1_000, c.encode_command(c.Put(b"k", b"v")))
    assert r.apply(1, 1, NORMAL, put)[0] == []  # term 1's leader may still name itself
    released = r.apply(2, 2, NORMAL, put)[0]  # term 2 began: term 1 had no note
    assert [(x["index"], x["leader"]) for x in released if x["seq"] == 0] == [(1, None)]
    note = entry_data(1_001, c.encode_command(c.NoteLeader("n3", 2)))
    rows = r.apply(3, 2, NORMAL, note)[0]
    assert [(x["index"], x["leader"]) for x in rows if x["seq"] == 0] == [(2, "n3"), (3, "n3")]


def test_entries_must_come_in_order_without_gaps():
    r = Replayer()
    r.apply(1, 1, NORMAL, b"")
    try:
        r.apply(3, 1, NORMAL, b"")
    except ValueError as exc:
        assert "does not follow entry 1" in str(exc)
    else:
        raise AssertionError("a gap was accepted")


def test_undecodable_entries_are_rows_too():
    r = Replayer()
    rows, result = r.apply(1, 1, NORMAL, entry_data(5, b"\x01\xffgarbage"))
    assert rows == []  # its term's leader has not named itself yet
    rows = r.flush()
    assert rows[0]["kind"] == "undecodable" and rows[0]["error"] == "INVALID_ARGUMENT"


def test_synth_is_deterministic_and_covers_every_behaviour():
    a = list(synthesize(6_000, seed=7))
    assert a == list(synthesize(6_000, seed=7))
    assert a != list(synthesize(6_000, seed=8))
    assert max(x["index"] for x in a) == 6_000
    kinds = {x["kind"] for x in a}
    for kind in ("owner.grant", "owner.sever", "owner.expire", "owner.reset", "session.expired",
                 "session.severed", "allocate_pid_block", "lease_pid", "init_producer",
                 "kv.put", "kv.delete", "note_leader", "noop", "conf_change"):
        assert kind in kinds, kind
    assert kinds <= set(KINDS)
    assert {x.get("error") for x in a} >= {"OWNED_BY_HIGHER_GENERATION"}  # stale claims refused
    names = {n for n, _, _ in COLUMNS}
    assert all(set(x) <= names for x in a)


def test_synth_has_quorum_losses_with_a_long_enough_history():
    rows = synthesize(45_000, seed=1)
    assert any(x["kind"] == "note_quorum_lost" for x in rows)


def test_every_command_the_machine_knows_has_a_kind_in_the_schema():
    from coord.history.rows import KIND_OF

    assert set(KIND_OF.values()) <= set(KINDS)


def test_the_manual_documents_this_schema_version():
    page = (ROOT / "docs/manual/reference/history-schema.md").read_text()
    assert markdown_table() in page


SECRET_HASH = "scrypt$16384$8$1$" + "c2FsdHNhbHRzYWx0c2FsdA==" + "$" + "aA" * 22


def test_auth_changes_are_rows_with_who_and_what_but_never_a_password():
    r = Replayer()
    secret_hash = SECRET_HASH
    entries = [c.UserAdd("root", secret_hash), c.UserGrantRole("root", "root"), c.AuthEnable(),
               c.RoleAdd("reader", actor="root"),
               c.RoleGrantPermission("reader", 2, b"a", b"\0", actor="root"),
               c.UserAdd("alice", secret_hash, actor="root"),
               c.UserGrantRole("alice", "reader", actor="root"),
               c.Authenticate("alice", "d" * 64), c.Put(b"a", b"v", actor="alice"),
               c.RoleRevokePermission("reader", b"a", b"\0", actor="alice")]
    rows = []
    for i, cmd in enumerate(entries, 1):
        rows += r.apply(i, 3, NORMAL, entry_data(1_000 + i, c.encode_command(cmd)))[0]
    rows += r.flush()
    got = [(x["kind"], x.get("actor"), x.get("user"), x.get("role"), x.get("perm"),
            x.get("key"), x.get("range_end"), x["ok"]) for x in rows if x["seq"] == 0]
    assert got == [
        ("user_add", None, "root", None, None, None, None, True),
        ("user_grant_role", None, "root", "root", None, None, None, True),
        ("auth_enable", None, None, None, None, None, None, True),
        ("role_add", "root", None, "reader", None, None, None, True),
        ("role_grant_permission", "root", None, "reader", "READWRITE", "a", "\x00", True),
        ("user_add", "root", "alice", None, None, None, None, True),
        ("user_grant_role", "root", "alice", "reader", None, None, None, True),
        ("authenticate", None, "alice", None, None, None, None, True),
        ("put", "alice", None, None, None, "a", None, True),
        ("role_revoke_permission", "alice", None, "reader", None, "a", "\x00", False),
    ]
    assert rows[-1]["error"] == "PERMISSION_DENIED"
    text = repr(rows)
    assert secret_hash not in text and "d" * 64 not in text
    names = {n for n, _, _ in COLUMNS}
    assert all(set(x) <= names for x in rows)
