"""Fluid's core desc methods on program.desc (fluid_hw.ir.desc_api): reading a
program through them, and changing it through them then _sync_with_cpp."""

import numpy as np
import pytest

import fluid_hw as fluid


def test_read_program_through_the_desc(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.fc(x, size=2)
    desc = main.desc
    assert desc.num_blocks() == 1
    block = desc.block(0)
    assert (block.id, block.parent) == (0, -1)
    assert block.op_size() == len(main.global_block().ops)
    mul = block.op(0)
    assert mul.type == "mul" and mul.input("X") == ["x"] and mul.input_names() == ["X", "Y"]
    assert mul.attr("x_num_col_dims") == 1 and mul.has_attr("y_num_col_dims")
    assert y.name in block.op(1).output_arg_names()
    assert block.var("x").shape() == [-1, 3] and block.has_var("x")
    assert block.find_var("nope") is None
    assert fluid.Program.parse_from_string(desc.serialize_to_string()).num_blocks == 1
    with pytest.raises(IndexError, match="1 block"):
        desc.block(1)


def test_change_program_through_the_desc(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.scale(x, scale=2.0)
    block = main.desc.block(0)
    out = block.var("z")
    out.set_shape([-1, 3])
    out.set_dtype("float32")
    op = block.append_op()
    op.set_type("scale")
    op.set_input("X", [y.name])
    op.set_output("Out", ["z"])
    op.set_attr("scale", 3.0)
    op.set_attr("bias", 0.0)
    main._sync_with_cpp()
    assert main.global_block().ops[-1].type == "scale"
    with fluid.scope_guard(fluid.Scope()):
        (z,) = fluid.Executor().run(main, feed={"x": np.ones((2, 3), np.float32)},
                                    fetch_list=["z"])
    np.testing.assert_allclose(z, 6.0)
    first = block._prepend_op()
    first.set_type("scale")
    assert block.op(0).type == "scale" and block.op_size() == 3
    block._remove_op(0, 1)
    assert block.op_size() == 2
    sub = main.desc.append_block(block)
    main._sync_with_cpp()
    assert sub.parent == 0 and main.num_blocks == 2 and main.block(1).parent_idx == 0
