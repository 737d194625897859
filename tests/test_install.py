"""`pip install` of coord's wheel, as a user would install it: from a clean copy of the tree
(no generated code, no `make`), `python -m build` makes an sdist and a wheel, the wheel goes
into a fresh virtualenv, and its `coord` serves etcd's API to etcdctl.

The generated protobuf modules are not in git; the build step (proto/build_hooks.py) must
write them into the wheel, or the installed `coord` cannot import its own API."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from coord.testing.ports import free_port
from tests.etcdtools import LineProcess, etcdctl

ROOT = Path(__file__).resolve().parent.parent


def _clean_copy(dest: Path) -> Path:
    """The tree as a clean clone holds it: the files git knows (tracked, or new and not
    ignored), so generated code and venvs stay behind."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is skipped
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _run(command: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """Run a step of the install to completion; a failure shows what the step printed."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          timeout=timeout, **kwargs)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"{command[:3]} failed:\n{output}"
    return done


def _env() -> dict[str, str]:
    """The user's environment, without anything that would put this tree on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_from_a_clean_tree_installs_a_working_coord(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to know which files a clean clone has")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    src = _clean_copy(tmp_path / "src")
    assert not list(src.glob("coord/v1/*_pb2.py")), "the copy must hold no generated code"

    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, src], timeout=400, env=_env())
    wheel, = dist.glob("coord-*.whl")
    sdist, = dist.glob("coord-*.tar.gz")
    assert {"coord/v1/coord_pb2.py", "coord/etcdpb/rpc_pb2_grpc.py"} <= set(
        zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as tar:  # a wheel built from the sdist needs proto/ too
        assert f"coord-{version}/proto/coord/v1/coord.proto" in tar.getnames()

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], timeout=120)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], timeout=400, env=_env())
    coord = str(venv / "bin" / "coord")
    shown = _run([coord, "--version"], timeout=60, env=_env(), cwd=tmp_path)
    assert shown.stdout.strip() == f"coord {version}"

    endpoint = f"127.0.0.1:{free_port()}"
    proc = LineProcess([coord, "serve", "--etcd-only", "--listen", endpoint], env=_env())
    try:
        line = proc.read_until(lambda s: "serving the etcd v3 API" in s, timeout=60)[-1]
        assert re.search(r"\(data in (.+)\)", line)
        etcdctl(endpoint, "put", "installed/k", "v")
        assert etcdctl(endpoint, "get", "installed/k", "--print-value-only").stdout == "v\n"
        proc.signal(signal.SIGTERM)
        assert proc.proc.wait(30) == 0
    finally:
        proc.stop()
