"""`member_meter` and `measured`: CPU, context switches and a member's own counts per op
by role, and coord's snapshots counted from the members' log lines between two readings."""

from __future__ import annotations

import os
import threading
import time

from coord.bench.footprint import context_switches
from coord.bench.member_cpu import measured, member_meter

LINE = "12:00:00.000 INFO  n1: took a snapshot of 771209 bytes at index 20037 in {:.2f}s\n"


def test_snapshots_are_those_logged_between_the_two_readings(tmp_path):
    logs = {n: tmp_path / f"{n}.log" for n in ("n1", "n2", "n3")}
    logs["n1"].write_text(LINE.format(0.12) + "12:00:01.000 INFO  n1: leader term=2\n")
    logs["n2"].write_text(LINE.format(0.10))
    # n3 has not written its log yet
    pid = os.getpid()
    meter = member_meter({"n1": pid, "n2": pid, "n3": pid}, "n1", logs)
    before = meter()
    with logs["n2"].open("a") as f:
        f.write(LINE.format(0.31))
    logs["n3"].write_text(LINE.format(0.35) + LINE.format(0.05))
    fields = measured(before, meter(), 1000)
    assert fields["snapshots"]["count"] == 3
    assert abs(fields["snapshots"]["seconds"] - 0.71) < 1e-9
    assert set(fields["cpu_us_per_op"]) == {"leader", "follower"}
    assert all(v >= 0 for v in fields["cpu_us_per_op"].values())


def test_without_logs_nothing_is_said_about_snapshots():
    pid = os.getpid()
    meter = member_meter({"a": pid, "b": pid}, "a")
    fields = measured(meter(), meter(), 10)
    assert "snapshots" not in fields
    assert set(fields["cpu_us_per_op"]) == {"leader", "follower"}
    one = member_meter({"floor": pid}, "floor")
    assert set(measured(one(), one(), 10)["cpu_us_per_op"]) == {"leader"}


def test_context_switches_and_member_counts_come_per_op():
    pid = os.getpid()
    counts = {"a": 0, "b": 0}

    def counter(name: str):
        return lambda: {"readies": counts[name]}

    meter = member_meter({"a": pid, "b": pid}, "a", counters={n: counter(n) for n in counts})
    before = meter()
    counts["a"], counts["b"] = 30, 10
    fields = measured(before, meter(), 10)
    per_op = fields["counts_per_op"]
    assert per_op["leader"]["readies"] == 3.0 and per_op["follower"]["readies"] == 1.0
    assert {"vcsw", "ivcsw", "loop_vcsw"} <= set(per_op["leader"])
    assert all(per_op["leader"][k] >= 0 for k in ("vcsw", "ivcsw", "loop_vcsw"))


def test_context_switches_count_a_thread_that_slept():
    pid = os.getpid()
    before = context_switches(pid)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (time.sleep(0.01), done.set()))
    worker.start()
    done.wait(5)
    after = context_switches(pid)
    # the main thread slept waiting for the worker: at least one voluntary switch of it
    assert after[2] > before[2]
    assert after[0] > before[0]
    worker.join(5)
