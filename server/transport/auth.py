"""Who a member is to its peers, and how it checks who they are.

Every call on the peer port (forwarded requests) carries ``coord-from`` (sender id),
``coord-cluster`` (cluster id) and ``coord-auth`` = hex
HMAC-SHA256(cluster_secret, f"{cluster_id}:{from_id}:{to_id}"); a Raft connection
carries the same three in its first frame (`raft_pb2.PeerHello`). A call from another
cluster is refused with PERMISSION_DENIED, a bad or missing MAC with UNAUTHENTICATED.
The MAC names both ends, so a token overheard on its way to one member is no good to
another. One `PeerAuth` per member serves the transport and the forward service alike.
"""

from __future__ import annotations

import hashlib
import hmac
import logging

import grpc

__all__ = ["MD_AUTH", "MD_CLUSTER", "MD_FROM", "PeerAuth", "auth_token"]

log = logging.getLogger(__name__)

MD_FROM = "coord-from"
MD_CLUSTER = "coord-cluster"
MD_AUTH = "coord-auth"


def auth_token(cluster_secret: bytes, cluster_id: int, from_id: int, to_id: int) -> str:
    """The ``coord-auth`` value a call from `from_id` to `to_id` must carry."""
    msg = f"{cluster_id}:{from_id}:{to_id}".encode()
    return hmac.new(cluster_secret, msg, hashlib.sha256).hexdigest()


class PeerAuth:
    """This member's credentials (`metadata_for`) and its check of a caller's
    (`authenticate`)."""

    def __init__(self, node_id: int, cluster_secret: bytes, cluster_id: int) -> None:
        if node_id <= 0:
            raise ValueError("node_id must be positive")
        if not cluster_secret:
            raise ValueError("cluster_secret must not be empty")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._secret = bytes(cluster_secret)

    def token_for(self, to_id: int) -> str:
        """The MAC of a call from this member to member `to_id`."""
        return auth_token(self._secret, self.cluster_id, self.node_id, to_id)

    def metadata_for(self, to_id: int) -> tuple[tuple[str, str], ...]:
        """Credentials for a call from this member to member `to_id`."""
        return (
            (MD_FROM, str(self.node_id)),
            (MD_CLUSTER, str(self.cluster_id)),
            (MD_AUTH, self.token_for(to_id)),
        )

    def check(self, from_id: int, cluster_id: int, token: str) -> tuple[str, str] | None:
        """None if `token` proves a call from `from_id` in our cluster to us; otherwise
        (gRPC status code name, reason) to refuse it with."""
        if cluster_id != self.cluster_id:
            return ("PERMISSION_DENIED",
                    f"message for cluster {cluster_id} received by cluster {self.cluster_id}")
        expected = auth_token(self._secret, self.cluster_id, from_id, self.node_id)
        if from_id <= 0 or not hmac.compare_digest(
            expected.encode(), token.encode("utf-8", "replace")
        ):
            log.warning("refused a call claiming to be from %d: bad cluster secret", from_id)
            return ("UNAUTHENTICATED", "bad cluster secret")
        return None

    async def authenticate(self, context: grpc.aio.ServicerContext) -> int:
        """Return the calling member's id, or abort the RPC."""
        md: dict[str, str] = {}
        for key, value in context.invocation_metadata() or ():
            if isinstance(value, str):
                md[key] = value
        try:
            from_id = int(md[MD_FROM])
            cluster_id = int(md[MD_CLUSTER])
            token = md[MD_AUTH]
        except (KeyError, ValueError):
            from_id, cluster_id, token = 0, self.cluster_id, ""  # refused below
        refusal = self.check(from_id, cluster_id, token)
        if refusal is not None:
            await context.abort(grpc.StatusCode[refusal[0]], refusal[1])
        return from_id
