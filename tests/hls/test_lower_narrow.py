"""Narrow precision on the FPGA path (docs/fixed_point.md): programs quantised to 1-8-bit
weights and activations lower with their values carried in int8 lanes, each stage's
requantiser clamping to the program's own rails (unsigned, narrow signed, bipolar), or
comparing against a multi_threshold's thresholds, and the stage models equal the golden
model stage by stage; int8 designs keep their structure."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.hls.partition import LoweringError
from fluid_hw.passes import QuantConfig
from fluid_hw.passes.precision import Precision
from fluid_hw.rtl import Clamp
from tests.hls.test_lower import _lower, _quantize, check_stages
from tests.passes._util import digits

PRECISIONS = {
    "w4a4": Precision(w=4, a=4),
    "w2a2": Precision(w=2, a=2),
    "w1a1": Precision(w=1, a=1),
    "w3a5-signed": Precision(w=3, a=5, a_type="signed"),
}


def _narrow(kind, prec, **kw):
    b = digits(kind)
    feed = {"pixels": b.feed["pixels"]}
    q = _quantize(b.program, b.scope, feed, b.fetch, QuantConfig(precision=prec, **kw))
    return b, q, feed


@pytest.mark.parametrize("name", list(PRECISIONS))
def test_narrow_mlp_lowers_with_its_own_rails(name):
    b, q, feed = _narrow("mlp", PRECISIONS[name])
    low = _lower(q, b.scope, feed, b.fetch)
    check_stages(low, q, b.scope, feed)
    fmts = [s.out_format for s in low.stages]
    clamps = [spec.clamp for spec in low.specs]
    assert fmts[-1].bits == 8 and clamps[-1] is None  # the last layer stays int8
    if name == "w1a1":
        assert [f.kind for f in fmts[:2]] == ["bipolar", "bipolar"]
        assert clamps[:2] == [Clamp(-1, 1, True)] * 2
    elif name == "w3a5-signed":  # relu'd 5-bit: unsigned [0, 31]
        assert [(f.bits, f.kind, f.lo, f.hi) for f in fmts[:2]] == [(5, "unsigned", 0, 31)] * 2
    else:
        a = PRECISIONS[name].a
        assert [(f.lo, f.hi) for f in fmts[:2]] == [(0, 2**a - 1)] * 2
        assert clamps[:2] == [Clamp(0, 2**a - 1)] * 2
    d = low.stages[0].describe()["out_format"]
    assert set(d) == {"bits", "kind", "lo", "hi", "scale"}


def test_narrow_cnn_lowers_stage_by_stage():
    b, q, feed = _narrow("cnn", Precision(w=4, a=3))
    low = _lower(q, b.scope, feed, b.fetch)
    check_stages(low, q, b.scope, feed)
    assert [s.kind for s in low.stages][:2] == ["conv", "maxpool"]
    assert low.specs[0].clamp == Clamp(0, 7)


def test_int8_designs_carry_no_clamp():
    b, q, feed = _narrow("mlp", Precision())
    low = _lower(q, b.scope, feed, b.fetch)
    assert all(spec.clamp is None for spec in low.specs)
    assert all("clamp" not in spec.structure() for spec in low.specs)
    assert [s.out_format.kind for s in low.stages] == ["signed"] * 3


def test_an_int32_stage_records_its_per_channel_scales():
    p = fluid.Program()
    gb = p.global_block()
    gb.create_var(name="x", shape=[-1, 8], dtype="float32")
    gb.create_var(name="xq", shape=[-1, 8], dtype="int8")
    gb.create_var(name="w", shape=[8, 3], dtype="int8", persistable=True)
    gb.create_var(name="acc", shape=[-1, 3], dtype="int32")
    gb.create_var(name="y", shape=[-1, 3], dtype="float32")
    gb.append_op("quantize", {"X": ["x"]}, {"Out": ["xq"]}, {"scale": 0.5, "bits": 4})
    gb.append_op("quantized_fc", {"X": ["xq"], "W": ["w"]}, {"Out": ["acc"]},
                 {"in_scale": 0.5, "weight_scale": [0.25, 0.5, 1.0], "weight_bits": 2})
    gb.append_op("dequantize", {"X": ["acc"]}, {"Out": ["y"]}, {"scale": 0.125})
    scope = fluid.Scope()
    scope.vars["w"] = np.random.default_rng(0).integers(-1, 2, (8, 3)).astype(np.int8)
    feed = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32) * 4}
    low = _lower(p, scope, feed, ["y"])
    (s,) = low.stages
    assert (s.in_format.bits, s.in_format.lo, s.in_format.hi) == (4, -8, 7)
    assert s.out_format.bits == 32 and s.out_format.scale == (0.125, 0.25, 0.5)
    assert s.describe()["out_format"]["scale"] == [0.125, 0.25, 0.5]
    check_stages(low, p, scope, feed)


@pytest.mark.parametrize(("kind", "prec"), [("mlp", Precision(w=4, a=4)),
                                           ("mlp", Precision(w=1, a=1)),
                                           ("cnn", Precision(w=4, a=3))])
def test_thresholds_lower_as_comparators(kind, prec):
    """multi_threshold after a layer: the stage compares against its thresholds (a
    parameter memory per lane) instead of requantising; same values as the golden
    model, stage by stage."""
    b, q, feed = _narrow(kind, prec, thresholds=True)
    low = _lower(q, b.scope, feed, b.fetch)
    check_stages(low, q, b.scope, feed)
    with_th = [spec for spec in low.specs if getattr(spec, "thresholds", None) is not None]
    assert len(with_th) == 2
    t_n = 1 if prec.a == 1 else 2**prec.a - 1
    assert all(spec.thresholds.shape[1] == t_n and spec.clamp is not None and
               spec.structure()["thresholds"] == t_n for spec in with_th)


def test_thresholds_with_runtime_weights_are_refused():
    b, q, feed = _narrow("mlp", Precision(w=2, a=2), thresholds=True)
    with pytest.raises(LoweringError, match="weights='const'"):
        _lower(q, b.scope, feed, b.fetch, weights="runtime")


def test_a_relu_after_thresholds_is_refused():
    b, q, feed = _narrow("mlp", Precision(w=4, a=4), thresholds=True)
    gb = q.global_block()
    (mt,) = [op for op in gb.ops if op.type == "multi_threshold"][:1]
    out = mt.output("Out")[0]
    gb.create_var(name="r", shape=gb.var(out).shape, dtype=gb.var(out).dtype)
    for op in gb.ops:  # the next layer reads the relu's output
        if out in op.input_arg_names and op is not mt:
            op._rename_input(out, "r")
    idx = list(gb.ops).index(mt)
    gb._insert_op(idx + 1, type="relu", inputs={"X": [out]}, outputs={"Out": ["r"]})
    with pytest.raises(LoweringError, match="fold it into the thresholds"):
        _lower(q, b.scope, feed, b.fetch)


def test_wide_or_unsigned_8_bit_values_are_refused():
    b, q, feed = _narrow("mlp", Precision(w=8, a=8, a_type="unsigned"),
                         first_last_8bit=False)
    with pytest.raises(LoweringError, match="int8"):
        _lower(q, b.scope, feed, b.fetch)
