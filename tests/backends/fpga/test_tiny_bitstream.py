"""MLPerf Tiny's keyword-spotting DS-CNN (``frontend.models.ds_cnn``, full size, randomly
initialised, calibrated on 64 random inputs) through ``fluid-hw compile --target
ulx3s-85f --budget-fraction 0.3 --bitstream``: Yosys, nextpnr and ecppack for real.  It
fits, nextpnr reports an Fmax, and Yosys' multipliers and block RAMs equal the
device-aware estimate.  (The dense autoencoder does not fit at 30 %: its 270 k weights
alone need 158 of the 85F's 208 block RAMs.)

Fast: the block-RAM and multiplier model of the issue-13 kinds (depthwise convolution,
average and global average pooling, table activation) against Yosys' counts of the
calibration designs that hold them (recorded with ``python -m
fluid_hw.backends.fpga.bitstream calibrate``)."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import read_report
from fluid_hw.cli.main import main
from fluid_hw.frontend import models

# Yosys (synth_ecp5 / synth_ice40 -dsp) on each design synthesised alone:
# (DP16KD | SB_RAM40_4K, MULT18X18D | SB_MAC16).  Their 1-channel convolutions at SIMD 3
# take the wide window generator (rtl.swg_wide): one SB_RAM40_4K more each on iCE40
# (its column queue), re-measured; ECP5's block RAMs unchanged.  The PE-4 / 4-lane designs
# re-measured (both families) after their PE lanes came to share requantisers (2d49763):
# fewer multipliers
YOSYS_COUNTS = {
    "conv_8_pe1": {"ecp5": (0, 5), "ice40": (4, 5)},
    "conv_8_pe4": {"ecp5": (0, 16), "ice40": (6, 16)},
    "conv_64_pe1": {"ecp5": (1, 5), "ice40": (6, 5)},
    "conv_64_pe4": {"ecp5": (0, 16), "ice40": (6, 16)},
    "conv_128_pe1": {"ecp5": (3, 5), "ice40": (11, 5)},
    "conv_dw_8_pe1": {"ecp5": (1, 8), "ice40": (5, 8)},
    "conv_dw_8_pe4": {"ecp5": (1, 22), "ice40": (8, 22)},
    "conv_dw_8_pe1_runtime": {"ecp5": (1, 8), "ice40": (10, 8)},
    "conv_dw_8_pe4_runtime": {"ecp5": (1, 22), "ice40": (16, 22)},
    "conv_dw_64_pe1": {"ecp5": (3, 8), "ice40": (12, 8)},
    "conv_dw_64_5x5s2_pe4": {"ecp5": (6, 22), "ice40": (18, 22)},
    "conv_avgpool_8_l1": {"ecp5": (1, 7), "ice40": (6, 7)},
    "conv_avgpool_8_l4": {"ecp5": (1, 24), "ice40": (10, 24)},
    # global pools: the line buffer holds the image's last rows and the next image's
    # first window rows (rtl.swg.line_rows)
    "conv_gap_8_l1": {"ecp5": (1, 7), "ice40": (7, 7)},
    "conv_gap_8_l4": {"ecp5": (1, 24), "ice40": (10, 24)},
    "conv_gap_128_l1": {"ecp5": (11, 7), "ice40": (44, 7)},
    "conv_table_8_l1": {"ecp5": (0, 5), "ice40": (4, 5)},
    "conv_table_8_l4": {"ecp5": (0, 16), "ice40": (6, 16)},
    # runtime parameters: a table RAM per lane (a block on both families), the pool's
    # one requantisation entry in registers
    "conv_avgpool_8_l1_runtime": {"ecp5": (1, 7), "ice40": (6, 7)},
    "conv_avgpool_8_l4_runtime": {"ecp5": (1, 24), "ice40": (10, 24)},
    "conv_table_8_l1_runtime": {"ecp5": (1, 5), "ice40": (5, 5)},
    "conv_table_8_l4_runtime": {"ecp5": (4, 16), "ice40": (10, 16)},
}


@pytest.mark.parametrize("design", sorted(YOSYS_COUNTS))
def test_new_kinds_block_ram_and_multipliers_match_yosys(design):
    from fluid_hw.backends.fpga.bitstream import calibration_designs
    from fluid_hw.hls.autofold import device_estimate

    specs = calibration_designs()[design]
    for family, counts in YOSYS_COUNTS[design].items():
        e = device_estimate(specs, family, board_top=False)
        assert (e["bram"], e["dsp"]) == counts, family


@pytest.mark.slow
def test_ds_cnn_bitstream_for_the_ulx3s_85f_at_a_30_percent_budget(tmp_path):
    m = models.ds_cnn(seed=1)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        fluid.io.save_inference_model(str(tmp_path / "model"), [m.image.name],
                                      [m.prediction], exe, m.main)
    cal = tmp_path / "calibration.npy"
    np.save(cal, np.random.default_rng(0).standard_normal((64, 1, 49, 10)).astype(np.float32))
    out = tmp_path / "build"
    assert main(["compile", str(tmp_path / "model"), "--target", "ulx3s-85f",
                 "--calibration", str(cal), "--budget-fraction", "0.3", "--out", str(out),
                 "--bitstream"]) == 0
    r = read_report(out)
    assert {s["op"] for s in r["stages"]} >= {"quantized_conv2d", "quantized_pool2d",
                                              "quantized_fc"}
    assert r["autofold"]["resources"]["dsp"] <= r["autofold"]["limits"]["dsp"]
    assert r["fmax_mhz"] > 0 and isinstance(r["timing_met"], bool)
    assert (out / r["bitstream"]["file"]).is_file()
    cmp_ = r["resources_estimate_vs_actual"]
    assert cmp_["dsp"]["estimate"] == cmp_["dsp"]["actual"] > 0
    assert cmp_["bram"]["estimate"] == cmp_["bram"]["actual"] > 0
    for res in ("lut", "ff"):
        assert abs(cmp_[res]["error_pct"]) <= 20, (res, cmp_[res])
    for res, n in r["resources_used"].items():
        assert n <= r["resources_available"].get(res, n), res
