"""The request path of the client API: writes become state-machine commands that go
through the log (proposed here if this member leads, else forwarded to the leader);
reads are served from the local state machine, after a ReadIndex barrier unless the
client asked for a serializable (possibly stale) read."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from coord.server.forward.link import LeaderLink
from coord.server.node.driver import Node
from coord.server.node.errors import (
    NoLeader,
    NotLeader,
    OutcomeUnknown,
    ProposalLost,
    Timeout,
)
from coord.server.requests.callers import CallerUsers
from coord.server.requests.request_limits import RequestLimits
from coord.server.requests.tokens import TokenKeeper
from coord.server.upkeep.mode import READ_WRITE, ModeChange, ModeMonitor, Refused
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.v1 import coord_pb2 as pb
from coord.wire import ApiError

RETRY_PAUSE_S = 0.05
DEFAULT_TIMEOUT_S = 5.0
"""A request's time budget when its caller set no deadline."""

# Request ids this member makes up: a random prefix per process and a counter, unique
# across members and restarts as a uuid4 each would be, at a fraction of the cost.
_ID_PREFIX = secrets.token_hex(8)
_ids = itertools.count(1)


def new_request_id() -> str:
    """A request id made up by this member, for a command whose client sent none: a
    converter that builds the command gives it one at once, rather than `write` copying
    it with one (`dataclasses.replace` on a frozen command costs more than building it)."""
    return f"srv-{_ID_PREFIX}-{next(_ids)}"


def clamp_timeout(remaining: float) -> float:
    """A deadline the client gave, less a margin to answer in, within [0.05, 60] s."""
    return max(0.05, min(remaining - 0.05, 60.0))


def call_timeout(context: grpc.aio.ServicerContext) -> float:
    """The time budget of the call `context` serves, in either API."""
    remaining = context.time_remaining()
    return DEFAULT_TIMEOUT_S if remaining is None else clamp_timeout(remaining)


class Coordinator:
    def __init__(self, node: Node, machine: CoordMachine, link: LeaderLink,
                 limits: RequestLimits | None = None, tokens: TokenKeeper | None = None
                 ) -> None:
        self.node = node
        self.machine = machine
        self.link = link
        self.limits = limits or RequestLimits()  # what a client's request may be
        # who a call on either API is made as (its token, or its certificate's name)
        self.callers = CallerUsers(
            machine, TokenKeeper(machine) if tokens is None else tokens, self.barrier)
        self.mode = ModeMonitor(node, machine, self.barrier)
        self._reads: set[asyncio.Future] = set()  # barriers that give up when cut off
        self.mode.listeners.append(self._give_up_reads)

    def header(self, revision: int | None = None) -> pb.ResponseHeader:
        header = pb.ResponseHeader(
            revision=self.machine.revision if revision is None else revision,
            raft_term=self.node.term,
            member=self.node.me.name,
        )
        if not self.mode.serving_writes:
            header.read_only = True
            header.quorum_lost_ms = int(self.mode.cut_off_for() * 1000)
        return header

    async def write(self, cmd: Any, timeout: float = DEFAULT_TIMEOUT_S,
                    local_apply: bool = False) -> Any:
        """Commit `cmd` and return its result: on the leader the very value its machine
        made, on a follower the leader's answer decoded.

        Every retryable command carries a request id (one is made up if the client sent
        none), so retrying after a lost reply or a leader change is safe: the state
        machine answers a repeated id from memory instead of applying it twice.

        `local_apply`: also wait until this member has applied the command, so the
        caller's next local read or watch here sees it (etcd answers a write only after
        the member that took it applied it; its clients rely on that)."""
        if hasattr(cmd, "request_id") and not cmd.request_id:
            cmd = dataclasses.replace(cmd, request_id=new_request_id())
        retry_safe = bool(getattr(cmd, "request_id", ""))
        try:
            payload = c.encode_command(cmd)
        except ValueError as e:  # a field out of its type's range (a uint64 id past int64)
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", str(e)) from None
        deadline = time.monotonic() + timeout
        uncertain = ""  # why an earlier attempt's outcome is unknown, if one's is
        while True:
            if not self.mode.serving_writes:
                if uncertain:
                    # A refusal says "not applied"; after an attempt that may have been
                    # (found by the chaos harness, seed 103), only "unknown" is true.
                    raise OutcomeUnknown(
                        f"an earlier attempt may have been applied ({uncertain}); then "
                        f"{self.mode.refusal(False)[1]}")
                raise Refused(self.mode.refusal(False)[1])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(f"no leader committed the request within {timeout:.1f}s")
            try:
                result, index = await self._propose(payload, remaining)
                if local_apply and index:
                    await self.node.wait_applied(index, max(0.05, deadline - time.monotonic()))
                return result
            except (NotLeader, NoLeader):
                pass  # not proposed anywhere: always safe to try again
            except (ProposalLost, Timeout, OutcomeUnknown) as e:
                if not retry_safe:
                    raise
                uncertain = f"{e.reason}: {e}"
            except ApiError as e:  # the leader's answer to the forwarded command
                if e.reason in ("NOT_LEADER", "NO_LEADER"):
                    pass
                elif e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    if not retry_safe:
                        raise
                    uncertain = f"{e.reason or e.code.name}: {e.message}"
                else:
                    raise
            await asyncio.sleep(min(RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))

    async def _propose(self, payload: bytes, timeout: float) -> tuple[Any, int]:
        """The result and the log index it was applied at."""
        node = self.node
        if node.is_leader:
            applied = await node.propose(payload, timeout)
            return applied.result.value, applied.index
        leader = node.leader
        if leader is None:
            raise NoLeader(f"member {node.me.name} knows no leader")
        data, index = await self.link.propose(leader, payload, timeout)
        return c.decode_result(data), index

    async def read(self, cmd: Any, serializable: bool = False,
                   timeout: float = DEFAULT_TIMEOUT_S,
                   allowed: Callable[[], Awaitable[None]] | None = None) -> Any:
        """`cmd` read from this member's state once it has caught up (the barrier, unless
        `serializable`), after `allowed` (the caller's permission check, which may await
        the caller's user) passed: nothing awaits between the read and the return, so the
        header's revision (`header()`) is the revision of the state read — what a client
        cites as the point its read saw."""
        if not serializable:
            await self.barrier(timeout)
        if allowed is not None:
            await allowed()
        return self.machine.query(cmd)

    async def barrier(self, timeout: float = DEFAULT_TIMEOUT_S,
                      give_up_when_cut_off: bool = True) -> None:
        """Wait until this member has applied everything committed before the call. A
        member that goes read-only meanwhile gives up at once (Refused), so a waiting
        read is answered read-only or refused then, not at its deadline."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self._read_index(deadline - time.monotonic(), give_up_when_cut_off)
                return
            except (NoLeader, Timeout):
                if time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(RETRY_PAUSE_S)

    async def _read_index(self, timeout: float, give_up_when_cut_off: bool) -> None:
        if not give_up_when_cut_off:
            await self.node.read_index(max(0.05, timeout))
            return
        if self.mode.cut_off.is_set():
            raise Refused(self.mode.refusal(False)[1])
        # Cancelled by _give_up_reads when the member is cut off (the node's future, not a
        # task per read or a second task waiting on the mode, keeps the hot path cheap).
        read = self.node.read_barrier(max(0.05, timeout))
        self._reads.add(read)
        try:
            await read
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # our caller is being cancelled
                raise
            raise Refused(self.mode.refusal(False)[1]) from None
        finally:
            self._reads.discard(read)

    def _give_up_reads(self, change: ModeChange) -> None:
        if change.mode != READ_WRITE:
            for read in self._reads:
                read.cancel()

