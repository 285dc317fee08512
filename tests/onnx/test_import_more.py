"""The ops of issue 16 beyond their random models and node tests: which fluid ops they
become, their refusals, ops imported through their ONNX function body, other domains,
and the layers of the new fluid ops."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.errors import UnknownOpError
from tests.onnx.harness import NONE, C, F, compare, node_case

R = np.random.default_rng(16)


def _ops(case):
    return [op.type for op in fonnx.load(case.model).program.global_block().ops]


def _refusal(case) -> str:
    with pytest.raises(UnknownOpError) as e:
        fonnx.load(case.model)
    return " ".join(str(e.value).split())


def test_integer_factor_nearest_resize_is_nearest_interp():
    x = R.standard_normal([1, 2, 3, 4]).astype(np.float32)
    for attrs in ({}, {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}):
        case = node_case("Resize", [F(x), NONE, C(np.array([1, 1, 2, 3], np.float32))],
                         {"mode": "nearest", **attrs}, opset=13)
        assert _ops(case) == ["nearest_interp"]
        assert compare(case) is None
    linear = node_case("Resize", [F(x), NONE, C(np.array([1, 1, 2, 2], np.float32))],
                       {"mode": "linear"}, opset=13)
    assert "nearest_interp" not in _ops(linear) and compare(linear) is None


def test_refusals_name_the_node_and_the_attribute():
    x = R.standard_normal([2, 3, 4]).astype(np.float32)
    msg = _refusal(node_case("Einsum", [F(x), F(x), F(x)], {"equation": "aij,aij,aij->a"},
                             opset=13))
    assert "Einsum node 'einsum_0'" in msg and "one or two operands" in msg
    msg = _refusal(node_case("Gelu", [F(x)], {"approximate": "exact"}, opset=20))
    assert "Gelu node 'gelu_0'" in msg and "approximate='exact'" in msg
    msg = _refusal(node_case("Resize", [F(x, [None, 3, 4]), NONE,
                                        C(np.array([2, 1, 1], np.float32))], opset=13))
    assert "Resize node 'resize_0'" in msg and "must be known at import time" in msg
    msg = _refusal(node_case("Resize", [F(x), NONE, C(np.array([1, 2, 2], np.float32))],
                             {"mode": "area"}, opset=13))
    assert "mode='area'" in msg
    msg = _refusal(node_case("TopK", [F(x), F(np.array([2], np.int64))], opset=13, n_out=2))
    assert "K (input #1) must be known at import time, but it is the graph input 'in1'" in msg


def test_ops_with_a_function_body_are_imported_as_the_body():
    x = (R.standard_normal([3, 4]) * 3).astype(np.float32)
    for op, attrs in (("Softplus", {}), ("Elu", {"alpha": 0.5}), ("Selu", {}),
                      ("ThresholdedRelu", {"alpha": 0.7}), ("Celu", {"alpha": 2.0})):
        assert compare(node_case(op, [F(x)], attrs, opset=17)) is None, op
    # an unsupported node inside a body is reported with the node that holds it
    msg = _refusal(node_case("Bernoulli", [F(np.abs(x) / 10)], opset=22))
    assert ("Bernoulli node 'bernoulli_0' (opset 22), expanded into its ONNX function body: "
            "RandomUniformLike node") in msg


def test_other_domains_are_named():
    n = helper.make_node("Scaler", ["x"], ["y"], domain="ai.onnx.ml", offset=[0.0], scale=[2.0])
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    with pytest.raises(UnknownOpError) as e:
        fonnx.load(m)
    msg = str(e.value)
    assert "Scaler node '#0' (domain 'ai.onnx.ml', opset 1)" in msg
    assert "older than" not in msg


def test_rnn_names_the_graph_input_to_fix():
    h, i = 3, 2
    w = R.standard_normal([1, 4 * h, i]).astype(np.float32)
    r = R.standard_normal([1, 4 * h, h]).astype(np.float32)
    b = R.standard_normal([1, 8 * h]).astype(np.float32)
    case = node_case("LSTM", [F(R.standard_normal([2, 1, i]).astype(np.float32)), C(w), C(r),
                              F(b)], {"hidden_size": h}, opset=13, n_out=1)
    msg = _refusal(case)
    assert "B (input #3) must be known at import time, but it is the graph input 'in3'" in msg


def test_layers_of_the_new_ops():
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
        c = fluid.layers.data("c", shape=[2, 3], dtype="bool", append_batch_size=False)
        outs = [fluid.layers.erf(x), fluid.layers.hard_sigmoid(x),
                fluid.layers.hard_swish(x), fluid.layers.expand(x, [2, 1]),
                fluid.layers.cumsum(x, axis=0, reverse=True),
                fluid.layers.where(c, x, fluid.layers.scale(x, 2.0)),
                fluid.layers.reduce_min(x, dim=1), fluid.layers.reduce_prod(x, keep_dim=True),
                fluid.layers.elementwise_mod(x, fluid.layers.scale(x, 0.0, bias=1.5)),
                fluid.layers.elementwise_fmod(x, fluid.layers.scale(x, 0.0, bias=1.5)),
                fluid.layers.cumprod(x, axis=1, exclusive=True)]
    xv = R.standard_normal([2, 3]).astype(np.float32) * 4
    cv = R.random([2, 3]) < 0.5
    got = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": xv, "c": cv}, fetch_list=outs)
    import math

    want = [np.vectorize(math.erf)(xv), np.clip(0.2 * xv + 0.5, 0, 1),
            xv * np.clip(xv + 3, 0, 6) / 6, np.tile(xv, [2, 1]),
            np.flip(np.cumsum(np.flip(xv, 0), 0), 0), np.where(cv, xv, xv * 2),
            xv.min(axis=1), xv.prod(keepdims=True), np.mod(xv, 1.5), np.fmod(xv, 1.5),
            np.concatenate([np.ones([2, 1]), np.cumprod(xv, 1)[:, :-1]], 1)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_pooling_beyond_pool2d_is_window_taps():
    x = R.standard_normal([1, 2, 5, 6, 4]).astype(np.float32)
    case = node_case("MaxPool", [F(x)], {"kernel_shape": [2, 3, 2], "dilations": [2, 1, 1],
                                         "strides": [1, 2, 1], "pads": [1, 0, 1, 0, 1, 0]},
                     opset=19)
    ops = _ops(case)
    assert "pool2d" not in ops and ops.count("strided_slice") == 12 and "elementwise_max" in ops
    assert compare(case) is None
    # MaxPool's Indices: flat indices into X, row-major or (storage_order=1) column-major
    x2 = R.standard_normal([2, 3, 5, 5]).astype(np.float32)
    for order in (0, 1):
        case = node_case("MaxPool", [F(x2)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                              "pads": [1, 1, 1, 1], "storage_order": order},
                         opset=19, n_out=2)
        assert compare(case) is None
    msg = _refusal(node_case("AveragePool", [F(x, [1, 2, None, 6, 4])],
                             {"kernel_shape": [2, 2, 2]}, opset=19))
    assert "AveragePool node 'averagepool_0'" in msg and "spatial dims known" in msg


def test_rnn_is_a_gru_with_held_gates():
    h, i = 4, 3
    w = (R.standard_normal([2, h, i]) * 0.5).astype(np.float32)
    r = (R.standard_normal([2, h, h]) * 0.5).astype(np.float32)
    b = R.standard_normal([2, 2 * h]).astype(np.float32)
    x = R.standard_normal([5, 3, i]).astype(np.float32)
    lens = np.array([5, 2, 4], np.int32)
    case = node_case("RNN", [F(x), C(w), C(r), C(b), F(lens)],
                     {"hidden_size": h, "direction": "bidirectional"}, opset=14, n_out=2)
    assert _ops(case).count("gru") == 2
    assert compare(case) is None
    msg = _refusal(node_case("RNN", [F(x), C(w[:1]), C(r[:1]), F(b[:1])], {"hidden_size": h},
                             opset=14, n_out=1))
    assert "B (input #3) must be known at import time, but it is the graph input 'in3'" in msg


def test_dropout_in_training_mode_drops_at_random():
    x = (R.random([40, 50]) + 0.5).astype(np.float32)
    case = node_case("Dropout", [F(x), C(np.float32(0.25)), C(np.bool_(True))], {"seed": 7},
                     opset=13, n_out=2)
    m = fonnx.load(case.model)
    (op,) = [o for o in m.program.global_block().ops if o.type == "dropout"]
    assert not op.attr("is_test") and op.attr("fix_seed") and op.attr("seed") == 7
    exe = fluid.Executor(fluid.CPUPlace())
    y, mask = exe.run(m.program, feed={"in0": x}, fetch_list=m.fetch_names, scope=m.scope)
    assert mask.dtype == np.bool_ and np.array_equal(mask, y != 0)
    np.testing.assert_allclose(y[mask], x[mask] / 0.75, rtol=1e-6)
    assert abs(mask.mean() - 0.75) < 5 * np.sqrt(0.75 * 0.25 / x.size)
    # the ratio must be known at import time: it is the dropout probability attribute
    msg = _refusal(node_case("Dropout", [F(x), F(np.float32(0.25)), C(np.bool_(True))],
                             opset=13))
    assert "ratio (input #1) must be known at import time, but it is the graph input" in msg


def test_conv_transpose_is_a_direct_convolution():
    x = R.standard_normal([2, 4, 3, 5]).astype(np.float32)
    w = R.standard_normal([4, 3, 3, 2]).astype(np.float32)
    case = node_case("ConvTranspose", [F(x), C(w), C(R.standard_normal([6]).astype(np.float32))],
                     {"strides": [2, 3], "pads": [1, 0, 2, 1], "output_padding": [1, 0],
                      "group": 2}, opset=17)
    ops = _ops(case)
    assert ops.count("conv2d") == 1 and "pad" in ops and "slice" in ops
    assert compare(case) is None
    msg = _refusal(node_case("ConvTranspose", [F(x), F(w)], opset=17))
    assert "W (input #1) must be known at import time, but it is the graph input 'in1'" in msg


def test_an_import_time_input_computed_from_graph_inputs_names_them():
    x = R.standard_normal([2, 6]).astype(np.float32)
    nodes = [helper.make_node("Add", ["s", "one"], ["s1"]),
             helper.make_node("Reshape", ["x", "s1"], ["y"], name="reshape")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                     helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
        [helper.make_tensor("one", TensorProto.INT64, [2], [0, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnknownOpError) as e:
        fonnx.load(m)
    msg = " ".join(str(e.value).split())
    assert ("shape (input #1) must be known at import time; here it is computed from the "
            "graph input(s) ['s']: pass their values with load(..., constants={'s': ...})") in msg
    got = fonnx.load(m, constants={"s": np.array([3, 3], np.int64)})
    out = fluid.Executor(fluid.CPUPlace()).run(got.program, feed={"x": x},
                                               fetch_list=got.fetch_names, scope=got.scope)
    np.testing.assert_array_equal(out[0], x.reshape(3, 4))
