"""ONNX's own node tests (model + inputs + expected outputs) for every imported op.

A case fluid-hw refuses to import (an unsupported type or attribute) is a skip with
the importer's reason, listed in docs/onnx.md; a case that imports must give the
expected outputs.
"""

import pytest

from fluid_hw.frontend.onnx._import_ops import IMPORTERS
from tests.onnx import backend_data


@pytest.mark.parametrize("op", sorted(IMPORTERS))
def test_onnx_node_tests(op):
    results = backend_data.results_for(op)
    assert results, f"no ONNX node tests found for {op}"
    failed = [f"{r.name}: {r.reason}" for r in results if r.status == "fail"]
    assert not failed, "\n".join(failed)
    assert any(r.status == "pass" for r in results), [r.reason for r in results]
