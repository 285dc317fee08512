"""Gradient-check cases for the tensor-array and LoD-plumbing ops of
``fluid_hw/ir/ops/lod_array.py`` (checked by tests/grad_lod_harness.py, central
differences in float64).

The ops there with a gradient: write_to_array, read_from_array, lod_tensor_to_array,
array_to_lod_tensor, shrink_rnn_memory, reorder_lod_tensor_by_rank, split_lod_tensor,
merge_lod_tensor, tensor_to_array, tensor_array_to_tensor.  Without one (integers or
creation): lod_array_length, lod_rank_table, max_sequence_len,
fill_constant_batch_size_like; they drive the cases below (DynamicRNN).  The first
cases of these ops are in cases_sequence.py; these add arrays indexed by counters
updated in place, entries read more than once or overwritten, LoD entries and
sequence-level (LoD) inputs of the shrink / reorder / split / merge ops.
"""

import numpy as np

import fluid_hw as fluid
from fluid_hw import layers
from tests.grad_lod_harness import Built, LoDGradCase, ProgramGradCase

R = np.random.default_rng(29)


def f64(*shape):
    return R.uniform(-1.0, 1.0, size=shape).astype(np.float64)


LENS = [[3, 1, 4, 2]]  # 10 rows; rank order 2, 0, 3, 1; active rows per step 4, 3, 2, 1


def _data(name, value, lod=None, grad=True):
    v = np.asarray(value)
    var = layers.data(name=name, shape=[-1, *v.shape[1:]], dtype=str(v.dtype),
                      lod_level=len(lod) if lod else 0, append_batch_size=False,
                      stop_gradient=not grad)
    return var, (fluid.create_lod_tensor(v, lod) if lod else v)


def _zero():
    return layers.zeros([1], "int64")


def _counter_writes():
    """x0 at entry 0, x1 at entry 1, x2 at entry 2: one index incremented in place."""
    xs, feed = [], {}
    for k in range(3):
        v, f = _data(f"x{k}", f64(2, 3))
        xs.append(v)
        feed[v.name] = f
    i = _zero()
    arr = layers.array_write(xs[0], i)
    for x in xs[1:]:
        layers.increment(i, in_place=True)
        layers.array_write(x, i, arr)
    return arr, feed


def _counter_reads():
    arr, feed = _counter_writes()
    j = _zero()
    outs = [layers.array_read(arr, j)]
    layers.increment(j, in_place=True)
    outs.append(layers.array_read(arr, j))
    layers.increment(j, in_place=True)
    outs.append(layers.array_read(arr, j))
    return Built(feed, list(feed), [o.name for o in outs])


def _one_entry_read_twice():
    arr, feed = _counter_writes()
    j = _zero()
    layers.increment(j, in_place=True)
    a = layers.array_read(arr, j)
    b = layers.array_read(arr, j)  # entry 1 again: the two gradients add up
    c = layers.array_read(arr, _zero())
    out = layers.elementwise_add(layers.elementwise_mul(a, b), c)  # entry 2 never read
    return Built(feed, list(feed), [out.name])


def _overwrite():
    x0, f0 = _data("x0", f64(2, 3))
    x1, f1 = _data("x1", f64(2, 3))
    zero = _zero()
    arr = layers.array_write(x0, zero)
    before = layers.array_read(arr, zero)
    layers.array_write(x1, zero, arr)  # entry 0 replaced: x0 gets only `before`'s share
    after = layers.array_read(arr, zero)
    out = layers.elementwise_mul(before, after)
    return Built({"x0": f0, "x1": f1}, ["x0", "x1"], [out.name, after.name])


def _loop_over_entries():
    """A while loop reads entry k and entry 0 at step k and writes an output array;
    the loop overwrites one state entry at every step."""
    arr, feed = _counter_writes()
    k = _zero()
    n = layers.fill_constant([1], "int64", 3)
    zero = _zero()
    cond = layers.less_than(k, n)
    out = layers.create_array("float64")
    state = layers.array_write(layers.array_read(arr, zero), zero)
    loop = layers.While(cond)
    with loop.block():
        prev = layers.array_read(state, zero)
        h = layers.tanh(layers.elementwise_add(layers.array_read(arr, k),
                                               layers.elementwise_mul(prev, prev)))
        layers.array_write(h, zero, state)
        layers.array_write(h, k, out)
        layers.increment(k, in_place=True)
        layers.less_than(k, n, cond=cond)
    stacked, _ = layers.tensor_array_to_tensor(out, axis=0, use_stack=True)
    return Built(feed, list(feed), [stacked.name])


def _steps_written_then_merged():
    """array_to_lod_tensor of steps written one by one (4, 3, 2, 1 rows)."""
    x, fx = _data("x", f64(10, 1), LENS, grad=False)
    table = layers.lod_rank_table(x)
    i = _zero()
    feed, names, arr = {"x": fx}, [], None
    for t, rows in enumerate((4, 3, 2, 1)):
        s, fs = _data(f"s{t}", f64(rows, 2))
        feed[s.name] = fs
        names.append(s.name)
        if t:
            layers.increment(i, in_place=True)
        arr = layers.array_write(s, i, arr)
    out = layers.array_to_lod_tensor(arr, table)
    return Built(feed, names, [out.name])


def _lod_entries():
    """Entries with LoD (a 2-level batch cut by level 0): a read entry feeds a
    sequence op, which needs its LoD."""
    x, fx = _data("x", f64(9, 2), [[2, 1, 2], [1, 3, 2, 1, 2]])
    table = layers.lod_rank_table(x, level=0)
    arr = layers.lod_tensor_to_array(x, table)
    first = layers.array_read(arr, _zero())
    pooled = layers.sequence_pool(layers.elementwise_mul(first, first), "sum")
    back = layers.array_to_lod_tensor(arr, table)
    return Built({"x": fx}, ["x"], [pooled.name, back.name])


def _lod_steps_level1():
    """Steps of the sub-sequences (rank table at LoD level 1)."""
    x, fx = _data("x", f64(9, 2), [[2, 1, 2], [1, 3, 2, 1, 2]])
    table = layers.lod_rank_table(x, level=1)
    arr = layers.lod_tensor_to_array(x, table)
    second = layers.array_read(arr, layers.fill_constant([1], "int64", 1))
    back = layers.array_to_lod_tensor(arr, table)
    return Built({"x": fx}, ["x"], [second.name, back.name])


def _shrink_sequences():
    """shrink_rnn_memory of a LoD input keeps whole level-0 sequences."""
    x, fx = _data("x", f64(10, 1), LENS, grad=False)
    s, fs = _data("s", f64(6, 2), [[1, 2, 1, 2]])
    table = layers.lod_rank_table(x)
    re = layers.reorder_lod_tensor_by_rank(s, table)
    outs = [layers.shrink_memory(re, layers.fill_constant([1], "int64", t), table)
            for t in (1, 3)]
    return Built({"x": fx, "s": fs}, ["s"], [o.name for o in outs])


def _reorder_2level():
    x, fx = _data("x", f64(10, 1), LENS, grad=False)
    s, fs = _data("s", f64(8, 2), [[1, 2, 1, 1], [2, 1, 1, 3, 1]])
    table = layers.lod_rank_table(x)
    out = layers.reorder_lod_tensor_by_rank(s, table)
    pooled = layers.sequence_pool(out, "sqrt")  # reads the reordered LoD
    return Built({"x": fx, "s": fs}, ["s"], [out.name, pooled.name])


def _drnn_static_sequences():
    """DynamicRNN with a per-sequence static input that is itself a LoD tensor
    (reordered and shrunk by whole sequences) and a reordered initial memory."""
    x, fx = _data("x", f64(10, 2), LENS)
    s, fs = _data("s", f64(6, 2), [[1, 2, 1, 2]])
    h0, fh0 = _data("h0", f64(4, 2))
    drnn = layers.DynamicRNN()
    with drnn.block():
        xt = drnn.step_input(x)
        prev = drnn.memory(init=h0, need_reorder=True)
        st = layers.sequence_pool(drnn.static_input(s), "sum")
        h = layers.tanh(layers.elementwise_add(layers.elementwise_mul(xt, prev), st))
        drnn.update_memory(prev, h)
        drnn.output(h)
    return Built({"x": fx, "s": fs, "h0": fh0}, ["x", "s", "h0"], [drnn().name])


def _ragged_concat():
    arr, feed = None, {}
    i = _zero()
    for t, rows in enumerate((2, 3, 1)):
        v, f = _data(f"x{t}", f64(rows, 2))
        feed[v.name] = f
        if t:
            layers.increment(i, in_place=True)
        arr = layers.array_write(v, i, arr)
    out, _ = layers.tensor_array_to_tensor(arr, axis=0, use_stack=False)
    return Built(feed, list(feed), [out.name])


def _tensor_steps_read():
    x, fx = _data("x", f64(3, 2, 2))
    arr = layers.tensor_to_array(x, axis=2)
    a = layers.array_read(arr, layers.fill_constant([1], "int64", 1))
    b = layers.array_read(arr, layers.fill_constant([1], "int64", 1))
    return Built({"x": fx}, ["x"], [layers.elementwise_mul(a, b).name])


CASES = [
    ProgramGradCase("write_to_array", _counter_reads, id="write_to_array-counter-index"),
    ProgramGradCase("read_from_array", _one_entry_read_twice,
                    id="read_from_array-one-entry-twice-counter"),
    ProgramGradCase("write_to_array", _overwrite, id="write_to_array-overwritten-entry"),
    ProgramGradCase("while", _loop_over_entries, id="while-reads-arrays-written-before"),
    ProgramGradCase("array_to_lod_tensor", _steps_written_then_merged,
                    id="array_to_lod_tensor-written-steps"),
    ProgramGradCase("lod_tensor_to_array", _lod_entries, id="lod_tensor_to_array-lod-entries"),
    ProgramGradCase("lod_tensor_to_array", _lod_steps_level1, id="lod_tensor_to_array-level-1"),
    ProgramGradCase("shrink_rnn_memory", _shrink_sequences, id="shrink_rnn_memory-sequences"),
    ProgramGradCase("reorder_lod_tensor_by_rank", _reorder_2level,
                    id="reorder_lod_tensor_by_rank-2-level"),
    ProgramGradCase("while", _drnn_static_sequences, id="while-dynamic_rnn-static-sequences"),
    ProgramGradCase("tensor_array_to_tensor", _ragged_concat,
                    id="tensor_array_to_tensor-ragged-concat"),
    ProgramGradCase("tensor_to_array", _tensor_steps_read, id="tensor_to_array-axis2-read"),
    LoDGradCase("split_lod_tensor", {"X": f64(8, 2), "Mask": np.array([0, 1, 1], bool)},
                {"level": 0}, lod={"X": [[1, 2, 1], [2, 1, 1, 4]]},
                id="split_lod_tensor-2-level"),
    LoDGradCase("split_lod_tensor", {"X": f64(8, 2),
                                     "Mask": np.array([1, 0, 0, 1], bool)},
                {"level": 1}, lod={"X": [[1, 3], [2, 1, 1, 4]]},
                id="split_lod_tensor-level-1"),
    LoDGradCase("merge_lod_tensor", {"X": f64(8, 1), "Mask": np.array([1, 0, 1], bool),
                                     "InTrue": f64(6, 2), "InFalse": f64(2, 2)},
                lod={"X": [[1, 2, 1], [2, 1, 1, 4]], "InTrue": [[1, 1], [2, 4]],
                     "InFalse": [[2], [1, 1]]},
                check=["InTrue", "InFalse"], id="merge_lod_tensor-2-level"),
]
