"""Random one-node models for every ONNX op fluid-hw imports: random shapes, attributes,
dtypes and opsets, each compared with onnxruntime.

``GENERATORS[op](rng)`` returns that op's cases; :func:`cases_for` seeds the generator
from the op's name, so every run (and docs/onnx.md) sees the same models.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
from onnx import helper

from tests.onnx.harness import NONE, C, Case, F, In, graph_case, node_case

R = np.random.Generator
F32 = np.float32

# opsets the random models are built for: the oldest supported, the ones where op
# signatures change (13, 18) and the newest
OPSETS = (11, 13, 17, 18, 28)


def shape(r: R, lo: int = 1, hi: int = 4, dmax: int = 5) -> list[int]:
    return [int(d) for d in r.integers(1, dmax + 1, size=int(r.integers(lo, hi + 1)))]


def normal(r: R, s: list[int], dtype: type = F32) -> np.ndarray:
    return r.standard_normal(s).astype(dtype)


def ints(r: R, s: list[int], lo: int = -9, hi: int = 10, dtype: type = np.int64) -> np.ndarray:
    return r.integers(lo, hi, size=s).astype(dtype)


def bcast_partner(r: R, s: list[int]) -> list[int]:
    """A shape that broadcasts with ``s``: trailing dims, some set to 1."""
    k = int(r.integers(0, len(s) + 1))
    out = [1 if r.random() < 0.3 else d for d in s[len(s) - k:]]
    return out


def pick(r: R, seq: tuple | list) -> object:
    return seq[int(r.integers(len(seq)))]


# -- element-wise ---------------------------------------------------------------------

def _unary(op: str, dom: str = "any") -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(5):
            s = shape(r)
            x = normal(r, s)
            if dom == "pos":
                x = np.abs(x) + F32(0.1)
            elif dom == "nonzero":
                x = np.where(np.abs(x) < 0.1, F32(0.5), x)
            elif dom == "halves":
                x = (r.integers(-8, 9, size=s) / 2).astype(F32)
            elif dom == "unit":  # inside (-1, 1)
                x = np.tanh(x).astype(F32) * F32(0.95)
            elif dom == "ge1":
                x = np.abs(x) + F32(1.05)
            dyn = [None, *s[1:]] if i == 4 else None
            out.append(node_case(op, [F(x, dyn)], opset=pick(r, OPSETS), id=f"{op}-{i}"))
        return out

    return gen


def _unary_int(op: str, dtype: type) -> Callable[[R], list[Case]]:
    base = _unary(op)

    def gen(r: R) -> list[Case]:
        s = shape(r)
        return [*base(r), node_case(op, [F(ints(r, s, dtype=dtype))], id=f"{op}-{dtype.__name__}")]

    return gen


def gen_leaky_relu(r: R) -> list[Case]:
    out = [node_case("LeakyRelu", [F(normal(r, shape(r)))], id="LeakyRelu-default")]
    for i in range(3):
        out.append(node_case("LeakyRelu", [F(normal(r, shape(r)))],
                             {"alpha": float(r.uniform(0.01, 0.5))}, opset=pick(r, OPSETS),
                             id=f"LeakyRelu-{i}"))
    return out


def _softmax(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(8):
            s = shape(r, 2 if i == 0 else 1, 4)
            opset = (11, 13, 18, 28, 11, 11, 13, 11)[i]
            axis = int(r.integers(-len(s), len(s)))
            attrs = {} if i == 0 else {"axis": axis}
            dyn = [None, *s[1:]] if i == 5 else None
            out.append(node_case(op, [F(normal(r, s) * 3, dyn)], attrs, opset=opset,
                                 id=f"{op}-{i}-opset{opset}"))
        return out

    return gen


def _binary(op: str, int_ok: bool = True) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(8):
            s = shape(r)
            t = bcast_partner(r, s)
            a, b = (s, t) if i % 2 == 0 else (t, s)
            if i < 5:
                x, y = normal(r, a), normal(r, b)
                if op == "Div":
                    y = np.where(np.abs(y) < 0.2, F32(0.7), y)
            elif i == 5 and int_ok:
                x, y = ints(r, a, dtype=np.int32), ints(r, b, 1, 5, dtype=np.int32)
            else:
                x, y = normal(r, a), np.asarray(F32(r.uniform(0.5, 2)))  # scalar constant
            kinds = (F, C) if i in (1, 3, 6) else (F, F)
            if i == 7:
                kinds = (C, F)
                x, y = y, x
            out.append(node_case(op, [kinds[0](x), kinds[1](y)], opset=pick(r, OPSETS),
                                 id=f"{op}-{i}"))
        # broadcast on both sides: each operand has a 1 where the other does not
        for k, (a, b) in enumerate((([3, 1, 5], [4, 1]), ([2, 1], [1, 3]))):
            x, y = normal(r, a), normal(r, b)
            if op == "Div":
                y = np.where(np.abs(y) < 0.2, F32(0.7), y)
            out.append(node_case(op, [F(x), F(y)], opset=pick(r, OPSETS),
                                 id=f"{op}-both-sides-{k}"))
        return out

    return gen


def gen_pow(r: R) -> list[Case]:
    out = []
    for i in range(5):
        s = shape(r)
        x = np.abs(normal(r, s)) + F32(0.2)
        if i < 2:
            y = normal(r, bcast_partner(r, s))
        elif i == 2:
            y = np.asarray(2, dtype=np.int64)
        elif i == 3:
            y = ints(r, bcast_partner(r, s), 0, 3, np.int32)
        else:
            y = np.asarray(F32(0.5))
        kind = C if i in (2, 4) else F
        out.append(node_case("Pow", [F(x), kind(y)], opset=pick(r, (13, 15, 28)),
                             id=f"Pow-{i}"))
    return out


def gen_clip(r: R) -> list[Case]:
    s = shape(r)
    x = normal(r, s) * 2
    xi = ints(r, s, dtype=np.int32)
    lo, hi = np.asarray(F32(-0.5)), np.asarray(F32(0.8))
    return [
        node_case("Clip", [F(x), C(lo), C(hi)], id="Clip-both"),
        node_case("Clip", [F(x), C(lo)], id="Clip-min", opset=13),
        node_case("Clip", [F(x), NONE, C(hi)], id="Clip-max", opset=28),
        node_case("Clip", [F(x)], id="Clip-none", opset=11),
        node_case("Clip", [F(x), F(lo), F(hi)], id="Clip-fed-bounds"),
        node_case("Clip", [F(xi), C(np.asarray(-3, np.int32)), C(np.asarray(4, np.int32))],
                  id="Clip-int32"),
        node_case("Clip", [F(x), C(np.asarray(F32(1.0))), C(np.asarray(F32(-1.0)))],
                  id="Clip-min-above-max"),
    ]


def _variadic(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for n in (1, 2, 3):
            s = shape(r)
            arrs = [normal(r, s if k == 0 else bcast_partner(r, s)) for k in range(n)]
            out.append(node_case(op, [F(a) for a in arrs], opset=pick(r, OPSETS),
                                 id=f"{op}-{n}"))
        return out

    return gen


def _compare(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        s = shape(r)
        t = bcast_partner(r, s)
        return [
            node_case(op, [F(ints(r, s, -2, 3).astype(F32)), F(ints(r, t, -2, 3).astype(F32))],
                      id=f"{op}-float"),
            node_case(op, [F(ints(r, s, -2, 3)), C(ints(r, t, -2, 3))],
                      opset=pick(r, (12, 13, 16, 28)),
                      id=f"{op}-int64"),
        ]

    return gen


def _logical(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        s = shape(r)
        t = bcast_partner(r, s)
        return [node_case(op, [F(r.random(s) < 0.5), F(r.random(t) < 0.5)], id=f"{op}-{k}")
                for k in range(2)]

    return gen


def gen_not(r: R) -> list[Case]:
    return [node_case("Not", [F(r.random(shape(r)) < 0.5)], id=f"Not-{k}") for k in range(2)]


# -- matrix products --------------------------------------------------------------------

def gen_gemm(r: R) -> list[Case]:
    out = []
    for i in range(8):
        m, k, n = (int(v) for v in r.integers(1, 7, size=3))
        ta, tb = bool(i & 1), bool(i & 2)
        a = normal(r, [k, m] if ta else [m, k])
        b = normal(r, [n, k] if tb else [k, n])
        c_shape = pick(r, ([n], [1, n], [m, n], [], [m, 1]))
        attrs = {"transA": int(ta), "transB": int(tb)}
        if i >= 4:
            attrs.update(alpha=float(r.uniform(0.5, 2)), beta=float(r.uniform(0.5, 2)))
        ins = [F(a), (C if i != 5 else F)(b)]
        if i != 6:
            ins.append((C if i != 7 else F)(normal(r, c_shape)))
        out.append(node_case("Gemm", ins, attrs, opset=pick(r, (11, 13, 28)), id=f"Gemm-{i}"))
    return out


def gen_matmul(r: R) -> list[Case]:
    k = int(r.integers(2, 6))
    specs = [([3, k], [k, 4], C), ([3, k], [k, 4], F), ([2, 3, k], [k, 5], C),
             ([2, 3, k], [2, k, 5], F), ([k], [k, 3], F), ([3, k], [k], F), ([k], [k], F),
             ([2, 2, 3, k], [2, 2, k, 4], F), ([2, 3, k], [k, 4], F),
             # batch dims broadcast on both sides
             ([3, 1, 2, k], [1, 2, k, 4], F), ([2, 1, 3, k], [4, k, 2], F)]
    return [node_case("MatMul", [F(normal(r, a)), kind(normal(r, b))], opset=pick(r, OPSETS),
                      id=f"MatMul-{'x'.join(map(str, a))}@{'x'.join(map(str, b))}-{kind.__name__}")
            for a, b, kind in specs]


# -- convolution and pooling ----------------------------------------------------------------

def gen_conv(r: R) -> list[Case]:
    out = []
    for i in range(10):
        one_d = i in (7, 8)
        n, g = int(r.integers(1, 3)), (2 if i in (2, 8) else 1)
        c = g * int(r.integers(1, 3))
        m = g * int(r.integers(1, 3))
        if i == 3:  # depthwise
            g, c, m = 3, 3, 6
        ks = [int(v) for v in r.integers(1, 4, size=1 if one_d else 2)]
        sp = [int(v) for v in r.integers(5, 9, size=len(ks))]
        attrs: dict = {"group": g} if g > 1 else {}
        if i in (1, 4, 8):
            attrs["strides"] = [int(v) for v in r.integers(1, 3, size=len(ks))]
        if i in (2, 5, 7):
            attrs["pads"] = [int(v) for v in r.integers(0, 2, size=2 * len(ks))]
        if i == 4:
            attrs["dilations"] = [2] * len(ks)
        if i == 5:
            attrs["kernel_shape"] = ks
        if i == 6:
            attrs["auto_pad"] = "SAME_UPPER"
            attrs["strides"] = [2] * len(ks)
        if i == 9:
            attrs["auto_pad"] = pick(r, ("SAME_LOWER", "VALID"))
            attrs["dilations"] = [2] * len(ks)
        x = normal(r, [n, c, *sp])
        w = normal(r, [m, c // g, *ks])
        ins = [F(x, [None, c, *sp] if i == 0 else None), (F if i == 1 else C)(w)]
        if i % 3 != 0:
            ins.append(C(normal(r, [m])))
        out.append(node_case("Conv", ins, attrs, opset=pick(r, (11, 22, 28)),
                             id=f"Conv-{i}{'-1d' if one_d else ''}"))
    return out


def _pool(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(9):
            one_d = i == 7
            k = [int(v) for v in r.integers(1, 4, size=1 if one_d else 2)]
            sp = [int(v) for v in r.integers(4, 9, size=len(k))]
            attrs: dict = {"kernel_shape": k}
            if i in (1, 3, 5, 6, 7):
                attrs["strides"] = [int(v) for v in r.integers(1, 3, size=len(k))]
            if i in (2, 3, 6):
                attrs["pads"] = [int(min(v, kk - 1)) for v, kk in
                                 zip(r.integers(0, 2, size=2 * len(k)), k + k)]
            if i in (5, 6):
                attrs["ceil_mode"] = 1
            if i == 4:
                attrs["auto_pad"] = "SAME_UPPER"
            if i == 8:
                attrs["auto_pad"] = "SAME_LOWER"
                attrs["strides"] = [2] * len(k)
            if op == "AveragePool" and i in (3, 8):
                attrs["count_include_pad"] = 1
            x = normal(r, [2, 3, *sp])
            if op == "MaxPool" and i == 1:
                x = ints(r, [2, 3, *sp], 0, 256, np.uint8)
            if op == "MaxPool" and i == 7:
                x = ints(r, [2, 3, *sp], -128, 128, np.int8)
            dyn = [None, 3, *sp] if i == 0 else None
            out.append(node_case(op, [F(x, dyn)], attrs, opset=pick(r, (11, 19, 22, 28)),
                                 id=f"{op}-{i}{'-1d' if one_d else ''}"))
        # as window taps: 3-D, dilated (AveragePool from opset 19), MaxPool's Indices
        for i in range(4):
            n = 3 if i in (0, 3) else 2
            k = [int(v) for v in r.integers(1, 4, size=n)]
            attrs = {"kernel_shape": k, "strides": [int(v) for v in r.integers(1, 3, size=n)],
                     "pads": [int(min(v, kk - 1)) for v, kk in
                              zip(r.integers(0, 2, size=2 * n), k + k)]}
            if i in (1, 3):
                attrs["dilations"] = [int(v) for v in r.integers(1, 3, size=n)]
            if i == 3:
                attrs["ceil_mode"] = 1
            if op == "AveragePool" and i in (1, 2):
                attrs["count_include_pad"] = 1
            x = normal(r, [2, 3, *[int(v) for v in r.integers(5, 8, size=n)]])
            indices = op == "MaxPool" and i in (1, 2)
            if indices:
                attrs["storage_order"] = i - 1
            out.append(node_case(op, [F(x)], attrs, opset=pick(r, (19, 22)),
                                 n_out=2 if indices else 1, id=f"{op}-taps-{i}"))
        return out

    return gen


def _global_pool(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        return [node_case(op, [F(normal(r, [2, 3, *[int(v) for v in r.integers(2, 6, size=k)]]))],
                          opset=pick(r, OPSETS), id=f"{op}-{k}d") for k in (1, 2, 3)]

    return gen


def gen_batch_norm(r: R) -> list[Case]:
    out = []
    for i, (rank, eps, opset) in enumerate(((4, None, 11), (2, 1e-3, 15), (3, 1e-2, 14),
                                            (4, 1e-5, 28), (5, 0.1, 15))):
        c = int(r.integers(1, 5))
        s = [int(r.integers(1, 4)), c, *[int(v) for v in r.integers(1, 5, size=rank - 2)]]
        params = [normal(r, [c]), normal(r, [c]), normal(r, [c]),
                  np.abs(normal(r, [c])) + F32(0.1)]
        attrs = {} if eps is None else {"epsilon": eps}
        out.append(node_case("BatchNormalization", [F(normal(r, s)), *map(C, params)], attrs,
                             opset=opset, id=f"BatchNormalization-{i}-rank{rank}"))
    # training mode: batch statistics, and the running ones as outputs 1 and 2
    for i, rank in enumerate((4, 3)):
        c = int(r.integers(1, 5))
        s = [int(r.integers(2, 4)), c, *[int(v) for v in r.integers(2, 5, size=rank - 2)]]
        params = [normal(r, [c]), normal(r, [c]), normal(r, [c]),
                  np.abs(normal(r, [c])) + F32(0.1)]
        out.append(node_case("BatchNormalization", [F(normal(r, s)), *map(C, params)],
                             {"training_mode": 1, "momentum": 0.8, "epsilon": 1e-2},
                             opset=15, n_out=3, id=f"BatchNormalization-training-{i}"))
    return out


# -- shapes ----------------------------------------------------------------------------

def gen_flatten(r: R) -> list[Case]:
    out = []
    for i in range(6):
        s = shape(r, 1, 4)
        attrs = {} if i == 0 else {"axis": int(r.integers(-len(s), len(s) + 1))}
        out.append(node_case("Flatten", [F(normal(r, s))], attrs, opset=pick(r, OPSETS),
                             id=f"Flatten-{i}"))
    return out


def gen_reshape(r: R) -> list[Case]:
    x = normal(r, [2, 3, 4])
    targets = ([4, 6], [0, -1], [-1], [2, 0, 2, 2], [6, -1, 2], [1, 24])
    out = [node_case("Reshape", [F(x), C(np.array(t, np.int64))], opset=pick(r, (11, 14, 28)),
                     id=f"Reshape-{'_'.join(map(str, t))}") for t in targets]
    # PyTorch's x.view(x.size(0), -1) on a dynamic batch: Shape -> Gather -> Unsqueeze ->
    # Concat -> Reshape, folded at import
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    out.append(graph_case(nodes, {"x": F(x, ["N", 3, 4]), "zero": C(np.array(0, np.int64)),
                                  "axes0": C(np.array([0], np.int64)),
                                  "minus1": C(np.array([-1], np.int64))}, {"y": ["N", 12]},
                          opset=13, id="Reshape-shape-subgraph-dynamic-batch"))
    return out


def gen_transpose(r: R) -> list[Case]:
    out = []
    for i in range(5):
        s = shape(r, 1, 4)
        attrs = {} if i == 0 else {"perm": [int(p) for p in r.permutation(len(s))]}
        out.append(node_case("Transpose", [F(normal(r, s))], attrs, opset=pick(r, OPSETS),
                             id=f"Transpose-{i}"))
    return out


def gen_concat(r: R) -> list[Case]:
    out = []
    for i in range(5):
        s = shape(r, 1, 4)
        axis = int(r.integers(-len(s), len(s)))
        arrs = []
        for _ in range(int(r.integers(1, 4))):
            t = list(s)
            t[axis] = int(r.integers(1, 4))
            arrs.append(normal(r, t) if i != 3 else ints(r, t))
        ins = [(C if k == 1 else F)(a) for k, a in enumerate(arrs)]
        out.append(node_case("Concat", ins, {"axis": axis}, opset=pick(r, OPSETS),
                             id=f"Concat-{i}"))
    return out


def gen_split(r: R) -> list[Case]:
    x = normal(r, [4, 6, 5])
    return [
        node_case("Split", [F(x)], {"axis": 1}, opset=11, n_out=3, id="Split-equal-11"),
        node_case("Split", [F(x)], {"axis": -1, "split": [2, 3]}, opset=11, n_out=2,
                  id="Split-attr-11"),
        node_case("Split", [F(x), C(np.array([1, 3], np.int64))], {"axis": 0}, opset=13,
                  n_out=2, id="Split-input-13"),
        node_case("Split", [F(x)], {"axis": 2, "num_outputs": 2}, opset=18, n_out=2,
                  id="Split-num_outputs-uneven-18"),
        node_case("Split", [F(x), C(np.array([2, 2, 2], np.int64))], {"axis": 1}, opset=28,
                  n_out=3, id="Split-input-28"),
    ]


def gen_slice(r: R) -> list[Case]:
    x = normal(r, [5, 6, 7])
    big = np.iinfo(np.int64).max
    specs = [([1], [4], None, None), ([0, -3], [-1, 100], [0, 2], None),
             ([-100], [big], [1], None), ([1, 0], [5, 7], [-3, -1], [2, 3]),
             ([4], [-big], [0], [-1]), ([-1, 5], [0, 0], [1, 2], [-2, -1]), ([2], [2], [1], None)]
    out = []
    for i, (s, e, a, st) in enumerate(specs):
        ins = [F(x), C(np.array(s, np.int64)), C(np.array(e, np.int64))]
        if a is not None or st is not None:
            ins.append(C(np.array(a if a is not None else list(range(len(s))), np.int64)))
        if st is not None:
            ins.append(C(np.array(st, np.int64)))
        out.append(node_case("Slice", ins, opset=pick(r, (11, 13, 28)), id=f"Slice-{i}"))
    return out


def gen_squeeze(r: R) -> list[Case]:
    x = normal(r, [1, 3, 1, 4, 1])
    return [
        node_case("Squeeze", [F(x)], {"axes": [0, -1]}, opset=11, id="Squeeze-attr-11"),
        node_case("Squeeze", [F(x), C(np.array([2], np.int64))], opset=13, id="Squeeze-13"),
        node_case("Squeeze", [F(x)], opset=28, id="Squeeze-all"),
        node_case("Squeeze", [F(x)], opset=11, id="Squeeze-all-11"),
    ]


def gen_unsqueeze(r: R) -> list[Case]:
    x = normal(r, [3, 4])
    return [
        node_case("Unsqueeze", [F(x)], {"axes": [0]}, opset=11, id="Unsqueeze-attr-11"),
        node_case("Unsqueeze", [F(x)], {"axes": [-1, 1]}, opset=11, id="Unsqueeze-neg-11"),
        node_case("Unsqueeze", [F(x), C(np.array([3, 0], np.int64))], opset=13,
                  id="Unsqueeze-13"),
        node_case("Unsqueeze", [F(x), C(np.array([-2], np.int64))], opset=28,
                  id="Unsqueeze-28"),
    ]


def gen_identity(r: R) -> list[Case]:
    return [node_case("Identity", [F(normal(r, shape(r)))], opset=pick(r, OPSETS),
                      id=f"Identity-{k}") for k in range(2)]


def gen_dropout(r: R) -> list[Case]:
    x = normal(r, shape(r))
    return [
        node_case("Dropout", [F(x)], {"ratio": 0.3}, opset=11, id="Dropout-11"),
        node_case("Dropout", [F(x), C(np.asarray(F32(0.4)))], opset=13, id="Dropout-ratio"),
        node_case("Dropout", [F(x)], opset=28, n_out=2, id="Dropout-mask"),
        node_case("Dropout", [F(x), C(np.asarray(F32(0.4))), C(np.asarray(False))],
                  opset=22, id="Dropout-training-false"),
    ]


def gen_cast(r: R) -> list[Case]:
    s = shape(r)
    x = normal(r, s) * 10
    xi = ints(r, s, -300, 300)
    out = []
    for to in (np.int32, np.int64, np.float64, np.float16, np.bool_, np.uint8, np.float32):
        out.append(node_case("Cast", [F(x)], {"to": helper.np_dtype_to_tensor_dtype(
            np.dtype(to))}, opset=pick(r, (13, 19, 28)), id=f"Cast-float-to-{np.dtype(to)}"))
    for to in (np.float32, np.int32, np.bool_):
        out.append(node_case("Cast", [F(xi)], {"to": helper.np_dtype_to_tensor_dtype(
            np.dtype(to))}, opset=pick(r, OPSETS), id=f"Cast-int64-to-{np.dtype(to)}"))
    # the narrow types both ways (integers out of range wrap, as in C and onnxruntime)
    small = np.clip(x, -100, 100)
    for src, to in ((small, np.int16), (small, np.int8), (xi, np.int16), (xi, np.uint8),
                    (xi, np.int8), (xi, np.float16), (xi > 0, np.float32), (xi > 0, np.int64),
                    (xi.astype(np.uint8), np.float32), (xi.astype(np.uint8), np.int32),
                    (xi.astype(np.int16), np.float16), (xi.astype(np.int16), np.float32),
                    (small.astype(np.float16), np.int16), (small.astype(np.float16), np.bool_)):
        out.append(node_case("Cast", [F(src)], {"to": helper.np_dtype_to_tensor_dtype(
            np.dtype(to))}, opset=pick(r, (13, 19, 28)),
            id=f"Cast-{src.dtype}-to-{np.dtype(to)}"))
    return out


def gen_pad(r: R) -> list[Case]:
    x = normal(r, [2, 3, 4, 5])
    p = np.array([0, 0, 1, 2, 0, 1, 2, 1], np.int64)
    return [
        node_case("Pad", [F(x), C(p)], opset=11, id="Pad-constant-default"),
        node_case("Pad", [F(x), C(p), C(np.asarray(F32(1.5)))], opset=13, id="Pad-value"),
        node_case("Pad", [F(x), C(p)], {"mode": "reflect"}, opset=18, id="Pad-reflect"),
        node_case("Pad", [F(x), C(p)], {"mode": "edge"}, opset=11, id="Pad-edge"),
        node_case("Pad", [F(x), C(p)], {"mode": "wrap"}, opset=19, id="Pad-wrap"),
        node_case("Pad", [F(x), C(np.array([0, -1, 1, 2, 0, 1, -2, 0], np.int64))], opset=13,
                  id="Pad-negative"),
        node_case("Pad", [F(x), C(np.array([1, 2, 0, 3], np.int64)), NONE,
                          C(np.array([1, -1], np.int64))], opset=18, id="Pad-axes"),
        node_case("Pad", [F(ints(r, [3, 4])), C(np.array([1, 0, 2, 1], np.int64)),
                          C(np.asarray(7, np.int64))], opset=13, id="Pad-int64"),
    ]


def _reduce(op: str, since_input: int) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(7):
            s = shape(r, 1, 4)
            opset = (11, since_input, 28, 11, since_input, 28, since_input)[i]
            attrs: dict = {}
            axes = sorted({int(a) for a in r.integers(-len(s), len(s), size=2)})
            if i == 3:
                axes = []
            if i != 2:
                attrs["keepdims"] = int(r.integers(0, 2))
            if i == 3:
                attrs["keepdims"] = 0
            ins: list[In] = [F(normal(r, s) if i != 6 else ints(r, s))]
            if i == 5:
                attrs["noop_with_empty_axes"] = 1
                axes = []
            if axes:
                if opset >= since_input:
                    ins.append(C(np.array(axes, np.int64)))
                else:
                    attrs["axes"] = axes
            out.append(node_case(op, ins, attrs, opset=opset, id=f"{op}-{i}-opset{opset}"))
        return out

    return gen


def gen_gather(r: R) -> list[Case]:
    table = normal(r, [10, 4])
    return [
        node_case("Gather", [C(table), F(ints(r, [3, 2], 0, 10))], id="Gather-embedding"),
        node_case("Gather", [C(table), F(ints(r, [5], 0, 10, np.int32))], opset=11,
                  id="Gather-embedding-int32"),
        node_case("Gather", [C(table), C(np.array([[-1, 2], [0, -10]], np.int64))],
                  {"axis": 0}, id="Gather-negative-const-indices-folded"),
        node_case("Gather", [F(table), C(np.array([-1, 3], np.int64))], id="Gather-neg-const"),
        node_case("Gather", [F(normal(r, [3, 5, 2])), F(ints(r, [2, 2], 0, 5))], {"axis": 1},
                  opset=13, id="Gather-axis1"),
        node_case("Gather", [C(normal(r, [4, 3, 2])), F(np.asarray(1, np.int64))],
                  {"axis": -1}, opset=28, id="Gather-scalar-index"),
        node_case("Gather", [F(normal(r, [6, 3])), F(ints(r, [4], 0, 6))], id="Gather-fed-data"),
    ]


def _arg(op: str) -> Callable[[R], list[Case]]:
    def gen(r: R) -> list[Case]:
        out = []
        for i in range(6):
            s = shape(r, 1, 4)
            x = ints(r, s, 0, 3).astype(F32)  # ties
            attrs: dict = {"axis": int(r.integers(-len(s), len(s)))}
            if i % 2:
                attrs["keepdims"] = 0
            if i >= 3:
                attrs["select_last_index"] = 1
            out.append(node_case(op, [F(x)], attrs,
                                 opset=pick(r, (12, 13, 28) if i >= 3 else (11, 12, 13, 28)),
                                 id=f"{op}-{i}"))
        out.append(node_case(op, [F(normal(r, [5]))], {"keepdims": 0}, id=f"{op}-scalar"))
        if op == "ArgMin":  # integers: the order reversed as -1 - x, uint8 widened
            out += [node_case(op, [F(ints(r, [3, 4], dtype=dt))], {"axis": 1}, opset=13,
                              id=f"{op}-{np.dtype(dt).name}")
                    for dt in (np.int32, np.int64, np.uint8)]
        return out

    return gen


gen_argmax = _arg("ArgMax")


def _rnn(op: str) -> Callable[[R], list[Case]]:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]

    def gen(r: R) -> list[Case]:
        out = []
        for i in range(7):
            s, b, n_in, h = 5, 3, int(r.integers(2, 5)), int(r.integers(2, 5))
            direction = ("forward", "reverse", "bidirectional")[i % 3]
            dirs = 2 if direction == "bidirectional" else 1
            layout = 0  # onnxruntime has no batch-major (layout 1) RNNs; ONNX's node
            # tests cover it (test_lstm_batchwise, test_gru_batchwise)
            x = normal(r, [b, s, n_in] if layout else [s, b, n_in])
            w = normal(r, [dirs, gates * h, n_in]) * F32(0.5)
            rr = normal(r, [dirs, gates * h, h]) * F32(0.5)
            ins: list[In] = [F(x, [s, None, n_in] if i == 4 else None), C(w), C(rr)]
            ins.append(C(normal(r, [dirs, 2 * gates * h])) if i != 0 else NONE)
            lens = np.array([s, 2, 4][:b], np.int32) if i in (1, 2, 3) else None
            ins.append(F(lens) if lens is not None else NONE)
            if i in (2, 3, 5):
                ins.append(F(normal(r, [dirs, b, h] if not layout else [b, dirs, h])))
                if op == "LSTM":
                    ins.append(F(normal(r, [dirs, b, h] if not layout else [b, dirs, h])))
            if op == "LSTM" and i in (3, 6):
                while len(ins) < 7:
                    ins.append(NONE)
                ins.append(C(normal(r, [dirs, 3 * h])))
            attrs: dict = {"hidden_size": h, "direction": direction}
            if layout:
                attrs["layout"] = 1
            if i == 6:
                acts = {"LSTM": ["Sigmoid", "Relu", "Tanh"], "GRU": ["Sigmoid", "Relu"],
                        "RNN": ["Relu"]}[op]
                attrs["activations"] = acts * dirs
            out.append(node_case(op, ins, attrs, opset=14 if layout else pick(r, (11, 14, 22)),
                                 n_out=3 if op == "LSTM" else 2, id=f"{op}-{i}-{direction}",
                                 atol=1e-5))
        return out

    return gen


# -- ops of issue 16 -------------------------------------------------------------------

def gen_hard_sigmoid(r: R) -> list[Case]:
    return [node_case("HardSigmoid", [F(normal(r, shape(r)) * 4)],
                      {} if k == 0 else {"alpha": float(r.uniform(0.1, 0.5)),
                                         "beta": float(r.uniform(0.2, 0.7))},
                      opset=pick(r, OPSETS), id=f"HardSigmoid-{k}") for k in range(3)]


def gen_hard_swish(r: R) -> list[Case]:
    return [node_case("HardSwish", [F(normal(r, shape(r)) * 4)], opset=pick(r, (14, 22, 28)),
                      id=f"HardSwish-{k}") for k in range(3)]


def gen_erf(r: R) -> list[Case]:
    return [node_case("Erf", [F(normal(r, shape(r)) * 2)], opset=pick(r, OPSETS),
                      id=f"Erf-{k}") for k in range(3)]


def gen_gelu(r: R) -> list[Case]:
    return [node_case("Gelu", [F(normal(r, shape(r)) * 2)], {"approximate": a},
                      opset=pick(r, (20, 28)), id=f"Gelu-{a}") for a in ("none", "tanh")]


def gen_where(r: R) -> list[Case]:
    out = []
    for k in range(4):
        s = shape(r)
        ys = bcast_partner(r, s)
        cs = bcast_partner(r, s)
        x = normal(r, s) if k < 3 else ints(r, s)
        y = normal(r, ys) if k < 3 else ints(r, ys)
        out.append(node_case("Where", [F(r.random(cs) < 0.5), F(x), F(y)],
                             opset=pick(r, (11, 16, 28)), id=f"Where-{k}"))
    return out


def gen_expand(r: R) -> list[Case]:
    x = normal(r, [3, 1, 2])
    return [
        node_case("Expand", [F(x), C(np.array([2, 3, 4, 2], np.int64))], opset=11,
                  id="Expand-more-dims"),
        node_case("Expand", [F(x), C(np.array([1, 5, 1], np.int64))], opset=13,
                  id="Expand-ones"),
        node_case("Expand", [F(ints(r, [1, 4])), C(np.array([3, 1], np.int64))], opset=28,
                  id="Expand-int64"),
        node_case("Expand", [F(normal(r, [2, 1]), [None, 1]), C(np.array([4], np.int64))],
                  opset=13, id="Expand-dynamic-batch"),
    ]


def gen_tile(r: R) -> list[Case]:
    return [
        node_case("Tile", [F(normal(r, [2, 3])), C(np.array([2, 1], np.int64))], opset=11,
                  id="Tile-2d"),
        node_case("Tile", [F(ints(r, [2, 1, 3], dtype=np.int32)),
                           C(np.array([1, 3, 2], np.int64))], opset=13, id="Tile-int32"),
    ]


def gen_conv_transpose(r: R) -> list[Case]:
    out = []
    for i in range(8):
        n = 1 if i == 5 else 2
        g = 2 if i in (3, 6) else 1
        c_in, c_out_g = g * int(r.integers(1, 3)), int(r.integers(1, 3))
        k = [int(v) for v in r.integers(1, 4, size=n)]
        attrs: dict = {"group": g} if g > 1 else {}
        if i != 0:
            attrs["strides"] = [int(v) for v in r.integers(1, 4, size=n)]
        if i in (1, 3, 5):
            attrs["pads"] = [int(min(v, kk - 1)) for v, kk in
                             zip(r.integers(0, 2, size=2 * n), k + k)]
        if i in (2, 6):
            attrs["dilations"] = [int(v) for v in r.integers(1, 3, size=n)]
        if i in (1, 2):  # smaller than the stride or the dilation
            attrs["output_padding"] = [int(r.integers(0, max(s, d))) for s, d in
                                       zip(attrs["strides"], attrs.get("dilations", [1] * n))]
        if i == 4:
            # kernel >= stride: with a smaller kernel ONNX's reference (and fluid-hw) pad
            # negatively to reach input * stride, onnxruntime stops at zero padding
            attrs["auto_pad"] = "SAME_UPPER"
            attrs["strides"] = [min(v, kk) for v, kk in zip(attrs["strides"], k)]
        sp = [int(v) for v in r.integers(2, 6, size=n)]
        if i == 7:  # output_shape: the pads follow from it
            attrs["output_shape"] = [(d - 1) * s + kk - 1 for d, s, kk in
                                     zip(sp, attrs["strides"], k)]
        ins: list[In] = [F(normal(r, [2, c_in, *sp])), C(normal(r, [c_in, c_out_g, *k]))]
        if i % 2:
            ins.append(C(normal(r, [g * c_out_g])))
        out.append(node_case("ConvTranspose", ins, attrs, opset=pick(r, (11, 22)),
                             id=f"ConvTranspose-{i}{'-1d' if n == 1 else ''}"))
    return out


def gen_trilu(r: R) -> list[Case]:
    out = []
    for i in range(4):
        s = [int(v) for v in r.integers(1, 6, size=2 + i % 2)]
        ins: list[In] = [F(normal(r, s) if i != 2 else ints(r, s))]
        if i:
            ins.append(C(np.array(int(r.integers(-3, 4)), np.int64)))
        out.append(node_case("Trilu", ins, {"upper": i % 2}, opset=pick(r, (14, 22)),
                             id=f"Trilu-{i}"))
    return out


def gen_one_hot(r: R) -> list[Case]:
    out = []
    for i in range(3):
        s = shape(r, 1, 3)
        depth = int(r.integers(2, 6))
        # type combinations onnxruntime implements
        idx = r.integers(-depth, depth, size=s).astype((np.int64, np.int64, F32)[i])
        vals = np.array([0, 3] if i != 1 else [-1.5, 2.0], (np.int64, F32, F32)[i])
        out.append(node_case("OneHot", [F(idx), C(np.array(depth, (np.int64, np.int64, F32)[i])),
                                        (C if i != 2 else F)(vals)],
                             {"axis": int(r.integers(-len(s) - 1, len(s) + 1))},
                             opset=pick(r, (11, 22)), id=f"OneHot-{i}"))
    return out


def gen_hardmax(r: R) -> list[Case]:
    out = []
    for i in range(3):
        s = shape(r, 1, 4)
        x = normal(r, s) if i != 2 else ints(r, s, 0, 3).astype(F32)  # ties: the first
        out.append(node_case("Hardmax", [F(x)], {"axis": int(r.integers(-len(s), len(s)))},
                             opset=pick(r, (13, 22)), id=f"Hardmax-{i}"))
    return out


def gen_eye_like(r: R) -> list[Case]:
    return [node_case("EyeLike", [F(normal(r, [3, 5]))], {"k": 1}, opset=11,
                      id="EyeLike-k1"),
            node_case("EyeLike", [F(ints(r, [4, 2]))], {"k": -1, "dtype": 1}, opset=22,
                      id="EyeLike-dtype")]


def gen_lp_normalization(r: R) -> list[Case]:
    out = []
    for p in (1, 2):
        s = shape(r, 1, 4)
        x = normal(r, s)
        x.reshape(-1)[: x.size // 3] = 0  # some all-zero lanes
        out.append(node_case("LpNormalization", [F(x)],
                             {"p": p, "axis": int(r.integers(-len(s), len(s)))},
                             opset=pick(r, (11, 22)), id=f"LpNormalization-p{p}"))
    return out


def gen_lp_pool(r: R) -> list[Case]:
    out = []
    for i, p in enumerate((1, 2, 3)):
        n = 1 if i == 2 else 2
        k = [int(v) for v in r.integers(1, 4, size=n)]
        attrs = {"kernel_shape": k, "p": p,
                 "strides": [int(v) for v in r.integers(1, 3, size=n)],
                 "pads": [int(min(v, kk - 1)) for v, kk in
                          zip(r.integers(0, 2, size=2 * n), k + k)]}
        x = normal(r, [2, 3, *[int(v) for v in r.integers(4, 8, size=n)]])
        out.append(node_case("LpPool", [F(x)], attrs, opset=pick(r, (11, 22)),
                             id=f"LpPool-p{p}", rtol=1e-4))
    return out


def gen_is_nan(r: R) -> list[Case]:
    x = normal(r, [3, 4])
    x[0, 1] = x[2, 2] = np.nan
    return [node_case("IsNaN", [F(x)], opset=pick(r, (13, 22)), id="IsNaN")]


def gen_is_inf(r: R) -> list[Case]:
    x = normal(r, [3, 4])
    x[0, 1], x[1, 2], x[2, 0] = np.inf, -np.inf, np.nan
    return [node_case("IsInf", [F(x)], attrs, opset=pick(r, (10, 20)), id=f"IsInf-{k}")
            for k, attrs in enumerate(({}, {"detect_negative": 0}, {"detect_positive": 0},
                                       {"detect_negative": 0, "detect_positive": 0}))]


def gen_mod(r: R) -> list[Case]:
    def nonzero(a: np.ndarray) -> np.ndarray:
        return np.where(a == 0, 3, a).astype(a.dtype)

    out = []
    for i, (dt, fmod) in enumerate(((np.int32, 0), (np.int64, 1), (F32, 1), (np.int64, 0))):
        s = shape(r, 1, 3)
        ys = s[-1:] if i == 3 else s  # broadcast
        if dt == F32:
            x, y = normal(r, s) * 5, nonzero(normal(r, ys) * 3)
        else:
            x, y = ints(r, s, -20, 20, dt), nonzero(ints(r, ys, -6, 7, dt))
        out.append(node_case("Mod", [F(x), F(y)], {"fmod": fmod}, opset=pick(r, (13, 22)),
                             id=f"Mod-{np.dtype(dt).name}-fmod{fmod}"))
    return out


def gen_scatter_elements(r: R) -> list[Case]:
    out = []
    for i, red in enumerate(("none", "add", "mul", "max", "min", "none")):
        s = [int(v) for v in r.integers(2, 5, size=int(r.integers(1, 4)))]
        ax = int(r.integers(-len(s), len(s)))
        n = s[ax]
        js = list(s)
        js[ax] = int(r.integers(1, n + 1))
        # distinct indices along the axis (duplicates are undefined without a reduction)
        idx = np.moveaxis(np.argsort(r.random([*[d for k, d in enumerate(s) if k != ax % len(s)],
                                               n]), axis=-1)[..., :js[ax]], -1, ax)
        idx = (idx - n * (r.random(idx.shape) < 0.3)).astype(np.int64 if i % 2 else np.int32)
        x = normal(r, s) if i != 5 else ints(r, s)
        upd = normal(r, js) if i != 5 else ints(r, js)
        attrs: dict = {"axis": ax}
        if red != "none":
            attrs["reduction"] = red
        out.append(node_case("ScatterElements", [F(x), (C if i == 0 else F)(idx), F(upd)],
                             attrs, opset=18, id=f"ScatterElements-{red}-{i}"))
    return out


def gen_gather_nd(r: R) -> list[Case]:
    out = []
    for i, (ds, js, b) in enumerate((([4, 3, 2], [5, 2], 0), ([3, 4], [2, 3, 2], 0),
                                     ([2, 3, 4], [2, 2, 1], 1), ([3, 4], [1, 2], 0))):
        lim = np.array(ds[b:b + js[-1]])
        idx = (r.integers(0, 1 << 20, size=js) % lim - lim * (r.random(js) < 0.3))
        x = normal(r, ds) if i != 1 else ints(r, ds, dtype=np.int32)
        out.append(node_case("GatherND", [F(x), (C if i == 0 else F)(idx.astype(np.int64))],
                             {"batch_dims": b} if b else {}, opset=pick(r, (12, 13, 22)),
                             id=f"GatherND-{i}"))
    return out


def gen_scatter_nd(r: R) -> list[Case]:
    out = []
    for i, red in enumerate(("none", "add", "max", "none")):
        s = [int(v) for v in r.integers(2, 5, size=3)]
        k = int(r.integers(1, 3))
        m = int(r.integers(1, 4))
        flat = r.permutation(int(np.prod(s[:k])))[:m]  # distinct tuples
        idx = np.stack(np.unravel_index(flat, s[:k]), axis=-1).astype(np.int64)
        upd_shape = [m, *s[k:]]
        x = normal(r, s) if i != 3 else ints(r, s)
        upd = normal(r, upd_shape) if i != 3 else ints(r, upd_shape)
        attrs = {"reduction": red} if red != "none" else {}
        out.append(node_case("ScatterND", [F(x), (C if i == 0 else F)(idx), F(upd)], attrs,
                             opset=18, id=f"ScatterND-{red}-{i}"))
    return out


def gen_reverse_sequence(r: R) -> list[Case]:
    out = []
    for i in range(3):
        t, b = int(r.integers(2, 6)), int(r.integers(1, 4))
        s = [t, b, 3] if i != 1 else [b, t]
        lens = r.integers(1, t + 1, size=b).astype(np.int64)
        x = normal(r, s) if i != 2 else ints(r, s)
        attrs = {"time_axis": 1, "batch_axis": 0} if i == 1 else {}
        out.append(node_case("ReverseSequence", [F(x), (C if i == 0 else F)(lens)], attrs,
                             opset=pick(r, (10, 22)), id=f"ReverseSequence-{i}"))
    return out


def gen_gather_elements(r: R) -> list[Case]:
    out = []
    for k in range(4):
        s = shape(r, 1, 4)
        ax = int(r.integers(-len(s), len(s)))
        n = s[ax]
        js = [int(r.integers(1, d + 1)) for d in s]  # other dims may be smaller
        js[ax] = int(r.integers(1, 6))
        idx = r.integers(-n, n, size=js).astype(np.int64 if k % 2 else np.int32)
        x = normal(r, s) if k != 2 else ints(r, s)
        out.append(node_case("GatherElements", [F(x), (C if k == 3 else F)(idx)],
                             {"axis": ax}, opset=pick(r, (11, 13, 22)),
                             id=f"GatherElements-{k}"))
    return out


def gen_cumsum(r: R) -> list[Case]:
    out = []
    for k in range(4):
        s = shape(r)
        x = normal(r, s) if k != 3 else ints(r, s)
        ax = int(r.integers(-len(s), len(s)))
        out.append(node_case("CumSum", [F(x), C(np.array(ax, np.int64))],
                             {"exclusive": k % 2, "reverse": k // 2 % 2},
                             opset=pick(r, (11, 14, 28)), id=f"CumSum-{k}"))
    return out


def gen_cumprod(r: R) -> list[Case]:
    out = []
    for k in range(4):
        s = shape(r)
        x = normal(r, s) if k != 3 else ints(r, s, -3, 4)
        if k == 2:
            x.reshape(-1)[::3] = 0  # zeros stop the product
        ax = int(r.integers(-len(s), len(s)))
        out.append(node_case("CumProd", [F(x), C(np.array(ax, np.int64))],
                             {"exclusive": k % 2, "reverse": k // 2 % 2},
                             opset=pick(r, (26, 28)), id=f"CumProd-{k}"))
    return out


def gen_constant_of_shape(r: R) -> list[Case]:
    x = normal(r, [2, 3])
    val = helper.make_tensor("v", 1, [1], [2.5])
    return [graph_case([helper.make_node("ConstantOfShape", ["s"], ["c"], value=val),
                        helper.make_node("Add", ["x", "c"], ["y"])],
                       {"x": F(x), "s": C(np.array([2, 3], np.int64))}, ["y"],
                       id="ConstantOfShape-add")]


def gen_range(r: R) -> list[Case]:
    x = normal(r, [2, 4])
    return [graph_case([helper.make_node("Range", ["a", "b", "d"], ["c"]),
                        helper.make_node("Add", ["x", "c"], ["y"])],
                       {"x": F(x), "a": C(np.asarray(F32(1.0))), "b": C(np.asarray(F32(3.0))),
                        "d": C(np.asarray(F32(0.5)))}, ["y"], id="Range-add")]


def gen_top_k(r: R) -> list[Case]:
    out = []
    for k in range(4):
        s = shape(r, 1, 3, 6)
        ax = int(r.integers(-len(s), len(s)))
        kk = int(r.integers(1, s[ax] + 1))
        x = ints(r, s, 0, 4).astype(F32) if k == 3 else normal(r, s)
        out.append(node_case("TopK", [F(x), C(np.array([kk], np.int64))],
                             {"axis": ax, "largest": int(k != 1)},
                             opset=pick(r, (11, 24, 28)), n_out=2, id=f"TopK-{k}"))
    return out


def gen_lrn(r: R) -> list[Case]:
    return [node_case("LRN", [F(normal(r, [2, 5, 3, 4]))], {"size": 3}, opset=13,
                      id="LRN-3"),
            node_case("LRN", [F(normal(r, [1, 6, 4, 2]))],
                      {"size": 5, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, opset=11,
                      id="LRN-5")]


def gen_instance_norm(r: R) -> list[Case]:
    return [node_case("InstanceNormalization",
                      [F(normal(r, s)), C(normal(r, s[1:2])), C(normal(r, s[1:2]))],
                      {"epsilon": 1e-3}, opset=pick(r, (11, 22)),
                      id=f"InstanceNormalization-{len(s)}d") for s in ([2, 3, 4, 5], [2, 4, 6])]


def gen_layer_norm(r: R) -> list[Case]:
    out = []
    for k, (s, ax) in enumerate((([2, 3, 4], -1), ([3, 4, 5], 1), ([2, 6], 0))):
        ns = s[ax:]
        ins = [F(normal(r, s)), C(normal(r, ns))] + ([C(normal(r, ns))] if k < 2 else [])
        out.append(node_case("LayerNormalization", ins, {"axis": ax}, opset=pick(r, (17, 28)),
                             id=f"LayerNormalization-{k}"))
    return out


def gen_resize(r: R) -> list[Case]:
    x = normal(r, [1, 2, 3, 4])
    sc = C(np.array([1, 1, 2, 2], F32))
    out = [
        node_case("Resize", [F(x), NONE, sc], {"mode": "nearest"}, opset=13,
                  id="Resize-nearest-x2"),
        node_case("Resize", [F(x), NONE, sc], {"mode": "linear"}, opset=13,
                  id="Resize-linear-half-pixel"),
        node_case("Resize", [F(x), NONE, NONE, C(np.array([1, 2, 5, 7], np.int64))],
                  {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                  opset=18, id="Resize-linear-align-corners"),
        node_case("Resize", [F(x), NONE, NONE, C(np.array([1, 2, 6, 3], np.int64))],
                  {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                   "nearest_mode": "floor"}, opset=13, id="Resize-nearest-asymmetric"),
        node_case("Resize", [F(x), NONE, C(np.array([1, 1, 1.5, 0.5], F32))],
                  {"mode": "cubic"}, opset=19, id="Resize-cubic"),
        node_case("Resize", [F(x, [None, 2, 3, 4]), NONE, sc],
                  {"mode": "nearest"}, opset=13, id="Resize-nearest-dynamic-batch"),
    ]
    return out


def gen_einsum(r: R) -> list[Case]:
    a, b = normal(r, [2, 3, 4]), normal(r, [2, 4, 5])
    return [
        node_case("Einsum", [F(a), F(b)], {"equation": "bij,bjk->bik"}, opset=12,
                  id="Einsum-batch-matmul"),
        node_case("Einsum", [F(normal(r, [3, 4])), F(normal(r, [5, 4]))],
                  {"equation": "ij,kj->ik"}, opset=13, id="Einsum-matmul-bt"),
        node_case("Einsum", [F(a)], {"equation": "bij->jb"}, opset=13, id="Einsum-sum-perm"),
        node_case("Einsum", [F(normal(r, [3, 4])), F(normal(r, [4, 2, 5]))],
                  {"equation": "ij,jkl->ilk"}, opset=28, id="Einsum-grouped"),
        node_case("Einsum", [F(normal(r, [2, 3, 4, 5])), F(normal(r, [2, 3, 5, 6]))],
                  {"equation": "...ij,...jk->...ik"}, opset=13, id="Einsum-ellipsis"),
        node_case("Einsum", [F(normal(r, [3, 4, 4]))], {"equation": "...ii->...i"}, opset=13,
                  id="Einsum-diagonal"),
        node_case("Einsum", [F(normal(r, [4, 4])), F(normal(r, [4, 3]))],
                  {"equation": "ii,ij"}, opset=13, id="Einsum-trace-implicit"),
    ]


GENERATORS: dict[str, Callable[[R], list[Case]]] = {
    "LSTM": _rnn("LSTM"), "GRU": _rnn("GRU"), "RNN": _rnn("RNN"),
    "Relu": _unary("Relu"), "Sigmoid": _unary("Sigmoid"), "Tanh": _unary("Tanh"),
    "Exp": _unary("Exp"), "Log": _unary("Log", "pos"), "Sqrt": _unary("Sqrt", "pos"),
    "Abs": _unary_int("Abs", np.int32), "Neg": _unary_int("Neg", np.int64),
    "Floor": _unary("Floor"), "Ceil": _unary("Ceil"), "Round": _unary("Round", "halves"),
    "Sign": _unary("Sign"), "Sin": _unary("Sin"), "Cos": _unary("Cos"),
    "Reciprocal": _unary("Reciprocal", "nonzero"), "LeakyRelu": gen_leaky_relu,
    "Softmax": _softmax("Softmax"), "LogSoftmax": _softmax("LogSoftmax"), "Clip": gen_clip,
    "Add": _binary("Add"), "Sub": _binary("Sub"), "Mul": _binary("Mul"), "Div": _binary("Div"),
    "Pow": gen_pow, "Max": _variadic("Max"), "Min": _variadic("Min"), "Sum": _variadic("Sum"),
    "Mean": _variadic("Mean"), "Equal": _compare("Equal"), "Less": _compare("Less"),
    "LessOrEqual": _compare("LessOrEqual"), "Greater": _compare("Greater"),
    "GreaterOrEqual": _compare("GreaterOrEqual"), "And": _logical("And"),
    "Or": _logical("Or"), "Xor": _logical("Xor"), "Not": gen_not,
    "Gemm": gen_gemm, "MatMul": gen_matmul, "Conv": gen_conv, "MaxPool": _pool("MaxPool"),
    "AveragePool": _pool("AveragePool"), "GlobalAveragePool": _global_pool("GlobalAveragePool"),
    "GlobalMaxPool": _global_pool("GlobalMaxPool"), "BatchNormalization": gen_batch_norm,
    "Flatten": gen_flatten, "Reshape": gen_reshape, "Transpose": gen_transpose,
    "Concat": gen_concat, "Split": gen_split, "Slice": gen_slice, "Squeeze": gen_squeeze,
    "Unsqueeze": gen_unsqueeze, "Identity": gen_identity, "Dropout": gen_dropout,
    "Cast": gen_cast, "Pad": gen_pad,
    "ReduceMean": _reduce("ReduceMean", 18), "ReduceSum": _reduce("ReduceSum", 13),
    "ReduceMax": _reduce("ReduceMax", 18), "ReduceMin": _reduce("ReduceMin", 18),
    "ReduceProd": _reduce("ReduceProd", 18), "Gather": gen_gather, "ArgMax": gen_argmax,
    "ArgMin": _arg("ArgMin"),
    "Erf": gen_erf, "HardSigmoid": gen_hard_sigmoid, "HardSwish": gen_hard_swish,
    "Gelu": gen_gelu, "Where": gen_where, "Expand": gen_expand, "Tile": gen_tile,
    "GatherElements": gen_gather_elements, "ConvTranspose": gen_conv_transpose, "Trilu": gen_trilu,
    "ReverseSequence": gen_reverse_sequence,
    "OneHot": gen_one_hot, "Hardmax": gen_hardmax, "EyeLike": gen_eye_like,
    "LpNormalization": gen_lp_normalization, "LpPool": gen_lp_pool, "IsNaN": gen_is_nan,
    "IsInf": gen_is_inf, "Mod": gen_mod, "Tan": _unary("Tan"), "Sinh": _unary("Sinh"),
    "Cosh": _unary("Cosh"), "Asin": _unary("Asin", "unit"), "Acos": _unary("Acos", "unit"),
    "Atan": _unary("Atan"), "Asinh": _unary("Asinh"), "Acosh": _unary("Acosh", "ge1"),
    "Atanh": _unary("Atanh", "unit"),
    "ScatterElements": gen_scatter_elements, "ScatterND": gen_scatter_nd, "GatherND": gen_gather_nd,
    "CumSum": gen_cumsum, "CumProd": gen_cumprod,
    "ConstantOfShape": gen_constant_of_shape, "Range": gen_range,
    "TopK": gen_top_k, "LRN": gen_lrn, "InstanceNormalization": gen_instance_norm,
    "LayerNormalization": gen_layer_norm, "Resize": gen_resize, "Einsum": gen_einsum,
}

from tests.onnx.random_quant_models import QUANT_GENERATORS  # noqa: E402

GENERATORS.update(QUANT_GENERATORS)


def cases_for(op: str) -> list[Case]:
    """The random cases of one ONNX op, the same on every run."""
    return GENERATORS[op](np.random.default_rng(zlib.crc32(op.encode())))
