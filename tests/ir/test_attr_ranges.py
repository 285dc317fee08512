"""Attribute value ranges (``Attr(min=, max=)``): checked when an op is built, when its
attribute is set, and by the verifier on a loaded program (issue 14)."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import FormatError, OpAttrError
from fluid_hw.ir import attrs as ir_attrs
from fluid_hw.ir.registry import Attr, OpDef, get_op
from fluid_hw.ir.serialization import program_from_bytes, program_to_bytes
from fluid_hw.ir.verifier import verify_program


def _conv_program():
    p = fluid.Program()
    b = p.global_block()
    b.create_var(name="x", shape=[1, 2, 5, 5], dtype="float32")
    b.create_parameter(name="w", shape=[3, 2, 3, 3], dtype="float32")
    b.create_var(name="y")
    b.append_op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "y"})
    return p


def _store(op, name, value):
    msg = next(a for a in op.desc.attrs if a.name == name)
    ir_attrs.write(msg, name, ir_attrs.KIND_OF_ENUM[msg.type], value)


@pytest.mark.parametrize(("attr", "value", "rng"), [
    ("strides", [0, 1], ">= 1"), ("dilations", [1, -3], ">= 1"),
    ("paddings", [-1, 0], ">= 0"), ("groups", 0, ">= 1")])
def test_loaded_program_with_out_of_range_attr_is_refused(attr, value, rng):
    # before: strides=0 loaded and ran into numpy's "slice step cannot be zero"
    p = _conv_program()
    _store(p.global_block().ops[0], attr, value)
    with pytest.raises(FormatError) as ei:
        program_from_bytes(program_to_bytes(p), "m.pdmodel")
    msg = str(ei.value)
    assert "conv2d" in msg and f"'{attr}' = {value!r}" in msg and f"must be {rng}" in msg
    # the executor verifies before running: the same message, not numpy's
    scope = fluid.Scope()
    scope.vars["w"] = np.ones((3, 2, 3, 3), np.float32)
    with pytest.raises(fluid.errors.ExecutionError, match=f"'{attr}' = "):
        fluid.Executor().run(p, feed={"x": np.ones((1, 2, 5, 5), np.float32)},
                             fetch_list=["y"], scope=scope)


def test_range_checked_when_building_and_setting():
    p = _conv_program()
    b = p.global_block()
    with pytest.raises(OpAttrError, match=r"op conv2d: attribute 'strides' = \[1, 0\].*>= 1"):
        b.append_op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "y"},
                    {"strides": [1, 0]})
    with pytest.raises(OpAttrError, match=r"op pool2d.*ksize must be >= 1"):
        b.append_op("pool2d", {"X": "x"}, {"Out": "y"}, {"ksize": [0, 2]})
    with pytest.raises(OpAttrError, match=r"epsilon must be in \[0, 0.001\]"):
        get_op("batch_norm").complete_attrs({"epsilon": 0.5})
    with pytest.raises(OpAttrError, match="groups must be >= 1"):
        b.ops[0].set_attr("groups", -2)
    verify_program(p)


def test_attr_range_declaration():
    a = Attr("n", "int", 1, min=1, max=4)
    assert a.range_error(4) is None and a.range_error(1) is None
    assert "n must be in [1, 4]" in a.range_error(5)
    assert "each element of n" in Attr("n", "ints", [1], min=1).range_error([1, 0])
    with pytest.raises(ValueError, match="numeric"):
        Attr("s", "string", "", min=0)
    d = OpDef("t", attrs=[Attr("k", "int", 2, min=1)])
    assert d.complete_attrs({}) == {"k": 2}


def test_loaded_pool_with_a_zero_window_is_refused():
    p = fluid.Program()
    b = p.global_block()
    b.create_var(name="x", shape=[1, 2, 4, 4], dtype="float32")
    b.create_var(name="y")
    b.append_op("pool2d", {"X": "x"}, {"Out": "y"}, {"ksize": [2, 2]})
    _store(b.ops[0], "ksize", [0, 2])
    with pytest.raises(FormatError, match=r"pool2d.*'ksize' = \[0, 2\].*>= 1"):
        program_from_bytes(program_to_bytes(p))
    _store(b.ops[0], "ksize", [-1, -1])  # what fluid's layer stores for global pooling
    b.ops[0].set_attr("global_pooling", True)
    program_from_bytes(program_to_bytes(p))
