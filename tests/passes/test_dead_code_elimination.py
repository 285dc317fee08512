"""dead_code_elimination: Before / Expected."""

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure


def _before() -> Net:
    n = Net()
    n.data("x", [-1, 4])
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("sigmoid", {"X": "x"}, {"Out": "dead"})
    n.op("tanh", {"X": "dead"}, {"Out": "dead2"})
    n.op("scale", {"X": "a"}, {"Out": "y"}, {"scale": 2.0})
    n.block.create_var(name="never_used", shape=[3])
    return n


def test_dead_ops_and_vars_go():
    out, changed = get_pass("dead_code_elimination").apply(
        _before().program, PassContext(fetch_names=["y"]))
    e = Net()
    e.data("x", [-1, 4])
    e.op("relu", {"X": "x"}, {"Out": "a"})
    e.op("scale", {"X": "a"}, {"Out": "y"}, {"scale": 2.0})
    assert changed
    assert_structure(out, e.program)
    assert set(out.global_block().vars) == {"x", "a", "y"}


def test_unknown_targets_keep_every_leaf():
    out, changed = get_pass("dead_code_elimination").apply(_before().program)
    assert changed  # only the unused declaration goes
    assert [op.type for op in out.global_block().ops] == ["relu", "sigmoid", "tanh", "scale"]
    assert not out.global_block().has_var("never_used")


def test_ops_changing_persistable_state_stay():
    n = Net()
    n.data("x", [2, 4])
    n.param("state", [2, 4])
    n.op("assign", {"X": "x"}, {"Out": "state"})
    n.op("relu", {"X": "x"}, {"Out": "y"})
    out, _ = get_pass("dead_code_elimination").apply(n.program, PassContext(fetch_names=["y"]))
    assert [op.type for op in out.global_block().ops] == ["assign", "relu"]
