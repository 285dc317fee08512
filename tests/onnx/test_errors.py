"""Bad files and unsupported graphs give clear fluid_hw.errors, never protobuf tracebacks."""

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fluid_hw import onnx as fonnx
from fluid_hw.errors import FluidError, FormatError, UnknownOpError
from fluid_hw.frontend.onnx._model import max_opset
from tests.onnx.harness import finish_model, run_fluid_model, run_ort
from tests.onnx.test_models import mlp_model

R = np.random.default_rng(9)


def _clean(excinfo: pytest.ExceptionInfo) -> str:
    """The message, after checking no other exception is chained to it."""
    e = excinfo.value
    assert e.__cause__ is None and (e.__context__ is None or e.__suppress_context__)
    return str(e)


def test_missing_empty_and_garbage_files(tmp_path):
    with pytest.raises(FormatError, match="file not found") as e:
        fonnx.load(tmp_path / "nope.onnx")
    _clean(e)
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(FormatError, match="empty file"):
        fonnx.load(tmp_path / "empty.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00\xff definitely not protobuf \x12\x34" * 10)
    with pytest.raises(FormatError, match=r"junk.onnx") as e:
        fonnx.load(tmp_path / "junk.onnx")
    _clean(e)
    with pytest.raises(FormatError, match="is a folder"):
        fonnx.load(tmp_path)
    with pytest.raises(FormatError, match="cannot read an ONNX model from a int"):
        fonnx.load(3)


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.5, 0.8, 0.97, 0.999])
def test_truncated_file(tmp_path, fraction):
    data = mlp_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(FormatError, match=r"cut.onnx") as e:
        fonnx.load(path)
    msg = _clean(e)
    assert "truncated or corrupted" in msg


def test_graph_the_checker_rejects():
    g = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"])], "bad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(FormatError, match="checker rejects the model") as e:
        fonnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    _clean(e)


def test_corrupted_initializer_data():
    m = mlp_model()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-8]
    with pytest.raises(FormatError, match=r"fc1.weight"):
        fonnx.load(m.SerializeToString())


def _external(tmp_path):
    m = mlp_model()
    path = tmp_path / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path


def test_missing_external_data(tmp_path):
    path = _external(tmp_path)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(FormatError, match=r"'weights.bin', which is missing") as e:
        fonnx.load(path)
    assert "fc1.weight" in _clean(e)


def test_truncated_external_data(tmp_path):
    path = _external(tmp_path)
    data = (tmp_path / "weights.bin").read_bytes()
    (tmp_path / "weights.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="external"):
        fonnx.load(path)


def test_external_data_through_a_model_proto(tmp_path):
    proto = onnx.load(str(_external(tmp_path)), load_external_data=False)
    with pytest.raises(FormatError, match=r"pass the path of the .onnx file"):
        fonnx.load(proto)


def test_external_data_outside_the_model_folder(tmp_path):
    path = _external(tmp_path)
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../etc/passwd"
    (tmp_path / "evil.onnx").write_bytes(m.SerializeToString())
    with pytest.raises(FormatError, match="outside the model's folder"):
        fonnx.load(tmp_path / "evil.onnx")


def test_opset_newer_than_supported():
    m = mlp_model()
    m.opset_import[0].version = max_opset() + 1
    with pytest.raises(FormatError, match=f"opset {max_opset() + 1} is newer than supported"):
        fonnx.load(m)
    m = mlp_model()
    m.ir_version = onnx.IR_VERSION + 1
    with pytest.raises(FormatError, match="IR version"):
        fonnx.load(m)


def test_old_opset_is_converted():
    g = helper.make_graph(
        [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
         helper.make_node("Softmax", ["u"], ["y"], axis=1)], "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    x = R.standard_normal((3, 4)).astype(np.float32)
    m = fonnx.load(model)
    assert m.opset == 13
    np.testing.assert_allclose(run_fluid_model(m, {"x": x})[0], run_ort(model, {"x": x})[0],
                               atol=1e-6)


def test_every_unsupported_node_is_listed_once():
    """Three unsupported nodes, one behind another and one of a custom domain: one error
    names them all, with op type, node name and opset."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="ok_relu"),
        helper.make_node("RandomNormalLike", ["r"], ["e"], name="the_random"),
        helper.make_node("Relu", ["e"], ["e2"], name="after_random"),
        helper.make_node("Det", ["e2"], ["d"], name="the_det"),
        helper.make_node("Einsum", ["x4"], ["p"], name="two_term_einsum",
                         equation="...ij,jk->...i"),
        helper.make_node("Frobnicate", ["x"], ["f"], name="custom", domain="com.example"),
    ]
    g = helper.make_graph(
        nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]),
                         helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1, 6]),
         helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnknownOpError) as e:
        fonnx.load(model)
    msg = _clean(e)
    assert "4 node(s) cannot be converted" in msg
    assert "RandomNormalLike node 'the_random' (opset 17): no mapping to fluid-hw ops" in msg
    assert "Det node 'the_det' (opset 17): no mapping" in msg
    assert ("Einsum node 'two_term_einsum' (opset 17): equation '...ij,jk->...i' has 2 "
            "operand(s), the node 1 input(s)") in msg
    assert "Frobnicate node 'custom' (domain 'com.example', opset 1)" in msg
    assert "after_random" not in msg and "ok_relu" not in msg
    assert "Supported ONNX ops:" in msg and "Gemm" in msg


def test_unsupported_recurrent_variant_is_explained():
    h = 2
    g = helper.make_graph(
        [helper.make_node("GRU", ["x", "W", "R"], ["y"], hidden_size=h, linear_before_reset=1,
                          name="torch_gru")], "gru",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 2])],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(np.zeros((1, 3 * h, 2), np.float32), "W"),
         numpy_helper.from_array(np.zeros((1, 3 * h, h), np.float32), "R")])
    with pytest.raises(UnknownOpError, match=r"GRU node 'torch_gru' .*linear_before_reset=1"):
        fonnx.load(finish_model(g, 14))


def test_constants_for_graph_inputs():
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    model = finish_model(g, 17)
    with pytest.raises(UnknownOpError, match="graph input 'shape'; pass its value with "
                                             r"load\(..., constants="):
        fonnx.load(model)
    m = fonnx.load(model, constants={"shape": np.array([3, 4], np.int64)})
    assert m.feed_names == ["x"]
    x = R.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_array_equal(run_fluid_model(m, {"x": x})[0], x.reshape(3, 4))
    with pytest.raises(FormatError, match="not graph inputs"):
        fonnx.load(model, constants={"nope": np.zeros(2)})
    with pytest.raises(FormatError, match="is int32, the input is declared int64"):
        fonnx.load(model, constants={"shape": np.array([3, 4], np.int32)})


def test_tensorflow_style_names_are_sanitized(tmp_path):
    g = helper.make_graph(
        [helper.make_node("MatMul", ["input:0", "dense/kernel:0"], ["dense/MatMul:0"])], "tf",
        [helper.make_tensor_value_info("input:0", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("dense/MatMul:0", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(R.standard_normal((3, 2)).astype(np.float32),
                                 "dense/kernel:0")])
    m = fonnx.load(finish_model(g, 13))
    assert m.names == {"input:0": "input_0", "dense/MatMul:0": "dense_MatMul_0"}
    assert m.save(tmp_path / "tf") == ["dense_kernel_0"]


def test_core_import_does_not_need_onnx():
    code = ("import sys, fluid_hw, fluid_hw.onnx, fluid_hw.frontend.onnx\n"
            "assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules\n"
            "sys.modules['onnx'] = None  # as if not installed\n"
            "from fluid_hw.errors import FluidError\n"
            "try:\n"
            "    fluid_hw.onnx.load('model.onnx')\n"
            "except FluidError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "pip install 'fluid-hw[onnx]'" in out.stdout


def test_errors_are_fluid_errors():
    assert issubclass(FormatError, FluidError) and issubclass(UnknownOpError, FluidError)
