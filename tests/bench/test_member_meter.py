"""`member_meter` and `measured`: CPU per op by role, and coord's snapshots counted from
the members' log lines between two readings."""

from __future__ import annotations

import os

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
