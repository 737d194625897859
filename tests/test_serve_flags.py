"""coord.serve_flags: the TLS flags' combinations and the cluster secret's permissions,
checked at start-up with errors that name the flags."""

from __future__ import annotations

import pytest

from coord.serve_flags import member_config, parse_serve_args, tls_configs

BASE = ["--name", "n1", "--data-dir", "d", "--listen", "127.0.0.1:1", "--peer-listen",
        "127.0.0.1:2", "--initial-cluster", "n1=127.0.0.1:2"]


def tls(*flags: str):
    return tls_configs(parse_serve_args([*BASE, *flags]))


def test_no_tls_flags_mean_plaintext_on_both_ports():
    assert tls() == (None, None)


def test_each_port_gets_its_own_files_and_shares_ciphers_and_floor():
    client, peer = tls("--cert-file", "c.pem", "--key-file", "c.key", "--trusted-ca-file",
                       "ca.pem", "--client-cert-auth", "--peer-cert-file", "p.pem",
                       "--peer-key-file", "p.key", "--cipher-suites",
                       "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "--tls-min-version", "TLS1.3")
    assert (client.cert_file, client.key_file, client.trusted_ca_file,
            client.client_cert_auth) == ("c.pem", "c.key", "ca.pem", True)
    assert (peer.cert_file, peer.trusted_ca_file, peer.client_cert_auth) == (
        "p.pem", None, False)
    assert client.cipher_suites == peer.cipher_suites == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert client.min_version == peer.min_version == "TLS1.3"


@pytest.mark.parametrize(("flags", "message"), [
    (["--cert-file", "c.pem"], "--cert-file and --key-file go together"),
    (["--peer-key-file", "p.key"], "--peer-cert-file and --peer-key-file go together"),
    (["--cert-file", "c.pem", "--key-file", "c.key", "--client-cert-auth"],
     "--client-cert-auth needs --trusted-ca-file"),
    (["--peer-cert-file", "p.pem", "--peer-key-file", "p.key", "--peer-client-cert-auth"],
     "--peer-client-cert-auth needs --peer-trusted-ca-file"),
    (["--trusted-ca-file", "ca.pem"], "give --cert-file and --key-file"),
    (["--peer-trusted-ca-file", "ca.pem", "--peer-client-cert-auth"],
     "give --peer-cert-file and --peer-key-file"),
    (["--cipher-suites", "ECDHE-RSA-AES128-GCM-SHA256"], "are for TLS ports"),
    (["--tls-min-version", "TLS1.3"], "are for TLS ports"),
])
def test_combinations_that_do_not_work_are_refused_naming_the_flags(flags, message):
    with pytest.raises(ValueError, match=message):
        tls(*flags)


def test_a_cluster_secret_its_group_or_others_can_read_is_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef0123456789abcdef")
    secret.chmod(0o644)
    args = parse_serve_args([*BASE, "--cluster-secret-file", str(secret)])
    with pytest.raises(SystemExit, match=f"--cluster-secret-file {secret} .*chmod 600"):
        member_config(args)
    secret.chmod(0o600)
    assert member_config(args).cluster_secret == b"0123456789abcdef0123456789abcdef"


def test_listen_metrics_urls_off_by_default_and_checked(monkeypatch):
    monkeypatch.setenv("COORD_CLUSTER_SECRET", "s" * 32)
    assert member_config(parse_serve_args(BASE)).listen_metrics_urls == []
    config = member_config(parse_serve_args(
        [*BASE, "--listen-metrics-urls", "http://127.0.0.1:2381, http://127.0.0.1:2382"]))
    assert config.listen_metrics_urls == ["http://127.0.0.1:2381", "http://127.0.0.1:2382"]
    with pytest.raises(ValueError, match="--listen-metrics-urls 'https://"):
        member_config(parse_serve_args([*BASE, "--listen-metrics-urls", "https://h:1"]))
