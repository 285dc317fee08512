"""Whole models defined in ONNX (built with onnx.helper, as PyTorch exports them) import
and run on the CPU executor equal to onnxruntime; saved folders and the CLI agree."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.cli.main import main as cli
from tests.onnx.harness import finish_model, run_fluid_model, run_ort

R = np.random.default_rng(5)


def _w(*shape, scale=0.3):
    return (R.standard_normal(shape) * scale).astype(np.float32)


def mlp_model() -> onnx.ModelProto:
    """torch.nn.Sequential(Flatten, Linear(64, 32), ReLU, Linear(32, 10), Softmax) as
    PyTorch writes it: Gemm with transB=1 (weights [out, in])."""
    inits = {"fc1.weight": _w(32, 64), "fc1.bias": _w(32), "fc2.weight": _w(10, 32),
             "fc2.bias": _w(10)}
    nodes = [
        helper.make_node("Flatten", ["input"], ["/flatten/Flatten_output_0"], axis=1),
        helper.make_node("Gemm", ["/flatten/Flatten_output_0", "fc1.weight", "fc1.bias"],
                         ["/fc1/Gemm_output_0"], alpha=1.0, beta=1.0, transB=1),
        helper.make_node("Relu", ["/fc1/Gemm_output_0"], ["/relu/Relu_output_0"]),
        helper.make_node("Gemm", ["/relu/Relu_output_0", "fc2.weight", "fc2.bias"],
                         ["/fc2/Gemm_output_0"], transB=1),
        helper.make_node("Softmax", ["/fc2/Gemm_output_0"], ["output"], axis=1),
    ]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                     ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return finish_model(g, 17)


def cnn_model() -> onnx.ModelProto:
    """conv(pad 1, bias) - batchnorm - relu - maxpool - grouped strided conv - relu -
    global average pool - x.view(x.size(0), -1) - linear - log_softmax."""
    c1, c2 = 8, 8
    inits = {
        "conv1.weight": _w(c1, 1, 3, 3), "conv1.bias": _w(c1),
        "bn.weight": 1 + _w(c1), "bn.bias": _w(c1), "bn.running_mean": _w(c1),
        "bn.running_var": 1 + np.abs(_w(c1)),
        "conv2.weight": _w(c2, c1 // 2, 3, 3), "conv2.bias": _w(c2),
        "fc.weight": _w(10, c2), "fc.bias": _w(10),
        "zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
        "minus_one": np.array([-1], np.int64),
    }
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias",
                                                "bn.running_mean", "bn.running_var"],
                         ["bn"], epsilon=1e-5, momentum=0.9),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], group=2),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Shape", ["gap"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["gap", "target"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1),
        helper.make_node("LogSoftmax", ["logits"], ["output"], axis=1),
    ]
    g = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                     ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return finish_model(g, 13)


MODELS = {"mlp": mlp_model, "cnn": cnn_model}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("batch", [1, 5])
def test_model_equals_onnxruntime(name, batch):
    model = MODELS[name]()
    m = fonnx.load(model)
    x = R.random((batch, 1, 8, 8)).astype(np.float32)
    got = run_fluid_model(m, {"input": x})[0]
    want = run_ort(model, {"input": x})[0]
    assert got.shape == want.shape == (batch, 10)
    err = float(np.abs(got - want).max())
    assert err <= 1e-5, f"{name}: max abs error {err}"


def test_cnn_folds_the_shape_subgraph_into_one_reshape():
    ops = fonnx.load(cnn_model()).program.global_block().ops
    assert [op.type for op in ops] == [
        "conv2d", "elementwise_add", "batch_norm", "relu", "pool2d", "conv2d",
        "elementwise_add", "relu", "pool2d", "reshape2", "mul", "elementwise_add",
        "log_softmax"]
    reshape = next(op for op in ops if op.type == "reshape2")
    assert reshape.attr("shape") == [0, -1]  # the dynamic batch is copied, not fixed


def test_mlp_program_is_fluid_fc_shaped():
    """Gemm with constant weights becomes Fluid's fc pattern: mul + elementwise_add."""
    m = fonnx.load(mlp_model())
    ops = [op.type for op in m.program.global_block().ops]
    assert ops == ["flatten2", "mul", "elementwise_add", "relu", "mul", "elementwise_add",
                   "softmax"]
    gb = m.program.global_block()
    assert gb.var("fc1.weight.T").shape == (64, 32) and gb.var("fc1.weight.T").is_parameter
    assert m.feed_names == ["input"] and m.fetch_names == ["output"]
    assert m.names == {"input": "input", "output": "output"}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_saved_folder_and_cli_import_run_the_same(name, tmp_path, capsys):
    model = MODELS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    x = R.random((3, 1, 8, 8)).astype(np.float32)
    want = run_ort(model, {"input": x})[0]
    assert cli(["import", str(path), "--out", str(tmp_path / "dir")]) == 0
    assert "fetch output: float32[-1, 10]" in capsys.readouterr().out
    fonnx.load(path).save(tmp_path / "npz", params_filename="params.npz")
    for folder, params in (("dir", None), ("npz", "params.npz")):
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        prog, feeds, fetches = fluid.io.load_inference_model(
            tmp_path / folder, exe, params_filename=params, scope=scope)
        got = exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)[0]
        assert np.abs(got - want).max() <= 1e-5


def test_external_data_is_read_from_the_model_folder(tmp_path):
    model = mlp_model()
    stored = onnx.ModelProto()
    stored.CopyFrom(model)  # save_model moves the copy's data out
    path = tmp_path / "ext.onnx"
    onnx.save_model(stored, str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="ext.weights", size_threshold=0)
    assert (tmp_path / "ext.weights").is_file()
    x = R.random((2, 1, 8, 8)).astype(np.float32)
    got = run_fluid_model(fonnx.load(path), {"input": x})[0]
    np.testing.assert_allclose(got, run_ort(model, {"input": x})[0], atol=1e-5)


def test_lstm_sequence_lens_become_a_lod_recurrence():
    """ONNX LSTM -> sequence_unpad (LoD from sequence_lens), lstm, sequence_pad."""
    h, n_in, s, b = 3, 2, 4, 3
    model = finish_model(helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R", "", "lens"], ["y", "y_h"], hidden_size=h)],
        "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [s, b, n_in]),
                 helper.make_tensor_value_info("lens", TensorProto.INT32, [b])],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("y_h")],
        [numpy_helper.from_array(_w(1, 4 * h, n_in), "W"),
         numpy_helper.from_array(_w(1, 4 * h, h), "R")]), 14)
    m = fonnx.load(model)
    ops = [op.type for op in m.program.global_block().ops]
    assert "lstm" in ops and "sequence_unpad" in ops and "sequence_pad" in ops
    unpadded = next(op for op in m.program.global_block().ops if op.type == "sequence_unpad")
    assert m.program.global_block().var(unpadded.output("Out")[0]).lod_level == 1
    feeds = {"x": R.standard_normal((s, b, n_in)).astype(np.float32),
             "lens": np.array([4, 1, 3], np.int32)}
    got, want = run_fluid_model(m, feeds), run_ort(model, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-5)
    assert np.all(got[0][1:, :, 1] == 0)  # past its length, sequence 1 is zero padding
