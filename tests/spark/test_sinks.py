"""Every fenced sink (SQLite table, PostgreSQL table on a real server, Parquet
directory), without Spark: the same planted zombie writes, duplicate and out-of-order
sends, publishing and re-publishing."""

from __future__ import annotations

import multiprocessing
import uuid

import pyarrow as pa
import pytest

from coord.client.recipes.fence import FencedWriteError, RunFencedError, Token
from coord.spark.attempt import RunCheck
from coord.spark.sinks import PublishError, SealError, Sink, SqlSink, open_sink

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
OLD = Token(1, 7, 0)
NEW = Token(2, 7, 1)


def batch(lo: int, hi: int) -> pa.RecordBatch:
    ids = list(range(lo, hi))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([str(i) for i in ids])],
                           schema=SCHEMA)


KINDS = ["sqlite", "postgres", "parquet"]


def sink_spec(kind: str, request, tmp_path) -> dict[str, str]:
    """The options naming a fresh sink of `kind` (open it with `open_kind`, in any
    process): a PostgreSQL sink is a table of its own on the run's server."""
    if kind == "postgres":
        server = request.getfixturevalue("postgres")
        return {"sink": kind, "url": server.url, "table": f"t_{uuid.uuid4().hex[:12]}"}
    if kind == "sqlite":
        return {"sink": kind, "path": str(tmp_path / "out.db"), "table": "out"}
    return {"sink": kind, "path": str(tmp_path / "out")}


def open_kind(spec: dict[str, str]) -> Sink:
    sink = open_sink(spec)
    if isinstance(sink, SqlSink):
        sink.prepare(SCHEMA)
    return sink


@pytest.fixture(params=KINDS)
def sink(request, tmp_path):
    s = open_kind(sink_spec(request.param, request, tmp_path))
    yield s
    s.close()


def ids(sink: Sink) -> list[int]:
    table = sink.read()
    return sorted(table.column("id").to_pylist()) if table.num_rows else []


def test_nothing_is_visible_until_published(sink):
    sink.append("j", 0, OLD, 0, batch(0, 5))
    sink.seal("j", 0, OLD, 1, 5)
    assert ids(sink) == []
    assert sink.publish("j", 1, {0: (OLD, 5)}, lambda: RunCheck("j", OLD.run, 42))
    assert ids(sink) == list(range(5))
    assert sink.committed_version("j") == 1
    # the publish row carries the driver's run check; the writes, none
    assert [(r["op"], r["run_job"], r["checked_revision"]) for r in sink.log().to_pylist()
            ] == [("append", None, None), ("seal", None, None), ("publish", "j", 42)]


def test_a_zombie_is_refused_and_only_the_winner_is_published(sink):
    sink.append("j", 0, OLD, 0, batch(0, 5))  # the first attempt writes half ...
    sink.append("j", 0, NEW, 0, batch(0, 5))  # ... its replacement starts over
    sink.append("j", 0, NEW, 1, batch(5, 10))
    sink.seal("j", 0, NEW, 2, 10)
    for seq in (1, 2, 0):  # the zombie wakes and sends on, or starts again
        with pytest.raises(FencedWriteError) as e:
            sink.append("j", 0, OLD, seq, batch(5, 10))
        assert e.value.verdict == "FENCED_GENERATION"
    with pytest.raises(FencedWriteError):
        sink.seal("j", 0, OLD, 1, 5)
    refusals = sink.refusals("j")
    # each names the holder it was judged against: the replacement's token
    assert [(r.token, r.sequence, r.verdict, r.held) for r in refusals] == [
        (OLD, 1, "FENCED_GENERATION", NEW), (OLD, 2, "FENCED_GENERATION", NEW),
        (OLD, 0, "FENCED_GENERATION", NEW), (OLD, 1, "FENCED_GENERATION", NEW)]
    with pytest.raises(PublishError):  # the driver naming the zombie publishes nothing
        sink.publish("j", 1, {0: (OLD, 5)})
    assert ids(sink) == [] and sink.committed_version("j") is None
    assert sink.publish("j", 1, {0: (NEW, 10)})
    assert ids(sink) == list(range(10))  # exactly once: the zombie's half is gone


def test_duplicate_sends_store_nothing_and_gaps_are_refused(sink):
    sink.append("j", 0, OLD, 0, batch(0, 3))
    sink.append("j", 0, OLD, 0, batch(0, 3))  # a retried send: already stored
    with pytest.raises(FencedWriteError) as e:
        sink.append("j", 0, OLD, 2, batch(3, 6))
    assert e.value.verdict == "OUT_OF_ORDER_SEQUENCE"
    sink.append("j", 0, OLD, 1, batch(3, 6))
    sink.seal("j", 0, OLD, 2, 6)
    assert sink.publish("j", 1, {0: (OLD, 6)})
    assert ids(sink) == list(range(6))


def test_a_seal_with_the_wrong_row_count_is_refused(sink):
    sink.append("j", 0, OLD, 0, batch(0, 3))
    with pytest.raises(SealError):
        sink.seal("j", 0, OLD, 1, 4)
    assert not sink.fence("j", 0).sealed
    with pytest.raises(PublishError):  # unsealed
        sink.publish("j", 1, {0: (OLD, 3)})
    sink.seal("j", 0, OLD, 1, 3)
    with pytest.raises(PublishError):  # the driver's count disagrees
        sink.publish("j", 1, {0: (OLD, 4)})


def test_a_version_publishes_once(sink):
    sink.append("j", 0, OLD, 0, batch(0, 3))
    sink.seal("j", 0, OLD, 1, 3)
    assert sink.publish("j", 4, {0: (OLD, 3)})
    sink.append("j", 0, NEW, 0, batch(0, 3))  # a whole-job re-run of version 4
    sink.seal("j", 0, NEW, 1, 3)
    assert not sink.publish("j", 4, {0: (NEW, 3)})
    assert not sink.publish("j", 3, {0: (NEW, 3)})
    assert ids(sink) == [0, 1, 2] and sink.committed_version("j") == 4
    assert sink.publish("j", 5, {0: (NEW, 3)})  # the next version appends
    assert ids(sink) == [0, 0, 1, 1, 2, 2]


def test_empty_partitions_and_many_partitions(sink):
    winners = {}
    for p in range(4):
        token = Token(1, 10 + p, 0)
        rows = 0 if p == 2 else 2
        if rows:
            sink.append("j", p, token, 0, batch(10 * p, 10 * p + 2))
        sink.seal("j", p, token, 1 if rows else 0, rows)
        winners[p] = (token, rows)
    assert sink.publish("j", 1, winners)
    assert ids(sink) == [0, 1, 10, 11, 30, 31]


def test_publishing_keeps_an_attempt_that_still_holds_the_fence(sink):
    """Another run of the job is writing partition 1 when this one publishes partition
    0: its rows survive, and it publishes its own version afterwards."""
    sink.append("j", 0, OLD, 0, batch(0, 2))
    sink.seal("j", 0, OLD, 1, 2)
    other = Token(1, 8, 0)
    sink.append("j", 1, other, 0, batch(10, 12))
    sink.seal("j", 1, other, 1, 2)
    sink.append("j", 0, NEW, 0, batch(0, 2))  # the other run took partition 0 too ...
    sink.seal("j", 0, NEW, 1, 2)
    with pytest.raises(PublishError):  # ... so this run cannot publish it
        sink.publish("j", 1, {0: (OLD, 2)})
    sink.discard("j", {0: OLD})  # its abort drops its own attempt only
    assert sink.publish("j", 2, {0: (NEW, 2), 1: (other, 2)})
    assert ids(sink) == [0, 1, 10, 11]


def test_a_later_copy_of_a_sealed_partition_writes_nothing_and_an_older_run_is_refused(sink):
    """Within run 5, the first attempt to seal wins: a later copy's begin changes nothing
    and names it (coord's grant revision kept in the fence row and the log). Run 6 takes
    the partition over; run 5's attempts are then refused."""
    first, copy, newer = (Token(1, 7, 0, 5, 1, revision=40), Token(2, 7, 1, 5, 1, revision=41),
                          Token(3, 7, 2, 6, 1, revision=44))
    assert sink.begin("j", 0, first) is None
    sink.append("j", 0, first, 1, batch(0, 3))
    sink.seal("j", 0, first, 2, 3)
    sealed = sink.begin("j", 0, copy)
    assert sealed is not None and (sealed.token, sealed.rows) == (first, 3)
    assert sink.fence("j", 0).token == first and sink.refusals("j") == []
    assert sink.begin("j", 0, newer) is None  # a newer run is no copy: it takes over
    with pytest.raises(FencedWriteError):
        sink.begin("j", 0, Token(4, 7, 3, 5, 1))  # run 5 again, at a higher generation
    # the refusal names its basis: run 6's attempt, with coord's revision of its grant
    assert [(r.token, r.held) for r in sink.refusals("j")] == [(Token(4, 7, 3, 5, 1), newer)]
    with pytest.raises(RunFencedError, match="run 5 was superseded by the newer run 6"):
        sink.publish("j", 1, {0: (first, 3)})
    sink.seal("j", 0, newer, 1, 0)
    assert sink.publish("j", 1, {0: (newer, 0)}) and ids(sink) == []
    assert [(r["op"], r["revision"]) for r in sink.log().to_pylist()] == [
        ("append", 40), ("append", 40), ("seal", 40), ("append", 44), ("seal", 44),
        ("publish", 44)]


def stored_rows(sink: Sink) -> int | None:
    """Rows a SQL sink stores, published or not (None for another sink)."""
    if not isinstance(sink, SqlSink):
        return None
    return sink._execute(f"SELECT count(*) FROM {sink.table}__rows").fetchone()[0]


def test_a_losing_attempt_interleaved_with_others_loses_exactly_its_rows(sink):
    """Partition 0's zombie and partition 1's attempt write batch by batch in turn, so
    each one's rows lie between the other's (where a sink keeps an attempt's rows by
    their span, the spans overlap). Publishing drops exactly the zombie's rows; an abort
    drops exactly its own attempt's."""
    a, b = Token(1, 9, 0), Token(1, 10, 0)
    sink.append("j", 0, OLD, 0, batch(0, 3))
    sink.append("j", 1, a, 0, batch(100, 103))
    sink.append("j", 0, OLD, 1, batch(3, 6))
    sink.append("j", 0, NEW, 0, batch(0, 3))  # fences OLD
    sink.append("j", 1, a, 1, batch(103, 106))
    sink.append("j", 0, NEW, 1, batch(3, 6))
    sink.seal("j", 0, NEW, 2, 6)
    sink.seal("j", 1, a, 2, 6)
    assert stored_rows(sink) in (None, 18)
    assert sink.publish("j", 1, {0: (NEW, 6), 1: (a, 6)})
    assert ids(sink) == [*range(6), *range(100, 106)]
    assert stored_rows(sink) in (None, 12)
    sink.append("j", 2, b, 0, batch(200, 202))  # version 2: b is aborted, a2 is not
    sink.append("j", 3, a, 0, batch(300, 302))
    sink.append("j", 2, b, 1, batch(202, 204))
    sink.discard("j", {2: b})
    assert stored_rows(sink) in (None, 14)
    sink.seal("j", 3, a, 1, 2)
    assert sink.publish("j", 2, {3: (a, 2)})
    assert ids(sink) == [*range(6), *range(100, 106), 300, 301]


def test_discard_drops_unpublished_rows(sink, tmp_path):
    sink.append("j", 0, OLD, 0, batch(0, 3))
    sink.seal("j", 0, OLD, 1, 3)
    sink.discard("j", {0: OLD})
    if isinstance(sink, SqlSink):
        assert stored_rows(sink) == 0
    else:
        assert not list((tmp_path / "out" / "_coord" / "attempts").rglob("*.parquet"))


def _racer(spec: dict[str, str], token: Token, n: int, out, started, wait_for) -> None:
    if wait_for is not None:
        assert wait_for.wait(30)
    sink = open_kind(spec)
    accepted = 0
    for seq in range(n):
        try:
            sink.append("j", 0, token, seq, batch(seq, seq + 1))
            accepted += 1
        except FencedWriteError:
            break
        if accepted == 5:
            started.set()
    out.put((token.epoch, accepted))


@pytest.mark.parametrize("kind", KINDS)
def test_two_processes_racing_cannot_both_land_rows_after_the_takeover(kind, request,
                                                                        tmp_path):
    """The zombie is writing from one process when its replacement starts in another:
    the zombie is cut off at its first write after the takeover, and only the
    replacement's rows are published."""
    spec = sink_spec(kind, request, tmp_path)
    open_kind(spec).close()
    ctx = multiprocessing.get_context("fork")
    out, started, unused = ctx.Queue(), ctx.Event(), ctx.Event()
    zombie = ctx.Process(target=_racer, args=(spec, OLD, 20_000, out, started, None))
    zombie.start()
    replacement = ctx.Process(target=_racer,
                              args=(spec, NEW, 50, out, unused, started))
    replacement.start()
    for p in (zombie, replacement):
        p.join(120)
        assert p.exitcode == 0
    got = dict(out.get(timeout=5) for _ in range(2))
    assert got[NEW.epoch] == 50 and 5 <= got[OLD.epoch] < 20_000
    sink = open_kind(spec)
    assert [(r.token, r.sequence) for r in sink.refusals("j")] == [(OLD, got[OLD.epoch])]
    sink.seal("j", 0, NEW, 50, 50)
    assert sink.publish("j", 1, {0: (NEW, 50)})
    assert ids(sink) == list(range(50))
