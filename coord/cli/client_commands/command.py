"""What every client command shares: the common flags (`--endpoints`, `--json`,
`--timeout`, `--read-only-ok`, TLS's `--cacert --cert --key`, and etcdctl's `--user`
with `--password`), the client they make,
uniform exits (0 ok, 1 `coord: REASON: message` on stderr, 2 bad usage) and Ctrl-C for
the commands that wait.

The client library is imported inside the functions that connect, so building the
parser (`coord --help`, or any other command's start-up) does not load it."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from coord.cli.client_commands.output import jsonable
from coord.client.endpoints import DEFAULT_ENDPOINTS, ENDPOINTS_ENV, parse_endpoints
from coord.client.errors import CoordError
from coord.tls.files import ENV_CACERT, ENV_CERT, ENV_KEY, TLS, TLSConfigError

if TYPE_CHECKING:
    import grpc

T = TypeVar("T")
Command = Callable[[argparse.Namespace], int]

EXIT_ERROR = 1
EXIT_USAGE = 2
ENV_USER, ENV_PASSWORD = "COORD_USER", "COORD_PASSWORD"  # as etcdctl's ETCDCTL_USER...


class UsageError(Exception):
    """Bad command-line input found after argparse (exit 2)."""


def endpoints_of(args: argparse.Namespace) -> list[str]:
    """--endpoints, or its default ($COORD_ENDPOINTS, else `coord dev`'s); UsageError if
    it lists none."""
    try:
        return parse_endpoints(args.endpoints)
    except ValueError as e:
        raise UsageError(f"--endpoints: {e}") from None


def client_settings(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The endpoints and client keywords the common flags ask for (UsageError if bad)."""
    from coord.client.retry import RetryPolicy

    endpoints = endpoints_of(args)
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout}")
    # --timeout bounds each command, failover included (etcdctl's --command-timeout).
    # One command is one client: nothing to spread over the members, and an operator who
    # lists a member first means that member.
    return endpoints, {"timeout": args.timeout, "read_only_ok": args.read_only_ok,
                       "policy": RetryPolicy(budget_factor=1.0), "randomize_endpoints": False,
                       "tls": tls_of(args), **login_of(args)}


def login_of(args: argparse.Namespace) -> dict[str, str]:
    """The client's user= and password= that --user (etcdctl's NAME[:PASSWORD]) and
    --password ask for, each defaulting to its environment variable; {} without a user."""
    from coord.client.auth import Login

    user = args.user if args.user is not None else os.environ.get(ENV_USER)
    password = args.password if args.password is not None else os.environ.get(ENV_PASSWORD)
    try:
        login = Login.of(user, password, None)
    except ValueError as e:
        raise UsageError(f"--user: {e}") from None
    return {"user": login.user, "password": login.password} if login else {}


def add_tls_flags(p: argparse.ArgumentParser) -> None:
    """etcdctl's TLS flags, each defaulting to its environment variable."""
    # dest tls_*: `coord kv get KEY` has an argument named key
    p.add_argument("--cacert", dest="tls_cacert",
                   help=f"TLS: the CA that signed the members' certificates (default"
                   f" ${ENV_CACERT}); without it and --cert/--key, plaintext")
    p.add_argument("--cert", dest="tls_cert",
                   help=f"TLS: this client's certificate, for members started with"
                   f" --client-cert-auth (default ${ENV_CERT})")
    p.add_argument("--key", dest="tls_key", help=f"TLS: its private key (default ${ENV_KEY})")


def add_user_flags(p: argparse.ArgumentParser) -> None:
    """etcdctl's --user (and --password), each defaulting to its environment variable;
    `login_of` reads them."""
    p.add_argument("--user", help=f"NAME[:PASSWORD]: who the command acts as when the "
                   f"cluster has auth on (etcdctl's flag; default ${ENV_USER})")
    p.add_argument("--password", help=f"the user's password, if not in --user (default "
                   f"${ENV_PASSWORD})")


def tls_of(args: argparse.Namespace) -> TLS | Literal[False]:
    """The TLS that --cacert, --cert and --key ask for, each flag not given taken from
    its environment variable (as etcdctl does); False (plaintext) if none is set."""
    try:
        return TLS.from_env(cacert=args.tls_cacert, cert=args.tls_cert,
                            key=args.tls_key) or False
    except TLSConfigError as e:
        raise UsageError(str(e)) from None


def tls_credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    """For a command that opens its own channels (`coord.tls.credentials.channel`): the
    credentials `tls_of(args)` asks for, its files read and checked now, once; None:
    plaintext."""
    from coord.tls.credentials import channel_credentials

    tls = tls_of(args)
    return channel_credentials(tls) if tls else None


def client(args: argparse.Namespace) -> Any:
    """The blocking client the common flags describe."""
    from coord.client.sync import Client

    endpoints, settings = client_settings(args)
    return Client(endpoints, **settings)


def inspect_read(args: argparse.Namespace,
                 read: Callable[[Any, list[str]], Awaitable[T]]) -> T:
    """An inspection read (`AsyncAdmin`, the console's path: it fails over like any read),
    given the admin and the endpoints."""
    from coord.client.admin_aio import AsyncAdmin
    from coord.client.aio import AsyncClient

    endpoints, settings = client_settings(args)

    async def run() -> T:
        async with AsyncClient(endpoints, **settings) as c:
            return await read(AsyncAdmin(c, timeout=args.timeout), endpoints)

    return asyncio.run(run())


def command(fn: Command) -> Command:
    """Uniform exits: 0 ok, 1 `coord: REASON: message`, 2 bad usage; Ctrl-C ends quietly."""

    def run(args: argparse.Namespace) -> int:
        # Errors reach the user as `coord: REASON: ...`; keep library log lines out.
        logging.getLogger("coord.client").addHandler(logging.NullHandler())
        try:
            return fn(args)
        except CoordError as e:
            print(f"coord: {e.reason}: {e.message or e.reason}", file=sys.stderr)
            return EXIT_ERROR
        except (UsageError, TLSConfigError) as e:  # TLS: a file --cacert... names is unusable
            print(f"coord: {e}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 0

    run.__doc__ = fn.__doc__
    return run


class Interrupt:
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


def watch_loop(args: argparse.Namespace, stream: Any, line: Callable[[Any], str]) -> int:
    """Print one line per item until --limit items, Ctrl-C or an error."""
    count = 0
    with Interrupt() as stop:
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


def add_endpoints_flag(p: argparse.ArgumentParser) -> None:
    """--endpoints, defaulting as every command's does (`parse_endpoints(None)`)."""
    p.add_argument(
        "--endpoints", default=None,
        help=f"client endpoints HOST:PORT,... (default ${ENDPOINTS_ENV}, else "
             f"{','.join(DEFAULT_ENDPOINTS)})")


def _common_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    add_endpoints_flag(p)
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds for the whole command, failover to other members included "
                        "(etcdctl's --command-timeout; default 5)")
    p.add_argument("--read-only-ok", action="store_true",
                   help="accept read-only service: a member cut off from a quorum keeps "
                        "answering reads (flagged stale); sessions stay usable")
    add_tls_flags(p)
    add_user_flags(p)
    return p


COMMON_FLAGS = _common_flags()


def add_command(parent: Any, name: str, fn: Command, help: str,
                **kw: Any) -> argparse.ArgumentParser:
    """A client command `name` under `parent` (subparsers), with the common flags."""
    p = parent.add_parser(name, parents=[COMMON_FLAGS], help=help, description=help, **kw)
    p.set_defaults(func=fn)
    return p


def nonneg(s: str) -> int:
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v

