"""The asyncio client, `AsyncClient`: coord's one client implementation.

Everything a client does beyond building requests lives here and in the modules it
drives — failover and retries (`send`), resumable streams (`aio_stream`), sessions
kept alive in the background (`aio_session`), the search for a read-write member
(`read_only.Prober`). The sync `Client` is a blocking facade over this class, so each
behaviour is written once.

Transports are made lazily on the running loop, so construct the client anywhere but
use it from one event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import grpc

from coord.client import aio_transport, calls
from coord.client.aio_pipeline import PIPELINED, Pipelines
from coord.client.aio_session import AsyncSession, Callback
from coord.client.aio_stream import AsyncStream
from coord.client.auth import INVALID_TOKEN, Login
from coord.client.calls import (
    Call,
    ClaimLike,
    SessionRef,
    finish,
    header_facts,
    served_read_only,
)
from coord.client.cursors import OwnersCursor, WatchCursor
from coord.client.endpoints import EndpointRing, parse_endpoints
from coord.client.errors import CoordError, ReadOnlyError, error_for, from_rpc_error
from coord.client.keys import Bytesish, key_range
from coord.client.read_only import READ_ONLY_OK_METADATA, ModeListener, Prober
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
    SessionInfo,
    TxnResult,
    WatchEvent,
)
from coord.client.retry import Attempts, RetryPolicy
from coord.client.transport import (
    CallCancelled,
    Connect,
    Metadata,
    Transport,
    TransportClosed,
    Transports,
    closed_error,
)
from coord.client.txn import TxnBuilder
from coord.tls.credentials import channel_credentials
from coord.tls.files import TLS, client_tls

__all__ = ["AsyncClient", "AsyncSession", "AsyncStream", "AsyncTxn", "SessionOpener"]

log = logging.getLogger("coord.client")

T = TypeVar("T")


class AsyncClient:
    """An asyncio client of a coord cluster; `async with AsyncClient(...) as client:`.

    `timeout` bounds each try (the whole operation, failover included, is bounded by
    `policy.budget_factor` times it). Only requests that are safe to repeat are repeated
    on the next member: reads, writes carrying a request_id, and any request whose error
    proves it was not applied. `read_only_ok`, `randomize_endpoints`: see `Client`.
    `connect` makes the transport for an endpoint (default grpc.aio; the sync Client
    passes its own). `tls`, `user`, `password`, `token`: see `Client`.
    """

    def __init__(
        self,
        endpoints: Sequence[str] | str | None = None,
        timeout: float = 5.0,
        read_only_ok: bool = False,
        policy: RetryPolicy | None = None,
        *,
        connect: Connect | None = None,
        stream: bool = True,
        randomize_endpoints: bool = True,
        tls: TLS | Literal[False] | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
    ) -> None:
        self.ring = EndpointRing(parse_endpoints(endpoints), randomize=randomize_endpoints)
        self.login = Login.of(user, password, token)
        self.tls = client_tls(tls)
        self.timeout = timeout
        self.read_only_ok = read_only_ok
        self.policy = policy or RetryPolicy()
        self._flags = READ_ONLY_OK_METADATA if read_only_ok else ()
        self.metadata = self._flags + (self.login.metadata() if self.login else ())
        self.mode_listeners: list[ModeListener] = []
        self._transports = Transports(
            connect or aio_transport.connect,
            channel_credentials(self.tls) if self.tls is not None else None)
        self.stream = stream
        self.randomize_endpoints = randomize_endpoints
        self._pipelines = Pipelines(lambda: self.metadata)
        self._prober = Prober(self.ring, self._transports, self.mode_listeners)
        self.sessions: set[AsyncSession] = set()  # live ones, ended when the client closes
        self._closed = False

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self.ring.endpoints

    def login_arguments(self) -> dict[str, str | None]:
        """The user=, password=, token= this client was made with (for a copy of it)."""
        login = self.login
        if login is None:
            return {}
        if login.renewable:
            return {"user": login.user, "password": login.password}
        return {"token": login.token}

    @property
    def closed(self) -> bool:
        return self._closed

    def add_mode_listener(self, listener: ModeListener) -> None:
        """Called (on the client's loop) when the client finds a read-write member."""
        self.mode_listeners.append(listener)

    def saw_read_only(self, member: str = "", term: int = 0, revision: int = 0) -> None:
        """A member answered read-only: tell every session that does not know yet (now,
        before the answer reaches the caller, so a session never learns of read-only
        mode after a read-only answer), and look for a read-write member in the
        background."""
        if self.read_only_ok and not self._closed:
            for session in list(self.sessions):
                session.heard_read_only(member, term, revision)
            self._prober.kick()

    # -- plumbing -----------------------------------------------------------------------
    def transport(self, endpoint: str) -> Transport:
        """The endpoint's transport; CoordError CLOSED once the client is closed."""
        return self._transports.get(endpoint)

    def current(self) -> tuple[int, Transport]:
        """(ring index, transport) of the current endpoint."""
        index, endpoint = self.ring.current()
        return index, self._transports.get(endpoint)

    async def send(self, call: Call[T]) -> T:
        """Send one request (a `Call` from `coord.client.calls`) with failover: on an
        error that allows it, try the next member after a short pause, within the
        policy's budget; else raise the typed error."""
        return (await self.send_at(call))[0]

    async def send_at(self, call: Call[T]) -> tuple[T, str]:
        """`send`, and the endpoint whose member answered."""
        attempts = Attempts(self.policy, len(self.ring), self.timeout)
        field = PIPELINED.get((call.service, call.method)) if self.stream else None
        logged_in_again = False
        while True:
            index, endpoint = self.ring.current()
            transport = self._transports.get(endpoint)
            try:
                if self.login is not None and not self.login.token:
                    await self._log_in(transport, attempts.call_timeout())
                if not call.safe:
                    await self._ensure_ready(transport, attempts.call_timeout())
                response = await self._try(call, field, endpoint, transport,
                                           attempts.call_timeout())
                if served_read_only(response):
                    self.saw_read_only(*header_facts(response.header))
                return finish(call, response, self.read_only_ok), endpoint
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            except CoordError as e:
                err = e
            except CallCancelled:
                err = error_for("CANCELLED", "the call was cancelled", grpc.StatusCode.CANCELLED)
            except TransportClosed:
                raise closed_error() from None
            if err.reason == "READ_ONLY":
                self.saw_read_only(err.metadata.get("member", ""))
            if not logged_in_again and self.token_expired(err):
                logged_in_again = True  # log in again, and try once more
                continue
            delay = attempts.next_delay(err, call.safe)
            if delay is None:
                raise attempts.final(err)
            log.debug("%s.%s on %s failed (%s); trying the next member",
                      call.service, call.method, endpoint, err.reason)
            self.ring.failed(index)
            await asyncio.sleep(delay)

    async def call_metadata(self, transport: Transport, timeout: float) -> Metadata:
        """The metadata a call of its own (not through `send`) carries, logged in."""
        if self.login is not None and not self.login.token:
            await self._log_in(transport, timeout)
        return self.metadata

    async def _log_in(self, transport: Transport, timeout: float) -> None:
        """Log in (etcd's Authenticate, on the member `transport` reaches): every call
        after carries the token, and the pipelined streams reopen with it."""
        login = self.login
        response = await transport.unary("Auth", "Authenticate", login.request(),
                                         timeout=timeout, metadata=())
        login.token = response.token
        self.metadata = self._flags + login.metadata()
        self._pipelines.reopen()

    def token_expired(self, err: CoordError) -> bool:
        """Whether `err` says the token ran out on a member and the client can log in
        again (it forgets the token: the next call logs in)."""
        if err.reason != INVALID_TOKEN or self.login is None or not self.login.renewable:
            return False
        self.login.token = ""
        self.metadata = self._flags
        return True

    async def _try(self, call: Call[T], field: str | None, endpoint: str,
                   transport: Transport, timeout: float) -> Any:
        """One try of `call` on one member: on its pipelined stream (`field`: the call's
        PipelineOp field) or as a unary call."""
        if field is not None:
            return await self._pipelines.get(endpoint, transport).call(
                field, call.request, timeout)
        return await transport.unary(call.service, call.method, call.request,
                                     timeout=timeout, metadata=self.metadata)

    @staticmethod
    async def _ensure_ready(transport: Transport, timeout: float) -> None:
        """Before sending a request that must not be repeated blindly: a connection that
        never became ready proves the request was not sent."""
        if not await transport.wait_ready(min(timeout, 1.0)):
            raise error_for("NOT_CONNECTED", "could not connect")

    # -- KV -----------------------------------------------------------------------------
    async def put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                  prev_kv: bool = False) -> PutResult:
        return await self.send(calls.put_call(key, value, session=session, prev_kv=prev_kv))

    async def get(self, key: Bytesish, *, revision: int = 0,
                  serializable: bool = False) -> KeyValue | None:
        return await self.send(calls.get_call(key, revision=revision, serializable=serializable))

    async def range(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, limit: int = 0, revision: int = 0,
                    serializable: bool = False) -> RangeResult:
        return await self.send(calls.range_call(calls.range_request(
            key, range_end, prefix=prefix, limit=limit, revision=revision,
            serializable=serializable)))

    async def delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                     prefix: Bytesish | None = None, prev_kv: bool = False) -> DeleteResult:
        return await self.send(calls.delete_call(calls.delete_request(
            key, range_end, prefix=prefix, prev_kv=prev_kv)))

    def txn(self) -> AsyncTxn:
        """`await client.txn().if_version(k, "=", 0).then_put(k, v).commit()`"""
        return AsyncTxn(self)

    async def put_if_absent(self, key: Bytesish, value: Bytesish, *,
                            session: SessionRef | None = None) -> CasResult:
        return await self.send(calls.put_if_absent_call(key, value, session=session))

    async def compare_and_set(self, key: Bytesish, expected_version: int, value: Bytesish, *,
                              session: SessionRef | None = None) -> CasResult:
        return await self.send(
            calls.compare_and_set_call(key, expected_version, value, session=session))

    async def compact(self, revision: int) -> Header:
        return await self.send(calls.compact_call(revision))

    def watch(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, from_revision: int = 0,
              prev_kv: bool = False) -> AsyncStream[WatchEvent]:
        """`async for event in client.watch(prefix="jobs/"):` — resumes across members."""
        k, end = key_range(key, range_end, prefix)
        return AsyncStream(self, WatchCursor(k, end, from_revision, prev_kv))

    # -- producer ids -------------------------------------------------------------------
    async def allocate_pid_block(self, requester: str = "", size: int = 1000) -> PidBlock:
        return await self.send(calls.allocate_pid_block_call(requester, size))

    async def lease_pid(self, topic: str, partition: int, pid: int = -1) -> PidLease:
        return await self.send(calls.lease_pid_call(topic, partition, pid))

    async def init_producer(self, producer_key: str) -> Producer:
        return await self.send(calls.init_producer_call(producer_key))

    async def check_producer(self, producer_key: str, pid: int, generation: int) -> Header:
        return await self.send(calls.check_producer_call(producer_key, pid, generation))

    # -- ownership ----------------------------------------------------------------------
    async def own(self, session: SessionRef, group: str,
                  claims: Iterable[ClaimLike] | Mapping[str, int] | str) -> OwnResult:
        return await self.send(calls.own_call(session, group, claims))

    async def release(self, session: SessionRef, group: str,
                      resources: Iterable[str] | str) -> ReleaseResult:
        return await self.send(calls.release_call(session, group, resources))

    async def get_owner(self, group: str, resource: str, *,
                        serializable: bool = False) -> Owner:
        return await self.send(calls.get_owner_call(group, resource, serializable))

    async def read_owner(self, group: str, resource: str) -> OwnerRead:
        return await self.send(calls.read_owner_call(group, resource))

    async def list_owners(self, group: str, prefix: str = "", *,
                          serializable: bool = False) -> tuple[Owner, ...]:
        return await self.send(calls.list_owners_call(group, prefix, serializable))

    def watch_owners(self, group: str, prefix: str = "", *,
                     from_revision: int = 0) -> AsyncStream[OwnerChange]:
        """See Client.watch_owners: a listing then changes, or a replay from
        `from_revision` then changes."""
        return AsyncStream(self, OwnersCursor(group, prefix, from_revision))

    # -- sessions -----------------------------------------------------------------------
    async def open_session(self, name: str = "", ttl: float = 10.0,
                           read_only_ok: bool | None = None) -> SessionInfo:
        return (await self._open_session_at(name, ttl, read_only_ok))[0]

    async def _open_session_at(self, name: str, ttl: float,
                               read_only_ok: bool | None) -> tuple[SessionInfo, str]:
        """The open, and the endpoint whose member answered it."""
        ok = self.read_only_ok if read_only_ok is None else read_only_ok
        call = calls.open_session_call(name, ttl, ok)
        try:
            return await self.send_at(call)
        except ReadOnlyError:
            if not ok:
                raise
            # The member went read-only while the open waited (READ_ONLY: not applied).
            # A read-only member opens member-local sessions for read-only clients: again.
            return await self.send_at(call)

    async def start_session(self, name: str, ttl: float, read_only_ok: bool | None,
                            **session_args: Any) -> AsyncSession:
        """Open a session and start keeping it alive (what `session()` gives; the sync
        facade's too, in one hop to this loop). A member-local session is kept on the
        member that opened it: the one that answered (a read-only member never forwards
        an open), so no second call looks for it."""
        info, endpoint = await self._open_session_at(name, ttl, read_only_ok)
        return AsyncSession(self, info.session_id, info.ttl or ttl, name=name,
                            home=endpoint if info.local else "", **session_args)

    async def close_session(self, session: SessionRef) -> Header:
        return await self.send(calls.close_session_call(session))

    async def close_sessions(self, sessions: Iterable[SessionRef]) -> list[CoordError | None]:
        """End many sessions at once: the closes are in flight together (unary calls,
        multiplexed on the member's one connection), so ending n sessions waits for one
        round trip, not n. Per session, in order: None if it ended, else why not
        (SessionGoneError: it had ended already)."""
        async def close(session: SessionRef) -> CoordError | None:
            try:
                await self.close_session(session)
            except CoordError as e:
                return e
            return None

        return list(await asyncio.gather(*(close(s) for s in sessions)))

    def session(
        self,
        name: str = "",
        ttl: float = 10.0,
        on_severed: Callback | None = None,
        on_event: Callback | None = None,
        read_only_ok: bool | None = None,
    ) -> SessionOpener:
        """`async with client.session(ttl=10) as s:` or `s = await client.session()`."""
        return SessionOpener(self, name, ttl, on_severed, on_event, read_only_ok)

    async def attach(self, session_id: int, ttl: float = 10.0,
                     on_severed: Callback | None = None,
                     on_event: Callback | None = None, **session_args: Any) -> AsyncSession:
        """Keep an existing session alive (see Client.attach)."""
        return AsyncSession(self, session_id, ttl, on_severed=on_severed, on_event=on_event,
                            **session_args)

    # -- lifecycle ----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the prober, end every live session (they are fenced; `on_severed` hears
        `gone`: nothing keeps them alive any more) and close the connections."""
        if self._closed:
            return
        self._closed = True
        self._prober.stop()
        for session in list(self.sessions):
            await session.client_closed()
        await self._pipelines.close()
        await self._transports.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncTxn(TxnBuilder):
    """A transaction being built; `await commit()` sends it (retried with one
    request_id)."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__()
        self._client = client

    async def commit(self) -> TxnResult:
        return await self._client.send(calls.txn_call(self.build()))


class SessionOpener:
    """What `AsyncClient.session()` returns: await it for a session, or use it as an async
    context manager that closes the session on exit."""

    def __init__(self, client: AsyncClient, name: str, ttl: float, on_severed: Callback | None,
                 on_event: Callback | None, read_only_ok: bool | None) -> None:
        self._client = client
        self._args = (name, ttl, on_severed, on_event, read_only_ok)
        self._session: AsyncSession | None = None

    async def _open(self) -> AsyncSession:
        name, ttl, on_severed, on_event, read_only_ok = self._args
        return await self._client.start_session(name, ttl, read_only_ok,
                                                on_severed=on_severed, on_event=on_event)

    def __await__(self) -> Generator[Any, None, AsyncSession]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncSession:
        self._session = await self._open()
        return self._session

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._session is not None:
            await self._session.__aexit__(exc_type, exc, tb)
