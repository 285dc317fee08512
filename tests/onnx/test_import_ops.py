"""Every ONNX op fluid-hw imports, on random one-node models, against onnxruntime."""

import pytest

from fluid_hw.frontend.onnx._import_ops import IMPORTERS
from tests.onnx.coverage import ort_results
from tests.onnx.random_models import GENERATORS


def test_every_imported_op_has_random_models():
    assert sorted(GENERATORS) == sorted(IMPORTERS)


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_matches_onnxruntime(op):
    results = ort_results(op)
    assert results
    bad = [f"{r.name}: {r.reason}" for r in results if r.status != "pass"]
    assert not bad, "\n".join(bad)
