"""The pass registry and manager: lookup by name, verification after every pass,
fixpoint groups, IR dumps, stop_after; and passes on programs with sub-blocks."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu import kernels as cpu_kernels
from fluid_hw.errors import UnknownNameError
from fluid_hw.ir import registry
from fluid_hw.ir.grad import NoGrad
from fluid_hw.ir.registry import Attr, OpDef, Slot
from fluid_hw.passes import (
    Pass,
    PassContext,
    PassError,
    PassManager,
    all_passes,
    fixpoint,
    get_pass,
    inference_pipeline,
    register_pass,
)
from fluid_hw.passes.base import unregister_pass
from tests.passes._util import Net, digits, run

EXPECTED = {"prune", "dead_code_elimination", "constant_folding", "remove_identity",
            "reshape_transpose_cancel", "fc_fuse", "conv_bn_fuse",
            "conv_elementwise_add_act_fuse", "fuse_elewise_act", "memory_reuse"}


def test_registry_knows_every_pass():
    assert set(all_passes()) >= EXPECTED
    for name in EXPECTED:
        p = get_pass(name)
        assert p.name == name and not p.handles_sub_blocks


def test_misspelled_pass_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as e:
        get_pass("fc_fusion")
    msg = str(e.value)
    assert "Did you mean fc_fuse" in msg and "memory_reuse" in msg


@pytest.fixture
def temp_pass():
    made: list[str] = []

    def make(name, fn):
        cls = type(name, (Pass,), {"name": name, "run": lambda self, p, ctx: fn(p)})
        register_pass(cls)
        made.append(name)
        return name

    yield make
    for n in made:
        unregister_pass(n)


def test_manager_verifies_after_every_pass(temp_pass):
    def break_it(p):  # removes a variable an op still reads
        p.global_block()._remove_var("a")
        return True

    bad = temp_pass("_test_breaks_program", break_it)
    n = Net()
    n.data("x", [-1, 4])
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("relu", {"X": "a"}, {"Out": "y"})
    with pytest.raises(PassError, match=r"after pass '_test_breaks_program' is invalid.*'a'"):
        PassManager(["remove_identity", bad]).run(n.program, PassContext(fetch_names=["y"]))
    PassManager([bad], verify=False).run(n.program)  # verification can be switched off


def test_fixpoint_iterates_until_nothing_changes(temp_pass):
    calls = []

    def count(p):
        calls.append(1)
        return len(calls) < 3

    name = temp_pass("_test_changes_twice", count)
    pm = PassManager([fixpoint(name, "dead_code_elimination")])
    pm.run(Net().program)
    assert len(calls) == 3
    assert [r.round for r in pm.records if r.name == name] == [1, 2, 3]
    forever = temp_pass("_test_always_changes", lambda p: True)
    with pytest.raises(PassError, match="still change the program after 4 rounds"):
        PassManager([fixpoint(forever, max_rounds=4)]).run(Net().program)


def test_dump_ir_after_each_pass(tmp_path, monkeypatch):
    b = digits("mlp")
    monkeypatch.setenv("FLUID_HW_DUMP_IR", str(tmp_path))
    inference_pipeline().run(b.program, b.ctx())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[0] == "00_input.pb" and files[1] == "00_input.txt"
    assert any(f.endswith("_fc_fuse.txt") for f in files)
    last = sorted(tmp_path.glob("*.pb"))[-1]
    loaded = fluid.io.load_program(last)
    assert [op.type for op in loaded.global_block().ops] == ["fc", "fc", "fc", "softmax"]


def test_stop_after_a_named_pass():
    b = digits("cnn")
    pm = inference_pipeline(stop_after="conv_bn_fuse")
    out = pm.run(b.program, b.ctx())
    assert pm.records[-1].name == "conv_bn_fuse"
    types = [op.type for op in out.global_block().ops]
    assert "batch_norm" not in types and "mul" in types  # fc_fuse did not run
    with pytest.raises(PassError, match="not a pass of this pipeline"):
        inference_pipeline(stop_after="nope")


def test_missing_requirements_are_reported_before_anything_runs():
    with pytest.raises(PassError, match="'conv_bn_fuse' needs a scope"):
        inference_pipeline().run(digits("cnn").program,
                                 PassContext(executor=fluid.Executor(), fetch_names=["x"]))


# -- sub-blocks -------------------------------------------------------------------------------

SUB_OP = "_test_run_sub_block"


@pytest.fixture
def sub_block_op():
    """A test-only op that runs its sub-block in the current scope (the shape of every
    control-flow op: outer reads in X, outer writes in Out, the body in sub_block)."""
    registry.register_op(OpDef(
        SUB_OP, (Slot("X", duplicable=True),), (Slot("Out", duplicable=True),),
        (Attr("sub_block", "block"),), infer=None, grad=NoGrad("io")))

    def kernel(ctx):
        ctx.executor.run_block(ctx.op.block.program.block(ctx.attrs["sub_block"]), ctx.scope)

    cpu_kernels.register_kernel(SUB_OP)(kernel)
    yield SUB_OP
    del registry._REGISTRY[SUB_OP]
    del cpu_kernels._KERNELS[SUB_OP]


def _program_with_sub_block() -> Net:
    """x -> fc -> h1 (read by the body) ; body: s = scale(h1); y = assign(s); softmax(y)."""
    n = Net()
    n.data("x", [-1, 4])
    n.param("w", [4, 4])
    n.param("b", [4])
    n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t0"})
    n.op("elementwise_add", {"X": "t0", "Y": "b"}, {"Out": "t1"}, {"axis": 1})
    n.op("relu", {"X": "t1"}, {"Out": "h1"})
    n.op("relu", {"X": "h1"}, {"Out": "h2"})  # same shape as y: a memory_reuse candidate
    n.block.create_var(name="y", shape=[-1, 4])
    prog = n.program
    sub = prog._create_block(0)
    sub.create_var(name="s", shape=[-1, 4])
    sub.append_op("scale", {"X": "h1"}, {"Out": "s"}, {"scale": 2.0})
    sub.append_op("assign", {"X": "s"}, {"Out": "y"})
    prog._rollback()
    n.block.append_op(SUB_OP, {"X": ["h1"]}, {"Out": ["y"]}, {"sub_block": sub.idx},
                      infer_shape=False)
    n.op("elementwise_add", {"X": "y", "Y": "h2"}, {"Out": "z"})
    n.op("softmax", {"X": "z"}, {"Out": "prob"})
    return n


def test_no_pass_corrupts_a_program_with_a_sub_block(sub_block_op):
    n = _program_with_sub_block()
    scope = n.scope()
    feed = {"x": np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)}
    (want,) = run(n.program, scope, feed, ["prob"])
    body = n.program.block(1).desc.SerializeToString()
    ctx = PassContext(scope=scope, executor=fluid.Executor(), feed_names=["x"],
                      fetch_names=["prob"])
    for name in sorted(all_passes()):
        out, _ = get_pass(name).apply(n.program, ctx)
        assert out.block(1).desc.SerializeToString() == body, name
        assert SUB_OP in [op.type for op in out.global_block().ops], name
        np.testing.assert_allclose(run(out, scope, feed, ["prob"])[0], want, rtol=1e-6,
                                   err_msg=name)
    pm = inference_pipeline(memory_reuse=True)
    out = pm.run(n.program, ctx)
    assert out.block(1).desc.SerializeToString() == body
    assert [op.type for op in out.global_block().ops][:2] == ["fc", "relu"]
    assert out.global_block().has_var("h1") and out.global_block().has_var("y")
    assert any("sub-block" in r.note for r in pm.records)
    np.testing.assert_allclose(run(out, scope, feed, ["prob"])[0], want, rtol=1e-6)
