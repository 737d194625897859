"""The `coord serve` command line: its flags (`add_serve_flags`), their translation into a
member's `MemberConfig` (`member_config`), the cluster secret they name and the log lines
they ask for. Bad input raises ValueError (a missing or malformed flag) or SystemExit
(the cluster secret), with a message that names the flag.

Every program that runs a member takes these same flags: `coord serve`, coord.testing's
in-process members (the flags a process would get, parsed here instead) and the raft
benchmark's member. So they live beside the layers, not in the CLI (coord.testing and
coord.bench may not import coord.cli: the CLI is built on them) and not in the server
(the member takes a MemberConfig and knows no command line; tests/test_layout.py keeps
argparse out of coord.server).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from coord.event_loop import EVENT_LOOPS
from coord.server.config import MemberConfig
from coord.server.log_lines import FORMATS as LOG_FORMATS
from coord.server.log_lines import MemberFieldsFilter, formatter
from coord.server.metrics.endpoint import parse_metrics_url
from coord.server.node.driver import NodeOptions
from coord.server.node.members import parse_initial_cluster, validate_address
from coord.server.requests.request_limits import (
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_REQUEST_BYTES,
    RequestLimits,
)
from coord.server.requests.tokens import DEFAULT_TTL_S
from coord.server.upkeep.compaction import DEFAULT_MODE, DEFAULT_RETENTION, MODES, CompactionPolicy
from coord.server.upkeep.quota import DEFAULT_DISK_RESERVE_BYTES, DEFAULT_QUOTA_BYTES
from coord.sm.limits import DEFAULT_MAX_TXN_OPS, MAX_TXN_OPS
from coord.tls.files import (
    TLS_VERSIONS,
    ServerTLS,
    TLSConfigError,
    openssl_ciphers,
    read_file,
)

SERVE_REQUIRED = ("name", "data_dir", "listen", "peer_listen", "initial_cluster")
LOG_LEVELS = ["debug", "info", "warning", "error"]
MIN_SECRET_BYTES = 16


def add_serve_flags(s: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every `coord serve` flag, on `s` (the `serve` subcommand, or the parser of another
    entry point that runs a member); returns `s`."""
    s.add_argument(
        "--etcd-only",
        action="store_true",
        help="serve only the etcd v3 API (for etcd test rigs); every other flag is optional:"
        " a single member on 127.0.0.1:2379 with its data in a temp dir removed at exit",
    )
    s.add_argument("--name")
    s.add_argument("--data-dir")
    s.add_argument("--listen", help="client address HOST:PORT")
    s.add_argument("--peer-listen", help="peer address HOST:PORT")
    s.add_argument("--initial-cluster", help="n1=HOST:PEERPORT,n2=...")
    s.add_argument("--initial-cluster-state", choices=["new", "existing"], default="new")
    s.add_argument(
        "--initial-cluster-token",
        default="coord",
        help="names the cluster (its id); the same for every member, joiners included",
    )
    s.add_argument(
        "--cluster-secret-file",
        help="file holding the shared cluster secret (mode 0600: one its group or others can"
        " read is refused). Kept with peer TLS as a second factor: a certificate says the CA"
        " signed it, the secret's MAC names this cluster and both members' ids",
    )
    s.add_argument(
        "--etcd-listen",
        default="",
        help="also serve the etcd v3 API on HOST:PORT (it is always on --listen)",
    )
    s.add_argument(
        "--etcd-progress-notify-ms",
        type=int,
        default=600_000,
        help="etcd watch progress notifications, for watchers that ask, at most this often",
    )
    s.add_argument("--tick-ms", type=int, default=50)
    s.add_argument("--election-ticks", type=int, default=12)
    s.add_argument("--heartbeat-ticks", type=int, default=2)
    s.add_argument(
        "--snapshot-every",
        type=int,
        default=20_000,
        help="snapshot after at least this many applied entries (default 20000), once the"
        " log since the last snapshot holds 4x its bytes, and after 5x this many at the"
        " latest",
    )
    s.add_argument(
        "--snapshot-bytes",
        type=int,
        default=64 << 20,
        help="also snapshot after this many bytes of log entries (default 64 MiB), so"
        " batched writes do not leave a long log to replay at restart",
    )
    s.add_argument(
        "--read-only-mode",
        choices=["enabled", "disabled"],
        default="enabled",
        help="without quorum, keep serving (stale, flagged) reads to read-only clients",
    )
    s.add_argument(
        "--auto-compaction-mode",
        choices=list(MODES),
        default=DEFAULT_MODE,
        help="etcd's: compact the KV and ownership history by age (periodic) or by count"
        " of revisions (revision)",
    )
    s.add_argument(
        "--auto-compaction-retention",
        default=DEFAULT_RETENTION,
        help="history to keep: periodic, hours or a duration (1, 5m, 30s); revision, a count"
        f" (100000); 0 turns auto-compaction off (default {DEFAULT_RETENTION})",
    )
    s.add_argument(
        "--quota-backend-bytes",
        type=int,
        default=DEFAULT_QUOTA_BYTES,
        help="etcd's: over this many bytes (state, or the store's log and snapshot), the"
        " member raises NOSPACE and writes that add state are refused until space is freed"
        " (default 2 GiB; 0: no quota)",
    )
    s.add_argument(
        "--disk-reserve-bytes",
        type=int,
        default=DEFAULT_DISK_RESERVE_BYTES,
        help="with less than this many bytes free on the data dir's file system, the member"
        " raises NOSPACE as over its quota, before a full disk fails a log write (which"
        " stops the member) (default 32 MiB; 0: not watched)",
    )
    add_tls_flags(s)
    s.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="etcd's: the largest client write request (default 1.5 MiB); gRPC refuses any"
        " message 512 KiB past it",
    )
    s.add_argument(
        "--max-txn-ops",
        type=int,
        default=DEFAULT_MAX_TXN_OPS,
        help=f"etcd's: the most operations in a transaction (default {DEFAULT_MAX_TXN_OPS},"
        f" at most {MAX_TXN_OPS})",
    )
    s.add_argument(
        "--max-concurrent-streams",
        type=int,
        default=DEFAULT_MAX_CONCURRENT_STREAMS,
        help="etcd's: the most gRPC streams one client connection may hold open (default"
        f" {DEFAULT_MAX_CONCURRENT_STREAMS}; etcd's is unlimited)",
    )
    s.add_argument(
        "--auth-token-ttl",
        type=int,
        default=int(DEFAULT_TTL_S),
        help="etcd's: seconds an etcd auth token lives on a member after its last use there"
        f" (default {int(DEFAULT_TTL_S)})",
    )
    s.add_argument(
        "--listen-metrics-urls",
        default="",
        help="etcd's: http://HOST:PORT,... serving /metrics (Prometheus), /health,"
        " /livez and /readyz (default: none)",
    )
    s.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    s.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=LOG_FORMATS[0],
        help="text (for people) or json: one object per line with the fields member, term,"
        " leader, event and request_id (default text)",
    )
    s.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=EVENT_LOOPS[0],
        help="the member's event loop: uvloop (faster; asyncio's if uvloop is not"
        " installed) or asyncio's own",
    )
    return s


def add_tls_flags(s: argparse.ArgumentParser) -> None:
    """etcd's TLS flags: the client port's (--listen, --etcd-listen), the peer port's, and
    what applies to both."""
    t = s.add_argument_group("TLS (etcd's flags)")
    t.add_argument("--cert-file", help="the client port's certificate (PEM): TLS on"
                   " --listen and --etcd-listen")
    t.add_argument("--key-file", help="its private key (mode 0600)")
    t.add_argument("--trusted-ca-file", help="the CA that signs the clients' certificates")
    t.add_argument("--client-cert-auth", action="store_true",
                   help="refuse a client without a certificate signed by --trusted-ca-file;"
                   " its common name is the user when auth is on")
    t.add_argument("--peer-cert-file", help="the peer port's certificate (PEM), presented"
                   " both ways: members accept and open peer connections")
    t.add_argument("--peer-key-file", help="its private key (mode 0600)")
    t.add_argument("--peer-trusted-ca-file", help="the CA that signs the members'"
                   " certificates: the peers' certificates are verified against it (without"
                   " it, against the system's CAs)")
    t.add_argument("--peer-client-cert-auth", action="store_true",
                   help="refuse a peer connection without a certificate signed by"
                   " --peer-trusted-ca-file")
    t.add_argument("--cipher-suites",
                   help="TLS 1.2 cipher suites, comma separated (etcd's names, e.g."
                   " TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, or OpenSSL's): on both ports;"
                   " on the client port through gRPC's $GRPC_SSL_CIPHER_SUITES, which"
                   " `coord serve` sets. TLS 1.3's suites are the TLS stacks' own (as in"
                   " etcd)")
    t.add_argument("--tls-min-version", choices=TLS_VERSIONS, default=TLS_VERSIONS[0],
                   help="the lowest TLS version the peer port accepts (default TLS1.2). The"
                   " client port's TLS is gRPC's: it accepts TLS 1.2 and 1.3, and grpcio has"
                   " no setting for its floor")


def tls_configs(args: argparse.Namespace) -> tuple[ServerTLS | None, ServerTLS | None]:
    """The client port's and the peer port's TLS (None: plaintext) the flags ask for;
    ValueError naming the flags of a combination that does not work."""
    ciphers = openssl_ciphers(args.cipher_suites) if args.cipher_suites else None
    ports = []
    for prefix in ("", "peer-"):
        def flag(name: str, prefix: str = prefix) -> str:
            return f"--{prefix}{name}"

        def value(name: str, prefix: str = prefix) -> object:
            return getattr(args, f"{prefix}{name}".replace("-", "_"))

        cert, key, ca, auth = (value(n) for n in (
            "cert-file", "key-file", "trusted-ca-file", "client-cert-auth"))
        if bool(cert) != bool(key):
            raise ValueError(f"{flag('cert-file')} and {flag('key-file')} go together:"
                             " give both, or neither")
        if auth and not ca:
            raise ValueError(f"{flag('client-cert-auth')} needs {flag('trusted-ca-file')},"
                             " the CA that signs the certificates it accepts")
        if (ca or auth) and not cert:
            raise ValueError(f"{flag('trusted-ca-file')} and {flag('client-cert-auth')} are"
                             f" for a TLS port: give {flag('cert-file')} and {flag('key-file')}")
        ports.append(ServerTLS(str(cert), str(key), str(ca) if ca else None, bool(auth),
                               ciphers, args.tls_min_version) if cert else None)
    if (ciphers or args.tls_min_version != TLS_VERSIONS[0]) and not any(ports):
        raise ValueError("--cipher-suites and --tls-min-version are for TLS ports: give"
                         " --cert-file/--key-file or --peer-cert-file/--peer-key-file")
    return ports[0], ports[1]


def configure_logging(level: str, log_format: str = LOG_FORMATS[0]) -> None:
    """A member's log lines on stdout (test rigs and `coord dev` read them there), as
    text or JSON (--log-format)."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter(log_format))
    handler.addFilter(MemberFieldsFilter())
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])


def read_secret(args: argparse.Namespace) -> bytes:
    """The cluster secret from --cluster-secret-file, else $COORD_CLUSTER_SECRET; exits
    with a message saying how to give one when it is missing or too short."""
    if args.cluster_secret_file:
        try:
            secret = read_file(args.cluster_secret_file, "--cluster-secret-file",
                               private=True).strip()
        except TLSConfigError as e:
            raise SystemExit(f"coord: {e}") from None
    else:
        secret = os.environ.get("COORD_CLUSTER_SECRET", "").encode()
    if len(secret) < MIN_SECRET_BYTES:
        raise SystemExit(
            "coord: members authenticate each other with a shared secret of at least 16 bytes:"
            " pass --cluster-secret-file FILE or set COORD_CLUSTER_SECRET"
        )
    return secret


def member_config(args: argparse.Namespace) -> MemberConfig:
    """The MemberConfig that `coord serve ARGS` runs, for processes and in-process members
    alike (coord.testing.embedded). Bad arguments raise ValueError."""
    missing = [f"--{a.replace('_', '-')}" for a in SERVE_REQUIRED if not getattr(args, a)]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --etcd-only for a throwaway member)")
    initial = parse_initial_cluster(args.initial_cluster)
    for address in (args.listen, args.peer_listen, *([args.etcd_listen] * bool(args.etcd_listen))):
        validate_address(address)
    if args.snapshot_bytes < 1 or args.snapshot_every < 1:
        raise ValueError("--snapshot-every and --snapshot-bytes must be positive")
    if args.quota_backend_bytes < 0 or args.disk_reserve_bytes < 0:
        raise ValueError("--quota-backend-bytes and --disk-reserve-bytes must be >= 0")
    client_tls, peer_tls = tls_configs(args)
    if args.auth_token_ttl < 1:
        raise ValueError("--auth-token-ttl must be at least 1 (seconds)")
    options = NodeOptions(
        tick_ms=args.tick_ms,
        election_ticks=args.election_ticks,
        heartbeat_ticks=args.heartbeat_ticks,
        snapshot_every=args.snapshot_every,
        snapshot_bytes=args.snapshot_bytes,
    )
    return MemberConfig(
        name=args.name,
        data_dir=Path(args.data_dir),
        listen=args.listen,
        peer_listen=args.peer_listen,
        initial_cluster=initial,
        cluster_secret=read_secret(args),
        options=options,
        join=args.initial_cluster_state == "existing",
        cluster_token=args.initial_cluster_token,
        read_only_mode=args.read_only_mode == "enabled",
        etcd_listen=args.etcd_listen,
        etcd_progress_notify_s=args.etcd_progress_notify_ms / 1000,
        etcd_only=args.etcd_only,
        quota_bytes=args.quota_backend_bytes,
        disk_reserve_bytes=args.disk_reserve_bytes,
        compaction=CompactionPolicy.parse(args.auto_compaction_mode,
                                          args.auto_compaction_retention),
        client_tls=client_tls,
        peer_tls=peer_tls,
        limits=RequestLimits(args.max_request_bytes, args.max_txn_ops,
                             args.max_concurrent_streams),
        auth_token_ttl_s=float(args.auth_token_ttl),
        listen_metrics_urls=metrics_urls(args.listen_metrics_urls),
    )


def metrics_urls(flag: str) -> list[str]:
    """--listen-metrics-urls' URLs, each checked (ValueError naming the flag)."""
    urls = [u.strip() for u in flag.split(",") if u.strip()]
    for url in urls:
        parse_metrics_url(url)
    return urls


def parse_serve_args(argv: list[str]) -> argparse.Namespace:
    """`argv` (the flags after `coord serve`) parsed exactly as `coord serve` parses them."""
    return add_serve_flags(argparse.ArgumentParser(prog="coord serve")).parse_args(argv)
