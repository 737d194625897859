"""A member's etcd tokens: learned from applied logins, each living --auth-token-ttl past
its last use on this member, ended with their user or when auth goes off."""

from __future__ import annotations

import base64

from coord.server.requests.tokens import TokenKeeper, digest_of, new_token
from coord.sm import commands as c
from coord.sm.machine import CoordMachine

HASH = "scrypt$16384$8$1$" + base64.b64encode(b"s" * 16).decode() + "$" + \
    base64.b64encode(b"h" * 32).decode()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup() -> tuple[CoordMachine, TokenKeeper, Clock]:
    m = CoordMachine()
    for cmd in (c.UserAdd("root", HASH), c.UserGrantRole("root", "root"), c.AuthEnable(),
                c.UserAdd("u", HASH, actor="root")):
        assert m.execute(cmd).ok
    clock = Clock()
    return m, TokenKeeper(m, ttl_s=10, clock=clock), clock


def login(m: CoordMachine, keeper: TokenKeeper, user: str) -> str:
    token, digest = new_token()
    assert m.execute(c.Authenticate(user, digest)).ok
    for event in m.drain_events():
        keeper.heard(event)
    return token


def test_a_token_is_known_by_its_digest_and_lives_ttl_past_its_last_use():
    m, keeper, clock = setup()
    token = login(m, keeper, "u")
    assert digest_of(token) != token and len(digest_of(token)) == 64
    assert keeper.user_of(token) == "u" and keeper.user_of(token + "x") is None
    clock.now += 9
    assert keeper.user_of(token) == "u"  # used: ten more seconds from now
    clock.now += 9
    assert keeper.user_of(token) == "u"
    clock.now += 10.5
    assert keeper.user_of(token) is None and len(keeper) == 0  # idle too long: forgotten


def test_tokens_end_with_their_user_and_all_end_when_auth_goes_off():
    m, keeper, _ = setup()
    u, root = login(m, keeper, "u"), login(m, keeper, "root")
    assert m.execute(c.UserChangePassword("u", HASH, actor="root")).ok
    for event in m.drain_events():
        keeper.heard(event)
    assert keeper.user_of(u) is None and keeper.user_of(root) == "root"
    assert m.execute(c.AuthDisable(actor="root")).ok
    for event in m.drain_events():
        keeper.heard(event)
    assert keeper.user_of(root) is None


def test_a_restored_snapshot_ends_the_tokens_learned_before_it():
    m, keeper, _ = setup()
    token = login(m, keeper, "u")
    m.restore(m.snapshot())  # what a member installing a leader's snapshot does
    assert keeper.user_of(token) is None
    assert keeper.user_of(login(m, keeper, "u")) == "u"
