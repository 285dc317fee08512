"""reshape_transpose_cancel: Before / Expected."""

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure

CTX = PassContext(fetch_names=["y"])


def test_inverse_transposes_cancel():
    n = Net()
    n.data("x", [-1, 2, 3])
    n.op("transpose2", {"X": "x"}, {"Out": "a", "XShape": "as"}, {"axis": [0, 2, 1]})
    n.op("transpose2", {"X": "a"}, {"Out": "b", "XShape": "bs"}, {"axis": [0, 2, 1]})
    n.op("relu", {"X": "b"}, {"Out": "y"})
    out, changed = get_pass("reshape_transpose_cancel").apply(n.program, CTX)
    e = Net()
    e.data("x", [-1, 2, 3])
    e.op("relu", {"X": "x"}, {"Out": "y"})
    assert changed
    assert_structure(out, e.program)


def test_transposes_compose():
    n = Net()
    n.data("x", [-1, 2, 3, 4])
    n.op("transpose2", {"X": "x"}, {"Out": "a", "XShape": "as"}, {"axis": [0, 2, 3, 1]})
    n.op("transpose2", {"X": "a"}, {"Out": "y", "XShape": "ys"}, {"axis": [0, 2, 1, 3]})
    out, _ = get_pass("reshape_transpose_cancel").apply(n.program, CTX)
    e = Net()
    e.data("x", [-1, 2, 3, 4])
    e.op("transpose2", {"X": "x"}, {"Out": "y", "XShape": "ys"}, {"axis": [0, 3, 2, 1]})
    assert_structure(out, e.program)


def test_reshapes_merge_and_cancel():
    n = Net()
    n.data("x", [-1, 12])
    n.op("reshape2", {"X": "x"}, {"Out": "a", "XShape": "as"}, {"shape": [-1, 3, 4]})
    n.op("reshape2", {"X": "a"}, {"Out": "b", "XShape": "bs"}, {"shape": [0, 2, 6]})
    n.op("reshape2", {"X": "b"}, {"Out": "c", "XShape": "cs"}, {"shape": [-1, 12]})
    n.op("reshape2", {"X": "c"}, {"Out": "d", "XShape": "ds"}, {"shape": [-1, 12]})
    n.op("reshape2", {"X": "d"}, {"Out": "y", "XShape": "ys"}, {"shape": [-1, 6, 2]})
    out, _ = get_pass("reshape_transpose_cancel").apply(n.program, CTX)
    e = Net()
    e.data("x", [-1, 12])
    e.op("reshape2", {"X": "x"}, {"Out": "y", "XShape": "ys"}, {"shape": [-1, 6, 2]})
    assert_structure(out, e.program)


def test_a_middle_value_read_elsewhere_blocks_the_merge():
    n = Net()
    n.data("x", [-1, 2, 3])
    n.op("transpose2", {"X": "x"}, {"Out": "a", "XShape": "as"}, {"axis": [0, 2, 1]})
    n.op("transpose2", {"X": "a"}, {"Out": "b", "XShape": "bs"}, {"axis": [0, 2, 1]})
    n.op("relu", {"X": "a"}, {"Out": "r"})
    n.op("elementwise_add", {"X": "b", "Y": "x"}, {"Out": "y"})
    _out, changed = get_pass("reshape_transpose_cancel").apply(
        n.program, PassContext(fetch_names=["y", "r"]))
    assert not changed
