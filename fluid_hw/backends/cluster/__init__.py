"""The cluster back end: Fluid's DistributeTranspiler over MPI.

* :class:`DistributeTranspiler` splits a training program into trainer and
  parameter-server programs (or a collective all-reduce program);
* the communication ops' kernels (``send``, ``recv``, barriers,
  ``listen_and_serv``, ``c_allreduce_sum``...) run them on mpi4py with a small
  typed header and raw tensor bytes (:mod:`.wire`);
* :class:`ClusterRole` tells a script which part it plays in a job started by
  ``fluid-hw launch`` (:mod:`.launch`), ``mpiexec`` or ``srun``.

Importing this package registers the kernels; MPI itself starts on first use.
See docs/cluster.md.
"""

from . import kernels as _kernels  # noqa: F401  (registers the CPU kernels)
from .errors import ClusterError, LaunchError, TranspileError, WireError
from .role import ClusterRole, start_step
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["ClusterError", "ClusterRole", "DistributeTranspiler", "DistributeTranspilerConfig",
           "LaunchError", "TranspileError", "WireError", "start_step"]
