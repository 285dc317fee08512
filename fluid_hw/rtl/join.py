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

``runtime=True``: the multipliers and shifts are loaded at run time instead, through
``wr`` (:func:`~._mem.ParamWriteSignature` with one memory of one entry; the load
format, :func:`join_entry`: bits 14..0 ``ma``, 30..16 ``mb``, 37..32 ``na``, 45..40
``nb``).  The shifts are then variable, and narrow: since ``|P| < 2^22``,

* ``n_small >= 24`` makes both terms smaller than 1/4, so ``r = 0`` (the multipliers
  are taken as 0);
* else a shift difference ``d`` beyond 23 acts as 23 (``P_big >> d`` is then 0 or -1
  whatever ``d``; with ``n_small = 0`` the rounded ``P_big >> d`` is 0), and with
  ``dc = min(d, 23)``::

    r = (((P_big + h) >> dc) + P_small + k) >> n_small
    h = 2^(dc-1) if n_small = 0 and dc > 0 else 0,   k = 2^(n_small-1) if n_small > 0 else 0

  (the rounding term ``2^(n_big-1)`` is ``2^(n_small-1) * 2^dc`` when ``n_small > 0``,
  so it passes the first shift whole), all in 26 bits.

Registers shared by the lanes take, as the entry is written, which input is the big
one, both multipliers in that order, ``dc``, ``n_small``, ``h`` and ``k``.  Stage 1
takes the big input's byte into the first multiplier, 2-3 the products, 4 ``P_big +
h`` and ``P_small + k``, 5 the shift by ``dc``, 6 the sum, 7 the shift by ``n_small``,
8 the clamp: :data:`ADD_JOIN_RUNTIME_LATENCY` cycles.
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._ff import check_ff_style
from ._lane import clamp_int8, loaded_shift, rescale_product, stage_reg
from ._mem import ParamWriteSignature
from ._util import Component, HardwareConfigError
from .stream import CreditQueue, credit_depth

__all__ = ["AddJoin", "add_join_model", "join_entry", "ADD_JOIN_LATENCY",
           "ADD_JOIN_RUNTIME_LATENCY", "JOIN_ENTRY_BITS"]

#: cycles from a beat's transfer on ``a``/``b`` to its result being written into the
#: output queue; the queue adds :attr:`~.stream.CreditQueue.latency` more to ``o.valid``
ADD_JOIN_LATENCY = 6
#: the same with the multipliers and shifts loaded at run time (variable shifts)
ADD_JOIN_RUNTIME_LATENCY = 8
#: bits of the runtime parameter entry (:func:`join_entry`)
JOIN_ENTRY_BITS = 46


def _check(name: str, ma: object, na: object, mb: object, nb: object) -> None:
    for what, v, hi in (("ma", ma, 2**15 - 1), ("na", na, 47), ("mb", mb, 2**15 - 1),
                        ("nb", nb, 47)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
            raise HardwareConfigError(f"{name}: {what} must be an integer in [0, {hi}], "
                                      f"got {v!r}")


def join_entry(name: str, ma: int, na: int, mb: int, nb: int) -> int:
    """The runtime parameter entry (the load format) of a join, after checking ranges."""
    _check(name, ma, na, mb, nb)
    return int(ma) | int(mb) << 16 | int(na) << 32 | int(nb) << 40


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
    saturated as the module docstring states (``runtime``: the multipliers and shifts
    loaded through ``wr``).  ``latency``: :data:`ADD_JOIN_LATENCY` or
    :data:`ADD_JOIN_RUNTIME_LATENCY` (to the output queue); ``queue_depth``: the credit
    queue's entries."""

    def __init__(self, name: str, lanes: int, *, ma: int | None = None, na: int | None = None,
                 mb: int | None = None, nb: int | None = None, relu: bool = False,
                 runtime: bool = False, ff_style: str = "plain") -> None:
        check_ff_style(name, ff_style)
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise HardwareConfigError(f"join {name!r}: lanes must be an integer >= 1, "
                                      f"got {lanes!r}")
        self.name, self.lanes, self.relu, self.ff_style = name, lanes, relu, ff_style
        self.runtime = runtime
        members = {"a": In(stream.Signature(8 * lanes)), "b": In(stream.Signature(8 * lanes)),
                   "o": Out(stream.Signature(8 * lanes))}
        if runtime:
            self.ma = self.na = self.mb = self.nb = None
            self.latency = ADD_JOIN_RUNTIME_LATENCY
            members["wr"] = In(ParamWriteSignature(1, 1, JOIN_ENTRY_BITS))
        else:
            if None in (ma, na, mb, nb):
                raise HardwareConfigError(f"join {name!r}: give ma, na, mb and nb, or "
                                          "runtime=True to load them through wr")
            _check(f"join {name!r}", ma, na, mb, nb)
            self.ma, self.na, self.mb, self.nb = int(ma), int(na), int(mb), int(nb)  # type: ignore[arg-type]
            self.latency = ADD_JOIN_LATENCY
        self.queue_depth = credit_depth(self.latency, 1)
        super().__init__(members)

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
        if self.runtime:
            prm = self._params(m)
            outs = [self._runtime_lane(m, lane, valid, prm) for lane in range(self.lanes)]
        else:
            outs = [self._lane(m, lane, valid) for lane in range(self.lanes)]
        m.d.comb += [q.w_valid.eq(valid[lat]), q.w_data.eq(Cat(*outs))]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m

    def _reg(self, m: Module, valid: list[Signal], lane: int, stage: int, shape: object,
             value: object, tag: str) -> Signal:
        """Register of pipeline stage ``stage``, loaded when its input is valid."""
        return stage_reg(m, valid, stage, shape, value, f"l{lane}_{tag}")

    def _product(self, m: Module, valid: list[Signal], lane: int, x: Value, k: Value,
                 tag: str) -> Value:
        """Stages 1-3: input register, product, second product register."""
        return rescale_product(m, valid, x, k, self.ff_style, x_name=f"l{lane}_{tag}1",
                               dsp_name=f"l{lane}_m{tag}", p_name=f"l{lane}_p{tag}")

    def _clamp(self, r: Value) -> Value:
        return clamp_int8(r, self.relu)

    def _lane(self, m: Module, lane: int, valid: list[Signal]) -> Signal:
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            return self._reg(m, valid, lane, stage, shape, value, tag)

        pa3 = self._product(m, valid, lane, self.a.payload.word_select(lane, 8),
                            Const(self.ma, signed(16)), "a")
        pb3 = self._product(m, valid, lane, self.b.payload.word_select(lane, 8),
                            Const(self.mb, signed(16)), "b")
        assert self.na is not None and self.nb is not None
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
        return reg(6, 8, self._clamp(r5), "out6")

    def _params(self, m: Module) -> dict[str, Signal]:
        """Registers derived from the entry as it is written (static while streaming; see
        the module docstring)."""
        data = self.wr.data
        ma, mb, na, nb = data[0:15], data[16:31], data[32:38], data[40:46]
        swap = nb > na  # b has the larger shift: b is the big input
        n_small = Mux(swap, na, nb)
        d = Mux(swap, nb - na, na - nb)[0:6]
        zero, ns, k = loaded_shift(n_small)
        dc = Mux(d > 23, 23, d)[0:5]
        prm = {"swap": Signal(name="swap"), "m_big": Signal(signed(16), name="m_big"),
               "m_small": Signal(signed(16), name="m_small"), "dc": Signal(5, name="dc"),
               "ns": Signal(5, name="ns"), "h": Signal(23, name="h"),
               "k": Signal(23, name="k")}
        with m.If(self.wr.en[0]):
            m.d.sync += [
                prm["swap"].eq(swap),
                prm["m_big"].eq(Mux(zero, 0, Mux(swap, mb, ma))),
                prm["m_small"].eq(Mux(zero, 0, Mux(swap, ma, mb))),
                prm["dc"].eq(Mux(zero, 0, dc)), prm["ns"].eq(ns),
                prm["h"].eq(Mux(zero | (n_small != 0), 0, (Const(1, 24) << dc) >> 1)),
                prm["k"].eq(k),
            ]
        return prm

    def _runtime_lane(self, m: Module, lane: int, valid: list[Signal],
                      prm: dict[str, Signal]) -> Signal:
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            return self._reg(m, valid, lane, stage, shape, value, tag)

        a, b = self.a.payload.word_select(lane, 8), self.b.payload.word_select(lane, 8)
        swap = prm["swap"]
        p_big = self._product(m, valid, lane, Mux(swap, b, a), prm["m_big"], "g")
        p_small = self._product(m, valid, lane, Mux(swap, a, b), prm["m_small"], "s")
        u4 = reg(4, signed(25), p_big + prm["h"], "u4")
        s4 = reg(4, signed(25), p_small + prm["k"], "s4")
        q5 = reg(5, signed(25), u4 >> prm["dc"], "q5")
        s5 = reg(5, signed(25), s4, "s5")
        t6 = reg(6, signed(26), q5 + s5, "t6")
        r7 = reg(7, signed(26), t6 >> prm["ns"], "r7")
        return reg(8, 8, self._clamp(r7), "out8")
