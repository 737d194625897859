"""A snapshot bigger than one transport piece (CHUNK_BYTES, 4 MiB) reaches a follower
that fell behind the leader's log, on real `coord serve` processes: the follower comes
back with every acknowledged write."""

from __future__ import annotations

import json
import os
import time

import pytest

from coord.client import Client
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster


def test_a_follower_catches_up_from_a_snapshot_sent_in_pieces(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=[
            "--snapshot-every", "50", "--auto-compaction-retention", "0"]) as cluster:
        leader = cluster.wait_for_leader()
        behind = next(n for n in cluster.members if n != leader)
        cluster.kill(behind)
        written = {}
        with Client([cluster.members[leader].listen]) as c:
            for i in range(100):  # ~6.4 MB of incompressible values: 2 pieces
                written[f"blob/{i:03d}"] = value = os.urandom(64 * 1024)
                c.put(f"blob/{i:03d}", value)
            head = c.get("blob/099").mod_revision
        assert cluster.status(leader).snapshot_index > 0, "the leader never compacted its log"
        cluster.start_member(behind)
        deadline = time.monotonic() + 60
        while json.loads(cluster.status(behind).state_machine)["revision"] < head:
            assert time.monotonic() < deadline, "the follower did not catch up in 60 s"
            time.sleep(0.2)
        with Client([cluster.members[behind].listen]) as one:
            got = {kv.key.decode(): kv.value
                   for kv in one.range(prefix="blob/", serializable=True).kvs}
        assert got == written
        log = cluster.members[behind].log_path.read_text()
        sizes = [int(line.split("snapshot of ")[1].split()[0]) for line in log.splitlines()
                 if "restored a snapshot of" in line]
        assert sizes and max(sizes) > 4 << 20, f"no snapshot over one piece arrived: {sizes}"
