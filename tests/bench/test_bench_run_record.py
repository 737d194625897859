"""Every `coord bench ... --json` output carries its `run` record
(coord.bench.run_record): the machine, date, coord's commit, load and command."""

from __future__ import annotations

import json

from coord.bench import run_record


def test_every_json_output_carries_the_run_record(capsys):
    run_record.print_json(run_record.begin("own"), [{"op": "x"}])
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == [{"op": "x"}]
    run = out["run"]
    assert run["benchmark"] == "own" and run["command"].startswith("coord ")
    assert run["machine"]["cpu"]["count"] >= 1 and run["machine"]["kernel"]
    assert len(run["load_start"]) == len(run["load_end"]) == 3
    assert run["coord"]["commit"]  # the suite runs from a checkout
