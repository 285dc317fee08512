"""Nested-block programs are ordinary programs: verified, serialised and loaded back
identical, with structural errors naming the block and the variable."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, layers
from fluid_hw.frontend.backward import append_backward
from fluid_hw.ir import framework_pb2 as pb
from fluid_hw.ir.verifier import verify_program


def _nested_program():
    """DynamicRNN whose step holds an IfElse, plus its backward: blocks inside blocks
    and gradient blocks."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[3], lod_level=1)
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x)
            prev = drnn.memory(shape=[3])
            h = layers.fc([word, prev], size=3, act="tanh")
            cond = layers.less_than(layers.reduce_sum(h, dim=[1], keep_dim=True),
                                    layers.fill_constant([1], "float32", 0.0))
            ie = layers.IfElse(cond)
            with ie.true_block():
                ie.output(layers.scale(ie.input(h), -1.0))
            with ie.false_block():
                ie.output(ie.input(h))
            (hh,) = ie()
            drnn.update_memory(prev, hh)
            drnn.output(hh)
        loss = layers.mean(layers.sequence_pool(drnn(), "last"))
        append_backward(loss)
    return main, startup, loss


def test_nested_program_verifies_and_round_trips():
    main, startup, loss = _nested_program()
    verify_program(main)
    parents = [b.parent_idx for b in main.blocks]
    assert parents[:2] == [-1, 0] and main.num_blocks >= 7  # rnn, 2 branches, 3 grads
    grad_blocks = [b for b in main.blocks if b.forward_block_idx != -1]
    assert grad_blocks and all(0 < b.forward_block_idx < main.num_blocks for b in grad_blocks)
    data = main.serialize_to_string()
    loaded = fluid.Program.parse_from_string(data)
    assert loaded.serialize_to_string() == data
    assert str(loaded) == str(main)
    t = fluid.create_lod_tensor(np.random.default_rng(0).random((9, 3), np.float32),
                                [[4, 2, 3]])
    results = []
    for prog in (main, loaded):
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe = fluid.Executor()
            exe.run(startup)
            results.append(exe.run(prog, feed={"x": t},
                                   fetch_list=[loss.name, "fc_0.w_0@GRAD", "fc_0.b_0@GRAD"]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def _mutated(mutate):
    main, _, _ = _nested_program()
    desc = pb.ProgramDesc.FromString(main.desc.SerializeToString())
    mutate(desc)
    return desc.SerializeToString()


def _sub_block_op(desc):
    for op in desc.blocks[0].ops:
        if op.type == "while":
            return op
    raise AssertionError("no while op")


def test_sub_block_index_out_of_range_is_a_load_error():
    def mutate(desc):
        for a in _sub_block_op(desc).attrs:
            if a.name == "sub_block":
                a.block_idx = 99
    with pytest.raises(errors.FormatError, match=r"block 0, op #\d+ \(while\).*block 99"):
        fluid.Program.parse_from_string(_mutated(mutate))


def test_cycle_in_parent_indices_is_a_load_error():
    def mutate(desc):
        desc.blocks[1].parent_idx = 2
        desc.blocks[2].parent_idx = 1
    with pytest.raises(errors.FormatError, match="cycle in parent_idx"):
        fluid.Program.parse_from_string(_mutated(mutate))


def test_undefined_variable_in_a_sub_block_is_a_load_error():
    def mutate(desc):
        op = desc.blocks[1].ops[0]
        op.inputs[0].arguments[0] = "no_such_var"
    with pytest.raises(errors.FormatError, match=r"block 1, op #0.*'no_such_var'.*block 1"):
        fluid.Program.parse_from_string(_mutated(mutate))


def test_sub_block_must_be_a_child_of_the_ops_block():
    def mutate(desc):
        for a in _sub_block_op(desc).attrs:
            if a.name == "sub_block":
                a.block_idx = 2  # a branch block of the RNN body, not a child of block 0
    with pytest.raises(errors.FormatError, match="whose parent is block 1"):
        fluid.Program.parse_from_string(_mutated(mutate))


def test_sub_block_reads_ancestors_but_not_siblings():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        outer = layers.fill_constant([1], "float32", 1.0)
        flag = layers.fill_constant([1], "bool", 1.0)
        with layers.ConditionalBlock([flag], is_scalar_condition=True).block():
            inner = layers.scale(outer, 2.0)  # an ancestor's variable: fine
        verify_program(main)
        with layers.ConditionalBlock([flag], is_scalar_condition=True).block(), \
                pytest.raises(errors.FluidError, match=f"{inner.name}.*block 2"):
            layers.scale(inner, 3.0)  # a sibling block's variable
