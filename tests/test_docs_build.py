"""The manual builds: `mkdocs build --strict` over docs/ (as `make docs` runs it), so a
page missing from the nav, a broken link or a reference that names no object fails the
suite; and the build's link rules are shown to catch a planted broken link."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "docs/mkdocs.yml"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict`, never with -q: a quiet build drops the warnings --strict
    counts, and a broken link passes (the planted link below caught that)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
         "-d", str(site)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_manual_builds_strict(tmp_path: Path) -> None:
    done = build(CONFIG, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    cli = (site / "reference/cli/index.html").read_text()
    for command in ("coord serve", "coord own", "coord kv put", "coord history export"):
        assert command in cli, f"the CLI reference lacks {command}"
    assert 'id="coord.client.Client"' in (site / "reference/client/index.html").read_text()
    assert (site / "using/console/members.svg").is_file()
    benchmarks = (site / "benchmarks/index.html").read_text()
    assert "<td>own-batched</td>" in benchmarks  # own.json's table
    assert "failover after kill -9 of the leader" in benchmarks  # raft.json's
    assert "<td>etcd 3.4 (process)</td>" in benchmarks  # startup.json's
    assert "<td>the whole apply()</td>" in benchmarks  # machine.json's
    assert "<td>ownall</td>" in benchmarks and "tls/plain</th>" in benchmarks  # etcd's two
    assert "<td>t0 -&gt; member switch (its log)</td>" in benchmarks  # readonly.json's
    assert "bench-table:" not in benchmarks
    console = (site / "using/console/index.html").read_text()
    assert "<td>all owners on screen</td>" in console and "bench-table:" not in console


def test_the_link_rules_fail_a_planted_broken_link(tmp_path: Path) -> None:
    """The manual's own `strict` and `validation` settings, on a one-page site whose page
    links to a page that does not exist."""
    ours = yaml.safe_load(CONFIG.read_text())
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({
        "site_name": "planted", "docs_dir": "pages",
        "strict": ours["strict"], "validation": ours["validation"],
    }))
    done = build(config, tmp_path / "site")
    assert done.returncode != 0
    assert "missing.md" in done.stdout + done.stderr


@pytest.mark.parametrize("data", [None, "{not json", '{"run": {"benchmark": "own"}}'])
def test_a_bench_table_marker_without_a_good_data_file_fails_the_build(tmp_path: Path,
                                                                         data: str | None):
    """The manual's bench-table hook on a one-page site whose marker names a missing
    file, a file that is not JSON, and an output missing its figures."""
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "index.md").write_text("# Home\n\n<!-- bench-table: results/own.json -->\n")
    if data is not None:
        (pages / "results").mkdir()
        (pages / "results/own.json").write_text(data)
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({
        "site_name": "planted", "docs_dir": "pages", "strict": True,
        "hooks": [str(CONFIG.parent / "hooks/bench_tables.py")],
    }))
    done = build(config, tmp_path / "site")
    assert done.returncode != 0
    assert "bench-table results/own.json" in done.stdout + done.stderr
