"""A benchmark's table as data (`BenchTable`: headers and rows of cells), rendered as
the text the benchmark prints and as the Markdown the manual shows, so the manual's
table is the benchmark's own and not a copy written by hand. `markdown_page_table`
renders a `--json` output (figures and their `run` record) with a footer saying where,
when and how the figures were taken; the manual's `bench-table` hook
(docs/hooks/bench_tables.py) calls it on the data files the benchmarks wrote."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

TABLES: dict[str, str] = {"own": "coord.bench.api", "pid": "coord.bench.api",
                          "kv": "coord.bench.api", "raft": "coord.bench.raft",
                          "startup": "coord.bench.startup", "machine": "coord.bench.machine",
                          "etcd": "coord.bench.etcd", "readonly": "coord.bench.readonly",
                          "scale": "coord.bench.scale", "snapshot": "coord.bench.snapshot_transfer",
                          "audit": "coord.bench.audit", "tui": "coord.bench.tui",
                          "spark": "coord.bench.spark_writer"}
"""Each benchmark whose table is rendered from its --json output: the module whose
`table(figures)` makes it (imported only when asked for: they bring clusters and gRPC).
A benchmark that prints several tables (one per phase, say) returns them in order."""


def cell(value: object) -> str:
    """One figure as the tables show it: thousands separated, two decimals below 100
    (latencies in ms), none above (rates), empty for a figure not taken."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class BenchTable:
    """Headers and rows of cells (already strings, from `cell`), and notes: figures of
    another shape than the rows', one line each, printed below the table; a title, when
    a benchmark prints several tables, says which one this is."""

    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    notes: Sequence[str] = ()
    title: str = ""

    def text(self) -> list[str]:
        """Fixed-width lines: the first column left-aligned, figures right-aligned."""
        widths = [max(len(r[i]) for r in (self.headers, *self.rows))
                  for i in range(len(self.headers))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths, strict=True))
                             ).rstrip()

        return [*([self.title] if self.title else []), line(self.headers),
                *(line(r) for r in self.rows), *self.notes]

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        align = ["---", *("---:" for _ in self.headers[1:])]
        return "\n\n".join([*([f"**{self.title}**"] if self.title else []),
                             "\n".join([line(self.headers), line(align),
                                        *(line(r) for r in self.rows)]), *self.notes])


Tables = BenchTable | Sequence[BenchTable]
"""What a benchmark's `table(figures)` returns: its table, or its tables in order."""


def as_list(tables: Tables) -> list[BenchTable]:
    return [tables] if isinstance(tables, BenchTable) else list(tables)


def printed(tables: Tables, indent: str = "") -> str:
    """Tables as a benchmark prints them: each table's lines, a blank line between
    tables."""
    return "\n\n".join("\n".join(indent + line for line in t.text())
                        for t in as_list(tables))


def from_dicts(rows: Sequence[dict[str, Any]]) -> BenchTable:
    """Rows that are dicts of figures, as a table: a column per key, in the order the
    keys first appear; a row without a key has an empty cell."""
    headers: list[str] = []
    for row in rows:
        headers += [k for k in row if k not in headers]
    return BenchTable(headers, [[cell(row.get(k)) for k in headers] for row in rows])


def footer(run: dict[str, Any]) -> str:
    """One line: the command, the date, the machine, coord's version and commit. (The
    run's load stays in the data file, for whoever judges the run.)"""
    m, c = run["machine"], run["coord"]
    cpu = f"{m['cpu']['count']} × {m['cpu']['model'] or 'unknown CPU'}"
    memory = f", {m['memory_bytes'] / (1 << 30):.1f} GiB" if m.get("memory_bytes") else ""
    at = f" at {c['commit']}" if c.get("commit") else ""
    return (f"`{run['command']}`, {run['date']}, on {cpu}{memory}, Linux {m['kernel']}; "
            f"coord {c['version']}{at}")


def table_maker(benchmark: str) -> Callable[[dict[str, Any]], Tables]:
    if benchmark not in TABLES:
        raise ValueError(f"no table is rendered for coord bench {benchmark}")
    return importlib.import_module(TABLES[benchmark]).table


def markdown_page_table(output: object) -> str:
    """A `--json` output as the manual shows it: the benchmark's table, then its footer.
    Raises ValueError on an output that is not one (no `run`, a benchmark with no table,
    figures the table cannot read)."""
    if not isinstance(output, dict) or not isinstance(output.get("run"), dict):
        raise ValueError("not a coord bench --json output: no run record")
    run = output["run"]
    try:
        tables = as_list(table_maker(run["benchmark"])(output))
        if not tables:
            raise ValueError("a coord bench --json output with no figures to show")
        body = "\n\n".join(t.markdown() for t in tables)
        return f"{body}\n\n{footer(run)}\n"
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"a malformed coord bench --json output: {e!r}") from e
