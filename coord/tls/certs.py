"""A certificate authority and the certificates it signs, written as PEM files: what
`coord certs init|issue` and the test rigs (`coord.testing.cluster(tls=True)`) make.

A directory holds one CA (`ca.pem`, `ca.key`) and the pairs it issued (`NAME.pem`,
`NAME.key`). Keys are ECDSA P-256 (every TLS stack coord meets takes them: gRPC's,
Python's ssl, Go's in etcdctl) and are written mode 0600. A member's certificate is for
both ends of a TLS connection (serverAuth and clientAuth: on the peer port a member
accepts connections and opens them) and names 127.0.0.1, ::1 and localhost besides the
addresses given; a client's is for clientAuth only. The subject's common name is the
name given: with `--client-cert-auth`, etcd takes a client certificate's CN as the user.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coord.tls.files import write_private

__all__ = ["CA_CERT", "CA_KEY", "LOCAL_SANS", "CertError", "Pair", "issue", "make_ca"]

CA_CERT, CA_KEY = "ca.pem", "ca.key"
LOCAL_SANS = ("127.0.0.1", "::1", "localhost")
"""Every member certificate names these: a member is reached on the loopback in tests
and on one machine."""
CA_DAYS = 3650
LEAF_DAYS = 825
BACKDATE = datetime.timedelta(minutes=5)
"""A new certificate is valid from a little before now, so a peer whose clock is a few
seconds behind does not see it as not yet valid."""


class CertError(Exception):
    """A certificate cannot be made: a file in the way, no CA, a bad name."""


@dataclass(frozen=True, slots=True)
class Pair:
    """Where a certificate and its private key were written."""

    cert: Path
    key: Path


def make_ca(directory: str | Path, common_name: str = "coord CA", days: int = CA_DAYS,
            force: bool = False) -> Pair:
    """A new CA in `directory` (made if missing): `ca.pem` and `ca.key`. An existing CA
    is kept (CertError) unless `force`: replacing it orphans every certificate it
    signed."""
    directory = Path(directory)
    pair = Pair(directory / CA_CERT, directory / CA_KEY)
    _refuse_existing(pair, force, "a CA")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(pair, cert, key, force)
    return pair


def issue(directory: str | Path, name: str, sans: Iterable[str] = (), client: bool = False,
          days: int = LEAF_DAYS, not_before: datetime.datetime | None = None,
          not_after: datetime.datetime | None = None, force: bool = False,
          out: str | Path | None = None) -> Pair:
    """`NAME.pem` and `NAME.key`, signed by the CA in `directory` and written to `out`
    (default: beside the CA). A member's (default) names `LOCAL_SANS` and `sans`; a
    `client`'s names `sans` only. `not_before`/`not_after` override the validity (tests
    make expired certificates with them). CertError if the CA is missing or the files
    exist (unless `force`)."""
    if not name or "/" in name or name.startswith("."):
        raise CertError(f"{name!r} cannot name a certificate (it names the files too)")
    ca_cert, ca_key = _load_ca(Path(directory))
    target = Path(out) if out is not None else Path(directory)
    pair = Pair(target / f"{name}.pem", target / f"{name}.key")
    _refuse_existing(pair, force, f"a certificate for {name!r}")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start = not_before or now - BACKDATE
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if not client:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    alt_names = list(dict.fromkeys([*(() if client else LOCAL_SANS), *sans]))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(not_after or start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False)
    )
    if alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in alt_names]), critical=False)
    _write(pair, builder.sign(ca_key, hashes.SHA256()), key, force)
    return pair


def _key_usage(signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=signs_certificates,
        crl_sign=signs_certificates, encipher_only=False, decipher_only=False)


def _general_name(name: str) -> x509.GeneralName:
    """An IP address SAN for an address (TLS clients match IPs only against those), a DNS
    SAN for anything else."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        pass
    try:
        return x509.DNSName(name.encode("idna").decode("ascii"))
    except UnicodeError:
        raise CertError(f"--san {name!r} is neither an IP address nor a host name") from None


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if not (cert_path.exists() and key_path.exists()):
        raise CertError(f"no CA in {directory} (it needs {CA_CERT} and {CA_KEY}): make one"
                        f" with `coord certs init --dir {directory}`")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path} is not an ECDSA key (coord certs makes those)")
    return cert, key


def _refuse_existing(pair: Pair, force: bool, what: str) -> None:
    existing = [str(p) for p in (pair.cert, pair.key) if p.exists()]
    if existing and not force:
        raise CertError(f"{' and '.join(existing)} already exist(s): not replacing {what}"
                        " (--force replaces it)")


def _write(pair: Pair, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
           force: bool) -> None:
    pair.cert.parent.mkdir(parents=True, exist_ok=True)
    write_private(pair.key, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()), replace=force)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
