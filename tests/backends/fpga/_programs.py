"""Quantised programs built op by op (docs/fixed_point.md), with random integer
weights, biases, multipliers and shifts: the golden model is the CPU executor running
them.  Used by the property test and the driver tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import fluid_hw as fluid
from fluid_hw.hls.folding import divisors
from fluid_hw.ir import Program

INPUT_SCALE = 2.5 / 127


@dataclass
class Arch:
    """``input``: (K,) or (C, H, W); ``layers``: dicts with ``kind`` conv / pool / nhwc
    / fc and their geometry; ``folding``: layer name -> (pe, simd)."""

    input: tuple[int, ...]
    layers: list[dict] = field(default_factory=list)
    folding: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Arch(input={self.input}, layers={self.layers}, folding={self.folding})"


@dataclass
class Built:
    program: Program
    params: dict[str, tuple[str, tuple[int, ...], int]]  # name -> (kind, shape, fan-in)
    feed: str
    fetches: list[str]
    hw_output: str


def build(arch: Arch) -> Built:
    """The quantised program of ``arch``: quantize -> stages -> dequantize -> softmax."""
    p = Program()
    b = p.global_block()
    params: dict[str, tuple[str, tuple[int, ...], int]] = {}
    b.create_var(name="x", shape=[-1, *arch.input], dtype="float32")
    b.create_var(name="x.int8", shape=[-1, *arch.input], dtype="int8")
    b.append_op("quantize", {"X": ["x"]}, {"Out": ["x.int8"]},
                {"scale": INPUT_SCALE, "bits": 8, "signed": True})
    h, shape = "x.int8", list(arch.input)

    def var(name: str, dtype: str = "int8", persistable: bool = False,
            shape_: list[int] | None = None) -> str:
        b.create_var(name=name, shape=shape_ or [-1], dtype=dtype, persistable=persistable)
        return name

    def requant(name: str, acc: str, ch: int, relu: bool, fan_in: int) -> str:
        m = var(f"{name}.multiplier", "int32", True, [ch])
        n = var(f"{name}.shift", "int32", True, [ch])
        params[m] = ("multiplier", (ch,), fan_in)
        params[n] = ("shift", (ch,), fan_in)
        out = var(f"{name}.out.int8")
        b.append_op("requantize", {"X": [acc], "Multiplier": [m], "Shift": [n]},
                    {"Out": [out]}, {"relu": relu, "bits": 8, "out_scale": 0.05})
        return out

    for ly in arch.layers:
        kind = ly["kind"]
        name = ly["name"]
        if kind == "conv":
            c = shape[0]
            m, k = ly["m"], ly["k"]
            w = var(f"{name}.w_0.int8", "int8", True, [m, c, k, k])
            bias = var(f"{name}.b_0.int32", "int32", True, [m])
            params[w] = ("weights", (m, c, k, k), c * k * k)
            params[bias] = ("bias", (m,), c * k * k)
            acc = var(f"{name}.acc", "int32")
            b.append_op("quantized_conv2d", {"Input": [h], "Filter": [w], "Bias": [bias]},
                        {"Output": [acc]},
                        {"strides": [ly["stride"]] * 2, "paddings": [ly["pad"]] * 2,
                         "dilations": [1, 1], "groups": 1})
            h = requant(name, acc, m, ly["relu"], c * k * k)
            hw = (shape[1] + 2 * ly["pad"] - k) // ly["stride"] + 1
            shape = [m, hw, hw]
        elif kind == "pool":
            out = var(f"{name}.out.int8")
            b.append_op("quantized_pool2d", {"X": [h]}, {"Out": [out]},
                        {"pooling_type": "max", "ksize": [ly["k"]] * 2,
                         "strides": [ly["stride"]] * 2, "paddings": [ly["pad"]] * 2})
            h = out
            hw = (shape[1] + 2 * ly["pad"] - ly["k"]) // ly["stride"] + 1
            shape = [shape[0], hw, hw]
        elif kind == "nhwc":
            out = var(f"{name}.out.int8")
            b.append_op("transpose2", {"X": [h]}, {"Out": [out], "XShape": [var(f"{name}.xs")]},
                        {"axis": [0, 2, 3, 1]})
            h = out
            shape = [shape[1], shape[2], shape[0]]
        elif kind == "fc":
            if len(shape) > 1:
                out = var(f"{name}.flat.int8")
                b.append_op("flatten2", {"X": [h]}, {"Out": [out], "XShape": [var(f"{name}.fx")]},
                            {"axis": 1})
                h = out
                shape = [int(np.prod(shape))]
            kk, n = shape[0], ly["n"]
            w = var(f"{name}.w_0.int8", "int8", True, [kk, n])
            bias = var(f"{name}.b_0.int32", "int32", True, [n])
            params[w] = ("weights", (kk, n), kk)
            params[bias] = ("bias", (n,), kk)
            acc = var(f"{name}.acc", "int32")
            b.append_op("quantized_fc", {"X": [h], "W": [w], "Bias": [bias]}, {"Out": [acc]})
            h = requant(name, acc, n, ly["relu"], kk)
            shape = [n]
        else:  # pragma: no cover
            raise ValueError(kind)
    logits = var("logits", "float32")
    b.append_op("dequantize", {"X": [h]}, {"Out": [logits]}, {"scale": 0.05})
    prob = var("prob", "float32")
    b.append_op("softmax", {"X": [logits]}, {"Out": [prob]})
    return Built(p, params, "x", ["prob"], h)


def random_values(built: Built, seed: int) -> dict[str, np.ndarray]:
    """Random int8 weights, int32 biases, multipliers in [1, 2^15) and shifts around
    the value that maps a typical accumulator onto int8 (so some saturate)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (kind, shape, fan_in) in built.params.items():
        if kind == "weights":
            out[name] = rng.integers(-127, 128, shape).astype(np.int8)
        elif kind == "bias":
            out[name] = rng.integers(-60 * 127 * fan_in // 4, 60 * 127 * fan_in // 4 + 1,
                                     shape).astype(np.int32)
        elif kind == "multiplier":
            out[name] = rng.integers(1, 2**15, shape).astype(np.int32)
        else:
            base = 20 + int(np.log2(np.sqrt(fan_in)))
            out[name] = rng.integers(base - 2, base + 4, shape).astype(np.int32)
    return out


def inputs(arch: Arch, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1.2, (n, *arch.input)).astype(np.float32)


def golden(built: Built, values: dict[str, np.ndarray], x: np.ndarray) -> list[np.ndarray]:
    """The CPU executor's outputs: [hw_output, *fetches]."""
    scope = fluid.Scope()
    scope.vars.update(values)
    return fluid.Executor().run(built.program, feed={built.feed: x},
                                fetch_list=[built.hw_output, *built.fetches], scope=scope)


def _fold(draw, name: str, mw: int, mh: int) -> tuple[int, int]:
    return (draw(st.sampled_from(divisors(mh))), draw(st.sampled_from(divisors(mw))))


@st.composite
def architectures(draw) -> Arch:  # type: ignore[no-untyped-def]
    """Small random architectures: an MLP, or convolutions (+ max pools, an NHWC
    transpose) then fully-connected layers; random foldings."""
    layers: list[dict] = []
    folding: dict[str, tuple[int, int]] = {}
    if draw(st.booleans()):
        c, hw = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([4, 5, 6]))
        arch_in: tuple[int, ...] = (c, hw, hw)
        for j in range(draw(st.integers(1, 2))):
            m, k = draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from([1, 2, 3]))
            stride = draw(st.sampled_from([1, 1, 2]))
            pad = draw(st.integers(0, k - 1))
            out_hw = (hw + 2 * pad - k) // stride + 1
            if out_hw < 2:
                stride, pad = 1, k - 1
                out_hw = hw + k - 1
            name = f"conv{j}"
            layers.append({"kind": "conv", "name": name, "m": m, "k": k, "stride": stride,
                           "pad": pad, "relu": draw(st.booleans())})
            folding[name] = _fold(draw, name, c * k * k, m)
            c, hw = m, out_hw
            if hw >= 3 and draw(st.booleans()):
                pk, ps, pp = draw(st.sampled_from([(2, 2, 0), (3, 1, 1), (2, 1, 0)]))
                layers.append({"kind": "pool", "name": f"pool{j}", "k": pk, "stride": ps,
                               "pad": pp})
                hw = (hw + 2 * pp - pk) // ps + 1
        if draw(st.booleans()):
            layers.append({"kind": "nhwc", "name": "nhwc"})
        k_in = c * hw * hw
    else:
        k_in = draw(st.sampled_from([6, 8, 12, 16]))
        arch_in = (k_in,)
    n_fc = draw(st.integers(1, 2))
    for j in range(n_fc):
        n = draw(st.sampled_from([3, 4, 5, 6, 8]))
        name = f"fc{j}"
        layers.append({"kind": "fc", "name": name, "n": n,
                       "relu": j < n_fc - 1 and draw(st.booleans())})
        folding[name] = _fold(draw, name, k_in, n)
        k_in = n
    return Arch(arch_in, layers, folding)
