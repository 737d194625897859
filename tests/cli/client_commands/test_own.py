"""Progress bars on long CLI commands: a bulk `coord own` (resources from a file, claimed
in batches) draws one only for a person at a terminal — not with --json, not when stdout
is piped — and a refused batch says how many were claimed before it."""

from __future__ import annotations

import json
import sys

import pytest

from coord.cli import main as cli
from coord.client import Client
from coord.progress_bars import on_terminal
from coord.testing import cluster

pytestmark = pytest.mark.cluster


class Tty:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("json_flag,stdout_tty,stderr_tty,shown", [
    (False, True, True, True), (True, True, True, False), (False, False, True, False),
    (False, True, False, False)])
def test_bars_only_for_a_terminal(monkeypatch, json_flag, stdout_tty, stderr_tty, shown):
    monkeypatch.setattr(sys, "stdout", Tty(stdout_tty))
    monkeypatch.setattr(sys, "stderr", Tty(stderr_tty))
    args = type("Args", (), {"json": json_flag})()
    assert on_terminal(args) is shown


def test_bulk_own_in_batches(tmp_path, capsys, monkeypatch):
    names = tmp_path / "resources.txt"
    names.write_text("".join(f"r{i}\n" for i in range(2500)) + "\n")
    with cluster(members=1, in_process=True) as c, Client(c.endpoints) as client:
        ep = c.endpoints[0]
        s = client.open_session("bulk", ttl=30)
        args = ["own", "g", "extra", "--resources-from", str(names), "--batch", "1000",
                "--session", str(s.session_id), "--endpoints", ep]

        assert cli.main([*args, "--json"]) == 0
        out, err = capsys.readouterr()
        lines = [json.loads(line) for line in out.splitlines()]
        assert [len(x["grants"]) for x in lines] == [1000, 1000, 501]  # three commands
        assert "own 2,501 in g" not in err  # not a terminal: no bar
        assert len(client.list_owners("g")) == 2501

        monkeypatch.setattr("coord.cli.client_commands.own.on_terminal", lambda a: True)
        bad = tmp_path / "bad.txt"  # a name too long in the second batch: it is refused
        bad.write_text("".join(("x" * 2000 if i == 1500 else f"r{i}") + "\n"
                               for i in range(2500)))
        args[1], args[4] = "h", str(bad)
        assert cli.main(args) == 1
        out, err = capsys.readouterr()
        assert "own 2,501 in h" in err  # the bar, drawn to stderr
        assert "1,000 of 2,501 resources were claimed, in 1 command(s)" in err
        assert out.count("granted ") == 1000
        assert len(client.list_owners("h")) == 1000  # the first batch stays held
