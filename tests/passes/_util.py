"""Shared by the pass tests: the digits models with initialised parameters or trained,
running a program, structural comparison, and random programs for property tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import train
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.ir import Program
from fluid_hw.ir.verifier import verify_program
from fluid_hw.passes import PassContext

ATOL = RTOL = 1e-5


# -- the digits models -------------------------------------------------------------------

@dataclass
class Built:
    """A program, its parameters, a feed and its outputs: what a numeric check needs."""

    program: Program
    scope: fluid.Scope
    feed: dict[str, np.ndarray]
    fetch: list[str]

    def ctx(self, exe: fluid.Executor | None = None) -> PassContext:
        return PassContext(scope=self.scope, executor=exe or fluid.Executor(),
                           feed_names=list(self.feed), fetch_names=self.fetch)


def digits(kind: str, batch: int = 16, seed: int = 0) -> Built:
    """The digits MLP or CNN inference program (test clone, with its loss and accuracy
    ops), parameters from the startup program and, for the CNN, random batch-norm
    statistics, so folding them is not trivial."""
    m = models.digits_cnn() if kind == "cnn" else models.digits_mlp()
    scope = fluid.Scope()
    exe = fluid.Executor()
    rng = np.random.default_rng(seed)
    with fluid.scope_guard(scope):
        exe.run(m.startup)
    for v in m.test_program.global_block().vars.values():
        if v.name.startswith("batch_norm") and v.persistable:
            shape = tuple(v.shape)
            if v.name.endswith(".w_2"):  # variance
                scope.vars[v.name] = rng.uniform(0.5, 2.0, shape).astype(np.float32)
            else:
                scope.vars[v.name] = rng.normal(0.0, 0.5, shape).astype(np.float32)
    shape = (batch, 1, 8, 8) if kind == "cnn" else (batch, 64)
    feed = {"pixels": rng.random(shape, dtype=np.float32),
            "label": rng.integers(0, 10, (batch, 1)).astype(np.int64)}
    return Built(m.test_program, scope, feed, [m.prediction.name])


def trained_digits(kind: str) -> tuple[models.Model, fluid.Scope, tuple[np.ndarray, ...]]:
    """The digits MLP or CNN trained on the digits' training split (Adam; MLP: lr 0.002,
    30 epochs; CNN: lr 0.003, 15 epochs): the model, the scope holding its parameters
    and the split ``(xtr, xte, ytr, yte)``."""
    image = kind == "cnn"
    xtr, xte, ytr, yte = load_digits_split(image=image)
    lr = 0.003 if image else 0.002
    m = (models.digits_cnn if image else models.digits_mlp)(
        optimizer=fluid.optimizer.Adam(learning_rate=lr))
    exe = fluid.Executor()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=15 if image else 30,
              batch_size=32, log=None)
    return m, scope, (xtr, xte, ytr, yte)


def run(program: Program, scope: fluid.Scope, feed: dict[str, np.ndarray],
        fetch: list[str]) -> list[np.ndarray]:
    """Outputs of one run in a child scope (the parameters' scope is not written to)."""
    verify_program(program)
    names = {v for v in program.global_block().vars}
    feed = {k: v for k, v in feed.items() if k in names}
    return fluid.Executor(seed=0).run(program, feed=feed, fetch_list=fetch,
                                      scope=fluid.Scope(scope))


def assert_same_outputs(before: Program, after: Program, b: Built, exact: bool = False) -> None:
    want = run(before, b.scope, b.feed, b.fetch)
    got = run(after, b.scope, b.feed, b.fetch)
    for name, w, g in zip(b.fetch, want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=name)


def op_types(program: Program) -> list[str]:
    return [op.type for op in program.global_block().ops]


def signature(program: Program) -> list[tuple]:
    """What structure tests compare: each op's type, inputs, outputs (XShape dropped)
    and attributes that are not annotations."""
    out = []
    for op in program.global_block().ops:
        ins = {k: v for k, v in op.inputs.items() if v}
        outs = {k: v for k, v in op.outputs.items() if v and k != "XShape"}
        attrs = {k: v for k, v in op.all_attrs().items() if not k.startswith("op_")}
        out.append((op.type, ins, outs, attrs))
    return out


def assert_structure(actual: Program, expected: Program) -> None:
    """Same ops (type, inputs, outputs, attributes) in the same order, and each output
    variable has the expected dtype and shape."""
    sa, se = signature(actual), signature(expected)
    assert [s[0] for s in sa] == [s[0] for s in se], (op_types(actual), op_types(expected))
    for a, e in zip(sa, se):
        assert a[1:3] == e[1:3], f"{a[0]}: {a[1:3]} != {e[1:3]}"
        for k, v in e[3].items():
            assert a[3].get(k) == v, f"{a[0]}.{k}: {a[3].get(k)!r} != {v!r}"
    ab, eb = actual.global_block(), expected.global_block()
    for op in eb.ops:
        for n in op.output_arg_names:
            if ab.has_var(n):
                assert ab.var(n).dtype == eb.var(n).dtype, n
    verify_program(actual)


# -- small programs by hand -----------------------------------------------------------------

class Net:
    """A builder for Before / Expected programs with chosen variable names."""

    def __init__(self) -> None:
        self.program = Program()
        self.block = self.program.global_block()
        self.values: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(7)

    def data(self, name: str, shape: list[int], dtype: str = "float32") -> str:
        self.block.create_var(name=name, shape=shape, dtype=dtype)
        return name

    def param(self, name: str, shape: list[int], value: np.ndarray | None = None) -> str:
        if not self.block.has_var(name):
            self.block.create_parameter(name=name, shape=shape, dtype="float32")
        if value is None:
            value = self.rng.standard_normal(shape).astype(np.float32)
        self.values[name] = np.asarray(value, np.float32)
        return name

    def op(self, type: str, inputs: dict, outputs: dict, attrs: dict | None = None) -> None:
        for names in outputs.values():
            for n in names if isinstance(names, list) else [names]:
                if not self.block.has_var(n):
                    self.block.create_var(name=n)
        self.block.append_op(type, inputs, outputs, attrs or {})

    def scope(self) -> fluid.Scope:
        s = fluid.Scope()
        s.vars.update({k: v.copy() for k, v in self.values.items()})
        return s


# -- random programs for property tests -----------------------------------------------------

ACTS = ("relu", "sigmoid", "tanh")
BINARY = ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_max",
          "elementwise_min")


@st.composite
def random_programs(draw, allow_conv: bool = True) -> Built:  # type: ignore[no-untyped-def]
    """A random inference-style program over patterns the passes rewrite (fc chains,
    conv + bias + batch_norm + act, identities, reshape/transpose pairs, constants,
    elementwise + activation, branches), with random parameters; it fetches its last
    value and sometimes an intermediate one (which passes must keep)."""
    net = Net()
    seed = draw(st.integers(0, 2**16))
    net.rng = np.random.default_rng(seed)
    counter = iter(range(10_000))

    def tmp(prefix: str = "t") -> str:
        return f"{prefix}_{next(counter)}"

    batch = 3
    conv = allow_conv and draw(st.booleans())
    if conv:
        c = draw(st.sampled_from([2, 3]))
        hw = draw(st.sampled_from([4, 6]))
        h = net.data("x", [-1, c, hw, hw])
        feed = {"x": net.rng.standard_normal((batch, c, hw, hw)).astype(np.float32)}
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["conv", "conv_bias", "conv_bn", "pool", "act"]))
            if kind.startswith("conv"):
                m = draw(st.sampled_from([2, 4]))
                w = net.param(tmp("w"), [m, c, 3, 3])
                out = tmp()
                net.op("conv2d", {"Input": h, "Filter": w}, {"Output": out},
                       {"paddings": [1, 1]})
                h = out
                with_bias = kind == "conv_bias" or (kind == "conv_bn" and draw(st.booleans()))
                if with_bias:
                    b = net.param(tmp("b"), [m])
                    out = tmp()
                    net.op("elementwise_add", {"X": h, "Y": b}, {"Out": out}, {"axis": 1})
                    h = out
                if kind == "conv_bn":
                    names = [net.param(tmp("bn"), [m], v) for v in (
                        net.rng.uniform(0.5, 1.5, m), net.rng.normal(0, 0.5, m),
                        net.rng.normal(0, 0.5, m), net.rng.uniform(0.5, 2.0, m))]
                    out = tmp()
                    net.op("batch_norm", {"X": h, "Scale": names[0], "Bias": names[1],
                                          "Mean": names[2], "Variance": names[3]},
                           {"Y": out, "MeanOut": names[2], "VarianceOut": names[3],
                            "SavedMean": tmp(), "SavedVariance": tmp()}, {"is_test": True})
                    h = out
                if draw(st.booleans()):
                    out = tmp()
                    net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
                    h = out
                c = m
            elif kind == "pool" and hw >= 4:
                out = tmp()
                net.op("pool2d", {"X": h}, {"Out": out},
                       {"ksize": [2, 2], "strides": [2, 2],
                        "pooling_type": draw(st.sampled_from(["max", "avg"]))})
                h, hw = out, hw // 2
            else:
                out = tmp()
                net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
                h = out
        flat = tmp()
        net.op("reshape2", {"X": h}, {"Out": flat, "XShape": tmp("xs")},
               {"shape": [-1, c * hw * hw]})
        h, width = flat, c * hw * hw
    else:
        width = draw(st.sampled_from([4, 6]))
        h = net.data("x", [-1, width])
        feed = {"x": net.rng.standard_normal((batch, width)).astype(np.float32)}
    side: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["fc", "mul", "scale", "assign", "dropout", "act",
                                     "const", "branch", "reshape_pair", "transpose_pair",
                                     "cast", "dead"]))
        out = tmp()
        if kind == "dead":  # a value nothing fetches: dead code
            net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
            continue
        if kind in ("fc", "mul"):
            n = draw(st.sampled_from([4, 6]))
            w = net.param(tmp("w"), [width, n])
            net.op("mul", {"X": h, "Y": w}, {"Out": out})
            h, width = out, n
            if kind == "fc":
                b = net.param(tmp("b"), [n])
                out = tmp()
                net.op("elementwise_add", {"X": h, "Y": b}, {"Out": out}, {"axis": 1})
                h = out
                if draw(st.booleans()):
                    out = tmp()
                    net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
                    h = out
        elif kind == "scale":
            net.op("scale", {"X": h}, {"Out": out},
                   {"scale": draw(st.sampled_from([1.0, 0.5, -2.0])),
                    "bias": draw(st.sampled_from([0.0, 0.25]))})
            h = out
        elif kind == "assign":
            net.op("assign", {"X": h}, {"Out": out})
            h = out
        elif kind == "cast":
            net.op("cast", {"X": h}, {"Out": out}, {"in_dtype": 5, "out_dtype": 5})
            h = out
        elif kind == "dropout":
            net.op("dropout", {"X": h}, {"Out": out, "Mask": tmp("mask")},
                   {"is_test": True, "dropout_prob": draw(st.sampled_from([0.0, 0.3])),
                    "dropout_implementation": draw(st.sampled_from(
                        ["downgrade_in_infer", "upscale_in_train"]))})
            h = out
        elif kind == "act":
            net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
            h = out
        elif kind == "const":
            c0 = tmp("c")
            net.op("fill_constant", {}, {"Out": c0},
                   {"shape": [width], "dtype": 5, "value": draw(st.sampled_from([0.5, 2.0]))})
            c1 = tmp("c")
            net.op("scale", {"X": c0}, {"Out": c1}, {"scale": 3.0, "bias": 1.0})
            if draw(st.booleans()):
                c2 = tmp("c")
                net.op("elementwise_mul", {"X": c1, "Y": c0}, {"Out": c2})
                c1 = c2
            net.op(draw(st.sampled_from(BINARY)), {"X": h, "Y": c1}, {"Out": out},
                   {"axis": 1})
            h = out
            if draw(st.booleans()):
                out = tmp()
                net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": out})
                h = out
        elif kind == "branch":
            u = tmp()
            net.op(draw(st.sampled_from(ACTS)), {"X": h}, {"Out": u})
            x_first = draw(st.booleans())
            net.op(draw(st.sampled_from(BINARY)),
                   {"X": u if x_first else h, "Y": h if x_first else u}, {"Out": out})
            h = out
        elif kind == "reshape_pair" and width % 2 == 0:
            mid = tmp()
            net.op("reshape2", {"X": h}, {"Out": mid, "XShape": tmp("xs")},
                   {"shape": [-1, 2, width // 2]})
            net.op("reshape2", {"X": mid}, {"Out": out, "XShape": tmp("xs")},
                   {"shape": [0, -1] if draw(st.booleans()) else [-1, width]})
            h = out
        elif kind == "transpose_pair" and width % 2 == 0:
            a, t1, t2 = tmp(), tmp(), tmp()
            net.op("reshape2", {"X": h}, {"Out": a, "XShape": tmp("xs")},
                   {"shape": [-1, 2, width // 2]})
            net.op("transpose2", {"X": a}, {"Out": t1, "XShape": tmp("xs")}, {"axis": [0, 2, 1]})
            net.op("transpose2", {"X": t1}, {"Out": t2, "XShape": tmp("xs")},
                   {"axis": draw(st.sampled_from([[0, 2, 1], [0, 1, 2]]))})
            net.op("reshape2", {"X": t2}, {"Out": out, "XShape": tmp("xs")},
                   {"shape": [-1, width]})
            h = out
        else:
            continue
        if draw(st.integers(0, 5)) == 0:
            side.append(h)
    if draw(st.booleans()):  # an input nothing reads: prune drops it
        net.data("unused", [-1, 2])
        feed["unused"] = np.zeros((batch, 2), np.float32)
    fetch = list(dict.fromkeys([h, *side]))
    verify_program(net.program)
    return Built(net.program, net.scope(), feed, fetch)
