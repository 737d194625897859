"""`coord status`'s table (coord.cli.status), from a member's row without a server."""

from __future__ import annotations

import json

from coord.cli import main as cli
from coord.cli.client_commands.command import endpoints_of
from coord.cli.status import HEADER, plaintext_lines, table_rows
from coord.client.endpoints import DEFAULT_ENDPOINTS, ENDPOINTS_ENV

ROW = {"endpoint": "127.0.0.1:7101", "name": "n3", "role": "follower", "term": 2,
       "leader_name": "", "commit_index": 5, "applied_index": 5, "has_quorum": False,
       "quorum_lost_ms": 1500, "mode": "read-only", "local_sessions": 2, "tls": False}
MODE, TLS = HEADER.index("MODE"), HEADER.index("TLS")


def test_status_table_counts_a_members_local_sessions():
    assert table_rows([ROW])[0][MODE].plain == "read-only, 2 local session(s)"
    assert table_rows([{**ROW, "local_sessions": 0}])[0][MODE].plain == "read-only"


def test_status_says_which_client_ports_are_tls_and_warns_of_plaintext_beyond_loopback():
    exposed = {**ROW, "endpoint": "10.1.2.3:7101"}
    tls = {**exposed, "tls": True}
    assert [r[TLS].plain for r in table_rows([ROW, exposed, tls])] == ["no", "no", "yes"]
    assert table_rows([exposed])[0][TLS].style == "bold red"
    assert plaintext_lines([ROW, tls]) == []
    [line] = plaintext_lines([ROW, exposed, tls])
    assert line.startswith("WARNING: n3 serves clients on 10.1.2.3:7101 without TLS")
    assert "--cert-file/--key-file" in line


def test_status_takes_its_endpoints_as_every_command_does(monkeypatch, capsys):
    """No --endpoints: $COORD_ENDPOINTS (here, two addresses nobody serves), else the dev
    cluster's, like every client command."""
    monkeypatch.setenv(ENDPOINTS_ENV, "127.0.0.1:1,127.0.0.1:2")
    assert cli.main(["status", "--json", "--timeout", "0.5"]) == 1
    assert [r["endpoint"] for r in json.loads(capsys.readouterr().out)] == [
        "127.0.0.1:1", "127.0.0.1:2"]
    args = cli.build_parser("status").parse_args(["status"])
    monkeypatch.delenv(ENDPOINTS_ENV)
    assert endpoints_of(args) == list(DEFAULT_ENDPOINTS)
