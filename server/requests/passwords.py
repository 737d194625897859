"""Passwords of etcd's users, hashed and checked on the member that takes the request:
a new password is hashed before its change is proposed (apply never hashes), and a login
is checked against the hash the state machine replicated. The hash is salted scrypt
(stdlib `hashlib.scrypt`) with its parameters written beside it
(`coord.sm.auth.PASSWORD_SCHEME`), so they can change without invalidating stored ones.

N 2^14, r 8, p 1 is scrypt's interactive-login setting: 16 MiB and about 60 ms of one
core per hash. Hashes run in worker threads, HASHES_AT_ONCE at a time, so a flood of
logins queues there instead of stalling the event loop or taking every core and memory.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets

from coord.sm.auth import MAX_SCRYPT_MEMORY, PASSWORD_SCHEME, parse_password_hash

SCRYPT_N = 1 << 14
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
HASH_BYTES = 32
HASHES_AT_ONCE = 2


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r,
                          p=p, dklen=length, maxmem=MAX_SCRYPT_MEMORY + (1 << 20))


def hash_password(password: str) -> str:
    """`password`'s stored form, with a fresh salt."""
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, HASH_BYTES)
    return "$".join((PASSWORD_SCHEME, str(SCRYPT_N), str(SCRYPT_R), str(SCRYPT_P),
                     base64.b64encode(salt).decode(), base64.b64encode(digest).decode()))


_DECOY = hash_password("")  # checked against when there is no user, so a login takes as long


def verify_password(password: str, stored: str) -> bool:
    """Whether `password` is the one `stored` was made from (a constant-time compare);
    a stored form that does not parse matches nothing."""
    try:
        n, r, p, salt, digest = parse_password_hash(stored or _DECOY)
    except ValueError:
        return False
    match = hmac.compare_digest(_scrypt(password, salt, n, r, p, len(digest)), digest)
    return match and bool(stored)


class PasswordHasher:
    """`hash_password` and `verify_password` off the event loop, a few at a time."""

    def __init__(self, at_once: int = HASHES_AT_ONCE) -> None:
        self._slots = asyncio.Semaphore(at_once)

    async def hash(self, password: str) -> str:
        async with self._slots:
            return await asyncio.to_thread(hash_password, password)

    async def verify(self, password: str, stored: str) -> bool:
        """As `verify_password`; an empty `stored` (no such user) takes as long and fails."""
        async with self._slots:
            return await asyncio.to_thread(verify_password, password, stored)
