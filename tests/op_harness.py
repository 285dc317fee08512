"""Run a single op on the CPU executor: the tool every op reference test uses.

    out = run_op("elementwise_add", {"X": x, "Y": y}, {"axis": 1})["Out"]

Inputs are numpy arrays (or lists of arrays for duplicable slots); each becomes a
variable whose declared shape is the array's shape (or, with ``batch_dims``,
has -1 in front).  Output variables are created for the slots named in
``outputs`` (default: the op definition's non-intermediate output slots) and
their shapes come from the op's own shape inference, so the executor's kernel
check (FLUID_HW_CHECK_KERNELS, on in tests) also tests inference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.ir import get_op


def build_op(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
             outputs: list[str] | None = None, batch_dims: bool = False,
             output_counts: dict[str, int] | None = None):
    """Build a one-op program; returns (program, feed dict, {slot: [var names]})."""
    prog = fluid.Program()
    b = prog.global_block()
    opdef = get_op(op_type)
    feed: dict[str, np.ndarray] = {}
    ins: dict[str, list[str]] = {}
    for slot, val in inputs.items():
        vals = val if isinstance(val, (list, tuple)) else [val]
        names = []
        for i, v in enumerate(vals):
            v = np.asarray(v)
            name = f"{slot.lower()}_{i}"
            shape = list(v.shape)
            if batch_dims and shape:
                shape[0] = -1
            b.create_var(name=name, shape=shape, dtype=v.dtype)
            feed[name] = v
            names.append(name)
        ins[slot] = names
    if outputs is None:
        outputs = [s.name for s in opdef.outputs if not s.intermediate]
    outs: dict[str, list[str]] = {}
    for slot in outputs:
        n = (output_counts or {}).get(slot, 1)
        outs[slot] = [b.create_var(name=f"out_{slot.lower()}_{i}").name for i in range(n)]
    b.append_op(op_type, ins, outs, attrs or {})
    return prog, feed, outs


def run_op(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
           outputs: list[str] | None = None, batch_dims: bool = False,
           output_counts: dict[str, int] | None = None,
           executor: fluid.Executor | None = None) -> dict[str, Any]:
    """Build and run one op; returns {slot: array} (a list for multi-output slots)."""
    prog, feed, outs = build_op(op_type, inputs, attrs, outputs, batch_dims, output_counts)
    names = [n for ns in outs.values() for n in ns]
    exe = executor or fluid.Executor(fluid.CPUPlace(), seed=0)
    with fluid.scope_guard(fluid.Scope()):
        vals = exe.run(prog, feed=feed, fetch_list=names)
    res: dict[str, Any] = {}
    it = iter(vals)
    for slot, ns in outs.items():
        got = [next(it) for _ in ns]
        res[slot] = got if (output_counts or {}).get(slot, 1) > 1 else got[0]
    return res
