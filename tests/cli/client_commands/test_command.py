"""What every client command shares (coord.cli.client_commands.command), without a
server: uniform exits (1 with `coord: REASON: message`, 2 for bad usage or a bad txn
script) and the common flags on every command."""

from __future__ import annotations

import io

import pytest

from coord.cli import main as cli
from coord.cli.status import cmd_status


def test_cli_txn_syntax_error_exits_2(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("version(k) = nope\n"))
    assert cli.main(["kv", "txn", "--endpoints", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.startswith("coord: line 1:")


def test_cli_error_prints_reason_and_exits_1(capsys):
    code = cli.main(["kv", "get", "k", "--endpoints", "127.0.0.1:1", "--timeout", "0.3"])
    assert code == 1
    assert capsys.readouterr().err.startswith("coord: UNAVAILABLE: ")


def test_cli_bad_usage_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["pid", "lease", "topic", "not-a-number"])
    assert e.value.code == 2


def test_cli_keeps_existing_commands():
    p = cli.build_parser()
    assert p.parse_args(["status", "--endpoints", "x:1"]).func is cmd_status
    for argv in (["own", "g", "r"], ["owners", "g"], ["watch-owners", "g"],
                 ["release", "g", "r", "--session", "1"], ["pid", "block"],
                 ["pid", "init", "k"], ["kv", "put", "k", "v"], ["kv", "del", "k"],
                 ["kv", "watch", "k", "--prefix", "--limit", "3"], ["session", "open"],
                 ["session", "keepalive", "5"], ["session", "close", "5"]):
        args = p.parse_args([*argv, "--json"])
        assert args.json and callable(args.func)


def test_tls_flags_are_etcdctls_each_defaulting_to_its_environment_variable(monkeypatch):
    from coord.cli.client_commands.command import UsageError, tls_of
    from coord.tls.files import TLS
    from tests.pki import without_tls_variables

    p = cli.build_parser("kv")
    without_tls_variables(monkeypatch)
    assert tls_of(p.parse_args(["kv", "get", "k"])) is False  # plaintext
    args = p.parse_args(["kv", "get", "k", "--cacert", "ca.pem", "--cert", "c.pem",
                         "--key", "c.key"])
    assert (args.key, tls_of(args)) == ("k", TLS("ca.pem", "c.pem", "c.key"))
    monkeypatch.setenv("COORD_CACERT", "env-ca.pem")
    monkeypatch.setenv("COORD_KEY", "env.key")
    assert tls_of(p.parse_args(["kv", "get", "k", "--cert", "c.pem"])) == TLS(
        "env-ca.pem", "c.pem", "env.key")
    monkeypatch.delenv("COORD_KEY")
    with pytest.raises(UsageError, match="--cert and --key"):
        tls_of(p.parse_args(["kv", "get", "k", "--cert", "c.pem"]))
