"""setuptools commands (named in pyproject.toml's [tool.setuptools.cmdclass]) that make
`pip install .` and `python -m build` work from a clean clone without `make`.

- build_py first generates the protobuf/gRPC modules (proto/generate.py): into the build
  directory for a wheel, into the source tree for an editable install, where the build
  directory is not what gets imported.
- sdist also carries proto/ (the .proto files and these scripts), which live outside every
  Python package and so are not picked up by default; a wheel built from the sdist needs
  them to generate the same modules."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

PROTO_DIR = Path(__file__).resolve().parent


def _generate(out_dir: Path) -> None:
    spec = importlib.util.spec_from_file_location("coord_proto_generate", PROTO_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(out_dir)


class BuildWithProtos(build_py):
    """build_py that writes the generated modules before copying the packages."""

    def run(self) -> None:
        editable = getattr(self, "editable_mode", False)
        _generate(PROTO_DIR.parent if editable else Path(self.build_lib))
        super().run()


class SdistWithProtos(sdist):
    """sdist whose release tree also holds proto/ (the build step's input)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / "proto"
        shutil.copytree(PROTO_DIR, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
