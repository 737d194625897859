"""A member's start: the Raft core opened on what its store holds (a new cluster's first
member writes the bootstrap entries first), and a new cluster's first election brought
forward once enough peers are reached.

Its own module because both run once, at the start, and the driver's loop only asks
whether the first election still waits.
"""

from __future__ import annotations

from coord.raft import NONE, Config, HardState, RawNode, Snapshot, bootstrap_entries
from coord.raft.quorum import quorum_size
from coord.server.node.members import MemberInfo
from coord.server.storage.log_store import LogStore
from coord.server.transport.peer import PeerTransport


def open_core(
    store: LogStore, config: Config, initial_cluster: list[MemberInfo], join: bool
) -> tuple[RawNode, Snapshot, bool]:
    """The core on what `store` holds; the snapshot it starts from; and whether this is a
    new cluster's first start (no log, not joining: the bootstrap entries written)."""
    st = store.load()
    fresh = not st.entries and st.snapshot.is_empty and st.hard_state == HardState()
    hard, entries = st.hard_state, st.entries
    if fresh and not join:
        ordered = sorted(initial_cluster, key=lambda m: m.id)
        entries = bootstrap_entries([m.id for m in ordered], {m.id: m.encode() for m in ordered})
        hard = HardState(1, NONE, len(entries))
        store.save(hard, entries)
    return RawNode(config, hard, st.snapshot, entries), st.snapshot, fresh and not join


class FirstElection:
    """A new cluster has no leader to wait for: once this member reaches enough peers
    for a quorum, it starts one tick short of the election timeout, so the first
    election waits only for its random part (etcd's initial election tick advance).
    Not before: a vote asked of peers not yet connected is lost, and costs a round."""

    def __init__(self, raw: RawNode, transport: PeerTransport, waiting: bool) -> None:
        self._raw = raw
        self._transport = transport
        self.waiting = waiting  # until the first election is advanced, or not needed

    def advance(self) -> None:
        raw = self._raw
        if not raw.awaiting_first_election():
            self.waiting = False
            return
        reached = 1 + sum(1 for s in self._transport.stats().values() if s["connected"])
        if reached >= quorum_size(raw.conf_state.voters):
            self.waiting = False
            raw.tick_to_election()
