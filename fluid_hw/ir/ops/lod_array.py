"""Tensor arrays, rank tables and the LoD plumbing of DynamicRNN and IfElse.

A ``LOD_TENSOR_ARRAY`` variable holds a list of tensors (the CPU executor keeps a
Python list).  ``write_to_array`` / ``read_from_array`` / ``lod_array_length`` are
Fluid's op types behind the ``array_write`` / ``array_read`` / ``array_length``
layers; the index ``I`` is a one-element int64 tensor.

DynamicRNN runs a batch of variable-length sequences without padding:

* ``lod_rank_table`` orders the sequences of one LoD level by length, longest first;
* ``lod_tensor_to_array`` cuts the batch into time steps: entry ``t`` holds the
  ``t``-th element of every sequence longer than ``t``, in rank order, so every
  entry is a prefix of the one before (the batch shrinks);
* ``shrink_rnn_memory`` keeps the rows of the sequences still active at step ``I``;
* ``array_to_lod_tensor`` puts the steps back into the original order and LoD;
* ``reorder_lod_tensor_by_rank`` puts a per-sequence tensor into rank order.

``split_lod_tensor`` / ``merge_lod_tensor`` route rows (or, with LoD, whole
sequences of LoD level ``level``) by a per-sample bool mask, for ``IfElse``.

Gradients of tensor arrays are tensor arrays accumulated in place, one entry per
index (an entry nobody wrote is zero); a write's gradient takes its entry out again
(see ``fluid_hw.frontend.backward``).
"""

from __future__ import annotations

import math

from .. import dtypes
from ..grad import define_default_grad, no_grad
from ..registry import Attr, InferContext, Slot, define_op

VarType = dtypes.VarType
ARRAY = VarType.LOD_TENSOR_ARRAY
RANK_TABLE = VarType.LOD_RANK_TABLE
_INT64 = VarType.INT64


def _check_kind(ctx: InferContext, slot: str, kind: int, output: bool = False) -> None:
    names = ctx.op.output(slot) if output else ctx.op.input(slot)
    for n in names:
        v = ctx.op.block._var_recursive(n)
        ctx.check(v.type == kind, f"{'output' if output else 'input'} {slot} {n!r} must be a "
                  f"{VarType.Type.Name(kind)} variable, is {v.type_name}")


def _check_index(ctx: InferContext, slot: str = "I") -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype == _INT64, f"index {slot} {v.name!r} must be int64, got {v.dtype_name}")
    ctx.check(math.prod(v.shape) in (1, -1),
              f"index {slot} {v.name!r} must hold one element, has shape {list(v.shape)}")


def _rows_unknown(shape: list[int]) -> list[int]:
    return [-1, *shape[1:]] if shape else [-1]


# -- tensor arrays ---------------------------------------------------------------------

@define_op("write_to_array", ["X", "I"], ["Out"],
           doc="Out[I] = X (the array grows as needed); the array_write layer.")
def _write_to_array(ctx: InferContext) -> None:
    _check_index(ctx)
    _check_kind(ctx, "Out", ARRAY, output=True)
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(x.shape)), x.dtype, lod_level=x.lod_level)


@define_op("read_from_array", ["X", "I"], ["Out"],
           doc="Out = X[I]; the array_read layer.")
def _read_from_array(ctx: InferContext) -> None:
    _check_index(ctx)
    _check_kind(ctx, "X", ARRAY)
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(x.shape)), x.dtype, lod_level=x.lod_level)


@define_op("lod_array_length", ["X"], ["Out"],
           doc="Out = the number of entries of the array X (int64 [1]); the array_length "
           "layer.")
def _array_length(ctx: InferContext) -> None:
    _check_kind(ctx, "X", ARRAY)
    ctx.set_output("Out", [1], _INT64)


# Fluid's pair: the gradient of a read adds Out@GRAD into entry I of the array's
# gradient (only the entry read gets it; reads of one entry add up); the gradient of a
# write takes entry I out of it (the entry's earlier value was overwritten).
define_default_grad("write_to_array", uses=("X", "I"), in_grads=("X",), updates=("Out",))
define_default_grad("read_from_array", uses=("I",), in_grads=("X",))


# -- rank tables ---------------------------------------------------------------------------

@define_op("lod_rank_table", ["X"], ["Out"], [Attr("level", "int", 0, min=0)],
           doc="Out = the sequences of X's LoD level `level` sorted by length, longest "
           "first (ties keep their order).")
def _lod_rank_table(ctx: InferContext) -> None:
    _check_kind(ctx, "Out", RANK_TABLE, output=True)
    x = ctx.input_var("X")
    level = ctx.attr("level")
    ctx.check(level >= 0 and (x.lod_level == 0 or level < x.lod_level),
              f"level {level} is out of range for X {x.name!r} with lod_level {x.lod_level}")


@define_op("max_sequence_len", ["RankTable"], ["Out"],
           doc="Out = the length of the longest sequence of the rank table (int64 [1]).")
def _max_sequence_len(ctx: InferContext) -> None:
    _check_kind(ctx, "RankTable", RANK_TABLE)
    ctx.set_output("Out", [1], _INT64)


@define_op("lod_tensor_to_array", ["X", "RankTable"], ["Out"],
           doc="Out[t] = the t-th element of every sequence longer than t, in rank order.")
def _lod_tensor_to_array(ctx: InferContext) -> None:
    _check_kind(ctx, "RankTable", RANK_TABLE)
    _check_kind(ctx, "Out", ARRAY, output=True)
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(x.shape)), x.dtype,
                   lod_level=max(x.lod_level - 1, 0))


@define_op("array_to_lod_tensor", ["X", "RankTable"], ["Out"],
           doc="Inverse of lod_tensor_to_array: the steps back in the original order, "
           "with the rank table's LoD.")
def _array_to_lod_tensor(ctx: InferContext) -> None:
    _check_kind(ctx, "X", ARRAY)
    _check_kind(ctx, "RankTable", RANK_TABLE)
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(x.shape)), x.dtype,
                   lod_level=max(x.lod_level + 1, 1))


@define_op("shrink_rnn_memory", ["X", "RankTable", "I"], ["Out"],
           doc="Out = the first rows (or level-0 sequences) of X: those of the sequences "
           "longer than I, the batch of step I.")
def _shrink_rnn_memory(ctx: InferContext) -> None:
    _check_index(ctx)
    _check_kind(ctx, "RankTable", RANK_TABLE)
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(x.shape)), x.dtype, lod_level=x.lod_level)


@define_op("reorder_lod_tensor_by_rank", ["X", "RankTable"], ["Out"],
           doc="Out = X's rows (or level-0 sequences when X has LoD) in rank order.")
def _reorder(ctx: InferContext) -> None:
    _check_kind(ctx, "RankTable", RANK_TABLE)
    ctx.share("X", "Out")


define_default_grad("lod_tensor_to_array", uses=("X", "RankTable"), in_grads=("X",))
define_default_grad("array_to_lod_tensor", uses=("X", "RankTable"), in_grads=("X",))
define_default_grad("shrink_rnn_memory", uses=("X",), in_grads=("X",))
define_default_grad("reorder_lod_tensor_by_rank", uses=("X", "RankTable"), in_grads=("X",))


# -- routing by a mask (IfElse) ---------------------------------------------------------

def _check_mask(ctx: InferContext) -> None:
    m = ctx.input_var("Mask")  # its dtype (bool) is checked when the op runs, as Fluid's
    ctx.check(len(m.shape) <= 2 and (len(m.shape) < 2 or m.shape[1] in (1, -1)),
              f"Mask {m.name!r} must be a vector or [N, 1], has shape {list(m.shape)}")


@define_op("split_lod_tensor", ["X", "Mask"], ["OutTrue", "OutFalse"],
           [Attr("level", "int", 0, doc="LoD level whose sequences the mask selects")],
           doc="OutTrue / OutFalse = the rows (or sequences) of X whose Mask is true / "
           "false, in order.")
def _split_lod_tensor(ctx: InferContext) -> None:
    _check_mask(ctx)
    x = ctx.input_var("X")
    for slot in ("OutTrue", "OutFalse"):
        ctx.set_output(slot, _rows_unknown(list(x.shape)), x.dtype, lod_level=x.lod_level)


@define_op("merge_lod_tensor", ["X", "Mask", Slot("InTrue", dispensable=True),
                                Slot("InFalse", dispensable=True)], ["Out"],
           [Attr("level", "int", 0)],
           doc="Out = InTrue's rows where Mask is true and InFalse's where it is false, "
           "back in the order of X (the inverse of split_lod_tensor).")
def _merge_lod_tensor(ctx: InferContext) -> None:
    _check_mask(ctx)
    ref = ctx.input_var("InTrue") if ctx.has_input("InTrue") else ctx.input_var("InFalse")
    x = ctx.input_var("X")
    ctx.set_output("Out", _rows_unknown(list(ref.shape)), ref.dtype, lod_level=x.lod_level)


define_default_grad("split_lod_tensor", uses=("X", "Mask"), in_grads=("X",))
define_default_grad("merge_lod_tensor", uses=("X", "Mask", "InTrue", "InFalse"),
                    in_grads=("InTrue", "InFalse"))


# -- arrays <-> tensors along an axis (StaticRNN) -----------------------------------------

@define_op("tensor_to_array", ["X"], ["Out"], [Attr("axis", "int", 0)],
           doc="Out[t] = X's slice t along `axis` (the axis removed): a [T, N, ...] tensor "
           "as T steps.")
def _tensor_to_array(ctx: InferContext) -> None:
    _check_kind(ctx, "Out", ARRAY, output=True)
    x = ctx.input_var("X")
    axis = ctx.attr("axis")
    ctx.check(0 <= axis < len(x.shape), f"axis {axis} out of range for X {list(x.shape)}")
    shape = list(x.shape)
    del shape[axis]
    ctx.set_output("Out", shape, x.dtype)


@define_op("tensor_array_to_tensor", ["X"], ["Out", Slot("OutIndex", intermediate=True)],
           [Attr("axis", "int", 0), Attr("use_stack", "bool", False)],
           doc="Out = the entries of X stacked (use_stack) or concatenated along `axis`; "
           "OutIndex = each entry's extent along `axis` (int32).")
def _tensor_array_to_tensor(ctx: InferContext) -> None:
    _check_kind(ctx, "X", ARRAY)
    x = ctx.input_var("X")
    axis = ctx.attr("axis")
    shape = list(x.shape)
    if ctx.attr("use_stack"):
        ctx.check(0 <= axis <= len(shape), f"axis {axis} out of range for entries {shape}")
        shape.insert(axis, -1)
    else:
        ctx.check(0 <= axis < len(shape), f"axis {axis} out of range for entries {shape}")
        shape[axis] = -1
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("OutIndex", [-1], VarType.INT32)


define_default_grad("tensor_to_array", uses=("X",), in_grads=("X",))
define_default_grad("tensor_array_to_tensor", uses=("X",), out_grads=("Out",),
                    in_grads=("X",))


# -- batch-sized constants -------------------------------------------------------------------

@define_op("fill_constant_batch_size_like", ["Input"], ["Out"],
           [Attr("shape", "ints", min=-1), Attr("dtype", "int", int(VarType.FP32)),
            Attr("value", "float", 0.0), Attr("input_dim_idx", "int", 0, min=0),
            Attr("output_dim_idx", "int", 0, min=0)],
           doc="Out = a tensor of `shape` filled with `value`, whose dim output_dim_idx is "
           "Input's dim input_dim_idx (the batch size): RNN memories' initial state.")
def _fill_batch_like(ctx: InferContext) -> None:
    shape = list(ctx.attr("shape"))
    x = ctx.input_var("Input")
    i, o = ctx.attr("input_dim_idx"), ctx.attr("output_dim_idx")
    ctx.check(0 <= i < len(x.shape) and 0 <= o < len(shape),
              f"input_dim_idx {i} / output_dim_idx {o} out of range for Input "
              f"{list(x.shape)} and shape {shape}")
    shape[o] = x.shape[i]
    ctx.set_output("Out", shape, ctx.attr("dtype"))


no_grad("integer", "lod_array_length", "lod_rank_table", "max_sequence_len")
no_grad("creation", "fill_constant_batch_size_like")
