"""The CLI's human output as rich tables (`coord status`, `coord owners GROUP`,
`coord session list`, `coord pid list`, and `coord kv get` on a terminal), with --json
unchanged."""

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
                                  "APPLIED", "QUORUM", "MODE", "TLS"]
        assert out[1].split()[:3] == [ep, "n1", "leader"]
        assert out[1].split()[-3:] == ["yes", "read-write", "no"]
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
        monkeypatch.setattr("coord.cli.client_commands.kv.is_terminal", lambda: True)
        assert cli.main(["kv", "get", "cfg/x", "--endpoints", ep]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["KEY", "VALUE", "CREATE", "MOD", "VERSION", "SESSION"]
        assert out[1].split()[:2] == ["cfg/x", "1"]


def test_session_and_pid_lists(capsys):
    """`coord session list` asks the leader (only it knows the time left), whichever
    endpoint comes first; `coord pid list` shows blocks, live leases and producers."""
    with cluster(members=3, in_process=True) as c, Client(c.endpoints) as client:
        s = client.open_session("worker-1", ttl=30)
        client.own(s.session_id, "jobs", ["a", "b"])
        client.put("k", "v", session=s.session_id)
        client.allocate_pid_block("broker-1", 100)
        lease = client.lease_pid("orders", 3)
        client.init_producer("orders/3")
        leader = c.wait_for_leader(10)
        eps = ",".join(m.listen for name, m in sorted(  # the leader last
            c.members.items(), key=lambda item: item[0] == leader))

        assert cli.main(["session", "list", "--endpoints", eps]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["ID", "NAME", "TTL", "LEFT", "READ-ONLY", "OK", "OWNS",
                                  "KEYS"]
        row = out[1].split()
        assert row[:3] == [str(s.session_id), "worker-1", "30s"] and row[3].endswith("s")
        assert row[-3:] == ["jobs/a", "jobs/b", "1"]
        assert [line.strip() for line in out[2:]] == [
            "1 session(s) at revision 6", f"time left as the leader {leader} counts it"]

        assert cli.main(["session", "list", "--endpoints", eps, "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["leader"] is True and got["member"] == leader
        (one,) = got["sessions"]
        assert one["id"] == s.session_id and 0 < one["remaining_ms"] <= 30_000
        assert one["keys"] == ["k"] and [o["resource"] for o in one["owned"]] == ["a", "b"]

        assert cli.main(["pid", "list", "--endpoints", eps]) == 0
        out = capsys.readouterr().out
        assert "broker-1   1      100" in out and "next pid 103" in out
        assert f"{lease.pid}  {lease.generation}  orders  3          59m" in out
        assert "orders/3  102  0" in out

        assert cli.main(["pid", "list", "--endpoints", eps, "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["next_pid"] == 103 and got["leases"][0]["pid"] == lease.pid
        assert got["producers"] == [{"producer_key": "orders/3", "pid": 102, "epoch": 0}]
