"""What a checker hands back: its verdict and the violations it found, each naming the
oplog rows that show it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_REPORTED = 20
"""Violations kept per checker (the count is exact; the list is a sample)."""


@dataclass
class CheckResult:
    """`verdict`: "ok", "illegal" (violations found) or "unknown" (a bound was hit, or
    the oplog had nothing to check). `ok` is True only for "ok"."""

    checker: str
    verdict: str = "ok"
    violations: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def violation(self, message: str, **rows: Any) -> None:
        self.verdict = "illegal"
        self.count += 1
        if len(self.violations) < MAX_REPORTED:
            self.violations.append({"message": message, **rows})

    def to_json(self) -> dict[str, Any]:
        return {"checker": self.checker, "verdict": self.verdict, "count": self.count,
                "violations": self.violations, "stats": self.stats, "reason": self.reason}
