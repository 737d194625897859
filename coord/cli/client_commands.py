"""Client subcommands of the `coord` CLI: ownership, producer ids, KV and sessions.

`coord/cli.py` registers them with `register(subparsers)`. Every command takes
`--endpoints` (default $COORD_ENDPOINTS, else the `coord dev` members) and `--json`.
Failures print `coord: REASON: message` on stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import logging
import re
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from coord.cli import bulk_own
from coord.cli.tables import is_terminal, print_table
from coord.client.calls import BARE_CLAIM_GENERATION
from coord.client.endpoints import DEFAULT_ENDPOINTS, ENDPOINTS_ENV, parse_endpoints
from coord.client.errors import CoordError
from coord.client.results import DeleteResult, KeyValue, PutResult, RangeResult, TxnResult
from coord.client.session_state import describe_end
from coord.client.txn import TxnBuilder
from coord.tui.format import duration_ms

B = TypeVar("B", bound=TxnBuilder)
T = TypeVar("T")

EXIT_ERROR = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line input found after argparse (exit 2)."""


class TxnSyntaxError(UsageError, ValueError):
    """A malformed `coord kv txn` script; the message names the line."""


# -- output -------------------------------------------------------------------------------


def text(b: bytes) -> str:
    """Bytes for a human: UTF-8, undecodable bytes as \\x escapes."""
    return b.decode("utf-8", "backslashreplace")


def jsonable(obj: Any) -> Any:
    """Results as JSON values. Bytes become a str when they are UTF-8, else
    {"base64": "..."}, so nothing is lost or mangled."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, bytes):
        try:
            return obj.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(obj).decode()}
    if isinstance(obj, tuple | list):
        return [jsonable(x) for x in obj]
    if isinstance(obj, range):
        return {"start": obj.start, "stop": obj.stop}
    return obj


def _message_dict(msg: Any) -> dict[str, Any]:
    """A protobuf message as JSON values: every field by its name, set or not, ints as
    numbers (not the protobuf JSON mapping's strings), bytes as `jsonable` writes them."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        one = _message_dict if field.message_type is not None else jsonable
        out[field.name] = [one(v) for v in value] if field.is_repeated else one(value)
    return out


def _emit(args: argparse.Namespace, obj: Any, lines: Callable[[], Iterable[str]]) -> None:
    if args.json:
        print(json.dumps(jsonable(obj)), flush=True)
    else:
        for line in lines():
            print(line, flush=True)


def _kv_lines(kv: KeyValue) -> list[str]:
    return [text(kv.key), text(kv.value)]


# -- txn script ---------------------------------------------------------------------------

TXN_HELP = """\
Read a transaction from stdin, etcdctl style: compares, a blank line, the operations
run if every compare holds, a blank line, the operations run otherwise.

  compares (one per line)        value("KEY") = "VALUE"    version("KEY") = 0
                                 create("KEY") > 5         mod("KEY") != 7
                                 ops: = != < >   (val/ver are short for value/version)
  operations (one per line)      put KEY VALUE [--prev-kv]
                                 get KEY [RANGE_END] [--prefix] [--limit N] [--revision N]
                                 del KEY [RANGE_END] [--prefix] [--prev-kv]

Keys and values are shell-quoted words (use quotes for spaces). Lines starting with #
are comments. Start with a blank line for no compares. Example:

  version("lock") = 0

  put lock me

  get lock
"""

_COMPARE_RE = re.compile(
    r"^\s*(?P<target>[A-Za-z]+)\s*\((?P<key>.*)\)\s*(?P<op>!=|==|=|<|>)\s*(?P<rhs>.*?)\s*$"
)
_TARGETS = {"value": "value", "val": "value", "version": "version", "ver": "version",
            "create": "create", "mod": "mod"}


def _one_word(s: str, what: str, lineno: int) -> str:
    try:
        words = shlex.split(s)
    except ValueError as e:
        raise TxnSyntaxError(f"line {lineno}: {what}: {e}") from None
    if len(words) != 1:
        raise TxnSyntaxError(f"line {lineno}: {what} must be one (quoted) word, got {s!r}")
    return words[0]


def _parse_compare(line: str, lineno: int, txn: TxnBuilder) -> None:
    m = _COMPARE_RE.match(line)
    if m is None:
        raise TxnSyntaxError(f"line {lineno}: not a compare: {line!r} "
                             '(expected e.g. version("key") = 0)')
    target = _TARGETS.get(m["target"].lower())
    if target is None:
        raise TxnSyntaxError(f"line {lineno}: unknown compare target {m['target']!r} "
                             "(value, version, create, mod)")
    key = _one_word(m["key"], "compare key", lineno)
    rhs = _one_word(m["rhs"], "compare operand", lineno)
    if target == "value":
        txn.compare(key, target, m["op"], rhs)
        return
    try:
        number = int(rhs)
    except ValueError:
        raise TxnSyntaxError(f"line {lineno}: {target} compares take an integer, "
                             f"got {rhs!r}") from None
    txn.compare(key, target, m["op"], number)


def _parse_op(line: str, lineno: int, txn: TxnBuilder, success: bool) -> None:
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise TxnSyntaxError(f"line {lineno}: {e}") from None
    verb, rest = words[0].lower(), words[1:]
    flags = {w for w in rest if w in ("--prefix", "--prev-kv")}
    positional: list[str] = []
    numbers = {"--limit": 0, "--revision": 0}
    i = 0
    while i < len(rest):
        w = rest[i]
        if w in numbers:
            if i + 1 >= len(rest) or not rest[i + 1].isdigit():
                raise TxnSyntaxError(f"line {lineno}: {w} takes a non-negative integer")
            numbers[w] = int(rest[i + 1])
            i += 2
            continue
        if w.startswith("--") and w not in flags:
            raise TxnSyntaxError(f"line {lineno}: unknown option {w!r} for {verb}")
        if not w.startswith("--"):
            positional.append(w)
        i += 1
    then = success
    if verb == "put":
        if len(positional) != 2 or flags - {"--prev-kv"} or any(numbers.values()):
            raise TxnSyntaxError(f"line {lineno}: usage: put KEY VALUE [--prev-kv]")
        key, value = positional
        put = txn.then_put if then else txn.else_put
        put(key, value, prev_kv="--prev-kv" in flags)
    elif verb in ("get", "range"):
        if not 1 <= len(positional) <= 2 or "--prev-kv" in flags:
            raise TxnSyntaxError(f"line {lineno}: usage: get KEY [RANGE_END] [--prefix] "
                                 "[--limit N] [--revision N]")
        get = txn.then_get if then else txn.else_get
        if "--prefix" in flags:
            if len(positional) != 1:
                raise TxnSyntaxError(f"line {lineno}: --prefix takes no RANGE_END")
            get(prefix=positional[0], limit=numbers["--limit"], revision=numbers["--revision"])
        else:
            end = positional[1] if len(positional) == 2 else None
            get(positional[0], end, limit=numbers["--limit"], revision=numbers["--revision"])
    elif verb in ("del", "delete"):
        if not 1 <= len(positional) <= 2 or any(numbers.values()):
            raise TxnSyntaxError(f"line {lineno}: usage: del KEY [RANGE_END] [--prefix] "
                                 "[--prev-kv]")
        delete = txn.then_delete if then else txn.else_delete
        prev = "--prev-kv" in flags
        if "--prefix" in flags:
            if len(positional) != 1:
                raise TxnSyntaxError(f"line {lineno}: --prefix takes no RANGE_END")
            delete(prefix=positional[0], prev_kv=prev)
        else:
            end = positional[1] if len(positional) == 2 else None
            delete(positional[0], end, prev_kv=prev)
    else:
        raise TxnSyntaxError(f"line {lineno}: unknown operation {verb!r} (put, get, del)")


def parse_txn(script: str, txn: B | None = None) -> B | TxnBuilder:
    """Parse a `coord kv txn` script (see TXN_HELP) into `txn` (a fresh TxnBuilder if
    None) and return it. TxnSyntaxError names the offending line."""
    builder: TxnBuilder = txn if txn is not None else TxnBuilder()
    lines = script.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()  # trailing blank lines close the script, they are not sections
    section = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            section += 1
            if section > 2:
                raise TxnSyntaxError(f"line {lineno}: a txn has at most three sections "
                                     "(compares, success ops, failure ops)")
            continue
        if line.startswith("#"):
            continue
        try:
            if section == 0:
                _parse_compare(line, lineno, builder)
            else:
                _parse_op(line, lineno, builder, success=section == 1)
        except (ValueError, TypeError) as e:
            if isinstance(e, TxnSyntaxError):
                raise
            raise TxnSyntaxError(f"line {lineno}: {e}") from None
    return builder


# -- plumbing -----------------------------------------------------------------------------


def _client_settings(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The endpoints and client keywords the common flags ask for (UsageError if bad)."""
    from coord.client.retry import RetryPolicy

    try:
        endpoints = parse_endpoints(args.endpoints)
    except ValueError as e:
        raise UsageError(f"--endpoints: {e}") from None
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout}")
    # --timeout bounds each command, failover included (etcdctl's --command-timeout).
    # One command is one client: nothing to spread over the members, and an operator who
    # lists a member first means that member.
    return endpoints, {"timeout": args.timeout, "read_only_ok": args.read_only_ok,
                       "policy": RetryPolicy(budget_factor=1.0), "randomize_endpoints": False}


def _client(args: argparse.Namespace) -> Any:
    from coord.client.sync import Client

    endpoints, settings = _client_settings(args)
    return Client(endpoints, **settings)


def _inspect(args: argparse.Namespace, read: Callable[[Any, list[str]], Awaitable[T]]) -> T:
    """An inspection read (`AsyncAdmin`, the console's path: it fails over like any read),
    given the admin and the endpoints."""
    from coord.client.admin_aio import AsyncAdmin
    from coord.client.aio import AsyncClient

    endpoints, settings = _client_settings(args)

    async def run() -> T:
        async with AsyncClient(endpoints, **settings) as client:
            return await read(AsyncAdmin(client, timeout=args.timeout), endpoints)

    return asyncio.run(run())


def _command(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Uniform exits: 0 ok, 1 `coord: REASON: message`, 2 bad usage; Ctrl-C ends quietly."""

    def run(args: argparse.Namespace) -> int:
        # Errors reach the user as `coord: REASON: ...`; keep library log lines out.
        logging.getLogger("coord.client").addHandler(logging.NullHandler())
        try:
            return fn(args)
        except CoordError as e:
            print(f"coord: {e.reason}: {e.message or e.reason}", file=sys.stderr)
            return EXIT_ERROR
        except UsageError as e:
            print(f"coord: {e}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 0

    run.__doc__ = fn.__doc__
    return run


def _resource_claim(s: str) -> tuple[str, int]:
    """RESOURCE or RESOURCE=GENERATION."""
    name, sep, gen = s.rpartition("=")
    if sep and name and gen.isdigit():
        return name, int(gen)
    return s, BARE_CLAIM_GENERATION


class _Interrupt:
    """Ctrl-C / SIGTERM as an Event, for commands that wait (hold, keepalive, watch)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Any] = {}

    def __enter__(self) -> threading.Event:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, lambda *_: self.event.set())
        return self.event

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _watch_loop(args: argparse.Namespace, stream: Any, line: Callable[[Any], str]) -> int:
    """Print one line per item until --limit items, Ctrl-C or an error."""
    count = 0
    with _Interrupt() as stop:
        watcher = threading.Thread(target=lambda: (stop.wait(), stream.cancel()), daemon=True)
        watcher.start()
        try:
            for item in stream:
                if args.json:
                    print(json.dumps(jsonable(item)), flush=True)
                else:
                    print(line(item), flush=True)
                count += 1
                if args.limit and count >= args.limit:
                    break
        finally:
            stream.cancel()
            stop.set()
    return 0


# -- ownership ----------------------------------------------------------------------------


@_command
def cmd_own(args: argparse.Namespace) -> int:
    """Claim resources; without --session, open one and hold it until Ctrl-C. Many
    resources (a bulk own): coord/cli/bulk_own.py."""
    names = bulk_own.resource_args(args.resources, args.resources_from)
    if not names:
        raise UsageError("no resources: name them, or give --resources-from FILE")
    if args.batch < 0:
        raise UsageError(f"--batch must be 1 or more (0, the default: one command), not "
                         f"{args.batch}")
    claims = [_resource_claim(r) for r in names]
    with _client(args) as client:
        if args.session:
            def emit(results: list[Any]) -> None:
                for result in results:
                    _emit(args, result, lambda result=result: _grant_lines(result))
            bulk_own.own_in_batches(lambda batch: client.own(args.session, args.group, batch),
                                    claims, args, emit)
            return 0
        with _Interrupt() as stop:
            session = client.session(name=args.name, ttl=args.ttl,
                                     on_severed=lambda ev: stop.set())

            def held(results: list[Any]) -> None:
                if args.json:
                    for result in results:
                        print(json.dumps({"session_id": session.id, **jsonable(result)}),
                              flush=True)
                    return
                print(f"session {session.id}", flush=True)
                for result in results:
                    for line in _grant_lines(result):
                        print(line, flush=True)
            try:
                bulk_own.own_in_batches(lambda batch: session.own(args.group, batch), claims,
                                        args, held)
                if not args.json:
                    print(f"holding (ttl {session.ttl:g}s); Ctrl-C releases", flush=True)
                stop.wait()
            finally:
                ended = session.ended
                session.close()
        if ended is not None:
            print(f"coord: {ended.type.upper()}: {describe_end(ended)}", file=sys.stderr)
            return EXIT_ERROR
        if not args.json:
            print(f"released (session {session.id} closed)", flush=True)
        return 0


def _grant_lines(result: Any) -> list[str]:
    out = [f"granted {g.resource} generation {g.generation} revision {g.revision}"
           for g in result.grants]
    out += [f"severed session {s}" for s in result.severed]
    return out


@_command
def cmd_release(args: argparse.Namespace) -> int:
    """Release resources held by a session."""
    with _client(args) as client:
        result = client.release(args.session, args.group, args.resources)
        _emit(args, result, lambda: [f"released {r}" for r in result.released])
    return 0


def _owner_line(o: Any) -> str:
    who = "free" if o.session_id == 0 else f"session {o.session_id}"
    return f"{o.resource}  {who}  generation {o.generation}  revision {o.revision}"


@_command
def cmd_owners(args: argparse.Namespace) -> int:
    """One resource's owner, or every owner in a group (under --prefix)."""
    with _client(args) as client:
        if args.resource:
            owner = client.get_owner(args.group, args.resource, serializable=args.serializable)
            _emit(args, owner, lambda: [_owner_line(owner)])
        else:
            owners = client.list_owners(args.group, args.prefix,
                                        serializable=args.serializable)
            if args.json:
                _emit(args, owners, lambda: [])
            else:
                print_table(("RESOURCE", "SESSION", "GENERATION", "REVISION"),
                            ((o.resource, o.session_id, o.generation, o.revision)
                             for o in owners),
                            caption=f"{len(owners)} owned in {args.group}")
    return 0


@_command
def cmd_watch_owners(args: argparse.Namespace) -> int:
    """Current owners (or, with --from-revision, every change since then), then every
    change, one line each."""
    with _client(args) as client:
        stream = client.watch_owners(args.group, args.prefix, from_revision=args.from_revision)
        return _watch_loop(args, stream, lambda ch: f"MODE  {ch.mode}" if ch.mode else (
            f"{'SNAPSHOT' if ch.snapshot else 'CHANGE ' + ch.kind}  "
            f"{ch.group}/{_owner_line(ch.owner)}"))


# -- producer ids -------------------------------------------------------------------------


@_command
def cmd_pid_block(args: argparse.Namespace) -> int:
    with _client(args) as client:
        block = client.allocate_pid_block(args.requester, args.size)
        _emit(args, block, lambda: [f"pids {block.start}..{block.start + block.size - 1} "
                                    f"({block.size})"])
    return 0


@_command
def cmd_pid_lease(args: argparse.Namespace) -> int:
    with _client(args) as client:
        lease = client.lease_pid(args.topic, args.partition, args.pid)
        _emit(args, lease, lambda: [
            f"pid {lease.pid} generation {lease.generation} sequence {lease.sequence_number}"
            f" expires_ms {lease.expire_ms}"])
    return 0


@_command
def cmd_pid_init(args: argparse.Namespace) -> int:
    with _client(args) as client:
        producer = client.init_producer(args.producer_key)
        _emit(args, producer, lambda: [f"pid {producer.pid} generation {producer.generation}"])
    return 0


@_command
def cmd_pid_capacity(args: argparse.Namespace) -> int:
    """Set how many live pid leases the cluster holds (committed: every member's ring)."""
    import uuid

    from coord.client.admin import propose_to_leader
    from coord.client.errors import error_for
    from coord.sm import commands as c

    endpoints, settings = _client_settings(args)
    cmd = c.SetPidCapacity(args.capacity, request_id=f"cli-{uuid.uuid4().hex}")
    result = c.decode_result(propose_to_leader(endpoints, c.encode_command(cmd),
                                               settings["timeout"]))
    if result.error:
        raise error_for(result.error, result.message)
    _emit(args, {"capacity": args.capacity, "revision": result.revision},
          lambda: [f"pid capacity {args.capacity} (revision {result.revision})"])
    return 0


@_command
def cmd_pid_list(args: argparse.Namespace) -> int:
    """The pid blocks handed out lately, the live pid leases, and every producer."""
    resp = _inspect(args, lambda admin, _: admin.list_producers())
    if args.json:
        print(json.dumps(_message_dict(resp)), flush=True)
        return 0
    print_table(("REQUESTER", "START", "SIZE", "REVISION"),
                ((b.requester, b.start, b.size, b.revision) for b in resp.blocks),
                title="PID blocks", caption=f"next pid {resp.next_pid}")
    print_table(("PID", "EPOCH", "TOPIC", "PARTITION", "EXPIRES IN"),
                ((x.pid, x.epoch, x.topic, x.partition,
                  duration_ms(x.expire_ms - resp.clock_ms)) for x in resp.leases),
                title="PID leases", caption=f"{len(resp.leases)} live")
    print_table(("PRODUCER", "PID", "EPOCH"),
                ((x.producer_key, x.pid, x.epoch) for x in resp.producers),
                title="Producers", caption=f"{len(resp.producers)} at revision {resp.revision}")
    return 0


# -- KV -----------------------------------------------------------------------------------


def _range_args(args: argparse.Namespace) -> dict[str, Any]:
    if args.prefix:
        if args.range_end is not None:
            raise UsageError("give --prefix or RANGE_END, not both")
        return {"prefix": args.key}
    return {"key": args.key, "range_end": args.range_end}


@_command
def cmd_kv_get(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result: RangeResult = client.range(
            **_range_args(args), limit=args.limit, revision=args.revision,
            serializable=args.serializable)
        if not args.json and is_terminal():  # a person: a table; a pipe: etcdctl's lines
            print_table(("KEY", "VALUE", "CREATE", "MOD", "VERSION", "SESSION"),
                        ((text(kv.key), text(kv.value), kv.create_revision, kv.mod_revision,
                          kv.version, kv.session_id or "-") for kv in result.kvs),
                        caption=f"{len(result.kvs)} key(s) at revision "
                        f"{result.header.revision}{' (more)' if result.more else ''}")
        else:
            _emit(args, result, lambda: [line for kv in result.kvs for line in _kv_lines(kv)])
    return 0


@_command
def cmd_kv_put(args: argparse.Namespace) -> int:
    value = args.value if args.value is not None else sys.stdin.buffer.read()
    with _client(args) as client:
        result: PutResult = client.put(args.key, value, session=args.session or None,
                                       prev_kv=args.prev_kv)
        _emit(args, result, lambda: ["OK", *(_kv_lines(result.prev_kv) if result.prev_kv
                                             else [])])
    return 0


@_command
def cmd_kv_del(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result: DeleteResult = client.delete(**_range_args(args), prev_kv=args.prev_kv)
        _emit(args, result, lambda: [str(result.deleted),
                                     *(line for kv in result.prev_kvs for line in _kv_lines(kv))])
    return 0


def _txn_lines(result: TxnResult) -> Iterator[str]:
    yield "SUCCESS" if result.succeeded else "FAILURE"
    for r in result.responses:
        yield ""
        if isinstance(r, PutResult):
            yield "OK"
        elif isinstance(r, DeleteResult):
            yield str(r.deleted)
        else:
            for kv in r.kvs:
                yield from _kv_lines(kv)


@_command
def cmd_kv_txn(args: argparse.Namespace) -> int:
    with _client(args) as client:
        txn = client.txn()
        parse_txn(sys.stdin.read(), txn)
        result: TxnResult = txn.commit()
        _emit(args, result, lambda: _txn_lines(result))
    return 0


@_command
def cmd_kv_watch(args: argparse.Namespace) -> int:
    with _client(args) as client:
        stream = client.watch(**_range_args(args), from_revision=args.from_revision,
                              prev_kv=args.prev_kv)
        return _watch_loop(args, stream, lambda ev: f"MODE {ev.mode}" if ev.mode else (
            f"{ev.type} {ev.revision} {text(ev.kv.key)}"
            + (f" {text(ev.kv.value)}" if ev.type == "PUT" else "")))


# -- sessions -----------------------------------------------------------------------------


@_command
def cmd_session_open(args: argparse.Namespace) -> int:
    """Open a session and print its id; keep it alive with `coord session keepalive`."""
    with _client(args) as client:
        info = client.open_session(args.name, args.ttl, args.read_only_ok)
        _emit(args, info, lambda: [str(info.session_id)])
        if info.local and not args.json:
            print(f"coord: session {info.session_id} is member-local to "
                  f"{info.header.member} (read-only): keep it alive through that member; it "
                  "is registered with the cluster when that member rejoins a majority",
                  file=sys.stderr)
    return 0


@_command
def cmd_session_keepalive(args: argparse.Namespace) -> int:
    """Keep a session alive until Ctrl-C (which leaves it to expire) or it ends."""
    with _client(args) as client, _Interrupt() as stop:
        session = client.attach(args.session_id, args.ttl, on_event=lambda ev: print(
            json.dumps(jsonable(ev)) if args.json else f"event {describe_end(ev)}",
            flush=True))
        if not args.json:
            print(f"keeping session {session.id} alive; Ctrl-C stops", flush=True)
        while not stop.is_set() and not session.fenced.is_set():
            stop.wait(0.2)
        if session.fenced.is_set() and session.ended is not None:
            session.detach()
            ended = session.ended
            print(f"coord: {ended.type.upper()}: {describe_end(ended)}", file=sys.stderr)
            return EXIT_ERROR
        session.detach()
    return 0


async def _sessions_from_the_leader(admin: Any, endpoints: list[str]) -> Any:
    """Only the leader knows how long each session has left (it alone hears keepalives):
    ask the given endpoint that says it leads, else the leader's client address as the
    members know it, else any member (the times are then unknown)."""
    named = ""
    for endpoint in endpoints:
        try:
            status = await admin.status(endpoint)
        except CoordError:
            continue
        if status.role == "leader":
            return await admin.list_sessions(endpoint)
        named = named or next((m.client_address for m in status.members
                               if m.id == status.leader_id and m.client_address), "")
    return await admin.list_sessions(named or None)


@_command
def cmd_session_list(args: argparse.Namespace) -> int:
    """Every session: its TTL, the time it has left on the leader, and what it holds."""
    resp = _inspect(args, _sessions_from_the_leader)
    if args.json:
        print(json.dumps(_message_dict(resp)), flush=True)
        return 0
    print_table(
        ("ID", "NAME", "TTL", "LEFT", "READ-ONLY OK", "OWNS", "KEYS"),
        ((s.id, s.name or "-", duration_ms(s.ttl_ms),
          duration_ms(s.remaining_ms) if s.remaining_ms >= 0 else "-",
          "yes" if s.read_only_ok else "no",
          " ".join(f"{o.group}/{o.resource}" for o in s.owned) or "-", len(s.keys))
         for s in resp.sessions),
        caption=f"{len(resp.sessions)} session(s) at revision {resp.revision}")
    print(f"time left as the leader {resp.member} counts it" if resp.leader else
          f"time left unknown: {resp.member} answered and is not the leader", flush=True)
    return 0


@_command
def cmd_session_close(args: argparse.Namespace) -> int:
    with _client(args) as client:
        header = client.close_session(args.session_id)
        _emit(args, header, lambda: [f"session {args.session_id} closed"])
    return 0


# -- registration -------------------------------------------------------------------------


def _common_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--endpoints", default=None,
        help=f"client endpoints HOST:PORT,... (default ${ENDPOINTS_ENV}, else "
             f"{','.join(DEFAULT_ENDPOINTS)})")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds for the whole command, failover to other members included "
                        "(etcdctl's --command-timeout; default 5)")
    p.add_argument("--read-only-ok", action="store_true",
                   help="accept read-only service: a member cut off from a quorum keeps "
                        "answering reads (flagged stale); sessions stay usable")
    return p


def _nonneg(s: str) -> int:
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def register(sub: Any) -> None:
    """Add the client subcommands to `coord`'s subparsers."""
    common = _common_parser()

    def leaf(parent: Any, name: str, fn: Callable[[argparse.Namespace], int], help: str,
             **kw: Any) -> argparse.ArgumentParser:
        p = parent.add_parser(name, parents=[common], help=help, description=help, **kw)
        p.set_defaults(func=fn)
        return p

    def range_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("key")
        p.add_argument("range_end", nargs="?", default=None,
                       help='end of the range [KEY, RANGE_END); "\\0" for every key >= KEY')
        p.add_argument("--prefix", action="store_true", help="every key starting with KEY")

    # ownership
    p = leaf(sub, "own", cmd_own,
             "claim resources in a group (without --session: open a session, hold until "
             "Ctrl-C, then release)")
    p.add_argument("group")
    p.add_argument("resources", nargs="*", metavar="RESOURCE[=GENERATION]",
                   help="a bare name claims at generation 1 (takes a free resource at its last"
                        " generation + 1); =0 takes over whatever the owner's generation")
    p.add_argument("--resources-from", metavar="FILE",
                   help="more resources, one RESOURCE[=GENERATION] a line ('-': stdin)")
    p.add_argument("--batch", type=int, default=0, metavar="N",
                   help="claim in commands of at most N resources, each all or none (a "
                        "refused one stops the rest; those before stay held); default: one "
                        "command for all. A terminal shows a progress bar from 1,000")
    p.add_argument("--session", type=int, default=0, help="claim for this existing session")
    p.add_argument("--ttl", type=float, default=10.0, help="TTL of the session opened here")
    p.add_argument("--name", default="coord-cli", help="name of the session opened here")

    p = leaf(sub, "release", cmd_release, "release resources held by a session")
    p.add_argument("group")
    p.add_argument("resources", nargs="+", metavar="RESOURCE")
    p.add_argument("--session", type=int, required=True)

    p = leaf(sub, "owners", cmd_owners, "show the owner of a resource or list a group's owners")
    p.add_argument("group")
    p.add_argument("resource", nargs="?")
    p.add_argument("--prefix", default="", help="only resources starting with this")
    p.add_argument("--serializable", action="store_true",
                   help="read the answering member's state (no quorum round; may be stale)")

    p = leaf(sub, "watch-owners", cmd_watch_owners,
             "print current owners, then each ownership change, until Ctrl-C")
    p.add_argument("group")
    p.add_argument("--prefix", default="")
    p.add_argument("--from-revision", type=_nonneg, default=0,
                   help="replay every change from this revision, then follow (0: list current "
                   "owners first); fails with COMPACTED if that history was compacted")
    p.add_argument("--limit", type=_nonneg, default=0, help="stop after N lines")

    # producer ids
    pid = sub.add_parser("pid", help="producer ids: blocks, leases, producers")
    pid_sub = pid.add_subparsers(dest="pid_command", required=True)
    p = leaf(pid_sub, "block", cmd_pid_block, "allocate a block of pids")
    p.add_argument("--requester", default="coord-cli")
    p.add_argument("--size", type=int, default=1000)
    p = leaf(pid_sub, "lease", cmd_pid_lease, "lease a new pid (or look up a pid's lease)")
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("--pid", type=int, default=-1, help="an existing pid (default: a new one)")
    leaf(pid_sub, "list", cmd_pid_list, cmd_pid_list.__doc__ or "")
    p = leaf(pid_sub, "capacity", cmd_pid_capacity, cmd_pid_capacity.__doc__ or "")
    p.add_argument("capacity", type=int, help="live pid leases to hold (default 65536; at "
                   "most 4194304, and not below the leases live now)")
    p = leaf(pid_sub, "init", cmd_pid_init,
             "init a producer: its pid and a new generation (fences older instances)")
    p.add_argument("producer_key")

    # KV
    kv = sub.add_parser("kv", help="the linearizable key-value store")
    kv_sub = kv.add_subparsers(dest="kv_command", required=True)
    p = leaf(kv_sub, "get", cmd_kv_get, "read a key, a range or a prefix")
    range_args(p)
    p.add_argument("--limit", type=_nonneg, default=0)
    p.add_argument("--revision", type=_nonneg, default=0, help="read as of this revision")
    p.add_argument("--serializable", action="store_true",
                   help="read the answering member's state (no quorum round; may be stale)")
    p = leaf(kv_sub, "put", cmd_kv_put, "set a key (VALUE omitted: read it from stdin)")
    p.add_argument("key")
    p.add_argument("value", nargs="?", default=None)
    p.add_argument("--session", type=int, default=0,
                   help="bind the key to this session (deleted when it ends)")
    p.add_argument("--prev-kv", action="store_true", help="print the previous value")
    p = leaf(kv_sub, "del", cmd_kv_del, "delete a key, a range or a prefix")
    range_args(p)
    p.add_argument("--prev-kv", action="store_true", help="print the deleted values")
    leaf(kv_sub, "txn", cmd_kv_txn, "run a transaction read from stdin",
         epilog=TXN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p = leaf(kv_sub, "watch", cmd_kv_watch,
             "print each change to a key, range or prefix, until Ctrl-C")
    range_args(p)
    p.add_argument("--from-revision", type=_nonneg, default=0,
                   help="replay changes from this revision (0: from now on)")
    p.add_argument("--prev-kv", action="store_true")
    p.add_argument("--limit", type=_nonneg, default=0, help="stop after N events")

    # sessions
    se = sub.add_parser("session", help="open, keep alive and close sessions")
    se_sub = se.add_subparsers(dest="session_command", required=True)
    p = leaf(se_sub, "open", cmd_session_open, cmd_session_open.__doc__ or "")
    p.add_argument("--name", default="coord-cli")
    p.add_argument("--ttl", type=float, default=10.0, help="seconds (default 10)")
    p = leaf(se_sub, "keepalive", cmd_session_keepalive, cmd_session_keepalive.__doc__ or "")
    p.add_argument("session_id", type=int)
    p.add_argument("--ttl", type=float, default=10.0,
                   help="pace keepalives by this TTL until the server states it")
    leaf(se_sub, "list", cmd_session_list, cmd_session_list.__doc__ or "")
    p = leaf(se_sub, "close", cmd_session_close,
             "close a session now (releases everything it holds)")
    p.add_argument("session_id", type=int)
