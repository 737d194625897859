"""Hostile requests for the fuzz tests of a member's ports, and what is checked after each.

- `messages(descriptor)`: a hypothesis strategy for any protobuf message, built from its
  descriptor: every field may be set, to valid, boundary and hostile values (numbers at and
  past their type's ends, empty and oversized strings and bytes, unknown enum values, long
  repeated fields, nested messages).
- `malformed(descriptor)`: bytes that are not a valid encoding of the message: garbage,
  truncations and bit flips of a valid one, invalid UTF-8 in a string field, a length past
  the end, a wrong wire type, deep group nesting.
- `call`: one call of any gRPC method by its path, with raw bytes each way (the generic
  channel API, identity serializers), so a request the stubs could not even build is sent.
- `Outcome.clear()`: the member answered (a response, or a status it chose); UNKNOWN (a
  handler raised) or an INTERNAL other than gRPC's own "cannot deserialize" is not clear.
- `Probe`: the etcd API's revision, HashKV, users and roles before and after a refused
  request (the same: the refusal changed nothing), whether the member still serves, and the clean-up
  after every request (leases revoked, alarms lowered), so a fuzzed session cannot expire
  during a later example and change the state under it.

`FUZZ_EXAMPLES` (environment) is the number of examples per RPC: small and derandomized
in the suite; `make fuzz FUZZ_EXAMPLES=N` runs N per RPC with fresh randomness.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import descriptor as d
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from coord.etcdpb import rpc_pb2 as etcd_pb
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.testing import LocalCluster

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
LONG_RUN = "FUZZ_EXAMPLES" in os.environ
UNARY_TIMEOUT_S = 10.0
STREAM_TIMEOUT_S = 0.3  # a stream still open then has answered all it will (it is ended)
MAX_RESPONSES = 4  # of a stream, before it is cancelled
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20)]

SURVIVED: Counter[str] = Counter()
"""Requests each API was sent and answered clearly with the member still serving."""

FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)

_INT_RANGES = {
    d.FieldDescriptor.TYPE_INT32: (-(1 << 31), (1 << 31) - 1),
    d.FieldDescriptor.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1),
    d.FieldDescriptor.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1),
    d.FieldDescriptor.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
    d.FieldDescriptor.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1),
    d.FieldDescriptor.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1),
    d.FieldDescriptor.TYPE_UINT32: (0, (1 << 32) - 1),
    d.FieldDescriptor.TYPE_FIXED32: (0, (1 << 32) - 1),
    d.FieldDescriptor.TYPE_UINT64: (0, (1 << 64) - 1),
    d.FieldDescriptor.TYPE_FIXED64: (0, (1 << 64) - 1),
}
BIG_SIZES = (1535, 1536, 1537, 65_536, (1 << 20) + 1, 1536 * 1024 + 1, (2 << 20) + 1)
"""Around coord's key limit, its value limit, --max-request-bytes and gRPC's limit."""


def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = sorted({x for x in (lo, lo + 1, -1, 0, 1, 2, 100, 1 << 31, 1 << 53, hi - 1, hi)
                    if lo <= x <= hi})
    return st.one_of(st.integers(max(lo, -3), min(hi, 3)), st.sampled_from(edges),
                     st.integers(lo, hi))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_STRINGS = st.one_of(_TEXT, st.sampled_from(["", "n1", "\0", "é" * 3, "/" * 5]),
                     st.sampled_from(BIG_SIZES).map("s".__mul__))
_BYTES = st.one_of(st.binary(max_size=16), st.sampled_from([b"", b"\0", b"\xff" * 3, b"a"]),
                   st.sampled_from(BIG_SIZES).map(b"b".__mul__))


def _scalar(field: d.FieldDescriptor) -> st.SearchStrategy:
    t = field.type
    if t in _INT_RANGES:
        return _integers(*_INT_RANGES[t])
    if t == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == d.FieldDescriptor.TYPE_STRING:
        return _STRINGS
    if t == d.FieldDescriptor.TYPE_BYTES:
        return _BYTES
    if t == d.FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(known), _integers(-(1 << 31), (1 << 31) - 1))
    if t in (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32 if t == d.FieldDescriptor.TYPE_FLOAT else 64)
    raise NotImplementedError(f"field type {t} of {field.full_name}")


def message_class(desc: d.Descriptor) -> type:
    return message_factory.GetMessageClass(desc)


def _is_map(field: d.FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


@st.composite
def messages(draw: st.DrawFn, desc: d.Descriptor, depth: int = 0) -> object:
    """Any message of type `desc`: each field left out or set, nested messages down to a
    depth of 3, repeated fields of 0-4 elements or (at the top two levels) of 120-140."""
    msg = message_class(desc)()
    for field in desc.fields:
        if not draw(st.booleans()):
            continue
        if _is_map(field):
            key_f, value_f = field.message_type.fields
            entries = draw(st.dictionaries(_scalar(key_f), _scalar(value_f), max_size=3))
            getattr(msg, field.name).update(entries)
            continue
        is_message = field.message_type is not None
        if is_message and depth >= 3:
            continue
        one = messages(field.message_type, depth + 1) if is_message else _scalar(field)
        if field.is_repeated:
            short = st.lists(one, max_size=4)
            many = st.lists(one, min_size=120, max_size=140) if depth < 2 else short
            values = draw(st.one_of(short, short, many))
            getattr(msg, field.name).extend(values)
        elif is_message:
            getattr(msg, field.name).CopyFrom(draw(one))
        else:
            setattr(msg, field.name, draw(one))
    return msg


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


@st.composite
def malformed(draw: st.DrawFn, desc: d.Descriptor) -> bytes:
    """Bytes that are not (or not only) a valid `desc`: see the module docstring."""
    valid = draw(messages(desc, depth=2)).SerializeToString()
    strings = [f.number for f in desc.fields if f.type == d.FieldDescriptor.TYPE_STRING]
    numbers = [f.number for f in desc.fields] or [1]
    kind = draw(st.sampled_from(["garbage", "truncated", "flipped", "bad_utf8", "past_end",
                                 "wire_type", "groups", "appended"]))
    if kind == "garbage":
        return draw(st.binary(min_size=1, max_size=64))
    if kind == "truncated" and valid:
        return valid[:draw(st.integers(0, len(valid) - 1))]
    if kind == "flipped" and valid:
        at = draw(st.integers(0, len(valid) - 1))
        return valid[:at] + bytes([valid[at] ^ (1 << draw(st.integers(0, 7)))]) + valid[at + 1:]
    if kind == "bad_utf8" and strings:
        bad = draw(st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"a\x80b"]))
        return valid + _varint(draw(st.sampled_from(strings)) << 3 | 2) + _varint(len(bad)) + bad
    if kind == "past_end":
        n = draw(st.sampled_from(numbers))
        return valid + _varint(n << 3 | 2) + _varint(draw(st.sampled_from([5, 1 << 31, 1 << 62])))
    if kind == "wire_type":
        n = draw(st.sampled_from(numbers))
        return valid + _varint(n << 3 | draw(st.sampled_from([1, 3, 5, 6, 7]))) + b"\x01"
    if kind == "groups":  # start-group tags nested far past any parser's recursion limit
        return _varint(15 << 3 | 3) * draw(st.sampled_from([101, 1000, 50_000]))
    return valid + draw(st.binary(min_size=1, max_size=32))


# -- calling -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    path: str  # /package.Service/Method
    input: d.Descriptor
    output: d.Descriptor
    client_streaming: bool
    server_streaming: bool

    @property
    def unary(self) -> bool:
        return not (self.client_streaming or self.server_streaming)

    def __str__(self) -> str:
        return self.path


def methods(*files: d.FileDescriptor, skip: Iterable[str] = ()) -> list[Method]:
    """Every method of every service in `files`, but the services named in `skip`."""
    out = []
    for f in files:
        for service in f.services_by_name.values():
            if service.name in skip:
                continue
            for m in service.methods:
                out.append(Method(f"/{service.full_name}/{m.name}", m.input_type, m.output_type,
                                  m.client_streaming, m.server_streaming))
    return out


def requests_for(method: Method) -> st.SearchStrategy[list]:
    """One request, or 1-3 for a method that takes a stream of them."""
    one = messages(method.input)
    return st.lists(one, min_size=1, max_size=3) if method.client_streaming else st.tuples(one)


_UNDECODABLE = ("Unexpected <class 'google.protobuf.message.DecodeError'>: Error parsing",
                "Exception deserializing request")


@dataclass
class Outcome:
    responses: list[bytes]
    code: grpc.StatusCode
    details: str

    @property
    def refused(self) -> bool:
        """The member said no to a request it had (not: it ran out of time, or a stream
        was still open at our deadline)."""
        return self.code not in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED,
                                 grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)

    def clear(self, method: Method) -> bool:
        """A status the member chose, and responses that decode as the method's."""
        if self.code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
            # A handler raised, but for gRPC's own refusal of bytes that do not decode
            # (the asyncio server's words for it, UNKNOWN, or the sync server's).
            return any(words in self.details for words in _UNDECODABLE)
        cls = message_class(method.output)
        return all(next(_in_band_failures(cls.FromString(raw)), None) is None
                   for raw in self.responses)


def _in_band_failures(msg: Message) -> Iterator[Message]:
    """Errors answered inside a response (a pipelined operation's PipelineError) that say
    a handler raised: code UNKNOWN."""
    for field, value in msg.ListFields():
        if field.message_type is None or _is_map(field):
            continue
        for m in value if field.is_repeated else (value,):
            if m.DESCRIPTOR.name == "PipelineError" and m.code == grpc.StatusCode.UNKNOWN.value[0]:
                yield m
            yield from _in_band_failures(m)


def call(channel: grpc.Channel, method: Method, requests: Iterable[bytes],
         metadata: tuple = (), timeout: float | None = None) -> Outcome:
    """Send `requests` (encoded) to `method` and read what comes back: everything of a
    unary call, up to MAX_RESPONSES of a stream (then it is cancelled). `timeout`: the
    call's deadline, for a stream that must end by itself (else STREAM_TIMEOUT_S)."""
    if timeout is None:
        timeout = UNARY_TIMEOUT_S if not method.server_streaming else STREAM_TIMEOUT_S
    stream = channel.stream_stream(method.path)  # no serializers: bytes as they are
    responses: list[bytes] = []
    it = stream(iter(list(requests)), timeout=timeout, metadata=metadata)
    try:
        for raw in it:
            responses.append(raw)
            if len(responses) >= MAX_RESPONSES:
                it.cancel()
                return Outcome(responses, grpc.StatusCode.OK, "")
    except grpc.RpcError as e:
        return Outcome(responses, e.code(), e.details() or "")
    return Outcome(responses, grpc.StatusCode.OK, "")


# -- the member's state ------------------------------------------------------------------


class Probe:
    """What a fuzz test asks the member between requests, through the etcd API."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.maintenance = etcd_grpc.MaintenanceStub(channel)
        self.lease = etcd_grpc.LeaseStub(channel)
        self.auth = etcd_grpc.AuthStub(channel)

    def state(self) -> tuple[int, int, list[str], list[str]]:
        """The revision, the hash of the key space and its history, and the etcd users
        and roles (a refused Auth call must not have added or removed one)."""
        h = self.maintenance.HashKV(etcd_pb.HashKVRequest(), timeout=UNARY_TIMEOUT_S)
        users = self.auth.UserList(etcd_pb.AuthUserListRequest(), timeout=UNARY_TIMEOUT_S)
        roles = self.auth.RoleList(etcd_pb.AuthRoleListRequest(), timeout=UNARY_TIMEOUT_S)
        return h.header.revision, h.hash, list(users.users), list(roles.roles)

    def serving(self) -> bool:
        return self.maintenance.Status(etcd_pb.StatusRequest(), timeout=UNARY_TIMEOUT_S) \
            .header.member_id != 0

    def clean_up(self) -> None:
        """Revoke every lease (session) and lower every alarm a request made."""
        for lease in self.lease.LeaseLeases(etcd_pb.LeaseLeasesRequest(),
                                            timeout=UNARY_TIMEOUT_S).leases:
            try:
                self.lease.LeaseRevoke(etcd_pb.LeaseRevokeRequest(ID=lease.ID),
                                       timeout=UNARY_TIMEOUT_S)
            except grpc.RpcError as e:  # a member-local session, or gone meanwhile
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
        alarms = self.maintenance.Alarm(etcd_pb.AlarmRequest(action=etcd_pb.AlarmRequest.GET),
                                        timeout=UNARY_TIMEOUT_S).alarms
        for a in alarms:
            self.maintenance.Alarm(etcd_pb.AlarmRequest(
                action=etcd_pb.AlarmRequest.DEACTIVATE, memberID=a.memberID, alarm=a.alarm),
                timeout=UNARY_TIMEOUT_S)


def check_answer(member: FuzzedMember, method: Method, requests: list[bytes],
                 metadata: tuple = (), timeout: float | None = None) -> Outcome:
    """Send one fuzzed request and assert what every one must give: a clear answer; for a
    refused unary request, a state unchanged; a member still serving. Counted in
    SURVIVED[member.api]."""
    probe = member.probe
    before = probe.state() if method.unary else None
    outcome = call(member.channel, method, requests, metadata, timeout)
    assert outcome.clear(method), f"{method}: {outcome.code.name} {outcome.details!r:.300}"
    if before is not None and outcome.refused:
        assert probe.state() == before, f"{method} was refused ({outcome.code.name}: " \
            f"{outcome.details:.200}) but the state changed"
    probe.clean_up()
    assert probe.serving()
    SURVIVED[member.api] += 1
    return outcome


@dataclass
class FuzzedMember:
    """A running one-member cluster and what the tests send through."""

    cluster: LocalCluster
    channel: grpc.Channel
    probe: Probe
    api: str  # what SURVIVED counts under


def running_member(root: Path, api: str, peer_port: bool = False) -> Iterator[FuzzedMember]:
    """A module fixture's body: one member (a process), its history never compacted
    behind the tests' back, requests sent to its client port (or its `peer_port`); at
    the end, it must still be running and the count of requests `api` survived is
    printed."""
    c = LocalCluster(1, data_dir=root / "cluster",
                     extra_args=["--auto-compaction-retention", "0"])
    try:
        c.start()
        c.wait_for_leader()
        client = grpc.insecure_channel(c.endpoints[0], options=CHANNEL_OPTIONS)
        target = c.members["n1"].peer_listen if peer_port else c.endpoints[0]
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        yield FuzzedMember(c, channel, Probe(client), api)
        channel.close()
        client.close()
        assert c.members["n1"].running, "the member died under fuzzed requests"
    finally:
        c.stop()
        print(f"\nfuzz: the {api} survived {SURVIVED[api]} fuzzed requests")


Tame = Callable[[Method, Message], Message]


def send_generated(member: FuzzedMember, method: Method, data: st.DataObject,
                   tame: Tame = lambda _m, r: r) -> None:
    """One generated request (or stream of them), `tame`d, checked by `check_answer`."""
    requests = [tame(method, r) for r in data.draw(requests_for(method), label="requests")]
    check_answer(member, method, [r.SerializeToString() for r in requests])


def send_malformed(member: FuzzedMember, method: Method, data: st.DataObject,
                   tame: Tame = lambda _m, r: r) -> None:
    """Malformed bytes on the raw method; bytes that happen to decode are a request like
    any other, `tame`d."""
    raw = data.draw(malformed(method.input), label="bytes")
    try:
        raw = tame(method, message_class(method.input).FromString(raw)).SerializeToString()
    except DecodeError:
        pass
    check_answer(member, method, [raw])
