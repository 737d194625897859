"""Whose data a data dir holds.

A member's storage remembers, from its first start, the member's name and the cluster's
id (derived from --initial-cluster-token). Every later start checks the name, so one
member's data is never served by another, and takes the cluster id from storage: the
token only matters at first start, and the id is known before the node opens its log,
because the peer transport's credentials carry it.

It also remembers the version of the log's meaning its data began under (`log_version`,
given by whoever wires the state machine), so every later start replays the log as it
was written, whatever version the code runs.
"""

from __future__ import annotations

from coord.server.node.errors import NodeError
from coord.server.node.members import cluster_id
from coord.server.storage.log_format import CLUSTER_ID_KEY, LOG_VERSION_KEY, NAME_KEY
from coord.server.storage.log_store import LogStore


def claim_data_dir(store: LogStore, name: str, cluster_token: str, log_version: int) -> int:
    """The cluster id of `store`'s data, after checking it is member `name`'s; data not
    stamped yet (a first start) is stamped with `name`, the token's cluster id and
    `log_version`."""
    stored_name = store.get_meta(NAME_KEY)
    if stored_name is not None and stored_name != name:
        raise NodeError(f"{store.path} belongs to member {stored_name!r}, not {name!r}")
    stored_cluster = store.get_meta(CLUSTER_ID_KEY)
    if stored_cluster is not None:
        return int(stored_cluster)
    cid = cluster_id(cluster_token)
    store.set_meta(NAME_KEY, name)
    store.set_meta(CLUSTER_ID_KEY, str(cid))
    store.set_meta(LOG_VERSION_KEY, str(log_version))
    return cid


def log_version(store: LogStore) -> int | None:
    """The log version `store`'s data began under; None for data stamped before versions."""
    stored = store.get_meta(LOG_VERSION_KEY)
    if stored is None:
        return None
    if not stored.isdigit():
        raise NodeError(f"{store.path}: bad {LOG_VERSION_KEY} {stored!r}")
    return int(stored)
