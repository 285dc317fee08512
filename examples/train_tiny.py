"""Train one of MLPerf Tiny's reference networks on synthetic data and save it.

    python examples/train_tiny.py --model resnet8 --epochs 3 --out build/resnet8
    python examples/train_tiny.py --model ds_cnn
    python examples/train_tiny.py --model fc_autoencoder

No data set can be downloaded here, so the data are made up, with something to
learn: for the classifiers every class is a fixed random pattern (smoothed, so it
has the spatial structure convolutions pick up) seen through noise and a random
gain; for the autoencoder the "normal" sounds lie near a random 8-dimensional
subspace of the 640 features and the anomalies do not, so the reconstruction error
separates them.  Accuracy on the real data sets is not the point: the saved model
(``io.save_inference_model``) is what ``fluid-hw compile`` takes, and
``--calibration`` writes a batch of inputs for its quantiser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import evaluate, train
from fluid_hw.frontend import tiny_models

#: model -> (input shape, classes; 0 for the autoencoder)
SHAPES = {"resnet8": ((3, 32, 32), 10), "ds_cnn": ((1, 49, 10), 12),
          "fc_autoencoder": ((640,), 0)}


def _smooth(x: np.ndarray) -> np.ndarray:
    """A 3x3 box blur over the last two axes (edges wrap): patterns with local structure."""
    return sum(np.roll(np.roll(x, i, -2), j, -1) for i in (-1, 0, 1) for j in (-1, 0, 1)) / 9


def class_patterns(n: int, shape: tuple[int, ...], classes: int, noise: float = 0.8,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` examples: the pattern of a random class (the same patterns for every seed)
    times a gain in [0.7, 1.3], plus Gaussian noise.  (float32 inputs, int64 labels
    [n, 1])."""
    patterns = _smooth(np.random.default_rng(1234).standard_normal((classes, *shape)))
    rng = np.random.default_rng(seed)
    patterns /= patterns.std(axis=tuple(range(1, patterns.ndim)), keepdims=True)
    labels = rng.integers(0, classes, n)
    gain = rng.uniform(0.7, 1.3, (n,) + (1,) * len(shape))
    x = patterns[labels] * gain + noise * rng.standard_normal((n, *shape))
    return x.astype(np.float32), labels.reshape(-1, 1).astype(np.int64)


def machine_sounds(n: int, dim: int = 640, latent: int = 8, anomalous: bool = False,
                   seed: int = 0) -> np.ndarray:
    """``n`` feature vectors near a fixed ``latent``-dimensional subspace (the same one
    for every seed); ``anomalous`` ones get an extra component off it."""
    basis = np.random.default_rng(1234).standard_normal((latent, dim)) / np.sqrt(latent)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, latent)) @ basis + 0.1 * rng.standard_normal((n, dim))
    if anomalous:
        x += rng.standard_normal((n, dim))
    return x.astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(SHAPES), default="ds_cnn")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=512, help="training examples")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.003, help="Adam's learning rate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None,
                    help="where to save the inference model (default build/<model>)")
    ap.add_argument("--calibration", type=Path, default=None,
                    help="also save 64 training inputs here (.npy) for fluid-hw compile")
    args = ap.parse_args(argv)
    shape, classes = SHAPES[args.model]
    out = args.out or Path("build") / args.model
    build = getattr(tiny_models, args.model)
    m = build(seed=args.seed, optimizer=lambda: fluid.optimizer.Adam(learning_rate=args.lr))
    exe = fluid.Executor()
    n_test = max(64, args.samples // 4)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        print(f"{args.model}: {tiny_models.macs(m.test_program):,} MACs per inference, "
              f"{tiny_models.parameter_count(m.test_program):,} parameters")
        if classes:
            xtr, ytr = class_patterns(args.samples, shape, classes, seed=args.seed)
            xte, yte = class_patterns(n_test, shape, classes, seed=args.seed + 1)
            train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), args.epochs,
                  args.batch_size, seed=args.seed,
                  test=(m.test_program, m.accuracy, (xte, yte)))
        else:
            xtr = machine_sounds(args.samples, shape[0], seed=args.seed)
            train(exe, m.main, m.feed_names, m.loss, (xtr,), args.epochs, args.batch_size,
                  seed=args.seed)
            for kind, anomalous in (("normal", False), ("anomalous", True)):
                xs = machine_sounds(n_test, shape[0], anomalous=anomalous, seed=args.seed + 1)
                err = evaluate(exe, m.test_program, m.feed_names, m.loss, (xs,))
                print(f"reconstruction error, {kind} test sounds: {err:.4f}")
        fluid.io.save_inference_model(out, [m.image.name], [m.prediction], exe, m.main)
        print(f"saved the inference model to {out}")
        if args.calibration is not None:
            args.calibration.parent.mkdir(parents=True, exist_ok=True)
            np.save(args.calibration, xtr[:64])
            print(f"saved 64 calibration inputs to {args.calibration}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
