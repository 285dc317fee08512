"""Fluid 1.5's framework- and core-level names: name_scope (op_namescope),
in_dygraph_mode, convert_np_dtype_to_dtype_, cpu/cuda_places, Variable.op, scope
variables' int and tensor-array accessors."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors
from fluid_hw.ir import dtypes


def test_name_scope_sets_op_namescope(fresh):
    main, _, _ = fresh
    with fluid.name_scope("encoder"):
        x = fluid.layers.data(name="x", shape=[3])
        h = fluid.layers.fc(x, size=2)
        with fluid.name_scope("attention"):
            a = fluid.layers.relu(h)
    with fluid.name_scope("encoder"):
        b = fluid.layers.relu(a)
    c = fluid.layers.relu(b)
    scopes = {op.output_arg_names[0]: op.attr("op_namescope") if op.has_attr("op_namescope")
              else None for op in main.global_block().ops}
    assert scopes[h.name] == "/encoder/"
    assert scopes[a.name] == "/encoder/attention/"
    assert scopes[b.name] == "/encoder_1/"  # the same name again at one level
    assert scopes[c.name] is None
    # it survives serialisation and the program still runs
    again = fluid.Program.parse_from_string(main.serialize_to_string())
    assert again.global_block().ops[-2].attr("op_namescope") == "/encoder_1/"
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    (out,) = exe.run(main, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=[c])
    assert out.shape == (2, 2)
    with pytest.raises(ValueError, match="'/'"), fluid.name_scope("a/b"):
        pass


def test_framework_functions():
    assert fluid.in_dygraph_mode() is False
    assert fluid.framework.convert_np_dtype_to_dtype_(np.float32) == dtypes.VarType.FP32
    assert fluid.framework.convert_np_dtype_to_dtype_("int64") == dtypes.VarType.INT64
    assert [type(p) for p in fluid.cpu_places(3)] == [fluid.CPUPlace] * 3
    assert all(isinstance(p, fluid.CUDAPlace) for p in fluid.cuda_places([0, 1]))


def test_variable_op(fresh):
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.fc(x, size=2, act="relu")
    assert x.op is None
    assert y.op.type == "relu" and y.name in y.op.output_arg_names
    w = fluid.default_main_program().global_block().all_parameters()[0]
    assert w.op is None


def test_scope_variable_int_and_tensor_array():
    scope = fluid.Scope()
    v = scope.var("step")
    assert not v.is_int()
    v.set_int(7)
    assert v.is_int() and v.get_int() == 7
    arr = scope.var("arr").get_lod_tensor_array()
    assert arr == []
    arr.append(np.ones(2))
    assert len(scope.find_var("arr").get_lod_tensor_array()) == 1
    with pytest.raises(errors.FetchError, match="not a tensor array"):
        scope.find_var("step").get_lod_tensor_array()
    with pytest.raises(errors.FetchError, match="no int"):
        scope.var("empty").get_int()
