"""Spark speculation for real: a standalone Spark cluster on this machine with its two
workers on two loopback hosts (127.0.0.2 and 127.0.0.3 — Spark never runs a
speculative copy on the host that runs the original), `spark.speculation=true`, and
partition 1's first attempt a straggler (tests/spark/faults.py: a handshake, so the
straggler has stored half its rows before the copy claims, and writes again after the
copy's first batch, however loaded the machine). Fenced: the copy takes the partition
over, the straggler's next write is refused by the sink, the output is exactly once. The
plain write beside it shows what speculation does without the fence: the straggler's
rows stay. A third write has the straggler seal its partition before the copy starts:
first committer wins, the copy writes nothing, the job succeeds with the straggler's
rows (where a copy that took over would leave the driver a straggler it cannot
publish)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coord.testing.ports import free_port
from tests.conftest import require_java
from tests.spark.faults import TIMED_OUT

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("127.0.0.2", "127.0.0.3")


def _spark_class(*args: str) -> list[str]:
    import pyspark

    return [str(Path(pyspark.__file__).parent / "bin" / "spark-class"), *args]


def _wait_for(path: Path, texts: list[str], proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = path.read_text(errors="replace") if path.exists() else ""
        if all(t in log for t in texts):
            return
        if proc.poll() is not None:
            pytest.fail(f"{path.name}: exited {proc.returncode}:\n{log[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"{path.name}: not {texts} within {timeout}s")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[str]:
    """A Spark master on 127.0.0.1 and one 1-core worker on each of HOSTS."""
    require_java()
    import pyspark

    work = tmp_path_factory.mktemp("spark-standalone")
    env = dict(os.environ, SPARK_HOME=str(Path(pyspark.__file__).parent),
               SPARK_LOCAL_DIRS=str(work / "local"), PYSPARK_PYTHON=sys.executable)
    port = free_port()
    procs: list[subprocess.Popen] = []
    try:
        log = work / "master.log"
        master = subprocess.Popen(
            _spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(free_port())),
            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
        procs.append(master)
        _wait_for(log, ["Starting Spark master"], master, 120)
        for host in HOSTS:
            w_log = work / f"worker-{host}.log"
            procs.append(subprocess.Popen(
                _spark_class("org.apache.spark.deploy.worker.Worker", "--host", host,
                             "--cores", "1", "--memory", "1g",
                             "--webui-port", str(free_port()),
                             "--work-dir", str(work / f"w-{host}"),
                             f"spark://127.0.0.1:{port}"),
                stdout=w_log.open("w"), stderr=subprocess.STDOUT, env=env))
        _wait_for(log, [f"Registering worker {h}" for h in HOSTS], master, 120)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


# slow (make test-slow): a Spark session of its own with speculation on; the fence that
# stops the straggler is the one test_spark_writer.py's zombie test and test_sinks.py's
# racing processes test in the suite
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.spark
def test_a_speculative_copy_fences_the_straggler_and_the_output_is_exactly_once(
        standalone, etcd_cluster3, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.speculation_job", standalone,
         ",".join(etcd_cluster3.endpoints), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    for run in ("on", "off", "sealed"):
        timed_out = tmp_path / run / TIMED_OUT
        assert not timed_out.exists(), f"{run}: {timed_out.read_text()}"
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    fenced, plain = out["on"], out["off"]
    print(f"\nspeculation, 4,000 rows in 2 partitions: fenced {fenced['rows']} rows "
          f"({fenced['rows'] - fenced['unique']} duplicates), refusals "
          f"{fenced['refusals']}; plain df.write {plain['rows']} rows "
          f"({plain['rows'] - plain['unique']} duplicates)")
    assert fenced["second_attempt"] and plain["second_attempt"]  # Spark speculated
    assert fenced["all"] and fenced["rows"] == 4000
    assert fenced["refusals"] and {r[0] for r in fenced["refusals"]} == {1}
    assert all(r[2].startswith("FENCED") for r in fenced["refusals"]), fenced["refusals"]
    assert plain["unique"] == 4000 and plain["rows"] > 4000  # the straggler's rows stay
    sealed = out["sealed"]
    print(f"speculation after the straggler sealed: {sealed['rows']} rows, published "
          f"attempts (partition: producer epoch) {sealed['published_epochs']}")
    assert sealed["second_attempt"] and sealed["all"] and sealed["rows"] == 4000
    assert sealed["refusals"] == []
    assert sealed["published_epochs"] == {"0": 0, "1": 0}  # the straggler's own rows
