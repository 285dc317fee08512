"""Small Amaranth designs for the bitstream tests."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class DotMac(wiring.Component):
    """``lanes`` int8 x int8 multipliers into a 32-bit accumulator.

    Registered as HARDWARE.md advises: a register on each multiplier input, two
    after each multiplier, a register per adder-tree level.  ``clear`` restarts
    the sum; ``acc`` is the running dot product of the ``valid`` inputs.
    """

    def __init__(self, lanes: int = 8) -> None:
        self.lanes = lanes
        super().__init__({
            "a": In(8 * lanes), "b": In(8 * lanes), "valid": In(1), "clear": In(1),
            "acc": Out(32),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        products = []
        valid = self.valid
        for i in range(self.lanes):
            a = Signal(signed(8), name=f"a{i}")
            b = Signal(signed(8), name=f"b{i}")
            p0 = Signal(signed(16), name=f"p{i}_0")
            p1 = Signal(signed(16), name=f"p{i}_1")
            m.d.sync += [a.eq(self.a[8 * i:8 * i + 8]), b.eq(self.b[8 * i:8 * i + 8]),
                         p0.eq(a * b), p1.eq(p0)]
            products.append(p1)
        # valid follows the data: input reg, two product regs
        for stage in range(3):
            v = Signal(name=f"valid_s{stage}")
            m.d.sync += v.eq(valid)
            valid = v
        level = products
        depth = 0
        while len(level) > 1:
            nxt = []
            for k in range(0, len(level), 2):
                s = Signal(signed(32), name=f"sum{depth}_{k // 2}")
                pair = level[k:k + 2]
                m.d.sync += s.eq(pair[0] + pair[1] if len(pair) == 2 else pair[0])
                nxt.append(s)
            v = Signal(name=f"valid_t{depth}")
            m.d.sync += v.eq(valid)
            level, valid, depth = nxt, v, depth + 1
        acc = Signal(signed(32))
        with m.If(self.clear):
            m.d.sync += acc.eq(0)
        with m.Elif(valid):
            m.d.sync += acc.eq(acc + level[0])
        m.d.comb += self.acc.eq(acc)
        return m
