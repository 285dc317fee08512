"""Stage spec of kind ``recurrent``: a quantised LSTM / GRU / plain recurrence with its
input projection (``quantized_fc`` without requantiser + ``quantized_lstm`` |
``quantized_gru`` | ``quantized_rnn``) over
sequences streamed back to back (:mod:`.recurrent`: the component and the stream
format).

``model`` is the golden kernels' arithmetic (``fluid_hw.backends.cpu.kernels.quant_rnn``:
the same sum requantiser and step functions, sequence by sequence), so it is bit-exact
with the CPU executor on the program the stage was made from."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from math import gcd
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .recurrent import GATES, RecurrentParams, recurrent_step_cycles
from .spec import StageSpec, _digest

__all__ = ["RecurrentSpec", "recurrent_model", "CELL_ATTRS", "TABLES"]

#: the cell attributes the hardware reads (per cell)
CELL_ATTRS = {
    "lstm": ("cell_multipliers", "cell_shifts", "cell_tanh_multiplier", "cell_tanh_shift",
             "hidden_multiplier", "hidden_shift"),
    "gru": ("reset_multiplier", "reset_shift", "hidden_multipliers", "hidden_shifts",
            "origin_mode"),
    "rnn": (),
}


def _wrap32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.int32).astype(np.int64)


#: rows of each cell's Tables (the LSTM's four gates and tanh of the cell, the GRU's
#: three gates, the plain recurrence's activation)
TABLES = {"lstm": 5, "gru": 3, "rnn": 1}

#: a gate output of 1.0 (tables output at scale 1/127)
GATE_ONE = 127


def srq(terms: list[tuple[Any, Any, Any]], lo: int, hi: int) -> np.ndarray:
    """The stage's sum requantiser as the hardware computes it: each term ``p * m``
    aligned by ``2^(n - n_j)`` (``n`` the largest shift), summed, ``+ 2^(n-1)`` (none for
    ``n = 0``), arithmetic ``>> n``, clamped to ``[lo, hi]``; in Python ints (exact at
    any width)."""
    ts = [(np.asarray(p).astype(object), np.asarray(m).astype(object),
           np.asarray(k).astype(object)) for p, m, k in terms]
    n = ts[0][2]
    for _, _, k in ts[1:]:
        n = np.maximum(n, k)
    acc: Any = 0
    for p, m, k in ts:
        acc = acc + p * m * (np.ones_like(n) << (n - k))
    half = np.where(n > 0, np.ones_like(n) << np.maximum(n - 1, 0), 0)
    return np.clip((acc + half) >> n, lo, hi).astype(np.int64)


def _table(tables: np.ndarray, row: int, z: np.ndarray) -> np.ndarray:
    """Gate table ``row`` read at the int8 address ``z`` (entry ``z + 128``)."""
    return np.asarray(tables[row], np.int64)[np.asarray(z, np.int64) + 128]


def _lstm_step(a: dict[str, Any], xr: np.ndarray, h: np.ndarray, c: np.ndarray,
               wh: np.ndarray, gm: np.ndarray, gs: np.ndarray, tables: np.ndarray,
               peep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step (gates candidate, input, forget, output; peepholes ``peep``)."""
    d = wh.shape[0]
    acc = h @ wh

    def gate(k: int, pp: Any) -> np.ndarray:
        cols = slice(k * d, (k + 1) * d)
        z = srq([(xr[:, cols], gm[0, cols], gs[0, cols]),
                 (acc[:, cols], gm[1, cols], gs[1, cols]),
                 (pp, gm[2, cols], gs[2, cols])], -128, 127)
        return _table(tables, k, z)

    g, i, f = gate(0, 0), gate(1, c * peep[0]), gate(2, c * peep[1])
    mc, nc = list(a["cell_multipliers"]), list(a["cell_shifts"])
    cn = srq([(f * c, mc[0], nc[0]), (i * g, mc[1], nc[1])], -32768, 32767)
    o = gate(3, cn * peep[2])
    u = srq([(cn, a["cell_tanh_multiplier"], a["cell_tanh_shift"])], -128, 127)
    hn = srq([(o * _table(tables, 4, u), a["hidden_multiplier"], a["hidden_shift"])],
             -128, 127)
    return hn, cn


def _gru_step(a: dict[str, Any], xr: np.ndarray, h: np.ndarray, wh: np.ndarray,
              gm: np.ndarray, gs: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """One GRU step (gates update, reset, candidate; ``origin_mode`` as Fluid's)."""
    d = wh.shape[0]
    ur, cc = slice(0, 2 * d), slice(2 * d, 3 * d)
    z = srq([(xr[:, ur], gm[0, ur], gs[0, ur]), (h @ wh[:, ur], gm[1, ur], gs[1, ur])],
            -128, 127)
    u, r = _table(tables, 0, z[:, :d]), _table(tables, 1, z[:, d:])
    rh = srq([(r * h, a["reset_multiplier"], a["reset_shift"])], -128, 127)
    zc = srq([(xr[:, cc], gm[0, cc], gs[0, cc]), (rh @ wh[:, cc], gm[1, cc], gs[1, cc])],
             -128, 127)
    cand = _table(tables, 2, zc)
    gc, gh = (GATE_ONE - u, u) if a["origin_mode"] else (u, GATE_ONE - u)
    mh, nh = list(a["hidden_multipliers"]), list(a["hidden_shifts"])
    return srq([(gc * cand, mh[0], nh[0]), (gh * h, mh[1], nh[1])], -128, 127)


def _rnn_step(xr: np.ndarray, h: np.ndarray, wh: np.ndarray, gm: np.ndarray,
              gs: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """One plain-recurrence step: the table of the requantised pre-activation."""
    return _table(tables, 0, srq([(xr, gm[0], gs[0]), (h @ wh, gm[1], gs[1])], -128, 127))


def recurrent_model(cell: str, p: RecurrentParams, xs: list[np.ndarray]
                    ) -> list[np.ndarray]:
    """Each sequence's int8 hidden states ``[T, D]`` from its int8 inputs ``[T, in_dim]``:
    the projection (int32 wrap-around, as ``quantized_fc``) then the cell's steps from
    a zero state, as docs/fixed_point.md ("Recurrent cells") states them.  Written
    apart from the golden kernels (``backends.cpu.kernels.quant_rnn``), which the tests
    compare it with."""
    i64 = np.int64
    wx, wh = np.asarray(p.wx, i64), np.asarray(p.wh, i64)
    bias = np.asarray(p.bias, i64)
    gm, gs = np.asarray(p.gm, i64), np.asarray(p.gs, i64)
    tables = np.asarray(p.tables)
    d = wh.shape[0]
    peep = np.asarray(p.peephole, i64) if p.peephole is not None else np.zeros((3, d), i64)
    outs = []
    for x in xs:
        proj = _wrap32(np.asarray(x, i64) @ wx + bias)
        h = np.zeros((1, d), i64)
        c = np.zeros((1, d), i64)
        hid = np.empty((len(x), d), i64)
        for t in range(len(x)):
            xr = proj[t:t + 1]
            if cell == "gru":
                h = _gru_step(p.attrs, xr, h, wh, gm, gs, tables)
            elif cell == "rnn":
                h = _rnn_step(xr, h, wh, gm, gs, tables)
            else:
                h, c = _lstm_step(p.attrs, xr, h, c, wh, gm, gs, tables, peep)
            hid[t] = h[0]
        outs.append(hid)
    return outs


@dataclass(eq=False)
class RecurrentSpec(StageSpec):
    """A recurrent stage (see the module docstring): ``cell`` ``"lstm"`` | ``"gru"`` |
    ``"rnn"``,
    ``in_dim`` int8 inputs a step, ``hidden`` units, PE x SIMD folding of its matrix
    engine, ``mode`` ``"last"`` (one output beat a sequence) or ``"sequence"`` (one a
    step), ``peepholes`` (LSTM).  ``arrays`` (:class:`~.recurrent.RecurrentParams`)
    None: zero arrays (estimates only)."""

    name: str
    cell: str
    in_dim: int
    hidden: int
    pe: int = 1
    simd: int = 1
    mode: str = "last"
    peepholes: bool = False
    arrays: RecurrentParams | None = field(default=None, repr=False)

    kind = "recurrent"
    folds = True
    #: no MVAU requantiser lanes behind the matrix engine (the accumulators go to the
    #: element-wise unit's sum requantisers)
    requantize = False

    @property
    def op(self) -> str:
        return f"quantized_{self.cell}"

    def __post_init__(self) -> None:
        if self.cell not in GATES:
            raise HardwareConfigError(f"recurrent stage {self.name!r}: cell must be one of "
                                      f"{sorted(GATES)}, not {self.cell!r}")
        if self.arrays is None:
            self.arrays = _zero_params(self.cell, self.in_dim, self.hidden, self.peepholes)
        self.validate()

    def validate(self) -> None:
        who = f"recurrent stage {self.name!r}"
        if self.cell not in GATES:
            raise HardwareConfigError(f"{who}: cell must be one of {sorted(GATES)}, not "
                                      f"{self.cell!r}")
        if self.mode not in ("last", "sequence"):
            raise HardwareConfigError(f"{who}: mode must be 'last' or 'sequence'")
        if self.hidden % self.pe or self.in_dim % self.simd or self.hidden % self.simd:
            raise HardwareConfigError(
                f"{who}: PE {self.pe} must divide the hidden size {self.hidden}, SIMD "
                f"{self.simd} the input size {self.in_dim} and the hidden size")
        assert self.arrays is not None
        if self.peepholes != (self.arrays.peephole is not None):
            raise HardwareConfigError(f"{who}: peepholes {self.peepholes} but the "
                                      "parameters " + ("lack" if self.peepholes else "hold")
                                      + " peephole weights")

    # the matrix fields the folding code reads (one step's matrices)
    @property
    def mw(self) -> int:
        return self.in_dim + self.hidden

    @property
    def mh(self) -> int:
        return GATES[self.cell] * self.hidden

    @property
    def fold_dims(self) -> tuple[int, int]:
        """``(mw, mh)`` offered to the folding search: SIMD must divide the input and the
        hidden size, PE the hidden size."""
        return gcd(self.in_dim, self.hidden), self.hidden

    @property
    def sf(self) -> int:
        return self.mw // self.simd

    @property
    def nf(self) -> int:
        return self.mh // self.pe

    @property
    def in_len(self) -> int:
        """Elements a time step (the stream's unit)."""
        return self.in_dim

    @property
    def out_len(self) -> int:
        return self.hidden

    @property
    def in_lanes(self) -> int:
        return self.in_dim

    @property
    def out_lanes(self) -> int:
        return self.hidden

    def step_cycles(self) -> int:
        """Cycles of one time step (:func:`~.recurrent.recurrent_step_cycles`)."""
        return recurrent_step_cycles(self.cell, self.in_dim, self.hidden, self.pe,
                                     self.simd, self.peepholes)

    def macs(self) -> int:
        return self.mw * self.mh

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "cell": self.cell,
                "in_dim": self.in_dim, "hidden": self.hidden, "pe": self.pe,
                "simd": self.simd, "mode": self.mode, "peepholes": self.peepholes}

    def params(self) -> dict[str, Any]:
        p = self.arrays
        assert p is not None
        return {"wx": _digest(p.wx), "wh": _digest(p.wh), "bias": _digest(p.bias),
                "gm": _digest(p.gm), "gs": _digest(p.gs), "tables": _digest(p.tables),
                "peephole": _digest(p.peephole),
                "attrs": repr(sorted((k, p.attrs[k]) for k in CELL_ATTRS[self.cell]))}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> RecurrentSpec:
        return cls(st["name"], st["cell"], int(st["in_dim"]), int(st["hidden"]),
                   int(st["pe"]), int(st["simd"]), st.get("mode", "last"),
                   bool(st.get("peepholes", False)))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .recurrent import RecurrentUnit

        assert self.arrays is not None
        return RecurrentUnit(self.name, self.cell, self.in_dim, self.hidden, self.pe,
                             self.simd, self.arrays, mode=self.mode, ff_style=ff_style)

    def model_sequences(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        """Each sequence's hidden states ``[T, D]`` (int64) from its inputs."""
        assert self.arrays is not None
        return recurrent_model(self.cell, self.arrays, xs)

    def model(self, x: np.ndarray, lengths: list[int] | None = None) -> np.ndarray:
        """Concatenated steps ``[sum T, in_dim]`` of sequences of ``lengths`` (one
        sequence when None) -> the output rows: the last hidden state of each sequence
        (``mode="last"``) or every step's."""
        x = np.asarray(x, np.int64).reshape(-1, self.in_dim)
        lengths = [len(x)] if lengths is None else [int(v) for v in lengths]
        starts = np.cumsum([0, *lengths])
        hs = self.model_sequences([x[s:e] for s, e in itertools.pairwise(starts)])
        if self.mode == "last":
            return np.stack([h[-1] for h in hs])
        return np.concatenate(hs)

    def cycle_bound(self) -> int:
        return 2 * self.step_cycles() + 64


def _zero_params(cell: str, in_dim: int, hidden: int, peepholes: bool) -> RecurrentParams:
    g = GATES[cell]
    terms = 3 if cell == "lstm" else 2
    attrs: dict[str, Any] = {
        "lstm": {"cell_multipliers": [1, 1], "cell_shifts": [0, 0],
                 "cell_tanh_multiplier": 1, "cell_tanh_shift": 0,
                 "hidden_multiplier": 1, "hidden_shift": 0},
        "gru": {"reset_multiplier": 1, "reset_shift": 0, "hidden_multipliers": [1, 1],
                "hidden_shifts": [0, 0], "origin_mode": False}, "rnn": {}}[cell]
    z8 = np.zeros
    return RecurrentParams(z8((in_dim, g * hidden), np.int64), z8(g * hidden, np.int64),
                           z8((hidden, g * hidden), np.int64),
                           np.ones((terms, g * hidden), np.int64),
                           z8((terms, g * hidden), np.int64),
                           z8((TABLES[cell], 256), np.int64),
                           z8((3, hidden), np.int64) if peepholes else None, attrs)
