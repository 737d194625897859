"""Compaction of a history's runs: small runs rewritten into one by a single manifest
replace. Readers see the same rows before and after, and never a half state: a reader
holding the old manifest can still read every file it lists until the retention ends,
and a compaction that dies before its commit leaves the old runs committed and files
the next open deletes. One writer at a time (a lock)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from coord.cli.main import main
from coord.history.compact import compact, groups, small_runs
from coord.history.schema import PARTITION_COLUMNS, arrow_schema
from coord.history.sink import HistoryDirError, HistorySink, committed_files, read_manifest
from coord.history.synth import synthesize


def _read(out: Path, files: list[str], fmt: str) -> list[dict]:
    """Rows of `files` in log order, nulls dropped (JSONL has none)."""
    if fmt == "jsonl":
        rows = [json.loads(x) for f in files for x in Path(f).read_text().splitlines()]
    else:
        schema = arrow_schema()
        rows = ds.dataset(files, schema=schema, format="parquet", partition_base_dir=str(out),
                          partitioning=ds.partitioning(
                              pa.schema([schema.field(p) for p in PARTITION_COLUMNS]),
                              flavor="hive")).to_table().to_pylist()
    rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    return sorted(rows, key=lambda r: (r["index"], r["seq"]))


def _runs(out: Path, fmt: str, entries: int = 900, per_run: int = 30) -> list[dict]:
    rows = list(synthesize(entries, seed=4))
    with HistorySink(out, fmt) as sink:
        for start in range(0, entries, per_run):
            sink.write([r for r in rows if start < r["index"] <= start + per_run])
    return rows


def test_groups_are_consecutive_small_runs_within_the_target():
    runs = [{"rows": n} for n in (10, 10, 10, 60, 10, 10, 5)]
    assert groups(runs, 25) == [(0, 2), (4, 7)]  # 60 is not small; 10+10+10 > 25
    assert groups(runs, 1000) == [(0, 7)]
    assert groups([{"rows": 10}], 100) == []  # one run: nothing to merge


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_small_runs_become_one_run_with_the_same_rows(tmp_path, fmt):
    out = tmp_path / "h"
    _runs(out, fmt)
    before = read_manifest(out)
    old_files = committed_files(out)[1]
    rows_before = _read(out, old_files, fmt)
    assert len(before["runs"]) == 30

    with HistorySink(out, fmt) as sink:
        assert small_runs(sink) == 30
        [done] = compact(sink, retain_s=3600)
    after = read_manifest(out)
    [run] = after["runs"]
    assert (done.runs, done.rows) == (30, before["rows"])
    assert run["compacted_from"] == [r["run"] for r in before["runs"]]
    assert (run["first_index"], run["last_index"], run["rows"]) == (
        before["runs"][0]["first_index"], before["last_index"], before["rows"])
    assert (after["rows"], after["last_index"], after["last_revision"]) == (
        before["rows"], before["last_index"], before["last_revision"])
    new_files = committed_files(out)[1]
    assert len(new_files) < len(old_files)
    assert _read(out, new_files, fmt) == rows_before
    # a reader that took the old manifest still reads every file it lists, unchanged
    assert _read(out, old_files, fmt) == rows_before
    with HistorySink(out, fmt):  # opening does not delete what is kept for readers
        pass
    assert all(Path(f).exists() for f in old_files)
    assert {f for o in after["obsolete"] for f in o["files"]} == {
        f for r in before["runs"] for f in r["files"]}


def test_replaced_files_go_once_their_retention_is_over(tmp_path):
    out = tmp_path / "h"
    _runs(out, "jsonl")
    old_files = committed_files(out)[1]
    with HistorySink(out, "jsonl") as sink:
        compact(sink, retain_s=0)
    assert not any(Path(f).exists() for f in old_files)
    assert read_manifest(out)["obsolete"] == []
    assert len(committed_files(out)[1]) == 1


def test_a_compaction_that_dies_before_its_commit_changes_nothing_a_reader_sees(
        tmp_path, monkeypatch):
    out = tmp_path / "h"
    _runs(out, "parquet")
    manifest, files = read_manifest(out), committed_files(out)[1]
    rows = _read(out, files, "parquet")

    def killed(*args, **kwargs):
        raise RuntimeError("compaction killed before the manifest")

    with HistorySink(out, "parquet") as sink:
        monkeypatch.setattr(sink, "replace_runs", killed)
        with pytest.raises(RuntimeError):
            compact(sink)
    assert read_manifest(out) == manifest and committed_files(out)[1] == files
    assert _read(out, files, "parquet") == rows
    on_disk = {p for p in out.rglob("*.parquet")}
    assert len(on_disk) > len(files)  # the new run's files, moved in but not listed
    with HistorySink(out, "parquet"):  # the next open deletes them
        pass
    assert {str(p) for p in out.rglob("*.parquet")} == set(files)


def test_one_writer_at_a_time(tmp_path, capsys):
    out = tmp_path / "h"
    _runs(out, "jsonl", entries=90)
    with HistorySink(out, "jsonl"):
        with pytest.raises(HistoryDirError, match="another writer"):
            HistorySink(out, "jsonl")
        assert main(["history", "compact", str(out)]) == 2
        assert "another writer" in capsys.readouterr().err
    assert main(["history", "compact", str(out), "--retain", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["runs_before"], summary["runs_after"], summary["files_replaced"]) == (3, 1, 3)
    assert main(["history", "compact", str(tmp_path / "none")]) == 2
    assert "not a coord history" in capsys.readouterr().err
