"""High-level synthesis side of the FPGA back end: lowering of a quantised program
(:mod:`.partition`, :mod:`.lower`) into hardware stage descriptions (:mod:`.stages`),
with their folding (:mod:`.folding`), resource and cycle estimates."""

from .autofold import AutoFold, AutoFoldError, autofold, device_estimate
from .folding import (
    DEFAULT_BUDGET,
    FoldingBudget,
    FoldingError,
    balance,
    format_folding,
    parse_folding,
)
from .lower import Lowered, LoweredStage, lower
from .partition import LoweringError, Partition, partition
from .stages import (
    ConvStage,
    MaxPoolStage,
    MVAUStage,
    PipelineEstimate,
    Resources,
    StageEstimate,
    estimate_pipeline,
    estimate_stage,
    hwc_order,
)

__all__ = [
    "DEFAULT_BUDGET", "AutoFold", "AutoFoldError", "ConvStage", "FoldingBudget",
    "FoldingError", "Lowered", "LoweredStage", "LoweringError", "MVAUStage", "MaxPoolStage",
    "Partition", "PipelineEstimate", "Resources", "StageEstimate", "autofold", "balance",
    "device_estimate", "estimate_pipeline", "estimate_stage", "format_folding", "hwc_order",
    "lower", "parse_folding", "partition",
]
