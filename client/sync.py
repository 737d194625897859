"""The synchronous client: a blocking facade over `AsyncClient`.

Each `Client` owns an asyncio loop on a daemon thread (`LoopThread`) running one
`AsyncClient`; every method submits that client's coroutine to the loop and blocks until
it finishes. So many threads may share one Client, and every behaviour — failover and
retries, resumable streams, sessions kept alive in the background, the search for a
read-write member — is the asyncio client's, written once. Its connections use gRPC's
threaded stack (`thread_transport`, which says why). Application callbacks (`on_severed`,
`on_event`, mode listeners) run on the client's `CallbackThread`, in order, never on the
loop, so a slow callback cannot hold up a keepalive. `close()` ends the client's
sessions, stops the loop and ends both threads.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import grpc

from coord.client import calls, thread_transport
from coord.client.aio import AsyncClient
from coord.client.calls import ClaimLike, SessionRef
from coord.client.cursors import OwnersCursor, WatchCursor
from coord.client.endpoints import EndpointRing
from coord.client.errors import CoordError, error_for
from coord.client.history import HistoryCursor, HistoryPage
from coord.client.keys import Bytesish, key_range
from coord.client.loop_thread import CallbackThread, LoopClosed, LoopThread
from coord.client.read_only import ModeChange, ModeListener
from coord.client.results import (
    CasResult,
    DeleteResult,
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
from coord.client.sync_session import Session
from coord.client.sync_stream import Stream
from coord.client.transport import Stubs, closed_error
from coord.client.txn import TxnBuilder
from coord.tls.files import TLS

__all__ = ["Client", "Txn"]

T = TypeVar("T")

CALLBACK_DRAIN_S = 2.0
"""How long `Client.close()` waits for callbacks it caused (sessions told `gone`)."""

_OPEN: weakref.WeakSet[Client] = weakref.WeakSet()  # for the fork hooks below
_sessions_at_fork = 0  # live sessions of this process's clients when fork() was called
_fork_refusal = ""  # in a child forked with live sessions: why no client works here


def _count_sessions_before_fork() -> None:
    global _sessions_at_fork
    try:
        _sessions_at_fork = sum(len(c._aio.sessions) for c in list(_OPEN) if not c.closed)
    except RuntimeError:  # another thread made or closed a client meanwhile: assume some
        _sessions_at_fork = 1


def _restart_clients_in_child() -> None:
    """After fork(), in the child: a client's loop and callback threads did not survive,
    and the parent's loop must not run here (its epoll instance is the parent's too), so
    each open client starts afresh — as the threaded client before the facade simply
    kept working in a child.

    Unless the parent had live sessions: their keepalive and event streams keep gRPC's
    poller busy, and gRPC copies its poller's state into the child mid-call (gRPC
    supports fork() only before channels exist, or with an experimental mode that hangs
    here). A child that then opens a channel aborts inside gRPC — measured here in 16%
    of forks with one session and 37% with a session and a watch, none in 600 forks
    from clients without sessions. So every client in such a child, and every child of
    it, refuses with FORKED instead of dying at random."""
    global _fork_refusal
    if _sessions_at_fork and not _fork_refusal:
        _fork_refusal = (
            f"this process was forked while a coord Client in its parent had "
            f"{_sessions_at_fork} live session(s); gRPC cannot serve a child forked in that "
            "state (it may abort the process), so no coord Client works here. Start "
            "workers with multiprocessing's 'spawn' or 'forkserver' start method, or "
            "fork before opening sessions")
    for client in list(_OPEN):
        client._start_afresh()


def _refuse_if_forked_with_sessions() -> None:
    if _fork_refusal:
        raise error_for("FORKED", _fork_refusal, grpc.StatusCode.FAILED_PRECONDITION)


os.register_at_fork(before=_count_sessions_before_fork,
                    after_in_child=_restart_clients_in_child)


class Client:
    """A client of a coord cluster. Thread-safe; use as a context manager or `close()`.

    `timeout` bounds each try (the whole operation, failover included, is bounded by
    `policy.budget_factor` times it).

    `read_only_ok` (ZooKeeper's read-only client): when the member it talks to loses
    quorum, reads keep being answered from that member, marked `header.read_only`; writes
    raise ReadOnlyError at once; and a background prober looks for a read-write member
    (pauses doubling from 0.1 s to 2 s) and moves the client there, telling sessions and
    `add_mode_listener` listeners. A normal client fails over to a majority member, or
    raises NoQuorumError when no member with a quorum is reachable.

    `stream` (default True): requests travel on one pipelined stream per member (see
    `AsyncClient`); False sends each as its own unary call.

    `tls`: a `TLS` (the CA that signed the members' certificates, and this client's
    certificate and key for members started with --client-cert-auth); None (default)
    reads $COORD_CACERT, $COORD_CERT and $COORD_KEY, as etcdctl reads $ETCDCTL_CACERT,
    $ETCDCTL_CERT and $ETCDCTL_KEY (plaintext if none is set); False is plaintext
    whatever the environment says. The files are read here: a missing one, or a key its
    group or others can read, raises `TLSConfigError` (a ValueError).

    `user` and `password` (or `user="NAME:PASSWORD"`, etcdctl's --user), or a `token`:
    who the calls are made as when the cluster has authentication on (`coord.client.auth`:
    the client logs in through etcd's Authenticate and logs in again when its token ran
    out). Without them, a client certificate's common name is the user.

    `randomize_endpoints` (default True): start at a random member of `endpoints`, so
    that clients given the same list spread over the cluster (as ZooKeeper's and kazoo's
    clients do); False starts at the first endpoint, for a client that must reach a
    particular member first. Failover goes on through the list in its order either way.

    After fork(), a client inherited by the child starts afresh there; in a child forked
    while this process's clients had live sessions, every Client raises `CoordError`
    reason FORKED instead (see `_restart_clients_in_child`).
    """

    def __init__(
        self,
        endpoints: Sequence[str] | str | None = None,
        timeout: float = 5.0,
        read_only_ok: bool = False,
        policy: RetryPolicy | None = None,
        stream: bool = True,
        randomize_endpoints: bool = True,
        tls: TLS | Literal[False] | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
    ) -> None:
        _refuse_if_forked_with_sessions()
        self._aio = AsyncClient(endpoints, timeout, read_only_ok, policy,
                                connect=thread_transport.connect, stream=stream,
                                randomize_endpoints=randomize_endpoints, tls=tls,
                                user=user, password=password, token=token)
        self.mode_listeners: list[ModeListener] = []
        self._callbacks = CallbackThread("coord-callbacks")
        self._loop = LoopThread("coord-client")
        self._lock = threading.Lock()
        self._closed = False
        _OPEN.add(self)

    def _start_afresh(self) -> None:
        """In a forked child: a new AsyncClient, loop and callback thread, same settings
        and mode listeners. Streams and sessions made before the fork stay the parent's."""
        old = self._aio
        self._aio = AsyncClient(old.endpoints, old.timeout, old.read_only_ok, old.policy,
                                connect=thread_transport.connect, stream=old.stream,
                                randomize_endpoints=old.randomize_endpoints,
                                tls=old.tls or False, **old.login_arguments())
        self._callbacks = CallbackThread("coord-callbacks")
        self._loop = LoopThread("coord-client")
        self._lock = threading.Lock()
        for listener in self.mode_listeners:
            self._listen(listener)

    @property
    def ring(self) -> EndpointRing:
        return self._aio.ring

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self._aio.endpoints

    @property
    def timeout(self) -> float:
        return self._aio.timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        self._aio.timeout = seconds

    @property
    def read_only_ok(self) -> bool:
        return self._aio.read_only_ok

    @property
    def policy(self) -> RetryPolicy:
        return self._aio.policy

    @policy.setter
    def policy(self, policy: RetryPolicy) -> None:
        self._aio.policy = policy

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Sent with every call (`coord-read-only-ok` for a read-only client)."""
        return self._aio.metadata

    @property
    def closed(self) -> bool:
        return self._closed

    def add_mode_listener(self, listener: Callable[[ModeChange], Any]) -> None:
        """Called (on the client's callback thread) when the client finds a read-write
        member."""
        self.mode_listeners.append(listener)
        self._listen(listener)

    def _listen(self, listener: ModeListener) -> None:
        self._aio.add_mode_listener(
            lambda change: self._callbacks.submit(listener, change, what="mode listener"))

    def saw_read_only(self, member: str = "", term: int = 0, revision: int = 0) -> None:
        """A member answered read-only: tell the sessions, look for a read-write one."""
        self._loop.call_soon(self._aio.saw_read_only, member, term, revision)

    # -- plumbing -----------------------------------------------------------------------
    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the AsyncClient's coroutines on the loop and wait for it."""
        if _fork_refusal:
            coro.close()
            _refuse_if_forked_with_sessions()
        try:
            return self._loop.run(coro)
        except (LoopClosed, concurrent.futures.CancelledError):
            raise closed_error() from None

    def _wait_for(self, owner: AsyncClient, coro: Coroutine[Any, Any, T]) -> T:
        """`_wait` for a stream's or session's coroutine, made on `owner`: one made
        before a fork() belongs to the parent's loop and cannot run here."""
        self._check_owner(owner, coro)
        return self._wait(coro)

    def _check_owner(self, owner: AsyncClient, coro: Coroutine[Any, Any, Any]) -> None:
        if owner is not self._aio:
            coro.close()
            raise error_for("CLOSED", "this stream or session was opened before fork(), in "
                            "the parent process; open a new one here",
                            grpc.StatusCode.CANCELLED)

    def _channel(self, endpoint: str) -> tuple[grpc.Channel, Stubs]:
        """The client's own gRPC channel to `endpoint` and its stubs (`coord bench
        readonly` fires raw requests on it)."""
        return self._wait(self._thread_transport(endpoint))

    async def _thread_transport(self, endpoint: str) -> tuple[grpc.Channel, Stubs]:
        transport = self._aio.transport(endpoint)
        assert isinstance(transport, thread_transport.ThreadTransport)
        return transport.channel, transport.stubs

    # -- KV -----------------------------------------------------------------------------
    def put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
            prev_kv: bool = False) -> PutResult:
        """Set `key`; bound to `session` if given (deleted when the session ends)."""
        return self._wait(self._aio.put(key, value, session=session, prev_kv=prev_kv))

    def get(self, key: Bytesish, *, revision: int = 0,
            serializable: bool = False) -> KeyValue | None:
        """One key, or None if it does not exist."""
        return self._wait(self._aio.get(key, revision=revision, serializable=serializable))

    def range(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, limit: int = 0, revision: int = 0,
              serializable: bool = False) -> RangeResult:
        """Keys in [key, range_end) (range_end "\\0": every key >= key) or under `prefix`."""
        return self._wait(self._aio.range(key, range_end, prefix=prefix, limit=limit,
                                          revision=revision, serializable=serializable))

    def delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
               prefix: Bytesish | None = None, prev_kv: bool = False) -> DeleteResult:
        return self._wait(self._aio.delete(key, range_end, prefix=prefix, prev_kv=prev_kv))

    def txn(self) -> Txn:
        """`client.txn().if_version(k, "=", 0).then_put(k, v).else_get(k).commit()`"""
        return Txn(self)

    def put_if_absent(self, key: Bytesish, value: Bytesish, *,
                      session: SessionRef | None = None) -> CasResult:
        return self._wait(self._aio.put_if_absent(key, value, session=session))

    def compare_and_set(self, key: Bytesish, expected_version: int, value: Bytesish, *,
                        session: SessionRef | None = None) -> CasResult:
        """Write iff `key` is at `expected_version` (0: it must not exist)."""
        return self._wait(
            self._aio.compare_and_set(key, expected_version, value, session=session))

    def compact(self, revision: int) -> Header:
        return self._wait(self._aio.compact(revision))

    def watch(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, from_revision: int = 0,
              prev_kv: bool = False) -> Stream[WatchEvent]:
        """Changes to a key, range or prefix from `from_revision` (0: from now on). The
        stream survives member failures (it resumes where it was on another member);
        CompactedError if the history it needs was compacted."""
        k, end = key_range(key, range_end, prefix)
        return Stream(self, WatchCursor(k, end, from_revision, prev_kv))

    # -- producer ids -------------------------------------------------------------------
    def allocate_pid_block(self, requester: str = "", size: int = 1000) -> PidBlock:
        return self._wait(self._aio.allocate_pid_block(requester, size))

    def lease_pid(self, topic: str, partition: int, pid: int = -1) -> PidLease:
        """A new leased pid (pid -1) or the live lease of `pid`."""
        return self._wait(self._aio.lease_pid(topic, partition, pid))

    def init_producer(self, producer_key: str) -> Producer:
        """(pid, generation) for `producer_key`; fences every older instance."""
        return self._wait(self._aio.init_producer(producer_key))

    def check_producer(self, producer_key: str, pid: int, generation: int) -> Header:
        """ProducerFencedError if a newer instance of the producer exists."""
        return self._wait(self._aio.check_producer(producer_key, pid, generation))

    # -- ownership ----------------------------------------------------------------------
    def own(self, session: SessionRef, group: str,
            claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        """Claim resources for `session`, all or nothing. A bare resource name claims at
        generation 1 (it never resets a generation the way an explicit 0 does);
        (resource, generation) claims only if the current owner's generation is not
        higher (else OwnedByHigherGenerationError)."""
        return self._wait(self._aio.own(session, group, claims))

    def release(self, session: SessionRef, group: str,
                resources: Iterable[str] | str) -> ReleaseResult:
        return self._wait(self._aio.release(session, group, resources))

    def get_owner(self, group: str, resource: str, *, serializable: bool = False) -> Owner:
        """The owner (session_id 0: free)."""
        return self._wait(self._aio.get_owner(group, resource, serializable=serializable))

    def read_owner(self, group: str, resource: str) -> OwnerRead:
        """The owner, read linearizably, and the revision it was read at
        (`OwnerRead.header.revision`): at that revision of coord's state, this was the
        owner."""
        return self._wait(self._aio.read_owner(group, resource))

    def list_owners(self, group: str, prefix: str = "", *,
                    serializable: bool = False) -> tuple[Owner, ...]:
        return self._wait(self._aio.list_owners(group, prefix, serializable=serializable))

    def watch_owners(self, group: str, prefix: str = "", *,
                     from_revision: int = 0) -> Stream[OwnerChange]:
        """Current owners (snapshot=True) then changes; with `from_revision`, every change
        since that revision (frees included) then live ones, or CompactedError if that
        history is gone. Survives member failures without gaps or repeats."""
        return Stream(self, OwnersCursor(group, prefix, from_revision))

    # -- history ------------------------------------------------------------------------
    def export_history(self, after_index: int = 0, from_revision: int = 0, *,
                       follow: bool = False, page_entries: int = 0) -> Iterator[HistoryPage]:
        """The committed history as pages of rows (coord.history's schema), replayed by a
        member from what it retains: entries after `after_index`, rows from
        `from_revision`; up to the commit index the member had when it began (the last
        page says `done`), or with `follow` on as entries commit (closing the iterator
        ends it). Survives member failures; CompactedError if that history is gone."""
        stream = Stream(self, HistoryCursor(after_index, from_revision, follow, page_entries))
        try:
            for page in stream:
                yield page
                if page.done:
                    return
        finally:
            stream.cancel()

    # -- sessions -----------------------------------------------------------------------
    def open_session(self, name: str = "", ttl: float = 10.0,
                     read_only_ok: bool | None = None) -> SessionInfo:
        """Open a session WITHOUT keeping it alive (see `session()` for that)."""
        return self._wait(self._aio.open_session(name, ttl, read_only_ok))

    def close_session(self, session: SessionRef) -> Header:
        """End a session now (its ownership and bound keys are released at once)."""
        return self._wait(self._aio.close_session(session))

    def close_sessions(self, sessions: Iterable[SessionRef]) -> list[CoordError | None]:
        """End many sessions at once, in one round trip (`AsyncClient.close_sessions`):
        per session, None if it ended, else the CoordError that says why not."""
        return self._wait(self._aio.close_sessions(sessions))

    def session(
        self,
        name: str = "",
        ttl: float = 10.0,
        on_severed: Callable[[SessionEvent], Any] | None = None,
        on_event: Callable[[SessionEvent], Any] | None = None,
        read_only_ok: bool | None = None,
    ) -> Session:
        """Open a session and keep it alive in the background until `close()`."""
        return Session(self, lambda output: self._aio.start_session(
            name, ttl, read_only_ok, output=output, start=False), on_severed, on_event)

    def attach(
        self,
        session_id: int,
        ttl: float = 10.0,
        on_severed: Callable[[SessionEvent], Any] | None = None,
        on_event: Callable[[SessionEvent], Any] | None = None,
    ) -> Session:
        """Keep an existing session alive (e.g. one opened by another process): a session
        outlives its connections. `ttl` paces keepalives until the server states it."""
        return Session(self, lambda output: self._aio.attach(
            session_id, ttl, output=output, start=False), on_severed, on_event)

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """End the client's sessions (fenced; `on_severed` hears `gone`), close its
        connections, stop its loop thread, and let its callback thread finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN.discard(self)
        try:
            self._loop.run(self._aio.close())
        except (LoopClosed, concurrent.futures.CancelledError):
            pass
        finally:
            self._loop.stop()
            self._callbacks.close(CALLBACK_DRAIN_S)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Txn(TxnBuilder):
    """A transaction being built; `commit()` sends it (retried with one request_id)."""

    def __init__(self, client: Client) -> None:
        super().__init__()
        self._client = client

    def commit(self) -> TxnResult:
        return self._client._wait(self._client._aio.send(calls.txn_call(self.build())))
