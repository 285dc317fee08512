"""Automatic folding for a device: the budget is respected, the pipeline balanced and as
fast as the budget allows, overrides and a throughput target are honoured, and a design
that cannot fit says which resource, by how much, and what would fit.  The block-RAM
and multiplier model is checked against counts Yosys reported for the calibration
designs."""

from __future__ import annotations

import numpy as np
import pytest

from fluid_hw.boards import get_device
from fluid_hw.hls.autofold import (
    CALIBRATION,
    AutoFoldError,
    autofold,
    bridge_estimate,
    device_estimate,
    fold_units,
    refold,
    specs_from_design,
)
from fluid_hw.hls.folding import FoldingError
from fluid_hw.hls.stages import ConvStage, MaxPoolStage, MVAUStage
from fluid_hw.rtl import AcceleratorTop

ECP5_85 = get_device("LFE5U-85F")
UP5K = get_device("iCE40UP5K")


def mlp(dims, mode="const"):
    rng = np.random.default_rng(0)
    out = []
    for i in range(len(dims) - 1):
        mw, mh = dims[i], dims[i + 1]
        arr = {} if mode == "runtime" else dict(
            weights=rng.integers(-127, 128, (mh, mw)), bias=rng.integers(-500, 500, mh),
            multiplier=rng.integers(1, 2**15, mh), shift=rng.integers(10, 20, mh))
        out.append(MVAUStage(f"fc_{i}", mw, mh, relu=i < len(dims) - 2, weights_mode=mode,
                             **arr))
    return out


DIGITS = mlp([64, 128, 64, 10])


def test_digits_mlp_on_the_85f_fits_balanced_and_as_fast_as_the_budget_allows():
    """Every product a DSP: II 256; II 128 (the next faster pipeline) would need 139 of
    the 132 DSPs of 85 %."""
    a = autofold(DIGITS, ECP5_85, lut_multipliers=False)
    assert a.folding == {"fc_0": (1, 32), "fc_1": (1, 32), "fc_2": (1, 4)} and not a.lut_mults
    for r in ("dsp", "lut", "bram"):
        assert a.resources[r] <= a.limits[r] == int(0.85 * ECP5_85.resources[r])
    assert a.initiation_interval == 256 and a.bottleneck in ("fc_0", "fc_1")
    # balanced: no layer could use fewer multipliers and still keep up
    for u in fold_units(DIGITS):
        chosen = u.option(*a.folding[u.name])
        assert chosen.ii <= a.initiation_interval
        assert not [o for o in u.options if o.ii <= a.initiation_interval and o.macs <
                    chosen.macs]
    # as fast as the budget allows: the next faster pipeline does not fit
    with pytest.raises(AutoFoldError, match=r"no folding reaches .* the fastest that fits is "
                                            r"fc_0=1x32,fc_1=1x32,fc_2=1x4"):
        autofold(DIGITS, ECP5_85, target_fps=a.throughput_per_s * 1.5, lut_multipliers=False)
    # a bigger budget is faster
    assert autofold(DIGITS, ECP5_85, fraction=1.0,
                    lut_multipliers=False).initiation_interval <= 256
    # against the bound: 156 x 100 MHz / 17,024 MACs, an II of 109.1; the DSPs bind
    b = a.bound
    assert b.macs == 17_024 and b.multipliers == 156 and b.ii == 256
    assert b.bound_ii == pytest.approx(17_024 / 156) and b.ratio == pytest.approx(b.bound_ii / 256)
    assert b.multipliers_used == 32 + 32 + 4 and b.lut_products == 0
    assert b.efficiency == pytest.approx(17_024 / (68 * 256))
    assert b.binding == "DSP" and "DSP of 132" in b.why and "LUT multipliers" in b.why
    assert a.as_report()["bound"]["binding"] == "DSP"


def test_lut_multipliers_take_the_digits_mlp_past_the_dsp_bound():
    """Where the DSPs run out the search builds the extra products in LUTs (measured
    LUT multipliers, rtl._lutmul) within the LUT budget: the estimated II passes the
    DSP-only bound's; every DSP budget and LUT budget is kept."""
    a = autofold(DIGITS, ECP5_85, lut_multipliers=True)
    assert a.lut_mults and a.initiation_interval < a.bound.bound_ii
    for r in ("dsp", "lut", "bram"):
        assert a.resources[r] <= a.limits[r]
    specs = [refold(s, *a.folding[s.name], a.lut_mults.get(s.name, 0)) for s in DIGITS]
    products = sum(s.pe * s.simd for s in specs)
    assert a.bound.multipliers_used == products and a.bound.lut_products == \
        sum(a.lut_mults.values()) == sum(s.lut_mults for s in specs)
    # the DSPs hold the rest: products and the (shared) requantiser lanes
    assert a.resources["dsp"] == device_estimate(specs, "ecp5")["dsp"] <= a.limits["dsp"]
    assert a.resources["dsp"] >= a.limits["dsp"] - 2
    # what binds the next faster folding: the LUTs (and block RAMs)
    assert a.bound.binding.startswith("LUT") and "the next faster" in a.bound.why
    # balanced: every layer at or under the pipeline's II
    for u in fold_units(DIGITS):
        assert u.option(*a.folding[u.name], a.lut_mults.get(u.name, 0)).ii <= \
            a.initiation_interval


def test_target_fps_picks_the_cheapest_folding_that_reaches_it():
    a = autofold(DIGITS, ECP5_85, target_fps=100_000, clock_mhz=100)
    assert a.throughput_per_s >= 100_000 and a.initiation_interval <= 1000
    fast = autofold(DIGITS, ECP5_85)
    assert a.resources["dsp"] < fast.resources["dsp"]
    with pytest.raises(AutoFoldError, match="target_fps must be positive"):
        autofold(DIGITS, ECP5_85, target_fps=0)


def test_overrides_are_kept_and_checked():
    a = autofold(DIGITS, ECP5_85, overrides={"fc_2": (2, 2)})
    assert a.folding["fc_2"] == (2, 2) and a.overrides == {"fc_2": (2, 2)}
    with pytest.raises(FoldingError, match=r"PE=3 must divide its 128 outputs; valid PE: 1, 2"):
        autofold(DIGITS, ECP5_85, overrides={"fc_0": (3, 1)})
    with pytest.raises(FoldingError, match=r"layer 'fc_9'.*its layers: fc_0, fc_1, fc_2"):
        autofold(DIGITS, ECP5_85, overrides={"fc_9": (1, 1)})
    with pytest.raises(AutoFoldError, match=r"does not fit LFE5U-85F with fc_0=8x64: "
                                            r"multipliers: needs \d+, budget 132 of 156 \(\d+ "
                                            r"over\).*Without the --fold overrides this fits: "
                                            r"--fold fc_0=1x32,fc_1=1x32,fc_2=1x4"):
        autofold(DIGITS, ECP5_85, overrides={"fc_0": (8, 64)}, lut_multipliers=False)
    # with LUT multipliers 8x64 fits (its products beyond the DSPs in LUTs); 32x64 does
    # not: the LUTs overflow
    assert autofold(DIGITS, ECP5_85, overrides={"fc_0": (8, 64)},
                    lut_multipliers=True).lut_mults["fc_0"] > 0
    with pytest.raises(AutoFoldError, match=r"does not fit LFE5U-85F with fc_0=32x64 \(\d+ "
                                            r"products in LUTs\): LUTs: needs \d+, budget "
                                            r"71094 of 83640"):
        autofold(DIGITS, ECP5_85, overrides={"fc_0": (32, 64)}, lut_multipliers=True)


def test_what_does_not_fit_the_up5k_says_why_and_what_would():
    small = autofold(mlp([64, 32, 10]), UP5K, clock_mhz=30)
    assert small.folding == {"fc_0": (1, 1), "fc_1": (1, 1)}
    assert small.resources["dsp"] == 6 <= small.limits["dsp"]
    with pytest.raises(AutoFoldError) as e:
        autofold(DIGITS, UP5K)
    msg = str(e.value)
    assert "does not fit iCE40UP5K even at the slowest folding" in msg
    assert "multipliers: needs 9, budget 6 of 8 (3 over)" in msg
    assert "block RAMs: needs" in msg and "SPRAM" in msg and "--weights runtime" in msg


def test_conv_stages_fold_with_their_pools():
    rng = np.random.default_rng(1)
    conv = ConvStage("conv", (1, 8, 8), 8, kernel=3, padding=1, relu=True,
                     weights=rng.integers(-9, 9, (8, 1, 3, 3)), bias=np.zeros(8, int),
                     multiplier=np.ones(8, int), shift=np.zeros(8, int))
    pool = MaxPoolStage("pool", (8, 8, 8), kernel=2)
    fc = MVAUStage("fc", 128, 10, weights=rng.integers(-9, 9, (10, 128)),
                   multiplier=np.ones(10, int), shift=np.zeros(10, int))
    a = autofold([conv, pool, fc], get_device("LFE5U-25F"))
    assert set(a.folding) == {"conv", "fc"}
    assert a.resources["dsp"] <= a.limits["dsp"]


def test_device_estimate_from_a_design_description():
    specs = [refold(s, *f) for s, f in zip(DIGITS, [(1, 32), (1, 32), (1, 4)])]
    top = AcceleratorTop(specs)
    top._MustUse__used = True
    again = specs_from_design(top.describe()["stages"])
    assert [s.structure() for s in again] == [s.structure() for s in specs]
    for fam in ("ecp5", "ice40"):
        assert device_estimate(again, fam) == device_estimate(specs, fam)
    bridge = bridge_estimate("ecp5", 32, 1)   # 32-byte input beats (SIMD 32), int8 out
    assert bridge.lut > CALIBRATION["ecp5"].bridge.lut
    assert device_estimate(specs, "ecp5", board_top=False)["lut"] + bridge.lut == \
        device_estimate(specs, "ecp5")["lut"]
    with pytest.raises(AutoFoldError, match="no resource model for the family 'xilinx'"):
        device_estimate(specs, "xilinx")
    with pytest.raises(AutoFoldError, match="unknown kind 'lstm'"):
        specs_from_design([{"name": "x", "kind": "lstm"}])


def test_specs_from_design_round_trips_a_conv_pool_design():
    """design.json lists a stage's (in, out) lanes; a pool takes one lane count."""
    from fluid_hw.backends.fpga.bitstream import calibration_designs

    specs = dict(calibration_designs())["conv_pool_fc"]
    top = AcceleratorTop(specs)
    top._MustUse__used = True
    again = specs_from_design(top.describe()["stages"])
    assert [type(s) for s in again] == [type(s) for s in specs]
    assert any(isinstance(s, MaxPoolStage) for s in again)
    for fam in ("ecp5", "ice40"):
        assert device_estimate(again, fam) == device_estimate(specs, fam)


# Yosys (synth_ecp5 / synth_ice40 -dsp) on each calibration design synthesised alone:
# (DP16KD+PDPW16KD | SB_RAM40_4K, MULT18X18D | SB_MAC16), recorded by
# `python -m fluid_hw.backends.fpga.bitstream calibrate`.  The five designs whose PE
# lanes share requantisers since 2d49763 (mlp_16_64_16_pe, mlp_runtime_16,
# mlp_64_32_10_4x8, mlp_64_128_64_10_2x16, conv_pool_fc) synthesised again after it:
# fewer MULT18X18D / SB_MAC16, and their requantisers' parameter memories, one a physical
# lane, deeper (block RAM where they left logic).
YOSYS_COUNTS = {
    ("ecp5", "mlp_64_128_64_10"): (19, 74), ("ice40", "mlp_64_128_64_10"): (57, 74),
    ("ecp5", "mlp_64_128_64_10_1x1"): (12, 9), ("ice40", "mlp_64_128_64_10_1x1"): (41, 9),
    ("ecp5", "mlp_64_128_64_10_2x16"): (19, 72), ("ice40", "mlp_64_128_64_10_2x16"): (56, 72),
    ("ecp5", "mlp_64_32_10_1x1"): (2, 6), ("ice40", "mlp_64_32_10_1x1"): (7, 6),
    ("ecp5", "mlp_64_32_10_4x8"): (8, 44), ("ice40", "mlp_64_32_10_4x8"): (22, 44),
    ("ecp5", "mlp_32_16_10"): (1, 7), ("ice40", "mlp_32_16_10"): (4, 7),
    ("ecp5", "fc_128_10_wide"): (29, 130), ("ice40", "fc_128_10_wide"): (65, 130),
    ("ecp5", "mlp_16_64_16_pe"): (0, 36), ("ice40", "mlp_16_64_16_pe"): (3, 36),
    ("ecp5", "fc_8_8"): (0, 3), ("ice40", "fc_8_8"): (1, 3),
    ("ecp5", "mlp_runtime_16"): (0, 36), ("ice40", "mlp_runtime_16"): (32, 36),
    ("ecp5", "mlp_runtime_64_32_10"): (3, 16), ("ice40", "mlp_runtime_64_32_10"): (20, 16),
    ("ecp5", "conv_pool_fc"): (5, 26), ("ice40", "conv_pool_fc"): (18, 26),
}


@pytest.mark.parametrize("family,design", sorted(YOSYS_COUNTS))
def test_block_ram_and_multiplier_model_matches_yosys(family, design):
    from fluid_hw.backends.fpga.bitstream import calibration_designs

    specs = calibration_designs()[design]
    e = device_estimate(specs, family, board_top=False)
    assert (e["bram"], e["dsp"]) == YOSYS_COUNTS[family, design]


def test_dsp_registers_take_the_product_flip_flops_out_of_the_fabric():
    """ff_style="trellis" keeps each product's two registers (and the requantisers'
    four) inside the MULT18X18D: the FF estimate drops by exactly those."""
    specs = [refold(s, *f) for s, f in zip(DIGITS, [(1, 32), (1, 32), (1, 4)])]
    plain = device_estimate(specs, "ecp5")
    dsp = device_estimate(specs, "ecp5", dsp_registers=True)
    assert {k: v for k, v in dsp.items() if k != "ff"} == \
        {k: v for k, v in plain.items() if k != "ff"}
    moved = (32 + 32 + 4) * 32 + 3 * 4 * 33
    assert plain["ff"] - dsp["ff"] == pytest.approx(moved * CALIBRATION["ecp5"].ff_scale, abs=1)


def test_a_device_budget_picks_the_option_cheapest_in_dsps():
    """On a device the DSPs bind, and a requantiser lane costs two: PE lanes whose
    results come once every SF cycles share them (rtl.requant.requant_units), so for II
    128 the last layer takes 5x1 (5 products + one shared requantiser lane = 7 DSPs), not
    1x8 (8 + 2 = 10; the choice when every PE had its own requantiser), and at 92 % of
    the 85F the MLP reaches II 128 with every product a DSP (139 of 143 DSPs)."""
    a = autofold(DIGITS, ECP5_85, fraction=0.92, lut_multipliers=False)
    assert a.folding == {"fc_0": (1, 64), "fc_1": (1, 64), "fc_2": (5, 1)}
    assert a.initiation_interval == 128 and a.resources["dsp"] == 139 <= a.limits["dsp"]


def _thin_conv_net():
    """1x8x8 input, conv 2@3x3 pad 1, max pool 2, fc 10: 1,472 MACs, far fewer than the
    85F's multipliers can do in the 64 cycles its 64 output pixels take at least."""
    rng = np.random.default_rng(2)
    conv = ConvStage("conv", (1, 8, 8), 2, kernel=3, padding=1, relu=True,
                     weights=rng.integers(-9, 9, (2, 1, 3, 3)), bias=np.zeros(2, int),
                     multiplier=np.ones(2, int), shift=np.zeros(2, int))
    pool = MaxPoolStage("pool", (2, 8, 8), kernel=2)
    fc = MVAUStage("fc", 32, 10, weights=rng.integers(-9, 9, (10, 32)),
                   multiplier=np.ones(10, int), shift=np.zeros(10, int))
    return [conv, pool, fc]


def test_a_conv_net_bound_by_a_stage_that_cannot_fold_further_says_so():
    """A thin convolution whose fastest folding still leaves the pipeline far from the
    multiplier bound: the report names it (its window generator, or the stage at its
    fully unrolled II), and no folding of it is faster."""
    specs = _thin_conv_net()
    a = autofold(specs, ECP5_85)
    b = a.bound
    assert b.macs == sum(s.macs() for s in specs) == 8 * 8 * 2 * 9 + 32 * 10
    assert b.ii == a.initiation_interval and b.ratio < 1
    assert b.binding == "the sliding-window generator" or \
        b.binding.startswith("a stage that cannot fold further: conv")
    assert "conv" in b.why
    conv_unit = next(u for u in fold_units(specs) if u.name == "conv")
    assert min(o.ii for o in conv_unit.options) == a.initiation_interval
    for r in ("dsp", "lut", "bram"):
        assert a.resources[r] <= a.limits[r]


def test_search_moves_the_dsp_excess_into_lut_products_cheapest_first():
    """folding.search: a target the DSPs cannot hold is reached with the fewest LUT
    products that free the missing DSPs; without LUT multipliers it is not."""
    from fluid_hw.hls.folding import FoldingBudget, search

    units = fold_units(DIGITS)
    dsp_only = search(units, FoldingBudget(dsp=100, lut=60_000, bram=150),
                      lut_products=False)
    mixed = search(units, FoldingBudget(dsp=100, lut=60_000, bram=150))
    assert max(o.ii for o in mixed.values()) < max(o.ii for o in dsp_only.values())
    assert sum(o.res.dsp for o in mixed.values()) <= 100
    assert sum(o.res.lut for o in mixed.values()) <= 60_000
    moved = sum(o.lut_mults for o in mixed.values())
    # the fewest: one product fewer in LUTs would overflow the DSPs
    assert sum(o.res.dsp for o in mixed.values()) > 100 - 2 and moved > 0
