"""The scripted members the client's unit tests run against (tests.client.fakes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.fakes import FakeMember


@pytest.fixture
def members() -> Iterator[list[FakeMember]]:
    """Two scripted members, "a" and "b", each on a gRPC server of its own."""
    ms = [FakeMember("a"), FakeMember("b")]
    yield ms
    for m in ms:
        m.stop()
