"""The etcd3-suite runner's reading of pytest's JUnit XML and its comparison of two
servers' outcomes (coord.testing.etcd3_suite.outcomes); the run itself needs a download
and is `make etcd3-suite`."""

from __future__ import annotations

from coord.testing.etcd3_suite.outcomes import (
    FAIL,
    PASS,
    SKIP,
    Outcome,
    read_junit,
    regressions,
    table,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_etcd3.TestEtcd3" name="test_ok" time="0.1"/>
<testcase classname="tests.test_etcd3.TestEtcd3" name="test_bad" time="0.1">
  <failure message="assert 1 == 3">long traceback</failure></testcase>
<testcase classname="tests.test_etcd3.TestAlarms" name="test_rpc" time="0.1">
  <failure message="grpc._channel._InactiveRpcError: &lt;_InactiveRpcError of RPC that
  terminated with:&#10;&#09;status = StatusCode.UNIMPLEMENTED&#10;&#09;details =
  &quot;etcdserver: no&quot;&#10;&gt;">tb</failure></testcase>
<testcase classname="tests.test_etcd3.TestAlarms" name="test_setup" time="0.1">
  <error message="failed on setup with &quot;ModuleNotFoundError&quot;">tb</error></testcase>
<testcase classname="tests.test_etcd3.TestEtcd3" name="test_later" time="0.1">
  <skipped type="pytest.skip" message="needs v3.3">skip</skipped></testcase>
<testcase classname="tests.test_etcd3.TestEtcd3" name="test_teardown" time="0.1"/>
<testcase classname="tests.test_etcd3.TestEtcd3" name="test_teardown" time="0.1">
  <error message="failed on teardown with &quot;CalledProcessError&quot;">tb</error></testcase>
</testsuite></testsuites>
"""


def test_junit_outcomes_count_errors_and_teardown_failures_as_failures(tmp_path):
    path = tmp_path / "run.xml"
    path.write_text(JUNIT)
    got = read_junit(path)
    assert {name: o.status for name, o in got.items()} == {
        "TestEtcd3::test_ok": PASS,
        "TestEtcd3::test_bad": FAIL,
        "TestAlarms::test_rpc": FAIL,
        "TestAlarms::test_setup": FAIL,
        "TestEtcd3::test_later": SKIP,
        "TestEtcd3::test_teardown": FAIL,
    }
    assert got["TestEtcd3::test_bad"].message == "assert 1 == 3"
    assert got["TestAlarms::test_rpc"].message == "UNIMPLEMENTED: etcdserver: no"


def test_regressions_are_what_etcd_passes_and_coord_does_not():
    etcd = {"A::a": Outcome(PASS), "A::b": Outcome(PASS), "A::c": Outcome(FAIL),
            "A::d": Outcome(PASS)}
    coord = {"A::a": Outcome(PASS), "A::b": Outcome(FAIL, "UNIMPLEMENTED"),
             "A::c": Outcome(FAIL)}  # A::d did not run on coord
    assert regressions(etcd, coord) == ["A::b", "A::d"]
    text = table(etcd, coord)
    assert "etcd: 3 passed, 1 failed, 0 skipped" in text
    assert "coord: 1 passed, 2 failed, 0 skipped" in text
    assert "coord fails 2 test(s) that etcd passes:" in text
    assert "  A::b: UNIMPLEMENTED" in text and "  A::d: not run" in text
    assert regressions(etcd, etcd) == [] and "coord fails 0 test(s)" in table(etcd, etcd)
