"""fc_fuse: Before / Expected."""

import pytest

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure


def _mul_add(n: Net, act: str | None) -> None:
    n.data("x", [-1, 2, 3])
    n.param("w", [6, 4])
    n.param("b", [4])
    n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t0"})
    n.op("elementwise_add", {"X": "t0", "Y": "b"}, {"Out": "t1"}, {"axis": 1})
    if act:
        n.op(act, {"X": "t1"}, {"Out": "y"})


@pytest.mark.parametrize("act", ["relu", "tanh", None])
def test_mul_add_act_become_fc(act):
    n = Net()
    _mul_add(n, act)
    out_name = "y" if act else "t1"
    out, changed = get_pass("fc_fuse").apply(n.program, PassContext(fetch_names=[out_name]))
    e = Net()
    e.data("x", [-1, 2, 3])
    e.param("w", [6, 4])
    e.param("b", [4])
    e.op("fc", {"Input": "x", "W": "w", "Bias": "b"}, {"Out": out_name},
         {"in_num_col_dims": 1, "activation_type": act or ""})
    assert changed
    assert_structure(out, e.program)
    assert set(out.global_block().vars) == {"x", "w", "b", out_name}


def test_a_pre_activation_someone_reads_keeps_the_activation_apart():
    n = Net()
    _mul_add(n, "relu")
    n.op("sigmoid", {"X": "t1"}, {"Out": "z"})
    out, _ = get_pass("fc_fuse").apply(n.program, PassContext(fetch_names=["y", "z"]))
    assert [op.type for op in out.global_block().ops] == ["fc", "relu", "sigmoid"]
    assert out.global_block().ops[0].output("Out") == ["t1"]


def test_a_fetched_product_is_not_fused():
    n = Net()
    _mul_add(n, None)
    _out, changed = get_pass("fc_fuse").apply(n.program, PassContext(fetch_names=["t0", "t1"]))
    assert not changed


def test_a_bias_of_the_wrong_shape_is_not_fused():
    n = Net()
    n.data("x", [-1, 4])
    n.param("w", [4, 4])
    n.param("b", [4, 4])
    n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t0"})
    n.op("elementwise_add", {"X": "t0", "Y": "b"}, {"Out": "y"})
    _, changed = get_pass("fc_fuse").apply(n.program, PassContext(fetch_names=["y"]))
    assert not changed
