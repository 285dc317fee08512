"""Multipliers as explicit ECP5 ``MULT18X18D`` cells with their own registers.

HARDWARE.md: on ECP5 the critical path is register -> multiplier -> register, and
routing decides it; Yosys maps a ``*`` onto a ``MULT18X18D`` with every internal
register bypassed, so the multiplier's 3.9 ns sit between two fabric registers
placed wherever nextpnr puts them.  :func:`dsp_product` instantiates the cell with
its input registers (A, B) and output register enabled instead: the fabric paths
become register -> routing -> DSP register and back, and the multiply stays inside
the DSP.  Two cycles from ``a``/``b`` to the product, free-running (clock enable
tied high): callers use it inside a fixed-latency pipeline whose valid bits travel
beside the data.  Simulators get :data:`MULT18X18D_SIM`, a model of exactly this
configuration (signed 18 x 18, input and output registers, no pipeline register).
"""

from __future__ import annotations

from amaranth import ClockSignal, Const, Instance, Module, Signal, Value, signed

from ._util import HardwareConfigError

__all__ = ["MULT18X18D_SIM", "dsp_product", "DSP_LATENCY"]

#: cycles from the operands to the product
DSP_LATENCY = 2

_PARAMS = dict(p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
               p_GSR="DISABLED")


def _ports(prefix: str, n: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(n))


def _bus(prefix: str, n: int) -> str:
    return "{" + ", ".join(f"{prefix}{i}" for i in reversed(range(n))) + "}"


#: Verilog model of ``MULT18X18D`` as :func:`dsp_product` configures it, for Verilator
#: and cocotb builds (any other configuration is refused at elaboration).
MULT18X18D_SIM = f"""\
// Simulation model of the ECP5 MULT18X18D as fluid_hw.rtl._dsp instantiates it:
// signed A x B, input registers and output register on CLK0, always enabled.
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE", parameter REG_INPUTB_CLK = "NONE",
    parameter REG_OUTPUT_CLK = "NONE", parameter GSR = "ENABLED"
) (input {_ports("A", 18)}, input {_ports("B", 18)},
   input CLK0, input CE0, input RST0, input SIGNEDA, input SIGNEDB,
   input SOURCEA, input SOURCEB,
   output {_ports("P", 36)});
  initial begin
    if (REG_INPUTA_CLK != "CLK0" || REG_INPUTB_CLK != "CLK0" || REG_OUTPUT_CLK != "CLK0")
      $error("MULT18X18D model: only registered inputs and output on CLK0");
  end
  reg signed [17:0] ra, rb;
  reg signed [35:0] rp;
  always @(posedge CLK0) begin
    ra <= {_bus("A", 18)};
    rb <= {_bus("B", 18)};
    rp <= ra * rb;
  end
  assign {_bus("P", 36)} = rp;
endmodule
"""


def dsp_product(m: Module, a: Value, b: Value, name: str) -> Signal:
    """``a * b`` (each signed, at most 18 bits) two cycles later, through one
    ``MULT18X18D`` with its input and output registers; a signed 36-bit result."""
    if len(a) > 18 or len(b) > 18:
        raise HardwareConfigError(f"{name}: operands of {len(a)} and {len(b)} bits exceed 18")
    a18 = Signal(signed(18), name=f"{name}_a")
    b18 = Signal(signed(18), name=f"{name}_b")
    p = Signal(signed(36), name=f"{name}_p")
    m.d.comb += [a18.eq(a.as_signed()), b18.eq(b.as_signed())]
    ports: dict[str, object] = {
        "i_CLK0": ClockSignal("sync"), "i_CE0": Const(1, 1), "i_RST0": Const(0, 1),
        "i_SIGNEDA": Const(1, 1), "i_SIGNEDB": Const(1, 1),
        "i_SOURCEA": Const(0, 1), "i_SOURCEB": Const(0, 1),
    }
    for i in range(18):
        ports[f"i_A{i}"] = a18[i]
        ports[f"i_B{i}"] = b18[i]
    for i in range(36):
        ports[f"o_P{i}"] = p[i]
    m.submodules[name] = Instance("MULT18X18D", **_PARAMS, **ports)
    return p
