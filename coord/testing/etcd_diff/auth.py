"""Auth sequences for the differential test: users, roles and permissions changed, auth
turned on and off, logins right and wrong, and key-value calls, watches, leases and
maintenance made as different users (or none, or with a token nobody issued) — every
answer compared with real etcd 3.4's, status codes and messages included.

`auth_sequence(seed)` is a pure function of the seed, like `generate.sequence`. A step's
`caller` names the user whose token goes with the call: the token of that user's last
successful login in the sequence (none if it has none), `BOGUS` a token no server issued,
"" none at all. Auth state is cluster-wide, so each sequence starts from none (no users,
roles, auth off) and `AuthPlayer.cleanup` leaves none behind.

Not generated, because etcd 3.4.23 does not check them (coord does; README, "Where coord
knowingly differs from etcd"): nested txns, and puts with prev_kv or a lease inside a
txn, made as a user; watches of every key from a key on (etcd checks the first key
only); lease keepalives and TimeToLives listing keys (etcd 3.4.23 checks neither;
tests/server/etcd/test_etcd_lease_auth.py compares the rest of those calls). Nor a
permission grant without a permission, which crashes etcd 3.4.
"""

from __future__ import annotations

from typing import Any

from coord.etcdpb import auth_pb2
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.testing.etcd_diff.generate import LEASE_SLOTS, TTLS, Step, _Gen, prefix_end
from coord.testing.etcd_diff.play import WATCH_WAIT, Player, System, WatchStream, call

USERS = ("root", "ann", "bob", "cid")
ROLES = ("root", "ra", "rb", "rc")
BOGUS = "?"  # a caller whose token no server issued
P = auth_pb2.Permission


def password(user: str) -> str:
    return f"pw-{user}"


def auth_prefix(seed: int) -> bytes:
    return b"diff-auth/%d/" % seed


class _AuthGen(_Gen):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.prefix = auth_prefix(seed)
        self.length = self.rnd.randint(20, 45)

    def caller(self) -> str:
        return self.rnd.choices(("root", "ann", "bob", "cid", "", BOGUS),
                                weights=(35, 18, 14, 8, 20, 5))[0]

    def user(self) -> str:
        return "" if self.chance(0.03) else self.rnd.choice(USERS)

    def role(self) -> str:
        return "" if self.chance(0.03) else self.rnd.choice(ROLES + ("nope",))

    def perm(self) -> P:
        key, end = self.key_range()
        return P(permType=self.rnd.choice((P.READ, P.WRITE, P.READWRITE, P.READWRITE, 3)),
                 key=key, range_end=end)

    def flat_txn(self) -> pb.TxnRequest:
        """A txn without nested txns, its puts without prev_kv or lease (see the doc)."""
        t = self.txn(depth=2)
        for op in (*t.success, *t.failure):
            if op.HasField("request_put"):
                op.request_put.prev_kv = False
                op.request_put.lease = 0
        return t

    def admin(self) -> Any:
        kind = self.rnd.choices(
            ("user_add", "user_delete", "user_password", "grant_role", "revoke_role",
             "role_add", "role_delete", "grant_perm", "revoke_perm", "user_get", "user_list",
             "role_get", "role_list", "enable", "disable"),
            weights=(5, 2, 2, 6, 2, 4, 2, 8, 3, 2, 1, 2, 1, 4, 2))[0]
        user, role = self.user(), self.role()
        match kind:
            case "user_add":
                no_password = self.chance(0.1)
                return pb.AuthUserAddRequest(
                    name=user, password="" if no_password else password(user),
                    options=auth_pb2.UserAddOptions(no_password=no_password))
            case "user_delete":
                return pb.AuthUserDeleteRequest(name=user)
            case "user_password":
                return pb.AuthUserChangePasswordRequest(name=user, password=password(user))
            case "grant_role":
                return pb.AuthUserGrantRoleRequest(user=user, role=role)
            case "revoke_role":
                return pb.AuthUserRevokeRoleRequest(name=user, role=role)
            case "role_add":
                return pb.AuthRoleAddRequest(name=role)
            case "role_delete":
                return pb.AuthRoleDeleteRequest(role=role)
            case "grant_perm":
                return pb.AuthRoleGrantPermissionRequest(name=role, perm=self.perm())
            case "revoke_perm":
                key, end = self.key_range()
                return pb.AuthRoleRevokePermissionRequest(role=role, key=key, range_end=end)
            case "user_get":
                return pb.AuthUserGetRequest(name=user)
            case "user_list":
                return pb.AuthUserListRequest()
            case "role_get":
                return pb.AuthRoleGetRequest(role=role)
            case "role_list":
                return pb.AuthRoleListRequest()
            case "enable":
                return pb.AuthEnableRequest()
            case _:
                return pb.AuthDisableRequest()

    def auth_step(self) -> Step:
        kind = self.rnd.choices(
            ("auth", "login", "put", "range", "delete", "txn", "watch_as", "grant", "revoke",
             "hash", "alarms"),
            weights=(40, 10, 9, 9, 3, 7, 4, 2, 2, 1, 1))[0]
        caller = self.caller()
        match kind:
            case "auth":
                return Step(kind, self.admin(), caller=caller)
            case "login":
                user = self.user()
                right = self.chance(0.85)
                return Step(kind, pb.AuthenticateRequest(
                    name=user, password=password(user) if right else "wrong"))
            case "put":
                return Step(kind, self.put(), caller=caller)
            case "range":
                return Step(kind, self.range(), caller=caller)
            case "delete":
                return Step(kind, self.delete(), caller=caller)
            case "txn":
                return Step(kind, self.flat_txn(), caller=caller)
            case "watch_as":
                w = self.watch()
                if w.range_end == b"\0":
                    w.range_end = prefix_end(self.prefix)
                w.start_revision = 0
                return Step(kind, w, caller=caller)
            case "grant":
                return Step(kind, pb.LeaseGrantRequest(TTL=self.rnd.choice(TTLS),
                                                       ID=self.rnd.randint(1, LEASE_SLOTS)),
                            caller=caller)
            case "revoke":
                return Step(kind, pb.LeaseRevokeRequest(ID=self.rnd.randint(1, LEASE_SLOTS)),
                            caller=caller)
            case "hash":
                return Step(kind, pb.HashRequest(), caller=caller)
            case _:
                return Step(kind, pb.AlarmRequest(action=pb.AlarmRequest.GET), caller=caller)


def auth_sequence(seed: int) -> list[Step]:
    """Sequence `seed`: most start by making root, a user with a role and auth on (the
    usual set-up), then 20 to 45 steps."""
    gen = _AuthGen(seed)
    steps: list[Step] = []
    if gen.chance(0.8):
        steps += [Step("auth", pb.AuthUserAddRequest(name="root", password=password("root"))),
                  Step("auth", pb.AuthUserGrantRoleRequest(user="root", role="root")),
                  Step("auth", pb.AuthUserAddRequest(name="ann", password=password("ann"))),
                  Step("auth", pb.AuthRoleAddRequest(name="ra")),
                  Step("auth", pb.AuthRoleGrantPermissionRequest(name="ra", perm=gen.perm())),
                  Step("auth", pb.AuthUserGrantRoleRequest(user="ann", role="ra")),
                  Step("auth", pb.AuthEnableRequest()),
                  Step("login", pb.AuthenticateRequest(name="root", password=password("root"))),
                  Step("login", pb.AuthenticateRequest(name="ann", password=password("ann")))]
    while len(steps) < gen.length:
        steps.append(gen.auth_step())
    return steps


_ADMIN_METHODS = {
    pb.AuthEnableRequest: "AuthEnable", pb.AuthDisableRequest: "AuthDisable",
    pb.AuthUserAddRequest: "UserAdd", pb.AuthUserDeleteRequest: "UserDelete",
    pb.AuthUserChangePasswordRequest: "UserChangePassword",
    pb.AuthUserGrantRoleRequest: "UserGrantRole", pb.AuthUserRevokeRoleRequest: "UserRevokeRole",
    pb.AuthUserGetRequest: "UserGet", pb.AuthUserListRequest: "UserList",
    pb.AuthRoleAddRequest: "RoleAdd", pb.AuthRoleDeleteRequest: "RoleDelete",
    pb.AuthRoleGrantPermissionRequest: "RoleGrantPermission",
    pb.AuthRoleRevokePermissionRequest: "RoleRevokePermission",
    pb.AuthRoleGetRequest: "RoleGet", pb.AuthRoleListRequest: "RoleList",
}


class AuthPlayer(Player):
    """Plays an auth sequence: each call carries its caller's token."""

    def __init__(self, system: System, seed: int) -> None:
        super().__init__(system, seed)
        self.prefix = auth_prefix(seed)
        self.auth = stubs.AuthStub(system.channel)
        self.maintenance = stubs.MaintenanceStub(system.channel)
        self.tokens: dict[str, str] = {}  # user -> the token of its last login

    def metadata(self, step: Step):
        token = "not-a-token" if step.caller == BOGUS else self.tokens.get(step.caller)
        return (("token", token),) if token else None

    def do_login(self, label: str, step: Step) -> None:
        r = call(self.auth.Authenticate, step.req)
        out = self.norm(r)
        if isinstance(out, dict):
            self.tokens[step.req.name] = r.token
            out["token"] = "(a token)"  # random on both systems
        self.record(label, out)

    def do_auth(self, label: str, step: Step) -> None:
        method = getattr(self.auth, _ADMIN_METHODS[type(step.req)])
        self.record(label, self.norm(call(method, step.req, self.metadata(step))))

    def do_hash(self, label: str, step: Step) -> None:
        out = self.norm(call(self.maintenance.Hash, step.req, self.metadata(step)))
        if isinstance(out, dict):
            out["hash"] = "(a hash)"  # of each system's own state
        self.record(label, out)

    def do_alarms(self, label: str, step: Step) -> None:
        """The refusal or the alarms (etcd 3.4 answers a GET without a header)."""
        r = call(self.maintenance.Alarm, step.req, self.metadata(step))
        self.record(label, r if isinstance(r, tuple) else list(r.alarms))

    def do_watch_as(self, label: str, step: Step) -> None:
        """A watch created on a stream of its own (the stream carries the token): its
        first answer, created or refused."""
        stream = WatchStream(self.sys.watch, self.metadata(step))
        try:
            stream.send(pb.WatchRequest(create_request=self.materialise(step)))
            if not stream.wait(lambda: bool(stream.created), WATCH_WAIT):
                self.record(label, ("no created response", stream.failure))
                return
            with stream.cond:
                self.record(label, self.norm(stream.created[0]))
        finally:
            stream.close()

    def cleanup(self) -> None:
        """Auth off, every user and role gone (not compared), then the base cleanup."""
        root = call(self.auth.Authenticate,
                    pb.AuthenticateRequest(name="root", password=password("root")))
        if not isinstance(root, tuple):
            call(self.auth.AuthDisable, pb.AuthDisableRequest(), (("token", root.token),))
        users = call(self.auth.UserList, pb.AuthUserListRequest())
        for name in () if isinstance(users, tuple) else users.users:
            call(self.auth.UserDelete, pb.AuthUserDeleteRequest(name=name))
        roles = call(self.auth.RoleList, pb.AuthRoleListRequest())
        for role in () if isinstance(roles, tuple) else roles.roles:
            call(self.auth.RoleDelete, pb.AuthRoleDeleteRequest(role=role))
        super().cleanup()
