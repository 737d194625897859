"""Whose data a data dir holds.

A member's storage remembers, from its first start, the member's name and the cluster's
id (derived from --initial-cluster-token). Every later start checks the name, so one
member's data is never served by another, and takes the cluster id from storage: the
token only matters at first start, and the id is known before the node opens its log,
because the peer transport's credentials carry it.
"""

from __future__ import annotations

from coord.server.node.errors import NodeError
from coord.server.node.members import cluster_id
from coord.server.storage.log_format import CLUSTER_ID_KEY, NAME_KEY
from coord.server.storage.log_store import LogStore


def claim_data_dir(store: LogStore, name: str, cluster_token: str) -> int:
    """The cluster id of `store`'s data, after checking it is member `name`'s; data not
    stamped yet (a first start) is stamped with `name` and the token's cluster id."""
    stored_name = store.get_meta(NAME_KEY)
    if stored_name is not None and stored_name != name:
        raise NodeError(f"{store.path} belongs to member {stored_name!r}, not {name!r}")
    stored_cluster = store.get_meta(CLUSTER_ID_KEY)
    if stored_cluster is not None:
        return int(stored_cluster)
    cid = cluster_id(cluster_token)
    store.set_meta(NAME_KEY, name)
    store.set_meta(CLUSTER_ID_KEY, str(cid))
    return cid

