"""The partitioned Parquet writer holds at most its cap of rows across all partitions (and
of rows still held as dicts) and rotates files, and what it writes reads back whole as the
hive dataset."""

from __future__ import annotations

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from coord.history.partitioned import PartitionedParquetWriter
from coord.history.synth import synthesize


def test_buffered_rows_stay_under_the_cap_across_many_partitions(tmp_path):
    rows = list(synthesize(3_000, seed=5))
    partitions = {(r["date"], r["kind"]) for r in rows}
    assert len(partitions) >= 10  # the cap only matters when rows spread out
    writer = PartitionedParquetWriter(tmp_path, "r1", group_rows=400, buffer_rows=200,
                                      file_rows=500, pending_rows=30)

    def checked_after_each():  # the writer's state as it takes each row in turn
        for row in rows:
            yield row
            assert writer.buffered <= 200 and writer.pending_rows < 30

    writer.add_rows(checked_after_each())
    writer.close()
    assert writer.max_buffered == 200 and writer.buffered == 0
    assert all(pq.ParquetFile(f).metadata.num_rows <= 500 for f in writer.files)
    assert len(writer.files) > len(partitions)  # some partition's files were rotated
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(rows)
    assert sorted(table.column("index").to_pylist()) == sorted(r["index"] for r in rows)
    assert {(d, k) for d, k in zip(table.column("date").to_pylist(),
                                   table.column("kind").to_pylist(), strict=True)} == partitions
