"""Regenerate ``framework_pb2.py`` from ``framework.proto`` (``make proto``).

The generated module is committed; ``tests/ir/test_proto_generated.py`` proves
it matches what this command produces with the pinned ``grpcio-tools``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "framework.proto"
GENERATED = HERE / "framework_pb2.py"


def generate(out_dir: Path) -> Path:
    """Run protoc (from grpcio-tools) on framework.proto; return the module path."""
    from grpc_tools import protoc  # dev dependency, imported only here

    rc = protoc.main(["protoc", f"--proto_path={HERE}", f"--python_out={out_dir}", str(PROTO)])
    if rc != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {rc})")
    return out_dir / "framework_pb2.py"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        produced = generate(Path(tmp))
        shutil.copyfile(produced, GENERATED)
    print(f"wrote {GENERATED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
