"""One chaos run: a fresh cluster of real `coord serve` processes, workers running the
workloads through the client library, the nemesis injecting faults on a seeded
schedule, then heal, final reads, and every checker over the recorded oplog.

The run directory keeps everything: `oplog.jsonl` (the client operations),
`faults.jsonl`, `verdict.json`, the members' logs (`cluster/n*.log`) and `command.txt`
(the command that replays the run's seeds), and `report.html` with its timeline
(coord.chaos.report). With `tls`, the cluster serves both ports
over TLS with client certificates required (coord.testing's CA) and every client of the
run, the etcd3 workers too, speaks TLS."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from coord.chaos import netns
from coord.chaos.nemesis import DEFAULT_NEMESES, NEMESES, Fault, Nemesis, Schedule
from coord.chaos.netns import Network
from coord.chaos.owner_watch import watch_owners
from coord.chaos.recorder import FaultLog, Process, Recorder
from coord.chaos.report import write_report
from coord.chaos.session_watch import watch_sessions
from coord.chaos.sink import FencedSink
from coord.chaos.workloads import WORKLOADS, Ownership, Workload, make_workloads
from coord.check import CheckOptions, CheckResult, check_all
from coord.check.linearizable import DEFAULT_TIME_LIMIT_S
from coord.check.oplog import read_jsonl
from coord.check.sessions import fault_windows
from coord.client import Client
from coord.testing import LocalCluster
from coord.tls.files import ENV_CACERT, ENV_CERT, ENV_KEY, TLS

OWNER_WATCHERS = 2
"""Watchers of the own workload's ownership changes (coord.chaos.owner_watch), when it
runs; their process ids start at workers * 3,000,000."""
SESSION_WATCHERS = 1
"""Kept-alive sessions whose event streams are recorded (coord.chaos.session_watch),
when the own workload runs: streams from workers * 4,000,000, their ops from 5,000,000."""
JOIN_S = 30.0
"""How long stopping workers may take (a worker finishes its op: at most the client's
timeout and a session TTL stall)."""


@dataclass
class RunConfig:
    seconds: float = 60.0
    seed: int = 0
    workloads: list[str] = field(default_factory=lambda: list(WORKLOADS))
    nemeses: list[str] = field(default_factory=lambda: list(DEFAULT_NEMESES))
    workers: int = 8
    members: int = 3
    out: Path | None = None
    client_timeout: float = 3.0
    netns: str = "auto"  # partitions in network namespaces: auto (if root), on, off
    plant: str = ""  # a known-bad client setting (workloads.PLANTS), to see it caught
    tls: bool = False  # the cluster over TLS (mTLS on both ports), its clients too
    overlap: bool = False  # faults in overlapping pairs, not one at a time
    lin_time_limit_s: float = DEFAULT_TIME_LIMIT_S  # the linearizability check's, per key

    def command(self) -> str:
        return shlex.join(["coord", "chaos", "--seconds", f"{self.seconds:g}",
                           "--seed", str(self.seed), "--workload", ",".join(self.workloads),
                           "--nemesis", ",".join(self.nemeses) or "none",
                           "--workers", str(self.workers), "--members", str(self.members),
                           "--netns", self.netns,
                           *(["--plant", self.plant] if self.plant else []),
                           *(["--overlap"] if self.overlap else []),
                           *(["--lin-time-limit", f"{self.lin_time_limit_s:g}"]
                             if self.lin_time_limit_s != DEFAULT_TIME_LIMIT_S else []),
                           *(["--tls"] if self.tls else [])])


@dataclass
class RunResult:
    directory: Path
    checks: list[CheckResult]
    faults: list[Fault]
    counts: dict[str, int]
    elapsed_s: float

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.checks}
        if "illegal" in verdicts:
            return "illegal"
        return "unknown" if "unknown" in verdicts or not self.checks else "ok"


def run(cfg: RunConfig, console: Console | None = None) -> RunResult:
    console = console or Console(stderr=True)
    bad = [n for n in cfg.nemeses if n not in NEMESES]
    if bad:
        raise ValueError(f"unknown nemesis {', '.join(bad)}; choose from {', '.join(NEMESES)}")
    if "etcd" in cfg.workloads and importlib.util.find_spec("etcd3") is None:
        raise ValueError("the etcd workload drives the etcd3 package: pip install "
                         "'coord[chaos]' (or leave etcd out of --workload)")
    schedule = Schedule.draw(cfg.seed, cfg.nemeses, cfg.seconds, overlap=cfg.overlap)
    sink = FencedSink(fencing=cfg.plant != "unfenced-sink")
    workloads = make_workloads([w for w in cfg.workloads if w != "etcd"], sink, cfg.plant)
    out = cfg.out or Path("chaos-runs") / time.strftime(f"%Y%m%d-%H%M%S-seed{cfg.seed}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text(cfg.command() + "\n")
    network = _network(cfg)
    recorder = Recorder(out / "oplog.jsonl")
    skew_dir = out / "skew" if "skew" in cfg.nemeses else None
    cluster = LocalCluster(cfg.members, data_dir=out / "cluster",
                           partitionable=network is None and (
                               "partition" in cfg.nemeses or "delay" in cfg.nemeses),
                           tls=cfg.tls, member_command=_skewed(skew_dir))
    fault_log = FaultLog(out / "faults.jsonl")
    nemesis: Nemesis | None = None
    etcd: EtcdProcess | None = None
    t0 = time.monotonic()
    try:
        if network is not None:
            network.create().attach(cluster)
        console.print(f"[bold]coord chaos[/] seed {cfg.seed}: {cfg.members} members, "
                      f"{cfg.workers} workers ({', '.join(cfg.workloads)}), nemeses "
                      f"{', '.join(cfg.nemeses) or 'none'}"
                      f"{' (overlapping)' if cfg.overlap else ''}"
                      f"{' (partitions in network namespaces)' if network else ''}"
                      f"{', over TLS' if cfg.tls else ''}, "
                      f"{cfg.seconds:g} s → {out}")
        cluster.start(timeout=30)
        cluster.wait_for_leader(30)
        t0 = time.monotonic()
        nemesis = Nemesis(cluster, schedule, t0, network=network, skew_dir=skew_dir,
                          on_record=fault_log.record)
        stop = threading.Event()
        threads = [threading.Thread(target=_worker, name=f"chaos-worker-{i}", daemon=True,
                                    args=(i, i // len(workloads), cfg,
                                          workloads[i % len(workloads)], recorder,
                                          cluster.endpoints, cluster.client_tls, stop))
                   for i in range(cfg.workers if workloads else 0)]
        if "own" in cfg.workloads:
            threads += [threading.Thread(
                target=watch_owners, name=f"chaos-owners-watch-{j}", daemon=True,
                args=(j, cluster.endpoints, cluster.client_tls,
                      Process(recorder, cfg.workers * 3_000_000 + j, OWNER_WATCHERS), stop,
                      cfg.seed, Ownership.group)) for j in range(OWNER_WATCHERS)]
            threads += [threading.Thread(
                target=watch_sessions, name=f"chaos-session-watch-{j}", daemon=True,
                args=(j, cluster.endpoints, cluster.client_tls,
                      Process(recorder, cfg.workers * 4_000_000 + j, SESSION_WATCHERS),
                      Process(recorder, cfg.workers * 5_000_000 + j, SESSION_WATCHERS), stop,
                      cfg.seed, Ownership.group)) for j in range(SESSION_WATCHERS)]
        for t in threads:
            t.start()
        if "etcd" in cfg.workloads:
            etcd = EtcdProcess(cfg, cluster.endpoints, out / "oplog-etcd.jsonl",
                               cluster.client_tls)
        nemesis.start()
        with Live(_live(cfg, recorder, nemesis, t0), console=console,
                  refresh_per_second=2, transient=False) as live:
            while time.monotonic() - t0 < cfg.seconds:
                time.sleep(0.5)
                live.update(_live(cfg, recorder, nemesis, t0))
            stop.set()
            if etcd is not None:
                etcd.send("stop")
            nemesis.stop()
            for t in threads:
                t.join(JOIN_S)
            live.update(_live(cfg, recorder, nemesis, t0))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            console.print(f"[yellow]workers still in an op after {JOIN_S:g} s: "
                          f"{', '.join(stuck)}[/]")
        cluster.wait_for_leader(30)
        _final_reads(cfg, workloads, recorder, cluster.endpoints, cluster.client_tls)
        if etcd is not None:
            etcd.send("final")
            etcd.wait()
    finally:
        if etcd is not None:
            etcd.kill()
        if nemesis is not None:
            try:
                nemesis.heal_all()
            except Exception as e:  # noqa: BLE001 - the cluster is stopped next anyway
                console.print(f"[yellow]heal failed: {escape(repr(e))}[/]")
        try:
            fault_log.close(nemesis.faults if nemesis is not None else [])
        except OSError as e:
            console.print(f"[yellow]could not write {escape(str(fault_log.path))}: "
                          f"{escape(repr(e))}[/]")
        warning = fault_log.warning()
        if warning is not None:
            console.print(f"[yellow]{escape(warning)}[/]")
        recorder.close()
        cluster.stop()
        if network is not None:
            network.destroy()
    elapsed = time.monotonic() - t0
    console.print("checking the oplog…")
    rows = _merge(out)
    t_check = time.monotonic()
    windows = fault_windows([f.to_json() for f in (nemesis.faults if nemesis else [])])
    checks = check_all(rows, CheckOptions(tuple(windows), cfg.lin_time_limit_s))
    check_s = time.monotonic() - t_check
    counts = _counts(rows)
    result = RunResult(out, checks, nemesis.faults if nemesis else [], counts, elapsed)
    (out / "verdict.json").write_text(json.dumps({
        "verdict": result.verdict, "seed": cfg.seed, "command": cfg.command(),
        "elapsed_s": round(elapsed, 1), "ops": counts, "check_s": round(check_s, 2),
        "faults": [f.to_json() for f in result.faults],
        "checks": [c.to_json() for c in checks]}, indent=2, default=str))
    _report(console, cfg, result)
    console.print(f"checked {len(rows):,} oplog rows in {check_s:.1f} s")
    page = write_report(out, result.verdict, cfg.seed, cfg.command(), rows,
                        [f.to_json() for f in result.faults], checks)
    console.print(f"report: {page}")
    if result.verdict != "ok":
        console.print(f"[bold red]{result.verdict}[/] with seed {cfg.seed}; replay it with:\n"
                      f"  {cfg.command()}", soft_wrap=True)
    return result


def _skewed(skew_dir: Path | None) -> Callable[[str], list[str]] | None:
    """What members run when the skew nemesis may move their wall clocks: the test
    build that reads its skew from skew_dir/NAME (coord.chaos.skewed_member)."""
    if skew_dir is None:
        return None
    skew_dir.mkdir(parents=True, exist_ok=True)
    return lambda name: [sys.executable, "-m", "coord.chaos.skewed_member", "--skew-file",
                         str(skew_dir / name)]


def _network(cfg: RunConfig) -> Network | None:
    if "partition" not in cfg.nemeses or cfg.netns == "off":
        return None
    if "delay" in cfg.nemeses:  # delays live in the gates, which namespaces bypass
        if cfg.netns == "on":
            raise ValueError("--nemesis delay holds messages in the TCP gates, which "
                             "members in network namespaces do not use: --netns off or auto")
        return None
    why = netns.available()
    if why and cfg.netns == "on":
        raise ValueError(f"--netns on: {why}")
    return None if why else Network(list(f"n{i + 1}" for i in range(cfg.members)))


def _worker(i: int, nth: int, cfg: RunConfig, workload: Workload, recorder: Recorder,
            endpoints: list[str], tls: TLS | None, stop: threading.Event) -> None:
    """Worker `i`, the `nth` of those running `workload` (over TLS with `tls`)."""
    rng = random.Random(f"{cfg.seed}-worker-{i}")
    proc = Process(recorder, i, cfg.workers)
    # Each worker starts at a different member, so every member serves clients (chosen
    # here, not at random by the client, so a seed replays the same run).
    ordered = endpoints[i % len(endpoints):] + endpoints[:i % len(endpoints)]
    # Every other register worker accepts read-only service: cut off with a minority, it
    # gets stale reads flagged read_only (left out of the linearizability check, which
    # then holds every read *not* flagged to be linearizable).
    read_only_ok = workload.name == "register" and nth % 2 == 1
    with Client(ordered, timeout=cfg.client_timeout, read_only_ok=read_only_ok,
                randomize_endpoints=False, tls=tls or False) as client:
        while not stop.is_set():
            try:
                workload.step(proc, client, rng)
            except Exception as e:  # noqa: BLE001 - an unexpected error ends the op as unknown
                if proc._pending is not None:
                    proc.info(f"unexpected: {e!r}")
                time.sleep(0.1)


def _final_reads(cfg: RunConfig, workloads: list[Workload], recorder: Recorder,
                 endpoints: list[str], tls: TLS | None) -> None:
    proc = Process(recorder, cfg.workers * 1_000_000, 1)
    with Client(endpoints, timeout=10.0, tls=tls or False) as client:
        for w in workloads:
            w.finish(proc, client)


def _counts(rows: list[dict]) -> dict[str, int]:
    types = Counter(row["type"] for row in rows)
    return {t: types[t] for t in ("ok", "fail", "info")}


def _merge(out: Path) -> list[dict]:
    """oplog.jsonl and the etcd worker's oplog as one, in time order (one host's
    monotonic clock), re-indexed; written back to oplog.jsonl."""
    rows = read_jsonl(out / "oplog.jsonl")
    extra = out / "oplog-etcd.jsonl"
    if not extra.exists():
        return rows
    rows += [dict(r, index=r["index"] + 1_000_000_000) for r in read_jsonl(extra)]
    rows.sort(key=lambda r: (r["time_ns"], r["index"]))
    with open(out / "oplog.jsonl", "w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            row["index"] = i
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    extra.unlink()
    return rows


class EtcdProcess:
    """The etcd3 workers' process (coord.chaos.etcd_worker), driven over its stdin; over
    TLS with `tls` (given as coord's variables: none of this shell's own)."""

    def __init__(self, cfg: RunConfig, endpoints: list[str], path: Path,
                 tls: TLS | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in (ENV_CACERT, ENV_CERT, ENV_KEY)}
        env.update(tls.env() if tls else {}, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
        plant = ["--plant", cfg.plant] if cfg.plant == "blind-updates" else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coord.chaos.etcd_worker", "--endpoints",
             ",".join(endpoints), "--workers", str(max(2, cfg.workers // 4)), "--seed",
             str(cfg.seed), "--process-base", str(cfg.workers * 2_000_000), "--out",
             str(path), *plant], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(path.with_suffix(".log"), "w"), text=True, env=env)  # noqa: SIM115
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.kill()
            raise RuntimeError(f"the etcd worker did not start; see {path.with_suffix('.log')}")

    def send(self, line: str) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()

    def wait(self, timeout: float = 120.0) -> None:
        self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _live(cfg: RunConfig, recorder: Recorder, nemesis: Nemesis, t0: float) -> Table:
    elapsed = time.monotonic() - t0
    t = Table(title=f"coord chaos · seed {cfg.seed} · {min(elapsed, cfg.seconds):.0f}"
                    f"/{cfg.seconds:g} s", expand=False)
    t.add_column("op")
    for kind in ("ok", "fail", "info"):
        t.add_column(kind, justify="right")
    fs = sorted({f for f, _ in recorder.counts})
    for f in fs:
        t.add_row(f, *(f"{recorder.counts[(f, k)]:,}" for k in ("ok", "fail", "info")))
    faults = nemesis.faults
    active = [f for f in faults if f.end_s is None and not f.error]
    now = "; ".join(f"{f.kind} {f.member} {f.note}".rstrip() for f in active)
    t.caption = f"{len(faults)} fault(s) injected; " + (f"now: {now}" if now else
                                                        "cluster healthy")
    return t


def _report(console: Console, cfg: RunConfig, result: RunResult) -> None:
    kinds = Counter(f.kind for f in result.faults)
    c = result.counts
    console.print(f"ops: {sum(c.values()):,} ({c['ok']:,} ok, {c['fail']:,} fail, "
                  f"{c['info']:,} info) in {result.elapsed_s:.0f} s; faults: "
                  + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"))
    failed = [f for f in result.faults if f.error]
    if failed:
        console.print(f"[yellow]{len(failed)} fault(s) could not be injected or healed "
                      f"cleanly (faults.jsonl has why), e.g. {failed[0].kind} "
                      f"{failed[0].member}: {failed[0].error}[/]")
    t = Table(title="verdicts")
    for col in ("checker", "verdict", "details"):
        t.add_column(col)
    style = {"ok": "green", "illegal": "bold red", "unknown": "yellow"}
    for check in result.checks:
        details = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                            for k, v in check.stats.items())
        if check.reason:
            details += f"; {check.reason}"
        t.add_row(check.checker, f"[{style[check.verdict]}]{check.verdict}[/]", details)
    console.print(t)
    for check in result.checks:
        for v in check.violations[:5]:
            console.print(f"[red]{check.checker}:[/] {v['message']}")
    console.print(f"verdict: [{style[result.verdict]}]{result.verdict}[/]   oplog: "
                  f"{result.directory / 'oplog.jsonl'}")
    console.print(f"replay: {cfg.command()}")
