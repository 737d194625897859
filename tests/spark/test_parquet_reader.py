"""Reading the Parquet sink back through Spark: `spark.read.format("coord-fenced")`
returns exactly the committed rows, though the table's directory also holds the files
of attempts never published (abandoned, superseded, still holding the fence)."""

from __future__ import annotations

from pathlib import Path

from coord.client.recipes.fence import Token
from coord.spark.sinks import ParquetDirSink
from tests.spark.test_sinks import batch


def _attempt(sink: ParquetDirSink, job: str, partition: int, token: Token, lo: int,
             hi: int) -> tuple[Token, int]:
    sink.append(job, partition, token, 0, batch(lo, lo))
    sink.append(job, partition, token, 1, batch(lo, hi))
    sink.seal(job, partition, token, 2, hi - lo)
    return token, hi - lo


def _table(root: Path) -> list[int]:
    """Two versions of job j and one of job k published; three attempts' files left
    behind; the ids a read must return."""
    sink = ParquetDirSink(str(root))
    assert sink.publish("j", 1, {0: _attempt(sink, "j", 0, Token(1, 1, 0), 0, 3),
                                 1: _attempt(sink, "j", 1, Token(1, 2, 0), 100, 102)})
    _attempt(sink, "j", 0, Token(2, 1, 1), 50, 55)  # superseded by the next, cleared
    assert sink.publish("j", 2, {0: _attempt(sink, "j", 0, Token(3, 1, 2), 10, 14)})
    _attempt(sink, "j", 1, Token(2, 2, 1), 80, 84)  # holds the fence, never published
    _attempt(sink, "j", 2, Token(1, 3, 0), 60, 63)  # superseded by the next ...
    _attempt(sink, "j", 2, Token(2, 3, 1), 70, 72)  # ... itself abandoned
    assert sink.publish("k", 1, {0: _attempt(sink, "k", 0, Token(1, 9, 0), 200, 202)})
    every = {p.resolve() for p in root.rglob("*.parquet")}
    assert len(every) == len(sink.committed_files()) + 3  # the uncommitted are there
    return [0, 1, 2, 10, 11, 12, 13, 100, 101, 200, 201]


def test_the_reader_returns_exactly_the_committed_rows(spark, tmp_path):
    root = tmp_path / "table"
    want = _table(root)
    df = spark.read.format("coord-fenced").option("sink", "parquet") \
        .option("path", str(root)).load()
    assert df.columns == ["id", "s"]
    assert sorted((r.id, r.s) for r in df.collect()) == [(i, str(i)) for i in want]
    # Spark's own Parquet reader, given the committed listing (the route the manual gives):
    files = [str(f) for f in ParquetDirSink(str(root)).committed_files()]
    assert sorted(r.id for r in spark.read.parquet(*files).collect()) == want
