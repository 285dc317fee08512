"""Build one-node ONNX models, run them on onnxruntime and on the CPU executor after
``fluid_hw.onnx.load``, and compare.

    case = node_case("Add", [F(x), C(y)], {"...": ...}, opset=17)
    problem = compare(case)          # None when the outputs agree
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import fluid_hw as fluid
import fluid_hw.backends.cpu.kernels.extra  # registers clip, pad...: not yet in kernels/__init__
from fluid_hw import onnx as fonnx


@dataclass
class In:
    """A node input: fed at run time ("feed"), an initializer ("init"), or omitted."""

    array: np.ndarray | None
    kind: str = "feed"
    dims: list[Any] | None = None  # declared dims (None entries / strings: dynamic)


def F(a: Any, dims: list[Any] | None = None) -> In:
    return In(np.asarray(a), "feed", dims)


def C(a: Any) -> In:
    return In(np.asarray(a), "init")


NONE = In(None, "absent")


@dataclass
class Case:
    id: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-5
    extra: dict[str, Any] = field(default_factory=dict)


def _type(a: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def finish_model(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto:
    """A model of ``graph`` whose output types come from ONNX shape inference."""
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="fluid-hw-tests")
    m.ir_version = min(m.ir_version, onnx.IR_VERSION)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    known = {vi.name: vi for vi in (*inferred.graph.value_info, *inferred.graph.output)}
    for out in m.graph.output:
        if out.name in known and known[out.name].type.tensor_type.elem_type:
            out.type.CopyFrom(known[out.name].type)
    return m


def node_case(op: str, inputs: list[In], attrs: dict[str, Any] | None = None,
              opset: int = 17, n_out: int = 1, id: str = "",
              outputs: list[str] | None = None, **kw: Any) -> Case:
    """A one-node model; feeds are the inputs of kind "feed"."""
    names, vis, inits, feeds = [], [], [], {}
    for i, inp in enumerate(inputs):
        if inp.kind == "absent":
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        if inp.kind == "init":
            inits.append(numpy_helper.from_array(inp.array, name))
        else:
            dims = inp.dims if inp.dims is not None else list(inp.array.shape)
            vis.append(helper.make_tensor_value_info(name, _type(inp.array), dims))
            feeds[name] = inp.array
    outs = outputs or [f"out{j}" for j in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_0", **(attrs or {}))
    graph = helper.make_graph([node], f"{op}_case", vis,
                              [helper.make_empty_tensor_value_info(o) for o in outs if o],
                              inits)
    return Case(id or op, finish_model(graph, opset), feeds, **kw)


def graph_case(nodes: list[onnx.NodeProto], inputs: dict[str, In],
               outputs: list[str] | dict[str, list[Any]], opset: int = 17, id: str = "",
               **kw: Any) -> Case:
    """A model of several nodes; ``inputs`` name the graph inputs and initializers,
    ``outputs`` the graph outputs (with their dims where inference cannot find them)."""
    vis, inits, feeds = [], [], {}
    for name, inp in inputs.items():
        if inp.kind == "init":
            inits.append(numpy_helper.from_array(inp.array, name))
        else:
            dims = inp.dims if inp.dims is not None else list(inp.array.shape)
            vis.append(helper.make_tensor_value_info(name, _type(inp.array), dims))
            feeds[name] = inp.array
    dims = outputs if isinstance(outputs, dict) else {}
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, dims[o]) if o in dims
            else helper.make_empty_tensor_value_info(o) for o in outputs]
    graph = helper.make_graph(nodes, id or "graph", vis, outs, inits)
    return Case(id or nodes[0].op_type, finish_model(graph, opset), feeds, **kw)


def check_exported(model: onnx.ModelProto) -> None:
    """What every model fluid-hw exports must pass: the ONNX checker's full check (each
    node's schema and element types at the model's opset, strict shape inference)."""
    onnx.checker.check_model(model, full_check=True)


#: onnxruntime's error for a node without a kernel
_ORT_NOT_IMPLEMENTED = ort.capi.onnxruntime_pybind11_state.NotImplemented


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``model``'s outputs from onnxruntime's CPU provider, one thread.

    On x86 CPUs with AVX2 or AVX-512 but no VNNI, onnxruntime multiplies uint8 by int8
    with VPMADDUBSW, which saturates each pair of products at int16: its results then
    depend on the CPU (onnxruntime 1.32 routes int8 QDQ models there too).  The session
    option ``session.x64quantprecision`` selects its exact (slower) kernels, which makes
    onnxruntime a CPU-independent reference.  Under that option onnxruntime finds no
    kernel for int8 QLinearMatMul / QLinearConv; int8 x int8 products never take the
    saturating path, so those models run with the default kernels.  onnxruntime's
    QLinearMatMul ignores the option (tests compare it on 7-bit weights)."""
    try:
        return _run_ort(model, feeds, exact_u8s8=True)
    except _ORT_NOT_IMPLEMENTED as e:
        if "Failed to find kernel" not in str(e):
            raise
        return _run_ort(model, feeds, exact_u8s8=False)


def _run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
             exact_u8s8: bool) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    if exact_u8s8:
        opts.add_session_config_entry("session.x64quantprecision", "1")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def run_fluid_model(m: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run an imported model (feeds keyed by ONNX input names)."""
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    fluid_feeds = {m.names[k]: v for k, v in feeds.items()}
    return exe.run(m.program, feed=fluid_feeds, fetch_list=m.fetch_names, scope=m.scope)


def run_fluid(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return run_fluid_model(fonnx.load(model), feeds)


def mismatch(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float
             ) -> str | None:
    """Why two output lists differ (dtype, shape, values), or None."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype:
            return f"output {k}: dtype {g.dtype}, expected {w.dtype}"
        if g.shape != w.shape:
            return f"output {k}: shape {list(g.shape)}, expected {list(w.shape)}"
        if g.dtype.kind in "f":
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64)))
                return f"output {k}: max abs error {err:.3g} (rtol {rtol}, atol {atol})"
        elif not np.array_equal(g, w):
            return f"output {k}: values differ ({np.sum(g != w)} of {g.size})"
    return None


def compare(case: Case) -> str | None:
    """None when fluid-hw's import of the case's model matches onnxruntime."""
    want = run_ort(case.model, case.feeds)
    got = run_fluid(case.model, case.feeds)
    return mismatch(got, want, case.rtol, case.atol)
