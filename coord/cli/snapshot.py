"""`coord snapshot save FILE` / `status FILE` / `restore FILE`: a consistent point-in-time
backup of the replicated state through etcd's Maintenance.Snapshot (so `etcdctl snapshot
save` gets the same bytes), checked by the SHA-256 that ends the stream; a reading of
what a backup holds; and a new cluster's data dirs seeded from it (etcd's `snapshot
restore`: run it once per member with the same --initial-cluster, then start them).
`save` speaks TLS with `--cacert --cert --key` (or $COORD_CACERT...), as every client
command."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc

from coord.cli.client_commands.command import add_tls_flags, command, tls_credentials
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.tls.credentials import channel

DIGEST = 32
READ_BLOCK = 1 << 20
"""Bytes of a backup read at a time: a reader's whole buffer."""
DAMAGED = "the snapshot's SHA-256 does not match: the file is damaged or incomplete"


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("snapshot", help="save a backup of the state, or read one")
    ops = s.add_subparsers(dest="op", required=True)
    save = ops.add_parser("save", help="stream a member's snapshot into FILE")
    save.add_argument("file")
    save.add_argument("--endpoints", required=True, help="the first answering member is used")
    save.add_argument("--timeout", type=float, default=300.0)
    add_tls_flags(save)
    status = ops.add_parser("status", help="check FILE's digest and show what it holds")
    status.add_argument("file")
    status.add_argument("--json", action="store_true")
    restore = ops.add_parser("restore", help="seed one member of a NEW cluster from FILE")
    restore.add_argument("file")
    restore.add_argument("--name", required=True)
    restore.add_argument("--data-dir", required=True, help="must not hold a log yet")
    restore.add_argument("--initial-cluster", required=True, help="n1=HOST:PEERPORT,...")
    restore.add_argument("--initial-cluster-token", default="coord")
    s.set_defaults(func=cmd_snapshot)


class Backup:
    """The snapshot in a backup file, without the SHA-256 that ends it: read READ_BLOCK
    at a time each time it is iterated, never whole (a backup is as big as the state),
    and checked against that digest as it is (ValueError after the last block if it
    does not match). The file is opened once and every pass reads that open file, so a
    backup replaced at its path between passes (another `snapshot save` to it) cannot
    give one pass's state and another's bytes. Close it (or use it in a `with`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "rb")

    def __enter__(self) -> Backup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[bytes]:
        f = self._file
        f.seek(0)
        left = os.fstat(f.fileno()).st_size - DIGEST
        if left <= 0:
            raise ValueError(DAMAGED)
        digest = hashlib.sha256()
        while left:
            block = f.read(min(READ_BLOCK, left))
            if not block:
                raise ValueError(DAMAGED)  # it shrank while read
            digest.update(block)
            left -= len(block)
            yield block
        if f.read(DIGEST + 1) != digest.digest():
            raise ValueError(DAMAGED)


def verified(path: Path) -> Backup:
    """The snapshot in the backup at `path`, open, and checked whole (a block at a time)
    before a caller reads it (ValueError if it does not match its SHA-256), so what it
    does with the blocks (load them, write them) is never undone for a damaged file."""
    backup = Backup(path)
    try:
        for _ in backup:
            pass
    except BaseException:
        backup.close()
        raise
    return backup


def save(endpoints: list[str], path: Path, timeout: float,
         credentials: grpc.ChannelCredentials | None = None) -> tuple[int, int, str]:
    """(bytes, revision, endpoint) of the snapshot written to `path` (atomically; nothing
    if no member gives one), over TLS with `credentials`."""
    errors = []
    for endpoint in endpoints:
        part = path.with_name(path.name + ".part")
        try:
            with channel(endpoint, credentials) as ch, open(part, "wb") as f:
                revision, total = 0, 0
                for resp in stubs.MaintenanceStub(ch).Snapshot(pb.SnapshotRequest(),
                                                               timeout=timeout):
                    revision = revision or resp.header.revision
                    f.write(resp.blob)
                    total += len(resp.blob)
                    print(f"\r{endpoint}: {total >> 10} KiB received, "
                          f"{resp.remaining_bytes >> 10} KiB to go", end="", file=sys.stderr)
                print(file=sys.stderr)
                f.flush()
                os.fsync(f.fileno())
            verified(part).close()
            os.replace(part, path)
            return total, revision, endpoint
        except (grpc.RpcError, ValueError, OSError) as e:
            part.unlink(missing_ok=True)
            errors.append(f"{endpoint}: {e.details() if isinstance(e, grpc.RpcError) else e}")
    raise SystemExit("coord snapshot save: no member gave a snapshot: " + "; ".join(errors))


def describe(path: Path) -> dict:
    """What the backup at `path` holds (its digest checked, its state loaded)."""
    from coord.sm.machine import CoordMachine  # only status needs the state machine

    machine = CoordMachine()
    with verified(path) as state:
        machine.restore(state)
    return {"file": str(path), "bytes": path.stat().st_size, **machine.describe()}


def restore(args: argparse.Namespace) -> str:
    """Seed `--data-dir` for member `--name` of the cluster `--initial-cluster` from the
    backup (checked first); the line to print. The server is imported only here."""
    from coord.server.node.identity import claim_data_dir
    from coord.server.node.members import parse_initial_cluster
    from coord.server.node.snapshot_contents import seed_from_state
    from coord.server.storage.log_format import db_path
    from coord.server.storage.log_store import LogStore, StorageError
    from coord.sm.machine import CoordMachine

    with verified(Path(args.file)) as state:
        machine = CoordMachine()
        machine.restore(state)  # a backup that does not load is refused before any write
        members = parse_initial_cluster(args.initial_cluster)
        if args.name not in {m.name for m in members}:
            raise ValueError(f"--initial-cluster does not name {args.name!r}")
        try:
            with LogStore(db_path(args.data_dir)) as store:
                seed_from_state(store, members, state)
                claim_data_dir(store, args.name, args.initial_cluster_token)
        except StorageError as e:
            raise ValueError(str(e)) from None
    return (f"{args.data_dir}: member {args.name} of a {len(members)}-member cluster, "
            f"from revision {machine.revision} ({len(machine.kv)} keys)")


@command
def cmd_snapshot(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if args.op == "restore":
        try:
            print(restore(args))
        except (OSError, ValueError) as e:
            raise SystemExit(f"coord snapshot restore: {e}") from None
        return 0
    if args.op == "save":
        total, revision, endpoint = save(
            [e.strip() for e in args.endpoints.split(",") if e.strip()], path, args.timeout,
            tls_credentials(args))
        print(f"saved {total} bytes from {endpoint} at revision {revision} to {path} "
              "(SHA-256 checked)")
        return 0
    try:
        info = describe(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"coord snapshot status: {path}: {e}") from None
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key in ("file", "bytes", "revision", "keys", "history", "compact_revision",
                    "sessions", "owned_resources", "alarms"):
            print(f"{key:17} {info.get(key)}")
    return 0
