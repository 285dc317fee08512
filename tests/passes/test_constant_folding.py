"""constant_folding: Before / Expected."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.passes import PassContext, PassError, get_pass
from tests.passes._util import Net, assert_structure, run

FP32 = 5


def _before() -> Net:
    n = Net()
    n.data("x", [-1, 4])
    n.op("fill_constant", {}, {"Out": "c0"}, {"shape": [4], "dtype": FP32, "value": 2.0})
    n.op("scale", {"X": "c0"}, {"Out": "c1"}, {"scale": 3.0, "bias": 1.0})
    n.op("elementwise_mul", {"X": "c1", "Y": "c0"}, {"Out": "c2"})
    n.op("elementwise_add", {"X": "x", "Y": "c2"}, {"Out": "y"})
    return n


def test_constant_chain_becomes_one_assign_value():
    ctx = PassContext(executor=fluid.Executor(), fetch_names=["y"])
    out, changed = get_pass("constant_folding").apply(_before().program, ctx)
    e = Net()
    e.data("x", [-1, 4])
    e.op("assign_value", {}, {"Out": "c2"},
         {"shape": [4], "dtype": FP32, "fp32_values": [14.0] * 4})
    e.op("elementwise_add", {"X": "x", "Y": "c2"}, {"Out": "y"})
    assert changed
    assert_structure(out, e.program)
    assert not out.global_block().has_var("c0") and not out.global_block().has_var("c1")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (y,) = run(out, fluid.Scope(), {"x": x}, ["y"])
    np.testing.assert_array_equal(y, x + 14.0)


def test_large_constants_go_to_a_persistable_in_the_scope():
    scope = fluid.Scope()
    ctx = PassContext(executor=fluid.Executor(), scope=scope, fetch_names=["y"])
    out, _ = get_pass("constant_folding", max_inline=2).apply(_before().program, ctx)
    ops = [op.type for op in out.global_block().ops]
    assert ops == ["assign", "elementwise_add"]
    held = out.global_block().ops[0].input("X")[0]
    assert out.global_block().var(held).persistable
    np.testing.assert_array_equal(scope.vars[held], np.full(4, 14.0, np.float32))


def test_parameters_and_random_ops_are_not_constants():
    n = Net()
    n.data("x", [-1, 4])
    n.param("w", [4])
    n.op("scale", {"X": "w"}, {"Out": "w2"}, {"scale": 2.0})
    n.op("uniform_random", {}, {"Out": "r"}, {"shape": [4], "dtype": FP32, "seed": 3})
    n.op("scale", {"X": "r"}, {"Out": "r2"}, {"scale": 2.0})
    n.op("elementwise_add", {"X": "x", "Y": "w2"}, {"Out": "a"})
    n.op("elementwise_add", {"X": "a", "Y": "r2"}, {"Out": "y"})
    ctx = PassContext(executor=fluid.Executor(), fetch_names=["y"])
    _out, changed = get_pass("constant_folding").apply(n.program, ctx)
    assert not changed


def test_constant_folding_needs_an_executor():
    with pytest.raises(PassError, match=r"needs an executor.*fluid_hw\.Executor"):
        get_pass("constant_folding").apply(_before().program)
