"""The ownership checker's sink checks, through the chaos workload's own write path on a
real member: an owner whose session expired writes with its old token after the new
owner wrote. The fenced sink refuses it and the checker passes; a sink that does not
check (the `unfenced-sink` plant) accepts it and the checker must say so."""

from __future__ import annotations

import pytest

from coord.chaos.recorder import Process, Recorder
from coord.chaos.sink import FencedSink
from coord.chaos.workloads import Ownership
from coord.check.oplog import read_jsonl
from coord.check.ownership import check_ownership
from coord.client import Client
from coord.testing import LocalCluster
from tests.cut_off import wait_until

pytestmark = pytest.mark.cluster


def _zombie_writes_after_the_new_owner(client: Client, sink: FencedSink, resource: str,
                                       path) -> list[dict]:
    """s1 owns `resource` and writes; its session expires (TTL 1 s, no keepalive); s2
    owns it and writes; s1 writes again with its old token."""
    workload = Ownership(sink, ttl=1.0)
    recorder = Recorder(path)
    zombie, owner = Process(recorder, 0, 2), Process(recorder, 1, 2)

    def claim(proc: Process):
        session = client.open_session("chaos", workload.ttl).session_id
        common = {"group": workload.group, "resource": resource, "session": session}
        return common, workload._own(proc, client, common)

    old, old_grant = claim(zombie)
    assert old_grant is not None
    workload.write(zombie, old, old_grant, 0)
    taken: list = []
    wait_until("s1 expired and s2 owns the resource",
               lambda: bool(taken.append(claim(owner)) or taken[-1][1]), timeout=30)
    new, new_grant = taken[-1]
    assert new_grant.generation > old_grant.generation
    workload.write(owner, new, new_grant, 0)
    workload.write(zombie, old, old_grant, 1)
    recorder.close()
    return read_jsonl(path)


def test_the_checker_catches_the_older_token_a_sink_that_does_not_check_accepts(tmp_path):
    with LocalCluster(1, data_dir=tmp_path / "d") as cluster, \
            Client(cluster.endpoints, timeout=5) as client:
        fenced = _zombie_writes_after_the_new_owner(client, FencedSink(), "r0",
                                                    tmp_path / "fenced.jsonl")
        unfenced = _zombie_writes_after_the_new_owner(client, FencedSink(fencing=False),
                                                      "r1", tmp_path / "unfenced.jsonl")
    r = check_ownership(fenced)
    assert r.ok and r.stats["refused_writes"] == 1
    r = check_ownership(unfenced)
    assert r.verdict == "illegal" and r.count == 1
    assert "the sink accepted older token" in r.violations[0]["message"]
