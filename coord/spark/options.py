"""The `coord-fenced` data source's options, checked once on the driver so bad input is
one clear error before any task runs.

TLS: options `cacert`, `cert` and `key` are paths (etcdctl's --cacert --cert --key),
read where a client is made: on the driver and on every executor, so the files must be
there at those paths. Without them, each process's $COORD_CACERT, $COORD_CERT and
$COORD_KEY, as for every coord client (none set: plaintext)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from coord.tls.files import TLS, TLSConfigError

__all__ = ["FORMAT", "WriteOptions", "parse_options", "sink_options"]

FORMAT = "coord-fenced"

_JOB = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    endpoints: tuple[str, ...]
    job: str
    version: int | None  # None: refused for a fenced batch write; streaming: batch ids
    ttl: float  # session TTL of each task attempt, seconds
    fence: bool  # False: the plain, unfenced baseline (tests and benchmarks)
    sink: dict[str, str] = field(default_factory=dict)
    tls: TLS | None = None  # None: each process's $COORD_CACERT... (module docstring)


def sink_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options that name the sink (`coord.spark.sinks.open_sink`'s), any case."""
    opts = {k.lower(): v for k, v in options.items()}
    return {k: opts[k] for k in ("sink", "path", "url", "table") if k in opts}


def parse_options(options: Mapping[str, str]) -> WriteOptions:
    """ValueError naming the option and what it must be."""
    opts = {k.lower(): v for k, v in options.items()}
    fence = opts.get("fence", "on").lower()
    if fence not in ("on", "off"):
        raise ValueError(f"option fence must be on or off, got {fence!r:.20}")
    endpoints = tuple(e.strip() for e in opts.get("endpoints", "").split(",") if e.strip())
    if not endpoints and fence == "on":
        raise ValueError("option endpoints is required: the coord members, comma-separated "
                         "host:port")
    job = opts.get("job", "")
    if not _JOB.match(job) and fence == "on":
        raise ValueError(f"option job is required: 1-128 letters, digits, '.', '_' or '-', "
                         f"got {job!r:.80}")
    version: int | None = None
    if opts.get("version", "") != "":
        try:
            version = int(opts["version"])
        except ValueError:
            version = -1
        if version < 0:
            raise ValueError(f"option version must be a non-negative integer, got "
                             f"{opts['version']!r:.40}")
    try:
        ttl = float(opts.get("ttl", "10"))
    except ValueError:
        ttl = -1.0
    if not 1.0 <= ttl <= 3600.0:
        raise ValueError(f"option ttl must be seconds in [1, 3600], got {opts.get('ttl')!r:.40}")
    sink = sink_options(opts)
    files = [opts.get(k) or None for k in ("cacert", "cert", "key")]
    try:
        tls = TLS(*files) if any(files) else None
    except TLSConfigError:
        raise ValueError("options cert and key go together: a client certificate and its "
                         "private key (paths each executor reads), or neither") from None
    return WriteOptions(endpoints, job, version, ttl, fence == "on", sink, tls)
