"""Programs serialize to bytes and load back byte-identical."""

import numpy as np

import fluid_hw as fluid
from fluid_hw.ir import framework_pb2 as pb


def _mlp_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[8])
        h = fluid.layers.fc(x, size=5, act="relu")
        fluid.layers.fc(h, size=3, act="softmax")
    return main, startup


def test_roundtrip_is_byte_identical():
    main, startup = _mlp_program()
    for prog in (main, startup):
        b = prog.desc.SerializeToString()
        again = fluid.Program.parse_from_string(b)
        assert again.desc.SerializeToString() == b
        assert str(again) == str(prog)


def test_roundtrip_keeps_parameter_flags_and_sub_blocks():
    main, _ = _mlp_program()
    gb = main.global_block()
    sub = main._create_block()
    sub.create_var(name="inner", shape=[2], dtype="int64")
    main._rollback()
    gb.create_var(name="moment", shape=[3], persistable=True)
    gb.append_op("fill_constant", outputs={"Out": "moment"}, attrs={"shape": [3], "value": 1.0})
    loaded = fluid.Program.parse_from_string(main.serialize_to_string())
    lb = loaded.global_block()
    assert loaded.num_blocks == 2 and loaded.block(1).parent_idx == 0
    assert loaded.block(1).var("inner").dtype == pb.VarType.INT64
    params = {p.name for p in lb.all_parameters()}
    assert params == {p.name for p in gb.all_parameters()} and len(params) == 4
    assert lb.var("moment").persistable and not lb.var("moment").is_parameter
    assert isinstance(lb.var("fc_0.w_0"), fluid.Parameter)


def test_clone_for_test_sets_is_test_and_is_independent():
    main, _ = _mlp_program()
    c = main.clone()
    c.global_block().create_var(name="only_in_clone", shape=[1])
    assert not main.global_block().has_var("only_in_clone")
    assert c.global_block().ops[0].type == "mul"


def test_executor_runs_a_reloaded_program_like_the_original():
    main, startup = _mlp_program()
    exe = fluid.Executor(fluid.CPUPlace())
    x = np.random.default_rng(0).random((4, 8), dtype=np.float32)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        out_name = main.global_block().ops[-1].output("Out")[0]
        (a,) = exe.run(main, feed={"x": x}, fetch_list=[out_name])
        again = fluid.Program.parse_from_string(main.serialize_to_string())
        (b,) = exe.run(again, feed={"x": x}, fetch_list=[out_name])
    np.testing.assert_array_equal(a, b)


def test_print_lists_blocks_vars_and_ops():
    main, _ = _mlp_program()
    text = str(main)
    assert "block 0" in text and "mul(" in text and "fc_0.w_0" in text
    assert "persistable" in text
