"""remove_identity: Before / Expected."""

import numpy as np

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure


def test_assign_chains_and_unit_scales_go():
    n = Net()
    n.data("x", [-1, 4])
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("assign", {"X": "a"}, {"Out": "b"})
    n.op("assign", {"X": "b"}, {"Out": "c"})
    n.op("scale", {"X": "c"}, {"Out": "d"}, {"scale": 1.0, "bias": 0.0})
    n.op("cast", {"X": "d"}, {"Out": "e"}, {"in_dtype": 5, "out_dtype": 5})
    n.op("transpose2", {"X": "e"}, {"Out": "f", "XShape": "fs"}, {"axis": [0, 1]})
    n.op("sigmoid", {"X": "f"}, {"Out": "y"})
    out, changed = get_pass("remove_identity").apply(n.program, PassContext(fetch_names=["y"]))
    e = Net()
    e.data("x", [-1, 4])
    e.op("relu", {"X": "x"}, {"Out": "a"})
    e.op("sigmoid", {"X": "a"}, {"Out": "y"})
    assert changed
    assert_structure(out, e.program)
    assert set(out.global_block().vars) == {"x", "a", "y"}


def test_test_mode_dropout():
    n = Net()
    n.data("x", [-1, 4])
    n.op("dropout", {"X": "x"}, {"Out": "a", "Mask": "m1"},
         {"is_test": True, "dropout_prob": 0.25, "dropout_implementation": "upscale_in_train"})
    n.op("dropout", {"X": "a"}, {"Out": "y", "Mask": "m2"},
         {"is_test": True, "dropout_prob": 0.25})
    out, _ = get_pass("remove_identity").apply(n.program, PassContext(fetch_names=["y"]))
    e = Net()
    e.data("x", [-1, 4])
    e.op("scale", {"X": "x"}, {"Out": "y"}, {"scale": 0.75, "bias": 0.0})
    assert_structure(out, e.program)


def test_identities_producing_outputs_or_scaling_stay():
    n = Net()
    n.data("x", [-1, 4])
    n.op("assign", {"X": "x"}, {"Out": "y"})  # y is fetched: its producer stays
    n.op("scale", {"X": "y"}, {"Out": "z"}, {"scale": 1.0, "bias": 0.5})
    n.op("dropout", {"X": "z"}, {"Out": "w", "Mask": "m"}, {"dropout_prob": 0.5})  # training
    out, changed = get_pass("remove_identity").apply(
        n.program, PassContext(fetch_names=["y", "w"]))
    assert not changed
    assert [op.type for op in out.global_block().ops] == ["assign", "scale", "dropout"]


def test_input_rewritten_later_blocks_removal():
    n = Net()
    n.data("x", [-1, 4])
    n.param("p", [4], np.zeros(4))
    n.op("relu", {"X": "x"}, {"Out": "a"})
    n.op("assign", {"X": "a"}, {"Out": "b"})
    n.op("sigmoid", {"X": "x"}, {"Out": "a"})  # a written again: b must keep the old a
    n.op("elementwise_add", {"X": "a", "Y": "b"}, {"Out": "y"})
    _out, changed = get_pass("remove_identity").apply(n.program, PassContext(fetch_names=["y"]))
    assert not changed
