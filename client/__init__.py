"""coord's client library.

    from coord.client import Client

    with Client(["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"]) as client:
        client.put("config/x", "1")
        with client.session(ttl=10) as s:
            s.own("partitions", ["p0", "p1"])
            ...  # stop writing the moment s.fenced is set

Over TLS: `Client(endpoints, tls=TLS(cacert, cert, key))`, or $COORD_CACERT, $COORD_CERT
and $COORD_KEY (etcdctl's $ETCDCTL_CACERT... in coord's name), read when `tls` is not
given. `AsyncClient` has the same surface on asyncio; it is the one implementation, and
`Client` is a blocking facade over it. Errors are typed (`CoordError` and its subclasses); branch
on the class or on `.reason`. Modules: `results` (what calls return), `calls` (request
building), `txn`, `keys`, `endpoints`, `retry`, `cursors` (resumable streams),
`session_state`, `read_only` (read-only service and the prober), `transport` (with
`aio_transport` and `thread_transport`), `aio`, `aio_pipeline` (the pipelined stream
requests travel on), `aio_stream`, `aio_session`, `sync` with `sync_stream` and `sync_session`,
`loop_thread`, `errors`, `admin`; `recipes` (patterns on the client, kazoo's: a bulk
own, the sequence rule a sink embeds, a fenced sink's judgement).
"""

from coord.client.admin import AdminClient
from coord.client.aio import AsyncClient, AsyncTxn
from coord.client.aio_session import AsyncSession
from coord.client.aio_stream import AsyncStream
from coord.client.errors import (
    CompactedError,
    CoordError,
    DeadlineError,
    FutureRevisionError,
    InvalidArgumentError,
    LimitExceededError,
    NoQuorumError,
    NoSpaceError,
    OutOfRangeError,
    OwnedByHigherGenerationError,
    ProducerFencedError,
    ReadOnlyError,
    SessionGoneError,
    UnavailableError,
    from_rpc_error,
)
from coord.client.read_only import ModeChange
from coord.client.recipes.sequence import SequenceValidator
from coord.client.results import (
    CasResult,
    Conflict,
    DeleteResult,
    Grant,
    Header,
    KeyValue,
    Owner,
    OwnerChange,
    OwnerRead,
    OwnResult,
    PidBlock,
    PidLease,
    Producer,
    PutResult,
    RangeResult,
    ReleaseResult,
    SessionEvent,
    SessionInfo,
    TxnResult,
    WatchEvent,
)
from coord.client.retry import RetryPolicy
from coord.client.sync import Client, Txn
from coord.client.sync_session import Session
from coord.client.sync_stream import Stream
from coord.client.txn import TxnBuilder
from coord.tls.files import TLS, TLSConfigError

__all__ = [
    "AdminClient",
    "AsyncClient",
    "AsyncSession",
    "AsyncStream",
    "AsyncTxn",
    "CasResult",
    "Client",
    "CompactedError",
    "Conflict",
    "CoordError",
    "DeadlineError",
    "DeleteResult",
    "FutureRevisionError",
    "Grant",
    "Header",
    "InvalidArgumentError",
    "KeyValue",
    "LimitExceededError",
    "ModeChange",
    "NoQuorumError",
    "NoSpaceError",
    "OutOfRangeError",
    "OwnResult",
    "OwnedByHigherGenerationError",
    "Owner",
    "OwnerChange",
    "OwnerRead",
    "PidBlock",
    "PidLease",
    "Producer",
    "ProducerFencedError",
    "PutResult",
    "RangeResult",
    "ReadOnlyError",
    "ReleaseResult",
    "RetryPolicy",
    "SequenceValidator",
    "Session",
    "SessionEvent",
    "SessionGoneError",
    "SessionInfo",
    "Stream",
    "TLS",
    "TLSConfigError",
    "Txn",
    "TxnBuilder",
    "TxnResult",
    "UnavailableError",
    "WatchEvent",
    "from_rpc_error",
]
