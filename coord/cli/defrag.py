"""`coord defrag`: give each member's free store pages back to the file system (SQLite
VACUUM through etcd's Maintenance.Defragment), one member at a time as etcdctl does —
a member blocks its own writes while it rewrites its file. Prints each member's file
size before and after, and the bytes that hold data. Over TLS with `--cacert --cert
--key` (or $COORD_CACERT...), as every client command."""

from __future__ import annotations

import argparse

import grpc

from coord.cli.client_commands.command import add_tls_flags, command, tls_credentials
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.tls.credentials import channel


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("defrag", help="give members' free disk space back (SQLite VACUUM)")
    d.add_argument("--endpoints", required=True)
    d.add_argument("--timeout", type=float, default=120.0,
                   help="seconds one member may take (a big store takes a while)")
    add_tls_flags(d)
    d.set_defaults(func=cmd_defrag)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def defrag_one(endpoint: str, timeout: float,
               credentials: grpc.ChannelCredentials | None = None) -> str:
    """One member's line: its sizes before and after, or why it failed (over TLS with
    `credentials`)."""
    try:
        with channel(endpoint, credentials) as ch:
            m = stubs.MaintenanceStub(ch)
            before = m.Status(pb.StatusRequest(), timeout=10)
            m.Defragment(pb.DefragmentRequest(), timeout=timeout)
            after = m.Status(pb.StatusRequest(), timeout=10)
    except grpc.RpcError as e:
        return f"{endpoint}: FAILED {e.code().name}: {e.details()}"
    return (f"{endpoint}: {_mib(before.dbSize)} -> {_mib(after.dbSize)} on disk "
            f"({_mib(after.dbSizeInUse)} holding data)")


@command
def cmd_defrag(args: argparse.Namespace) -> int:
    failed, credentials = 0, tls_credentials(args)
    for endpoint in (e.strip() for e in args.endpoints.split(",") if e.strip()):
        line = defrag_one(endpoint, args.timeout, credentials)
        failed += "FAILED" in line
        print(line, flush=True)
    return 1 if failed else 0
