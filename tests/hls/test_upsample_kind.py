"""Kind ``upsample``: ``nearest_interp`` passes through quantisation as int8 (same
scale), an integer-factor one lowers to an upsample stage (square and non-square
factors, lanes from the producer, a relu after it folded into the conv before it) whose
model and the whole pipeline equal the golden model bit for bit; its spec reads back
from its structure with the same estimates; a fractional or corner-aligned one runs on
the host, and the partition says why."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.hls.autofold import device_estimate, specs_from_design
from fluid_hw.hls.kinds import KINDS, host_reason, kind_for_op, kind_of
from fluid_hw.hls.lower import lower
from fluid_hw.hls.partition import segment
from fluid_hw.hls.stages import estimate_pipeline
from fluid_hw.rtl import UpsampleSpec, stage_lanes
from fluid_hw.rtl.spec import SPEC_KINDS, spec_from_structure
from tests.hls.test_kinds import _quantised
from tests.hls.test_lower import check_stages

L = fluid.layers


def _decoder(x, up=lambda h: L.resize_nearest(h, scale=2, align_corners=False)):
    h = L.conv2d(x, 3, 3, padding=1)
    h = L.relu(up(h))  # the relu after the upsampling folds into the conv's clamp
    return L.conv2d(h, 2, 3, padding=1)


def test_the_kind_is_registered():
    assert KINDS["upsample"].spec is SPEC_KINDS["upsample"] is UpsampleSpec


@pytest.mark.parametrize("up,factor,folding", [
    (lambda h: L.resize_nearest(h, scale=2, align_corners=False), (2, 2), {}),
    (lambda h: L.resize_nearest(h, out_shape=[8, 12], align_corners=False), (2, 3),
     {"conv2d_0": (3, 1)}),
    # align_corners=True (Fluid's default) picks the same rows for a factor of 2, and
    # for any factor when the input is one pixel tall
    (lambda h: L.resize_nearest(h, scale=2), (2, 2), {}),
    (lambda h: L.resize_nearest(h, out_shape=[3, 4]), (3, 1), {}),
], ids=["x2", "2x3-lanes3", "corners-x2", "corners-one-row"])
def test_integer_upsampling_lowers_bit_exactly(up, factor, folding):
    shape = [2, 4, 4] if factor != (3, 1) else [2, 1, 4]
    q, scope, fetch = _quantised(lambda x: _decoder(x, up), shape)
    ops = q.global_block().ops
    (op,) = [o for o in ops if o.type == "nearest_interp"]
    assert q.global_block().var(op.input("X")[0]).dtype_name == "int8"
    assert q.global_block().var(op.output("Out")[0]).dtype_name == "int8"
    assert "dequantize" not in [o.type for o in ops[:-1]]  # no float island
    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch], folding=folding)
    assert [s.kind for s in low.stages] == ["conv", "upsample", "conv"]
    assert [s.relu for s in low.stages] == [True, False, False]
    up_spec = low.specs[1]
    assert up_spec.factor == factor and up_spec.out_shape == (3, shape[1] * factor[0],
                                                              shape[2] * factor[1])
    lanes = stage_lanes(low.specs)
    assert lanes[1] == (low.folding["conv2d_0"][0],) * 2  # the producer's lanes
    x = np.random.default_rng(1).standard_normal((16, *shape)).astype(np.float32)
    check_stages(low, q, scope, {"x": x})
    est = low.estimate()
    assert est.stages[1].cycles == up_spec.out_len // lanes[1][0]
    assert est.initiation_interval >= est.stages[1].cycles


def test_spec_reads_back_with_the_same_estimates():
    specs = [UpsampleSpec("up", (3, 4, 5), (2, 3)), UpsampleSpec("up2", (3, 8, 15), (1, 2),
                                                                   lanes=3)]
    design = [s.structure() for s in specs]
    for back in ([spec_from_structure(dict(d)) for d in design], specs_from_design(design)):
        assert [b.structure() for b in back] == design
        assert estimate_pipeline(back) == estimate_pipeline(specs)
        for family in ("ecp5", "ice40"):
            assert device_estimate(back, family) == device_estimate(specs, family)
    k = kind_of(specs[1])
    # the row buffer (W * C / lanes words of 8 * lanes bits) and the output queue
    assert k.memories(specs[1], (3, 3))[0] == (15, 24, "ram")
    assert k.buffer(specs[1]) == 3 * 15


@pytest.mark.parametrize("up,why", [
    (lambda h: L.resize_nearest(h, scale=1.5, align_corners=False),
     "4x4 -> 6x6 (align_corners=False) does not repeat every input row and column an "
     "integer number of times"),
    (lambda h: L.resize_nearest(h, scale=3),
     "4x4 -> 12x12 (align_corners=True) does not repeat"),
], ids=["fractional", "align-corners"])
def test_other_nearest_interps_run_on_the_host_and_say_why(up, why):
    q, _scope, fetch = _quantised(lambda x: _decoder(x, up), [2, 4, 4])
    (op,) = [o for o in q.global_block().ops if o.type == "nearest_interp"]
    assert q.global_block().var(op.input("X")[0]).dtype_name == "int8"  # exact on the host
    assert kind_for_op(q, op) is None
    assert why in host_reason(q, op)
    seg = segment(q, ["x"], [fetch])
    assert len(seg.regions) == 2
    segs = seg.describe()["segments"]
    assert segs[2]["where"] == "host" and segs[2]["ops"] == ["nearest_interp", "relu"]
    (note,) = segs[2]["notes"]
    assert note.startswith(f"nearest_interp (-> {op.output('Out')[0]}) runs on the host: ")
    assert "use an integer scale with align_corners=False" in note
    assert all("notes" not in s for k, s in enumerate(segs) if k != 2)


def test_a_float_or_runtime_sized_nearest_interp_is_no_stage():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = L.data("x", shape=[2, 4, 4], dtype="float32")
        size = L.data("size", shape=[2], dtype="int32", append_batch_size=False)
        L.resize_nearest(x, scale=2, align_corners=False)
        xi = L.cast(x, "int8")
        L.resize_nearest(xi, out_shape=size)
        L.resize_nearest(xi, scale=2, align_corners=False)
    ops = [o for o in main.global_block().ops if o.type == "nearest_interp"]
    assert [getattr(kind_for_op(main, o), "name", None) for o in ops] == \
        [None, None, "upsample"]
    assert [host_reason(main, o) for o in ops] == \
        [None, "its size comes from the OutSize tensor at run time", None]
