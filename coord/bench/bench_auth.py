"""A benchmark's cluster with authentication on, for what auth costs (`coord bench etcd
--auth`): a root user (auth needs one), and a `bench` user that is not root — root skips
every permission check, an ordinary user's calls are each checked — granted what the
benchmark's calls touch and no more; and channels whose calls carry its token, as an
etcd client's do. Set up through etcd's Auth service, as etcdctl would."""

from __future__ import annotations

import grpc

from coord.client.keys import prefix_end
from coord.etcdpb import auth_pb2
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as erpc

USER, PASSWORD = "bench", "bench-password"
ROLE = "bench"
READWRITE, WRITE = auth_pb2.Permission.READWRITE, auth_pb2.Permission.WRITE
GRANTS = (("", READWRITE, b"bench/"),  # puts and gets (kind "" is etcd's keys)
          ("", READWRITE, b"claims-"),  # the etcd API's claims (a Txn per key)
          ("group", WRITE, b"claims-"),  # the native own per claim
          ("session", WRITE, b"bench-"))  # the session that owns them
TIMEOUT_S = 10.0


def enable_auth(endpoint: str) -> None:
    """Add root and the bench user with its grants, then turn auth on (plaintext)."""
    with grpc.insecure_channel(endpoint) as ch:
        auth = erpc.AuthStub(ch)
        for method, request in (
                ("UserAdd", pb.AuthUserAddRequest(name="root", password="root-password")),
                ("RoleAdd", pb.AuthRoleAddRequest(name="root")),
                ("UserGrantRole", pb.AuthUserGrantRoleRequest(user="root", role="root")),
                ("UserAdd", pb.AuthUserAddRequest(name=USER, password=PASSWORD)),
                ("RoleAdd", pb.AuthRoleAddRequest(name=ROLE)),
                ("UserGrantRole", pb.AuthUserGrantRoleRequest(user=USER, role=ROLE)),
                *(("RoleGrantPermission", pb.AuthRoleGrantPermissionRequest(
                    name=ROLE, perm=auth_pb2.Permission(
                        permType=perm, key=prefix, range_end=prefix_end(prefix),
                        coord_kind=kind))) for kind, perm, prefix in GRANTS),
                ("AuthEnable", pb.AuthEnableRequest())):
            getattr(auth, method)(request, timeout=TIMEOUT_S)


def log_in(endpoint: str) -> str:
    """The bench user's token from the member at `endpoint`."""
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.AuthStub(ch).Authenticate(
            pb.AuthenticateRequest(name=USER, password=PASSWORD), timeout=TIMEOUT_S).token


class _WithToken(grpc.aio.UnaryUnaryClientInterceptor):
    """Every unary call carries the token (the benchmarks' calls are all unary)."""

    def __init__(self, token: str) -> None:
        self.metadata = (("token", token),)

    async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[override]
        return await continuation(details._replace(metadata=self.metadata), request)


def token_channel(endpoint: str, token: str) -> grpc.aio.Channel:
    """A plaintext asyncio channel whose calls are made as the token's user."""
    return grpc.aio.insecure_channel(endpoint, interceptors=[_WithToken(token)])
