"""The key-value store: `coord kv get|put|del|txn|watch`, etcdctl's output on a pipe."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from coord.cli.client_commands.command import (
    UsageError,
    add_command,
    client,
    command,
    nonneg,
    watch_loop,
)
from coord.cli.client_commands.output import emit, kv_lines, text
from coord.cli.client_commands.txn_script import TXN_HELP, parse_txn
from coord.cli.tables import is_terminal, print_table
from coord.client.results import DeleteResult, PutResult, RangeResult, TxnResult


def _range_args(args: argparse.Namespace) -> dict[str, Any]:
    if args.prefix:
        if args.range_end is not None:
            raise UsageError("give --prefix or RANGE_END, not both")
        return {"prefix": args.key}
    return {"key": args.key, "range_end": args.range_end}


@command
def cmd_kv_get(args: argparse.Namespace) -> int:
    with client(args) as c:
        result: RangeResult = c.range(
            **_range_args(args), limit=args.limit, revision=args.revision,
            serializable=args.serializable)
        if not args.json and is_terminal():  # a person: a table; a pipe: etcdctl's lines
            print_table(("KEY", "VALUE", "CREATE", "MOD", "VERSION", "SESSION"),
                        ((text(kv.key), text(kv.value), kv.create_revision, kv.mod_revision,
                          kv.version, kv.session_id or "-") for kv in result.kvs),
                        caption=f"{len(result.kvs)} key(s) at revision "
                        f"{result.header.revision}{' (more)' if result.more else ''}")
        else:
            emit(args, result, lambda: [line for kv in result.kvs for line in kv_lines(kv)])
    return 0


@command
def cmd_kv_put(args: argparse.Namespace) -> int:
    value = args.value if args.value is not None else sys.stdin.buffer.read()
    with client(args) as c:
        result: PutResult = c.put(args.key, value, session=args.session or None,
                                  prev_kv=args.prev_kv)
        emit(args, result, lambda: ["OK", *(kv_lines(result.prev_kv) if result.prev_kv
                                            else [])])
    return 0


@command
def cmd_kv_del(args: argparse.Namespace) -> int:
    with client(args) as c:
        result: DeleteResult = c.delete(**_range_args(args), prev_kv=args.prev_kv)
        emit(args, result, lambda: [str(result.deleted),
                                    *(line for kv in result.prev_kvs for line in kv_lines(kv))])
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
                yield from kv_lines(kv)


@command
def cmd_kv_txn(args: argparse.Namespace) -> int:
    with client(args) as c:
        txn = c.txn()
        parse_txn(sys.stdin.read(), txn)
        result: TxnResult = txn.commit()
        emit(args, result, lambda: _txn_lines(result))
    return 0


@command
def cmd_kv_watch(args: argparse.Namespace) -> int:
    with client(args) as c:
        stream = c.watch(**_range_args(args), from_revision=args.from_revision,
                         prev_kv=args.prev_kv)
        return watch_loop(args, stream, lambda ev: f"MODE {ev.mode}" if ev.mode else (
            f"{ev.type} {ev.revision} {text(ev.kv.key)}"
            + (f" {text(ev.kv.value)}" if ev.type == "PUT" else "")))


def _range_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("range_end", nargs="?", default=None,
                   help='end of the range [KEY, RANGE_END); "\\0" for every key >= KEY')
    p.add_argument("--prefix", action="store_true", help="every key starting with KEY")


def register(sub: Any) -> None:
    kv = sub.add_parser("kv", help="the linearizable key-value store")
    kv_sub = kv.add_subparsers(dest="kv_command", required=True)
    p = add_command(kv_sub, "get", cmd_kv_get, "read a key, a range or a prefix")
    _range_flags(p)
    p.add_argument("--limit", type=nonneg, default=0)
    p.add_argument("--revision", type=nonneg, default=0, help="read as of this revision")
    p.add_argument("--serializable", action="store_true",
                   help="read the answering member's state (no quorum round; may be stale)")
    p = add_command(kv_sub, "put", cmd_kv_put, "set a key (VALUE omitted: read it from stdin)")
    p.add_argument("key")
    p.add_argument("value", nargs="?", default=None)
    p.add_argument("--session", type=int, default=0,
                   help="bind the key to this session (deleted when it ends)")
    p.add_argument("--prev-kv", action="store_true", help="print the previous value")
    p = add_command(kv_sub, "del", cmd_kv_del, "delete a key, a range or a prefix")
    _range_flags(p)
    p.add_argument("--prev-kv", action="store_true", help="print the deleted values")
    add_command(kv_sub, "txn", cmd_kv_txn, "run a transaction read from stdin",
                epilog=TXN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p = add_command(kv_sub, "watch", cmd_kv_watch,
                    "print each change to a key, range or prefix, until Ctrl-C")
    _range_flags(p)
    p.add_argument("--from-revision", type=nonneg, default=0,
                   help="replay changes from this revision (0: from now on)")
    p.add_argument("--prev-kv", action="store_true")
    p.add_argument("--limit", type=nonneg, default=0, help="stop after N events")
