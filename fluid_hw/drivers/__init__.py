"""Host runtime of FPGA accelerators: open a build folder, load weights, run the model
(host programs on the CPU executor around the accelerator), read the counters.

Transports connect to the hardware: ``"sim"`` (the build's Verilog in Verilator);
a serial link to a board implements the same :class:`Transport` methods
(``read_register``, ``write_register``, ``load_params``, ``stream``).
"""

from .accelerator import (
    ACCEL_ID,
    Accelerator,
    HostInfo,
    RunRecord,
    load_param_image,
    save_param_image,
)
from .serial import SerialTransport
from .sim import SimTransport, harness_build, read_design
from .transport import (
    COUNTERS,
    DriverError,
    ParamImage,
    StreamResult,
    Transport,
    get_transport,
    register_transport,
    transport_names,
)

__all__ = [
    "ACCEL_ID", "Accelerator", "COUNTERS", "DriverError", "HostInfo", "ParamImage",
    "RunRecord", "SerialTransport", "SimTransport", "StreamResult", "Transport", "get_transport",
    "harness_build", "load_param_image", "read_design", "register_transport",
    "save_param_image", "transport_names",
]
