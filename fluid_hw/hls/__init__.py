"""High-level synthesis side of the FPGA back end: hardware stage descriptions with
their folding, resource and cycle estimates (:mod:`.stages`)."""

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

__all__ = ["ConvStage", "MaxPoolStage", "MVAUStage", "PipelineEstimate", "Resources",
           "StageEstimate", "estimate_pipeline", "estimate_stage", "hwc_order"]
