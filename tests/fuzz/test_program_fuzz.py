"""ProgramDesc mutation through load, verify and run: only FluidErrors come out.

A few small saved programs (an MLP, a CNN with batch norm and pooling, a ``while`` loop
over a tensor array, a LoD sequence model) are mutated field by field (op types,
attributes, dims, dtypes, names, block indices, LoD levels, op order) with a fixed seed.
Each mutant is loaded with ``program_from_bytes`` and, when it loads, run on the CPU
executor with small random feeds of what its feed variables now declare.

The cases run in a child process (``python -m tests.fuzz.test_program_fuzz``) under an
address-space limit, each under an alarm, so a hang or an allocation beyond the limit
fails this test instead of the test run (``while`` loops are capped with
``Executor.max_while_steps``: a mutant may never update its condition).  Kernel failures
reach the caller as ``ExecutionError`` (a FluidError naming the op); the child also
counts those whose cause was a foreign exception (``wrapped_foreign``, about 6 % of the
cases: attributes that disagree with the declared shapes -- ``axis`` or
``x_num_col_dims`` beyond the rank -- which the verifier cannot see because it does not
re-run shape inference), for the record.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import signal
import sys
import time
import traceback
from typing import Any

import numpy as np
import pytest

from tests.fuzz._child import run_fuzz_child

SEED = 14
CASES = 1000
#: address space the cases may add to what the child maps after its imports
MEMORY_MIB = 1536
#: a case slower than this is a hang
CASE_SECONDS = 5
#: elements a fed array may have (a mutated dim may declare far more)
FEED_ELEMENTS = 1 << 16

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="address-space limit via /proc and RLIMIT_AS")


# -- the seed programs --------------------------------------------------------------------

def seed_programs() -> list[tuple[str, bytes, dict[str, np.ndarray], list[str], list[str]]]:
    """(name, program bytes, parameters, feed names, fetch names) per seed program."""
    import fluid_hw as fluid
    from fluid_hw.ir.serialization import program_to_bytes

    out = []

    def build(name: str, body: Any) -> None:
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = 1
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            feeds, fetches = body()
        scope = fluid.Scope()
        fluid.Executor().run(startup, scope=scope)
        params = {k: np.asarray(v.data if isinstance(v, fluid.LoDTensor) else v)
                  for k, v in scope.vars.items() if v is not None}
        out.append((name, program_to_bytes(main), params, feeds,
                    [f if isinstance(f, str) else f.name for f in fetches]))

    L = fluid.layers

    def mlp() -> tuple[list[str], list[Any]]:
        x = L.data(name="x", shape=[6], dtype="float32")
        label = L.data(name="label", shape=[1], dtype="int64")
        h = L.fc(x, size=5, act="relu")
        p = L.softmax(L.fc(L.dropout(h, 0.3, is_test=True), size=3))
        loss = L.mean(L.cross_entropy(p, label))
        return ["x", "label"], [p, loss]

    def cnn() -> tuple[list[str], list[Any]]:
        x = L.data(name="img", shape=[2, 6, 6], dtype="float32")
        c = L.conv2d(x, num_filters=3, filter_size=3, padding=1)
        b = L.batch_norm(c, act="relu", is_test=True)
        p = L.pool2d(b, pool_size=2, pool_stride=2, pool_type="avg")
        r = L.reshape(p, [-1, 27])
        t = L.transpose(L.reshape(r, [-1, 3, 9]), [0, 2, 1])
        return ["img"], [L.fc(t, size=2, num_flatten_dims=2), L.reduce_sum(r, dim=[1])]

    def loop() -> tuple[list[str], list[Any]]:
        x = L.data(name="v", shape=[3], dtype="float32")
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        arr = L.array_write(x, i)
        cond = L.less_than(i, n)
        w = L.While(cond)
        with w.block():
            cur = L.array_read(arr, i)
            i2 = L.increment(i, in_place=True)
            L.array_write(L.scale(cur, scale=2.0), i2, array=arr)
            L.less_than(i2, n, cond=cond)
        return ["v"], [L.array_read(arr, n), L.array_length(arr)]

    def seq() -> tuple[list[str], list[Any]]:
        x = L.data(name="words", shape=[4], dtype="float32", lod_level=1)
        h = L.fc(x, size=4, act="tanh")
        return ["words"], [L.sequence_pool(h, "max"), L.sequence_pool(h, "average")]

    for name, body in (("mlp", mlp), ("cnn", cnn), ("loop", loop), ("seq", seq)):
        build(name, body)
    return out


# -- mutations of a ProgramDesc -----------------------------------------------------------

_INTS = [-(2**31), -7, -2, -1, 0, 1, 2, 3, 5, 64, 2**20, 2**31 - 1]
_DIMS = [-3, -1, 0, 1, 2, 3, 7, 1 << 20, 1 << 40, 1 << 62]
_FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-30, 0.5, 2.0, 1e30]


def _pick(r: random.Random, seq: Any) -> Any:
    return seq[r.randrange(len(seq))]


def _ops(desc: Any) -> list[Any]:
    return [op for b in desc.blocks for op in b.ops]


def _vars(desc: Any) -> list[Any]:
    return [v for b in desc.blocks for v in b.vars]


def _tensor(vd: Any) -> Any:
    return vd.type.tensor_array if vd.type.HasField("tensor_array") else vd.type.lod_tensor


def mutate_op_type(r: random.Random, desc: Any) -> str:
    from fluid_hw.ir.registry import all_ops

    op = _pick(r, _ops(desc))
    types = sorted(all_ops()) if r.random() < 0.5 else sorted({o.type for o in _ops(desc)})
    old, op.type = op.type, _pick(r, [*types, "no_such_op"])
    return f"op type {old} -> {op.type}"


def mutate_attr(r: random.Random, desc: Any) -> str:
    from fluid_hw.ir import attrs as ir_attrs

    op = _pick(r, [o for o in _ops(desc) if o.attrs] or _ops(desc))
    if not op.attrs:
        return "no attrs"
    a = _pick(r, op.attrs)
    kind = ir_attrs.KIND_OF_ENUM.get(a.type, "int")
    how = r.random()
    if how < 0.1:  # another kind
        a.type = _pick(r, [*sorted(ir_attrs.KINDS.values())])
        return f"{op.type}.{a.name} type -> {a.type}"
    if how < 0.2:
        i = next(k for k, x in enumerate(op.attrs) if x is a)
        del op.attrs[i]
        return f"{op.type}.{a.name} removed"
    if kind in ("int", "long", "block"):
        v = _pick(r, _INTS) if kind != "block" else r.randrange(-2, len(desc.blocks) + 2)
        setattr(a, {"int": "i", "long": "l", "block": "block_idx"}[kind],
                max(-(2**31), min(2**31 - 1, v)) if kind != "long" else v)
    elif kind in ("float", "float64"):
        setattr(a, "f" if kind == "float" else "float64", _pick(r, _FLOATS))
    elif kind == "bool":
        a.b = not a.b
    elif kind == "string":
        a.s = _pick(r, ["", "NHWC", "max", "avg", "relu", "none", "\x00", "x" * 300])
    elif kind in ("ints", "longs", "blocks"):
        field = {"ints": a.ints, "longs": a.longs, "blocks": a.blocks_idx}[kind]
        n = r.randrange(0, 6)
        del field[:]
        field.extend(max(-(2**31), min(2**31 - 1, _pick(r, _INTS + _DIMS)))
                     for _ in range(n))
    elif kind in ("floats",):
        del a.floats[:]
        a.floats.extend(_pick(r, _FLOATS) for _ in range(r.randrange(0, 5)))
    elif kind in ("strings",):
        a.strings.append(_pick(r, ["", "x", "@EMPTY@"]))
    elif kind == "bools":
        a.bools.append(True)
    return f"{op.type}.{a.name} ({kind}) changed"


def mutate_dims(r: random.Random, desc: Any) -> str:
    vd = _pick(r, _vars(desc))
    t = _tensor(vd).tensor
    how = r.random()
    if how < 0.3 and len(t.dims):
        del t.dims[r.randrange(len(t.dims))]
    elif how < 0.5:
        t.dims.insert(r.randrange(len(t.dims) + 1), _pick(r, _DIMS[:7]))
    elif len(t.dims):
        t.dims[r.randrange(len(t.dims))] = _pick(r, _DIMS)
    return f"{vd.name} dims -> {list(t.dims)}"


def mutate_dtype(r: random.Random, desc: Any) -> str:
    vd = _pick(r, _vars(desc))
    _tensor(vd).tensor.data_type = _pick(r, [0, 1, 2, 3, 4, 5, 6, 20, 21, 7, 8, 13])
    return f"{vd.name} dtype -> {_tensor(vd).tensor.data_type}"


def mutate_var_kind(r: random.Random, desc: Any) -> str:
    vd = _pick(r, _vars(desc))
    how = r.random()
    if how < 0.4:
        vd.type.type = _pick(r, [7, 8, 9, 10, 11, 12, 13, 17])
        return f"{vd.name} kind -> {vd.type.type}"
    if how < 0.7:
        _tensor(vd).lod_level = _pick(r, [0, 1, 2, 5])
        return f"{vd.name} lod_level -> {_tensor(vd).lod_level}"
    vd.persistable = not vd.persistable
    return f"{vd.name} persistable -> {vd.persistable}"


def mutate_names(r: random.Random, desc: Any) -> str:
    op = _pick(r, _ops(desc))
    slots = list(op.inputs) + list(op.outputs)
    if not slots:
        return "no slots"
    s = _pick(r, slots)
    how = r.random()
    names = [v.name for v in _vars(desc)]
    if how < 0.5 and len(s.arguments):
        s.arguments[r.randrange(len(s.arguments))] = _pick(r, [*names, "ghost", "@EMPTY@"])
    elif how < 0.7:
        s.arguments.append(_pick(r, names))
    elif how < 0.85:
        del s.arguments[:]
    else:
        s.parameter = _pick(r, ["X", "Y", "Out", "Input", "Bogus"])
    return f"{op.type} slot {s.parameter} -> {list(s.arguments)}"


def mutate_var_name(r: random.Random, desc: Any) -> str:
    vd = _pick(r, _vars(desc))
    old, vd.name = vd.name, _pick(r, [v.name for v in _vars(desc)] + ["", "renamed"])
    return f"var {old} renamed {vd.name!r}"


def mutate_blocks(r: random.Random, desc: Any) -> str:
    b = _pick(r, desc.blocks)
    how = r.random()
    if how < 0.4:
        b.parent_idx = r.randrange(-2, len(desc.blocks) + 1)
        return f"block {b.idx} parent -> {b.parent_idx}"
    if how < 0.6:
        b.forward_block_idx = r.randrange(-2, len(desc.blocks) + 1)
        return f"block {b.idx} forward -> {b.forward_block_idx}"
    if how < 0.8:
        b.idx = r.randrange(-1, len(desc.blocks) + 1)
        return f"block idx -> {b.idx}"
    desc.blocks.add().CopyFrom(b)
    return "block duplicated"


def mutate_op_order(r: random.Random, desc: Any) -> str:
    b = _pick(r, [b for b in desc.blocks if len(b.ops)] or list(desc.blocks))
    n = len(b.ops)
    if n == 0:
        return "no ops"
    how = r.random()
    if how < 0.4:
        i = r.randrange(n)
        del b.ops[i]
        return f"op #{i} removed"
    if how < 0.7:
        b.ops.add().CopyFrom(b.ops[r.randrange(n)])
        return "op duplicated at the end"
    i, j = r.randrange(n), r.randrange(n)
    a, c = type(b.ops[i])(), type(b.ops[j])()
    a.CopyFrom(b.ops[i])
    c.CopyFrom(b.ops[j])
    b.ops[i].CopyFrom(c)
    b.ops[j].CopyFrom(a)
    return f"ops #{i} and #{j} swapped"


MUTATIONS = [mutate_op_type, mutate_attr, mutate_attr, mutate_attr, mutate_dims, mutate_dims,
             mutate_dtype, mutate_var_kind, mutate_names, mutate_var_name, mutate_blocks,
             mutate_op_order]


# -- one case -----------------------------------------------------------------------------

class CaseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` swallows it."""


def _feed_value(rng: np.random.Generator, var: Any) -> Any:
    import fluid_hw as fluid
    from fluid_hw.ir import dtypes

    dt = dtypes.to_numpy(var.dtype) if var.dtype in dtypes.TENSOR_DTYPES else \
        np.dtype(np.float32)
    shape = [2 if d < 0 else d for d in var.shape] or [2]
    if np.prod(shape, dtype=np.float64) > FEED_ELEMENTS:
        shape = [min(d, 4) for d in shape]
    if dt.kind == "f":
        arr = rng.standard_normal(shape).astype(dt)
    elif dt.kind == "b":
        arr = rng.random(shape) < 0.5
    else:
        arr = rng.integers(0, 3, shape).astype(dt)
    if var.lod_level and arr.ndim and arr.shape[0]:
        # one sequence on each outer level, holding all rows on the innermost
        return fluid.create_lod_tensor(arr, [[1]] * (var.lod_level - 1) + [[arr.shape[0]]])
    return arr


def run_case(data: bytes, params: dict[str, np.ndarray], feeds: list[str],
             fetches: list[str], rng: np.random.Generator) -> tuple[str, str]:
    """('ok' | 'refused' (not loaded) | 'failed' (a FluidError from the run), and for a
    kernel failure caused by a foreign exception, that exception's type)."""
    import fluid_hw as fluid
    from fluid_hw.errors import FluidError
    from fluid_hw.ir.serialization import program_from_bytes

    try:
        program = program_from_bytes(data, "fuzz.pdmodel")
    except FluidError:
        return "refused", ""
    gb = program.global_block()
    scope = fluid.Scope()
    for k, v in params.items():
        scope.vars[k] = v.copy()
    fetch = [n for n in fetches if n in gb.vars]
    try:
        feed = {n: _feed_value(rng, gb.vars[n]) for n in feeds if n in gb.vars}
        exe = fluid.Executor(seed=0)
        exe.max_while_steps = 1000  # a mutant may loop forever (step 0, no increment)
        exe.run(program, feed=feed, fetch_list=fetch, scope=scope)
    except FluidError as e:
        cause = e.__cause__
        return "failed", "" if cause is None or isinstance(cause, FluidError) else \
            type(cause).__name__
    return "ok", ""


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout()


def _limit_memory(mib: int) -> None:
    mapped = 0
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            mapped += hi - lo
    limit = mapped + (mib << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--cases", type=int, default=CASES)
    ap.add_argument("--memory-mib", type=int, default=MEMORY_MIB)
    args = ap.parse_args(argv)
    from fluid_hw.ir import framework_pb2 as pb

    seeds = seed_programs()
    _limit_memory(args.memory_mib)
    signal.signal(signal.SIGALRM, _alarm)
    r = random.Random(args.seed)
    counts = {"ok": 0, "refused": 0, "failed": 0, "foreign": 0, "wrapped_foreign": 0}
    for case in range(args.cases):
        name, data, params, feeds, fetches = seeds[case % len(seeds)]
        desc = pb.ProgramDesc.FromString(data)
        whats = [f(r, desc) for f in r.sample(MUTATIONS, r.choice([1, 1, 2, 3]))]
        what = f"{name}: " + "; ".join(whats)
        print(json.dumps({"start": case, "what": what}), flush=True)
        mutant = desc.SerializePartialToString()
        t0 = time.perf_counter()
        row: dict[str, Any] = {"case": case, "what": what}
        signal.alarm(CASE_SECONDS)
        try:
            row["outcome"], cause = run_case(mutant, params, feeds, fetches,
                                             np.random.default_rng(case))
            if cause:
                row["cause"] = cause
                counts["wrapped_foreign"] += 1
        except CaseTimeout:
            row.update(outcome="foreign", type="timeout",
                       message=f"over {CASE_SECONDS} s", traceback="")
        except Exception as e:
            row.update(outcome="foreign", type=type(e).__name__, message=str(e)[:500],
                       traceback=traceback.format_exc()[-2000:])
        finally:
            signal.alarm(0)
        row["seconds"] = round(time.perf_counter() - t0, 3)
        counts[row["outcome"]] += 1
        print(json.dumps(row), flush=True)
    print(json.dumps({"done": counts}), flush=True)
    return 0


# -- the test -----------------------------------------------------------------------------

def test_mutated_programs_load_and_run_or_raise_a_fluid_error():
    _, counts = run_fuzz_child("tests.fuzz.test_program_fuzz", seed=SEED, cases=CASES,
                               memory_mib=MEMORY_MIB, timeout=240)
    # the mutants reach every stage: refused on load, run, and failing in a kernel
    assert min(counts["ok"], counts["refused"], counts["failed"]) > CASES // 20, counts


if __name__ == "__main__":
    sys.exit(main())
