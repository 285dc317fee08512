"""What the passes buy on the digits CNN: peak memory before/after ``memory_reuse``
and executor time before/after fusion.

    python benchmarks/bench_passes.py [--batch 256] [--repeat 7] [--number 20]

Memory: the bytes of temporaries the scope holds (the CPU executor keeps every
variable's latest value until the run ends), both as the pass plans it and as
measured after every op of a real run (distinct buffers, views counted once).
Shown on the pruned program (before fusion) and on the fused one: fusion itself
removes most intermediates, which leaves memory_reuse less to share.

Time: best-of executor time per run of the pruned program, the fused program
(inference_pipeline), and, for reference, the int8 golden model.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import fluid_hw as fluid
from fluid_hw.frontend import models
from fluid_hw.ir.lod import LoDTensor
from fluid_hw.passes import PassContext, PassManager, get_pass, inference_pipeline, quantize


def _buffers(value: object, out: dict[int, int]) -> None:
    """The distinct memory blocks behind a scope value (views count once)."""
    if isinstance(value, LoDTensor):
        value = value.data
    if isinstance(value, list):
        for v in value:
            _buffers(v, out)
        return
    if isinstance(value, np.ndarray):
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        out[id(base)] = base.nbytes


def measured_peak(program: fluid.Program, params: fluid.Scope, feed: dict[str, np.ndarray],
                  fetch: list[str]) -> int:
    """Largest number of bytes the run's own scope holds after any op (parameters and the
    fed batch excluded)."""
    exe = fluid.Executor()
    fed: dict[int, int] = {}
    for v in feed.values():
        _buffers(v, fed)
    peak = 0

    def hook(ctx) -> None:  # type: ignore[no-untyped-def]
        nonlocal peak
        held: dict[int, int] = {}
        for v in ctx.scope.vars.values():
            _buffers(v, held)
        peak = max(peak, sum(b for k, b in held.items() if k not in fed))

    exe.hooks.append(hook)
    exe.run(program, feed=feed, fetch_list=fetch, scope=fluid.Scope(params))
    return peak


def best_times(programs: list[fluid.Program], params: fluid.Scope,
               feed: dict[str, np.ndarray], fetch: list[str], repeat: int,
               number: int) -> list[float]:
    """Best time per run of each program; the programs take turns in every round, so a
    change in machine load hits them all alike."""
    exe = fluid.Executor()
    runs = []
    for prog in programs:
        scope = fluid.Scope(params)

        def once(prog: fluid.Program = prog, scope: fluid.Scope = scope) -> None:
            exe.run(prog, feed=feed, fetch_list=fetch, scope=scope)

        once()
        runs.append(once)
    best = [float("inf")] * len(programs)
    for _ in range(repeat):
        for i, once in enumerate(runs):
            best[i] = min(best[i], timeit.timeit(once, number=number) / number)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=20)
    args = ap.parse_args()

    m = models.digits_cnn()
    params = fluid.Scope()
    exe = fluid.Executor()
    with fluid.scope_guard(params):
        exe.run(m.startup)
    rng = np.random.default_rng(0)
    for v in m.test_program.global_block().vars.values():  # non-trivial batch-norm statistics
        if v.name.startswith("batch_norm") and v.persistable:
            lo, hi = (0.5, 2.0) if v.name.endswith(".w_2") else (-0.5, 0.5)
            params.vars[v.name] = rng.uniform(lo, hi, tuple(v.shape)).astype(np.float32)
    x = rng.random((args.batch, 1, 8, 8), dtype=np.float32)
    feed, fetch = {"pixels": x}, [m.prediction.name]
    ctx = PassContext(scope=params, executor=exe, feed_names=["pixels"], fetch_names=fetch)

    pruned = PassManager(["prune"]).run(m.test_program, ctx)
    fused = inference_pipeline().run(m.test_program, ctx)
    calib = [{"pixels": rng.random((128, 1, 8, 8), dtype=np.float32)}]
    int8 = quantize(m.test_program, calib, scope=params, executor=exe, fetch_names=fetch)

    want = exe.run(pruned, feed=feed, fetch_list=fetch, scope=fluid.Scope(params))[0]
    for prog in (fused,):
        got = exe.run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope(params))[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    print(f"digits CNN, batch {args.batch}")
    print()
    print(f"{'memory_reuse on':24s} {'planned before':>15s} {'planned after':>14s} "
          f"{'measured before':>16s} {'measured after':>15s} {'ratio':>7s}")
    for name, prog in (("pruned program", pruned), ("fused program", fused)):
        rctx = PassContext(feed_names=["pixels"], fetch_names=fetch)
        reused, _ = get_pass("memory_reuse", batch_size=args.batch).apply(prog, rctx)
        plan = rctx.reports["memory_reuse"]
        before = measured_peak(prog, params, feed, fetch)
        after = measured_peak(reused, params, feed, fetch)
        got = exe.run(reused, feed=feed, fetch_list=fetch, scope=fluid.Scope(params))[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        print(f"{name:24s} {plan.peak_bytes_before:15d} {plan.peak_bytes_after:14d} "
              f"{before:16d} {after:15d} {after / before:6.2f}x")
    print()
    named = [("pruned (unfused)", pruned), ("fused (pipeline)", fused),
             ("int8 golden model", int8)]
    times = best_times([p for _, p in named], params, feed, fetch, args.repeat, args.number)
    rows = [(name, len(p.global_block().ops), t) for (name, p), t in zip(named, times)]
    base = rows[0][2]
    print(f"{'executor time':24s} {'ops':>5s} {'time/run (ms)':>14s} {'vs unfused':>11s}")
    for name, n_ops, t in rows:
        print(f"{name:24s} {n_ops:5d} {t * 1e3:14.3f} {t / base:10.2f}x")
    print(f"fusion speed-up: {base / rows[1][2]:.2f}x")


if __name__ == "__main__":
    main()
