"""coord's Raft core: pure, deterministic, driven by `RawNode.step`/`tick`/`ready`."""

from .errors import CompactedError, NotLeaderError, ProposalDroppedError, RaftError
from .raft import Config, bootstrap_entries
from .rawnode import RawNode, Status, conf_change_of
from .types import (
    NONE,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadState,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    SoftState,
)

__all__ = [
    "NONE", "CompactedError", "Config", "ConfChange", "ConfChangeType", "ConfState", "Entry",
    "EntryType", "HardState", "Message", "MessageType", "NotLeaderError", "ProposalDroppedError",
    "RaftError", "RawNode", "ReadState", "Ready", "Role", "Snapshot", "SnapshotMeta",
    "SoftState", "Status", "bootstrap_entries", "conf_change_of",
]
