"""The upstream suite and what it needs beyond this venv, fetched once into a cache dir.

`suite_dir`: the sdist of the `etcd3` version this venv has (its tests are not in the
wheel), checked against its published SHA-256, and only its `tests/` unpacked, so the
suite imports the installed client rather than the sdist's copy of it.

`overlay_dir`: packages put first on the suite's path only, never into the venv: `mock`
(the suite imports it; the venv has none) and the suite's own pin of tenacity, 6.1.0.
etcd3 0.12.0's `Lock.acquire` hands tenacity a wait function of the 6.x signature, which
the venv's newer tenacity calls wrongly (a TypeError before any request), so with it
the lock tests would fail on every server alike and test nothing."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUITE_VERSION = "0.12.0"
SDIST_SHA256 = "89a704cb389bf0a010a1fa050ce19342d23bf6371ebda1c21cfe8ff3ed488726"
OVERLAY = ["tenacity==6.1.0", "mock==5.2.0"]  # their own dependency, six, is in the venv


def suite_dir(cache: Path) -> Path:
    """`cache/etcd3-VERSION` holding the suite's `tests/`, downloaded (pip) when missing."""
    target = cache / f"etcd3-{SUITE_VERSION}"
    if (target / "tests" / "test_etcd3.py").is_file():
        return target
    with _fresh(cache) as tmp:
        sdist = _download(tmp)
        _unpack_tests(sdist, tmp / "unpacked")
        shutil.rmtree(target, ignore_errors=True)
        (tmp / "unpacked").rename(target)
    return target


def overlay_dir(cache: Path) -> Path:
    """`cache/overlay` with OVERLAY installed (pip --target) when missing."""
    target = cache / "overlay"
    stamp = target / ".installed"
    if stamp.is_file() and stamp.read_text() == " ".join(OVERLAY):
        return target
    with _fresh(cache) as tmp:
        _pip("install", "--no-deps", "--target", str(tmp / "overlay"), *OVERLAY)
        (tmp / "overlay" / ".installed").write_text(" ".join(OVERLAY))
        shutil.rmtree(target, ignore_errors=True)
        (tmp / "overlay").rename(target)
    return target


@contextmanager
def _fresh(cache: Path) -> Iterator[Path]:
    """A temp dir inside `cache` (made if missing): what is fetched is moved into place
    whole, so an interrupted fetch leaves nothing that looks complete."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        yield Path(tmp)


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args, "-q"], check=True, timeout=300)


def _download(into: Path) -> Path:
    _pip("download", f"etcd3=={SUITE_VERSION}", "--no-binary", ":all:", "--no-deps",
         "-d", str(into))
    sdist = into / f"etcd3-{SUITE_VERSION}.tar.gz"
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{sdist.name}: sha256 {digest}, expected {SDIST_SHA256}")
    return sdist


def _unpack_tests(sdist: Path, into: Path) -> None:
    top = f"etcd3-{SUITE_VERSION}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.startswith(top + "tests/") and m.isfile()]
        for m in members:
            m.name = m.name.removeprefix(top)
        tar.extractall(into, members=members, filter="data")
