"""A Parquet writer partitioned by date and kind that holds a bounded number of rows.

`pyarrow.dataset.write_dataset` buffers rows per open partition until a row group fills,
so with many partitions its memory grows with the history. This writer keeps one
`ParquetWriter` per open (date, kind) file and buffers rows column by column (a list of
values per column is a fraction of a row dict's size); when the rows buffered across all
partitions pass `buffer_rows` it writes out the largest buffer, so memory stays bounded
whatever the number of partitions. A row is first only appended to its partition's short
list of pending rows, which is turned into columns `CHUNK_ROWS` at a time, one list
comprehension per column (a per-row loop over every column was the writer's main cost);
all partitions' pending rows are when `pending_rows` wait, so few are ever held as dicts.
A file is closed and the next one started at `file_rows`, which also bounds the
row-group metadata an open file holds. The layout is the hive one pyarrow writes
(`date=D/kind=K/part-RUN-I.parquet`, partition columns in the path, not in the file), so
readers of either see the same dataset.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from coord.history.schema import PARTITION_COLUMNS, arrow_schema

if TYPE_CHECKING:  # the child process writing Parquet imports this, not the machine
    from coord.history.rows import Row

GROUP_ROWS = 65_536        # a partition's buffer is written as a row group at this size
BUFFER_ROWS = 131_072      # rows buffered across all partitions at most
FILE_ROWS = 1 << 20        # rows per file before it is closed and the next begun
CHUNK_ROWS = 1_024         # a partition's pending row dicts are turned into columns at this
PENDING_ROWS = 16_384      # row dicts pending across all partitions at most (many partitions
                           # of a few rows each would otherwise hold every row as a dict)


class PartitionedParquetWriter:
    """Writes rows into `out/date=D/kind=K/part-RUN-I.parquet`; `close()` flushes."""

    def __init__(self, out: Path, run: str, *, group_rows: int = GROUP_ROWS,
                 buffer_rows: int = BUFFER_ROWS, file_rows: int = FILE_ROWS,
                 pending_rows: int = PENDING_ROWS) -> None:
        import pyarrow as pa

        self.out, self.run = out, run
        self.group_rows, self.buffer_rows, self.file_rows = group_rows, buffer_rows, file_rows
        self.max_pending = pending_rows
        full = arrow_schema()
        self._schema = pa.schema([f for f in full if f.name not in PARTITION_COLUMNS],
                                 metadata=full.metadata)
        self._names = self._schema.names
        self._buffers: dict[tuple[str, str], list[list[Any]]] = {}
        self._pending: dict[tuple[str, str], list[Row]] = {}  # rows not yet in columns
        self._counts: dict[tuple[str, str], int] = {}  # rows buffered per partition
        self.pending_rows = 0  # rows still held as dicts (what tests check)
        self._writers: dict[tuple[str, str], Any] = {}
        self._file_rows: dict[tuple[str, str], int] = {}
        self._next_file = 0
        self.buffered = 0
        self.max_buffered = 0  # the most rows ever buffered at once (what tests check)
        self.files: list[Path] = []

    def add_rows(self, rows: Iterable[Row]) -> None:
        """Buffer `rows`, in order: one loop over them all, with no call per row beyond
        appending it to its partition's pending list (a call per row for the row and a
        few more for its partition's lookups were a measurable part of a synth's CPU)."""
        pendings, counts = self._pending, self._counts
        for row in rows:
            key = (row["date"], row["kind"])
            if key in pendings:
                pending = pendings[key]
            else:
                pending = pendings[key] = []
            pending.append(row)
            self.pending_rows += 1
            count = counts[key] = counts[key] + 1 if key in counts else 1
            self.buffered += 1
            if self.buffered > self.max_buffered:
                self.max_buffered = self.buffered
            if count >= self.group_rows:
                self._flush(key)
            elif self.buffered >= self.buffer_rows:
                self._flush(max(counts, key=counts.__getitem__))
            elif len(pending) >= CHUNK_ROWS:
                self._columnize(key)
            elif self.pending_rows >= self.max_pending:
                for k in list(pendings):
                    self._columnize(k)

    def _columnize(self, key: tuple[str, str]) -> list[list[Any]]:
        """The partition's buffer as columns, its pending rows moved into them."""
        pending = self._pending.pop(key, [])
        self.pending_rows -= len(pending)
        cols = self._buffers.get(key)
        if cols is None:
            cols = self._buffers[key] = [[] for _ in self._names]
        # a partition is one kind: its rows fill the same few columns, the rest are None;
        # a filled column is read from every row by one C loop (no Python call per row,
        # and no object per row for the collector to count)
        filled = set().union(*pending)
        nones = [None] * len(pending)
        for values, name in zip(cols, self._names, strict=True):
            values += map(dict.get, pending, repeat(name)) if name in filled else nones
        return cols

    def close(self) -> None:
        """Write what is buffered and close every file (the files are complete then)."""
        for key in list(self._counts):
            self._flush(key)
        for key in list(self._writers):
            self._close_file(key)

    def abort(self) -> None:
        """Close the files without writing the buffers (the run is being thrown away)."""
        self._buffers.clear()
        self._pending.clear()
        self.pending_rows = 0
        self._counts.clear()
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _flush(self, key: tuple[str, str]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = self._columnize(key)
        del self._buffers[key], self._counts[key]
        n = len(cols[0])
        self.buffered -= n
        start = 0
        while start < n:
            writer = self._writers.get(key)
            if writer is None:
                path = (self.out / f"date={quote(key[0], safe='')}"
                        / f"kind={quote(key[1], safe='')}"
                        / f"part-{self.run}-{self._next_file}.parquet")
                self._next_file += 1
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = self._writers[key] = pq.ParquetWriter(path, self._schema)
                self._file_rows[key] = 0
                self.files.append(path)
            take = min(n - start, self.file_rows - self._file_rows[key])
            table = pa.Table.from_arrays(
                [pa.array(c[start:start + take] if (start or take < n) else c, type=f.type)
                 for c, f in zip(cols, self._schema, strict=True)], schema=self._schema)
            writer.write_table(table, row_group_size=max(take, 1))
            self._file_rows[key] += take
            start += take
            if self._file_rows[key] >= self.file_rows:
                self._close_file(key)

    def _close_file(self, key: tuple[str, str]) -> None:
        self._writers.pop(key).close()
        self._file_rows.pop(key, None)
