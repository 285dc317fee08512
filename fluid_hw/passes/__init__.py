"""Device-independent optimisation of programs: passes, the pass manager, quantisation.

Each pass is ``get_pass(name).apply(program, ctx) -> (program, changed)`` and
never mutates its input.  :func:`inference_pipeline` is the standard sequence
every back end and ``fluid-hw compile`` run; :func:`quantize` rewrites an
inference program into fixed point (docs/fixed_point.md).

Passes (one file each): prune, dead_code_elimination, constant_folding,
remove_identity, reshape_transpose_cancel, fc_fuse, conv_bn_fuse, fc_bn_fuse,
conv_elementwise_add_act_fuse, fuse_elewise_act, memory_reuse; qdq_fold turns an
imported QDQ ONNX model into fixed point with the model's own scales.
:func:`quant_aware` and :func:`freeze` are quantisation-aware training (docs/qat.md).
"""

from .base import (
    ParamStore,
    Pass,
    PassContext,
    PassError,
    Runner,
    all_passes,
    get_pass,
    register_pass,
)
from .manager import Fixpoint, PassManager, PassRecord, fixpoint, inference_pipeline
from .memory_reuse import MemoryPlan, plan_memory
from .precision import Precision
from .qat import QATConfig, QATProgram, quant_aware
from .qat_freeze import freeze
from .quantize import (
    QuantConfig,
    QuantizationError,
    quantization_report,
    quantize,
    quantized_region,
)

__all__ = [
    "Fixpoint", "MemoryPlan", "ParamStore", "Pass", "PassContext", "PassError", "PassManager",
    "PassRecord", "Precision", "QATConfig", "QATProgram", "QuantConfig", "QuantizationError",
    "Runner", "all_passes", "fixpoint", "freeze", "get_pass", "inference_pipeline",
    "plan_memory", "quant_aware", "quantization_report", "quantize", "quantized_region",
    "register_pass",
]
