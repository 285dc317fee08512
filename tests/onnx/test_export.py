"""Export: fluid-hw inference programs -> ONNX -> onnxruntime equals the CPU executor."""

import numpy as np
import onnx
import pytest

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.cli.main import main as cli
from fluid_hw.errors import FormatError, UnknownOpError, VerifyError
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune
from tests.onnx.coverage import NOT_EXPORTED, export_results
from tests.onnx.harness import run_ort
from tests.onnx.random_models import GENERATORS


def _trained(build):
    """A digits model with initialized weights, its scope, and a batch of images."""
    m = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    with fluid.scope_guard(scope):
        exe.run(m.startup)
    x = np.random.default_rng(1).random((6, *m.image.shape[1:])).astype(np.float32)
    inference = prune(m.test_program, [m.image.name], [m.prediction.name])
    want = exe.run(inference, feed={m.image.name: x}, fetch_list=[m.prediction], scope=scope)
    return m, scope, x, want[0]


@pytest.mark.parametrize("build", [models.digits_mlp, models.digits_cnn], ids=lambda b: b.__name__)
def test_digits_model_round_trip_through_onnxruntime(build, tmp_path):
    m, scope, x, want = _trained(build)
    path = tmp_path / "model.onnx"
    model = fonnx.export(m.test_program, path, feed_names=[m.image.name],
                         fetch_names=[m.prediction], scope=scope)
    onnx.checker.check_model(onnx.load(str(path)))
    got = run_ort(onnx.load(str(path)), {m.image.name: x})[0]
    assert got.shape == want.shape
    err = float(np.abs(got - want).max())
    assert err <= 1e-5, f"{build.__name__}: max abs error {err}"
    # the graph is the inference part only, with the parameters as initializers
    ops = [n.op_type for n in model.graph.node]
    assert "Softmax" in ops and not {"SoftmaxCrossEntropyLoss", "ArgMax"} & set(ops)
    params = {p.name for p in m.test_program.all_parameters()}
    inits = {i.name for i in model.graph.initializer}
    assert params <= inits and all(n.endswith(".xshape") for n in inits - params)
    # and back: imported again, it computes the same
    back = fonnx.load(path)
    again = fluid.Executor(fluid.CPUPlace()).run(
        back.program, feed={m.image.name: x}, fetch_list=back.fetch_names, scope=back.scope)[0]
    np.testing.assert_allclose(again, want, rtol=0, atol=1e-6)


def test_cnn_exports_fluid_ops_as_onnx_ops():
    m, scope, _, _ = _trained(models.digits_cnn)
    model = fonnx.export(m.test_program, fetch_names=[m.prediction], scope=scope)
    assert [i.name for i in model.graph.input] == [m.image.name]  # found: the data var
    assert [n.op_type for n in model.graph.node] == [
        "Conv", "BatchNormalization", "Relu", "MaxPool", "Conv", "BatchNormalization", "Relu",
        "MaxPool", "Reshape", "MatMul", "Add", "Softmax"]
    # the batch dim stays dynamic
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and [d.dim_value for d in dims[1:]] == [1, 8, 8]


def test_saved_inference_model_exports_with_its_feeds_and_fetches(tmp_path, capsys):
    m, scope, x, want = _trained(models.digits_mlp)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(tmp_path / "dir", [m.image.name], [m.prediction], None,
                                      m.test_program)
    assert cli(["export", str(tmp_path / "dir"), "--out", str(tmp_path / "m.onnx")]) == 0
    assert "wrote" in capsys.readouterr().out
    got = run_ort(onnx.load(str(tmp_path / "m.onnx")), {m.image.name: x})[0]
    assert np.abs(got - want).max() <= 1e-5


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_imported_random_models_export_back(op):
    """Every random model of the import tests: imported, exported, run on onnxruntime ==
    onnxruntime on the original."""
    results = export_results(op)
    bad = [f"{r.name}: {r.reason}" for r in results if r.status == "fail"]
    assert not bad, "\n".join(bad)
    if op in NOT_EXPORTED:
        assert all(r.status == "skip" for r in results)
    else:
        assert all(r.status == "pass" for r in results)


def test_unexportable_ops_are_listed_together():
    m, scope, _, _ = _trained(models.digits_mlp)
    with pytest.raises(UnknownOpError) as e:
        fonnx.export(m.test_program, feed_names=[m.image.name, m.label.name],
                     fetch_names=[m.loss, m.accuracy], scope=scope)
    msg = str(e.value)
    listed = [ln for ln in msg.splitlines() if ln.startswith("  - ")]
    assert f"{len(listed)} problem(s)" in msg and len(listed) >= 2
    assert any("softmax_with_cross_entropy" in ln for ln in listed)
    assert any(" accuracy " in ln for ln in listed)


def test_export_needs_parameter_values_and_targets():
    m = models.digits_mlp()
    with pytest.raises(FormatError, match="has no value in the scope; run the startup"):
        fonnx.export(m.test_program, feed_names=[m.image.name], fetch_names=[m.prediction],
                     scope=fluid.Scope())
    with pytest.raises(VerifyError, match="no fetch ops"):
        fonnx.export(m.test_program)
    with pytest.raises(VerifyError, match="opset 12 is outside"):
        fonnx.export(m.test_program, fetch_names=[m.prediction], opset=12)
