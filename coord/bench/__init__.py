"""Benchmarks (`coord bench ...`): each starts its own clusters and prints its figures
beside its peer's from the same run. Never imported by the server."""

import sys


def log(msg: str) -> None:
    """Progress, on stderr: stdout is for the figures."""
    print(msg, file=sys.stderr, flush=True)
