"""python-etcd3's own test suite against a one-member etcd 3.4 and a one-member coord,
each on loopback with a fresh data dir, and the outcomes compared per test.

    python -m coord.testing.etcd3_suite                 # or: make etcd3-suite
    python -m coord.testing.etcd3_suite -k test_hash    # a subset (pytest's -k)

The suite (the `etcd3` sdist's tests/) and the two packages it needs beside the venv's
(`fetch`) are downloaded into --cache when missing. Each server gets the whole suite in
its own pytest process, one after the other; the JUnit XML and pytest's output of each
are kept in --cache/results. Exit status 1 when coord fails a test that etcd passes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from coord.testing import LocalCluster
from coord.testing.etcd3_suite.address import ENDPOINT_VARIABLE
from coord.testing.etcd3_suite.fetch import SUITE_VERSION, overlay_dir, suite_dir
from coord.testing.etcd3_suite.outcomes import Outcome, read_junit, regressions, table
from coord.testing.peer_etcd import ETCD_BINARY, EtcdCluster

SUITE_TIMEOUT_S = 1800  # the whole suite on one server; it takes about two minutes


def etcd_version() -> str:
    """`v3.4.23` for Debian's etcd: the suite's TEST_ETCD_VERSION, which decides which
    version-dependent tests run (the same ones on both servers)."""
    out = subprocess.run([ETCD_BINARY, "--version"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    found = re.search(r"etcd Version: (\S+)", out)
    if found is None:
        raise RuntimeError(f"cannot read etcd's version from {out!r}")
    return f"v{found.group(1)}"


@contextmanager
def server(kind: str) -> Iterator[str]:
    """A fresh one-member server of `kind` ("etcd" or "coord"); its client endpoint."""
    if kind == "etcd":
        with EtcdCluster(1) as e:
            yield e.endpoints[0]
    else:
        with LocalCluster(1) as c:
            yield c.etcd_endpoints[0]


def run_suite(suite: Path, overlay: Path, endpoint: str, results: Path, name: str,
              etcd_ver: str, select: str | None = None,
              test_timeout: int = 120) -> dict[str, Outcome]:
    """The suite in its own pytest process against `endpoint`; its outcomes. No pytest
    settings but the suite's (`-c /dev/null`: not those of a project above the cache);
    the installed `etcd3` (its generated code needs protobuf's pure-Python
    implementation), with `overlay` first on the path."""
    results.mkdir(parents=True, exist_ok=True)
    xml, log = results / f"{name}.xml", results / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_ETCD_HTTP_URL"}
    env.update({ENDPOINT_VARIABLE: endpoint, "ETCDCTL_ENDPOINTS": endpoint,
                "ETCDCTL_API": "3", "TEST_ETCD_VERSION": etcd_ver,
                "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
                "PYTHONPATH": os.pathsep.join(
                    [str(overlay), *filter(None, [os.environ.get("PYTHONPATH")])])})
    cmd = [sys.executable, "-m", "pytest", "tests/test_etcd3.py", "-c", os.devnull,
           "--rootdir", str(suite), "-p", "coord.testing.etcd3_suite.address",
           "-p", "no:cacheprovider", f"--junitxml={xml}", f"--timeout={test_timeout}",
           "-q", "-rfEs", *(["-k", select] if select else [])]
    with open(log, "w") as out:
        subprocess.run(cmd, cwd=suite, env=env, stdout=out, stderr=subprocess.STDOUT,
                       timeout=SUITE_TIMEOUT_S)
    return read_junit(xml)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coord.testing.etcd3_suite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(".cache/etcd3-suite"),
                    help="where the suite is kept (default .cache/etcd3-suite)")
    ap.add_argument("-k", dest="select", help="only the tests pytest's -k selects")
    ap.add_argument("--test-timeout", type=int, default=120, help="seconds per test")
    args = ap.parse_args(argv)
    installed = version("etcd3")
    if installed != SUITE_VERSION:
        print(f"the suite is etcd3 {SUITE_VERSION}'s, but etcd3 {installed} is installed")
        return 2
    cache = args.cache.resolve()
    suite, overlay = suite_dir(cache), overlay_dir(cache)
    etcd_ver = etcd_version()
    outcomes: dict[str, dict[str, Outcome]] = {}
    for kind in ("etcd", "coord"):
        t0 = time.monotonic()
        with server(kind) as endpoint:
            outcomes[kind] = run_suite(suite, overlay, endpoint, cache / "results", kind,
                                       etcd_ver, args.select, args.test_timeout)
        print(f"{kind}: the suite took {time.monotonic() - t0:.0f} s", flush=True)
    print(f"python-etcd3 {SUITE_VERSION}'s suite (TEST_ETCD_VERSION={etcd_ver}); "
          f"logs in {args.cache / 'results'}")
    print(table(outcomes["etcd"], outcomes["coord"]))
    return 1 if regressions(outcomes["etcd"], outcomes["coord"]) else 0
