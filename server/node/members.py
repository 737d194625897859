"""Who is in the cluster: member ids derived from names, the --initial-cluster syntax,
and the member record carried in conf-change entries and snapshots."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class MemberInfo:
    name: str
    peer_address: str
    client_address: str = ""

    @property
    def id(self) -> int:
        return member_id(self.name)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    def change_context(self, actor: str = "") -> bytes:
        """A membership change's context: this record and, while auth is on, the user who
        asked for the change, for the history's audit trail (`decode` reads the record
        alone; a removal's context is read by the history only)."""
        fields = asdict(self) | ({"actor": actor} if actor else {})
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> MemberInfo:
        fields = json.loads(data)
        return cls(fields["name"], fields["peer_address"], fields["client_address"])


@functools.lru_cache(maxsize=1024)
def member_id(name: str) -> int:
    """A stable, nonzero 63-bit id for a member name (ids never change for a name).
    Remembered: every etcd response header names its member (`MemberInfo.id`), and a
    SHA-256 per answer was a share of a lone put's CPU."""
    value = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") & (2**63 - 1)
    return value or 1


def cluster_id(token: str) -> int:
    """The cluster's id, from --initial-cluster-token: the same for members that bootstrap
    the cluster and members that join it later (it is persisted at first start)."""
    return int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "big") & (2**63 - 1)


def validate_address(address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad address {address!r}: expected HOST:PORT")
    return address


def parse_initial_cluster(text: str) -> list[MemberInfo]:
    """`n1=127.0.0.1:7001,n2=127.0.0.1:7002` → members (peer addresses)."""
    members: list[MemberInfo] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, address = part.partition("=")
        if not sep or not name:
            raise ValueError(f"bad --initial-cluster entry {part!r}: expected NAME=HOST:PORT")
        members.append(MemberInfo(name, validate_address(address)))
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise ValueError("--initial-cluster names a member twice")
    if not members:
        raise ValueError("--initial-cluster is empty")
    return members
