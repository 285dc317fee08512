"""CPU executor overhead: a 64-128-64-10 MLP forward at batch 256, executor vs the
same forward written by hand in numpy with the same weights.

    python benchmarks/bench_cpu_executor.py [--batch 256] [--repeat 7] [--number 200]

Prints a table; the figure that matters is the ratio (goal: <= 1.3x).
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

# Both sides use the same BLAS; one thread each keeps the comparison about the executor,
# not about BLAS threads spinning on a busy 2-core machine (--threads N to change).
_threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, _threads)

import numpy as np  # noqa: E402 - after the BLAS thread setting

import fluid_hw as fluid  # noqa: E402


def build(sizes: list[int]) -> tuple[fluid.Program, fluid.Program, fluid.Variable]:
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h = fluid.layers.data(name="x", shape=[sizes[0]])
        for n in sizes[1:-1]:
            h = fluid.layers.fc(h, size=n, act="relu")
        y = fluid.layers.fc(h, size=sizes[-1], act="softmax")
    return main, startup, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--threads", default="1", help="BLAS threads (as --threads=N)")
    args = ap.parse_args()
    sizes = [64, 128, 64, 10]
    prog, startup, y = build(sizes)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    x = np.random.default_rng(0).random((args.batch, sizes[0]), dtype=np.float32)
    with fluid.scope_guard(scope):
        exe.run(startup)
        params = [np.array(scope.find_var(p.name).get_tensor())
                  for p in prog.global_block().all_parameters()]

        def run_executor() -> np.ndarray:
            return exe.run(prog, feed={"x": x}, fetch_list=[y])[0]

        def run_numpy() -> np.ndarray:
            h = x
            for i in range(0, len(params) - 2, 2):
                h = np.maximum(h @ params[i] + params[i + 1], np.float32(0))
            z = h @ params[-2] + params[-1]
            e = np.exp(z - z.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        np.testing.assert_allclose(run_executor(), run_numpy(), rtol=1e-5, atol=1e-7)
        rows = []
        for name, fn in (("numpy (hand-written)", run_numpy), ("fluid-hw Executor", run_executor)):
            fn()
            t = min(timeit.repeat(fn, repeat=args.repeat, number=args.number)) / args.number
            rows.append((name, t))
    base = rows[0][1]
    print(f"MLP {'-'.join(map(str, sizes))} forward, batch {args.batch}, "
          f"best of {args.repeat}x{args.number} runs, "
          f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}")
    print(f"{'implementation':24s} {'time/run (us)':>14s} {'ratio':>7s}")
    for name, t in rows:
        print(f"{name:24s} {t * 1e6:14.1f} {t / base:6.2f}x")
    ratio = rows[1][1] / base
    print(f"executor / numpy = {ratio:.2f}x (goal <= 1.30x)")


if __name__ == "__main__":
    main()
