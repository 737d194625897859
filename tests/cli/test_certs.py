"""`coord certs init|issue`: the files they write, what they print, their refusals."""

from __future__ import annotations

import ssl

from coord.cli.main import main


def test_init_then_issue_makes_a_ca_and_pairs_that_tls_accepts(tmp_path, capsys):
    d = tmp_path / "pki"
    assert main(["certs", "init", "--dir", str(d)]) == 0
    assert main(["certs", "issue", "n1", "--dir", str(d), "--san", "db1.example"]) == 0
    assert "--cert-file" in capsys.readouterr().out
    assert main(["certs", "issue", "alice", "--dir", str(d), "--client"]) == 0
    assert f"--cert {d / 'alice.pem'} --key {d / 'alice.key'}" in capsys.readouterr().out
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(d / "n1.pem", d / "n1.key")  # a matching pair
    server.load_verify_locations(d / "ca.pem")


def test_existing_files_are_not_overwritten_without_force(tmp_path, capsys):
    d = str(tmp_path)
    assert main(["certs", "init", "--dir", d]) == 0
    ca = (tmp_path / "ca.pem").read_bytes()
    capsys.readouterr()
    assert main(["certs", "init", "--dir", d]) == 1
    assert "already exist" in capsys.readouterr().err
    assert (tmp_path / "ca.pem").read_bytes() == ca
    assert main(["certs", "init", "--dir", d, "--force"]) == 0
    assert (tmp_path / "ca.pem").read_bytes() != ca


def test_issuing_without_a_ca_says_how_to_make_one(tmp_path, capsys):
    assert main(["certs", "issue", "n1", "--dir", str(tmp_path)]) == 1
    assert f"coord certs init --dir {tmp_path}" in capsys.readouterr().err
    assert not (tmp_path / "n1.pem").exists()
