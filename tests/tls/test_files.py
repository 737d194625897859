"""coord.tls.files: private files written and checked, the TLS values, cipher names."""

from __future__ import annotations

import os
import stat

import pytest

from coord.tls.files import (
    TLS,
    TLSConfigError,
    check_private,
    openssl_ciphers,
    read_file,
    write_private,
)


def test_a_private_file_is_born_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "secret"
    old = os.umask(0)  # the mode must not depend on the umask
    try:
        write_private(path, b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_private(path, b"y")
    path.chmod(0o644)
    write_private(path, b"y", replace=True)
    assert (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) == (b"y", 0o600)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_key_its_group_or_others_can_open_is_refused_with_the_fix(tmp_path, mode):
    path = tmp_path / "n1.key"
    path.write_bytes(b"key")
    path.chmod(mode)
    with pytest.raises(TLSConfigError, match=f"--key-file {path} .*mode {mode:04o}.*chmod 600"):
        read_file(path, "--key-file", private=True)
    assert read_file(path, "--cert-file") == b"key"  # a certificate is public


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_key_for_its_owner_only_is_taken(tmp_path, mode):
    path = tmp_path / "n1.key"
    path.write_bytes(b"key")
    path.chmod(mode)
    check_private(path, "--key-file")


def test_a_missing_file_names_its_flag(tmp_path):
    with pytest.raises(TLSConfigError, match="cannot read --trusted-ca-file .*/nope"):
        read_file(tmp_path / "nope", "--trusted-ca-file")


def test_a_client_value_reads_coords_environment_variables():
    env = {"COORD_CACERT": "/c/ca.pem", "COORD_CERT": "/c/me.pem", "COORD_KEY": "/c/me.key"}
    assert TLS.from_env(env) == TLS("/c/ca.pem", "/c/me.pem", "/c/me.key")
    assert TLS.from_env({"COORD_CACERT": "/c/ca.pem"}) == TLS("/c/ca.pem")
    assert TLS.from_env({}) is None
    for tls in (TLS("/c/ca.pem", "/c/me.pem", "/c/me.key"), TLS("/c/ca.pem")):
        assert TLS.from_env(tls.env()) == tls  # what a child process is handed


def test_a_certificate_without_its_key_is_refused():
    with pytest.raises(TLSConfigError, match="--cert and --key"):
        TLS("/c/ca.pem", cert="/c/me.pem")
    with pytest.raises(TLSConfigError, match="--cert and --key"):
        TLS.from_env({"COORD_KEY": "/c/me.key"})


def test_cipher_suites_take_etcds_names_and_openssls():
    assert openssl_ciphers("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"
                           " ECDHE-RSA-AES256-GCM-SHA384") == (
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384")
    with pytest.raises(TLSConfigError):
        openssl_ciphers(" , ")
