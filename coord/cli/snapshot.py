"""`coord snapshot save FILE` / `coord snapshot status FILE`: a consistent point-in-time
backup of the replicated state through etcd's Maintenance.Snapshot (so `etcdctl snapshot
save` gets the same bytes), checked by the SHA-256 that ends the stream, and a reading
of what a backup holds."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import grpc

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs

DIGEST = 32


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("snapshot", help="save a backup of the state, or read one")
    ops = s.add_subparsers(dest="op", required=True)
    save = ops.add_parser("save", help="stream a member's snapshot into FILE")
    save.add_argument("file")
    save.add_argument("--endpoints", required=True, help="the first answering member is used")
    save.add_argument("--timeout", type=float, default=300.0)
    status = ops.add_parser("status", help="check FILE's digest and show what it holds")
    status.add_argument("file")
    status.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_snapshot)


def verified(data: bytes) -> bytes:
    """The snapshot in `data` without its trailing SHA-256; ValueError if it does not match."""
    body, digest = data[:-DIGEST], data[-DIGEST:]
    if len(data) <= DIGEST or hashlib.sha256(body).digest() != digest:
        raise ValueError("the snapshot's SHA-256 does not match: the file is damaged or "
                         "incomplete")
    return body


def save(endpoints: list[str], path: Path, timeout: float) -> tuple[int, int, str]:
    """(bytes, revision, endpoint) of the snapshot written to `path` (atomically)."""
    errors = []
    for endpoint in endpoints:
        part = path.with_name(path.name + ".part")
        try:
            with grpc.insecure_channel(endpoint) as ch, open(part, "wb") as f:
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
            verified(part.read_bytes())
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
    machine.restore(verified(path.read_bytes()))
    return {"file": str(path), "bytes": path.stat().st_size, **machine.describe()}


def cmd_snapshot(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if args.op == "save":
        total, revision, endpoint = save(
            [e.strip() for e in args.endpoints.split(",") if e.strip()], path, args.timeout)
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
