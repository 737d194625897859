"""coord's client library.

    from coord.client import Client

    with Client(["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"]) as client:
        client.put("config/x", "1")
        with client.session(ttl=10) as s:
            s.own("partitions", ["p0", "p1"])
            ...  # stop writing the moment s.fenced is set

`AsyncClient` has the same surface on asyncio. Errors are typed (`CoordError` and its
subclasses); branch on the class or on `.reason`.
"""

from coord.client._common import (
    Conflict,
    Grant,
    Header,
    KeyValue,
    Owner,
    OwnerChange,
    OwnResult,
    PidBlock,
    PidLease,
    Producer,
    RetryPolicy,
    SessionEvent,
    TxnBuilder,
    WatchEvent,
)
from coord.client.admin import AdminClient
from coord.client.aio import AsyncClient, AsyncSession, AsyncStream, AsyncTxn
from coord.client.errors import (
    CompactedError,
    CoordError,
    DeadlineError,
    FutureRevisionError,
    InvalidArgumentError,
    NoQuorumError,
    OutOfRangeError,
    OwnedByHigherGenerationError,
    ProducerFencedError,
    ReadOnlyError,
    SessionGoneError,
    UnavailableError,
    from_rpc_error,
)
from coord.client.sequence import SequenceValidator
from coord.client.sync import Client, Session, Stream, Txn

__all__ = [
    "AdminClient",
    "AsyncClient",
    "AsyncSession",
    "AsyncStream",
    "AsyncTxn",
    "Client",
    "CompactedError",
    "Conflict",
    "CoordError",
    "DeadlineError",
    "FutureRevisionError",
    "Grant",
    "Header",
    "InvalidArgumentError",
    "KeyValue",
    "NoQuorumError",
    "OutOfRangeError",
    "Owner",
    "OwnerChange",
    "OwnResult",
    "OwnedByHigherGenerationError",
    "PidBlock",
    "PidLease",
    "Producer",
    "ProducerFencedError",
    "ReadOnlyError",
    "RetryPolicy",
    "SequenceValidator",
    "Session",
    "SessionEvent",
    "SessionGoneError",
    "Stream",
    "Txn",
    "TxnBuilder",
    "UnavailableError",
    "WatchEvent",
    "from_rpc_error",
]
