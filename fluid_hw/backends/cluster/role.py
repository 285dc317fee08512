"""Which part of the job this process plays, from the environment the launcher sets.

``fluid-hw launch`` (or your own ``mpiexec``/``srun`` line, see docs/cluster.md)
exports the same variables to every rank; the MPI rank then decides the role:
ranks ``0..P-1`` are the parameter servers, the rest the trainers.

=============================  ==============================================
``FLUID_HW_MODE``              ``sync``, ``async`` or ``collective`` (unset: a
                               plain single-process run)
``FLUID_HW_PSERVERS``          number of servers P (pserver modes)
``FLUID_HW_PSERVER_ENDPOINTS`` optional ``host:port,...`` names for them
                               (default ``rank:0,rank:1,...``)
``FLUID_HW_TRAINERS``          number of trainers T
``FLUID_HW_CHECKPOINT_DIR``    checkpoints (read by the transpiler config)
``FLUID_HW_CHECKPOINT_EVERY``  steps between checkpoints
``FLUID_HW_RESUME``            ``1``: start from the last complete checkpoint
``FLUID_HW_CLUSTER_KEY``       the key authenticating pserver messages, or
``FLUID_HW_CLUSTER_KEY_FILE``  a file holding it (see :mod:`.auth`)
=============================  ==============================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.lod import LoDTensor
from ...ir.ops.distributed import STEP_VAR_NAME
from ...ir.scope import Scope, global_scope
from .errors import ClusterError

MODES = ("sync", "async", "collective")


def _int_env(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise ClusterError(f"{name}={raw!r} is not an integer") from None
    if v < 0:
        raise ClusterError(f"{name}={v} must be >= 0")
    return v


@dataclass
class ClusterRole:
    """This process's part: ``role`` is ``"PSERVER"``, ``"TRAINER"`` or ``"LOCAL"``."""

    mode: str = "local"
    role: str = "LOCAL"
    rank: int = 0
    world_size: int = 1
    trainer_id: int = 0
    trainers: int = 1
    pserver_endpoints: list[str] = field(default_factory=list)
    endpoint: str = ""  # a server's own endpoint

    @property
    def is_pserver(self) -> bool:
        return self.role == "PSERVER"

    @property
    def is_trainer(self) -> bool:
        return self.role == "TRAINER"

    @property
    def is_local(self) -> bool:
        return self.role == "LOCAL"

    @property
    def sync_mode(self) -> bool:
        return self.mode != "async"

    @property
    def transpiler_mode(self) -> str:
        """``DistributeTranspilerConfig.mode`` for this job."""
        return "collective" if self.mode == "collective" else "pserver"

    @property
    def label(self) -> str:
        if self.is_pserver:
            return f"pserver {self.pserver_endpoints.index(self.endpoint)}"
        return f"trainer {self.trainer_id}" if self.is_trainer else "local"

    @staticmethod
    def from_env(env: dict[str, str] | None = None, rank: int | None = None,
                 world_size: int | None = None) -> ClusterRole:
        """The role of this process.  ``rank``/``world_size`` default to MPI's
        (MPI starts only when ``FLUID_HW_MODE`` is set)."""
        e = dict(os.environ if env is None else env)
        mode = e.get("FLUID_HW_MODE", "")
        if not mode:
            return ClusterRole()
        if mode not in MODES:
            raise ClusterError(f"FLUID_HW_MODE={mode!r}; use one of {list(MODES)}")
        trainers = _int_env(e, "FLUID_HW_TRAINERS", 1)
        servers = _int_env(e, "FLUID_HW_PSERVERS", 0)
        if trainers < 1:
            raise ClusterError("FLUID_HW_TRAINERS must be >= 1")
        if mode == "collective":
            servers = 0
            eps: list[str] = []
        else:
            raw = e.get("FLUID_HW_PSERVER_ENDPOINTS", "")
            eps = [x.strip() for x in raw.split(",") if x.strip()] if raw else \
                [f"rank:{i}" for i in range(servers)]
            if not eps:
                raise ClusterError(f"mode {mode!r} needs parameter servers: set "
                                   "FLUID_HW_PSERVERS (fluid-hw launch --pservers N)")
            if servers and len(eps) != servers:
                raise ClusterError(f"FLUID_HW_PSERVER_ENDPOINTS lists {len(eps)} endpoints "
                                   f"but FLUID_HW_PSERVERS={servers}")
            servers = len(eps)
        if rank is None or world_size is None:
            from .comm import get_comm

            c = get_comm()
            rank = c.rank if rank is None else rank
            world_size = c.size if world_size is None else world_size
        if world_size != servers + trainers:
            raise ClusterError(f"the job has {world_size} ranks, but {servers} server(s) + "
                               f"{trainers} trainer(s) need {servers + trainers}; start it with "
                               f"mpiexec -n {servers + trainers} (or fluid-hw launch)")
        if rank < servers:
            return ClusterRole(mode, "PSERVER", rank, world_size, 0, trainers, eps, eps[rank])
        return ClusterRole(mode, "TRAINER", rank, world_size, rank - servers, trainers, eps)


def start_step(scope: Scope | None = None) -> int:
    """The step training starts at: 0, or the resumed checkpoint's step (set by the
    trainer start-up program in ``@CLUSTER_STEP@``)."""
    v: Any = (scope or global_scope()).find_value(STEP_VAR_NAME)
    if v is None:
        return 0
    arr = np.asarray(v.data if isinstance(v, LoDTensor) else v)
    return int(arr.reshape(-1)[0])
