"""coord's etcd v3 API driven by etcd's own command-line client (etcdctl 3.4, Debian's
etcd-client) against real `coord serve` processes: if etcdctl works, the wire format,
the semantics it relies on and the error strings it maps are right."""

from __future__ import annotations

import base64
import json
import re
import signal
import time

import pytest

from coord.client import Client
from coord.testing import LocalCluster
from tests.etcdtools import Background, etcdctl, require_etcdctl

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]


@pytest.fixture(scope="module")
def eps(etcd_cluster3):
    require_etcdctl()
    return etcd_cluster3.etcd_endpoints


def js(eps, *args, **kw) -> dict:
    return json.loads(etcdctl(eps, "-w", "json", *args, **kw).stdout)


def unb64(s: str) -> str:
    return base64.b64decode(s).decode()


def kvs(resp: dict) -> list[tuple[str, str]]:
    return [(unb64(kv["key"]), unb64(kv.get("value", ""))) for kv in resp.get("kvs", [])]


def put_rev(eps, key: str, value: str, *extra: str) -> int:
    return js(eps, "put", key, value, *extra)["header"]["revision"]


def test_put_get_delete_with_etcd_options(eps):
    r1 = put_rev(eps, "g/a", "3")
    put_rev(eps, "g/b", "2")
    put_rev(eps, "g/c", "1")
    put_rev(eps, "g/a", "4")
    got = js(eps, "get", "g/", "--prefix")
    assert kvs(got) == [("g/a", "4"), ("g/b", "2"), ("g/c", "1")] and got.get("count", 0) == 3
    top = js(eps, "get", "g/", "--prefix", "--sort-by=VALUE", "--order=DESCEND", "--limit=2")
    assert kvs(top) == [("g/a", "4"), ("g/b", "2")] and top.get("more") and top.get("count", 0) == 3
    first = js(eps, "get", "g/", "--prefix", "--sort-by=CREATE", "--order=ASCEND", "--limit=1")
    assert kvs(first) == [("g/a", "4")]
    assert kvs(js(eps, "get", "g/a", f"--rev={r1}")) == [("g/a", "3")]
    keys_only = js(eps, "get", "g/", "--prefix", "--keys-only")
    assert [k for k, v in kvs(keys_only)] == ["g/a", "g/b", "g/c"]
    assert all(v == "" for _, v in kvs(keys_only))
    assert kvs(js(eps, "get", "g/b", "g/c")) == [("g/b", "2")]  # [key, range_end)
    assert kvs(js(eps, "get", "g/b", "--from-key")) [:2] == [("g/b", "2"), ("g/c", "1")]
    # Serializable reads on every member, and headers that say who answered.
    headers = [js(ep, "get", "g/a", "--consistency=s")["header"] for ep in eps]
    assert len({h["cluster_id"] for h in headers}) == 1
    assert len({h["member_id"] for h in headers}) == 3
    assert all(h["raft_term"] >= 1 and h["revision"] >= r1 for h in headers)
    out = etcdctl(eps, "del", "g/", "--prefix", "--prev-kv").stdout.split()
    assert out[0] == "3" and out[1:] == ["g/a", "4", "g/b", "2", "g/c", "1"]
    assert js(eps, "get", "g/", "--prefix").get("count", 0) == 0


def test_put_keeps_value_or_lease_when_asked(eps):
    lease = lease_grant(eps, 30)
    etcdctl(eps, "put", "iv/k", "v1", f"--lease={lease:x}")
    etcdctl(eps, "put", "iv/k", "--ignore-value", f"--lease={lease:x}")
    got = js(eps, "get", "iv/k")["kvs"][0]
    assert unb64(got["value"]) == "v1" and got["lease"] == lease and got["version"] == 2
    etcdctl(eps, "put", "iv/k", "--ignore-value")  # no --lease: detached, as in etcd
    assert "lease" not in js(eps, "get", "iv/k")["kvs"][0]
    etcdctl(eps, "put", "iv/k", "v1", f"--lease={lease:x}")
    etcdctl(eps, "put", "iv/k", "v2", "--ignore-lease")
    got = js(eps, "get", "iv/k")["kvs"][0]
    assert unb64(got["value"]) == "v2" and got["lease"] == lease
    bad = etcdctl(eps, "put", "iv/missing", "--ignore-value", check=False)
    assert bad.returncode != 0 and "etcdserver: key not found" in bad.stderr
    bad = etcdctl(eps, "put", "iv/k", "x", "--lease=7fffffff", check=False)
    assert bad.returncode != 0 and "etcdserver: requested lease not found" in bad.stderr
    etcdctl(eps, "lease", "revoke", f"{lease:x}")


def test_txn_compares_and_branches(eps):
    # (etcdctl 3.4 panics parsing its own lease("k") compare; LEASE compares are
    # tested through the wire API in test_etcd_api.py.)
    rev = put_rev(eps, "t/k", "v1")
    script = (f'val("t/k") = "v1"\nver("t/k") = "1"\nc("t/k") = "{rev}"\n'
              f'm("t/k") = "{rev}"\n\nput t/k v2\nget t/k\n\nget t/k\n\n')
    out = etcdctl(eps, "txn", input=script).stdout.split()
    assert out == ["SUCCESS", "OK", "t/k", "v2"]
    out = etcdctl(eps, "txn", input='val("t/k") = "v1"\n\nput t/k v3\n\nget t/k\n\n').stdout
    assert out.split() == ["FAILURE", "t/k", "v2"]
    bad = etcdctl(eps, "txn", input='\nput t/x 1\nput t/x 2\n\n\n', check=False)
    assert bad.returncode != 0
    assert "etcdserver: duplicate key given in txn request" in bad.stderr
    assert js(eps, "get", "t/x").get("count", 0) == 0  # refused: nothing changed


def test_watch_prefix_from_a_revision_with_prev_kv(eps):
    start = put_rev(eps, "w0", "marker") + 1
    watch = Background(eps, "watch", "--prefix", "w/", "--prev-kv", f"--rev={start}",
                       "-w", "json")
    try:
        put_rev(eps, "w/a", "1")
        put_rev(eps, "w/a", "2")
        put_rev(eps, "w/b", "3")
        etcdctl(eps, "del", "w/a")
        events = []
        deadline = time.monotonic() + 20
        while len(events) < 4 and time.monotonic() < deadline:
            line = watch.read_until(lambda s: s.startswith("{"))[-1]
            events += json.loads(line).get("Events") or []
        assert [(("PUT", "DELETE")[e.get("type", 0)], unb64(e["kv"]["key"])) for e in events] == [
            ("PUT", "w/a"), ("PUT", "w/a"), ("PUT", "w/b"), ("DELETE", "w/a")]
        revs = [e["kv"]["mod_revision"] for e in events]
        assert revs == list(range(start, start + 4))
        assert "prev_kv" not in events[0] and unb64(events[1]["prev_kv"]["value"]) == "1"
        assert unb64(events[3]["prev_kv"]["value"]) == "2"
    finally:
        watch.stop()
    # The same history again from the past, key only (no prefix).
    past = Background(eps, "watch", "w/a", f"--rev={start}")
    try:
        lines = past.read_until(lambda s: s == "DELETE")
        assert lines == ["PUT", "w/a", "1", "PUT", "w/a", "2", "DELETE"]
    finally:
        past.stop()


def test_compaction_refuses_old_reads_and_watches(eps):
    r1 = put_rev(eps, "cp/k", "1")
    r2 = put_rev(eps, "cp/k", "2")
    out = etcdctl(eps, "compaction", str(r2)).stdout
    assert f"compacted revision {r2}" in out
    bad = etcdctl(eps, "get", "cp/k", f"--rev={r1}", check=False)
    assert bad.returncode != 0
    assert "etcdserver: mvcc: required revision has been compacted" in bad.stderr
    bad = etcdctl(eps, "get", "cp/k", "--rev=99999999", check=False)
    assert "etcdserver: mvcc: required revision is a future revision" in bad.stderr
    watch = Background(eps, "watch", "cp/k", f"--rev={r1}")
    try:
        line = watch.read_until(lambda s: "compacted" in s)[-1]
        assert "required revision has been compacted" in line
    finally:
        watch.stop()


def lease_grant(eps, ttl: int) -> int:
    out = etcdctl(eps, "lease", "grant", str(ttl)).stdout
    m = re.search(r"lease ([0-9a-f]+) granted with TTL\((\d+)s\)", out)
    assert m, out
    return int(m.group(1), 16)


def test_lease_grant_keepalive_timetolive_list_revoke(eps):
    asked = time.monotonic()
    lease = lease_grant(eps, 20)
    etcdctl(eps, "put", "l/k1", "v", f"--lease={lease:x}")
    etcdctl(eps, "put", "l/k2", "v", f"--lease={lease:x}")
    for ep in eps:  # any member answers, the leader's clock decides
        out = etcdctl(ep, "lease", "timetolive", f"{lease:x}", "--keys").stdout
        m = re.search(r"granted with TTL\(20s\), remaining\((\d+)s\), attached keys\("
                      r"\[l/k1 l/k2\]\)", out)
        # No more than has passed since the grant was asked for is gone (whole seconds).
        assert m and 20 - (time.monotonic() - asked) - 1 <= int(m.group(1)) <= 20, out
    out = etcdctl(eps, "lease", "keep-alive", "--once", f"{lease:x}").stdout
    assert f"lease {lease:016x} keepalived with TTL(20)" in out
    assert f"{lease:016x}" in etcdctl(eps, "lease", "list").stdout
    assert f"lease {lease:016x} revoked" in etcdctl(eps, "lease", "revoke", f"{lease:x}").stdout
    assert js(eps, "get", "l/", "--prefix").get("count", 0) == 0  # its keys went with it
    out = etcdctl(eps, "lease", "timetolive", f"{lease:x}").stdout
    assert f"lease {lease:016x} already expired" in out
    bad = etcdctl(eps, "lease", "revoke", f"{lease:x}", check=False)
    assert "etcdserver: requested lease not found" in bad.stderr


def test_an_unkept_lease_expires_with_its_keys_and_a_kept_one_does_not(eps):
    dying = lease_grant(eps, 1)
    kept = lease_grant(eps, 2)
    etcdctl(eps, "put", "exp/dying", "v", f"--lease={dying:x}")
    etcdctl(eps, "put", "exp/kept", "v", f"--lease={kept:x}")
    keeper = Background(eps, "lease", "keep-alive", f"{kept:x}")
    try:
        keeper.read_until(lambda s: "keepalived" in s)
        granted = time.monotonic()
        deadline = granted + 15
        while js(eps, "get", "exp/dying").get("count", 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert js(eps, "get", "exp/dying").get("count", 0) == 0, "lease did not expire"
        keeper.quiet_for(max(0.0, granted + 5 - time.monotonic()))  # > 2x the kept TTL
        assert js(eps, "get", "exp/kept").get("count", 0) == 1
    finally:
        keeper.stop()


def test_member_list_and_endpoint_status(eps, etcd_cluster3):
    members = js(eps, "member", "list")["members"]
    assert sorted(m["name"] for m in members) == ["n1", "n2", "n3"]
    assert all(m["peerURLs"][0].startswith("http://127.0.0.1:") for m in members)
    status = js(eps, "endpoint", "status")
    assert len(status) == 3
    leaders = {s["Status"]["leader"] for s in status}
    ids = {s["Status"]["header"]["member_id"] for s in status}
    assert len(leaders) == 1 and leaders <= ids
    assert {m["ID"] for m in members} == ids
    assert all(s["Status"]["version"] for s in status)
    table = etcdctl(eps, "endpoint", "status", "-w", "table").stdout
    assert table.count("true") >= 1  # one member is leader


def test_member_list_gives_every_members_client_url_whichever_member_answers(etcd_cluster3):
    """Clients that sync their endpoints from MemberList find every member, not only the
    one they asked (--initial-cluster names peer addresses alone)."""
    require_etcdctl()
    listens = {n: f"http://{m.listen}" for n, m in etcd_cluster3.members.items()}
    for asked in etcd_cluster3.etcd_endpoints:
        members = js(asked, "member", "list")["members"]
        assert {m["name"]: m.get("clientURLs") for m in members} == {
            n: [url] for n, url in listens.items()}, asked


def first_to_print(procs: list[Background], timeout: float) -> Background:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.quiet_for(0.05):
                return p
    raise AssertionError(f"none of {len(procs)} contenders printed within {timeout}s")


def wait_count(eps, prefix: str, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while js(eps, "get", prefix, "--prefix", "--keys-only").get("count", 0) != n:
        assert time.monotonic() < deadline, f"{prefix}: never {n} keys"
        time.sleep(0.05)


def test_lock_contenders_killed_holder_and_takeover(eps):
    a = Background(eps[0], "lock", "--ttl=2", "lk")
    b = c = None
    try:
        a.read_until(lambda s: s.startswith("lk/"))
        b = Background(eps[1], "lock", "--ttl=2", "lk")
        wait_count(eps, "lk/", 2)  # b is queued behind a
        c = Background(eps[2], "lock", "--ttl=2", "lk")
        wait_count(eps, "lk/", 3)
        assert b.quiet_for(1.0) == [] and c.quiet_for(0.2) == []  # a holds it
        a.stop()  # kill -9: its session is never closed; it must expire (TTL 2 s)
        assert first_to_print([b, c], timeout=30) is b  # the oldest waiter
        assert c.quiet_for(0.5) == []
        b.signal(signal.SIGINT)  # a clean exit releases at once
        c.read_until(lambda s: s.startswith("lk/"), timeout=10)
    finally:
        for p in (a, b, c):
            if p is not None:
                p.stop()


@pytest.mark.timeout(240)
def test_elect_on_a_fresh_cluster_wins_at_once(tmp_path):
    """A regression: an empty etcd is at revision 1 and its first write lands at 2, and
    etcd's Election.Campaign depends on it (it waits for the keys created before its own,
    bounded by its create revision - 1, where 0 means no bound). A fresh coord at 0 made
    `etcdctl elect` wait for its own key forever. Its own cluster: nothing written yet."""
    require_etcdctl()
    with LocalCluster(1, data_dir=tmp_path / "c") as fresh:
        ep = fresh.etcd_endpoints[0]
        assert js(ep, "get", "el/", "--prefix")["header"]["revision"] == 1  # the etcd API
        with Client(fresh.endpoints) as native:
            assert native.range(prefix=b"el/").header.revision == 1  # native: one revision
        a = Background(ep, "elect", "el", "cand-a")
        try:
            lines = a.read_until(lambda s: s == "cand-a", timeout=10)
        finally:
            a.stop()
        key = js(ep, "get", "el/", "--prefix")["kvs"][0]
        assert lines == [unb64(key["key"]), "cand-a"]  # its key, then its value
        assert key["create_revision"] == 2  # the cluster's first write, as in etcd


def test_elect_with_observer_resign_and_killed_leader(eps):
    observer = Background(eps[0], "elect", "-l", "el")
    a = Background(eps[0], "elect", "el", "cand-a")
    b = c = None
    try:
        a.read_until(lambda s: s == "cand-a")
        observer.read_until(lambda s: s == "cand-a")
        b = Background(eps[1], "elect", "el", "cand-b")
        wait_count(eps, "el/", 2)
        c = Background(eps[2], "elect", "el", "cand-c")
        wait_count(eps, "el/", 3)
        assert b.quiet_for(0.5) == [] and c.quiet_for(0.1) == []
        a.signal(signal.SIGINT)  # resigns: b is leader at once
        b.read_until(lambda s: s == "cand-b", timeout=10)
        observer.read_until(lambda s: s == "cand-b", timeout=10)
        b.stop()  # kill -9; its lease would expire after etcdctl elect's 60 s TTL (an
        # unkept lease expiring is test_an_unkept_lease_expires_with_its_keys_...): an
        # operator revokes it instead, and the next candidate wins at once
        held = [kv for kv in js(eps, "get", "el/", "--prefix")["kvs"]
                if unb64(kv["value"]) == "cand-b"]
        assert len(held) == 1, held
        etcdctl(eps, "lease", "revoke", f"{int(held[0]['lease']):x}")
        c.read_until(lambda s: s == "cand-c", timeout=10)
        observer.read_until(lambda s: s == "cand-c", timeout=10)
    finally:
        for p in (observer, a, b, c):
            if p is not None:
                p.stop()
