"""Passwords are hashed with salted scrypt on the member that takes them, parameters kept
beside the hash; apply only ever checks the form."""

from __future__ import annotations

import asyncio

from coord.server.requests.passwords import PasswordHasher, hash_password, verify_password
from coord.sm.auth import parse_password_hash


def test_a_hash_is_salted_scrypt_with_its_parameters_and_verifies_only_its_password():
    a, b = hash_password("s3cret"), hash_password("s3cret")
    assert a != b  # a fresh salt each time
    n, r, p, salt, digest = parse_password_hash(a)
    assert (n, r, p, len(salt), len(digest)) == (1 << 14, 8, 1, 16, 32)
    assert "s3cret" not in a
    assert verify_password("s3cret", a) and verify_password("s3cret", b)
    assert not verify_password("s3cret!", a)
    assert not verify_password("", "")  # no user: the decoy never matches
    assert not verify_password("x", "not a hash")


def test_the_hasher_runs_off_the_loop():
    async def run() -> tuple[str, bool, bool]:
        hasher = PasswordHasher(at_once=1)
        stored = await hasher.hash("pw")
        return stored, await hasher.verify("pw", stored), await hasher.verify("no", stored)

    stored, good, bad = asyncio.run(run())
    assert good and not bad and stored.startswith("scrypt$")
