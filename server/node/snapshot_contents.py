"""What a member's snapshot holds — the members (`members_header`), then the state
machine's bytes — and the ways a member makes one or takes one in: captured from the
running state, restored at start-up, installed from a leader, seeded from a backup.

Its own module so the format has one writer and one reader beside each other, apart
from when snapshots are taken (snapshots.py) and from the driver that calls for them.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor

from coord.raft import NONE, ConfState, HardState, Snapshot, SnapshotMeta
from coord.server import log_lines
from coord.server.node.members import MemberInfo
from coord.server.node.membership import Membership
from coord.server.node.statemachine import StateMachine
from coord.server.snapshot_file import SnapshotFile, SnapshotWriter
from coord.server.storage.log_format import members_header, split_snapshot
from coord.server.storage.log_store import LogStore

log = logging.getLogger(__name__)


def seed_from_state(
    store: LogStore, initial_cluster: list[MemberInfo], state: Iterable[bytes]
) -> None:
    """Make an empty store start from a backup of the state machine (`state`, as its
    snapshot() gives it, a block at a time: a backup is as big as the state, and is
    never held whole) in a new cluster of `initial_cluster`: a snapshot at the index the
    bootstrap entries would end at, term 1, every member a voter. Every member seeded from
    the same backup holds the same log, so they elect a leader and go on from there
    (etcd's `snapshot restore`). ValueError if the store holds anything."""
    st = store.load()
    if st.entries or not st.snapshot.is_empty or st.hard_state != HardState():
        raise ValueError(f"{store.path} already holds a log: restore into an empty data dir")
    members = {m.id: m for m in initial_cluster}
    index = len(members)
    meta = SnapshotMeta(index, 1, ConfState(voters=frozenset(members)))
    writer = SnapshotWriter(store.snap_dir, index)
    try:
        writer.write(members_header(m.encode() for _, m in sorted(members.items())))
        for block in state:
            writer.write(block)
        store.save(HardState(1, NONE, index), [], Snapshot(meta, writer.done()))
    except BaseException:
        writer.discard()
        raise


def capture(membership: Membership, sm: StateMachine) -> Iterator[bytes]:
    """The members and the state machine as they are now; the bytes come later."""
    return itertools.chain((membership.header(),), sm.capture())


def restore(snap: Snapshot, membership: Membership, sm: StateMachine) -> None:
    """Start-up's restore, on the loop: the member serves nothing before it is done."""
    sm.restore(_restore_members(snap, membership))


async def install(
    name: str, snap: Snapshot, membership: Membership, sm: StateMachine, io: Executor
) -> None:
    """A leader's snapshot (`name`: this member's, for the log): the state machine's part
    is decoded in the storage thread (`io`) into a machine of its own (`restored`: 21 s
    at 1M keys, when on the loop it stopped the member answering anything, Status
    included), while the loop goes on serving from the state it has; the new state then
    replaces it in one step here. Nothing else touches the machine meanwhile: the driver
    awaits this Ready, so no entry is applied and no snapshot captured (one being taken
    was discarded) until then. The state's bytes are read from the snapshot's file there
    too, a block at a time."""
    started = time.monotonic()
    log.info(
        "%s: restoring a snapshot of %d bytes at index %d", name, len(snap.data), snap.meta.index
    )
    data = _restore_members(snap, membership)
    loop = asyncio.get_running_loop()
    sm.adopt(await loop.run_in_executor(io, sm.restored, data))
    log.info(
        "%s: restored a snapshot of %d bytes at index %d in %.2fs",
        name,
        len(snap.data),
        snap.meta.index,
        time.monotonic() - started,
        extra=log_lines.event(log_lines.SNAPSHOT_INSTALL),
    )


def _restore_members(snap: Snapshot, membership: Membership) -> Iterator[bytes]:
    """Take the members from the start of `snap`'s file; the state machine's bytes
    follow, read as they are asked for."""
    assert isinstance(snap.data, SnapshotFile), "a member's snapshot is a file"
    records, state = split_snapshot(snap.data)
    membership.restore(records)
    return state
