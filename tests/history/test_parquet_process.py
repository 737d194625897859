"""Parquet written by a child process: the same rows as the writer in the producing
process, and a failure on either side commits nothing and leaves no child behind."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from coord.history import parquet_process
from coord.history.parquet_process import ParquetProcessError
from coord.history.sink import MANIFEST, HistorySink, committed_files
from coord.history.synth import synthesize


def _table(out):
    _, files = committed_files(out)
    table = ds.dataset(
        files, format="parquet", partitioning="hive", partition_base_dir=str(out)
    ).to_table()
    return table.select(sorted(table.column_names)).sort_by(
        [("index", "ascending"), ("seq", "ascending")]
    )


def test_the_child_writes_the_rows_the_producing_process_would(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_process, "CHUNK_ROWS", 100)  # many chunks, a part one last
    rows = list(synthesize(3_000, seed=5))
    here = HistorySink(tmp_path / "here").write(rows)
    child = HistorySink(tmp_path / "child", parquet_in_child=True).write(rows)
    assert here == child and len(rows) % 100
    assert _table(tmp_path / "child").equals(_table(tmp_path / "here"))


@pytest.mark.parametrize(
    ("commands", "bad", "error"),
    [
        # the child fails as it closes the files, once every row was sent
        (
            2_000,
            lambda row: {**row, "value_len": "not a number"},
            "Could not convert 'not a number'",
        ),
        # it fails early (a row with no kind to partition it by), while the producer still has
        # thousands of chunks to send
        (20_000, lambda row: {k: v for k, v in row.items() if k != "kind"}, "KeyError: 'kind'"),
    ],
)
def test_an_error_in_the_child_surfaces_and_commits_nothing(
    tmp_path, monkeypatch, commands, bad, error
):
    monkeypatch.setattr(parquet_process, "CHUNK_ROWS", 10)
    out = tmp_path / "h"
    HistorySink(out).write(synthesize(300, seed=1))
    before = (out / MANIFEST).read_text()

    def rows():
        for row in synthesize(commands, seed=1):
            if row["index"] > 300:
                yield row
            if row["index"] == 400:
                yield bad({**row, "seq": 99})

    with (
        HistorySink(out, parquet_in_child=True) as sink,
        pytest.raises(ParquetProcessError, match=f"(?s)writer process failed.*{error}"),
    ):
        sink.write(rows())
    assert (out / MANIFEST).read_text() == before
    assert not list(out.glob("_tmp-*"))
    assert _table(out).num_rows == sum(1 for _ in synthesize(300, seed=1))


def test_an_error_in_the_producer_ends_the_child_and_commits_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_process, "CHUNK_ROWS", 100)
    children = []
    popen = parquet_process.subprocess.Popen

    def recorded(*args, **kwargs):
        children.append(popen(*args, **kwargs))
        return children[-1]

    monkeypatch.setattr(parquet_process.subprocess, "Popen", recorded)

    def dying():
        yield from synthesize(1_000, seed=1)
        raise RuntimeError("the source broke")

    out = tmp_path / "h"
    with (
        HistorySink(out, parquet_in_child=True) as sink,
        pytest.raises(RuntimeError, match="the source broke"),
    ):
        sink.write(dying())
    assert [c.returncode for c in children] == [0]  # it had exited (aborting) already
    assert not (out / MANIFEST).exists() and not list(out.glob("_tmp-*"))
    assert not [p for p in out.rglob("*.parquet")]
