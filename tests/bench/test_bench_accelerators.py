"""``benchmarks/bench_accelerators.py`` on its smallest model (hls4ml's jet-tagging MLP,
4,256 MACs) without the bitstream: compiled for the ULX3S-85F, simulated in Verilator
bit for bit, and its figures checked against each other and the build's report
(throughput = clock / II, the bound = 156 DSPs x clock / MACs, latency = cycles /
clock), the clock marked as assumed; and the bitstream cache key follows the design
and the place-and-route options."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fluid_hw.backends.fpga import read_report

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_accelerators",
                                                  ROOT / "benchmarks/bench_accelerators.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_jet_mlp_simulated(tmp_path, capsys):
    bench = _bench()
    rc = bench.main(["--model", "jet_mlp", "--no-bitstream", "--inputs", "8",
                     "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "results.json").read_text())
    r = results["jet_mlp"]
    report = read_report(tmp_path / "jet_mlp" / "build")
    meas = report["measured"]
    # measured cycles from the simulation, bit-exact, at the target clock (assumed)
    assert r["bit_exact"] is True and report["bit_exact"] is True and r["inputs"] == 8
    assert r["initiation_interval"] == meas["initiation_interval"] > 0
    assert r["latency_cycles"] == meas["latency_cycles"] > r["initiation_interval"]
    assert r["fmax_mhz"] == report["clock_mhz"] and "assumed" in r["clock_how"]
    assert r["throughput_per_s"] == pytest.approx(r["fmax_mhz"] * 1e6 /
                                                  r["initiation_interval"])
    assert r["latency_us"] == pytest.approx(r["latency_cycles"] / r["fmax_mhz"])
    assert r["macs_per_inference"] == r["hardware_macs_per_inference"] == 4256
    assert r["dsp_available"] == 156
    assert r["bound_per_s"] == pytest.approx(156 * r["fmax_mhz"] * 1e6 / 4256)
    assert r["bound_ratio"] == pytest.approx(r["throughput_per_s"] / r["bound_per_s"])
    # efficiency over the multipliers the folding instantiates
    assert r["multipliers"] == sum(int(p) * int(s) for p, s in
                                   (f.split("x") for f in r["folding"].values()))
    assert r["efficiency"] == pytest.approx(4256 / (r["multipliers"] *
                                                    r["initiation_interval"]))
    assert r["resources_how"] == "estimate" and r["pnr_s"] is None
    assert r["goal_met"] == (r["latency_us"] <= 1.5)
    assert r["commit"] and r["measured_at"]
    # the table row says the clock is assumed and the resources estimated
    row = next(line for line in out.splitlines() if line.startswith("| jet_mlp"))
    assert "(assumed)" in row and "(est.)" in row and "| True |" in row

    # the bitstream cache key: stable, and it follows the design and the options
    build = tmp_path / "jet_mlp" / "build"
    opts = bench.BenchOptions(out=tmp_path)
    versions = {"yosys": "1", "nextpnr-ecp5": "2", "ecppack": "3"}
    key = bench.bitstream_key(build, opts, versions)
    assert key == bench.bitstream_key(build, opts, versions)
    assert key != bench.bitstream_key(build, bench.BenchOptions(out=tmp_path,
                                                                placer="heap"), versions)
    assert key != bench.bitstream_key(build, bench.BenchOptions(out=tmp_path,
                                                                router="router2"), versions)
    assert key != bench.bitstream_key(build, opts, {**versions, "nextpnr-ecp5": "2.1"})


def test_digits_models_default_to_lut_multipliers_and_their_target(tmp_path):
    """The digits MLPs' defaults (LUT products beside the DSPs, the cheapest folding
    reaching the model's target rate; int8 in latency mode) and the options overriding
    them; the int8 default lowers to II 64 with LUT products on the 85F (estimate)."""
    bench = _bench()
    digits, w4a4 = bench.BENCH_MODELS["digits_mlp"], bench.BENCH_MODELS["mlp_w4a4"]
    plain = bench.BenchOptions(out=tmp_path)
    assert bench.model_settings(digits, plain) == (True, bench.DIGITS_FPS)
    assert bench.model_settings(w4a4, plain) == (True, bench.W4A4_FPS)
    # LeNet-5: LUT products up to 80 % of the bound at the target clock
    assert bench.model_settings(bench.BENCH_MODELS["lenet5"], plain) == (True, bench.LENET_FPS)
    assert bench.model_settings(bench.BENCH_MODELS["ds_cnn"], plain) == (False, None)
    # the jet MLP's 1.5 us (latency mode) needs LUT products: its default too
    assert bench.model_settings(bench.BENCH_MODELS["jet_mlp"], plain) == (True, None)
    off = bench.BenchOptions(out=tmp_path, lut_multipliers=False, target_fps=0)
    assert bench.model_settings(digits, off) == (False, None)
    # their LUT-product designs route with the heap placer (docs/accelerators.md)
    assert bench.model_placer(digits, plain) == bench.model_placer(w4a4, plain) == "heap"
    assert bench.model_placer(bench.BENCH_MODELS["lenet5"], plain) is None
    assert bench.model_router(bench.BENCH_MODELS["lenet5"], plain) is None
    assert bench.model_router(digits, bench.BenchOptions(out=tmp_path, router="router2")) \
        == "router2"
    assert bench.model_placer(digits, bench.BenchOptions(out=tmp_path, placer="static")) \
        == "static"
    opts, mode = bench._compile_options(digits, 0.85, True, bench.DIGITS_FPS)
    assert mode == "latency" and opts.folding.lut_multipliers
    assert opts.folding.target_fps == bench.DIGITS_FPS

    from fluid_hw.backends.fpga import compile_model

    model_dir, calib, _, _, _, _ = bench._prepare(digits, tmp_path, 1)
    st = compile_model(model_dir, tmp_path / "build", opts, calibration=calib,
                       stop_after="lower")
    assert st.lowered is not None
    assert st.lowered.estimate().initiation_interval == 64
    assert sum(getattr(s, "lut_mults", 0) for s in st.lowered.specs) > 0
