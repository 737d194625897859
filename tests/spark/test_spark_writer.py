"""The coord-fenced writer under real Spark (local[2]) against a real 3-member coord
cluster: a task killed mid-write, a zombie attempt woken after its replacement committed,
whole-job re-runs, two overlapping runs of one job, coord's leader killed mid-job, a
restarted streaming query and one whose checkpoint was reset, and a job over TLS (a
member that requires client certificates). Each
fault is also run against the plain (unfenced) write to the same sink, and both counts
are printed: what the fence prevents, measured in the same run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from coord.client import Client
from coord.spark.attempt import RUN, group_of
from coord.spark.jobs import committed_version, version_key
from coord.spark.sinks import ParquetDirSink, SqliteSink
from tests.spark.faults import HELD, RELEASED

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

N = 16_000
PARTS = 8  # spark.range splits ids evenly: partition p holds [p * N/PARTS, (p+1) * N/PARTS)


def frame(spark, n: int = N, parts: int = PARTS):
    return spark.range(0, n, numPartitions=parts).selectExpr("id", "cast(id as string) as s")


def fenced(df, cluster, job: str, **options: str):
    w = (df.write.format(options.pop("format", "coord-fenced")).mode("append")
         .option("endpoints", ",".join(cluster.endpoints)).option("job", job))
    for k, v in options.items():
        w = w.option(k, v)
    return w


def ids(sink) -> list[int]:
    table = sink.read()
    return sorted(table.column("id").to_pylist()) if table.num_rows else []


def report(what: str, fenced_ids: list[int], plain_ids: list[int], expected: int) -> None:
    extra = len(plain_ids) - len(set(plain_ids))
    print(f"\n{what}: expected {expected} rows; fenced: {len(fenced_ids)} rows "
          f"({len(fenced_ids) - len(set(fenced_ids))} duplicates); plain df.write: "
          f"{len(plain_ids)} rows ({extra} duplicates, "
          f"{expected - len(set(plain_ids))} lost)")


def test_a_task_killed_mid_write_is_written_once(spark, coord3, tmp_path):
    df = frame(spark)
    faulty = dict(format="coord-fenced-faulty", fail_partition="3", fail_after_rows="1000",
                  sink="sqlite", table="out")
    fenced(df, coord3, "killed", version="1", path=str(tmp_path / "f.db"), **faulty).save()
    fenced(df, coord3, "killed", fence="off", path=str(tmp_path / "p.db"), **faulty).save()
    f, p = SqliteSink(str(tmp_path / "f.db"), "out"), SqliteSink(str(tmp_path / "p.db"), "out")
    report("task killed after 1000 of 2000 rows", ids(f), ids(p), N)
    assert ids(f) == list(range(N))
    assert len(ids(p)) == N + 1000  # the plain write kept the dead attempt's rows
    # partition 3 was published from its second attempt (producer epoch 1), the rest
    # from their first
    epochs = dict(f._db.execute("SELECT partition, epoch FROM out__attempts "
                                "WHERE published_version = 1").fetchall())
    assert epochs == {p: (1 if p == 3 else 0) for p in range(PARTS)}


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _start_zombie(coord3, options: dict, paused: Path) -> subprocess.Popen:
    """A task attempt of partition 2 outside Spark: sends 1000 of its 2000 rows, then
    SIGSTOPs itself (and with it its session's keepalives)."""
    lo = 2 * N // PARTS
    opts = dict(options, endpoints=",".join(coord3.endpoints), ttl="2")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.faults", json.dumps(opts), "2", str(lo),
         str(lo + N // PARTS), "500", str(paused)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    deadline = time.monotonic() + 60
    while not (paused.exists() and _stopped(proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, "the zombie never paused"
        time.sleep(0.05)
    return proc


def _wake(proc: subprocess.Popen) -> dict:
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def test_a_zombie_attempt_woken_after_its_replacement_committed_is_refused(
        spark, coord3, tmp_path):
    df = frame(spark)
    base = {"job": "zombie", "sink": "sqlite", "table": "out"}
    f_opts = dict(base, path=str(tmp_path / "f.db"))
    zombie = _start_zombie(coord3, f_opts, tmp_path / "f.paused")
    fenced(df, coord3, "zombie", version="1", **{k: v for k, v in f_opts.items()
                                                  if k != "job"}).save()
    woke = _wake(zombie)
    # its first write after waking (sequence 0 was its begin, 1-2 its first 1,000 rows)
    assert woke == {"refused": "FENCED_GENERATION", "sequence": 3}

    p_opts = dict(base, path=str(tmp_path / "p.db"), fence="off")
    zombie = _start_zombie(coord3, p_opts, tmp_path / "p.paused")
    fenced(df, coord3, "zombie", **{k: v for k, v in p_opts.items() if k != "job"}).save()
    assert _wake(zombie) == {"rows": 2000}

    f, p = SqliteSink(f_opts["path"], "out"), SqliteSink(p_opts["path"], "out")
    report("zombie attempt of partition 2 woken after the job committed", ids(f), ids(p), N)
    assert ids(f) == list(range(N))
    assert len(ids(p)) == N + 2000
    refusals = f.refusals("zombie")
    assert [(r.partition, r.sequence, r.verdict) for r in refusals] == [
        (2, 3, "FENCED_GENERATION")]


@pytest.mark.slow
def test_rerunning_a_published_version_is_a_no_op(spark, coord3, tmp_path):
    df = frame(spark, 4000, 4)
    w = fenced(df, coord3, "rerun", version="7", sink="parquet", path=str(tmp_path / "out"))
    w.save()
    sink = ParquetDirSink(str(tmp_path / "out"))
    assert ids(sink) == list(range(4000))
    with Client(coord3.endpoints) as client:
        assert committed_version(client, "rerun") == 7
        w.save()  # a whole-job retry
        assert ids(sink) == list(range(4000))
        # a driver lost between publishing and recording in coord: the sink remembers
        client.delete(version_key("rerun"))
        w.save()
        assert ids(sink) == list(range(4000))
        assert committed_version(client, "rerun") == 7  # caught up
        fenced(df, coord3, "rerun", version="8", sink="parquet",
               path=str(tmp_path / "out")).save()
        assert ids(sink) == sorted(list(range(4000)) * 2)
    assert sink.committed_version("rerun") == 8
    # without a version coord could not tell this re-run from new data: refused
    with pytest.raises(Exception, match="option version is required"):
        fenced(df, coord3, "rerun", sink="parquet", path=str(tmp_path / "out")).save()
    assert ids(sink) == sorted(list(range(4000)) * 2)


def test_an_older_run_overtaken_by_a_newer_one_fails_naming_it(spark, coord3, tmp_path):
    """Run A is planned (its run started) and its task held before it writes; run B of
    the same job and version starts, writes and publishes; A is released. A must fail
    naming B, not report success: B's rows are published once."""
    db, markers = str(tmp_path / "f.db"), tmp_path / "markers"
    markers.mkdir()
    older = fenced(frame(spark, 2000, 1), coord3, "overlap", format="coord-fenced-held",
                   version="1", sink="sqlite", path=db, table="out", markers=str(markers))
    failure: list[str] = []

    def run_older() -> None:
        # Spark looks a Python data source up in the calling JVM thread's session
        type(spark)._get_j_spark_session_class(spark._jvm).setActiveSession(
            spark._jsparkSession)
        try:
            older.save()
        except Exception as e:  # reported by the test below
            failure.append(str(e))

    thread = threading.Thread(target=run_older)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not (markers / HELD).exists():
            assert thread.is_alive(), f"the older run ended before it was held: {failure}"
            assert time.monotonic() < deadline, "the older run's task was never held"
            time.sleep(0.05)
        fenced(frame(spark, 2000, 2), coord3, "overlap", version="1", sink="sqlite",
               path=db, table="out").save()
    finally:
        (markers / RELEASED).touch()
        thread.join(240)
    assert not thread.is_alive()
    with Client(coord3.endpoints) as client:
        newer = client.get_owner(group_of("overlap"), RUN).generation
    assert failure, "the older run reported success"
    assert f"run {newer - 1} was superseded by the newer run {newer}" in failure[0]
    assert ids(SqliteSink(db, "out")) == list(range(2000))


@pytest.mark.slow
def test_streaming_restart_neither_drops_nor_repeats_a_batch(spark, coord3, tmp_path):
    def add_file(source: Path, i: int) -> None:
        rows = [json.dumps({"id": i * 100 + k, "s": f"f{i}"}) for k in range(100)]
        tmp = tmp_path / f".{i}.json"
        tmp.write_text("\n".join(rows) + "\n")
        tmp.rename(source / f"{i}.json")

    def run(fence: str, source: Path, db: str, checkpoint: str) -> None:
        q = (spark.readStream.schema("id long, s string").option("maxFilesPerTrigger", 1)
             .json(str(source)).writeStream.format("coord-fenced")
             .option("endpoints", ",".join(coord3.endpoints)).option("job", f"stream-{fence}")
             .option("sink", "sqlite").option("path", db).option("table", "out")
             .option("fence", fence).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None

    counts = {}
    for fence in ("on", "off"):
        source, ck = tmp_path / f"in-{fence}", tmp_path / f"ck-{fence}"
        db = str(tmp_path / f"{fence}.db")
        source.mkdir()
        for i in range(3):
            add_file(source, i)
        run(fence, source, db, str(ck))  # micro-batches 0, 1, 2: one file each
        # the query dies after the sink committed batch 2 but before its checkpoint did
        for name in ("2", ".2.crc"):  # the commit and its checksum file
            (ck / "commits" / name).unlink()
        add_file(source, 3)  # and data arrives meanwhile
        run(fence, source, db, str(ck))  # restarted: Spark replays batch 2, then runs 3
        counts[fence] = ids(SqliteSink(db, "out"))
    report("streaming query restarted after batch 2 reached the sink (then one more "
           "batch)", counts["on"], counts["off"], 400)
    assert counts["on"] == list(range(400))
    # the plain sink has the replayed batch twice: one file's 100 rows (which file went
    # into batch 2 is Spark's choice among files of equal age)
    off = counts["off"]
    assert len(off) == 500 and set(off) == set(range(400))
    twice = sorted({i for i in off if off.count(i) == 2})
    assert len(twice) == 100 and twice[0] % 100 == 0 and twice == list(
        range(twice[0], twice[0] + 100))


def test_a_reset_checkpoint_under_the_same_job_name_drops_no_batch(spark, coord3, tmp_path):
    """A query writes micro-batches 0 and 1; its checkpoint is deleted and the query
    started again under the same job name with one more file: the new query (a new query
    id) reads all three files as its batches 0, 1 and 2 and publishes each — a reset
    checkpoint reprocesses its input, as with any sink — instead of taking batches 0 and
    1 for replays of the old query's and dropping them."""
    source, ck, db = tmp_path / "in", tmp_path / "ck", str(tmp_path / "f.db")
    source.mkdir()

    def add_file(i: int) -> None:
        tmp = tmp_path / f".{i}.json"
        tmp.write_text("".join(json.dumps({"id": i * 100 + k, "s": f"f{i}"}) + "\n"
                               for k in range(100)))
        tmp.rename(source / f"{i}.json")

    def run() -> None:
        q = (spark.readStream.schema("id long, s string").option("maxFilesPerTrigger", 1)
             .json(str(source)).writeStream.format("coord-fenced")
             .option("endpoints", ",".join(coord3.endpoints)).option("job", "stream-reset")
             .option("sink", "sqlite").option("path", db).option("table", "out")
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None

    for i in range(2):
        add_file(i)
    run()
    shutil.rmtree(ck)
    add_file(2)
    run()
    assert ids(SqliteSink(db, "out")) == sorted(list(range(200)) * 2 + list(range(200, 300)))


@pytest.mark.slow
def test_a_job_over_tls_takes_the_cacert_cert_and_key_options(spark, tls_member, tmp_path):
    """Against a member that requires client certificates: the options reach the
    driver's client and each executor's, and the version is published; without the CA
    that signed the member's certificate the driver is refused before any task runs."""
    tls = tls_member.client_tls
    df, db = frame(spark, 2_000, 2), str(tmp_path / "f.db")
    fenced(df, tls_member, "tls", version="1", sink="sqlite", path=db, table="out",
           cacert=tls.cacert, cert=tls.cert, key=tls.key).save()
    assert ids(SqliteSink(db, "out")) == list(range(2_000))
    with Client(tls_member.endpoints, tls=tls) as client:
        assert committed_version(client, "tls") == 1
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        fenced(df, tls_member, "tls-no-ca", version="1", sink="sqlite", path=str(tmp_path / "n.db"),
               table="out", cert=tls.cert, key=tls.key).save()
    assert ids(SqliteSink(str(tmp_path / "n.db"), "out")) == []


@pytest.mark.slow
def test_coord_leader_killed_mid_job_still_writes_once(spark, coord3, tmp_path):
    """Last in the module: it kills a member (restarted afterwards). The job runs on the
    test's thread (Spark looks data sources up in the calling thread's session); a
    watcher kills the leader once the first rows reached the sink."""
    db = str(tmp_path / "f.db")
    sink = SqliteSink(db, "out")
    killed: list[str] = []
    stop = threading.Event()

    def kill_leader_once_writing() -> None:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            if any(sink.fence("leader", p) for p in range(PARTS)):
                leader = coord3.wait_for_leader()
                coord3.kill(leader)
                killed.append(leader)
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_leader_once_writing)
    watcher.start()
    try:
        fenced(frame(spark), coord3, "leader", version="1", sink="sqlite", path=db,
               table="out").save()
    finally:
        stop.set()
        watcher.join(10)
    assert len(killed) == 1, "the leader was not killed while the job ran"
    assert ids(sink) == list(range(N))
    coord3.restart(killed[0])
