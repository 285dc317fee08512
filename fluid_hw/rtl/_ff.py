"""Registers that synthesis must not merge: per-PE copies of a broadcast value.

HARDWARE.md: on ECP5 the critical path is register -> multiplier -> register and
routing decides it, so each PE gets its own copy of the broadcast input vector; Yosys
merges duplicate registers even when marked keep, so with ``style="trellis"`` the
copies are explicit ``TRELLIS_FF`` primitives (one per bit).  Simulators get
:data:`TRELLIS_FF_SIM`, a model of the configuration used here; ``style="plain"``
(the default) gives ordinary registers, which Yosys may merge.
"""

from __future__ import annotations

from amaranth import ClockSignal, Const, Instance, Module, Signal, Value

from ._util import HardwareConfigError

__all__ = ["FF_STYLES", "check_ff_style", "copy_register", "TRELLIS_FF_SIM"]

FF_STYLES = ("plain", "trellis")

#: Verilog model of ``TRELLIS_FF`` as :func:`copy_register` configures it
#: (synchronous, clock enable, reset value by REGSET), for Verilator and cocotb builds.
#: ``M`` stays unconnected: nextpnr-ecp5's packer refuses a TRELLIS_FF whose M is tied.
TRELLIS_FF_SIM = """\
// Simulation model of the ECP5 TRELLIS_FF as fluid_hw.rtl instantiates it.
module TRELLIS_FF #(
    parameter GSR = "ENABLED", parameter CEMUX = "1", parameter CLKMUX = "CLK",
    parameter LSRMUX = "LSR", parameter SRMODE = "LSR_OVER_CE", parameter REGSET = "RESET",
    parameter LSRMODE = "LSR"
) (input CLK, input LSR, input CE, input DI, input M, output reg Q);
  wire ce = (CEMUX == "1") ? 1'b1 : (CEMUX == "0") ? 1'b0 : (CEMUX == "INV") ? ~CE : CE;
  initial Q = (REGSET == "SET");
  always @(posedge CLK)
    if (LSR) Q <= (REGSET == "SET");
    else if (ce) Q <= DI;
endmodule
"""


def check_ff_style(owner: str, style: str) -> None:
    """Refuse an unknown ``ff_style``, naming the component that was given it."""
    if style not in FF_STYLES:
        raise HardwareConfigError(f"{owner}: ff_style must be one of {FF_STYLES}, "
                                  f"not {style!r}")


def copy_register(m: Module, value: Value, enable: Value | None, name: str,
                  style: str = "plain") -> Signal:
    """A register loading ``value`` when ``enable`` (None: every cycle); with
    ``style="trellis"`` built from ``TRELLIS_FF`` primitives so that synthesis keeps it
    as a separate copy (without an enable: ``CEMUX="1"``, the CE pin unconnected, as
    Yosys maps a register without one)."""
    check_ff_style(name, style)
    r = Signal(len(value), name=name)
    if style == "plain":
        if enable is None:
            m.d.sync += r.eq(value)
        else:
            with m.If(enable):
                m.d.sync += r.eq(value)
        return r
    ce: dict[str, object] = {"p_CEMUX": "1"} if enable is None else \
        {"p_CEMUX": "CE", "i_CE": enable}
    for b in range(len(value)):
        m.submodules[f"{name}_ff{b}"] = Instance(
            "TRELLIS_FF", p_GSR="DISABLED", p_CLKMUX="CLK", p_LSRMUX="LSR",
            p_REGSET="RESET", p_SRMODE="LSR_OVER_CE", i_CLK=ClockSignal("sync"),
            i_LSR=Const(0, 1), i_DI=value[b], o_Q=r[b], **ce)
    return r
