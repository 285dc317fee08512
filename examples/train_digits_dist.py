"""Train the digits MLP on a cluster -- or, run plainly, in one process.

    fluid-hw launch --pservers 2 --trainers 2 --mode sync examples/train_digits_dist.py \\
        --steps 20 --save-params A
    python examples/train_digits_dist.py --steps 20 --save-params B     # same parameters

Step ``s`` uses global batch ``s`` (``--batch-size`` rows of a fixed shuffle
of the training split, reshuffled each epoch).  With T trainers, trainer t
takes the t-th of T equal slices of it; a plain run takes the whole batch.  As
each trainer's loss is the mean over its slice and the servers average the
trainers' gradients, both runs take the same steps (up to float rounding).

Under ``fluid-hw launch`` the role (server or trainer, which one) comes from
the environment (:class:`fluid_hw.backends.cluster.ClusterRole`); checkpoints
and ``--resume`` are set by the launcher too.  Trainer 0 prints the final test
accuracy and saves the parameters.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence

import fluid_hw as fluid
from fluid_hw.backends.cluster import ClusterRole, start_step
from fluid_hw.backends.cluster.program_job import global_batch, serve
from fluid_hw.backends.cpu.trainer import evaluate
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.transpiler import DistributeTranspiler, DistributeTranspilerConfig


def make_optimizer(name: str, lr: float, decay_steps: int) -> Callable[[], object]:
    """A factory the model calls inside its program guard (where the schedule's ops go)."""
    def build() -> object:
        rate: object = lr
        if decay_steps:
            rate = fluid.layers.polynomial_decay(lr, decay_steps, end_learning_rate=lr / 10)
        return _optimizer(name, rate)
    return build


def _optimizer(name: str, lr: object) -> object:
    if name == "adam":
        return fluid.optimizer.Adam(learning_rate=lr)
    if name == "momentum":
        return fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9)
    return fluid.optimizer.SGD(learning_rate=lr)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    ap.add_argument("--batch-size", type=int, default=64,
                    help="global batch, split over the trainers (default 64)")
    ap.add_argument("--optimizer", choices=["adam", "momentum", "sgd"], default="momentum",
                    help="momentum (0.9, default), adam or sgd")
    ap.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    ap.add_argument("--lr-decay-steps", type=int, default=0, metavar="N",
                    help="decay the learning rate linearly to lr/10 over N optimizer "
                    "updates (default 0: constant); in async mode every trainer's "
                    "gradient is one update, so use steps x trainers there")
    ap.add_argument("--save-params", metavar="DIR", help="save the trained parameters here")
    ap.add_argument("--min-block-size", type=int, default=1024,
                    help="smallest parameter block sent to one server (default 1024 "
                    "elements, so the MLP's weights are split)")
    ap.add_argument("--split-method", choices=["RoundRobin", "HashName"], default="RoundRobin")
    ap.add_argument("--log-every", type=int, default=20, help="print the loss every N steps")
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    role = ClusterRole.from_env()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    opt = make_optimizer(args.optimizer, args.lr, args.lr_decay_steps)
    m = models.digits_mlp(seed=args.seed, optimizer=opt)
    exe = fluid.Executor()
    scope = fluid.Scope()
    say = print
    if role.is_pserver:
        with fluid.scope_guard(scope):
            serve(exe, _transpile(role, m, args), role)
        return 0

    xtr, xte, ytr, yte = load_digits_split()
    if args.batch_size % role.trainers:
        raise SystemExit(f"--batch-size {args.batch_size} does not split over "
                         f"{role.trainers} trainers")
    share = args.batch_size // role.trainers
    with fluid.scope_guard(scope):
        if role.is_local:
            main_prog, exit_prog = m.main, None
            exe.run(m.startup)
        else:
            t = _transpile(role, m, args)
            main_prog, exit_prog = t.get_trainer_program(), t.get_trainer_exit_program()
            exe.run(t.get_trainer_startup_program())
        first = start_step(scope)
        say(f"pid {os.getpid()}, starting at step {first} of {args.steps}",
            flush=True)
        t0 = time.perf_counter()
        for step in range(first, args.steps):
            idx = global_batch(step, len(xtr), args.batch_size, args.seed)
            idx = idx[role.trainer_id * share:(role.trainer_id + 1) * share]
            (loss,) = exe.run(main_prog, feed={"pixels": xtr[idx], "label": ytr[idx]},
                              fetch_list=[m.loss])
            if args.log_every and (step + 1) % args.log_every == 0:
                say(f"step {step + 1} loss {float(loss[0]):.4f}", flush=True)
        dt = time.perf_counter() - t0
        done = args.steps - first
        if exit_prog is not None:
            exe.run(exit_prog)
        if done > 0:
            say(f"{done} steps in {dt:.2f} s, {1e3 * dt / done:.2f} ms/step",
                flush=True)
        if role.trainer_id == 0:
            acc = evaluate(exe, m.test_program, m.feed_names, m.accuracy, (xte, yte))
            say(f"final test accuracy {acc:.4f}", flush=True)
            if args.save_params:
                fluid.io.save_params(exe, args.save_params, m.main)
                say(f"saved parameters to {args.save_params}", flush=True)
    return 0


def _transpile(role: ClusterRole, m: models.Model, args: argparse.Namespace
               ) -> DistributeTranspiler:
    cfg = DistributeTranspilerConfig(mode=role.transpiler_mode,
                                     min_block_size=args.min_block_size,
                                     split_method=args.split_method)
    t = DistributeTranspiler(cfg)
    t.transpile(role.trainer_id, program=m.main, pservers=role.pserver_endpoints,
                trainers=role.trainers, sync_mode=role.sync_mode, startup_program=m.startup)
    return t


if __name__ == "__main__":
    sys.exit(main())
