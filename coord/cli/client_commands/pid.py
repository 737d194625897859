"""Producer ids: `coord pid block|lease|list|capacity|init`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from coord.cli.client_commands.command import (
    add_command,
    client,
    client_settings,
    command,
    inspect_read,
)
from coord.cli.client_commands.output import emit, message_dict
from coord.cli.tables import print_table
from coord.tui.format import duration_ms


@command
def cmd_pid_block(args: argparse.Namespace) -> int:
    with client(args) as c:
        block = c.allocate_pid_block(args.requester, args.size)
        emit(args, block, lambda: [f"pids {block.start}..{block.start + block.size - 1} "
                                   f"({block.size})"])
    return 0


@command
def cmd_pid_lease(args: argparse.Namespace) -> int:
    with client(args) as c:
        lease = c.lease_pid(args.topic, args.partition, args.pid)
        emit(args, lease, lambda: [
            f"pid {lease.pid} generation {lease.generation} sequence {lease.sequence_number}"
            f" expires_ms {lease.expire_ms}"])
    return 0


@command
def cmd_pid_init(args: argparse.Namespace) -> int:
    with client(args) as c:
        producer = c.init_producer(args.producer_key)
        emit(args, producer, lambda: [f"pid {producer.pid} generation {producer.generation}"])
    return 0


@command
def cmd_pid_capacity(args: argparse.Namespace) -> int:
    """Set how many live pid leases the cluster holds (committed: every member's ring)."""
    import uuid

    from coord.client.admin import propose_to_leader
    from coord.client.errors import error_for
    from coord.sm import commands as c

    endpoints, settings = client_settings(args)
    cmd = c.SetPidCapacity(args.capacity, request_id=f"cli-{uuid.uuid4().hex}")
    result = c.decode_result(propose_to_leader(
        endpoints, c.encode_command(cmd), settings["timeout"], settings["tls"],
        user=settings.get("user"), password=settings.get("password")))
    if result.error:
        raise error_for(result.error, result.message)
    emit(args, {"capacity": args.capacity, "revision": result.revision},
         lambda: [f"pid capacity {args.capacity} (revision {result.revision})"])
    return 0


@command
def cmd_pid_list(args: argparse.Namespace) -> int:
    """The pid blocks handed out lately, the live pid leases, and every producer."""
    resp = inspect_read(args, lambda admin, _: admin.list_producers())
    if args.json:
        print(json.dumps(message_dict(resp)), flush=True)
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


def register(sub: Any) -> None:
    pid = sub.add_parser("pid", help="producer ids: blocks, leases, producers")
    pid_sub = pid.add_subparsers(dest="pid_command", required=True)
    p = add_command(pid_sub, "block", cmd_pid_block, "allocate a block of pids")
    p.add_argument("--requester", default="coord-cli")
    p.add_argument("--size", type=int, default=1000)
    p = add_command(pid_sub, "lease", cmd_pid_lease,
                    "lease a new pid (or look up a pid's lease)")
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("--pid", type=int, default=-1, help="an existing pid (default: a new one)")
    add_command(pid_sub, "list", cmd_pid_list, cmd_pid_list.__doc__ or "")
    p = add_command(pid_sub, "capacity", cmd_pid_capacity, cmd_pid_capacity.__doc__ or "")
    p.add_argument("capacity", type=int, help="live pid leases to hold (default 65536; at "
                   "most 4194304, and not below the leases live now)")
    p = add_command(pid_sub, "init", cmd_pid_init,
                    "init a producer: its pid and a new generation (fences older instances)")
    p.add_argument("producer_key")
