"""hls.kinds.affine: the kind registered with its spec, the op it begins; its specs read
back from their structure with the same estimates (const and runtime), its runtime
memories in the register window, PE folding over the channels; affine stages on the
accelerator's input, on a vector and between image stages lowered bit-exactly against
the golden model; a stream that is not channel fastest refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.boards import get_device
from fluid_hw.hls.autofold import autofold, device_estimate, specs_from_design
from fluid_hw.hls.kinds import KINDS, kind_for_op, kind_of
from fluid_hw.hls.lower import lower
from fluid_hw.hls.partition import LoweringError
from fluid_hw.hls.stages import ConvStage, MaxPoolStage, MVAUStage, estimate_pipeline
from fluid_hw.ir import Program
from fluid_hw.rtl import AffineSpec, param_layout, stage_lanes
from fluid_hw.rtl.spec import SPEC_KINDS, spec_from_structure
from tests.hls.test_lower import check_stages
from tests.passes.test_quantize_affine import FORMS, _build, _data, _quantise

L = fluid.layers
RNG = np.random.default_rng(21)


def test_the_kind_is_registered_and_begins_at_quantized_affine():
    kind = KINDS["affine"]
    assert kind.spec is AffineSpec is SPEC_KINDS["affine"] and kind.name == AffineSpec.kind
    p = Program()
    b = p.global_block()
    b.create_var(name="x", shape=[-1, 4, 3, 3], dtype="int8")
    b.create_var(name="w", shape=[4], dtype="int8", persistable=True)
    b.create_var(name="acc", dtype="int32")
    op = b.append_op("quantized_affine", {"X": ["x"], "Weight": ["w"]}, {"Out": ["acc"]}, {})
    assert kind_for_op(p, op) is kind
    assert [k.name for k in KINDS.values() if k.matches(p, op)] == ["affine"]


def _requant(m: int) -> dict[str, np.ndarray]:
    return {"bias": RNG.integers(-999, 999, m), "multiplier": RNG.integers(1, 2**15, m),
            "shift": RNG.integers(14, 20, m)}


def _chain(mode: str) -> list:
    """conv -> affine (3 lanes) -> max pool -> fc -> affine on the vector (int32 out)."""
    const = mode == "const"

    def arr(shape, m):
        return {"weights": RNG.integers(-127, 128, shape), **_requant(m)} if const else {}

    return [
        ConvStage("conv", (2, 6, 6), 6, kernel=3, padding=1, pe=3, simd=2, weights_mode=mode,
                  **arr((6, 2, 3, 3), 6)),
        AffineSpec("bn", (6, 6, 6), pe=3, relu=True, weights_mode=mode, **arr((6,), 6)),
        MaxPoolStage("pool", (6, 6, 6), 2),
        MVAUStage("fc", 54, 4, pe=2, simd=6, weights_mode=mode, **({
            "weights": RNG.integers(-127, 128, (4, 54)), **_requant(4)} if const else {})),
        AffineSpec("scale", (4,), pe=1, weights_mode=mode, requantize=False,
                   **({"weights": RNG.integers(-127, 128, 4),
                       "bias": RNG.integers(-99, 99, 4)} if const else {})),
    ]


@pytest.mark.parametrize("mode", ["const", "runtime"])
def test_affine_specs_read_back_with_the_same_estimates(mode):
    specs = _chain(mode)
    lanes = stage_lanes(specs)
    assert lanes[1] == (3, 3) and lanes[4] == (1, 1)
    design = [s.structure() for s in specs]
    for back in ([spec_from_structure(dict(d)) for d in design], specs_from_design(design)):
        assert [b.structure() for b in back] == design
        assert [b.runtime for b in back] == [mode == "runtime"] * 2 + [False] + \
            [mode == "runtime"] * 2
        assert kind_of(back[1]) is KINDS["affine"]
        assert estimate_pipeline(back, fifo_depth=4) == estimate_pipeline(specs, fifo_depth=4)
        assert device_estimate(back, "ecp5", fifo_depth=4) == \
            device_estimate(specs, "ecp5", fifo_depth=4)
    bn = specs[1]
    est = estimate_pipeline(specs, fifo_depth=4).stages[1]
    assert est.cycles == 6 * 6 * 6 // 3 and est.resources.dsp == 3 * 3
    assert estimate_pipeline(specs, fifo_depth=4).stages[4].resources.dsp == 1  # no requant
    mem = "rom" if mode == "const" else "ram"
    assert kind_of(bn).memories(bn, (3, 3))[:4] == [(2, 8, mem), (2, 54, mem)] * 2
    segs, _ = param_layout(specs)
    affine_segs = [(s.stage, s.kind, s.pe, s.depth) for s in segs if s.stage in ("bn", "scale")]
    if mode == "const":
        assert segs == []
    else:
        assert affine_segs == [("bn", "weights", p, 2) for p in range(3)] + \
            [("bn", "requant", p, 2) for p in range(3)] + \
            [("scale", "weights", 0, 4), ("scale", "requant", 0, 4)]


def test_autofold_folds_an_affine_stage_over_its_channels():
    bn = _chain("const")[1]
    a = autofold([bn], get_device("LFE5U-85F"))
    pe, simd = a.folding["bn"]
    assert simd == 1 and 6 % pe == 0


@pytest.mark.parametrize("form,kinds", [
    ("bn_on_input", ["affine", "conv", "mvau"]),
    ("vector_after_fc", ["mvau", "affine", "mvau"]),
    ("mul_add_relu", ["conv", "avgpool", "affine", "mvau"]),
])
def test_affine_stages_lower_bit_exactly(form, kinds):
    body, shape, consts, relus = FORMS[form]
    prog, scope, fetch = _build(body, shape, consts(np.random.default_rng(7)))
    q = _quantise(prog, scope, fetch, shape)
    for weights in ("const", "runtime"):
        low = lower(q, scope, feed_names=["x"], fetch_names=[fetch], weights=weights)
        assert [s.kind for s in low.stages] == kinds
        affine = [s for s in low.stages if s.kind == "affine"]
        assert [s.relu for s in affine] == relus
        assert all(s.fold_dims == (1, s.in_shape[0]) for s in affine)
        check_stages(low, q, scope, {"x": _data(shape, 1)})


def test_an_affine_on_a_stream_that_is_not_channel_fastest_is_refused():
    def body(x):  # an fc output (CHW order) reshaped into an image, then a batch norm
        h = L.reshape(L.fc(x, 12, act="relu"), [-1, 3, 2, 2])
        return L.fc(L.batch_norm(h), 2)

    rng = np.random.default_rng(1)
    prog, scope, fetch = _build(body, [5], {
        "batch_norm_0.w_0": rng.uniform(0.5, 2, 3), "batch_norm_0.b_0": rng.normal(0, 1, 3),
        "batch_norm_0.w_1": rng.normal(0, 1, 3), "batch_norm_0.w_2": rng.uniform(0.5, 2, 3)})
    q = _quantise(prog, scope, fetch, [5])
    with pytest.raises(LoweringError, match=r"quantized_affine 'batch_norm_0' reads .* of "
                                            r"shape \[3, 2, 2\], which arrives in an order "
                                            "that is not channel fastest"):
        lower(q, scope, feed_names=["x"], fetch_names=[fetch])
