"""``fluid-hw launch --emit k8s``: the job as a Kubeflow MPI-operator ``MPIJob``.

The manifest (``kubeflow.org/v2beta1``, ``mpiImplementation: MPICH``) has one
launcher pod running MPICH's ``mpiexec -n P+T`` over the worker pods' hostfile,
each rank ``python -u -m fluid_hw.backends.cluster.run_rank SCRIPT ARGS`` --
the command and variables of a local launch, so the roles are the same (ranks
``0..P-1`` serve).  Workers default to one pod per rank (``--nodes W`` packs
them ``ceil((P+T)/W)`` slots a pod), each with the CPU and memory asked for.

The pserver key is never in the manifest: every pod mounts the Secret
``<name>-key`` (key ``cluster.key``, mode 0400) and gets its path in
``FLUID_HW_CLUSTER_KEY_FILE``.  Checkpoints go to ``/checkpoints``, a
PersistentVolumeClaim when ``--checkpoint-pvc`` names one (else an ``emptyDir``
that lives as long as the pod).  The manifest is JSON, which ``kubectl``
reads as it reads YAML.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...fileio import atomic_write
from .auth import KEY_FILE_ENV
from .errors import LaunchError
from .launch import BLAS_THREAD_VARS, LaunchSpec, job_env

API_VERSION = "kubeflow.org/v2beta1"
KEY_MOUNT = "/etc/fluid-hw"
CHECKPOINT_MOUNT = "/checkpoints"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?")


@dataclass
class K8sOptions:
    image: str | None = None
    name: str | None = None
    namespace: str = "default"
    cpu: str = "1"
    memory: str = "2Gi"
    workers: int | None = None  # worker pods (default: one per rank)
    checkpoint_pvc: str | None = None
    workdir: str = "/workspace"
    python: str = "python"


def _name(spec: LaunchSpec, opts: K8sOptions) -> str:
    name = opts.name or "fluid-hw-" + re.sub(r"[^a-z0-9-]", "-", Path(spec.script).stem.lower())
    name = name.strip("-")[:50]
    if not _DNS_LABEL.fullmatch(name):
        raise LaunchError(f"--job-name {name!r}: a Kubernetes name is lower-case letters, "
                          "digits and '-', starting and ending with a letter or digit")
    return name


def _check(spec: LaunchSpec, opts: K8sOptions) -> None:
    if not opts.image:
        raise LaunchError("--emit k8s needs --image: a container image holding Python, "
                          "fluid-hw[cluster] and the training script")
    if not _DNS_LABEL.fullmatch(opts.namespace):
        raise LaunchError(f"--namespace {opts.namespace!r} is not a Kubernetes name")
    for flag, q in (("--cpu", opts.cpu), ("--memory", opts.memory)):
        if not _QUANTITY.fullmatch(q):
            raise LaunchError(f"{flag} {q!r} is not a Kubernetes quantity (e.g. 500m, 2, 4Gi)")
    if opts.workers is not None and not 1 <= opts.workers <= spec.nprocs:
        raise LaunchError(f"--nodes {opts.workers}: between 1 and the job's {spec.nprocs} "
                          "ranks worker pods")
    if spec.hosts:
        raise LaunchError("--hosts and --emit k8s: the MPI operator chooses the pods")


def manifest(spec: LaunchSpec, opts: K8sOptions) -> dict[str, Any]:
    """The ``MPIJob`` of the job, as a dictionary."""
    _check(spec, opts)
    name = _name(spec, opts)
    env = job_env(spec, spec.resume, "")
    env.pop("FLUID_HW_JOB_ID")
    for k in BLAS_THREAD_VARS:
        env[k] = "1"
    for k in ("UCX_NET_DEVICES", "FI_SOCKETS_IFACE", "FI_TCP_IFACE"):  # pods talk over eth0
        env.pop(k, None)
    env["FLUID_HW_CHECKPOINT_DIR"] = spec.checkpoint_dir or CHECKPOINT_MOUNT
    env[KEY_FILE_ENV] = f"{KEY_MOUNT}/cluster.key"
    env_list = [{"name": k, "value": v} for k, v in env.items()]
    workers = opts.workers or spec.nprocs
    slots = math.ceil(spec.nprocs / workers)
    command = ["mpiexec", "-n", str(spec.nprocs), opts.python, "-u", "-m",
               "fluid_hw.backends.cluster.run_rank", spec.script, *spec.args]
    ckpt_volume: dict[str, Any] = (
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": opts.checkpoint_pvc}}
        if opts.checkpoint_pvc else {"name": "checkpoints", "emptyDir": {}})
    volumes = [{"name": "cluster-key",
                "secret": {"secretName": f"{name}-key", "defaultMode": 0o400}}, ckpt_volume]
    mounts = [{"name": "cluster-key", "mountPath": KEY_MOUNT, "readOnly": True},
              {"name": "checkpoints", "mountPath": env["FLUID_HW_CHECKPOINT_DIR"]}]
    resources = {"requests": {"cpu": opts.cpu, "memory": opts.memory},
                 "limits": {"cpu": opts.cpu, "memory": opts.memory}}

    def pod(role: str, cmd: list[str] | None, res: dict[str, Any]) -> dict[str, Any]:
        c: dict[str, Any] = {"name": role, "image": opts.image, "imagePullPolicy": "IfNotPresent",
                             "workingDir": opts.workdir, "env": env_list, "resources": res,
                             "volumeMounts": mounts}
        if cmd:
            c["command"] = cmd
        return {"metadata": {"labels": {"app.kubernetes.io/name": name,
                                        "app.kubernetes.io/component": role}},
                "spec": {"containers": [c], "volumes": volumes}}

    small = {"requests": {"cpu": "100m", "memory": "256Mi"},
             "limits": {"cpu": "1", "memory": "1Gi"}}
    return {
        "apiVersion": API_VERSION,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": opts.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "fluid-hw",
                                "fluid-hw/mode": spec.mode}},
        "spec": {
            "slotsPerWorker": slots,
            "mpiImplementation": "MPICH",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": spec.max_restarts},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": pod("launcher", command, small)},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                           "template": pod("worker", None, resources)},
            },
        },
    }


def write_manifest(spec: LaunchSpec, opts: K8sOptions, output: str = "-") -> str:
    """Write the manifest to ``output`` (``-``: stdout); its text."""
    text = json.dumps(manifest(spec, opts), indent=2) + "\n"
    if output == "-":
        sys.stdout.write(text)
    else:
        atomic_write(output, text.encode(), durable=False, mode=0o644)
    return text
