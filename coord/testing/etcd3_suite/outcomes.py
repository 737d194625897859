"""The suite's per-test outcomes, read from pytest's JUnit XML, and their comparison
between two servers. A test is `pass`, `fail` (a failure or an error, in setup, call or
teardown) or `skip`; pure functions, tested without a server."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Outcome:
    status: str  # PASS, FAIL or SKIP
    message: str = ""  # the first line of the failure or skip reason


def read_junit(path: Path) -> dict[str, Outcome]:
    """`Class::test` -> its outcome. A test that passed its call but failed in teardown
    appears twice in the XML; any failure or error among its entries makes it a FAIL."""
    found: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        name = f"{cls}::{case.get('name')}"
        outcome = _outcome(case)
        earlier = found.get(name)
        if earlier is None or (earlier.status != FAIL and outcome.status == FAIL):
            found[name] = outcome
    return found


def _outcome(case: ET.Element) -> Outcome:
    for tag, status in (("failure", FAIL), ("error", FAIL), ("skipped", SKIP)):
        child = case.find(tag)
        if child is not None:
            return Outcome(status, _first_line(child.get("message") or child.text or ""))
    return Outcome(PASS)


_GRPC_ERROR = re.compile(r'status\s*=\s*StatusCode\.(\w+)\s+details\s*=\s*"([^"]*)"')


def _first_line(text: str) -> str:
    """What went wrong, in a line: a gRPC error's code and details (its first line says
    only that an RPC failed), else the first line of the message."""
    grpc_error = _GRPC_ERROR.search(text)
    if grpc_error is not None:
        return f"{grpc_error[1]}: {grpc_error[2]}"[:160]
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:160]


def counts(results: dict[str, Outcome]) -> Counter:
    return Counter(o.status for o in results.values())


def regressions(etcd: dict[str, Outcome], coord: dict[str, Outcome]) -> list[str]:
    """The tests etcd passes and coord does not (a test missing from coord's run counts)."""
    return sorted(t for t, o in etcd.items()
                  if o.status == PASS and coord.get(t, Outcome(FAIL)).status != PASS)


def table(etcd: dict[str, Outcome], coord: dict[str, Outcome]) -> str:
    """One line per test (etcd's outcome, coord's), the counts, and the regressions with
    coord's failure messages."""
    names = sorted(set(etcd) | set(coord))
    width = max((len(n) for n in names), default=4)
    missing = Outcome("-")
    lines = [f"{'test':<{width}}  etcd  coord"]
    for n in names:
        a, b = etcd.get(n, missing).status, coord.get(n, missing).status
        lines.append(f"{n:<{width}}  {a:<4}  {b:<5}{'  <-' if a != b else ''}")
    for side, results in (("etcd", etcd), ("coord", coord)):
        c = counts(results)
        lines.append(f"{side}: {c[PASS]} passed, {c[FAIL]} failed, {c[SKIP]} skipped")
    worse = regressions(etcd, coord)
    lines.append(f"coord fails {len(worse)} test(s) that etcd passes"
                 + (":" if worse else ""))
    lines += [f"  {n}: {coord.get(n, Outcome(FAIL, 'not run')).message}" for n in worse]
    return "\n".join(lines)
