"""coord.tls.grpc_ciphers: gRPC's process-wide cipher suites, set before gRPC loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from coord.tls.files import ServerTLS, TLSConfigError
from coord.tls.grpc_ciphers import GRPC_CIPHERS_ENV, check_grpc_ciphers

PRESET = """
import json, os, sys
from coord.tls.grpc_ciphers import preset_grpc_ciphers
preset_grpc_ciphers(sys.argv[1:])
print(json.dumps(os.environ.get("GRPC_SSL_CIPHER_SUITES")))
"""


def preset(*argv: str, env: dict[str, str] | None = None) -> str | None:
    out = subprocess.run([sys.executable, "-c", PRESET, *argv], capture_output=True,
                         text=True, timeout=60, check=True, env=env)
    return json.loads(out.stdout)


def test_serves_cipher_suites_reach_grpcs_environment_before_grpc_loads(monkeypatch):
    monkeypatch.delenv(GRPC_CIPHERS_ENV, raising=False)
    assert preset("serve", "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
                  ) == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert preset("serve", "--cipher-suites=ECDHE-RSA-AES256-GCM-SHA384"
                  ) == "ECDHE-RSA-AES256-GCM-SHA384"
    assert preset("serve", "--name", "n1") is None


def test_a_member_refuses_cipher_suites_its_grpc_did_not_load(monkeypatch):
    tls = ServerTLS("c.pem", "c.key", cipher_suites="ECDHE-ECDSA-AES128-GCM-SHA256")
    monkeypatch.setenv(GRPC_CIPHERS_ENV, "ECDHE-RSA-AES256-GCM-SHA384")
    with pytest.raises(TLSConfigError, match="once per process"):
        check_grpc_ciphers(tls)
    monkeypatch.setenv(GRPC_CIPHERS_ENV, tls.cipher_suites)
    check_grpc_ciphers(tls)
    check_grpc_ciphers(ServerTLS("c.pem", "c.key"))  # none asked for: nothing to check
