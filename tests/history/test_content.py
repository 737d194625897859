"""The exact content of an exported history: a seeded synth written through the sink
reads back with every column's values as the pipeline wrote them before any change to
its speed (a digest per column, so a failure names the column), whether the replayer is
handed the synthesizer's commands as objects or as the encoded entries a member's log
holds (the offline export's path)."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from coord.history.replay import NORMAL, Replayer
from coord.history.schema import PARTITION_COLUMNS, arrow_schema
from coord.history.sink import HistorySink, committed_files
from coord.history.synth import synthesize
from coord.server.storage.log_format import entry_data
from coord.sm import commands as c

ROWS = 5_823
DIGESTS = {
    "revision": "6afcb584c0b6acb8",
    "index": "cfd750eca426e23d",
    "seq": "1ee255c2ed0e630f",
    "term": "44801dca8c5e156d",
    "leader": "2ab9ac6ec8565515",
    "time_ms": "e7d09220ff3b7937",
    "kind": "5312c61b6ee61214",
    "ok": "1a82cbf8a01943bd",
    "error": "02344c597872f7b1",
    "request_id": "8225cabe28af4574",
    "session": "49d7910297c6f5ce",
    "group": "092b5594e17ccd6d",
    "resource": "d90ac90653256b47",
    "generation": "6d4148f29d605447",
    "owner": "348f9bce4b91caf0",
    "pid": "c3d60b3363c29e0a",
    "size": "69557be15b25622d",
    "epoch": "e407d734a043d4fd",
    "sequence": "4fe4ce91ccaa110f",
    "expire_ms": "b35bd3902679332f",
    "topic": "524b088c721c5cb6",
    "partition": "d7f7c8671a5dd26c",
    "key": "a39d8c3973b718a4",
    "value_len": "b98f4af1d552bdda",
    "value_hash": "182b4ee1a280359f",
    "ttl_ms": "82632782b617109a",
    "member": "49aa04fbc271cac1",
    "date": "b017c761da91594d",
}
NONE = "9e5f6be4c798d162"  # a column no row of this history fills (all None)


def _encoded(self: Replayer, index: int, term: int, time_ms: int, cmd: c.Command):
    """The replayer fed the entry a member's log would hold for the command."""
    return self.apply(index, term, NORMAL, entry_data(time_ms, c.encode_command(cmd)))


@pytest.mark.parametrize("path", ["decoded", "encoded"])
def test_every_column_of_a_seeded_history_reads_back_unchanged(tmp_path, monkeypatch, path):
    if path == "encoded":
        monkeypatch.setattr(Replayer, "apply_decoded", _encoded)
    out = tmp_path / "h"
    HistorySink(out).write(synthesize(3_000, seed=4))
    _, files = committed_files(out)
    schema = arrow_schema()
    table = ds.dataset(files, schema=schema, format="parquet", partition_base_dir=str(out),
                       partitioning=ds.partitioning(
                           pa.schema([schema.field(p) for p in PARTITION_COLUMNS]),
                           flavor="hive")).to_table()
    table = table.sort_by([("index", "ascending"), ("seq", "ascending")])
    assert table.num_rows == ROWS
    digests = {name: hashlib.sha256(repr(table.column(name).to_pylist()).encode())
               .hexdigest()[:16] for name in table.column_names}
    assert {n: d for n, d in digests.items() if d != NONE} == DIGESTS
