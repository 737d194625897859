"""The history directory: runs commit through the manifest, leftovers of a run that died
are deleted, nothing is written into a directory that is not a history."""

from __future__ import annotations

import gc
import json

import pyarrow.dataset as ds
import pytest

from coord.history.sink import (
    MANIFEST,
    YOUNG_COLLECTION_OBJECTS,
    HistoryDirError,
    HistorySink,
    committed_files,
)
from coord.history.synth import synthesize


def test_parquet_is_partitioned_by_date_and_kind_and_resumes_after_the_last_index(tmp_path):
    rows = list(synthesize(2_000, seed=2))
    first = [r for r in rows if r["index"] <= 1_000]
    rest = [r for r in rows if r["index"] > 1_000]
    out = tmp_path / "h"
    w = HistorySink(out).write(first)
    assert (w.first_index, w.last_index, w.rows) == (1, 1_000, len(first))
    with HistorySink(out) as sink:  # a second export resumes where the manifest says
        assert sink.last_index == 1_000
        with pytest.raises(ValueError, match="not after the last written"):
            sink.write(first[-3:])
        sink.write(rest)
    fmt, files = committed_files(out)
    assert fmt == "parquet" and all("/date=2025-11-25/kind=" in f for f in files)
    table = ds.dataset(files, format="parquet", partitioning="hive",
                       partition_base_dir=str(out)).to_table()
    assert table.num_rows == len(rows)
    assert sorted(table.column("index").to_pylist()) == sorted(r["index"] for r in rows)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["last_index"] == 2_000 and len(manifest["runs"]) == 2


def test_a_run_that_died_leaves_nothing_a_reader_sees(tmp_path):
    out = tmp_path / "h"
    HistorySink(out).write(synthesize(300, seed=1))

    def dying():
        yield from synthesize(300, seed=1)
        raise RuntimeError("export killed")

    with HistorySink(out, "parquet") as sink, pytest.raises(ValueError):
        sink.write(dying())  # the same indexes again: refused before any commit
    stray = out / "date=2025-11-25" / "kind=put" / "part-dead-0.parquet"
    stray.write_bytes(b"half a file")
    before = committed_files(out)[1]
    HistorySink(out)  # opening cleans what no manifest lists
    assert not stray.exists() and committed_files(out)[1] == before
    assert not list(out.glob("_tmp-*"))


def test_jsonl_and_refusals(tmp_path):
    out = tmp_path / "j"
    HistorySink(out, "jsonl").write(synthesize(200, seed=1))
    fmt, files = committed_files(out)
    lines = open(files[0]).read().splitlines()
    assert fmt == "jsonl" and json.loads(lines[0])["kind"] == "conf_change"
    with pytest.raises(HistoryDirError, match="holds jsonl"):
        HistorySink(out, "parquet")
    other = tmp_path / "other"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    with pytest.raises(HistoryDirError, match="refusing to write into it"):
        HistorySink(other)
    assert (other / "precious.txt").read_text() == "keep me"
    # a `_tmp-` directory with no writers' lock beside it is not a dead run of ours
    foreign = tmp_path / "foreign"
    (foreign / "_tmp-build").mkdir(parents=True)
    (foreign / "_tmp-build" / "notes.txt").write_text("keep me too")
    with pytest.raises(HistoryDirError, match="refusing to write into it"):
        HistorySink(foreign)
    assert (foreign / "_tmp-build" / "notes.txt").read_text() == "keep me too"
    with pytest.raises(HistoryDirError, match="not a coord history"):
        committed_files(other)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_rows_are_made_with_young_collections_spaced_and_the_thresholds_come_back(tmp_path,
                                                                                fmt):
    """The sink spaces the cyclic collector's young collections only while its rows are
    made and written: the process gets its own thresholds back, after a run that failed
    too."""
    before = gc.get_threshold()
    seen = []

    def rows(fail: bool):
        for row in synthesize(200, seed=1):
            seen.append(gc.get_threshold())
            yield row
        if fail:
            raise RuntimeError("the source broke")

    HistorySink(tmp_path / "ok", fmt=fmt).write(rows(False))
    assert set(seen) == {(YOUNG_COLLECTION_OBJECTS, *before[1:])}
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError, match="the source broke"):
        HistorySink(tmp_path / "failed", fmt=fmt).write(rows(True))
    assert gc.get_threshold() == before
