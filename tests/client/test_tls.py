"""The client library over TLS: the sync and asyncio clients given a `TLS`, or reading
$COORD_CACERT/$COORD_CERT/$COORD_KEY, against a member serving TLS with client
certificates required (the `coord_cluster` fixture's TLS cluster, in this process)."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from coord.client import TLS, AsyncClient, Client, TLSConfigError, UnavailableError

pytestmark = [pytest.mark.cluster, pytest.mark.coord_cluster(tls=True)]


def test_the_sync_client_over_tls_puts_gets_and_holds_a_session(coord_cluster):
    with Client(coord_cluster.endpoints, tls=coord_cluster.client_tls) as client:
        client.put("tls/sync", "1")
        assert client.get("tls/sync").value == b"1"
        with client.session(ttl=10) as s:
            assert [g.resource for g in s.own("tls-jobs", ["p0"]).grants] == ["p0"]


def test_the_asyncio_client_over_tls(coord_cluster):
    async def main() -> bytes:
        async with AsyncClient(coord_cluster.endpoints, tls=coord_cluster.client_tls) as c:
            await c.put("tls/aio", "2")
            return (await c.get("tls/aio")).value

    assert asyncio.run(main()) == b"2"


def test_without_tls_given_the_environment_names_the_files(coord_cluster, monkeypatch):
    tls = coord_cluster.client_tls
    monkeypatch.setenv("COORD_CACERT", tls.cacert)
    monkeypatch.setenv("COORD_CERT", tls.cert)
    monkeypatch.setenv("COORD_KEY", tls.key)
    with Client(coord_cluster.endpoints) as client:
        assert client._aio.tls == tls
        client.put("tls/env", "3")
    with Client(coord_cluster.endpoints, tls=False, timeout=1) as client:
        assert client._aio.tls is None  # False: plaintext, whatever the environment says
        with pytest.raises(UnavailableError):
            client.get("tls/env")  # and a TLS member refuses plaintext


def test_the_files_are_checked_when_the_client_is_made(coord_cluster, tmp_path):
    key = tmp_path / "client.key"
    shutil.copy(coord_cluster.client_tls.key, key)
    os.chmod(key, 0o644)
    loose = TLS(coord_cluster.client_tls.cacert, coord_cluster.client_tls.cert, str(key))
    with pytest.raises(TLSConfigError, match="chmod 600"):
        Client(coord_cluster.endpoints, tls=loose)
    with pytest.raises(TLSConfigError, match="--cacert"):
        AsyncClient(coord_cluster.endpoints, tls=TLS(str(tmp_path / "missing.pem")))
