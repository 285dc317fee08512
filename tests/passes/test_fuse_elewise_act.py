"""fuse_elewise_act: Before / Expected."""

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure

CTX = PassContext(fetch_names=["y"])


def _fused(x: str, y: str, functors: list[str], **attrs) -> Net:
    e = Net()
    e.data("x", [-1, 4])
    e.data("z", [-1, 4])
    e.op("fused_elemwise_activation", {"X": x, "Y": y}, {"Out": "y"},
         {"functor_list": functors, **attrs})
    return e


def _net() -> Net:
    n = Net()
    n.data("x", [-1, 4])
    n.data("z", [-1, 4])
    return n


def test_binary_then_activation():
    n = _net()
    n.op("elementwise_add", {"X": "x", "Y": "z"}, {"Out": "t"})
    n.op("relu", {"X": "t"}, {"Out": "y"})
    out, changed = get_pass("fuse_elewise_act").apply(n.program, CTX)
    assert changed
    assert_structure(out, _fused("x", "z", ["relu", "elementwise_add"]).program)


def test_activation_into_a_binary():
    n = _net()
    n.op("scale", {"X": "z"}, {"Out": "u"}, {"scale": 0.5})
    n.op("elementwise_sub", {"X": "x", "Y": "u"}, {"Out": "y"})
    out, _ = get_pass("fuse_elewise_act").apply(n.program, CTX)
    assert_structure(out, _fused("x", "z", ["elementwise_sub", "scale"], scale=0.5).program)


def test_commutative_binaries_swap_their_operands():
    n = _net()
    n.op("tanh", {"X": "z"}, {"Out": "u"})
    n.op("elementwise_mul", {"X": "u", "Y": "x"}, {"Out": "y"})
    out, _ = get_pass("fuse_elewise_act").apply(n.program, CTX)
    assert_structure(out, _fused("x", "z", ["elementwise_mul", "tanh"]).program)


def test_not_fused():
    n = _net()
    n.op("tanh", {"X": "z"}, {"Out": "u"})
    n.op("elementwise_sub", {"X": "u", "Y": "x"}, {"Out": "y"})  # not commutative
    n.op("scale", {"X": "y"}, {"Out": "s"}, {"scale": 2.0, "bias": 1.0})  # has a bias
    n.op("elementwise_add", {"X": "s", "Y": "x"}, {"Out": "w"})
    _, changed = get_pass("fuse_elewise_act").apply(
        n.program, PassContext(fetch_names=["w", "y"]))
    assert not changed
