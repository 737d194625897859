"""The node's members as the log says them: who is in the cluster, the peer address of
every member it has heard of, and the transport pointed at each of them.

Its own module because membership changes by one path (a committed conf change, or a
snapshot's member list) that the driver only passes on, and everything else asks it
questions (who leads, what a member is called): it owns the members and the peer
addresses, and tells the transport as they change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from coord.raft import NONE, ConfChange, ConfChangeType
from coord.server import log_lines
from coord.server.node.members import MemberInfo
from coord.server.storage.log_format import members_header
from coord.server.transport.peer import PeerTransport

log = logging.getLogger(__name__)


class Membership:
    """The members (`members`: in the cluster) and the addresses known (of members, and
    of the initial cluster's before the log names them)."""

    def __init__(
        self, me: MemberInfo, initial_cluster: list[MemberInfo], transport: PeerTransport
    ) -> None:
        self._me = me
        self._transport = transport
        self.members: dict[int, MemberInfo] = {}
        self._known_addresses = {m.id: m for m in initial_cluster}
        self._peer_addresses: dict[int, str] = {}

    def apply(self, cc: ConfChange) -> None:
        """A committed conf change: add or remove the member, and its peer."""
        if cc.type is ConfChangeType.REMOVE_NODE:
            gone = self.members.pop(cc.node_id, None)
            log.info(
                "%s: member %s removed",
                self._me.name,
                gone.name if gone is not None else f"{cc.node_id:x}",
                extra=log_lines.event(log_lines.MEMBER),
            )
            self._known_addresses.pop(cc.node_id, None)
            if self._peer_addresses.pop(cc.node_id, None) is not None:
                self._transport.remove_peer(cc.node_id)
            return
        info = (
            MemberInfo.decode(cc.context) if cc.context else self._known_addresses.get(cc.node_id)
        )
        if info is None:
            return
        log.info(
            "%s: member %s added as a %s (peers on %s)",
            self._me.name,
            info.name,
            "learner" if cc.type is ConfChangeType.ADD_LEARNER else "voter",
            info.peer_address,
            extra=log_lines.event(log_lines.MEMBER),
        )
        self.members[cc.node_id] = info
        self._known_addresses[cc.node_id] = info
        self.sync_peers()

    def sync_peers(self) -> None:
        """Point the transport at every member we know an address for."""
        for m in self._known_addresses.values():
            if m.id != self._me.id and self._peer_addresses.get(m.id) != m.peer_address:
                self._peer_addresses[m.id] = m.peer_address
                self._transport.set_peer(m.id, m.peer_address)

    def header(self) -> bytes:
        """The members as a snapshot's file starts with them."""
        return members_header(m.encode() for _, m in sorted(self.members.items()))

    def restore(self, records: Iterable[bytes]) -> None:
        """The members a snapshot's file starts with, in place of those held."""
        self.members = {}
        for info in map(MemberInfo.decode, records):
            self.members[info.id] = self._known_addresses[info.id] = info

    def name_of(self, node: int) -> str:
        m = self.members.get(node) or self._known_addresses.get(node)
        return m.name if m else ("" if node == NONE else f"{node:x}")
