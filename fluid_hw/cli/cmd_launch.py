"""``fluid-hw launch``: run a training script as a cluster job on MPI."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..backends.cluster.launch import LaunchSpec, launch, print_commands

    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    spec = LaunchSpec(
        script=args.script, args=script_args, pservers=args.pservers, trainers=args.trainers,
        mode=args.mode, resume=args.resume, checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every, timeout=args.timeout, hosts=args.hosts,
        mpiexec=args.mpiexec, max_restarts=args.max_restarts, key_file=args.key_file)
    if args.print_commands:
        spec.check()
        print_commands(spec, sys.stdout.write)
        return 0
    return launch(spec)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "launch", help="run a training script on MPI: parameter servers + trainers, or "
        "collective all-reduce",
        description="Start P parameter servers and T trainers (ranks 0..P-1 serve, the rest "
        "train) with the mpich wheel's mpiexec, print each rank's output with its role, and "
        "clean up after it.  The script finds its role with "
        "fluid_hw.backends.cluster.ClusterRole.from_env().  See docs/cluster.md.")
    p.add_argument("--pservers", type=int, default=2, help="parameter servers (default 2; "
                   "ignored in collective mode)")
    p.add_argument("--trainers", type=int, default=2, help="trainers (default 2)")
    p.add_argument("--mode", choices=["sync", "async", "collective"], default="sync",
                   help="sync: average gradients each step; async: apply each as it "
                   "arrives; collective: all-reduce among trainers, no servers")
    p.add_argument("--resume", action="store_true",
                   help="start from the last complete checkpoint")
    p.add_argument("--checkpoint-dir", help="where servers (or trainer 0) checkpoint "
                   "(default build/cluster/<script>/checkpoints)")
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="K",
                   help="checkpoint every K steps (default 10; 0: only at the end)")
    p.add_argument("--max-restarts", type=int, default=0, metavar="N",
                   help="relaunch a failed job from its checkpoint up to N times (default 0)")
    p.add_argument("--timeout", type=float, help="stop the whole job after this many seconds")
    p.add_argument("--hosts", help="comma-separated hosts for mpiexec -hosts (a real cluster)")
    p.add_argument("--key-file", metavar="PATH",
                   help="with --hosts: the shared key (a file of mode 0600 at this path on "
                   "every host) that authenticates the parameter-server messages (default "
                   "$FLUID_HW_CLUSTER_KEY_FILE); a job on this machine alone gets a fresh "
                   "random key per launch instead")
    p.add_argument("--mpiexec", help="mpiexec to use (default $FLUID_HW_MPIEXEC, else the "
                   "mpich wheel's: mpiexec.gforker on one machine, which listens on no port; "
                   "hydra's mpiexec with --hosts)")
    p.add_argument("--print-commands", action="store_true",
                   help="print the mpiexec and srun commands for a real cluster; run nothing")
    p.add_argument("script", help="the training script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(fn=_run)
