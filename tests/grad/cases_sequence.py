"""Gradient-check cases for the control-flow, tensor-array and sequence ops.

Ops that run on plain arrays are :class:`GradCase` (checked by tests/grad_harness.py);
ops that need LoD inputs, tensor arrays or sub-blocks are cases of
tests/grad_lod_harness.py, which carry their own ``checker``.
"""

import numpy as np

import fluid_hw as fluid
from fluid_hw import layers
from tests.grad_harness import GradCase
from tests.grad_lod_harness import Built, LoDGradCase, ProgramGradCase

R = np.random.default_rng(17)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def distinct(*shape):
    n = int(np.prod(shape))
    return (R.permutation(n).astype(np.float64) * 0.05 - n * 0.025).reshape(shape)


LENS = [[3, 1, 4, 2]]  # 10 rows
LENS_EMPTY = [[2, 0, 3]]

CASES = [
    # -- recurrent units (plain arrays) --------------------------------------------------
    GradCase("lstm_unit", {"X": f64(3, 8), "C_prev": f64(3, 2)}, id="lstm_unit"),
    GradCase("lstm_unit", {"X": f64(3, 8), "C_prev": f64(3, 2)}, {"forget_bias": 1.0},
             id="lstm_unit-forget_bias"),
    GradCase("gru_unit", {"Input": f64(3, 6), "HiddenPrev": f64(3, 2), "Weight": f64(2, 6),
                          "Bias": f64(1, 6)}, outputs=["Hidden"], id="gru_unit"),
    GradCase("gru_unit", {"Input": f64(3, 6), "HiddenPrev": f64(3, 2), "Weight": f64(2, 6)},
             {"origin_mode": True, "activation": 3, "gate_activation": 1},
             outputs=["Hidden"], id="gru_unit-origin-relu"),
    # -- routing and unpadding (plain arrays; row counts known only at run time) -----------
    LoDGradCase("split_lod_tensor", {"X": f64(5, 3), "Mask": np.array([[1], [0], [0], [1], [1]],
                                                                    bool)},
             id="split_lod_tensor-rows"),
    LoDGradCase("merge_lod_tensor", {"X": f64(5, 1), "Mask": np.array([1, 0, 0, 1, 1], bool),
                                  "InTrue": f64(3, 2), "InFalse": f64(2, 2)},
             check=["InTrue", "InFalse"], id="merge_lod_tensor-rows"),
    LoDGradCase("sequence_unpad", {"X": f64(3, 4, 2), "Length": np.array([2, 4, 1], np.int64)},
             id="sequence_unpad"),
]

# -- sequence ops on LoD tensors --------------------------------------------------------------
CASES += [
    LoDGradCase("sequence_pool", {"X": f64(10, 3)}, {"pooltype": kind}, lod={"X": LENS},
                id=f"sequence_pool-{kind.lower()}")
    for kind in ("SUM", "AVERAGE", "SQRT", "FIRST", "LAST")
]
CASES += [
    LoDGradCase("sequence_pool", {"X": distinct(10, 3)}, {"pooltype": "MAX"}, lod={"X": LENS},
                id="sequence_pool-max"),
    LoDGradCase("sequence_pool", {"X": f64(5, 2)}, {"pooltype": "AVERAGE", "pad_value": 0.5},
                lod={"X": LENS_EMPTY}, id="sequence_pool-empty-sequence"),
    LoDGradCase("sequence_pool", {"X": f64(10, 2)}, {"pooltype": "SUM"},
                lod={"X": [[2, 1], [3, 1, 6]]}, id="sequence_pool-2-level"),
    LoDGradCase("sequence_softmax", {"X": f64(10, 1)}, lod={"X": LENS}),
    LoDGradCase("sequence_expand", {"X": f64(4, 2), "Y": f64(10, 1)}, lod={"Y": LENS},
                check=["X"], id="sequence_expand-rows"),
    LoDGradCase("sequence_expand", {"X": f64(5, 2), "Y": f64(4, 1)},
                lod={"X": [[2, 3]], "Y": [[3, 1]]}, check=["X"], id="sequence_expand-lod"),
    LoDGradCase("sequence_concat", {"X": [f64(10, 2), f64(6, 2)]},
                lod={"X": [LENS, [[1, 2, 2, 1]]]}, id="sequence_concat"),
    LoDGradCase("sequence_reshape", {"X": f64(10, 4)}, {"new_dim": 2}, lod={"X": LENS}),
    LoDGradCase("sequence_conv", {"X": f64(10, 2), "Filter": f64(6, 3)},
                {"contextLength": 3, "contextStart": -1}, lod={"X": LENS},
                id="sequence_conv-centred"),
    LoDGradCase("sequence_conv", {"X": f64(10, 2), "Filter": f64(8, 3),
                                  "PaddingData": f64(3, 2)},
                {"contextLength": 4, "contextStart": -2, "paddingTrainable": True},
                lod={"X": LENS}, id="sequence_conv-trainable-padding"),
    LoDGradCase("sequence_pad", {"X": f64(10, 2), "PadValue": np.array([0.5])},
                {"padded_length": 5}, lod={"X": LENS}, check=["X"]),
    LoDGradCase("split_lod_tensor", {"X": f64(10, 2), "Mask": np.array([1, 0, 0, 1], bool)},
                lod={"X": LENS}, id="split_lod_tensor-sequences"),
    LoDGradCase("merge_lod_tensor", {"X": f64(10, 1), "Mask": np.array([1, 0, 0, 1], bool),
                                     "InTrue": f64(5, 2), "InFalse": f64(5, 2)},
                lod={"X": LENS, "InTrue": [[3, 2]], "InFalse": [[1, 4]]},
                check=["InTrue", "InFalse"], id="merge_lod_tensor-sequences"),
]

# -- whole-sequence recurrences ----------------------------------------------------------------
D = 2
for peep in (True, False):
    CASES.append(LoDGradCase(
        "lstm", {"Input": f64(10, 4 * D), "Weight": f64(D, 4 * D),
                 "Bias": f64(1, (7 if peep else 4) * D)},
        {"use_peepholes": peep}, lod={"Input": LENS}, outputs=["Hidden", "Cell"],
        id=f"lstm-{'peepholes' if peep else 'plain'}"))
CASES += [
    LoDGradCase("lstm", {"Input": f64(10, 4 * D), "H0": f64(4, D), "C0": f64(4, D),
                         "Weight": f64(D, 4 * D), "Bias": f64(1, 7 * D)},
                {"is_reverse": True}, lod={"Input": LENS}, outputs=["Hidden"],
                id="lstm-reverse-initial-state"),
    LoDGradCase("gru", {"Input": f64(10, 3 * D), "Weight": f64(D, 3 * D),
                        "Bias": f64(1, 3 * D)}, lod={"Input": LENS}, id="gru"),
    LoDGradCase("gru", {"Input": f64(10, 3 * D), "H0": f64(4, D), "Weight": f64(D, 3 * D)},
                {"is_reverse": True, "origin_mode": True}, lod={"Input": LENS},
                id="gru-reverse-origin-initial-state"),
]


# -- ops that need tensor arrays, rank tables or sub-blocks: small programs ----------------------

def _data(name, value, lod=None, grad=True):
    v = np.asarray(value)
    var = layers.data(name=name, shape=[-1, *v.shape[1:]], dtype=str(v.dtype),
                      lod_level=len(lod) if lod else 0, append_batch_size=False,
                      stop_gradient=not grad)
    return var, (fluid.create_lod_tensor(v, lod) if lod else v)


def _index(k):
    return layers.fill_constant([1], "int64", k)


def _arrays_write():
    x0, f0 = _data("x0", f64(2, 3))
    x1, f1 = _data("x1", f64(2, 3))
    arr = layers.array_write(x0, _index(0))
    layers.array_write(x1, _index(2), arr)
    layers.array_write(x0, _index(1), arr)  # x0 used twice: gradients add up
    out, _ = layers.tensor_array_to_tensor(arr, axis=0, use_stack=True)
    return Built({"x0": f0, "x1": f1}, ["x0", "x1"], [out.name])


def _arrays_read():
    x, fx = _data("x", f64(4, 2, 3))
    arr = layers.tensor_to_array(x, axis=0)
    a = layers.array_read(arr, _index(1))
    b = layers.array_read(arr, _index(1))  # the same entry twice
    c = layers.array_read(arr, _index(3))
    out = layers.elementwise_add(layers.elementwise_mul(a, b), c)
    return Built({"x": fx}, ["x"], [out.name])


def _array_axis():
    x, fx = _data("x", f64(2, 3, 2))
    arr = layers.tensor_to_array(x, axis=1)
    out, _ = layers.tensor_array_to_tensor(arr, axis=1, use_stack=False)
    return Built({"x": fx}, ["x"], [out.name])


def _lod_steps():
    x, fx = _data("x", f64(10, 2), LENS)
    table = layers.lod_rank_table(x)
    arr = layers.lod_tensor_to_array(x, table)
    back = layers.array_to_lod_tensor(arr, table)
    step1 = layers.array_read(arr, _index(1))
    return Built({"x": fx}, ["x"], [back.name, step1.name])


def _lod_steps_2level():
    x, fx = _data("x", f64(9, 2), [[2, 1, 2], [1, 3, 2, 1, 2]])
    table = layers.lod_rank_table(x, level=0)
    arr = layers.lod_tensor_to_array(x, table)
    back = layers.array_to_lod_tensor(arr, table)
    return Built({"x": fx}, ["x"], [back.name])


def _shrink():
    x, fx = _data("x", f64(10, 1), LENS, grad=False)
    h, fh = _data("h", f64(4, 3))
    table = layers.lod_rank_table(x)
    out = layers.shrink_memory(h, _index(2), table)
    return Built({"x": fx, "h": fh}, ["h"], [out.name])


def _reorder():
    x, fx = _data("x", f64(10, 1), LENS, grad=False)
    h, fh = _data("h", f64(4, 3))
    s, fs = _data("s", f64(6, 2), [[1, 2, 1, 2]])
    table = layers.lod_rank_table(x)
    return Built({"x": fx, "h": fh, "s": fs}, ["h", "s"],
                 [layers.reorder_lod_tensor_by_rank(h, table).name,
                  layers.reorder_lod_tensor_by_rank(s, table).name])


def _dynamic_rnn():
    x, fx = _data("x", f64(10, 2), LENS)
    w, fw = _data("w", f64(2, 3))
    u, fu = _data("u", f64(3, 3))
    h0, fh0 = _data("h0", f64(4, 3))
    drnn = layers.DynamicRNN()
    with drnn.block():
        xt = drnn.step_input(x)
        prev = drnn.memory(init=h0, need_reorder=True)
        st = drnn.static_input(h0)
        h = layers.tanh(layers.elementwise_add(
            layers.elementwise_add(layers.mul(xt, w), layers.mul(prev, u)), st))
        drnn.update_memory(prev, h)
        drnn.output(h)
    return Built({"x": fx, "w": fw, "u": fu, "h0": fh0}, ["x", "w", "u", "h0"],
                 [drnn().name])


def _ifelse():
    x, fx = _data("x", f64(6, 2))
    w, fw = _data("w", f64(2, 2))
    cond = layers.less_than(layers.reduce_sum(x, dim=[1], keep_dim=True),
                            layers.fill_constant([1], "float64", 0.0))
    ie = layers.IfElse(cond)
    with ie.true_block():
        ie.output(layers.tanh(layers.mul(ie.input(x), w)))
    with ie.false_block():
        ie.output(layers.scale(ie.input(x), 3.0))
    (out,) = ie()
    return Built({"x": fx, "w": fw}, ["x", "w"], [out.name])


CASES += [
    ProgramGradCase("write_to_array", _arrays_write, id="write_to_array-stack"),
    ProgramGradCase("tensor_array_to_tensor", _arrays_write, id="tensor_array_to_tensor-stack"),
    ProgramGradCase("read_from_array", _arrays_read, id="read_from_array-twice"),
    ProgramGradCase("tensor_to_array", _array_axis, id="tensor_to_array-axis1-concat"),
    ProgramGradCase("lod_tensor_to_array", _lod_steps, id="lod_tensor_to_array"),
    ProgramGradCase("array_to_lod_tensor", _lod_steps_2level, id="array_to_lod_tensor-2-level"),
    ProgramGradCase("shrink_rnn_memory", _shrink),
    ProgramGradCase("reorder_lod_tensor_by_rank", _reorder),
    ProgramGradCase("while", _dynamic_rnn, id="while-dynamic_rnn"),
    ProgramGradCase("conditional_block", _ifelse, id="conditional_block-ifelse"),
]
