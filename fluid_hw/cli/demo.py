"""The demo: the main job of ``make demo``.

Stage 1 (foundation): build a digits classifier with the layers API, run it on
the CPU executor, save and reload the inference model, print the program and
the outputs.  Later stages extend this flow (train -> quantise -> FPGA ->
bitstream -> report).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import fluid_hw as fluid


def load_digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The project's one digits split: pixels / 16, 360 stratified test images."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.data / 16.0).astype("float32")
    y = d.target.astype("int64").reshape(-1, 1)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=360, random_state=0, stratify=y)
    return xtr, xte, ytr, yte


def build_mlp(seed: int = 1) -> tuple[fluid.Program, fluid.Program, fluid.Variable]:
    """64-128-64-10 MLP with softmax output."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = seed
    main.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="pixels", shape=[64], dtype="float32")
        h = fluid.layers.fc(x, size=128, act="relu")
        h = fluid.layers.fc(h, size=64, act="relu")
        prob = fluid.layers.fc(h, size=10, act="softmax")
    return main, startup, prob


def run_demo(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _, xte, _, yte = load_digits_split()
    main, startup, prob = build_mlp()
    print("== program ==")
    print(main)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        (p,) = exe.run(main, feed={"pixels": xte}, fetch_list=[prob])
        model_dir = out / "mlp_inference"
        saved = fluid.io.save_inference_model(str(model_dir), ["pixels"], [prob], exe, main)
    print(f"\nsaved inference model to {model_dir} ({len(saved)} parameter files)")
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(model_dir), exe)
        (p2,) = exe.run(prog, feed={feeds[0]: xte}, fetch_list=fetches)
    same = bool(np.array_equal(p, p2))
    pred = p.argmax(1)
    print("\n== outputs (untrained weights; training arrives with the training stage) ==")
    print(f"test images: {len(xte)}  output shape: {p.shape}  rows sum to 1: "
          f"{np.allclose(p.sum(1), 1, atol=1e-5)}")
    for i in range(5):
        print(f"  image {i}: label {int(yte[i, 0])}  predicted {int(pred[i])}  "
              f"p = {np.array2string(p[i], precision=3, suppress_small=True)}")
    print(f"accuracy (untrained): {(pred == yte[:, 0]).mean():.3f}")
    print(f"reloaded model gives identical outputs: {same}")
    return 0 if same else 1
