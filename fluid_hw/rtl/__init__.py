"""Amaranth components of the FPGA back end, each with a Python behavioural model.

Streams are valid/ready (``amaranth.lib.stream``) with flat payloads of int8 (or
int32) lanes, lane 0 in the low bits.  The top-level generator
:class:`AcceleratorTop` turns a list of stage specifications (:class:`MVAUSpec`,
:class:`ConvSpec`, :class:`MaxPoolSpec`) into one accelerator with AXI4-Stream data
ports and an AXI4-Lite register block (:mod:`.regmap`).

Helpers the lowering (:mod:`fluid_hw.hls`) shares with the components:
:func:`pack_lanes` / :func:`unpack_lanes` (lane 0 in the low bits),
:func:`ceil_log2` (address and counter widths) and :data:`BLOCK_ROM_BITS` (the
smallest memory kept in block RAM rather than LUTs).
"""

from ._dsp import MULT18X18D_SIM
from ._ff import FF_STYLES, TRELLIS_FF_SIM
from ._lane import Clamp
from ._lutmul import CCU2C_SIM, product_modules
from ._mem import BLOCK_ROM_BITS
from ._util import HardwareConfigError, ceil_log2, pack_lanes, unpack_lanes
from .axil import AXILiteModel, AXILiteRegisters, AXILiteSignature
from .conv import ConvUnit, conv2d_model
from .dwconv import DepthwiseConv, depthwise_model, dw_weight_entries, dwconv_latency
from .mvau import MVAU, mvau_model
from .pool import AvgPool, MaxPool, MaxReduce, SumReduce, avgpool_model, maxpool_model
from .regmap import Register, emit_c_header, emit_markdown, register_map
from .requant import Requantiser, RequantPipe, requantize_model
from .spec import (
    ConvSpec,
    MaxPoolSpec,
    MVAUSpec,
    ParamSegment,
    StageSpec,
    design_hash,
    hwc_order,
    param_image,
    param_layout,
)
from .stream import CreditQueue, Downsizer, SkidBuffer, StreamFIFO, Upsizer, WidthConverter
from .swg import SlidingWindow, WindowGeometry, swg_model
from .table import TableActivation, table_model
from .top import AcceleratorTop, StageGraph, pipeline_model, stage_lanes
from .uart_bridge import UartBridge, UartBridgeModel, UartRx, UartTx, baud_divisor

__all__ = [
    "FF_STYLES", "TRELLIS_FF_SIM", "MULT18X18D_SIM", "CCU2C_SIM", "HardwareConfigError",
    "product_modules", "pack_lanes",
    "unpack_lanes", "ceil_log2", "BLOCK_ROM_BITS",
    "AXILiteModel", "AXILiteRegisters", "AXILiteSignature",
    "ConvUnit", "conv2d_model", "MVAU", "mvau_model", "MaxPool", "MaxReduce", "maxpool_model",
    "DepthwiseConv", "depthwise_model", "dw_weight_entries", "dwconv_latency",
    "AvgPool", "SumReduce", "avgpool_model", "TableActivation", "table_model",
    "Register", "emit_c_header", "emit_markdown", "register_map",
    "Clamp", "Requantiser", "RequantPipe", "requantize_model",
    "ConvSpec", "MaxPoolSpec", "MVAUSpec", "ParamSegment", "StageSpec", "design_hash",
    "hwc_order", "param_image", "param_layout",
    "CreditQueue", "Downsizer", "SkidBuffer", "StreamFIFO", "Upsizer", "WidthConverter",
    "SlidingWindow", "WindowGeometry", "swg_model",
    "AcceleratorTop", "StageGraph", "pipeline_model", "stage_lanes",
    "UartBridge", "UartBridgeModel", "UartRx", "UartTx", "baud_divisor",
]

# stage kinds beyond those above register their specs on import (spec.SPEC_KINDS)
from .affine_spec import AffineSpec
from .avgpool_spec import AvgPoolSpec
from .concat_spec import ConcatSpec
from .dwconv_spec import DepthwiseSpec
from .join_spec import JoinSpec
from .table_spec import TableSpec
from .upsample_spec import UpsampleSpec

__all__ += ["AffineSpec", "AvgPoolSpec", "ConcatSpec", "DepthwiseSpec", "JoinSpec", "TableSpec",
            "UpsampleSpec"]
