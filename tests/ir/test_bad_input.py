"""Bad programs and files give a FluidError that names the problem, never a traceback
from protobuf or numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors
from fluid_hw.ir import framework_pb2 as pb
from fluid_hw.ir import get_op


def _good_bytes() -> bytes:
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4])
        fluid.layers.fc(x, size=2)
    return main.desc.SerializeToString()


def _edit(fn) -> bytes:
    d = pb.ProgramDesc.FromString(_good_bytes())
    fn(d)
    return d.SerializeToString()


def _load_fails(data: bytes, *words: str) -> str:
    with pytest.raises(errors.FormatError) as ei:
        fluid.Program.parse_from_string(data, source="model.bin")
    msg = str(ei.value)
    assert "model.bin" in msg
    for w in words:
        assert w in msg, msg
    return msg


def test_every_error_derives_from_fluid_error():
    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    assert len(classes) >= 10
    for cls in classes:
        assert issubclass(cls, errors.FluidError)


def test_truncated_program():
    data = _good_bytes()
    _load_fails(data[: len(data) // 2])


def test_garbage_bytes():
    _load_fails(b"\xff\xfe this is not a protobuf \x00\x01" * 3)


def test_empty_file():
    _load_fails(b"", "empty")


def test_newer_version():
    _load_fails(_edit(lambda d: setattr(d.version, "version", 99)), "newer", "99")


def test_missing_version():
    _load_fails(_edit(lambda d: d.ClearField("version")), "version")


def test_op_names_missing_variable():
    def f(d):
        d.blocks[0].ops[0].inputs[0].arguments[0] = "no_such_var"

    _load_fails(_edit(f), "no_such_var", "mul")


def test_sub_block_index_out_of_range():
    def f(d):
        a = d.blocks[0].ops[0].attrs.add()
        a.name = "sub_block"
        a.type = pb.AttrType.BLOCK
        a.block_idx = 7

    _load_fails(_edit(f), "block 7", "out of range")


def test_parent_idx_cycle():
    def f(d):
        for i in (1, 2):
            b = d.blocks.add()
            b.idx = i
        d.blocks[1].parent_idx = 2
        d.blocks[2].parent_idx = 1

    _load_fails(_edit(f), "cycle")


def test_negative_dimension():
    def f(d):
        d.blocks[0].vars[0].type.lod_tensor.tensor.dims[1] = -5

    _load_fails(_edit(f), "-5")


def test_absurd_dimensions():
    def f(d):
        dims = d.blocks[0].vars[1].type.lod_tensor.tensor.dims
        dims[0] = 1 << 30
        dims[1] = 1 << 30

    _load_fails(_edit(f), "beyond any memory")


def test_unknown_dtype_enum():
    # an enum number the schema does not know: proto2 drops it, leaving a required
    # field unset; the loader must still say what is wrong
    def f(d):
        d.blocks[0].vars[0].type.lod_tensor.tensor.data_type = pb.VarType.LOD_TENSOR

    _load_fails(_edit(f), "dtype")


def test_unknown_op_type():
    def f(d):
        d.blocks[0].ops[0].type = "matmull"

    _load_fails(_edit(f), "matmull")


def test_duplicate_variable():
    def f(d):
        d.blocks[0].vars.add().CopyFrom(d.blocks[0].vars[0])

    _load_fails(_edit(f), "declared twice")


def test_attr_of_wrong_type():
    def f(d):
        for a in d.blocks[0].ops[0].attrs:
            if a.name == "x_num_col_dims":
                a.type = pb.AttrType.STRING
                a.s = "one"

    _load_fails(_edit(f), "x_num_col_dims")


def test_misspelled_op_lists_known_ops():
    with pytest.raises(errors.UnknownOpError) as ei:
        get_op("matmull")
    msg = str(ei.value)
    assert "matmull" in msg and "Known:" in msg and "Did you mean" in msg and "mul" in msg


def test_unknown_attribute_at_build_time():
    p = fluid.Program()
    b = p.global_block()
    b.create_var(name="x", shape=[2])
    b.create_var(name="y")
    with pytest.raises(errors.OpAttrError, match="alpah"):
        b.append_op("leaky_relu", {"X": "x"}, {"Out": "y"}, {"alpah": 0.1})


def test_wrong_attribute_type_at_build_time():
    p = fluid.Program()
    b = p.global_block()
    b.create_var(name="x", shape=[2, 3])
    b.create_var(name="y")
    with pytest.raises(errors.OpAttrError, match="axis"):
        b.append_op("softmax", {"X": "x"}, {"Out": "y"}, {"axis": "last"})


def test_shape_mismatch_names_layer_and_shapes():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4])
        w = main.global_block().create_parameter("w", [5, 3])
        out = main.global_block().create_var(name="o")
        with pytest.raises(errors.ShapeError) as ei:
            main.global_block().append_op("mul", {"X": x, "Y": w}, {"Out": out})
    msg = str(ei.value)
    assert "mul" in msg and "[-1, 4]" in msg and "[5, 3]" in msg


@pytest.mark.parametrize(
    "feed, words",
    [
        ({"x": np.zeros((2, 4), np.bool_)}, ["bool", "float32", "astype"]),
        ({"x": np.zeros((2, 5), np.float32)}, ["[2, 5]", "[-1, 4]"]),
        ({"nope": np.zeros((2, 4), np.float32)}, ["nope", "not a variable"]),
    ],
)
def test_bad_feed(feed, words):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4])
        y = fluid.layers.fc(x, size=2)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(errors.FeedError) as ei:
            exe.run(main, feed=feed, fetch_list=[y])
    for w in words:
        assert w in str(ei.value)


def test_unknown_fetch_target():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.data(name="x", shape=[4])
    with pytest.raises(errors.FetchError, match="ghost"):
        fluid.Executor().run(main, feed={}, fetch_list=["ghost"])
