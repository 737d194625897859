"""`--log-format json` on real `coord serve` processes: every line a JSON object with the
stable fields, one named line per state change an operator needs (an election, read-only
and back, a snapshot taken and one installed, a compaction, a member added), no line
per request at the default level, and a client's request id on the lines its request
caused (a member-local session's open and registration), null on every other."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import grpc
import pytest

from coord.client import Client, NoSpaceError
from coord.server import log_lines
from coord.testing import LocalCluster
from coord.v1 import coord_pb2, coord_pb2_grpc
from tests.cut_off import mode_of, resume_paused, split_off, wait_until

SNAPSHOT_EVERY = 100
RETENTION = 50
FLAGS = ["--log-format", "json", "--snapshot-every", str(SNAPSHOT_EVERY),
         "--auto-compaction-mode", "revision",
         "--auto-compaction-retention", str(RETENTION)]


def json_lines(path: Path) -> list[dict]:
    """Every line of a member's log, each parsed (the test fails naming the first that
    is not a JSON object with the stable fields)."""
    lines = []
    for n, text in enumerate(path.read_text().splitlines(), 1):
        try:
            line = json.loads(text)
        except ValueError:
            pytest.fail(f"{path.name}:{n} is not JSON: {text!r}")
        assert isinstance(line, dict), text
        missing = [f for f in ("ts", "level", "msg", *log_lines.FIELDS) if f not in line]
        assert not missing, f"{path.name}:{n} lacks {missing}: {text!r}"
        lines.append(line)
    return lines


def events(path: Path, name: str) -> list[dict]:
    return [line for line in json_lines(path) if line["event"] == name]


@pytest.fixture
def json_cluster(tmp_path):
    c = LocalCluster(3, data_dir=tmp_path / "cluster", extra_args=FLAGS)
    try:
        yield c.start()
    finally:
        c.stop()


def test_a_json_member_logs_named_state_changes_and_no_line_per_request(json_cluster):
    c = json_cluster
    leader = c.wait_for_leader()
    logs = {n: c.members[n].log_path for n in c.members}

    # The election: the leader's own line names it, with its term; every line of every
    # member parses and carries the member's name.
    wait_until("the leader's election line", lambda: any(
        e["leader"] == leader for e in events(logs[leader], log_lines.LEADER)))
    won = [e for e in events(logs[leader], log_lines.LEADER) if e["leader"] == leader]
    assert [e["msg"] for e in won] == [f"{leader}: leader term={won[0]['term']} leader={leader}"
                                       " quorum=yes"]
    assert won[0]["member"] == leader and won[0]["term"] == c.status(leader).term
    for n, path in logs.items():
        assert {line["member"] for line in json_lines(path)} <= {n, None}
        assert any(line["member"] == n for line in json_lines(path))

    # Requests at the default level: no line at all.
    client = Client(c.endpoints, timeout=5.0)
    try:
        client.put(b"warm", b"up")
        before = {n: len(json_lines(p)) for n, p in logs.items()}
        for i in range(20):
            client.put(f"quiet/{i}".encode(), b"v")
            client.range(f"quiet/{i}".encode())
        after = {n: json_lines(p) for n, p in logs.items()}
        assert {n: len(lines) for n, lines in after.items()} == before, {
            n: lines[before[n]:] for n, lines in after.items()}

        # A snapshot and a compaction: enough writes for both, one named line each.
        for i in range(SNAPSHOT_EVERY + RETENTION):
            client.put(b"churn", str(i).encode())
        wait_until("a compaction line", lambda: events(logs[leader], log_lines.COMPACTION))
        wait_until("a snapshot line", lambda: events(logs[leader], log_lines.SNAPSHOT))
    finally:
        client.close()
    lines = json_lines(logs[leader])
    taken = [line for line in lines if "took a snapshot" in line["msg"]]
    assert taken == events(logs[leader], log_lines.SNAPSHOT)
    compacted = [line for line in lines if "auto-compacted history" in line["msg"]]
    assert compacted == events(logs[leader], log_lines.COMPACTION)
    assert all(e["member"] == leader and e["leader"] == leader for e in compacted)

    # Read-only and back: exactly one mode line each way on the member left alone.
    survivor, others = split_off(c, "follower")
    try:
        for n in others:
            c.pause(n)
        wait_until("read-only", lambda: mode_of(c, survivor) == "read-only")
        wait_until("the read-only line", lambda: events(logs[survivor], log_lines.MODE))
        # A read-only client's opens there: member-local sessions, one with a request id.
        with grpc.insecure_channel(c.members[survivor].listen) as ch:
            stub = coord_pb2_grpc.SessionsStub(ch)
            given, unnamed = (stub.OpenSession(coord_pb2.OpenSessionRequest(
                name=name, ttl_ms=60_000, read_only_ok=True, request_id=rid), timeout=10)
                for name, rid in (("given", "rid-log-lines"), ("unnamed", "")))
        assert given.local and unnamed.local
        for n in others:
            c.resume(n)
        wait_until("read-write", lambda: mode_of(c, survivor) == "read-write")
        wait_until("the read-write line",
                   lambda: len(events(logs[survivor], log_lines.MODE)) >= 2)
    finally:
        resume_paused(c, others)
    # The lines a client's request caused carry its id (its open, and the registration
    # once the member is back in a majority), and only those: no id is made up for the
    # open that gave none, and no state change carries one.
    wait_until("the registrations", lambda: sum(
        "registered with the cluster" in line["msg"] for line in json_lines(logs[survivor]))
        >= 2)
    lines = json_lines(logs[survivor])
    about = {sid: [line for line in lines if f"member-local session {sid} " in line["msg"]]
             for sid in (given.session_id, unnamed.session_id)}
    assert [line["request_id"] for line in about[given.session_id]] == ["rid-log-lines"] * 2
    assert [line["request_id"] for line in about[unnamed.session_id]] == [None, None]
    assert {line["request_id"] for line in lines if line["event"]} == {None}
    modes = events(logs[survivor], log_lines.MODE)
    assert [m["msg"].split(": ", 1)[1].split(" (")[0] for m in modes] == [
        "read-write -> read-only", "read-only -> read-write"]
    assert all(m["member"] == survivor and m["level"] == "warning" for m in modes)

    # Membership: the leader names the member it adds.
    c.add_member("n4")
    wait_until("the membership line", lambda: any(
        "member n4 added as a learner" in e["msg"]
        for e in events(logs[c.wait_for_leader()], log_lines.MEMBER)))
    # n4 starts empty and the log before the snapshot is gone: it installs the snapshot.
    n4 = c.members["n4"].log_path
    wait_until("n4's install line", lambda: events(n4, log_lines.SNAPSHOT_INSTALL))
    installed = events(n4, log_lines.SNAPSHOT_INSTALL)
    assert [line for line in json_lines(n4) if "restored a snapshot" in line["msg"]] == installed
    assert len(installed) == 1


def test_the_nospace_alarm_raised_is_one_alarm_line(tmp_path):
    """The line that clears it is the same call's other branch (server/upkeep/quota.py);
    a single member freed of its data keeps its log's bytes until its next snapshot, so
    it is not waited for here."""
    quota, value = 1_000_000, b"x" * 8192
    with LocalCluster(1, data_dir=tmp_path / "c", extra_args=[
            "--log-format", "json", "--quota-backend-bytes", str(quota),
            "--auto-compaction-retention", "0"]) as c:
        c.wait_for_leader()
        log = c.members["n1"].log_path
        with Client(c.endpoints, timeout=5.0) as client, pytest.raises(NoSpaceError):
            for i in range(2_000):  # ~120 reach the quota; the guard looks every so often
                client.put(f"big/{i:05d}", value)
        wait_until("the raised line", lambda: events(log, log_lines.ALARM), 30)
        alarms = events(log, log_lines.ALARM)
        assert len(alarms) == 1 and "raising NOSPACE" in alarms[0]["msg"], alarms
        assert alarms[0]["level"] == "warning" and alarms[0]["member"] == "n1"


def test_the_json_formatter_stamps_the_bound_member_unless_the_call_site_knows_better():
    """In process: the filter fills member, term and leader from the bound member; a
    call site's `extra=` wins; a line with no member bound has nulls, not missing keys."""
    import contextvars
    import io

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(log_lines.formatter("json"))
    handler.addFilter(log_lines.MemberFieldsFilter())
    logger = logging.getLogger("coord.test_log_lines")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("unbound")

        def member_logs() -> None:
            log_lines.bind_member(lambda: {"member": "m1", "term": 4, "leader": "m2"})
            logger.info("plain %s", "line")
            logger.info("won", extra=log_lines.event(log_lines.LEADER, term=5, leader="m1"))

        contextvars.copy_context().run(member_logs)
        logger.info("unbound again")
    finally:
        logger.removeHandler(handler)
    unbound, plain, won, again = (json.loads(x) for x in out.getvalue().splitlines())
    assert {k: unbound[k] for k in log_lines.FIELDS} == dict.fromkeys(log_lines.FIELDS)
    assert (plain["msg"], plain["member"], plain["term"], plain["leader"], plain["event"]) \
        == ("plain line", "m1", 4, "m2", None)
    assert (won["member"], won["term"], won["leader"], won["event"]) == ("m1", 5, "m1", "leader")
    assert again["member"] is None


def test_text_lines_stay_as_they_were():
    record = logging.LogRecord("coord", logging.INFO, __file__, 1, "%s: stopping", ("m1",),
                               None)
    assert log_lines.formatter("text").format(record).endswith(" INFO  m1: stopping")
