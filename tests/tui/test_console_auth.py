"""`coord tui --user` against a `coord serve` process with auth on, textual's pilot driving
the app the command starts: root sees the users and roles views (`:users`, `:roles`);
a user allowed to inspect but not to administer sees the tables, is refused the users
view, and is refused removing a member with the PERMISSION_DENIED message naming the
permission in the flash line, the console still running; a user without the inspection
permission sees why its views stay empty. The login comes from --user or from
$COORD_USER/$COORD_PASSWORD, as every client command's."""

from __future__ import annotations

import pytest

from coord.cli.main import main
from coord.client import Client
from coord.testing import LocalCluster
from coord.tui.app import CoordApp
from tests.conftest import _module_cluster
from tests.pki import without_tls_variables
from tests.server.api.test_native_auth import cli
from tests.tui.pilot import command, confirm, drive, until

pytestmark = pytest.mark.cluster

SEEN_S = 20.0  # the longest a picture may take: a bound for a loaded machine


@pytest.fixture(scope="module")
def authed_member(tmp_path_factory):
    """One member with auth on: root; viewer, who may inspect and use sessions named
    viewer-*; nobody, with no role; a session of root's to list."""
    for cluster in _module_cluster(tmp_path_factory, "tui-auth", members=1):
        eps = cluster.endpoints
        for args in (("user", "add", "root:rootpw"), ("role", "add", "root"),
                     ("user", "grant-role", "root", "root"),
                     ("user", "add", "viewer:viewerpw"), ("role", "add", "inspector"),
                     ("user", "grant-role", "viewer", "inspector"),
                     ("role", "grant-permission", "inspector", "read", "inspect",
                      "--kind", "admin"),
                     ("role", "grant-permission", "inspector", "write", "viewer-",
                      "--prefix", "--kind", "session"),
                     ("user", "add", "nobody:nobodypw"), ("auth", "enable")):
            cli(eps, *args)
        with Client(eps, user="root", password="rootpw") as root:
            root.open_session("root-listed", ttl=60)
            yield cluster


def tui(cluster: LocalCluster, *flags: str) -> int:
    return main(["tui", "--endpoints", ",".join(cluster.endpoints), *flags])


def test_root_sees_users_and_roles(authed_member, monkeypatch):
    without_tls_variables(monkeypatch)
    monkeypatch.setenv("COORD_USER", "root")
    monkeypatch.setenv("COORD_PASSWORD", "rootpw")

    async def check(pilot, app: CoordApp) -> None:
        m = app.model
        await command(pilot, app, "users")
        await until(pilot, lambda: len(m.users) == 3, SEEN_S, "the users")
        assert {u.name: u.roles for u in m.users.rows.values()} \
            == {"root": ("root",), "viewer": ("inspector",), "nobody": ()}
        assert app.view_name == "users" and len(app.views["users"]._ids) == 3
        await command(pilot, app, "roles")
        await until(pilot, lambda: "inspector" in m.roles.rows, SEEN_S, "the roles")
        assert set(m.roles.rows["inspector"].perms) \
            == {"admin READ inspect", "session WRITE [viewer-, viewer.)"}
        await until(pilot, lambda: any(s.name == "root-listed" for s in m.sessions.rows.values()),
                    SEEN_S, "root's session")
        assert not m.denied

    apps = drive(monkeypatch, check)
    assert tui(authed_member) == 0  # the login from $COORD_USER, $COORD_PASSWORD
    assert len(apps) == 1


def test_a_user_without_admin_rights_is_refused_naming_the_permission(authed_member,
                                                                     monkeypatch):
    without_tls_variables(monkeypatch)

    async def check(pilot, app: CoordApp) -> None:
        m = app.model
        await until(pilot, lambda: any(s.name == "root-listed" for s in m.sessions.rows.values())
                    and m.leader() is not None, SEEN_S, "the sessions, as viewer")
        await command(pilot, app, "users")
        await until(pilot, lambda: "users" in m.denied, SEEN_S, "the users view refused")
        assert "etcdserver: permission denied" in m.denied["users"]
        await until(pilot, lambda: "refused: :users:" in app.last_message, SEEN_S,
                    "the refusal flashed")
        await command(pilot, app, "members")
        await pilot.pause(0.1)
        assert "n1" in await confirm(pilot, app, "ctrl+d")
        await until(pilot, lambda: "PERMISSION_DENIED" in app.last_message, SEEN_S,
                    "the removal refused")
        assert app.last_message == ("refused: PERMISSION_DENIED: user 'viewer' lacks WRITE "
                                    "on admin 'membership'")
        assert app.is_running and len(m.members) == 1

    apps = drive(monkeypatch, check)
    assert tui(authed_member, "--user", "viewer:viewerpw") == 0
    assert len(apps) == 1


def test_a_user_without_the_inspection_permission_sees_why(authed_member, monkeypatch):
    without_tls_variables(monkeypatch)
    why = "user 'nobody' lacks READ on admin 'inspect'"

    async def check(pilot, app: CoordApp) -> None:
        m = app.model
        await until(pilot, lambda: m.denied.get("sessions") == why, SEEN_S,
                    "the sessions stream refused")
        await command(pilot, app, "sessions")
        await pilot.pause(0.1)
        assert why in str(app.query_one("#title-sessions").render())
        assert not m.sessions.rows and m.leader() is not None  # status needs nothing

    apps = drive(monkeypatch, check)
    assert tui(authed_member, "--user", "nobody", "--password", "nobodypw") == 0
    assert len(apps) == 1
