"""Certificates for the TLS tests: a CA with members' and clients' certificates, and a
second CA (a stranger's) that signs the same names, which nobody here trusts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coord.tls.certs import issue, make_ca
from coord.tls.files import ENV_CACERT, ENV_CERT, ENV_KEY, TLS, ServerTLS


@dataclass
class PKI:
    dir: Path
    other: Path  # the stranger's CA

    @classmethod
    def make(cls, root: Path) -> PKI:
        mine, other = root / "ca", root / "other"
        make_ca(mine)
        make_ca(other, "a stranger's CA")
        for d in (mine, other):
            for name in ("n1", "n2"):
                issue(d, name)
            issue(d, "alice", client=True)
        return cls(mine, other)

    def member(self, name: str = "n1", client_cert_auth: bool = True, ca: Path | None = None,
               **kw) -> ServerTLS:
        """Member `name`'s TLS, its certificate signed by `ca` (default ours); it trusts
        ours."""
        signer = ca or self.dir
        return ServerTLS(str(signer / f"{name}.pem"), str(signer / f"{name}.key"),
                         str(self.dir / "ca.pem"), client_cert_auth, **kw)

    def client(self, name: str = "alice", ca: Path | None = None) -> TLS:
        signer = ca or self.dir
        return TLS(str(self.dir / "ca.pem"), str(signer / f"{name}.pem"),
                   str(signer / f"{name}.key"))


def cli_flags(tls: TLS, ca: bool = True) -> list[str]:
    """The command line's --cacert --cert --key for `tls`; `ca` False: the certificate
    and key alone, so the member's certificate is checked against the system's CAs,
    which never signed it."""
    return [*(["--cacert", tls.cacert] if ca else []), "--cert", tls.cert, "--key", tls.key]


def without_tls_variables(monkeypatch) -> None:
    """No $COORD_CACERT, $COORD_CERT or $COORD_KEY from the shell running the tests."""
    for name in (ENV_CACERT, ENV_CERT, ENV_KEY):
        monkeypatch.delenv(name, raising=False)
