"""Where the revision starts: at 1 on an empty machine, as etcd's empty store (its first
write lands at 2, and etcd clients depend on it); a log or snapshot written when coord
began at 0 keeps the revisions its clients were given."""

from __future__ import annotations

import base64
import zlib

import pytest

from coord.sm import canonical_json
from coord.sm import commands as c
from coord.sm.commands import Claim
from coord.sm.ledger import INITIAL_REVISION, LOG_VERSION, initial_revision
from coord.sm.machine import CoordMachine

# The snapshot of a machine built by coord before this change (coord/sm at main cafa083,
# where an empty machine was at revision 0), after OLD_COMMANDS below: made by running
# those commands through that code and printing base64(snapshot()).
OLD_SNAPSHOT = base64.b64decode(
    "eJy1lF9vmzAQwL/LPfMAJKVtpD5U3TpRLduqbW1WhJADR+rGYGabJCTKd9+ZJC1IzTRNipGQfb4/vzv7vAEmmCo0"
    "jKLYgVTIdJ7Ylee6Q1rLMuczGG1ALktUyTPXRqomEbzgBkbB2dkgcKDiWZKyiqXcND2h4DkaXmDrcRC4djig8HeN"
    "2iTTxiDJg3PPvbgIhm8bb7681mTrQC5VwSii58B8YXlSWZCSSRQuuOayhJHrHISYwShnQqMDe2DKbnMwVMgMduys"
    "SyQN+HV/dQUOFDLr72rUdp7wrA2yYKJGUh/v1Beo9pqEWZFhYuOUtRA2oY4b01TW7NvPH7B1jtL4rzSzd2j8Po33"
    "nzT+v9L8vTaD47WZ9Wn8Ls2Jz6DH100ztndHt1fhlIme9FBjSlAgy6gXS2lIJyIYoMx6/Xm0QXCBpbEliGBGjhU4"
    "Hn3UejPFSgOxdd960s+8OqjR/6AY02hbW9sQBKJx/3KUuDJJteevlMzqlLzs9hSmFNbOt51FBJK8EtT1fXUeFg9N"
    "Wlw24YvkIV/y6ePDOvVvy6fvYRDyUIflncgKsWaPlzXpLD/f3K2fJl/a9cQXc5KtSOZmn1b5dDLmX18+Lscfrpe5"
    "rWAcd2/F8LXcbRItuOX2u/IospfO8tkna/eY2DlVaPsHopCydw==")
OLD_COMMANDS = [  # (command, leader time_ms): revisions 1..4 in the old numbering
    (c.OpenSession("s", 10_000, request_id="o"), 1_000),
    (c.Put(b"a", b"1"), 1_001),
    (c.Put(b"b", b"1", session_id=1), 1_002),
    (c.Put(b"a", b"2"), 1_003),
    (c.Own(1, "g", (Claim("r", 0),)), 1_004),
]


def test_an_empty_machine_is_at_1_and_its_first_write_at_2():
    m = CoordMachine()
    assert m.revision == INITIAL_REVISION == 1
    empty = m.execute(c.Range(b"\0", b"\0"))
    assert empty.ok and empty.revision == 1 and empty.kvs == ()
    put = m.execute(c.Put(b"k", b"v"))
    assert put.revision == 2 and m.kv.get(b"k").create_revision == 2


def test_a_snapshot_taken_before_the_change_restores_its_own_revisions():
    m = CoordMachine()
    m.restore(OLD_SNAPSHOT)
    assert m.revision == 4
    a = m.execute(c.Range(b"a")).kvs[0]
    assert (a.value, a.create_revision, a.mod_revision) == (b"2", 1, 3)
    owner = m.execute(c.GetOwner("g", "r"))
    assert (owner.owner, owner.generation, owner.owner_revision) == (1, 1, 4)
    assert m.execute(c.Put(b"c", b"1")).revision == 5  # it goes on from its own revision


def _state(machine: CoordMachine) -> dict:
    """A machine's snapshot as data, with each remembered answer decoded: the old code
    remembered them as JSON, this code writes most of them packed (`coord.sm.packed`)."""
    state = canonical_json.loads(zlib.decompress(machine.snapshot()))
    state["recent"] = [[rid, tag, c.decode_result(base64.b64decode(data))]
                       for rid, tag, data in state["recent"]]
    return state


def test_a_log_begun_under_version_1_replays_as_the_old_code_applied_it():
    """The same commands from revision 0 give the old code's state: what this code makes
    of the old code's snapshot (which lacks only what was added since, the elapsed clock,
    restored from the snapshot's leader clock), the remembered answers decoding alike."""
    m = CoordMachine()
    m.start_at(initial_revision(None))
    for cmd, time_ms in OLD_COMMANDS:
        assert m.execute(cmd, time_ms).ok
    old = CoordMachine()
    old.restore(OLD_SNAPSHOT)
    assert m.revision == 4 and _state(m) == _state(old)
    assert _state(m)["recent"] and _state(m)["recent"][0][2].session_id == 1
    new = CoordMachine()
    for cmd, time_ms in OLD_COMMANDS:
        new.execute(cmd, time_ms)
    assert new.revision == 5 and new.snapshot() != OLD_SNAPSHOT


def test_log_versions_name_their_initial_revision():
    assert initial_revision(None) == 0  # data stamped before versions: version 1
    assert initial_revision(1) == 0
    assert initial_revision(2) == initial_revision(LOG_VERSION) == INITIAL_REVISION


def test_start_at_only_on_an_empty_machine():
    m = CoordMachine()
    m.start_at(1)  # where it already is: nothing to do
    m.execute(c.OpenSession("s", 10_000))  # a change that leaves the revision at 1
    with pytest.raises(RuntimeError):
        m.start_at(0)
    restored = CoordMachine()
    restored.restore(OLD_SNAPSHOT)
    with pytest.raises(RuntimeError):
        restored.start_at(0)
    assert restored.revision == 4
