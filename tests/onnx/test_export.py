"""Export: fluid-hw inference programs -> ONNX -> onnxruntime equals the CPU executor."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.cli.main import main as cli
from fluid_hw.errors import FormatError, UnknownOpError, VerifyError
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune
from tests.onnx.coverage import NOT_EXPORTED, export_results
from tests.onnx.harness import check_exported, finish_model, run_fluid_model, run_ort
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
    check_exported(onnx.load(str(path)))
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
    check_exported(model)
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
    check_exported(onnx.load(str(tmp_path / "m.onnx")))
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


def _imported(node: onnx.NodeProto, x: np.ndarray, opset: int, inits=()):
    """A one-node ONNX model of a graph input "x", imported."""
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in inits])
    return fonnx.load(finish_model(g, opset))


def _export(m, opset=None):
    return fonnx.export(m.program, feed_names=m.feed_names, fetch_names=m.fetch_names,
                        scope=m.scope, opset=opset)


@pytest.mark.parametrize("opset", [None, 13, 17, 18, 20])
def test_reduce_max_over_bool_passes_the_full_check(opset):
    """ONNX ReduceMax takes bool from opset 20 only: before, the exporter wrote it at 17
    and the checker and onnxruntime refused the model.  Below 20 it reduces in int32."""
    x = np.random.default_rng(3).random((4, 3)) > 0.6
    m = _imported(helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1), x, 20,
                  [("axes", np.array([1], np.int64))])
    model = _export(m, opset)
    check_exported(model)
    assert model.opset_import[0].version == (opset or 17)
    ops = [n.op_type for n in model.graph.node]
    assert ops == (["ReduceMax"] if opset == 20 else ["Cast", "ReduceMax", "Cast"])
    want = run_fluid_model(m, {"x": x})[0]
    np.testing.assert_array_equal(run_ort(model, {m.feed_names[0]: x})[0], want)
    np.testing.assert_array_equal(want, x.max(axis=1, keepdims=True))


def test_the_exporter_moves_to_the_opset_a_node_needs():
    """Pad mode 'wrap' exists from opset 19: with the opset unset the exporter writes 19;
    a fixed older opset is refused, naming the op and the opset to ask for."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = _imported(helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap"), x, 19,
                  [("pads", np.array([1, 2, 1, 2], np.int64))])
    model = _export(m)
    check_exported(model)
    assert model.opset_import[0].version == 19
    np.testing.assert_array_equal(run_ort(model, {m.feed_names[0]: x})[0],
                                  np.pad(x, [(1, 1), (2, 2)], mode="wrap"))
    with pytest.raises(UnknownOpError, match=r"op #\d+ pad .*Pad mode 'wrap' needs opset "
                                             r">= 19; export with opset=19"):
        _export(m, 17)


def test_element_types_an_opset_does_not_take_are_named():
    """Relu takes int32 from opset 14: at 13 the exporter names the op, the type and the
    opset that takes it; left to choose, it writes its default opset."""
    x = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    m = _imported(helper.make_node("Relu", ["x"], ["y"]), x, 14)
    with pytest.raises(UnknownOpError, match=r"op #0 relu .*ONNX Relu at opset 13 does not "
                                             r"take int32 as input #0 .*opset 14 allows it"):
        _export(m, 13)
    model = _export(m)
    check_exported(model)
    assert model.opset_import[0].version == 17
