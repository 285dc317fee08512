"""The ONNX package's own node tests, per op: model.onnx + inputs + expected outputs.

The ONNX source tree keeps them under ``onnx/backend/test/data/node/<test>/``
(``model.onnx``, ``test_data_set_0/input_*.pb``, ``output_*.pb``).  Wheels that
ship that folder are read directly; wheels without it (like the one installed
here) still ship the generators that write it, ``onnx.backend.test.case.node.*``
(``backend-test-tools generate-data``), so the same cases are rebuilt in memory
from those, module by module.

Each case runs through ``fluid_hw.onnx.load`` and the CPU executor and is
compared with the expected outputs at ONNX's node-test tolerance (rtol 1e-3,
atol 1e-7).  A case fluid-hw refuses to import is a *skip*, with the importer's
reason; a case that imports but gives other outputs, or crashes, is a *fail*.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.errors import FluidError
from tests.onnx.harness import mismatch, run_fluid_model

ONNX_DIR = Path(onnx.__file__).parent
DATA_DIR = ONNX_DIR / "backend" / "test" / "data" / "node"
CASE_DIR = ONNX_DIR / "backend" / "test" / "case" / "node"
RTOL, ATOL = 1e-3, 1e-7


@dataclass
class BackendCase:
    name: str
    model: onnx.ModelProto
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]


@dataclass
class Result:
    name: str
    status: str  # "pass", "skip", "fail"
    reason: str = ""


def _is_case_of(model: onnx.ModelProto, name: str, op: str) -> bool:
    """A test of ``op`` itself (not its function-expanded form)."""
    return "_expanded" not in name and any(n.op_type == op for n in model.graph.node)


def _from_data_dir(op: str) -> list[BackendCase]:
    out = []
    for d in sorted(DATA_DIR.glob("test_*")):
        model = onnx.load(str(d / "model.onnx"))
        if not _is_case_of(model, d.name, op):
            continue
        for ds in sorted(d.glob("test_data_set_*")):
            def read(kind: str, ds: Path = ds) -> list[np.ndarray]:
                arrays = []
                for f in sorted(ds.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1])):
                    t = onnx.TensorProto()
                    t.ParseFromString(f.read_bytes())
                    arrays.append(numpy_helper.to_array(t))
                return arrays

            out.append(BackendCase(f"{d.name}/{ds.name}", model, read("input"), read("output")))
    return out


@functools.cache
def _modules_by_op() -> dict[str, list[str]]:
    """ONNX op type -> the case modules that build nodes of it (found by their source)."""
    found: dict[str, list[str]] = {}
    pat = re.compile(r"make_node\(\s*[\"'](\w+)[\"']")
    for f in sorted(CASE_DIR.glob("*.py")):
        for op in set(pat.findall(f.read_text())):
            found.setdefault(op, []).append(f.stem)
    return found


@functools.cache
def _generated_by_module(module: str) -> list:
    import onnx.backend.test.case.node as node_pkg

    before = len(node_pkg._NodeTestCases)
    with np.errstate(all="ignore"):
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    return list(node_pkg._NodeTestCases[before:])


def _from_generators(op: str) -> list[BackendCase]:
    out = []
    for module in _modules_by_op().get(op, []):
        for tc in _generated_by_module(module):
            if tc.model is None or not _is_case_of(tc.model, tc.name, op):
                continue
            for k, (ins, outs) in enumerate(tc.data_sets or []):
                def arrays(vals: list) -> list[np.ndarray]:
                    return [numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto)
                            else np.asarray(v) for v in vals]

                out.append(BackendCase(f"{tc.name}/test_data_set_{k}", tc.model, arrays(ins),
                                       arrays(outs)))
    return out


def source() -> str:
    return "data folder" if DATA_DIR.is_dir() else "generators"


@functools.cache
def cases_for(op: str) -> tuple[BackendCase, ...]:
    """ONNX's node test cases of ``op`` (sorted by name)."""
    found = _from_data_dir(op) if DATA_DIR.is_dir() else _from_generators(op)
    return tuple(sorted(found, key=lambda c: c.name))


def _short(e: BaseException) -> str:
    """The first listed problem of an import error (or the message's first line)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    listed = [ln[2:] for ln in lines if ln.startswith("- ")]
    text = listed[0] if listed else (lines[0] if lines else type(e).__name__)
    return re.sub(r"^\w+ node '[^']*' \([^)]*\): ", "", text)


def import_time_inputs(model: onnx.ModelProto) -> set[str]:
    """Graph inputs that feed an input fluid-hw needs at import time (a Reshape's shape,
    a Pad's pads, ...).  Exporters store those as initializers; ONNX's node tests make
    them graph inputs, so the runner gives their test values to ``load(constants=)``."""
    from fluid_hw.frontend.onnx._import_ops import IMPORTERS

    names = set()
    for node in model.graph.node:
        entry = IMPORTERS.get(node.op_type)
        for i in entry.const_inputs if entry else ():
            if i < len(node.input) and node.input[i]:
                names.add(node.input[i])
    return names


_NAMED_INPUT = re.compile(r"it is the graph input '([^']+)'; pass its value with load")
_NAMED_INPUTS = re.compile(r"computed from the graph input\(s\) \[([^\]]*)\]: pass their")


def run_case(case: BackendCase) -> Result:
    graph_inputs = [i.name for i in case.model.graph.input
                    if i.name not in {t.name for t in case.model.graph.initializer}]
    values = dict(zip(graph_inputs, case.inputs))
    fixed = import_time_inputs(case.model) & set(values)
    while True:
        try:
            m = fonnx.load(case.model, constants={n: values[n] for n in fixed})
            break
        except FluidError as e:
            # a graph input an op inside a function body needs at import time: the
            # importer names it, and a user would pass it as load's constants
            named = set(_NAMED_INPUT.findall(str(e)))
            for group in _NAMED_INPUTS.findall(str(e)):
                named |= set(re.findall(r"'([^']+)'", group))
            wanted = named & set(values)
            if not wanted or wanted <= fixed:
                return Result(case.name, "skip", _short(e))
            fixed |= wanted
    feeds = {n: v for n, v in values.items() if n not in fixed}
    try:
        got = run_fluid_model(m, feeds)
    except FluidError as e:
        return Result(case.name, "fail", f"run: {_short(e)}")
    problem = (dropout_problem(case, got) if is_random_dropout(case)
               else mismatch(got, case.outputs, RTOL, ATOL))
    return Result(case.name, "fail" if problem else "pass", problem or "")


def is_random_dropout(case: BackendCase) -> bool:
    """A Dropout node in training mode with a ratio above 0: its mask is random, and
    ONNX's expected values come from numpy's legacy generator, which the standard
    leaves to the runtime (its ``seed`` is only "a seed to the random generator")."""
    nodes = case.model.graph.node
    if len(nodes) != 1 or nodes[0].op_type != "Dropout" or len(case.inputs) < 3:
        return False
    return bool(case.inputs[2]) and float(case.inputs[1]) > 0.0


def dropout_problem(case: BackendCase, got: list[np.ndarray]) -> str | None:
    """Training-mode Dropout checked by what the standard fixes: every cell is either
    dropped (0, mask False) or kept and scaled by 1 / (1 - ratio) (mask True), the
    types and shapes are the expected ones, and the share of kept cells is within
    5 standard deviations of 1 - ratio (the binomial's)."""
    if len(got) != len(case.outputs):
        return f"{len(got)} outputs, expected {len(case.outputs)}"
    x, ratio = case.inputs[0], float(case.inputs[1])
    y = np.asarray(got[0])
    for k, (g, w) in enumerate(zip(got, case.outputs)):
        if np.asarray(g).dtype != w.dtype or np.shape(g) != w.shape:
            return f"output {k}: {np.asarray(g).dtype}{list(np.shape(g))}, expected " \
                   f"{w.dtype}{list(w.shape)}"
    kept = y != 0
    scaled = (x / (1 - ratio)).astype(x.dtype)
    if not np.allclose(y[kept], scaled[kept], rtol=RTOL, atol=ATOL):
        return "output 0: a kept cell is not X / (1 - ratio)"
    if len(got) > 1 and not np.array_equal(np.asarray(got[1]), kept | (x == 0) & got[1]):
        return "output 1: the mask disagrees with the dropped cells"
    n, p = x.size, 1 - ratio
    share = kept.sum() / n
    if abs(share - p) > 5 * np.sqrt(p * (1 - p) / n):
        return f"kept {share:.3f} of the cells, expected {p:.3f}"
    return None


@functools.cache
def results_for(op: str) -> tuple[Result, ...]:
    with fluid.scope_guard(fluid.Scope()):
        return tuple(run_case(c) for c in cases_for(op))
