"""The commands that open their own channels — `coord history export --endpoints`,
`coord defrag`, `coord snapshot save` — over TLS with `--cacert --cert --key`, against a
`coord serve` process that requires client certificates; and each refused, with an error
that says why and nothing written, when it lacks the CA that signed the member's
certificate. A `--data-dir` export, which connects to nothing, refuses the flags."""

from __future__ import annotations

import json

import pytest

from coord.cli.main import main
from coord.cli.snapshot import describe
from coord.client import Client
from coord.history.sink import read_manifest
from tests.pki import cli_flags, without_tls_variables

pytestmark = pytest.mark.cluster

UNVERIFIED = "CERTIFICATE_VERIFY_FAILED"  # the client's TLS stack could not check the member


@pytest.fixture(scope="module")
def member(tls_member):
    with Client(tls_member.endpoints, tls=tls_member.client_tls) as client:
        for i in range(20):
            client.put(f"tls/cmd/{i}", str(i))
    return tls_member


def test_history_export_over_tls(member, tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["history", "export", "--endpoints", ",".join(member.endpoints), "--out",
                 str(out), "--format", "jsonl", *cli_flags(member.client_tls)]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in
            f.read_text().split()]
    assert report["rows"] == len(rows) > 20 and read_manifest(out)["rows"] == len(rows)
    assert {f"tls/cmd/{i}" for i in range(20)} <= {r.get("key") for r in rows}


def test_defrag_and_snapshot_save_over_tls(member, tmp_path, capsys):
    eps = ",".join(member.endpoints)
    assert main(["defrag", "--endpoints", eps, *cli_flags(member.client_tls)]) == 0
    assert "MiB on disk" in capsys.readouterr().out
    backup = tmp_path / "backup.db"
    assert main(["snapshot", "save", str(backup), "--endpoints", eps,
                 *cli_flags(member.client_tls)]) == 0
    assert "SHA-256 checked" in capsys.readouterr().out
    assert describe(backup)["keys"] >= 20


@pytest.fixture
def no_ca(member, monkeypatch) -> list[str]:
    """The client's certificate and key, but not the CA that signed the member's."""
    without_tls_variables(monkeypatch)
    return cli_flags(member.client_tls, ca=False)


def test_history_export_without_the_ca_is_refused_and_may_run_again(member, no_ca, tmp_path,
                                                                    capsys):
    out, eps = tmp_path / "h", ",".join(member.endpoints)
    assert main(["history", "export", "--endpoints", eps, "--out", str(out), "--format",
                 "jsonl", *no_ca]) == 1
    assert UNVERIFIED in capsys.readouterr().err
    assert read_manifest(out) is None  # nothing committed
    # with the CA, into the same --out: the refused run left nothing in its way
    assert main(["history", "export", "--endpoints", eps, "--out", str(out), "--format",
                 "jsonl", *cli_flags(member.client_tls)]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] > 20


def test_history_export_from_a_data_dir_refuses_tls_flags(member, tmp_path, capsys):
    assert main(["history", "export", "--data-dir", str(tmp_path), "--out",
                 str(tmp_path / "h"), *cli_flags(member.client_tls)]) == 2
    assert "--cacert, --cert and --key need --endpoints" in capsys.readouterr().err


def test_defrag_without_the_ca_is_refused(member, no_ca, capsys):
    eps = ",".join(member.endpoints)
    assert main(["defrag", "--endpoints", eps, *no_ca]) == 1
    line = capsys.readouterr().out
    assert f"{eps}: FAILED UNAVAILABLE" in line and UNVERIFIED in line


def test_snapshot_save_without_the_ca_is_refused_and_writes_nothing(member, no_ca, tmp_path):
    backup = tmp_path / "backup.db"
    with pytest.raises(SystemExit, match=f"no member gave a snapshot: .*{UNVERIFIED}"):
        main(["snapshot", "save", str(backup), "--endpoints", ",".join(member.endpoints),
              *no_ca])
    assert list(tmp_path.iterdir()) == []  # neither the backup nor its .part
