"""etcd's simple tokens on this member: which user each token stands for, and for how
long.

A login is verified on the member that takes it, which makes a random token and
proposes an `Authenticate` naming the token's sha256 digest (the token itself is never
in the log). Every member's keeper hears of it when it applies that entry
(`coord.sm.auth.AuthEvent`, through the event hub), so a token works on any member, as
etcd 3.4's simple tokens do (etcd commits its logins through Raft too): a client that
logged in on one member may send its calls to any, and a follower serves them — it
checks the caller itself and forwards only the resulting command.

How long a token lives is each member's own affair, on its own monotonic clock, never
in apply: `ttl_s` (etcd's --auth-token-ttl) after the member learned of the token or
after its last use here, whichever is later; the member forgets it then, and a call with
it gets etcd's `invalid auth token`, to which etcd's clients answer by logging in again.
Tokens end with their user (deleted, or its password changed) and all of them end when
auth is disabled. A restored snapshot may hide such changes, so tokens heard of before
one are forgotten (clients log in again, as after an etcd member's restart).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from coord.sm.auth import AuthEvent, AuthStore
from coord.sm.machine import CoordMachine

DEFAULT_TTL_S = 300.0  # etcd's --auth-token-ttl
SWEEP_EVERY = 1024  # tokens learned between sweeps of the expired ones


def new_token() -> tuple[str, str]:
    """A fresh token and its digest (what the log carries)."""
    token = secrets.token_urlsafe(24)
    return token, digest_of(token)


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenKeeper:
    def __init__(self, machine: CoordMachine, ttl_s: float = DEFAULT_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.machine = machine
        self.ttl_s = ttl_s
        self.clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}  # digest -> (user, expiry)
        self._store: AuthStore = machine.auth
        self._learned = 0

    def __len__(self) -> int:
        return len(self._tokens)

    def heard(self, event: AuthEvent) -> None:
        """An auth event this member applied."""
        self._check_store()
        if event.kind == "token":
            self._tokens[event.token_digest] = (event.user, self.clock() + self.ttl_s)
            self._learned += 1
            if self._learned % SWEEP_EVERY == 0:
                self._sweep()
        elif event.kind == "user":
            self._tokens = {d: v for d, v in self._tokens.items() if v[0] != event.user}
        elif event.kind == "all":
            self._tokens.clear()

    def user_of(self, token: str) -> str | None:
        """The user `token` stands for (its lifetime starts again), or None if this
        member does not know it (never heard of, expired, or ended)."""
        self._check_store()
        digest = digest_of(token)
        entry = self._tokens.get(digest)
        if entry is None:
            return None
        user, expiry = entry
        now = self.clock()
        if now > expiry or user not in self._store.users:
            del self._tokens[digest]
            return None
        self._tokens[digest] = (user, now + self.ttl_s)
        return user

    def _check_store(self) -> None:
        if self.machine.auth is not self._store:  # a snapshot was restored
            self._store = self.machine.auth
            self._tokens.clear()

    def _sweep(self) -> None:
        now = self.clock()
        self._tokens = {d: v for d, v in self._tokens.items() if v[1] >= now}
