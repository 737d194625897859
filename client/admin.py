"""A small synchronous client for the Admin service (status, log operations)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Literal

import grpc

from coord.client.auth import Login
from coord.client.errors import UnavailableError, from_rpc_error
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.tls.credentials import channel, channel_credentials
from coord.tls.files import TLS, client_tls
from coord.v1 import admin_pb2, admin_pb2_grpc


class AdminClient:
    """`tls`, `user`, `password`, `token`: as `Client`'s (None: the environment's TLS;
    no login). It logs in once, on its first call that changes something."""

    def __init__(self, endpoint: str, timeout: float = 2.0,
                 tls: TLS | Literal[False] | None = None, *, user: str | None = None,
                 password: str | None = None, token: str | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.tls = client_tls(tls)
        self.login = Login.of(user, password, token)
        self._channel = channel(
            endpoint, channel_credentials(self.tls) if self.tls is not None else None)
        self._stub = admin_pb2_grpc.AdminStub(self._channel)

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        login = self.login
        if login is None:
            return ()
        if not login.token:
            auth = etcd_grpc.AuthStub(self._channel)
            login.token = auth.Authenticate(login.request(), timeout=self.timeout).token
        return login.metadata()

    def status(self) -> admin_pb2.StatusResponse:
        return self._stub.Status(admin_pb2.StatusRequest(), timeout=self.timeout)

    def propose(self, data: bytes, timeout: float | None = None) -> admin_pb2.ProposeResponse:
        return self._stub.Propose(
            admin_pb2.ProposeRequest(data=data), timeout=timeout or self.timeout,
            metadata=self._metadata())

    def read_index(self) -> int:
        return self._stub.ReadIndex(admin_pb2.ReadIndexRequest(), timeout=self.timeout).index

    def transfer_leader(self, to_name: str, timeout: float = 10.0) -> int:
        req = admin_pb2.TransferLeaderRequest(to_name=to_name)
        return self._stub.TransferLeader(req, timeout=timeout,
                                         metadata=self._metadata()).leader_id

    def add_member(
        self, name: str, peer_address: str, learner: bool = False
    ) -> admin_pb2.MembershipResponse:
        req = admin_pb2.AddMemberRequest(name=name, peer_address=peer_address, learner=learner)
        return self._stub.AddMember(req, timeout=15.0, metadata=self._metadata())

    def remove_member(self, name: str) -> admin_pb2.MembershipResponse:
        return self._stub.RemoveMember(admin_pb2.RemoveMemberRequest(name=name), timeout=15.0,
                                       metadata=self._metadata())

    def watch_status(self, timeout: float | None = None) -> Iterator[admin_pb2.StatusEvent]:
        """The member's status events as they happen (a server stream)."""
        return self._stub.WatchStatus(admin_pb2.WatchStatusRequest(), timeout=timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def propose_to_leader(endpoints: Sequence[str], data: bytes, timeout: float = 10.0,
                      tls: TLS | Literal[False] | None = None, **login: str | None) -> bytes:
    """Commit one encoded command through `Admin.Propose` on whichever member leads, and
    return its encoded result: for cluster settings that have no API of their own
    (`coord pid capacity`). Members that do not lead or cannot be reached are passed
    over, pass after pass, until `timeout`; give the command a request id, so that a
    try whose answer was lost is not applied twice. UnavailableError if none led."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        for endpoint in endpoints:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                with AdminClient(endpoint, timeout=min(left, 5.0), tls=tls, **login) as admin:
                    return admin.propose(data).result
            except grpc.RpcError as e:
                last = from_rpc_error(e)
                if not (isinstance(last, UnavailableError)
                        or last.code is grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise last from None
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    raise UnavailableError("NO_LEADER", f"no member led within {timeout:g}s ({last})")
