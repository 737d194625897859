"""The `run` record every `coord bench TARGET --json` output carries: the machine, the
date, coord's version and commit, the load average at start and end, and the command
line. Figures from a shared 2-core box swing with its load, so a figure kept without
where and when it was taken cannot be compared with another; the record travels with
the figures, and a table rendered from them (`coord.bench.tables`) states it in its
footer."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from coord.version import coord_version


def _cpu() -> dict[str, Any]:
    """The CPU's model and count, from /proc/cpuinfo (absent where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor() or None, "count": os.cpu_count()}
    models = [line.split(":", 1)[1].strip() for line in text.splitlines()
              if line.startswith("model name")]
    return {"model": models[0] if models else None, "count": len(models) or os.cpu_count()}


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _commit() -> str | None:
    """The checkout's short commit when coord runs from one, else None (an installed
    wheel has no git history to name)."""
    source = Path(__file__).resolve().parents[2]
    if not (source / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=source,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def begin(target: str) -> dict[str, Any]:
    """The record as the benchmark starts: all but the load at its end."""
    return {
        "benchmark": target,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpu": _cpu(), "memory_bytes": _memory_bytes(),
                    "kernel": platform.release()},
        "coord": {"version": coord_version(), "commit": _commit()},
        "load_start": _load(),
        "command": shlex.join(["coord", *sys.argv[1:]]),
    }


def print_json(run: dict[str, Any], figures: object) -> None:
    """Print a benchmark's figures as its `--json` output, `run` (from `begin`) finished
    with the load at the end. A benchmark whose figures are a list of rows gets them
    under "rows", so every output is one object with its `run` beside the figures."""
    body = figures if isinstance(figures, dict) else {"rows": figures}
    print(json.dumps({"run": {**run, "load_end": _load()}, **body}, indent=2))
