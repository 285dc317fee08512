"""hls.lower: a quantised program -> host programs + hardware stages whose models
(rtl.pipeline_model) reproduce the golden model's values stage by stage; layouts
(HWC, transposes, relu folding, ceil-mode pooling); folding; clear errors."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.hls.folding import (
    FoldingBudget,
    FoldingError,
    balance,
    candidates,
    check_folding,
    format_folding,
    parse_folding,
)
from fluid_hw.hls.lower import Lowered, lower, mac_count
from fluid_hw.hls.partition import LoweringError
from fluid_hw.passes import QuantConfig, quantize
from fluid_hw.rtl import hwc_order, pipeline_model
from tests.passes._util import Net, digits


def _quantize(program, scope, feed, fetch, config=None):
    rng = np.random.default_rng(3)
    name, x = next(iter(feed.items()))
    calib = [{name: rng.standard_normal((16, *x.shape[1:])).astype(np.float32)}
             for _ in range(2)]
    return quantize(program, calib, config, scope=scope, executor=fluid.Executor(),
                    fetch_names=fetch, feed_names=[name])


def _lower(q, scope, feed, fetch, **kw):
    return lower(q, scope, feed_names=list(feed), fetch_names=fetch, **kw)


def check_stages(low: Lowered, q, scope, feed) -> None:
    """Every stage's model output equals the golden value it stands for, and the host
    programs + the whole pipeline model reproduce the program's outputs exactly."""
    part = low.partition
    names = [part.hw_input, part.hw_output, *(s.out_var for s in low.stages)]
    vals = fluid.Executor().run(q, feed=feed, fetch_list=part.fetches + names,
                                scope=fluid.Scope(scope))
    outs, vals = vals[:len(part.fetches)], dict(zip(names, vals[len(part.fetches):]))
    x = low.to_stream(vals[part.hw_input])
    y = x
    for k, spec in enumerate(low.specs):
        y = pipeline_model([spec], y)
        np.testing.assert_array_equal(y, low.stage_stream(k, vals[low.stages[k].out_var]),
                                      err_msg=low.stages[k].name)
    hw = low.from_stream(pipeline_model(low.specs, x))
    np.testing.assert_array_equal(hw, vals[part.hw_output])
    np.testing.assert_array_equal(low.to_out_stream(hw), pipeline_model(low.specs, x))
    # the host programs around the pipeline model give the model's outputs, bit for bit
    exe, s = fluid.Executor(), fluid.Scope(scope)
    (xin,) = exe.run(part.pre_program, feed=feed, fetch_list=[part.hw_input], scope=s)
    np.testing.assert_array_equal(xin, vals[part.hw_input])
    got = exe.run(part.post_program, feed={part.hw_output: hw}, fetch_list=part.fetches,
                  scope=s)
    for g, w in zip(got, outs):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_digits_models_lower_stage_by_stage(kind):
    b = digits(kind)
    q = _quantize(b.program, b.scope, {"pixels": b.feed["pixels"]}, b.fetch)
    low = _lower(q, b.scope, {"pixels": 0}, b.fetch)
    part = low.partition.describe()
    assert part["pre"] == ["quantize"] and part["post"] == ["dequantize", "softmax"]
    if kind == "mlp":
        assert [s.name for s in low.stages] == ["fc_0", "fc_1", "fc_2"]
        assert [s.relu for s in low.stages] == [True, True, False]
        assert np.array_equal(low.in_perm, np.arange(64))
    else:
        assert [s.name for s in low.stages] == ["conv2d_0", "pool2d_0", "conv2d_1",
                                                "pool2d_1", "fc_0"]
        assert [s.op for s in low.stages] == ["quantized_conv2d", "quantized_pool2d"] * 2 + \
            ["quantized_fc"]
        assert low.stages[-1].layout["columns"] == "hwc"
        assert np.array_equal(low.stages[-1].col_perm, hwc_order(32, 2, 2))
        assert np.array_equal(low.in_perm, hwc_order(1, 8, 8))
        assert low.stages[0].geometry["padding"] == [1, 1, 1, 1]
    assert low.stages[0].in_format.scale and low.stages[0].out_format.lo == 0
    assert set(low.folding) == {s.name for s in low.stages if s.folds}
    assert len(low.fifo) == len(low.stages) + 1 and min(low.fifo) >= 2
    check_stages(low, q, b.scope, {"pixels": b.feed["pixels"]})
    desc = low.describe()
    assert desc["stages"][0]["ops"] and desc["in_perm"] == low.in_perm.tolist()
    est = low.estimate()
    assert est.initiation_interval >= max(s.ii for s in est.stages)


def _conv_net(middle, pool_attrs=None, head="fc"):
    """x [2, 6, 6] -> conv 3x3 (4) -> `middle` ops -> head"""
    n = Net()
    n.data("x", [-1, 2, 6, 6])
    n.param("w0", [4, 2, 3, 3])
    n.param("b0", [4])
    n.op("conv2d", {"Input": "x", "Filter": "w0"}, {"Output": "c0"}, {"paddings": [1, 1]})
    n.op("elementwise_add", {"X": "c0", "Y": "b0"}, {"Out": "h0"}, {"axis": 1})
    h, shape = "h0", [4, 6, 6]
    for kind in middle:
        out = f"{h}_{kind}"
        if kind == "relu":
            n.op("relu", {"X": h}, {"Out": out})
        elif kind in ("max", "avg"):
            attrs = {"ksize": [2, 2], "strides": [2, 2], "pooling_type": kind,
                     **(pool_attrs or {})}
            n.op("pool2d", {"X": h}, {"Out": out}, attrs)
            k, s = attrs["ksize"][0], attrs["strides"][0]
            pad = attrs.get("paddings", [0, 0])[0]
            size = (shape[1] + 2 * pad - k + (s - 1 if attrs.get("ceil_mode") else 0)) // s + 1
            shape = [shape[0], size, size]
        elif kind == "conv":
            n.param("w1", [3, shape[0], 3, 3])
            n.op("conv2d", {"Input": h, "Filter": "w1"}, {"Output": out}, {"paddings": [1, 1]})
            shape = [3, *shape[1:]]
        elif kind == "nhwc":
            n.op("transpose2", {"X": h}, {"Out": out, "XShape": f"{out}_xs"},
                 {"axis": [0, 2, 3, 1]})
            shape = [shape[1], shape[2], shape[0]]
        h = out
    width = int(np.prod(shape))
    n.op("reshape2", {"X": h}, {"Out": "flat", "XShape": "flat_xs"}, {"shape": [-1, width]})
    n.param("w2", [width, 5])
    n.op("mul", {"X": "flat", "Y": "w2"}, {"Out": "logits"})
    fetch = ["logits"]
    if head == "argmax":
        n.op("softmax", {"X": "logits"}, {"Out": "prob"})
        n.op("arg_max", {"X": "prob"}, {"Out": "label"}, {"axis": -1})
        fetch = ["prob", "label"]
    feed = {"x": np.random.default_rng(1).standard_normal((5, 2, 6, 6)).astype(np.float32)}
    return n, feed, fetch


@pytest.mark.parametrize("middle,pool_attrs", [
    (["relu", "max"], None),
    (["max", "relu"], None),  # relu after the pool: folded into the conv's clamp
    (["relu", "max"], {"ksize": [3, 3], "strides": [2, 2], "ceil_mode": True}),
    (["relu", "max"], {"ksize": [2, 2], "strides": [1, 1], "paddings": [1, 1]}),
    (["relu", "nhwc"], None),  # NHWC flatten: the fc's columns need no permutation
    (["relu", "max", "conv", "relu"], None),
], ids=["relu-pool", "pool-relu", "ceil-mode", "padded-pool", "transpose", "two-convs"])
def test_layouts_lower_exactly(middle, pool_attrs):
    n, feed, fetch = _conv_net(middle, pool_attrs)
    scope = n.scope()
    q = _quantize(n.program, scope, feed, fetch)
    low = _lower(q, scope, feed, fetch)
    check_stages(low, q, scope, feed)
    if middle == ["max", "relu"]:
        assert low.stages[0].relu and low.stages[0].golden_relu
    if "nhwc" in middle:
        assert low.stages[-1].layout["columns"] == "identity"


def test_trailing_host_ops_and_their_outputs():
    n, feed, fetch = _conv_net(["relu", "max"], head="argmax")
    scope = n.scope()
    q = _quantize(n.program, scope, feed, fetch)
    low = _lower(q, scope, feed, fetch)
    assert low.partition.describe()["post"] == ["dequantize", "softmax", "arg_max"]
    check_stages(low, q, scope, feed)


def test_an_op_without_lowering_between_stages_is_named():
    # an average pool whose count differs per window (exclusive of padding) stays a
    # divide (quantized_pool2d avg), which has no stage kind
    n, feed, fetch = _conv_net(["relu", "avg", "conv"], {"paddings": [1, 1],
                                                          "exclusive": True})
    scope = n.scope()
    q = _quantize(n.program, scope, feed, fetch)
    with pytest.raises(LoweringError) as e:
        _lower(q, scope, feed, fetch)
    msg = str(e.value)
    assert "quantized_pool2d (avg)" in msg and "middle of the network" in msg
    assert "quantized_conv2d" in msg  # the stage that follows it
    # a float island (float_fallback) in the middle: its dequantize is reported
    n, feed, fetch = _conv_net(["relu"])
    n.op("softmax", {"X": "logits"}, {"Out": "s"})
    n.param("w3", [5, 3])
    n.op("mul", {"X": "s", "Y": "w3"}, {"Out": "y"})
    scope = n.scope()
    q = _quantize(n.program, scope, feed, ["y"], QuantConfig(float_fallback=True))
    with pytest.raises(LoweringError, match=r"middle of the network: dequantize \(-> logits\); "
                       r"softmax \(-> s\); quantize \(-> s.int8\), and the hardware stage "
                       r"quantized_fc"):
        _lower(q, scope, feed, ["y"])


def test_unsupported_formats_are_refused_with_the_fix():
    b = digits("mlp")
    q = _quantize(b.program, b.scope, {"pixels": b.feed["pixels"]}, b.fetch,
                  QuantConfig(activation_bits=16))
    with pytest.raises(LoweringError, match="activation_bits=8"):
        _lower(q, b.scope, {"pixels": 0}, b.fetch)
    n, feed, fetch = _conv_net(["relu"])
    scope = n.scope()
    q = _quantize(n.program, scope, feed, fetch)
    inner = next(op.output("Out")[0] for op in q.global_block().ops if op.type == "requantize")
    with pytest.raises(LoweringError, match="intermediate value"):
        lower(q, scope, fetch_names=[*fetch, inner], feed_names=["x"])
    with pytest.raises(LoweringError, match="weights must be"):
        _lower(q, scope, feed, fetch, weights="rom")
    with pytest.raises(LoweringError, match="no feed or fetch ops"):
        lower(q, scope)


def test_nothing_to_accelerate():
    b = digits("mlp")
    with pytest.raises(LoweringError, match=r"nothing for the accelerator.*--calibration"):
        lower(b.program, b.scope, feed_names=["pixels"], fetch_names=b.fetch)


# -- folding ------------------------------------------------------------------------------

def _mlp_low(**kw):
    b = digits("mlp")
    q = _quantize(b.program, b.scope, {"pixels": b.feed["pixels"]}, b.fetch)
    return _lower(q, b.scope, {"pixels": 0}, b.fetch, **kw), q, b


def test_balanced_folding_fills_the_budget_evenly():
    low, _, _ = _mlp_low()
    est = low.estimate()
    macs = sum(s.pe * s.simd for s in low.specs)
    assert macs <= 128
    # every layer is the cheapest that keeps up with the slowest: halving any one's
    # multipliers would make it the bottleneck
    for s, e in zip(low.specs, est.stages):
        assert e.ii <= est.initiation_interval
        assert mac_count(s) / (s.pe * s.simd) >= est.initiation_interval / 2
    # a bigger budget gives a faster pipeline, a throughput target the cheapest folding
    fast, _, _ = _mlp_low(budget=FoldingBudget(macs=512))
    assert fast.estimate().initiation_interval < est.initiation_interval
    slow, _, _ = _mlp_low(ii_target=1024)
    assert slow.estimate().initiation_interval <= 1024
    assert sum(s.pe * s.simd for s in slow.specs) < macs
    dsp, _, _ = _mlp_low(budget=FoldingBudget(dsp=30))
    assert dsp.estimate().resources.dsp <= 30


def test_given_folding_is_kept_and_the_rest_balanced():
    low, q, b = _mlp_low(folding={"fc_0": (4, 8)})
    assert low.folding["fc_0"] == (4, 8)
    spec = low.specs[0]
    assert (spec.pe, spec.simd) == (4, 8)
    check_stages(low, q, b.scope, {"pixels": b.feed["pixels"]})
    with pytest.raises(FoldingError, match=r"PE=3 must divide its 128 outputs; valid PE: "
                                           r"1, 2, 4, 8, 16, 32, 64, 128"):
        _mlp_low(folding={"fc_0": (3, 8)})
    with pytest.raises(FoldingError, match="SIMD=5 must divide its 64 inputs"):
        _mlp_low(folding={"fc_0": (4, 5)})
    with pytest.raises(FoldingError, match=r"layer 'fc_9'.*its layers: fc_0, fc_1, fc_2"):
        _mlp_low(folding={"fc_9": (1, 1)})
    with pytest.raises(FoldingError, match="beyond the budget"):
        _mlp_low(budget=FoldingBudget(macs=2))
    with pytest.raises(FoldingError, match="with the given folding of fc_0, beyond the budget"):
        _mlp_low(folding={"fc_0": (128, 8)})
    every, _, _ = _mlp_low(folding={"fc_0": (128, 8), "fc_1": (1, 1), "fc_2": (1, 1)})
    assert every.folding["fc_0"] == (128, 8)  # every layer given: used as it is
    with pytest.raises(FoldingError, match="initiation interval 1 needs 17024 multipliers"):
        _mlp_low(ii_target=1)


def test_parse_and_format_folding():
    f = parse_folding("fc_0=4x8, conv2d_1=2X16")
    assert f == {"fc_0": (4, 8), "conv2d_1": (2, 16)}
    assert parse_folding(format_folding(f)) == f
    assert parse_folding("") == {} and parse_folding(None) == {}
    for bad in ("fc_0=4", "fc_0:4x8", "=4x8x", "fc_0=ax8"):
        with pytest.raises(FoldingError, match="layer=PExSIMD"):
            parse_folding(bad)
    assert (3, 2) in candidates(4, 6) and (4, 3) not in candidates(4, 6)


def test_balance_on_units_directly():
    low, _, _ = _mlp_low()
    from fluid_hw.hls.lower import _units

    units = _units(low.stages)
    check_folding(units, {"fc_1": (2, 2)})
    fold = balance(units, FoldingBudget(macs=64))
    assert sum(pe * simd for pe, simd in fold.values()) <= 64
    assert balance(units, None)["fc_0"] == (128, 64)  # no budget: fully parallel


def test_a_last_stage_without_requantize_streams_int32():
    """quantized_fc -> dequantize: the accelerator's last stage keeps the int32 sums."""
    from fluid_hw.ir import Program

    p = Program()
    b = p.global_block()
    b.create_var(name="x", shape=[-1, 8], dtype="float32")
    b.create_var(name="xq", shape=[-1, 8], dtype="int8")
    b.create_var(name="w", shape=[8, 3], dtype="int8", persistable=True)
    b.create_var(name="acc", shape=[-1, 3], dtype="int32")
    b.create_var(name="y", shape=[-1, 3], dtype="float32")
    b.append_op("quantize", {"X": ["x"]}, {"Out": ["xq"]}, {"scale": 0.02})
    b.append_op("quantized_fc", {"X": ["xq"], "W": ["w"]}, {"Out": ["acc"]})
    b.append_op("dequantize", {"X": ["acc"]}, {"Out": ["y"]}, {"scale": 1e-4})
    rng = np.random.default_rng(0)
    scope = fluid.Scope()
    scope.vars["w"] = rng.integers(-127, 128, (8, 3)).astype(np.int8)
    feed = {"x": rng.standard_normal((4, 8)).astype(np.float32)}
    low = _lower(p, scope, feed, ["y"])
    (s,) = low.stages
    assert not s.requantize and s.out_format.bits == 32 and low.specs[0].out_bits == 32
    check_stages(low, p, scope, feed)
