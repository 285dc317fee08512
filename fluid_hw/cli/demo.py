"""The demo: the main job of ``make demo``.

The flow so far: build the digits MLP with the layers API, train it with Adam on
the CPU executor (loss per epoch, test accuracy, loss curve as PNG), save the
inference model, reload it and check it predicts the same; quantise it to int8
and print float and int8 (golden model) accuracies side by side.  Later stages extend
this flow (quantise -> FPGA -> bitstream -> report).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import History, train
from fluid_hw.backends.fpga import (
    bitstream,
    compile_model,
    read_report,
    simulate,
    write_report_html,
)
from fluid_hw.datasets import load_digits_split
from fluid_hw.fileio import atomic_write
from fluid_hw.frontend import models
from fluid_hw.passes import QuantConfig, quantization_report, quantize


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)) and len(v) > 4:
        return f"[{len(v)} values]"
    return str(v)


def plot_losses(hist: History, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([e.epoch for e in hist.epochs], hist.losses, marker="o", label="train loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean cross-entropy")
    ax.set_title(title)
    if hist.epochs and hist.epochs[0].test_accuracy is not None:
        ax2 = ax.twinx()
        ax2.plot([e.epoch for e in hist.epochs],
                 [np.nan if e.test_accuracy is None else e.test_accuracy for e in hist.epochs],
                 color="tab:green", marker=".", label="test accuracy")
        ax2.set_ylabel("test accuracy")
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")  # per process
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def _num(v: object) -> str:
    if v is None:
        return "?"
    return f"{v:.1f}".removesuffix(".0") if isinstance(v, float) else str(v)


def _summary(acc: float, acc_q: float, r: dict) -> str:
    """The table a person reads at the end of the demo."""
    est, meas = r.get("estimate", {}), r.get("measured", {})
    hw = r.get("accuracy", {}).get("hardware_int8")
    rows = [
        ("test accuracy float32 / int8 golden / int8 hardware",
         f"{acc:.4f} / {acc_q:.4f} / {hw:.4f}" if hw is not None else f"{acc:.4f} / {acc_q:.4f}"),
        ("bit-exact vs golden model",
         f"{r.get('bit_exact')} ({r.get('mismatches', '?')} mismatches, {r.get('inputs', '?')} "
         "inputs)"),
        ("cycles per inference (measured / estimated)",
         f"{_num(meas.get('cycles_per_inference'))} / "
         f"{_num(est.get('cycles_per_inference'))}"),
        ("initiation interval, latency (cycles)",
         f"{_num(meas.get('initiation_interval'))}, {_num(meas.get('latency_cycles'))}"),
    ]
    fold = ", ".join(f"{k} {v['pe']}x{v['simd']}" for k, v in r.get("folding", {}).items())
    auto = r.get("autofold")
    how = ""
    if auto:
        given = auto.get("overrides") and set(auto["overrides"]) == set(auto["folding"])
        how = (f", {'fixed by the demo' if given else 'automatic'} within "
               f"{round(100 * auto['fraction'])} % of {auto['device']}")
    rows.append(("folding (PE x SIMD)" + how, fold))
    if "fmax_mhz" in r:
        rows.append(("Fmax (timing met at the target clock?)",
                     f"{r['fmax_mhz']:.1f} MHz ({r.get('timing_met')})"))
        crit = r.get("critical_path")
        if crit and not r.get("timing_met"):
            if isinstance(crit, dict):
                crit = (f"{crit.get('delay_ns', '?')} ns, {crit.get('start', '?')} -> "
                        f"{crit.get('end', '?')}")
            rows.append(("critical path", str(crit)[:120]))
    if "latency_us" in r:
        rows.append(("latency / throughput at Fmax" if "fmax_mhz" in r else
                     f"latency / throughput at {r.get('clock_mhz')} MHz",
                     f"{r['latency_us']:.2f} us / {r.get('throughput_per_s', 0):,.0f} per s"))
    goals = (r.get("bitstream") or {}).get("goals")
    if goals and goals.get("throughput_vs_multiplier_bound") is not None:
        rows.append(("goals: throughput >= 50 % of multiplier bound, latency < 4 us",
                     f"{100 * goals['throughput_vs_multiplier_bound']:.0f} % of "
                     f"{goals['multiplier_bound_per_s']:,.0f}/s "
                     f"({'met' if goals['throughput_goal_met'] else 'NOT met'}); "
                     f"{r['latency_us']:.2f} us "
                     f"({'met' if goals['latency_goal_met'] else 'NOT met'})"))
    used = r.get("resources_used") or est.get("resources", {})
    avail = r.get("resources_available", {})
    res = ", ".join(f"{k} {v}" + (f"/{avail[k]}" if k in avail else "")
                    for k, v in used.items() if k in ("lut", "ff", "dsp", "bram"))
    rows.append(("resources" + ("" if "resources_used" in r else " (estimate)"), res))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:{w}s}  {v}" for k, v in rows)


#: The demo's folding on a board: II 256 with 68 DSP products, the design whose place and
#: route takes about 2 minutes.  Automatic folding at 85 % of the 85F now goes much
#: further (shared requantisers, LUT multipliers beside the DSPs: II 32 estimated), at a
#: place-and-route time the demo cannot afford; `fluid-hw compile` folds automatically.
DEMO_FOLDING = {"fc_0": (1, 32), "fc_1": (1, 32), "fc_2": (1, 4)}


def run_demo(out_dir: str, epochs: int = 30, board: str | None = "ulx3s-85f",
             fraction: float = 0.85) -> int:
    """The flow; with a ``board`` the model is compiled for it (its folding fixed to
    :data:`DEMO_FOLDING`, checked against the device's budget) and its bitstream built,
    without one for the ``sim`` target."""
    target = board or "sim"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    xtr, xte, ytr, yte = load_digits_split()
    model = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.002))
    print("== inference program (the model as compiled later) ==")
    print(model.test_program)
    print(f"\n== training: {len(xtr)} images, {len(xte)} test images, Adam, {epochs} epochs ==")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(model.startup)
        hist = train(exe, model.main, model.feed_names, model.loss, (xtr, ytr), epochs,
                     batch_size=32, seed=0,
                     test=(model.test_program, model.accuracy, (xte, yte)))
        curve = out / "loss_curve.png"
        plot_losses(hist, curve, "digits MLP 64-128-64-10 (Adam)")
        model_dir = out / "mlp_inference"
        fluid.io.save_inference_model(str(model_dir), [model.image.name], [model.prediction],
                                      exe, model.main)
        (p,) = exe.run(model.test_program, feed={model.image.name: xte},
                       fetch_list=[model.prediction])
        print("\n== quantisation: int8 weights per channel, int8 activations ==")
        calib = [{model.image.name: xtr[i:i + 128]} for i in range(0, 512, 128)]
        qprog = quantize(model.test_program, calib, QuantConfig(), scope=fluid.global_scope(),
                         executor=exe, fetch_names=[model.prediction.name])
        (pq,) = exe.run(qprog, feed={model.image.name: xte}, fetch_list=[model.prediction.name])
        for row in quantization_report(qprog):
            print("  " + "  ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
        qdir = out / "mlp_int8"
        fluid.io.save_inference_model(str(qdir), [model.image.name], [model.prediction.name],
                                      exe, qprog)
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(model_dir), exe)
        (p2,) = exe.run(prog, feed={feeds[0]: xte}, fetch_list=fetches)
    acc = float((p.argmax(1) == yte[:, 0]).mean())
    acc_q = float((pq.argmax(1) == yte[:, 0]).mean())
    same = bool(np.array_equal(p, p2))
    print(f"reloaded float model gives identical outputs: {same}")

    print(f"\n== FPGA: compile the int8 model for target {target!r} ==")
    build = out / "build"
    st = compile_model(qdir, build, target=target, fraction=fraction,
                       folding=DEMO_FOLDING if board else {})
    assert st.lowered is not None  # a single-accelerator build
    print(f"  stages: {', '.join(s.name for s in st.lowered.stages)}")
    if st.autofold is not None:
        a = st.autofold
        print(f"  folding fixed by the demo (place-and-route time), within "
              f"{round(100 * a.fraction)} % of {a.device}'s multipliers, LUTs and block RAMs: "
              + ", ".join(f"{k} {pe}x{simd}" for k, (pe, simd) in a.folding.items()))
        if a.bound is not None:
            print(f"  against the multiplier bound: {a.bound.describe()}")
    print(f"\n== FPGA: simulate all {len(xte)} test images in Verilator, bit for bit ==")
    keys = simulate(build, {model.image.name: xte}, labels=yte[:, 0])
    if board:
        print(f"\n== FPGA: bitstream for {board} (Yosys + nextpnr from PyPI; the first "
              "run on a machine compiles the tools' WebAssembly, a few minutes) ==")
        bitstream(build, board=board)
    html = write_report_html(build)
    report = read_report(build)
    summary = _summary(acc, acc_q, report)
    atomic_write(out / "metrics.json", (json.dumps(
        {"accuracy": {"float": acc, "golden_int8": acc_q}, "loss_per_epoch": hist.losses},
        indent=2) + "\n").encode())
    print("\n== summary ==")
    print(summary)
    print(f"\nbuild folder: {build} (report.json, report.html, accelerator.v, registers.md, "
          f"model/{', accelerator.bit' if board else ''})")
    print(f"report: {html}")
    print(f"loss curve: {curve}")
    print("\n== bench: the same model on the CPU, onnxruntime, the GPU and the FPGA "
          "(quick: batches 1, 64, 1024) ==")
    from fluid_hw.bench import BenchOptions, format_table, run_bench, write_outputs

    bench = run_bench(model_dir, build, BenchOptions(quick=True, int8_model=str(qdir)),
                      out_dir=out / "bench", progress=None)
    paths = write_outputs(bench, out / "bench")
    print(format_table(bench))
    print(f"bench: {paths['html']} (full run: fluid-hw bench {model_dir} --int8 {qdir} "
          f"--fpga {build})")
    ok = same and bool(keys.get("bit_exact"))
    return 0 if ok else 1
