"""The users and roles views (`:users`, `:roles`): read-only pictures of the cluster's
etcd Auth state, read when shown and on `r` (no stream tells of changes to them). They
offer no action: users and roles are changed with `coord user`/`coord role` (or
etcdctl), whose every change is a row of the committed history. etcd lets only the root
role list users and roles; for anyone else the view's title says the cluster refused."""

from __future__ import annotations

from typing import Any

from coord.tui.model import ClusterModel, RoleRow, Table, UserRow
from coord.tui.tables import TableView

ROOT = "root"  # etcd's role that may do anything


class UsersView(TableView):
    view = "users"
    title = "Users"
    columns = (("name", "USER"), ("roles", "ROLES"))
    help = (("r", "read the users and roles again"),)

    def table_of(self, model: ClusterModel) -> Table:
        return model.users

    def cells(self, u: UserRow) -> tuple[Any, ...]:
        return (u.name, ", ".join(u.roles) or "-")


class RolesView(TableView):
    view = "roles"
    title = "Roles"
    columns = (("name", "ROLE"), ("count", "PERMISSIONS"), ("perms", "GRANTS"))
    help = (("r", "read the users and roles again"), ("d", "every grant of the role"))

    def table_of(self, model: ClusterModel) -> Table:
        return model.roles

    def cells(self, r: RoleRow) -> tuple[Any, ...]:
        shown = "; ".join(r.perms[:3]) + (f" (+{len(r.perms) - 3})" if len(r.perms) > 3 else "")
        if r.name == ROOT:
            shown = "every permission (the root role)" + (f"; {shown}" if shown else "")
        return (r.name, len(r.perms), shown or "-")

    def describe(self, row: RoleRow) -> dict:
        return {"role": row.name, **{f"grant {i + 1}": p for i, p in enumerate(row.perms)}}
