"""Residual join: element-wise sum of two int8 streams, each rescaled to the output's
fixed-point format, with the requantiser's rounding and saturation.

Golden contract (``docs/fixed_point.md``'s requantisation, applied to a sum): for int8
inputs ``a``, ``b`` with multipliers ``ma``, ``mb`` in [0, 2^15 - 1] and shifts
``na``, ``nb`` in [0, 47] (each input's scale relative to the output's is
``m * 2^-n``)::

    A = int64(a) * ma,   B = int64(b) * mb
    n = max(na, nb)
    r = (A * 2^(n - na) + B * 2^(n - nb) + 2^(n-1)) >> n   (no 2^(n-1) term when n = 0;
                                                           arithmetic shift: round half up)
    out = clamp(r, 0 if relu else -128, 127)                (int8)

Both products are aligned to the larger shift before the one rounding, so the sum is
exact.  :func:`add_join_model` is that contract.  Hardware and model evaluate it in the
equivalent, narrower form (``big`` the input with the larger shift, ``d`` the shift
difference, ``small`` the other)::

    r = (((P_big + 2^(n-1)) >> d) + P_small) >> n_small

(exact: the low ``d`` bits dropped by the first shift cannot carry into the bits the
second shift keeps, since ``P_small * 2^d`` has them zero), so no value exceeds 50 bits.

:class:`AddJoin` takes a beat from both inputs on the same cycle, only when both are
valid and its output queue has room; pipeline (``lanes`` lanes in parallel, lane 0 in
the low bits): stage 1 the multipliers' input registers (``ff_style`` as
:func:`._ff.copy_register`), 2-3 the product and its second register (with
``ff_style="trellis"`` a ``MULT18X18D`` with its own input and output registers,
:func:`._dsp.dsp_product`), 4 ``(P_big + rnd) >> d``, 5 the sum, 6 the shift and
clamp; then a :class:`~.stream.CreditQueue`, so ``o.valid`` never depends on any
``ready``.  One beat per cycle.
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._dsp import dsp_product
from ._ff import check_ff_style, copy_register
from ._util import Component, HardwareConfigError
from .stream import CreditQueue, credit_depth

__all__ = ["AddJoin", "add_join_model", "ADD_JOIN_LATENCY"]

#: cycles from a beat's transfer on ``a``/``b`` to its result being written into the
#: output queue; the queue adds :attr:`~.stream.CreditQueue.latency` more to ``o.valid``
ADD_JOIN_LATENCY = 6


def _check(name: str, ma: object, na: object, mb: object, nb: object) -> None:
    for what, v, hi in (("ma", ma, 2**15 - 1), ("na", na, 47), ("mb", mb, 2**15 - 1),
                        ("nb", nb, 47)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
            raise HardwareConfigError(f"{name}: {what} must be an integer in [0, {hi}], "
                                      f"got {v!r}")


def add_join_model(a: np.ndarray, b: np.ndarray, ma: int, na: int, mb: int, nb: int,
                   relu: bool = False) -> np.ndarray:
    """Behavioural model: the module docstring's contract, element-wise over int8 arrays
    of one shape (exact in int64 for every ``ma``, ``mb``, ``na``, ``nb`` in range)."""
    _check("add_join_model", ma, na, mb, nb)
    a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if a64.shape != b64.shape:
        raise HardwareConfigError(f"add_join_model: inputs have shapes {a64.shape} and "
                                  f"{b64.shape}, they must be equal")
    pa, pb = a64 * int(ma), b64 * int(mb)
    (p_big, n_big), (p_small, n_small) = ((pa, na), (pb, nb)) if na >= nb else ((pb, nb),
                                                                               (pa, na))
    rnd = (1 << (n_big - 1)) if n_big > 0 else 0
    r = (((p_big + rnd) >> (n_big - n_small)) + p_small) >> n_small
    return np.clip(r, 0 if relu else -128, 127).astype(np.int8)


class AddJoin(Component):
    """Element-wise ``a + b`` of two int8 streams of ``lanes`` lanes, rescaled and
    saturated as the module docstring states.  ``latency``: :data:`ADD_JOIN_LATENCY`
    (to the output queue); ``queue_depth``: the credit queue's entries."""

    def __init__(self, name: str, lanes: int, *, ma: int, na: int, mb: int, nb: int,
                 relu: bool = False, ff_style: str = "plain") -> None:
        check_ff_style(name, ff_style)
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise HardwareConfigError(f"join {name!r}: lanes must be an integer >= 1, "
                                      f"got {lanes!r}")
        _check(f"join {name!r}", ma, na, mb, nb)
        self.name, self.lanes, self.relu, self.ff_style = name, lanes, relu, ff_style
        self.ma, self.na, self.mb, self.nb = int(ma), int(na), int(mb), int(nb)
        self.latency = ADD_JOIN_LATENCY
        self.queue_depth = credit_depth(self.latency, 1)
        super().__init__({"a": In(stream.Signature(8 * lanes)),
                          "b": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.queue = q = CreditQueue(8 * self.lanes, self.queue_depth)
        go = self.a.valid & self.b.valid & q.can_issue
        m.d.comb += [
            self.a.ready.eq(self.b.valid & q.can_issue),
            self.b.ready.eq(self.a.valid & q.can_issue),
            q.issue.eq(go),
        ]
        lat = self.latency
        valid = [Signal(name=f"v{i}") for i in range(lat + 1)]
        m.d.comb += valid[0].eq(go)
        for i in range(lat):
            m.d.sync += valid[i + 1].eq(valid[i])
        outs = [self._lane(m, lane, valid) for lane in range(self.lanes)]
        m.d.comb += [q.w_valid.eq(valid[lat]), q.w_data.eq(Cat(*outs))]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m

    def _lane(self, m: Module, lane: int, valid: list[Signal]) -> Signal:
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            """Register of pipeline stage ``stage``, loaded when its input is valid."""
            r = Signal(shape, name=f"l{lane}_{tag}")
            with m.If(valid[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        def product(port: stream.Interface, mult: int, tag: str) -> Signal:
            """Stages 1-3: input register, product, second product register."""
            x1 = copy_register(m, port.payload.word_select(lane, 8), valid[0],
                               f"l{lane}_{tag}1", self.ff_style).as_signed()
            k = Const(mult, signed(16))
            if self.ff_style == "trellis":  # the DSP's own input and output registers
                return dsp_product(m, x1, k, f"l{lane}_m{tag}")[0:24].as_signed()
            p2 = reg(2, signed(24), x1 * k, f"p{tag}2")
            return reg(3, signed(24), p2, f"p{tag}3")

        pa3, pb3 = product(self.a, self.ma, "a"), product(self.b, self.mb, "b")
        if self.na >= self.nb:
            (p_big, n_big), (p_small, n_small) = (pa3, self.na), (pb3, self.nb)
        else:
            (p_big, n_big), (p_small, n_small) = (pb3, self.nb), (pa3, self.na)
        rnd = (1 << (n_big - 1)) if n_big > 0 else 0
        d = n_big - n_small
        big4 = reg(4, signed(max(24, n_big) + 2 - d),
                   (p_big + Const(rnd, signed(max(24, n_big) + 1))) >> d, "big4")
        small4 = reg(4, signed(24), p_small, "small4")
        s5 = reg(5, signed(max(len(big4), 24) + 1), big4 + small4, "s5")
        r5 = Signal(signed(max(9, len(s5) - n_small)), name=f"l{lane}_r5")
        m.d.comb += r5.eq(s5 >> n_small)
        lo = 0 if self.relu else -128
        clamped = Mux(r5 > 127, 127, Mux(r5 < lo, lo, r5[0:8]))
        return reg(6, 8, clamped, "out6")
