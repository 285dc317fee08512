"""An independent model of the fixed-point recurrent cells, written from
docs/fixed_point.md ("Recurrent cells") with Python ints, one sequence and one unit at a
time: what the golden kernels (vectorised over the active sequences) must match bit for
bit."""

from __future__ import annotations

from typing import Any

import numpy as np

import fluid_hw as fluid

ONE = 127  # a gate table's 1.0


def srq(terms: list[tuple[int, int, int]], lo: int, hi: int) -> int:
    """The sum requantiser: n = the largest term shift, clamp((sum p * m * 2^(n - n_j) +
    2^(n-1)) >> n, lo, hi) (no rounding term when n = 0; >> floors)."""
    n = max(int(k) for _, _, k in terms)
    s = sum(int(p) * int(m) * 2 ** (n - int(k)) for p, m, k in terms)
    if n > 0:
        s += 1 << (n - 1)
    return min(max(s >> n, lo), hi)


def _rows(lengths: list[int], reverse: bool) -> list[list[int]]:
    out, start = [], 0
    for n in lengths:
        rows = list(range(start, start + n))
        out.append(rows[::-1] if reverse else rows)
        start += n
    return out


def lstm_model(x: np.ndarray, lengths: list[int], p: dict[str, Any], a: dict[str, Any],
               h0: np.ndarray | None = None, c0: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """(Hidden int8, Cell int16) of quantized_lstm."""
    w = p["Weight"].astype(int).tolist()
    d = len(w)
    gm = p["GateMultiplier"].tolist()
    gs = p["GateShift"].tolist()
    t = p["Tables"].astype(int).tolist()
    pp = p["Peephole"].astype(int).tolist() if a["use_peepholes"] else [[0] * d] * 3
    mc, nc = a["cell_multipliers"], a["cell_shifts"]
    hid = np.zeros((x.shape[0], d), np.int8)
    cel = np.zeros((x.shape[0], d), np.int16)
    xs = x.astype(int).tolist()
    for s, rows in enumerate(_rows(lengths, a["is_reverse"])):
        h = [int(v) for v in h0[s]] if h0 is not None else [0] * d
        c = [int(v) for v in c0[s]] if c0 is not None else [0] * d
        for r in rows:
            acc = [sum(h[e] * w[e][j] for e in range(d)) for j in range(4 * d)]

            def z(j: int, peep: int, xr: list[int] = xs[r], acc: list[int] = acc) -> int:
                return srq([(xr[j], gm[0][j], gs[0][j]), (acc[j], gm[1][j], gs[1][j]),
                            (peep, gm[2][j], gs[2][j])], -128, 127)

            hn, cn = [0] * d, [0] * d
            for u in range(d):
                g = t[0][z(u, 0) + 128]
                i = t[1][z(d + u, c[u] * pp[0][u]) + 128]
                f = t[2][z(2 * d + u, c[u] * pp[1][u]) + 128]
                cn[u] = srq([(f * c[u], mc[0], nc[0]), (i * g, mc[1], nc[1])], -32768, 32767)
                o = t[3][z(3 * d + u, cn[u] * pp[2][u]) + 128]
                q = srq([(cn[u], a["cell_tanh_multiplier"], a["cell_tanh_shift"])], -128, 127)
                hn[u] = srq([(o * t[4][q + 128], a["hidden_multiplier"], a["hidden_shift"])],
                            -128, 127)
            h, c = hn, cn
            hid[r], cel[r] = h, c
    return hid, cel


def gru_model(x: np.ndarray, lengths: list[int], p: dict[str, Any], a: dict[str, Any],
              h0: np.ndarray | None = None) -> np.ndarray:
    """Hidden (int8) of quantized_gru."""
    w = p["Weight"].astype(int).tolist()
    d = len(w)
    gm = p["GateMultiplier"].tolist()
    gs = p["GateShift"].tolist()
    t = p["Tables"].astype(int).tolist()
    mh, nh = a["hidden_multipliers"], a["hidden_shifts"]
    hid = np.zeros((x.shape[0], d), np.int8)
    xs = x.astype(int).tolist()
    for s, rows in enumerate(_rows(lengths, a["is_reverse"])):
        h = [int(v) for v in h0[s]] if h0 is not None else [0] * d
        for r in rows:
            def z(j: int, acc: int, xr: list[int] = xs[r]) -> int:
                return srq([(xr[j], gm[0][j], gs[0][j]), (acc, gm[1][j], gs[1][j])], -128, 127)

            upd = [t[0][z(j, sum(h[e] * w[e][j] for e in range(d))) + 128] for j in range(d)]
            rst = [t[1][z(d + j, sum(h[e] * w[e][d + j] for e in range(d))) + 128]
                   for j in range(d)]
            rh = [srq([(rst[j] * h[j], a["reset_multiplier"], a["reset_shift"])], -128, 127)
                  for j in range(d)]
            hn = []
            for j in range(d):
                cand = t[2][z(2 * d + j, sum(rh[e] * w[e][2 * d + j] for e in range(d))) + 128]
                gc, gh = (ONE - upd[j], upd[j]) if a["origin_mode"] else (upd[j], ONE - upd[j])
                hn.append(srq([(gc * cand, mh[0], nh[0]), (gh * h[j], mh[1], nh[1])], -128, 127))
            h = hn
            hid[r] = h
    return hid


def lstm_unit_model(x: np.ndarray, c_prev: np.ndarray, p: dict[str, Any], a: dict[str, Any]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(C int16, H int8) of quantized_lstm_unit (gates [input, forget, output, candidate])."""
    d = c_prev.shape[1]
    t = p["Tables"].astype(int).tolist()
    gm, gs = p["GateMultiplier"].tolist()[0], p["GateShift"].tolist()[0]
    mc, nc = a["cell_multipliers"], a["cell_shifts"]
    c_out = np.zeros(c_prev.shape, np.int16)
    h_out = np.zeros(c_prev.shape, np.int8)
    for row in range(x.shape[0]):
        for u in range(d):
            i, f, o, g = (t[k][srq([(int(x[row, k * d + u]), gm[k * d + u], gs[k * d + u])],
                                   -128, 127) + 128] for k in range(4))
            c = srq([(f * int(c_prev[row, u]), mc[0], nc[0]), (i * g, mc[1], nc[1])], -32768,
                    32767)
            q = srq([(c, a["cell_tanh_multiplier"], a["cell_tanh_shift"])], -128, 127)
            c_out[row, u] = c
            h_out[row, u] = srq([(o * t[4][q + 128], a["hidden_multiplier"],
                                  a["hidden_shift"])], -128, 127)
    return c_out, h_out


def run_cell(op_type: str, x: np.ndarray, lengths: list[int], params: dict[str, np.ndarray],
             attrs: dict[str, Any], initial: dict[str, np.ndarray] | None = None
             ) -> dict[str, np.ndarray]:
    """Run one quantized_lstm / quantized_gru op on the CPU executor."""
    prog = fluid.Program()
    b = prog.global_block()
    b.create_var(name="input", shape=[-1, x.shape[1]], dtype=x.dtype, lod_level=1)
    feed: dict[str, Any] = {"input": fluid.create_lod_tensor(x, [list(lengths)])}
    ins = {"Input": ["input"]}
    for slot, v in {**params, **(initial or {})}.items():
        name = slot.lower()
        b.create_var(name=name, shape=list(v.shape), dtype=v.dtype)
        feed[name] = v
        ins[slot] = [name]
    outs = {"Hidden": ["hidden"], **({"Cell": ["cell"]} if op_type == "quantized_lstm" else {})}
    for ns in outs.values():
        b.create_var(name=ns[0])
    b.append_op(op_type, ins, outs, attrs)
    with fluid.scope_guard(fluid.Scope()):
        vals = fluid.Executor().run(prog, feed=feed, fetch_list=[n[0] for n in outs.values()])
    return dict(zip(outs, (np.asarray(v) for v in vals)))
