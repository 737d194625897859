"""The Parquet sink's publish, without Spark: two publishes racing on one table cannot
leave a manifest that lists deleted files, and a publish makes its data durable before
the manifest that names it.

The race is forced, not hoped for: each actor runs in its own thread, parks at a named
point or is caught blocking on a lock (flock is wrapped to say so before it waits), and
the test moves to the next actor only then."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path

from coord.client.recipes.fence import Token
from coord.spark.sinks import ParquetDirSink, PublishError, parquet_dir
from tests.spark.test_sinks import batch

WAIT = 60.0  # seconds: a hang guard only, never reached when the code is right
A, B, C = Token(1, 7, 0), Token(2, 7, 1), Token(3, 7, 2)


class Actors:
    """Threads that each run one step; `start` returns once the step has parked at a
    pause point, is blocked on a lock, or is done."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.state: dict[str, str] = {}
        self.errors: dict[str, BaseException] = {}
        self.go: dict[str, threading.Event] = {}
        self.threads: list[threading.Thread] = []

    def _set(self, state: str) -> None:
        with self.cond:
            self.state[threading.current_thread().name] = state
            self.cond.notify_all()

    def start(self, name: str, step: Callable[[], object]) -> str:
        def run() -> None:
            try:
                step()
            except BaseException as e:  # noqa: BLE001 - reported to the test
                self.errors[name] = e
            self._set("done")

        self.go[name] = threading.Event()
        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        with self.cond:
            assert self.cond.wait_for(lambda: self.state.get(name) in
                                      ("parked", "blocked", "done"), WAIT), name
            return self.state[name]

    def park(self, name: str) -> None:
        """Called inside actor `name`'s code: wait there until `release(name)`."""
        if threading.current_thread().name != name or self.go[name].is_set():
            return
        self._set("parked")
        assert self.go[name].wait(WAIT)
        self._set("running")

    def release(self, name: str) -> None:
        self.go[name].set()

    def finish(self) -> None:
        for name in self.go:
            self.release(name)
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive(), thread.name


def _watch_locks(monkeypatch, actors: Actors) -> None:
    """flock that reports an actor as blocked before it waits for a held lock."""
    real = fcntl.flock

    def flock(f, op: int) -> None:
        if op == fcntl.LOCK_EX:
            try:
                return real(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                actors._set("blocked")
        real(f, op)
        if op == fcntl.LOCK_EX:
            actors._set("running")

    monkeypatch.setattr(parquet_dir.fcntl, "flock", flock)


def _write(sink: ParquetDirSink, token: Token, lo: int, hi: int) -> None:
    sink.append("j", 0, token, 0, batch(lo, lo))
    sink.append("j", 0, token, 1, batch(lo, hi))
    sink.seal("j", 0, token, 2, hi - lo)


def test_two_publishes_racing_never_leave_a_manifest_listing_deleted_files(tmp_path,
                                                                           monkeypatch):
    """Run 1 publishes attempt A of partition 0 and starts clearing superseded attempts;
    meanwhile run 2's attempt B takes the partition over and publishes, and a third
    attempt C announces itself. Every file a manifest lists must exist and the visible
    rows be exactly those of the published attempts; a publish that cannot stand
    fails loudly."""
    root = tmp_path / "out"
    actors = Actors()
    _watch_locks(monkeypatch, actors)
    published_dirs = ParquetDirSink._published_dirs
    write_json = parquet_dir._write_json

    def park_after_listing(self, job):  # run 1, clearing: the published set is known
        dirs = published_dirs(self, job)
        actors.park("run1")
        return dirs

    def park_before_manifest(path: Path, value, *args, **kwargs):  # run 2, publishing
        if path.name == "v2.json":
            actors.park("run2")
        return write_json(path, value, *args, **kwargs)

    monkeypatch.setattr(ParquetDirSink, "_published_dirs", park_after_listing)
    monkeypatch.setattr(parquet_dir, "_write_json", park_before_manifest)

    _write(ParquetDirSink(str(root)), A, 0, 3)
    results: dict[str, bool] = {}
    try:
        assert actors.start("run1", lambda: results.__setitem__(
            "run1", ParquetDirSink(str(root)).publish("j", 1, {0: (A, 3)}))) == "parked"
        actors.start("attempt B", lambda: _write(ParquetDirSink(str(root)), B, 10, 14))
        actors.start("run2", lambda: results.__setitem__(
            "run2", ParquetDirSink(str(root)).publish("j", 2, {0: (B, 4)})))
        actors.start("attempt C", lambda: ParquetDirSink(str(root)).append(
            "j", 0, C, 0, batch(20, 20)))
        actors.release("run1")
        actors.release("run2")
    finally:
        actors.finish()

    assert results.get("run1") is True and "run1" not in actors.errors
    assert "attempt B" not in actors.errors and "attempt C" not in actors.errors
    sink = ParquetDirSink(str(root))
    missing = [f for f in sink.committed_files() if not f.exists()]
    assert missing == [], f"a manifest lists deleted files: {missing}"
    # Run 2 waited for run 1's job lock; by then C held the partition: it fails loudly.
    assert isinstance(actors.errors.get("run2"), PublishError), actors.errors.get("run2")
    assert sink.committed_version("j") == 1
    assert sorted(sink.read().column("id").to_pylist()) == [0, 1, 2]


def test_data_files_and_their_directories_are_durable_before_the_manifest(tmp_path,
                                                                          monkeypatch):
    """The order of fsyncs and renames in one publish: every listed data file and every
    directory on its path, then the manifest, its rename, then its directory."""
    sink = ParquetDirSink(str(tmp_path / "out"))
    for p, token in ((0, A), (1, B)):
        sink.append("j", p, token, 0, batch(0, 0))
        sink.append("j", p, token, 1, batch(10 * p, 10 * p + 3))
        sink.append("j", p, token, 2, batch(10 * p + 3, 10 * p + 5))
        sink.seal("j", p, token, 3, 5)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        real_replace(src, dst)
        events.append(("rename", str(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert sink.publish("j", 1, {0: (A, 5), 1: (B, 5)})
    monkeypatch.undo()

    root = (tmp_path / "out").resolve()
    manifest = root / "_coord" / "manifests" / "j" / "v1.json"
    synced = [path for kind, path in events if kind == "fsync"]
    manifest_sync = next(i for i, (kind, path) in enumerate(events)
                         if kind == "fsync" and Path(path).parent == manifest.parent
                         and Path(path).name.startswith(".v1.json."))
    manifest_rename = events.index(("rename", str(manifest)))
    dir_sync = events.index(("fsync", str(manifest.parent)), manifest_rename)
    assert manifest_sync < manifest_rename < dir_sync
    before = {path for kind, path in events[:manifest_sync] if kind == "fsync"}
    files = sink.committed_files()
    assert len(files) == 4
    for f in files:
        needed = [f.resolve()] + [d for d in f.resolve().parents if d.is_relative_to(root)]
        lacking = [str(p) for p in needed if str(p) not in before]
        assert lacking == [], f"not durable before the manifest: {lacking}; {synced}"

