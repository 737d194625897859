"""Generate coord's protobuf and gRPC modules from the .proto files beside this script.

One generator for both ways the code is built: `make proto` (in the source tree, for an
editable install) and the setuptools build step in setup.py (into the build directory, so
`pip install .` from a clean clone gives a working `coord` without make). The .proto files
live under proto/coord/..., so `-Iproto` makes every generated import package-qualified
(`from coord.v1 import coord_pb2`)."""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent


def proto_files() -> list[Path]:
    """Every .proto under proto/coord, in a stable order."""
    return sorted(PROTO_ROOT.glob("coord/**/*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Write the *_pb2.py, *_pb2.pyi and *_pb2_grpc.py modules under `out_dir`; return the
    .proto files compiled. Raises RuntimeError naming protoc's exit code on failure."""
    from grpc_tools import protoc  # a build requirement, imported only when generating

    files = proto_files()
    out_dir.mkdir(parents=True, exist_ok=True)  # protoc writes under it but will not make it
    out = str(out_dir)
    args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"--python_out={out}",
            f"--pyi_out={out}", f"--grpc_python_out={out}", *map(str, files)]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return files


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT.parent
    compiled = generate(target)
    print(f"generated {len(compiled)} .proto files into {target}")
