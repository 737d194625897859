"""The CLI's human output as rich tables (`coord status`, `coord owners GROUP`, and
`coord kv get` on a terminal), with --json unchanged."""

from __future__ import annotations

import json

import pytest

from coord.cli import main as cli
from coord.client import Client
from coord.testing import cluster

pytestmark = pytest.mark.cluster


def test_status_owners_and_kv_tables(capsys, monkeypatch):
    with cluster(members=1, in_process=True) as c, Client(c.endpoints) as client:
        ep = c.endpoints[0]
        s = client.open_session("t", ttl=30)
        client.own(s.session_id, "jobs", ["a", "b"])
        client.put("cfg/x", "1")

        assert cli.main(["status", "--endpoints", f"{ep},127.0.0.1:1", "--timeout", "1"]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["ENDPOINT", "NAME", "ROLE", "TERM", "LEADER", "COMMIT",
                                  "APPLIED", "QUORUM", "MODE"]
        assert out[1].split()[:3] == [ep, "n1", "leader"]
        assert out[1].split()[-2:] == ["yes", "read-write"]
        assert out[2].split()[:3] == ["127.0.0.1:1", "-", "unreachable"]

        assert cli.main(["owners", "jobs", "--endpoints", ep]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["RESOURCE", "SESSION", "GENERATION", "REVISION"]
        assert [line.split()[:3] for line in out[1:3]] == [
            ["a", str(s.session_id), "1"], ["b", str(s.session_id), "1"]]
        assert out[3].strip() == "2 owned in jobs"

        assert cli.main(["owners", "jobs", "--endpoints", ep, "--json"]) == 0
        assert [o["resource"] for o in json.loads(capsys.readouterr().out)] == ["a", "b"]

        assert cli.main(["kv", "get", "cfg/x", "--endpoints", ep]) == 0  # piped: etcdctl's
        assert capsys.readouterr().out.splitlines() == ["cfg/x", "1"]
        monkeypatch.setattr("coord.cli.client_commands.is_terminal", lambda: True)
        assert cli.main(["kv", "get", "cfg/x", "--endpoints", ep]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["KEY", "VALUE", "CREATE", "MOD", "VERSION", "SESSION"]
        assert out[1].split()[:2] == ["cfg/x", "1"]
