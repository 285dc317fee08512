"""memory_reuse: the renames (Before / Expected), the report, what is never renamed."""

import numpy as np

import fluid_hw as fluid
from fluid_hw.passes import PassContext, get_pass, plan_memory
from tests.passes._util import Net, assert_structure, run


def _chain() -> Net:
    n = Net()
    n.data("x", [-1, 4])
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("sigmoid", {"X": "a"}, {"Out": "b"})
    n.op("tanh", {"X": "b"}, {"Out": "c"})
    n.op("scale", {"X": "c"}, {"Out": "d"}, {"scale": 2.0})
    n.op("relu", {"X": "d"}, {"Out": "y"})
    return n


def test_dead_temporaries_give_their_names_to_later_ones():
    ctx = PassContext(fetch_names=["y"])
    out, changed = get_pass("memory_reuse", batch_size=10).apply(_chain().program, ctx)
    e = Net()
    e.data("x", [-1, 4])
    e.op("relu", {"X": "x"}, {"Out": "a"})
    e.op("sigmoid", {"X": "a"}, {"Out": "b"})
    e.op("tanh", {"X": "b"}, {"Out": "a"})  # a died at sigmoid: c takes its buffer
    e.op("scale", {"X": "a"}, {"Out": "b"}, {"scale": 2.0})  # b died at tanh
    e.op("relu", {"X": "b"}, {"Out": "y"})
    assert changed
    assert_structure(out, e.program)
    plan = ctx.reports["memory_reuse"]
    assert plan.renames == {"c": "a", "d": "b"}
    row = 4 * 4 * 10  # float32 [10, 4]
    assert plan.peak_bytes_before == 6 * row and plan.peak_bytes_after == 4 * row
    assert "0.67x" in str(plan)


def test_the_executor_holds_fewer_buffers():
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    before = _chain().program
    after, _ = get_pass("memory_reuse").apply(before, PassContext(fetch_names=["y"]))
    for prog in (before, after):
        scope = fluid.Scope()
        fluid.Executor().run(prog, feed={"x": x}, fetch_list=["y"], scope=scope)
        held = [k for k, v in scope.vars.items() if isinstance(v, np.ndarray)]
        if prog is before:
            n_before, (want,) = len(held), run(prog, fluid.Scope(), {"x": x}, ["y"])
        else:
            assert len(held) == n_before - 2
            np.testing.assert_array_equal(run(prog, fluid.Scope(), {"x": x}, ["y"])[0], want)


def test_protected_names_are_never_shared():
    n = _chain()
    plan = plan_memory(n.program, PassContext(fetch_names=["y", "b"]))
    assert "b" not in plan.renames and "b" not in plan.renames.values()
    n2 = Net()
    n2.data("x", [-1, 4])
    n2.param("p", [2, 4])
    n2.op("relu", {"X": "x"}, {"Out": "a"})
    n2.op("sigmoid", {"X": "a"}, {"Out": "p"})  # persistable output
    n2.op("relu", {"X": "p"}, {"Out": "c"})
    n2.op("tanh", {"X": "c"}, {"Out": "y"})
    plan = plan_memory(n2.program, PassContext(fetch_names=["y"]))
    assert "p" not in plan.renames and "p" not in plan.renames.values()


def test_shapes_and_dtypes_must_match():
    n = Net()
    n.data("x", [-1, 4])
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("reshape2", {"X": "a"}, {"Out": "b", "XShape": "bs"}, {"shape": [-1, 2, 2]})
    n.op("reshape2", {"X": "b"}, {"Out": "c", "XShape": "cs"}, {"shape": [-1, 2, 2, 1]})
    n.op("reshape2", {"X": "c"}, {"Out": "y", "XShape": "ys"}, {"shape": [-1, 4]})
    plan = plan_memory(n.program, PassContext(fetch_names=["y"]))
    assert not {"b", "c"} & set(plan.renames)
