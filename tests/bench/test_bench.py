"""``fluid-hw bench`` on a small model: a digits MLP 64-16-10 (three epochs), compiled
for the ``sim`` target and simulated in Verilator, then benchmarked on the CPU
executor, onnxruntime, CUDA (skipped without a GPU) and the FPGA build.  The figures
are checked for consistency with each other and with the build's report."""

from __future__ import annotations

import json
import os
import re
import xml.dom.minidom

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import train
from fluid_hw.backends.cuda import cuda_available
from fluid_hw.backends.fpga import compile_model, simulate
from fluid_hw.bench import BenchOptions, goals, merge_rows, run_bench
from fluid_hw.bench.energy import RaplMeter, cpu_meter
from fluid_hw.bench.fpga_row import uart_bytes_per_inference
from fluid_hw.cli.main import main
from fluid_hw.datasets import load_digits_split
from fluid_hw.errors import BenchError
from fluid_hw.frontend import models


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(float model folder, build folder): trained, compiled, simulated on 64 images."""
    root = tmp_path_factory.mktemp("bench")
    xtr, xte, ytr, yte = load_digits_split()
    m = models.digits_mlp(hidden=(16,), optimizer=fluid.optimizer.Adam(learning_rate=0.01))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=3, batch_size=32, log=None)
        fluid.io.save_inference_model(str(root / "model"), ["pixels"], [m.prediction], exe,
                                      main_program=m.test_program)
    build = root / "build"
    compile_model(root / "model", build, target="sim", calibration={"pixels": xtr[:256]})
    simulate(build, {"pixels": xte[:64]}, labels=yte[:64, 0])
    return root / "model", build


def _by(report, backend, variant):
    return next(r for r in report["rows"] if r["backend"] == backend and r["variant"] == variant)


@pytest.mark.slow  # the module fixture trains, compiles and simulates: ~25 s
def test_bench_measures_every_backend_and_the_figures_agree(small, tmp_path, capsys):
    model, build = small
    out = tmp_path / "out"
    assert main(["bench", str(model), "--fpga", str(build), "--batches", "1,8,32",
                 "--budget", "0.01", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    # progress while it runs: one line per back end and batch size (stderr)
    if os.environ.get("FLUID_HW_QUIET") != "1":
        assert "fpga:sim: batch 32: device" in captured.err
    report = json.loads((out / "bench.json").read_text())
    assert report["schema"] == "fluid-hw/bench/1" and report["options"]["batches"] == [1, 8, 32]
    assert report["test_set"]["inputs"] == 360 and report["model"]["quantized"] is False

    measured = [r for r in report["rows"] if r["status"] == "measured"]
    names = {(r["backend"], r["variant"]) for r in measured}
    assert {("cpu", "float32"), ("cpu", "int8 golden model"), ("onnxruntime", "float32"),
            ("onnxruntime", "int8 (QDQ export)"), ("fpga:sim", "int8 accelerator")} <= names
    if not cuda_available():
        cuda = _by(report, "cuda", "float32")
        assert cuda["status"] == "skipped" and cuda["reason"].startswith("no GPU")
        assert "skipped: cuda float32: no GPU" in text
    for r in measured:
        host = r["latency_us"]["host"]
        assert 0 < host["median_us"] <= host["p99_us"]
        sweep = {t["batch"]: t for t in r["throughput"]}
        assert sorted(sweep) == [1, 8, 32]
        for b, t in sweep.items():  # throughput = batch / latency, both as reported
            assert t["per_s"] == pytest.approx(b / (t["latency_us"] * 1e-6), rel=1e-9)
        assert sweep[1]["latency_us"] == pytest.approx(host["median_us"], rel=1e-9)
        assert 0.0 <= r["accuracy"] <= 1.0

    # the int8 rows run the build's model/: the golden model and the accelerator agree
    # on every test image (the hardware is bit-exact), onnxruntime's QDQ nearly so
    q = _by(report, "cpu", "int8 golden model")
    assert q["model_source"] == "the build's model/"
    f = _by(report, "fpga:sim", "int8 accelerator")
    assert f["agreement"] == 1.0 and f["accuracy"] == q["accuracy"]
    assert _by(report, "onnxruntime", "float32")["agreement"] >= 0.99
    assert _by(report, "onnxruntime", "int8 (QDQ export)")["agreement"] >= 0.95

    # the FPGA figures: the report's measured cycles at the target clock, plus the host
    # programs and the UART at the default baud rate, one vector at a time
    rep = json.loads((build / "report.json").read_text())
    lat, ii = rep["measured"]["latency_cycles"], rep["measured"]["initiation_interval"]
    hz = rep["clock_mhz"] * 1e6
    assert f["clock"]["how"].startswith("target clock") and "fmax_mhz" not in rep
    assert f["latency_us"]["device"]["median_us"] == pytest.approx(lat / hz * 1e6)
    design = json.loads((build / "design.json").read_text())
    up, down = uart_bytes_per_inference(design)
    assert (f["uart"]["bytes_in"], f["uart"]["bytes_out"]) == (up, down)
    assert f["uart"]["us_per_inference"] == pytest.approx((up + down) * 10 / 3_000_000 * 1e6)
    assert f["uart"]["us_per_inference"] > 100  # hundreds of us: said plainly
    for t in f["throughput"]:
        b = t["batch"]
        assert t["device_latency_us"] == pytest.approx((lat + (b - 1) * ii) / hz * 1e6)
        assert t["latency_us"] == pytest.approx(
            t["host_programs_us"] + b * (f["uart"]["us_per_inference"]
                                         + f["latency_us"]["device"]["median_us"]))
    assert "hundreds of us" in text and "UART" in text

    # energy: only from named sources; none invented
    for r in measured:
        e = r["energy"]
        assert e["source"]
        if e["source"].startswith("unavailable"):
            assert not any(k.startswith("j_per_inference") for k in e)
    assert "no documented power estimate" in f["energy"]["source"]
    assert all(g["status"].startswith("not measured") for g in report["goals"])
    assert [p["figure"] for p in report["published"]] == [
        "median 130.8 inferences/s", "12.3 M images/s at 0.31 us"]
    assert "published, not measured" in text

    page = (out / "bench.html").read_text()
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) >= 3  # latency, throughput, resources
    for svg in svgs:  # well-formed
        xml.dom.minidom.parseString(svg)
    assert svgs[1].count("<polyline") == sum(  # one line per measured host/device series
        1 + any("device_per_s" in t for t in r["throughput"]) for r in measured)
    assert not re.search(r"<(script|link|img)\b", page)  # self-contained
    assert (out / "model.int8.onnx").is_file() and (out / "model.float.onnx").is_file()


@pytest.mark.slow
def test_fpga_power_estimate_gives_energy_and_merge_takes_gpu_rows(small, tmp_path):
    from fluid_hw.bench import PowerEstimate

    model, build = small
    opts = BenchOptions(batches=[1, 4], budget_s=0.005, backends=("fpga",),
                        fpga_power=PowerEstimate(0.5, "a stated test figure"))
    report = run_bench(model, build, opts, progress=None)
    (f,) = report["rows"]
    dev1 = f["latency_us"]["device"]["median_us"] * 1e-6
    assert f["energy"]["j_per_inference_batch1"] == pytest.approx(0.5 * dev1)
    assert "a stated test figure" in f["energy"]["source"]

    # a GPU machine's bench.json of the same model: its cuda rows come in, and the
    # goals compare them (here a row as `make gpu-check` writes it, 10 us on the device)
    gpu = {"schema": "fluid-hw/bench/1", "model": dict(report["model"]),
           "machine": {"processor": "elsewhere"},
           "rows": [{"backend": "cuda", "variant": "float32, CUDA graph", "status": "measured",
                     "latency_us": {"device": {"median_us": 1000 * dev1 * 1e6},
                                    "host": {"median_us": 50.0}},
                     "energy": {"source": "NVML", "j_per_inference_batch1": 1e-3}}]}
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    merge_rows(report, tmp_path / "gpu.json")
    g = goals(report)
    assert [x["status"] for x in g] == ["met", "met"]
    assert "1000.0x" in g[0]["detail"]
    gpu["model"]["fingerprint"] = "0" * 64
    (tmp_path / "other.json").write_text(json.dumps(gpu))
    with pytest.raises(BenchError, match="measured another model"):
        merge_rows(report, tmp_path / "other.json")


@pytest.mark.slow
def test_clear_errors_for_bad_folders(small, tmp_path, capsys):
    model, _ = small
    cases = [
        (["bench", str(tmp_path / "none")], r"MODEL_DIR .*none: no such folder"),
        (["bench", str(tmp_path)], r"no __model__ file, so not a saved inference model"),
        (["bench", str(model), "--fpga", str(tmp_path / "nobuild")],
         r"--fpga .*nobuild: no such build folder; make one with `fluid-hw compile"),
        (["bench", str(model), "--test", str(tmp_path / "x.npz")], r"test set .*no such file"),
        (["bench", str(model), "--backends", "tpu"], r"unknown back end\(s\) \['tpu'\]"),
        (["bench", str(model), "--fpga-power", "0.3"], r"--fpga-power and --fpga-power-source"),
    ]
    empty_build = tmp_path / "empty_build"
    empty_build.mkdir()
    (empty_build / "report.json").write_text("{}")
    cases.append((["bench", str(model), "--fpga", str(empty_build), "--backends", "fpga"],
                  r"--fpga .*empty_build: not a usable build folder"))
    for argv, msg in cases:
        assert main([*argv, "--out", str(tmp_path / "o")]) == 2, argv
        err = capsys.readouterr().err
        assert re.search(msg, err), (argv, err)


@pytest.mark.slow
def test_an_int8_model_dir_takes_the_float_model_from_the_build_or_says_why_not(small):
    _, build = small
    opts = BenchOptions(batches=[1, 2], budget_s=0.005, backends=("cpu", "fpga"))
    report = run_bench(build / "model", build, opts, progress=None)
    assert report["model"]["quantized"] is True
    q = _by(report, "cpu", "int8 golden model")
    assert q["status"] == "measured" and q["model_source"] == "MODEL_DIR"
    f32 = _by(report, "cpu", "float32")  # compiled from float: the build keeps it
    assert f32["status"] == "measured" and f32["model_source"] == "the build's float_model/"
    assert _by(report, "fpga:sim", "int8 accelerator")["agreement"] == 1.0
    report = run_bench(build / "model", None, opts, progress=None)
    f32 = _by(report, "cpu", "float32")
    assert f32["status"] == "skipped" and "MODEL_DIR is quantised" in f32["reason"]
    assert "--fpga BUILD" in _by(report, "fpga", "int8 accelerator")["reason"]


def test_rapl_counters_read_with_wraparound(tmp_path):
    assert cpu_meter(tmp_path / "absent")[0] is None
    assert "no RAPL counters" in cpu_meter(tmp_path / "absent")[1]
    d = tmp_path / "intel-rapl:0"
    d.mkdir()
    (d / "name").write_text("package-0\n")
    (d / "max_energy_range_uj").write_text("1000000\n")
    (d / "energy_uj").write_text("999000\n")
    (tmp_path / "intel-rapl:0:0").mkdir()  # a sub-domain (core): not counted twice
    meter, source = cpu_meter(tmp_path)
    assert isinstance(meter, RaplMeter) and "package-0" in source
    meter.start()
    (d / "energy_uj").write_text("4000\n")  # wrapped past 1 J
    assert meter.stop() == pytest.approx(5000e-6)
    np.testing.assert_equal(len(meter.domains), 1)
