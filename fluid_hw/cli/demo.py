"""The demo: the main job of ``make demo``.

The flow so far: build the digits MLP with the layers API, train it with Adam on
the CPU executor (loss per epoch, test accuracy, loss curve as PNG), save the
inference model, reload it and check it predicts the same; quantise it to int8
and print float and int8 (golden model) accuracies side by side.  Later stages extend
this flow (quantise -> FPGA -> bitstream -> report).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import History, train
from fluid_hw.datasets import load_digits_split
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
        ax2.plot([e.epoch for e in hist.epochs], [e.test_accuracy for e in hist.epochs],
                 color="tab:green", marker=".", label="test accuracy")
        ax2.set_ylabel("test accuracy")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def run_demo(out_dir: str, epochs: int = 30) -> int:
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
    agree = float((p.argmax(1) == pq.argmax(1)).mean())
    (out / "metrics.json").write_text(json.dumps(
        {"accuracy": {"float": acc, "golden_int8": acc_q}, "loss_per_epoch": hist.losses},
        indent=2) + "\n")
    print("\n== results ==")
    print(f"{'':24s} {'float32':>9s} {'int8 (golden)':>14s}")
    print(f"{'test accuracy':24s} {acc:9.4f} {acc_q:14.4f}")
    print(f"{'float/int8 agreement':24s} {'':9s} {agree:14.4f}")
    print(f"quantised model (int8): {qdir}")
    print(f"loss curve: {curve}")
    print(f"inference model: {model_dir}")
    for i in range(5):
        print(f"  image {i}: label {int(yte[i, 0])}  predicted {int(p2[i].argmax())}  "
              f"p(max) = {p2[i].max():.3f}")
    print(f"reloaded model gives identical outputs: {same}")
    return 0 if same else 1
