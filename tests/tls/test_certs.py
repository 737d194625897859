"""coord.tls.certs: what a CA and the certificates it signs say (names, usages, validity)
and how their files are written."""

from __future__ import annotations

import datetime
import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coord.tls.certs import CertError, issue, make_ca


def _load(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_member_certificate_names_its_addresses_and_serves_and_opens(tmp_path):
    ca = make_ca(tmp_path)
    pair = issue(tmp_path, "n1", ["db1.example", "10.0.0.7"])
    cert = _load(pair.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "n1"
    assert cert.issuer == _load(ca.cert).subject
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "db1.example"]
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.0.0.7")]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(_load(ca.cert))  # raises if the CA did not sign it


def test_a_client_certificate_only_opens_connections_and_names_only_what_it_is_given(
        tmp_path):
    make_ca(tmp_path)
    cert = _load(issue(tmp_path, "alice", client=True).cert)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert cert.subject.rfc4514_string() == "CN=alice"


def test_keys_are_written_for_their_owner_only(tmp_path):
    ca = make_ca(tmp_path)
    pair = issue(tmp_path, "n1")
    assert _mode(ca.key) == _mode(pair.key) == 0o600
    assert _mode(pair.cert) & 0o044  # certificates are public


def test_the_ca_is_one_that_signs_and_nothing_else(tmp_path):
    ca = _load(make_ca(tmp_path, "test CA").cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and not usage.key_encipherment
    assert ca.subject == ca.issuer


def test_existing_files_are_kept_unless_forced(tmp_path):
    make_ca(tmp_path)
    first = issue(tmp_path, "n1").cert.read_bytes()
    with pytest.raises(CertError, match="already exist.*--force"):
        make_ca(tmp_path)
    with pytest.raises(CertError, match="already exist.*--force"):
        issue(tmp_path, "n1")
    assert issue(tmp_path, "n1", force=True).cert.read_bytes() != first


def test_a_missing_ca_says_how_to_make_one(tmp_path):
    with pytest.raises(CertError, match="coord certs init --dir"):
        issue(tmp_path, "n1")


def test_a_validity_can_be_given_to_make_an_expired_certificate(tmp_path):
    make_ca(tmp_path)
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = _load(issue(tmp_path, "old", client=True, not_before=start,
                       not_after=start + datetime.timedelta(days=1)).cert)
    assert cert.not_valid_after_utc < datetime.datetime.now(datetime.UTC)


@pytest.mark.parametrize("name", ["", "../n1", ".hidden"])
def test_a_name_that_would_escape_the_directory_is_refused(tmp_path, name):
    make_ca(tmp_path)
    with pytest.raises(CertError):
        issue(tmp_path, name)
