"""High-level synthesis side of the FPGA back end: lowering of a quantised program
(:mod:`.partition`, :mod:`.lower`) into hardware stages of the kinds registered in
:mod:`.kinds` (one file per kind), with their folding (:mod:`.folding`), resource and
cycle estimates (:mod:`.stages`, :mod:`.autofold`)."""

from .autofold import AutoFold, AutoFoldError, autofold, device_estimate
from .folding import (
    DEFAULT_BUDGET,
    FoldingBudget,
    FoldingError,
    balance,
    format_folding,
    parse_folding,
)
from .kinds import KINDS, StageKind, get_kind, kind_of
from .lower import Discovery, Lowered, LoweredStage, build, discover, lower
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
    "lower", "parse_folding", "partition", "KINDS", "StageKind", "get_kind", "kind_of",
    "Discovery", "build", "discover",
]
