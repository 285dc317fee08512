"""The committed framework_pb2.py is exactly what `make proto` generates."""

from pathlib import Path

import pytest

from fluid_hw.ir import gen_proto


def test_generated_module_matches_proto(tmp_path: Path):
    pytest.importorskip("grpc_tools")
    produced = gen_proto.generate(tmp_path)
    assert produced.read_bytes() == gen_proto.GENERATED.read_bytes(), (
        "fluid_hw/ir/framework_pb2.py is stale: run `make proto` and commit the result"
    )
