"""LocalCluster's own rules, apart from any cluster it starts."""

from __future__ import annotations

import pytest

from coord.testing import LocalCluster


def test_a_member_command_runs_processes_only():
    with pytest.raises(ValueError, match="in_process"):
        LocalCluster(1, in_process=True, member_command=lambda name: ["true"])


def test_a_tls_cluster_makes_its_ca_once_and_gives_members_mtls_on_both_ports(tmp_path):
    c = LocalCluster(2, data_dir=tmp_path, tls=True)
    tls = c.client_tls
    assert tls is not None and tls.cacert == str(tmp_path / "tls" / "ca.pem")
    args = c.serve_args("n1")
    for flag in ("--client-cert-auth", "--peer-client-cert-auth"):
        assert flag in args
    assert args[args.index("--cert-file") + 1] == str(tmp_path / "tls" / "n1.pem")
    assert args[args.index("--peer-trusted-ca-file") + 1] == tls.cacert
    assert oct((tmp_path / "tls" / "n1.key").stat().st_mode & 0o777) == "0o600"
    ca = (tmp_path / "tls" / "ca.pem").read_bytes()
    again = LocalCluster(2, data_dir=tmp_path, tls=True)  # `coord dev` restarted
    assert (tmp_path / "tls" / "ca.pem").read_bytes() == ca
    assert again.client_tls == tls


def test_a_plaintext_cluster_has_no_tls_flags(tmp_path):
    c = LocalCluster(1, data_dir=tmp_path)
    assert c.client_tls is None and "--cert-file" not in c.serve_args("n1")
    assert oct(c.secret_file.stat().st_mode & 0o777) == "0o600"
