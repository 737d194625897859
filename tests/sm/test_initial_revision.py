"""Where the revision starts: at 1 on an empty machine, as etcd's empty store (its first
write lands at 2, and etcd clients depend on it)."""

from __future__ import annotations

from coord.sm import commands as c
from coord.sm.ledger import INITIAL_REVISION
from coord.sm.machine import CoordMachine


def test_an_empty_machine_is_at_1_and_its_first_write_at_2():
    m = CoordMachine()
    assert m.revision == INITIAL_REVISION == 1
    empty = m.execute(c.Range(b"\0", b"\0"))
    assert empty.ok and empty.revision == 1 and empty.kvs == ()
    put = m.execute(c.Put(b"k", b"v"))
    assert put.revision == 2 and m.kv.get(b"k").create_revision == 2
