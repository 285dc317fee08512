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
    if args.print_commands and args.scheduler != "slurm":
        spec.check()
        print_commands(spec, sys.stdout.write)
        return 0
    if args.emit == "k8s":
        from ..backends.cluster.k8s import K8sOptions, write_manifest

        spec.check()
        write_manifest(spec, K8sOptions(
            image=args.image, name=args.job_name, namespace=args.namespace, cpu=args.cpu,
            memory=args.memory, workers=args.nodes, checkpoint_pvc=args.checkpoint_pvc),
            args.output)
        if args.output != "-":
            print(f"fluid-hw launch: wrote {args.output}; start it with kubectl apply -f "
                  f"{args.output}", file=sys.stderr)
        return 0
    if args.scheduler == "slurm":
        from ..backends.cluster.slurm import SlurmOptions, run_slurm

        opts = SlurmOptions(partition=args.partition, time=args.time, nodes=args.nodes,
                            ntasks_per_node=args.ntasks_per_node,
                            sbatch_args=list(args.sbatch_arg or []), job_name=args.job_name,
                            job_dir=args.job_dir)
        if args.print_commands:
            from ..backends.cluster.slurm import print_batch_script

            spec.check()
            print_batch_script(spec, opts, sys.stdout.write)
            return 0
        opts.check(spec)
        return launch(spec, run=run_slurm(opts))
    return launch(spec)


def register(sub: Any) -> None:
    p = sub.add_parser(  # no abbreviations: the script's own options follow SCRIPT
        "launch", allow_abbrev=False,
        help="run a training script on MPI: parameter servers + trainers, or collective "
        "all-reduce",
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
                   help="print the mpiexec and srun commands for a real cluster (with "
                   "--scheduler slurm: the batch script); run nothing")
    g = p.add_argument_group("Slurm (--scheduler slurm) and Kubernetes (--emit k8s)")
    g.add_argument("--scheduler", choices=["local", "slurm"], default="local",
                   help="local: mpiexec on this machine or --hosts (default); slurm: submit "
                   "with sbatch (or srun inside an allocation)")
    g.add_argument("--partition", help="Slurm partition")
    g.add_argument("--time", help="Slurm time limit (minutes, HH:MM:SS, D-HH:MM)")
    g.add_argument("--nodes", type=int, help="Slurm nodes; with --emit k8s: worker pods "
                   "(default: one per rank)")
    g.add_argument("--ntasks-per-node", type=int, help="Slurm tasks (ranks) per node")
    g.add_argument("--sbatch-arg", action="append", metavar="ARG",
                   help="an extra sbatch argument, e.g. --sbatch-arg=--qos=high (repeatable)")
    g.add_argument("--job-name", help="the Slurm job's or MPIJob's name")
    g.add_argument("--job-dir", help="Slurm batch scripts, outputs and per-role logs "
                   "(default build/cluster/<script>/slurm; on a shared file system)")
    g.add_argument("--emit", choices=["k8s"], help="write a Kubeflow MPI-operator MPIJob "
                   "manifest for the job instead of running it")
    g.add_argument("--image", help="with --emit k8s: the container image (fluid-hw and the "
                   "script inside)")
    g.add_argument("--namespace", default="default", help="with --emit k8s: the namespace")
    g.add_argument("--cpu", default="1", help="with --emit k8s: CPUs per worker (default 1)")
    g.add_argument("--memory", default="2Gi", help="with --emit k8s: memory per worker "
                   "(default 2Gi)")
    g.add_argument("--checkpoint-pvc", help="with --emit k8s: a PersistentVolumeClaim mounted "
                   "at the checkpoint folder (else checkpoints live and die with the pods)")
    g.add_argument("-o", "--output", default="-", help="with --emit k8s: the manifest file "
                   "(default: stdout)")
    p.add_argument("script", help="the training script")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(fn=_run)
