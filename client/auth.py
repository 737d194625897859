"""Who a client's calls are made as, when the cluster has authentication on.

A member's client port serves etcd's Auth service beside coord's own, and one login
serves both APIs: the client logs in with etcd's Authenticate (a user and its password)
and sends the token it gets as the `token` call metadata, as etcd's clients do. A
token lives on each member while it is used (etcd's --auth-token-ttl); a member that
does not know it answers INVALID_AUTH_TOKEN, and a client that has the password logs in
again and retries once. A token given as it is cannot be renewed. Without a login, a
client certificate's common name is the user (`tls=`, and `--client-cert-auth` on the
members)."""

from __future__ import annotations

from dataclasses import dataclass

from coord.etcdpb import rpc_pb2

TOKEN_METADATA = "token"  # etcd's
INVALID_TOKEN = "INVALID_AUTH_TOKEN"  # the reason a member gives a token it does not know


@dataclass
class Login:
    """`user` and `password` to log in with, or a `token` got elsewhere."""

    user: str = ""
    password: str = ""
    token: str = ""

    @classmethod
    def of(cls, user: str | None, password: str | None, token: str | None) -> Login | None:
        """The login the client's arguments ask for (None: none). `user` may be
        etcdctl's `NAME:PASSWORD`."""
        if not user and not token:
            return None
        if user and password is None and ":" in user:
            user, password = user.split(":", 1)
        if user and password is None:
            raise ValueError(f"user {user!r} needs a password (user=, password=; or "
                             "'NAME:PASSWORD')")
        return cls(user or "", password or "", token or "")

    @property
    def renewable(self) -> bool:
        return bool(self.user)

    def request(self) -> rpc_pb2.AuthenticateRequest:
        return rpc_pb2.AuthenticateRequest(name=self.user, password=self.password)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA, self.token),) if self.token else ()
