"""A cluster of `coord serve` processes over TLS, with client certificates required on
both ports (`coord.testing.cluster(tls=True)`), driven by etcd's own clients (etcdctl,
the etcd3 package), coord's clients and its CLI; and what such a cluster refuses: a
client without a certificate, with one from another CA or an expired one, plaintext, and
a member whose peer certificate another CA signed."""

from __future__ import annotations

import datetime
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from coord.cli import main as cli
from coord.client import TLS, Client, UnavailableError
from coord.client.admin import AdminClient
from coord.testing import LocalCluster
from coord.tls.certs import issue, make_ca
from tests.cut_off import wait_until
from tests.etcdtools import Background, etcdctl
from tests.pki import cli_flags

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    with LocalCluster(3, data_dir=tmp_path_factory.mktemp("tls") / "cluster", tls=True) as c:
        c.wait_for_leader()
        yield c


@pytest.mark.etcd
def test_etcdctl_puts_gets_and_watches_over_tls(tls_cluster):
    tls = cli_flags(tls_cluster.client_tls)
    etcdctl(tls_cluster.endpoints, *tls, "put", "tls/e", "v1")
    assert etcdctl(tls_cluster.endpoints, *tls, "get", "tls/e").stdout.split() == [
        "tls/e", "v1"]
    watch = Background(tls_cluster.endpoints, *tls, "watch", "tls/e", "--rev=1")
    try:
        assert watch.read_until(lambda line: line == "v1")[-3:] == ["PUT", "tls/e", "v1"]
    finally:
        watch.stop()


ETCD3_SCRIPT = """
import sys
import etcd3
host, port, ca, cert, key = sys.argv[1:]
client = etcd3.client(host=host, port=int(port), ca_cert=ca, cert_cert=cert, cert_key=key,
                      timeout=10)
client.put("tls/py", "1")
assert client.get("tls/py")[0] == b"1"
events, cancel = client.watch("tls/py", start_revision=1)
print("watched", next(iter(events)).value.decode())
cancel()
print("etcd3 TLS OK")
"""


@pytest.mark.etcd
def test_the_etcd3_package_over_tls(tls_cluster):
    host, port = tls_cluster.endpoints[1].rsplit(":", 1)
    tls = tls_cluster.client_tls
    # the etcd3 package needs the pure-Python protobuf runtime (etcd3_script.py says why)
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    proc = subprocess.run([sys.executable, "-c", ETCD3_SCRIPT, host, port, tls.cacert,
                           tls.cert, tls.key], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0 and "watched 1\netcd3 TLS OK" in proc.stdout, (
        proc.stdout + proc.stderr)


def test_coords_cli_and_status_over_tls_by_flags_or_environment(tls_cluster, capsys,
                                                                 monkeypatch):
    eps = ",".join(tls_cluster.endpoints)
    tls = tls_cluster.client_tls
    assert cli.main(["kv", "put", "tls/cli", "x", "--endpoints", eps, *cli_flags(tls)]) == 0
    monkeypatch.setenv("COORD_CACERT", tls.cacert)
    monkeypatch.setenv("COORD_CERT", tls.cert)
    monkeypatch.setenv("COORD_KEY", tls.key)
    capsys.readouterr()
    assert cli.main(["kv", "get", "tls/cli", "--endpoints", eps, "--json"]) == 0
    assert '"value": "x"' in capsys.readouterr().out
    assert cli.main(["status", "--endpoints", eps, "--json"]) == 0
    assert '"tls": true' in capsys.readouterr().out


def test_a_follower_forwards_over_the_tls_peer_port(tls_cluster):
    leader = tls_cluster.wait_for_leader()
    follower = next(n for n in tls_cluster.members if n != leader)
    with Client([tls_cluster.members[follower].listen], tls=tls_cluster.client_tls,
                stream=False, randomize_endpoints=False) as client:
        client.put("tls/forwarded", "1")  # a follower's write goes to the leader
        assert client.get("tls/forwarded").value == b"1"
    progress = tls_cluster.status(leader).progress
    assert len(progress) == 3 and all(p.recent_active for p in progress)


def _refused(tls_cluster: LocalCluster, tls: TLS | bool) -> None:
    """A client with `tls` is refused by every member (gRPC tells the client no more than
    "Socket closed"; the member's TLS stack logs the reason)."""
    with Client(tls_cluster.endpoints, tls=tls, timeout=2) as client:
        with pytest.raises(UnavailableError):
            client.get("tls/e")


def test_a_client_without_a_certificate_is_refused(tls_cluster):
    _refused(tls_cluster, TLS(tls_cluster.client_tls.cacert))
    proc = etcdctl(tls_cluster.endpoints, "--cacert", tls_cluster.client_tls.cacert,
                   "--dial-timeout=2s", "--command-timeout=2s", "get", "tls/e",
                   check=False)
    assert proc.returncode != 0


def test_a_certificate_from_another_ca_is_refused(tls_cluster, tmp_path):
    make_ca(tmp_path)
    stranger = issue(tmp_path, "root", client=True)  # the same name, another signer
    _refused(tls_cluster, TLS(tls_cluster.client_tls.cacert, str(stranger.cert),
                              str(stranger.key)))


def test_an_expired_certificate_is_refused(tls_cluster):
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=10)
    expired = tls_cluster.issue_client("expired", not_before=start,
                                       not_after=start + datetime.timedelta(days=1))
    _refused(tls_cluster, expired)


def test_plaintext_on_a_tls_port_is_refused(tls_cluster):
    _refused(tls_cluster, False)
    proc = etcdctl(tls_cluster.endpoints, "--dial-timeout=2s", "--command-timeout=2s",
                   "get", "tls/e", check=False)
    assert proc.returncode != 0


def _handshake(address: str, ctx: ssl.SSLContext) -> str:
    """The TLS version a handshake with `address` agreed, or the error that refused it."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as s:
            s.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")  # TLS 1.3: a refusal comes later
            s.read(1)
            return f"{s.version()} {s.cipher()[0]}"
    except (ssl.SSLError, OSError) as e:
        return f"refused: {e}"


def _context(tls: TLS, version: ssl.TLSVersion, ciphers: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=tls.cacert)
    ctx.load_cert_chain(tls.cert, tls.key)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.set_alpn_protocols(["h2"])
    if ciphers:
        ctx.set_ciphers(ciphers)
    return ctx


def test_cipher_suites_and_the_minimum_tls_version_apply_where_they_say(tmp_path):
    """--cipher-suites on both ports (the client port through gRPC's environment, which
    `coord serve` sets); --tls-min-version on the peer port."""
    with LocalCluster(1, data_dir=tmp_path, tls=True, extra_args=[
            "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "--tls-min-version", "TLS1.3"]) as c:
        client, member = c.client_tls, TLS(c.client_tls.cacert, *(
            str(c.tls_dir / f"n1.{ext}") for ext in ("pem", "key")))
        tls12 = ssl.TLSVersion.TLSv1_2
        listen, peer = c.members["n1"].listen, c.members["n1"].peer_listen
        assert _handshake(listen, _context(client, tls12, "ECDHE-ECDSA-AES256-GCM-SHA384")
                          ) == "TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384"
        assert _handshake(listen, _context(client, tls12, "ECDHE-ECDSA-AES128-GCM-SHA256")
                          ).startswith("refused")
        assert _handshake(peer, _context(member, tls12)).startswith("refused")
        assert _handshake(peer, _context(member, ssl.TLSVersion.TLSv1_3)).startswith(
            "TLSv1.3")


def _log(cluster: LocalCluster, name: str) -> str:
    return cluster.members[name].log_path.read_text(errors="replace")


def _answers(admin: AdminClient) -> bool:
    try:
        admin.status()
    except grpc.RpcError:
        return False
    return True


def test_a_member_with_a_peer_certificate_from_another_ca_is_not_counted(tmp_path):
    """n3's certificate is signed by a stranger's CA: n1 and n2 refuse its connections and
    it refuses theirs, saying why, so the cluster is n1 and n2 alone: losing one of them
    loses the quorum."""
    c = LocalCluster(3, data_dir=tmp_path / "cluster", tls=True)
    try:
        c.serve_args("n3")  # the rig makes n3's certificate; the stranger's replaces it
        make_ca(tmp_path / "other", "a stranger's CA")
        issue(tmp_path / "other", "n3", out=c.tls_dir, force=True)
        for name in ("n1", "n2"):
            c.start_member(name, wait=False)
        c.start_member("n3", wait=False)
        leader = c.wait_for_leader(among=["n1", "n2"], timeout=30)
        for name in ("n1", "n2"):
            wait_until(f"{name} logs its refusal of n3",
                       lambda name=name: "certificate verify failed" in _log(c, name))
        wait_until("n3 logs its connections refused", lambda: "failed: TLS" in _log(c, "n3"))
        # n3 trusts our CA for clients, but its own certificate is the stranger's
        n3_tls = TLS(str(tmp_path / "other" / "ca.pem"), c.client_tls.cert, c.client_tls.key)
        with AdminClient(c.members["n3"].listen, timeout=5, tls=n3_tls) as admin:
            wait_until("n3 to answer", lambda: _answers(admin))
            n3 = admin.status()
        assert n3.leader_name == "" and not n3.has_quorum
        survivor = leader
        c.kill(next(n for n in ("n1", "n2") if n != leader))
        wait_until(f"{survivor} to lose its quorum without n3",
                   lambda: not c.status(survivor).has_quorum, timeout=20)
    finally:
        c.stop()


def test_a_tls_cluster_in_this_process_serves_over_tls(tmp_path):
    """cluster(tls=True, in_process=True): the same TLS, on the test rig's asyncio loop."""
    with LocalCluster(3, data_dir=tmp_path, tls=True, in_process=True) as c:
        leader = c.wait_for_leader()
        follower = next(n for n in c.members if n != leader)
        with Client([c.members[follower].listen], tls=c.client_tls, stream=False) as client:
            client.put("tls/embedded", "1")
            assert client.get("tls/embedded").value == b"1"
        assert Path(c.client_tls.cert).name == "root.pem"
