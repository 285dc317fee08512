"""The CPU reference back end: numpy kernels, scopes and the executor."""

from ...ir.scope import Scope, global_scope, scope_guard
from .context import KernelContext
from .executor import Executor
from .kernels import get_kernel, register_kernel
from .place import CPUPlace, CUDAPlace

__all__ = ["CPUPlace", "CUDAPlace", "Executor", "KernelContext", "Scope", "get_kernel",
           "global_scope", "register_kernel", "scope_guard"]
