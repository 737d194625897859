"""Stand-ins the client library's unit tests share: a failed call as gRPC raises it, watch
answers, and a scripted member on a real gRPC server."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from coord.client.retry import RetryPolicy
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as pb_grpc


def status_of(
    code: grpc.StatusCode, reason: str | None, message: str, metadata: dict[str, str] | None = None
) -> grpc.Status:
    """A status as a coord member sends it: the code, and coord's reason in an ErrorInfo."""
    details = []
    if reason is not None:
        info = error_details_pb2.ErrorInfo(reason=reason, domain="coord.dev",
                                           metadata=metadata or {})
        detail = any_pb2.Any()
        detail.Pack(info)
        details.append(detail)
    st = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    return rpc_status.to_status(st)


class FakeRpcError(grpc.RpcError, grpc.Call):
    """What a failed unary call raises on the client: code, details, trailing metadata."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self):
        return self._status.trailing_metadata

    def initial_metadata(self):
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self):
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback) -> bool:
        return False


def rpc_error(code: grpc.StatusCode, reason: str | None, message: str = "msg",
              metadata: dict[str, str] | None = None) -> FakeRpcError:
    """A failed call whose status carries `reason` (none: a bare gRPC status)."""
    return FakeRpcError(status_of(code, reason, message, metadata))


S = grpc.StatusCode


def kv(key: bytes, rev: int) -> pb.KeyValue:
    """A key-value written at revision `rev` (created then too, version 1)."""
    return pb.KeyValue(key=key, value=b"v", mod_revision=rev, create_revision=rev, version=1)


def wresp(*events: tuple[bytes, int]) -> pb.WatchResponse:
    """A watch answer of PUT events, one per (key, revision)."""
    return pb.WatchResponse(events=[pb.WatchEvent(type="PUT", kv=kv(k, r)) for k, r in events])


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, reason: str, msg: str) -> None:
    """End the call as a coord member refuses it: `code` with coord's `reason`."""
    context.abort_with_status(status_of(code, reason, msg))


class FakeMember(pb_grpc.KVServicer, pb_grpc.SessionsServicer):
    """A scripted member: `behaviour[method]` decides each answer. It serves unary calls
    only (no Pipeline stream): its clients are made with `stream=False`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[str, list] = {}
        self.behaviour: dict = {}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        pb_grpc.add_KVServicer_to_server(self, self.server)
        pb_grpc.add_SessionsServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _record(self, method: str, request) -> None:
        self.requests.setdefault(method, []).append(request)

    def header(self, revision: int = 1) -> pb.ResponseHeader:
        return pb.ResponseHeader(revision=revision, member=self.name)

    def Put(self, request, context):
        self._record("Put", request)
        if self.behaviour.get("Put") == "no_leader":
            abort(context, S.UNAVAILABLE, "NO_LEADER", "no leader")
        return pb.PutResponse(header=self.header())

    def Compact(self, request, context):
        self._record("Compact", request)
        abort(context, S.DEADLINE_EXCEEDED, "TIMEOUT", "proposal timed out")

    def Range(self, request, context):
        self._record("Range", request)
        return pb.RangeResponse(header=self.header(10))

    def Watch(self, request, context):
        self._record("Watch", request)
        for resp in self.behaviour.get("Watch", []):
            if resp == "abort":
                abort(context, S.UNAVAILABLE, "UNAVAILABLE", "member stopping")
            if resp == "broke":  # as gRPC's core ends a stream whose member was killed
                context.abort(S.INTERNAL, "Internal error from Core")
            if resp == "export_failed":  # coord's own INTERNAL carries its reason
                abort(context, S.INTERNAL, "EXPORT_FAILED", "disk gone")
            yield resp
        while context.is_active():
            time.sleep(0.02)

    def OpenSession(self, request, context):
        self._record("OpenSession", request)
        if self.behaviour.get("OpenSession") == "went_read_only":
            if len(self.requests["OpenSession"]) == 1 or not request.read_only_ok:
                abort(context, S.FAILED_PRECONDITION, "READ_ONLY", "member a is read-only")
            return pb.OpenSessionResponse(header=self.header(), session_id=(1 << 62) + 5,
                                          ttl_ms=request.ttl_ms, local=True)
        return pb.OpenSessionResponse(header=self.header(), session_id=77,
                                      ttl_ms=request.ttl_ms)

    def KeepAlive(self, request_iterator, context):
        if self.behaviour.get("KeepAlive") == "down":
            abort(context, S.UNAVAILABLE, "NO_QUORUM", "no quorum")
        for req in request_iterator:
            self._record("KeepAlive", req)
            gone = self.behaviour.get("KeepAlive") == "gone"
            yield pb.KeepAliveResponse(session_id=req.session_id, ttl_ms=3000, gone=gone)

    def CloseSession(self, request, context):
        self._record("CloseSession", request)
        return pb.CloseSessionResponse(header=self.header())

    def Events(self, request, context):
        self._record("Events", request)
        script = self.behaviour.get("Events")
        if script == "down":
            abort(context, S.UNAVAILABLE, "NO_QUORUM", "no quorum")
        if isinstance(script, threading.Event):
            script.wait(5)
            yield pb.SessionEvent(type="severed", session_id=request.session_id, revision=9,
                                  group="g", resource="p0", generation=3, new_owner=78)
            return
        while context.is_active():
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.stop(0)


FAST = RetryPolicy(backoff=0.01, max_backoff=0.05)  # failover without a test waiting on it
