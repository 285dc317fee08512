"""Mutated ONNX models for the import fuzz test, and the child process that imports them.

    python -m tests.fuzz.onnx_mutations --seed 14 --cases 400 --memory-mib 3072

builds ``cases`` mutants of valid models (the MLP and CNN of tests/onnx/test_models.py
and the random one-node models of every imported op), each with one to three
mutations of dims, ranks, attributes, element types, initializer sizes and values,
node types, node inputs and opsets, imports each with ``fluid_hw.onnx.load`` under an
address-space limit (from a file in a folder that also holds a ``w.bin`` for external
data), and prints one JSON line per case: ``ok`` (imported), ``fluid``
(a FluidError) or ``foreign`` (any other exception, with its traceback), then
``{"done": ...}``.  A case that aborts or hangs the process leaves the line of the
case before it last, and the ``start`` line of the case that killed it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

Rng = np.random.Generator

#: dims a mutation may write: negative, zero, huge and ordinary ones
DIMS = (-7, -1, 0, 1, 2, 3, 5, 64, 2**31 - 1, 2**31, 2**40, 2**62, 2**63 - 1)
#: ints an attribute or a shape-like initializer may become
INTS = (-(2**63), -(2**31), -7, -2, -1, 0, 1, 2, 3, 7, 64, 2**31 - 1, 2**31, 2**40,
        2**62, 2**63 - 1)
FLOATS = (math.nan, math.inf, -math.inf, -1.0, 0.0, 1e-30, 1e30, 0.5)
STRINGS = (b"", b"NOTSET", b"SAME_UPPER", b"VALID", b"reflect", b"edge", b"wrap",
           b"bidirectional", b"reverse", b"Relu", b"\xff\xfe", b"constant", b"x" * 300)
#: op types a node may become: the imported ones, generators of large outputs, and others
OP_TYPES = ("Relu", "Add", "Mul", "Max", "Min", "Mean", "Sum", "Concat", "Reshape",
            "Slice", "Gather", "Pad", "Split", "Squeeze", "Unsqueeze", "Transpose",
            "Flatten", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Gemm",
            "MatMul", "BatchNormalization", "Softmax", "Cast", "Clip", "ReduceMax",
            "ReduceSum", "ArgMax", "LSTM", "GRU", "Dropout", "Identity", "Shape", "Size",
            "ConstantOfShape", "Expand", "Tile", "Range", "OneHot", "NonZero", "Resize",
            "Einsum", "TopK", "CumSum", "Erf", "Where", "Constant")
ELEM_TYPES = tuple(range(0, 27))


def seed_models() -> list[onnx.ModelProto]:
    """Valid models the mutants start from."""
    from tests.onnx.random_models import GENERATORS, cases_for
    from tests.onnx.test_models import cnn_model, mlp_model

    models = [mlp_model(), cnn_model()]
    for op in sorted(GENERATORS):
        models.extend(c.model for c in cases_for(op)[:3])
    return models


# -- mutations: each changes ``m`` in place and says what it did ---------------------------

def _value_infos(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    g = m.graph
    return [vi for vi in (*g.input, *g.output, *g.value_info)
            if vi.type.HasField("tensor_type")]


def mutate_dim(r: Rng, m: onnx.ModelProto) -> str:
    """A declared dim, of a graph input more often than not."""
    vis = [vi for vi in (m.graph.input if r.random() < 0.6 else _value_infos(m))
           if vi.type.HasField("tensor_type") and vi.type.tensor_type.shape.dim]
    if not vis:
        return "no dims"
    vi = vis[int(r.integers(len(vis)))]
    dims = vi.type.tensor_type.shape.dim
    k = int(r.integers(len(dims)))
    v = int(DIMS[int(r.integers(len(DIMS)))])
    dims[k].dim_value = v
    return f"dim {k} of {vi.name!r} = {v}"


def mutate_rank(r: Rng, m: onnx.ModelProto) -> str:
    vis = _value_infos(m)
    if not vis:
        return "no value infos"
    vi = vis[int(r.integers(len(vis)))]
    shape = vi.type.tensor_type.shape
    if r.random() < 0.5 and shape.dim:
        del shape.dim[int(r.integers(len(shape.dim)))]
        return f"dropped a dim of {vi.name!r}"
    for _ in range(int(r.integers(1, 40 if r.random() < 0.1 else 3))):
        shape.dim.add().dim_value = int(r.integers(1, 4))
    return f"rank of {vi.name!r} = {len(shape.dim)}"


def mutate_attribute(r: Rng, m: onnx.ModelProto) -> str:
    nodes = [n for n in m.graph.node if n.attribute]
    if not nodes:
        return "no attributes"
    node = nodes[int(r.integers(len(nodes)))]
    a = node.attribute[int(r.integers(len(node.attribute)))]
    if a.type == AttributeProto.INT:
        a.i = int(INTS[int(r.integers(len(INTS)))])
        return f"{node.op_type}.{a.name} = {a.i}"
    if a.type == AttributeProto.INTS:
        vals = list(a.ints)
        if vals and r.random() < 0.3:  # every entry the same edge value: strides 0...
            vals = [int(r.choice([0, -1, 2**40]))] * len(vals)
        elif vals and r.random() < 0.7:
            vals[int(r.integers(len(vals)))] = int(INTS[int(r.integers(len(INTS)))])
        else:
            vals = [int(INTS[int(r.integers(len(INTS)))])
                    for _ in range(int(r.integers(0, 9)))]
        del a.ints[:]
        a.ints.extend(vals)
        return f"{node.op_type}.{a.name} = {vals}"
    if a.type == AttributeProto.FLOAT:
        a.f = float(FLOATS[int(r.integers(len(FLOATS)))])
        return f"{node.op_type}.{a.name} = {a.f}"
    if a.type == AttributeProto.STRING:
        a.s = STRINGS[int(r.integers(len(STRINGS)))]
        return f"{node.op_type}.{a.name} = {a.s[:20]!r}"
    if a.type == AttributeProto.STRINGS and a.strings:
        a.strings[int(r.integers(len(a.strings)))] = STRINGS[int(r.integers(len(STRINGS)))]
        return f"{node.op_type}.{a.name} strings changed"
    if a.type == AttributeProto.TENSOR:
        a.t.data_type = int(ELEM_TYPES[int(r.integers(len(ELEM_TYPES)))])
        return f"{node.op_type}.{a.name} tensor type = {a.t.data_type}"
    return f"{node.op_type}.{a.name} left alone"


def add_attribute(r: Rng, m: onnx.ModelProto) -> str:
    """Set an attribute the node's schema declares (mostly of its declared type)."""
    if not m.graph.node:
        return "no nodes"
    node = m.graph.node[int(r.integers(len(m.graph.node)))]
    try:
        schema = onnx.defs.get_schema(node.op_type, onnx.defs.onnx_opset_version(), "")
    except onnx.defs.SchemaError:
        return "no schema"
    declared = sorted(schema.attributes.items())
    if not declared:
        return f"{node.op_type} has no attributes"
    name, spec = declared[int(r.integers(len(declared)))]
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    kinds = {AttributeProto.INT: 0, AttributeProto.INTS: 1, AttributeProto.FLOAT: 2,
             AttributeProto.STRING: 3}
    kind = kinds.get(int(spec.type), -1) if r.random() < 0.9 else int(r.integers(4))
    if kind == 0:
        v: object = int(INTS[int(r.integers(len(INTS)))])
    elif kind == 1:
        v = [int(INTS[int(r.integers(len(INTS)))]) if r.random() < 0.3 else
             int(r.integers(-2, 4)) for _ in range(int(r.integers(0, 7)))]
    elif kind == 2:
        v = float(FLOATS[int(r.integers(len(FLOATS)))])
    elif kind == 3:
        v = STRINGS[int(r.integers(len(STRINGS)))]
    else:
        return f"{node.op_type}.{name} of a type the fuzzer does not write"
    types = (AttributeProto.INT, AttributeProto.INTS, AttributeProto.FLOAT,
             AttributeProto.STRING)
    node.attribute.append(helper.make_attribute(name, v, attr_type=types[kind]))
    return f"{node.op_type}.{name} := {v!r:.40}"


def mutate_elem_type(r: Rng, m: onnx.ModelProto) -> str:
    vis = _value_infos(m)
    if not vis:
        return "no value infos"
    vi = vis[int(r.integers(len(vis)))]
    vi.type.tensor_type.elem_type = int(ELEM_TYPES[int(r.integers(len(ELEM_TYPES)))])
    return f"elem_type of {vi.name!r} = {vi.type.tensor_type.elem_type}"


def _initializer(r: Rng, m: onnx.ModelProto) -> TensorProto | None:
    inits = list(m.graph.initializer)
    return inits[int(r.integers(len(inits)))] if inits else None


def mutate_initializer_type(r: Rng, m: onnx.ModelProto) -> str:
    t = _initializer(r, m)
    if t is None:
        return "no initializers"
    t.data_type = int(ELEM_TYPES[int(r.integers(1, len(ELEM_TYPES)))])
    return f"data_type of {t.name!r} = {t.data_type}"


def mutate_initializer_size(r: Rng, m: onnx.ModelProto) -> str:
    t = _initializer(r, m)
    if t is None:
        return "no initializers"
    kind = int(r.integers(4))
    if kind == 0 and t.dims:
        k = int(r.integers(len(t.dims)))
        t.dims[k] = int(DIMS[int(r.integers(len(DIMS)))])
        return f"dims of {t.name!r} = {list(t.dims)}"
    if kind == 1:
        t.dims.append(int(r.integers(1, 4)))
        return f"dims of {t.name!r} = {list(t.dims)}"
    if kind == 2 and t.raw_data:
        t.raw_data = t.raw_data[: int(r.integers(len(t.raw_data)))]
        return f"raw_data of {t.name!r} truncated"
    t.raw_data = t.raw_data + bytes(r.integers(0, 256, size=int(r.integers(1, 64)),
                                               dtype=np.uint8))
    return f"raw_data of {t.name!r} extended"


def mutate_initializer_values(r: Rng, m: onnx.ModelProto) -> str:
    t = _initializer(r, m)
    if t is None:
        return "no initializers"
    try:
        a = numpy_helper.to_array(t).copy()
    except Exception:
        return "unreadable initializer"
    if a.size == 0:
        return "empty initializer"
    kind = int(r.integers(4))
    if kind == 0 and a.dtype.kind in "iu":
        flat = a.reshape(-1)
        info = np.iinfo(a.dtype)
        v = int(np.clip(INTS[int(r.integers(len(INTS)))], info.min, info.max))
        flat[int(r.integers(flat.size))] = v
        new = numpy_helper.from_array(a, t.name)
        what = f"a value of {t.name!r} = {v}"
    elif kind == 1:  # as complex: a shape or axes of the wrong type
        new = numpy_helper.from_array(a.astype(np.complex64), t.name)
        what = f"{t.name!r} as complex64"
    elif kind == 2 and a.dtype.kind == "f":
        a.reshape(-1)[int(r.integers(a.size))] = np.nan
        new = numpy_helper.from_array(a, t.name)
        what = f"a value of {t.name!r} = nan"
    else:
        dt = np.dtype(str(r.choice(["float32", "int32", "int64", "bool", "float64",
                                    "int8", "uint8", "float16"])))
        with np.errstate(all="ignore"):
            new = numpy_helper.from_array(a.astype(dt), t.name)
        what = f"{t.name!r} as {dt}"
    t.CopyFrom(new)
    return what


def mutate_op_type(r: Rng, m: onnx.ModelProto) -> str:
    if not m.graph.node:
        return "no nodes"
    node = m.graph.node[int(r.integers(len(m.graph.node)))]
    old = node.op_type
    node.op_type = str(OP_TYPES[int(r.integers(len(OP_TYPES)))])
    return f"{old} -> {node.op_type}"


def mutate_inputs(r: Rng, m: onnx.ModelProto) -> str:
    if not m.graph.node:
        return "no nodes"
    node = m.graph.node[int(r.integers(len(m.graph.node)))]
    names = [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer] + \
        [o for n in m.graph.node for o in n.output]
    kind = int(r.integers(4))
    if kind == 0 and node.input:
        k = int(r.integers(len(node.input)))
        node.input[k] = str(r.choice([*names, "", "nowhere"]))
        return f"{node.op_type} input {k} = {node.input[k]!r}"
    if kind == 1 and node.input:
        del node.input[int(r.integers(len(node.input)))]
        return f"{node.op_type} lost an input"
    if kind == 2:
        node.input.append(str(r.choice([*names, ""])))
        return f"{node.op_type} got input {node.input[-1]!r}"
    if node.output and len(node.output) > 1:
        node.output[int(r.integers(len(node.output)))] = ""
        return f"{node.op_type} lost an output"
    node.output.append(f"extra{int(r.integers(100))}")
    return f"{node.op_type} got an output"


def mutate_opset(r: Rng, m: onnx.ModelProto) -> str:
    v = int(r.integers(1, onnx.defs.onnx_opset_version() + 2))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = v
    return f"opset = {v}"


def mutate_nodes(r: Rng, m: onnx.ModelProto) -> str:
    nodes = list(m.graph.node)
    if not nodes:
        return "no nodes"
    kind = int(r.integers(3))
    if kind == 0 and len(nodes) > 1:
        del m.graph.node[int(r.integers(len(nodes)))]
        return "dropped a node"
    if kind == 1:
        n = nodes[int(r.integers(len(nodes)))]
        m.graph.node.append(n)
        return f"duplicated {n.op_type}"
    order = [int(i) for i in r.permutation(len(nodes))]
    del m.graph.node[:]
    m.graph.node.extend(nodes[i] for i in order)
    return "reordered the nodes"


def add_value_info(r: Rng, m: onnx.ModelProto) -> str:
    outs = [o for n in m.graph.node for o in n.output if o]
    if not outs:
        return "no outputs"
    name = str(r.choice(outs))
    dims = [int(DIMS[int(r.integers(len(DIMS)))]) if r.random() < 0.5 else
            int(r.integers(1, 5)) for _ in range(int(r.integers(0, 5)))]
    m.graph.value_info.append(helper.make_tensor_value_info(
        name, int(ELEM_TYPES[int(r.integers(1, 12))]), dims))
    return f"value_info {name!r} {dims}"


def add_sparse_initializer(r: Rng, m: onnx.ModelProto) -> str:
    inits = list(m.graph.initializer)
    if not inits:
        return "no initializers"
    t = inits[int(r.integers(len(inits)))]
    m.graph.initializer.remove(t)
    n = int(r.integers(1, 4))
    values = numpy_helper.from_array(np.ones(n, np.float32), t.name)
    idx = np.array([int(INTS[int(r.integers(len(INTS)))]) for _ in range(n)], np.int64)
    dims = [int(DIMS[int(r.integers(len(DIMS)))]) if r.random() < 0.5 else int(d)
            for d in (t.dims or [4])]
    m.graph.sparse_initializer.append(
        helper.make_sparse_tensor(values, numpy_helper.from_array(idx, ""), dims))
    return f"{t.name!r} as sparse {dims} at {idx.tolist()}"


#: where an external-data mutation may point (the child writes ``w.bin`` beside the model)
LOCATIONS = ("w.bin", "./w.bin", "sub/../w.bin", "../w.bin", "/etc/hostname", "w\0.bin",
             "", ".", "missing.bin", "w.bin/", "x" * 300)
OFFSETS = ("0", "4", "-1", "255", "256", "99999999999", "abc", "1.5", "")


def mutate_external_data(r: Rng, m: onnx.ModelProto) -> str:
    """Point an initializer at external data: the child's w.bin, or somewhere else."""
    t = _initializer(r, m)
    if t is None:
        return "no initializers"
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    t.external_data.add(key="location", value=str(r.choice(LOCATIONS)))
    for key in ("offset", "length"):
        if r.random() < 0.5:
            t.external_data.add(key=key, value=str(r.choice(OFFSETS)))
    return f"{t.name!r} in external data {[(e.key, e.value[:20]) for e in t.external_data]}"


Mutation = Callable[[Rng, onnx.ModelProto], str]
#: the mutations, each with its weight
MUTATIONS: tuple[tuple[Mutation, int], ...] = (
    (mutate_dim, 4), (mutate_rank, 1), (mutate_attribute, 3), (add_attribute, 3),
    (mutate_elem_type, 1), (mutate_initializer_type, 1), (mutate_initializer_size, 1),
    (mutate_initializer_values, 3), (mutate_op_type, 2), (mutate_inputs, 2),
    (mutate_opset, 1), (mutate_nodes, 1), (add_value_info, 1), (add_sparse_initializer, 1),
    (mutate_external_data, 1),
)


def mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    """``count`` (description, serialized model) pairs, the same for the same seed."""
    r = np.random.default_rng(seed)
    seeds = seed_models()
    weights = np.array([w for _, w in MUTATIONS], dtype=np.float64)
    weights /= weights.sum()
    out = []
    for _ in range(count):
        m = onnx.ModelProto()
        # the two multi-node models (with a shape subgraph) a third of the time
        m.CopyFrom(seeds[int(r.integers(2 if r.random() < 0.3 else len(seeds)))])
        did = [m.graph.name or "model"]
        for _ in range(int(r.integers(1, 5))):
            mutation = MUTATIONS[int(r.choice(len(MUTATIONS), p=weights))][0]
            did.append(mutation(r, m))
        out.append(("; ".join(did), m.SerializeToString()))
    return out


# -- the child process -----------------------------------------------------------------------

def _limit_memory(mib: int) -> None:
    import resource

    with open("/proc/self/statm", "rb") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + (mib << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--memory-mib", type=int, default=3072,
                    help="address space the imports may add (0: no limit)")
    args = ap.parse_args(argv)

    from fluid_hw import onnx as fonnx
    from fluid_hw.errors import FluidError
    from fluid_hw.frontend.onnx import _isolated

    _isolated.TIMEOUT_S = 20.0  # a check that takes longer counts as a hang
    cases = mutants(args.seed, args.cases)
    if args.memory_mib:
        _limit_memory(args.memory_mib)
    counts = {"ok": 0, "fluid": 0, "foreign": 0}
    start = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="onnx-fuzz-"))
    (folder / "sub").mkdir()
    (folder / "w.bin").write_bytes(bytes(range(256)))
    path = folder / "model.onnx"
    for i, (what, data) in enumerate(cases):
        print(json.dumps({"start": i, "what": what}), flush=True)
        path.write_bytes(data)
        t0 = time.monotonic()
        try:
            fonnx.load(path)
            row = {"case": i, "outcome": "ok"}
        except FluidError as e:
            row = {"case": i, "outcome": "fluid", "type": type(e).__name__,
                   "message": str(e)[:300]}
        except Exception as e:  # the fuzz test fails on these
            row = {"case": i, "outcome": "foreign", "type": type(e).__name__,
                   "message": str(e)[:300], "traceback": traceback.format_exc()[-2000:]}
        row["what"] = what
        row["seconds"] = round(time.monotonic() - t0, 3)
        counts[row["outcome"]] += 1
        print(json.dumps(row), flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"done": counts, "seconds": round(time.monotonic() - start, 1)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
