"""`coord tui --cacert --cert --key` against a `coord serve` process that requires client
certificates: the command line's flags reach the console's client, which shows the
member; without the CA that signed the member's certificate the console still runs and
says why the member is unreachable. Textual's pilot drives the app the command starts
(its `run_async` replaced by the pilot's run)."""

from __future__ import annotations

import pytest

from coord.cli.main import main
from coord.tui.app import CoordApp
from tests.pki import cli_flags, without_tls_variables
from tests.tui.pilot import drive, until

pytestmark = pytest.mark.cluster

SEEN_S = 20.0  # the longest the first picture may take: a bound for a loaded machine


def test_coord_tui_over_tls_shows_the_member(tls_member, monkeypatch):
    without_tls_variables(monkeypatch)

    async def check(pilot, app: CoordApp) -> None:
        m = app.model
        await until(pilot, lambda: m.leader() is not None and len(m.members) == 1,
                    SEEN_S, "the member, over TLS")
        (row,) = m.members.rows.values()
        assert row.reachable and row.name == "n1" and row.endpoint == tls_member.endpoints[0]

    apps = drive(monkeypatch, check)
    assert main(["tui", "--endpoints", ",".join(tls_member.endpoints),
                 *cli_flags(tls_member.client_tls)]) == 0
    assert len(apps) == 1


def test_coord_tui_without_the_ca_shows_why_the_member_is_unreachable(tls_member,
                                                                      monkeypatch):
    without_tls_variables(monkeypatch)

    def refused(app: CoordApp) -> bool:
        return any("CERTIFICATE_VERIFY_FAILED" in e.text for e in app.model.events)

    async def check(pilot, app: CoordApp) -> None:
        await until(pilot, lambda: refused(app), SEEN_S, "the member's refusal")
        (row,) = app.model.members.rows.values()
        assert not row.reachable and app.model.leader() is None

    apps = drive(monkeypatch, check)
    assert main(["tui", "--endpoints", ",".join(tls_member.endpoints),
                 *cli_flags(tls_member.client_tls, ca=False)]) == 0
    assert len(apps) == 1
