"""Control flow: comparison and logical layers, counters, and the block-structured
control flow of Fluid — ``While``, ``IfElse``, ``Switch``, ``StaticRNN``, ``DynamicRNN``
— with the tensor-array and rank-table layers they are built from.

A program is nested blocks: each construct builds a sub-block and appends one op
(``while`` / ``conditional_block``) that runs it.  See ``fluid_hw.ir.ops.control_flow``
for the run-time semantics and ``fluid_hw.frontend.backward`` for their gradients.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...ir import dtypes, unique_name
from ...ir.program import Block, Operator, Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper
from .tensor import assign

__all__ = [
    "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "increment",
    "autoincreased_step_counter",
    "While", "ConditionalBlock", "IfElse", "Switch", "StaticRNN", "DynamicRNN",
    "create_array", "array_write", "array_read", "array_length", "tensor_to_array",
    "tensor_array_to_tensor",
    "lod_rank_table", "max_sequence_len", "lod_tensor_to_array", "array_to_lod_tensor",
    "shrink_memory", "reorder_lod_tensor_by_rank", "split_lod_tensor", "merge_lod_tensor",
    "fill_constant_batch_size_like",
]

_BOOL = dtypes.VarType.BOOL


# -- comparisons ---------------------------------------------------------------------

def _compare(op_type: str, x: Variable, y: Variable, cond: Variable | None,
             attrs: dict[str, Any] | None = None) -> Variable:
    helper = LayerHelper(op_type)
    if cond is None:
        cond = helper.create_variable_for_type_inference(_BOOL, stop_gradient=True)
    helper.append_op(op_type, {"X": x, "Y": y}, {"Out": cond}, attrs)
    return cond


def less_than(x: Variable, y: Variable, force_cpu: bool | None = None,
              cond: Variable | None = None) -> Variable:
    """``x < y`` element-wise, a bool tensor (written into ``cond`` when given)."""
    return _compare("less_than", x, y, cond,
                    {"force_cpu": force_cpu} if force_cpu is not None else None)


def less_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x <= y`` element-wise, a bool tensor."""
    return _compare("less_equal", x, y, cond)


def greater_than(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x > y`` element-wise, a bool tensor."""
    return _compare("greater_than", x, y, cond)


def greater_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x >= y`` element-wise, a bool tensor."""
    return _compare("greater_equal", x, y, cond)


def equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x == y`` element-wise, a bool tensor."""
    return _compare("equal", x, y, cond)


def not_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x != y`` element-wise, a bool tensor."""
    return _compare("not_equal", x, y, cond)


# -- logical ---------------------------------------------------------------------------

def _logical(op_type: str, inputs: dict[str, Variable], out: Variable | None,
             name: str | None) -> Variable:
    helper = LayerHelper(op_type, name=name)
    if out is None:
        out = helper.create_variable_for_type_inference(_BOOL, stop_gradient=True)
    helper.append_op(op_type, inputs, {"Out": out})
    return out


def logical_and(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x and y`` on bool tensors."""
    return _logical("logical_and", {"X": x, "Y": y}, out, name)


def logical_or(x: Variable, y: Variable, out: Variable | None = None,
               name: str | None = None) -> Variable:
    """``x or y`` on bool tensors."""
    return _logical("logical_or", {"X": x, "Y": y}, out, name)


def logical_xor(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x xor y`` on bool tensors."""
    return _logical("logical_xor", {"X": x, "Y": y}, out, name)


def logical_not(x: Variable, out: Variable | None = None, name: str | None = None) -> Variable:
    """``not x`` on a bool tensor."""
    return _logical("logical_not", {"X": x}, out, name)


# -- counters ----------------------------------------------------------------------------

def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x``; with ``in_place`` the result is ``x`` itself."""
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("increment", {"X": x}, {"Out": out}, {"step": float(value)})
    return out


def autoincreased_step_counter(counter_name: str | None = None, begin: int = 1,
                               step: int = 1) -> Variable:
    """A persistable int64 [1] counter that is ``begin`` on the first run of the main
    program and grows by ``step`` each run (Fluid's global step counter).

    The counter is filled with ``begin - step`` in the startup program and an
    ``increment`` op is put at the very front of the main program.  Asking twice for
    the same ``counter_name`` returns the same variable.
    """
    return step_counter(counter_name or "@STEP_COUNTER@", begin, step)


def step_counter(name: str, begin: int, step: int, op_role: str | None = None,
                 dtype: Any = "int64") -> Variable:
    """:func:`autoincreased_step_counter` with the increment op's role and the dtype."""
    helper = LayerHelper("global_step_counter")
    gb = helper.main_program.global_block()
    if gb.has_var(name):
        return gb.var(name)
    counter = gb.create_var(name=name, shape=[1], dtype=dtype, persistable=True,
                            stop_gradient=True)
    sb = helper.startup_program.global_block()
    if not sb.has_var(name):
        sv = sb.create_var(name=name, shape=[1], dtype=dtype, persistable=True)
        Constant(float(begin - step))(sv, sb)
    attrs: dict[str, Any] = {"step": float(step)}
    if op_role:
        attrs["op_role"] = op_role
    gb._prepend_op("increment", {"X": counter}, {"Out": counter}, attrs)
    return counter


# -- building ops that all carry one op_role ----------------------------------------------

class RoleOps:
    """Appends ops carrying one ``op_role`` attribute to a block, with temporaries
    named after ``prefix``.  The optimizers, regularizers, gradient clips and
    learning-rate schedules build their ops through it.
    """

    def __init__(self, block: Block, role: str, prefix: str) -> None:
        self.block = block
        self.role = role
        self.prefix = prefix

    def op(self, type: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
           attrs: Mapping[str, Any] | None = None) -> Operator:
        return self.block.append_op(type, inputs, outputs, {**(attrs or {}),
                                                            "op_role": self.role})

    def tmp(self, dtype: Any = "float32", name: str | None = None) -> Variable:
        return self.block.create_var(name=name or unique_name.generate(f"{self.prefix}.tmp"),
                                     dtype=dtype, stop_gradient=True)

    def unary(self, type: str, x: Variable, **attrs: Any) -> Variable:
        out = self.tmp(x.dtype)
        self.op(type, {"X": x}, {"Out": out}, attrs)
        return out

    def binary(self, type: str, x: Variable, y: Variable, axis: int = -1) -> Variable:
        """``elementwise_<type>`` or a comparison (bool Out)."""
        full = type if type in _COMPARE_TYPES else f"elementwise_{type}"
        out = self.tmp(_BOOL if full in _COMPARE_TYPES else x.dtype)
        self.op(full, {"X": x, "Y": y}, {"Out": out}, {"axis": axis})
        return out

    def scale(self, x: Variable, scale: float = 1.0, bias: float = 0.0) -> Variable:
        return self.unary("scale", x, scale=float(scale), bias=float(bias))

    def const(self, value: float, dtype: Any = "float32",
              shape: Sequence[int] = (1,)) -> Variable:
        out = self.tmp(dtype)
        self.op("fill_constant", {}, {"Out": out},
                {"shape": list(shape), "dtype": dtypes.to_enum(dtype), "value": float(value)})
        return out

    def cast(self, x: Variable, dtype: Any) -> Variable:
        out = self.tmp(dtype)
        self.op("cast", {"X": x}, {"Out": out},
                {"in_dtype": x.dtype, "out_dtype": dtypes.to_enum(dtype)})
        return out

    def sum(self, xs: Sequence[Variable], out: Variable | None = None) -> Variable:
        out = out if out is not None else self.tmp(xs[0].dtype)
        self.op("sum", {"X": list(xs)}, {"Out": out})
        return out


_COMPARE_TYPES = frozenset({"less_than", "less_equal", "greater_than", "greater_equal",
                            "equal", "not_equal"})


# =========================================================================================
# Block-structured control flow: While, ConditionalBlock, IfElse, Switch, StaticRNN,
# DynamicRNN, and the tensor-array / rank-table layers they are built from.
# =========================================================================================

_ARRAY = dtypes.VarType.LOD_TENSOR_ARRAY
_RANK_TABLE = dtypes.VarType.LOD_RANK_TABLE
_STEP_SCOPES = dtypes.VarType.STEP_SCOPES
_INT64 = dtypes.VarType.INT64


def _check_var(x: Any, layer: str, what: str = "input") -> Variable:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: {what} must be a Variable, got {type(x).__name__}")
    return x


def _new_var(block: Block, prefix: str, dtype: Any = "float32",
             type: int = dtypes.VarType.LOD_TENSOR, stop_gradient: bool = False) -> Variable:
    return block.create_var(name=unique_name.generate(prefix), dtype=dtype, type=type,
                            stop_gradient=stop_gradient)


def _block_io(block: Block) -> tuple[list[Variable], list[Variable]]:
    """The variables of enclosing blocks that ``block`` reads and writes, in order of
    first use.  Nested control-flow ops list their own outer variables, so the
    top-level ops of ``block`` say everything."""
    parent = block.parent_block
    assert parent is not None
    reads: dict[str, Variable] = {}
    writes: dict[str, Variable] = {}
    for op in block.ops:
        for names, into in ((op.input_arg_names, reads), (op.output_arg_names, writes)):
            for n in names:
                if n in into or block.has_var(n):
                    continue
                v = parent._find_var_recursive(n)
                if v is not None:
                    into[n] = v
    return list(reads.values()), list(writes.values())


# -- tensor arrays --------------------------------------------------------------------------

def create_array(dtype: Any) -> Variable:
    """An empty LOD_TENSOR_ARRAY variable (a list of tensors) in the current block."""
    helper = LayerHelper("array")
    return helper.block.create_var(name=unique_name.generate("array"), type=_ARRAY,
                                   dtype=dtypes.to_enum(dtype))


def _index_var(i: Variable, layer: str) -> Variable:
    _check_var(i, layer, "index i")
    if i.dtype != _INT64:
        raise TypeError(f"{layer}: index {i.name!r} must be int64, got {i.dtype_name}")
    return i


def array_write(x: Variable, i: Variable, array: Variable | None = None) -> Variable:
    """``array[i] = x`` (the array grows as needed); a new array when none is given."""
    helper = LayerHelper("array_write")
    _check_var(x, "array_write", "x")
    _index_var(i, "array_write")
    if array is None:
        array = create_array(x.dtype)
    if array.type != _ARRAY:
        raise TypeError(f"array_write: {array.name!r} is not a tensor array "
                        f"({array.type_name}); make one with create_array")
    helper.append_op("write_to_array", {"X": x, "I": i}, {"Out": array})
    return array


def array_read(array: Variable, i: Variable) -> Variable:
    """``array[i]``."""
    helper = LayerHelper("array_read")
    _check_var(array, "array_read", "array")
    if array.type != _ARRAY:
        raise TypeError(f"array_read: {array.name!r} is not a tensor array ({array.type_name})")
    _index_var(i, "array_read")
    out = helper.create_variable_for_type_inference(array.dtype)
    helper.append_op("read_from_array", {"X": array, "I": i}, {"Out": out})
    return out


def array_length(array: Variable) -> Variable:
    """The number of entries of ``array`` (int64 [1])."""
    helper = LayerHelper("array_length")
    out = helper.create_variable_for_type_inference(_INT64, stop_gradient=True)
    helper.append_op("lod_array_length", {"X": array}, {"Out": out})
    return out


def tensor_to_array(x: Variable, axis: int = 0) -> Variable:
    """An array of ``x``'s slices along ``axis`` (a ``[T, N, ...]`` tensor as T steps)."""
    helper = LayerHelper("tensor_to_array")
    array = helper.block.create_var(name=unique_name.generate("tensor_to_array"),
                                    type=_ARRAY, dtype=x.dtype)
    helper.append_op("tensor_to_array", {"X": x}, {"Out": array}, {"axis": int(axis)})
    return array


def tensor_array_to_tensor(input: Variable, axis: int = 1, use_stack: bool = False,
                           name: str | None = None) -> tuple[Variable, Variable]:
    """The entries of ``input`` concatenated (or stacked) along ``axis``, and each
    entry's extent along it."""
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("tensor_array_to_tensor", {"X": input}, {"Out": out, "OutIndex": index},
                     {"axis": int(axis), "use_stack": bool(use_stack)})
    return out, index


# -- rank tables and LoD routing ---------------------------------------------------------------

def lod_rank_table(x: Variable, level: int = 0) -> Variable:
    """The sequences of ``x``'s LoD level ``level`` sorted by length, longest first."""
    helper = LayerHelper("lod_rank_table")
    table = helper.block.create_var(name=unique_name.generate("lod_rank_table"),
                                    type=_RANK_TABLE, stop_gradient=True)
    helper.append_op("lod_rank_table", {"X": x}, {"Out": table}, {"level": int(level)})
    return table


def max_sequence_len(rank_table: Variable) -> Variable:
    """The length of the longest sequence of a rank table (int64 [1])."""
    helper = LayerHelper("max_seqence_len")
    out = helper.create_variable_for_type_inference(_INT64, stop_gradient=True)
    helper.append_op("max_sequence_len", {"RankTable": rank_table}, {"Out": out})
    return out


def lod_tensor_to_array(x: Variable, table: Variable) -> Variable:
    """Time-major steps of the batch ``x``: entry t holds the t-th element of every
    sequence longer than t, in rank order."""
    helper = LayerHelper("lod_tensor_to_array")
    array = helper.block.create_var(name=unique_name.generate("lod_tensor_to_array"),
                                    type=_ARRAY, dtype=x.dtype)
    helper.append_op("lod_tensor_to_array", {"X": x, "RankTable": table}, {"Out": array})
    return array


def array_to_lod_tensor(x: Variable, table: Variable) -> Variable:
    """Inverse of :func:`lod_tensor_to_array`."""
    helper = LayerHelper("array_to_lod_tensor")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("array_to_lod_tensor", {"X": x, "RankTable": table}, {"Out": out})
    return out


def shrink_memory(x: Variable, i: Variable, table: Variable) -> Variable:
    """The rows of ``x`` for the sequences still active at step ``i``."""
    helper = LayerHelper("shrink_memory")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("shrink_rnn_memory", {"X": x, "RankTable": table, "I": i}, {"Out": out})
    return out


def reorder_lod_tensor_by_rank(x: Variable, rank_table: Variable) -> Variable:
    """``x``'s rows (or level-0 sequences) in the rank table's order."""
    helper = LayerHelper("reorder_lod_tensor_by_rank")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("reorder_lod_tensor_by_rank", {"X": x, "RankTable": rank_table},
                     {"Out": out})
    return out


def split_lod_tensor(input: Variable, mask: Variable,
                     level: int = 0) -> tuple[Variable, Variable]:
    """(rows where ``mask`` is true, rows where it is false)."""
    helper = LayerHelper("split_lod_tensor")
    t = helper.create_variable_for_type_inference(input.dtype)
    f = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("split_lod_tensor", {"X": input, "Mask": mask},
                     {"OutTrue": t, "OutFalse": f}, {"level": int(level)})
    return t, f


def merge_lod_tensor(in_true: Variable, in_false: Variable, x: Variable, mask: Variable,
                     level: int = 0) -> Variable:
    """Inverse of :func:`split_lod_tensor`: rows back in the order of ``x``."""
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(in_true.dtype)
    helper.append_op("merge_lod_tensor",
                     {"X": x, "Mask": mask, "InTrue": in_true, "InFalse": in_false},
                     {"Out": out}, {"level": int(level)})
    return out


def fill_constant_batch_size_like(input: Variable, shape: Sequence[int], dtype: Any,
                                  value: float, input_dim_idx: int = 0,
                                  output_dim_idx: int = 0) -> Variable:
    """A ``shape`` tensor of ``value`` whose dim ``output_dim_idx`` is ``input``'s dim
    ``input_dim_idx`` (the batch size)."""
    helper = LayerHelper("fill_constant_batch_size_like")
    out = helper.create_variable_for_type_inference(dtypes.to_enum(dtype), stop_gradient=True)
    helper.append_op("fill_constant_batch_size_like", {"Input": input}, {"Out": out},
                     {"shape": [int(d) for d in shape], "dtype": out.dtype,
                      "value": float(value), "input_dim_idx": int(input_dim_idx),
                      "output_dim_idx": int(output_dim_idx)})
    return out


# -- While ------------------------------------------------------------------------------------

class While:
    """``while cond: block`` — ``cond`` is a one-element bool the block must update::

        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 10)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            ...
            layers.increment(i)
            layers.less_than(i, n, cond=cond)

    Each step runs in a fresh scope; variables of enclosing blocks are read and
    written in place.  Values needed by the gradient across steps go through tensor
    arrays (``array_write`` / ``array_read``), as DynamicRNN does.
    """

    def __init__(self, cond: Variable, is_test: bool = False, name: str | None = None) -> None:
        _check_var(cond, "While", "cond")
        if cond.dtype != _BOOL:
            raise TypeError(f"While: cond {cond.name!r} must be bool, got {cond.dtype_name}")
        if any(d not in (1, -1) for d in cond.shape):
            raise TypeError(f"While: cond {cond.name!r} must hold one value, has shape "
                            f"{list(cond.shape)}")
        self.cond_var = cond
        self.is_test = is_test
        self.helper = LayerHelper("while", name=name)

    @contextlib.contextmanager
    def block(self) -> Iterator[Block]:
        program = self.helper.main_program
        parent = program.current_block()
        with program._block_guard() as blk:
            yield blk
        reads, writes = _block_io(blk)
        scopes = _new_var(parent, "while_step_scopes", type=_STEP_SCOPES, stop_gradient=True)
        parent.append_op("while", {"X": reads, "Condition": [self.cond_var]},
                         {"Out": writes, "StepScopes": [scopes]},
                         {"sub_block": blk.idx, "is_test": self.is_test})


# -- conditional blocks -------------------------------------------------------------------------

class ConditionalBlock:
    """A block that runs once when its condition holds: with ``is_scalar_condition``
    when the one-element bool ``inputs[0]`` is true, otherwise when every tensor in
    ``inputs`` has rows."""

    def __init__(self, inputs: Sequence[Variable], is_scalar_condition: bool = False,
                 name: str | None = None) -> None:
        self.inputs = [_check_var(v, "ConditionalBlock") for v in inputs]
        if is_scalar_condition and (len(self.inputs) != 1 or self.inputs[0].dtype != _BOOL):
            raise TypeError("ConditionalBlock: a scalar condition is one bool variable")
        self.is_scalar_condition = is_scalar_condition
        self.helper = LayerHelper("conditional_block", name=name)

    @contextlib.contextmanager
    def block(self) -> Iterator[Block]:
        program = self.helper.main_program
        parent = program.current_block()
        with program._block_guard() as blk:
            yield blk
        reads, writes = _block_io(blk)
        scope = _new_var(parent, "conditional_block_scope", type=_STEP_SCOPES,
                         stop_gradient=True)
        parent.append_op("conditional_block", {"Cond": self.inputs, "Input": reads},
                         {"Out": writes, "Scope": [scope]},
                         {"sub_block": blk.idx,
                          "is_scalar_condition": self.is_scalar_condition})


class Switch:
    """``if / elif / else`` on one-element bool conditions::

        with layers.Switch() as switch:
            with switch.case(step < warmup):
                layers.assign(lr_a, lr)
            with switch.default():
                layers.assign(lr_b, lr)
    """

    def __init__(self, name: str | None = None) -> None:
        self.helper = LayerHelper("switch", name=name)
        self.inside = False
        self.pre_not_conditions: list[Variable] = []

    def __enter__(self) -> Switch:
        self.inside = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inside = False

    def _check(self, what: str) -> None:
        if not self.inside:
            raise ValueError(f"Switch.{what}() must be used inside 'with Switch() as s:'")

    @contextlib.contextmanager
    def case(self, condition: Variable) -> Iterator[Block]:
        self._check("case")
        _check_var(condition, "Switch.case", "condition")
        if not self.pre_not_conditions:
            cond = condition
            self.pre_not_conditions.append(logical_not(condition))
        else:
            prev = self.pre_not_conditions[-1]
            cond = logical_and(prev, condition)
            self.pre_not_conditions.append(logical_and(prev, logical_not(condition)))
        with ConditionalBlock([cond], is_scalar_condition=True).block() as blk:
            yield blk

    @contextlib.contextmanager
    def default(self) -> Iterator[Block]:
        self._check("default")
        if not self.pre_not_conditions:
            raise ValueError("Switch.default() needs at least one case() before it")
        with ConditionalBlock([self.pre_not_conditions[-1]],
                              is_scalar_condition=True).block() as blk:
            yield blk


class IfElse:
    """Per-sample branching: ``cond`` is a bool [N, 1] (or [N]) mask over the rows (or,
    for LoD inputs, the level-0 sequences) of the batch::

        ie = layers.IfElse(cond)
        with ie.true_block():
            x = ie.input(data)
            ie.output(layers.scale(x, 2.0))
        with ie.false_block():
            x = ie.input(data)
            ie.output(layers.scale(x, -1.0))
        out, = ie()

    Each branch runs once per mini-batch on just its rows (and not at all when it has
    none); ``ie()`` merges the branch outputs back in the original order.
    """

    OUT, IN_TRUE, IN_FALSE = 0, 1, 2

    def __init__(self, cond: Variable, name: str | None = None) -> None:
        _check_var(cond, "IfElse", "cond")
        if cond.dtype != _BOOL:
            raise TypeError(f"IfElse: cond {cond.name!r} must be bool, got {cond.dtype_name}")
        self.cond = cond
        self.helper = LayerHelper("ifelse", name=name)
        self.status = IfElse.OUT
        self.input_table: dict[str, tuple[Variable, Variable]] = {}
        self.ref: Variable | None = None  # the first input: whose LoD the merge restores
        self.output_table: tuple[list[Variable], list[Variable]] = ([], [])  # (false, true)
        self._branch_inputs: list[Variable] = []

    def _parent(self) -> Block:
        blk = self.helper.main_program.current_block().parent_block
        assert blk is not None
        return blk

    def input(self, x: Variable) -> Variable:
        """The rows of ``x`` that belong to the current branch."""
        if self.status == IfElse.OUT:
            raise ValueError("IfElse.input() must be called inside true_block() or "
                             "false_block()")
        _check_var(x, "IfElse.input", "x")
        if x.name not in self.input_table:
            parent = self._parent()
            t = _new_var(parent, f"{self.helper.name}.input_true", x.dtype)
            f = _new_var(parent, f"{self.helper.name}.input_false", x.dtype)
            parent.append_op("split_lod_tensor", {"X": x, "Mask": self.cond},
                             {"OutTrue": t, "OutFalse": f}, {"level": 0})
            self.input_table[x.name] = (t, f)
            if self.ref is None:
                self.ref = x
        t, f = self.input_table[x.name]
        part = t if self.status == IfElse.IN_TRUE else f
        self._branch_inputs.append(part)
        return part

    def output(self, *outs: Variable) -> None:
        """The branch's results (the same number, in the same order, in both branches)."""
        if self.status == IfElse.OUT:
            raise ValueError("IfElse.output() must be called inside true_block() or "
                             "false_block()")
        table = self.output_table[1 if self.status == IfElse.IN_TRUE else 0]
        parent = self._parent()
        for o in outs:
            _check_var(o, "IfElse.output", "each output")
            outside = _new_var(parent, f"{self.helper.name}.output", o.dtype)
            assign(o, outside)
            table.append(outside)

    @contextlib.contextmanager
    def _branch(self, status: int) -> Iterator[Block]:
        if self.status != IfElse.OUT:
            raise ValueError("IfElse branches cannot be nested in each other")
        if self.output_table[1 if status == IfElse.IN_TRUE else 0]:
            raise ValueError(f"IfElse: the {'true' if status == IfElse.IN_TRUE else 'false'} "
                             "block was already built")
        program = self.helper.main_program
        parent = program.current_block()
        self._branch_inputs = []
        self.status = status
        try:
            with program._block_guard() as blk:
                yield blk
        finally:
            self.status = IfElse.OUT
        reads, writes = _block_io(blk)
        conds = list(dict.fromkeys(self._branch_inputs, None)) or [self.cond]
        scope = _new_var(parent, "conditional_block_scope", type=_STEP_SCOPES,
                         stop_gradient=True)
        parent.append_op("conditional_block", {"Cond": conds, "Input": reads},
                         {"Out": writes, "Scope": [scope]},
                         {"sub_block": blk.idx, "is_scalar_condition": False})

    def true_block(self) -> contextlib.AbstractContextManager[Block]:
        return self._branch(IfElse.IN_TRUE)

    def false_block(self) -> contextlib.AbstractContextManager[Block]:
        return self._branch(IfElse.IN_FALSE)

    def __call__(self) -> list[Variable]:
        if self.status != IfElse.OUT:
            raise ValueError("IfElse() must be called after both blocks")
        false_outs, true_outs = self.output_table
        if not false_outs and not true_outs:
            raise ValueError("IfElse(): build true_block() and/or false_block() first")
        if false_outs and true_outs and len(false_outs) != len(true_outs):
            raise ValueError(f"IfElse(): the true block has {len(true_outs)} outputs, the "
                             f"false block {len(false_outs)}; they must match")
        if not false_outs or not true_outs:
            return list(true_outs or false_outs)
        ref = self.ref if self.ref is not None else self.cond
        return [merge_lod_tensor(t, f, ref, self.cond) for t, f in zip(true_outs, false_outs)]


# -- recurrent networks --------------------------------------------------------------------------

class _RNNBase:
    """What StaticRNN and DynamicRNN share: a While over time steps whose per-step
    values (inputs, memories, outputs) live in tensor arrays indexed by the step."""

    def __init__(self, layer: str, name: str | None) -> None:
        self.helper = LayerHelper(layer, name=name)
        self.layer = layer
        self.in_rnn = False
        self.done = False
        self.step_idx: Variable | None = None
        self.zero_idx: Variable | None = None
        self.seq_len: Variable | None = None  # number of steps (int64 [1])
        self.cond: Variable | None = None
        self.parent: Block | None = None
        self.mem_dict: dict[str, Variable] = {}  # memory var -> its array
        self.mem_link: list[tuple[Variable, Variable]] = []  # (new value, array)
        self.output_arrays: list[Variable] = []
        self.outputs: list[Variable] = []

    def _assert_in(self, what: str) -> Block:
        if not self.in_rnn:
            raise ValueError(f"{self.layer}.{what}() must be called inside the RNN's block")
        assert self.parent is not None
        return self.parent

    def _parent_op(self, type: str, inputs: dict[str, Any], outputs: dict[str, Any],
                   attrs: dict[str, Any] | None = None) -> None:
        assert self.parent is not None
        self.parent.append_op(type, inputs, outputs, attrs)

    def _zero(self) -> Variable:
        if self.zero_idx is None:
            assert self.parent is not None
            self.zero_idx = _new_var(self.parent, f"{self.helper.name}.zero_idx", _INT64,
                                     stop_gradient=True)
            self._parent_op("fill_constant", {}, {"Out": self.zero_idx},
                            {"shape": [1], "dtype": _INT64, "value": 0.0})
        return self.zero_idx

    def _set_length(self, seq_len: Variable) -> None:
        """The loop runs while step_idx < seq_len; the first condition is set outside."""
        assert self.cond is not None and self.step_idx is not None
        self.seq_len = seq_len
        self._parent_op("less_than", {"X": self.step_idx, "Y": seq_len}, {"Out": self.cond})

    @contextlib.contextmanager
    def _loop(self) -> Iterator[Block]:
        if self.done or self.in_rnn:
            raise ValueError(f"{self.layer}: the block can be built only once")
        program = self.helper.main_program
        self.parent = program.current_block()
        self.step_idx = _new_var(self.parent, f"{self.helper.name}.step_idx", _INT64,
                                 stop_gradient=True)
        self._parent_op("fill_constant", {}, {"Out": self.step_idx},
                        {"shape": [1], "dtype": _INT64, "value": 0.0})
        self.cond = _new_var(self.parent, f"{self.helper.name}.cond", _BOOL,
                             stop_gradient=True)
        self.in_rnn = True
        loop = While(self.cond, name=f"{self.helper.name}.while")
        try:
            with loop.block() as blk:
                yield blk
                if self.seq_len is None:
                    raise ValueError(f"{self.layer}: call step_input() inside the block")
                increment(self.step_idx, 1.0, in_place=True)
                for new, array in self.mem_link:
                    array_write(new, self.step_idx, array)
                less_than(self.step_idx, self.seq_len, cond=self.cond)
        finally:
            self.in_rnn = False
        self.done = True

    def _memory_from(self, init: Variable) -> Variable:
        """A memory whose step-0 value is ``init``: read at each step from an array that
        update_memory() writes at the next index."""
        parent = self._assert_in("memory")
        array = _new_var(parent, f"{self.helper.name}.mem_array", init.dtype, type=_ARRAY)
        self._parent_op("write_to_array", {"X": init, "I": self._zero()}, {"Out": array})
        assert self.step_idx is not None
        mem = array_read(array, self.step_idx)
        self.mem_dict[mem.name] = array
        return mem

    def update_memory(self, ex_mem: Variable, new_mem: Variable) -> None:
        """The memory ``ex_mem`` takes the value ``new_mem`` at the next step."""
        self._assert_in("update_memory")
        array = self.mem_dict.get(ex_mem.name)
        if array is None:
            raise ValueError(f"{self.layer}.update_memory: {ex_mem.name!r} is not a memory of "
                             "this RNN; create it with memory()")
        self.mem_link.append((new_mem, array))

    def output(self, *outputs: Variable) -> None:
        """Collect these per-step values as outputs of the RNN."""
        parent = self._assert_in("output")
        assert self.step_idx is not None
        for o in outputs:
            _check_var(o, f"{self.layer}.output", "each output")
            array = _new_var(parent, f"{self.helper.name}.output_array", o.dtype, type=_ARRAY)
            array_write(o, self.step_idx, array)
            self.output_arrays.append(array)

    def __call__(self) -> Variable | list[Variable]:
        if not self.done:
            raise ValueError(f"the outputs of a {self.layer} exist after its block")
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)


class StaticRNN(_RNNBase):
    """An RNN over equal-length sequences laid out time-major, ``[T, batch, ...]``::

        rnn = layers.StaticRNN()
        with rnn.step():
            word = rnn.step_input(x)            # [batch, ...] at each step
            prev = rnn.memory(shape=[-1, 32], batch_ref=word)
            hidden = layers.fc([word, prev], size=32, act="relu")
            rnn.update_memory(prev, hidden)
            rnn.step_output(hidden)
        out = rnn()                             # [T, batch, 32]
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__("StaticRNN", name)
        self.outer_of: dict[str, Variable] = {}  # step input -> the [T, ...] tensor

    def step(self) -> contextlib.AbstractContextManager[Block]:
        return self._steps()

    @contextlib.contextmanager
    def _steps(self) -> Iterator[Block]:
        with self._loop() as blk:
            yield blk
        for array in self.output_arrays:
            self.outputs.append(tensor_array_to_tensor(array, axis=0, use_stack=True)[0])

    def step_input(self, x: Variable) -> Variable:
        """The step-t slice ``x[t]`` of a time-major ``x``."""
        parent = self._assert_in("step_input")
        _check_var(x, "StaticRNN.step_input", "x")
        array = _new_var(parent, f"{self.helper.name}.input_array", x.dtype, type=_ARRAY)
        self._parent_op("tensor_to_array", {"X": x}, {"Out": array}, {"axis": 0})
        if self.seq_len is None:
            n = _new_var(parent, f"{self.helper.name}.seq_len", _INT64, stop_gradient=True)
            self._parent_op("lod_array_length", {"X": array}, {"Out": n})
            self._set_length(n)
        assert self.step_idx is not None
        word = array_read(array, self.step_idx)
        self.outer_of[word.name] = x
        return word

    def memory(self, init: Variable | None = None, shape: Sequence[int] | None = None,
               batch_ref: Variable | None = None, init_value: float = 0.0,
               init_batch_dim_idx: int = 0, ref_batch_dim_idx: int = 1) -> Variable:
        """A memory starting at ``init``, or at ``init_value`` with ``shape`` whose batch
        dim is taken from ``batch_ref`` (a step input: its time-major tensor's dim
        ``ref_batch_dim_idx``)."""
        parent = self._assert_in("memory")
        if init is None:
            if shape is None or batch_ref is None:
                raise ValueError("StaticRNN.memory: give init, or shape and batch_ref")
            ref = self.outer_of.get(batch_ref.name, batch_ref)
            if ref is batch_ref and not parent._find_var_recursive(ref.name):
                raise ValueError(f"StaticRNN.memory: batch_ref {ref.name!r} must be a step "
                                 "input or a variable defined outside the RNN")
            init = _new_var(parent, f"{self.helper.name}.mem_init", batch_ref.dtype,
                            stop_gradient=True)
            self._parent_op("fill_constant_batch_size_like", {"Input": ref}, {"Out": init},
                            {"shape": [int(d) for d in shape], "dtype": init.dtype,
                             "value": float(init_value), "input_dim_idx": ref_batch_dim_idx,
                             "output_dim_idx": init_batch_dim_idx})
        return self._memory_from(_check_var(init, "StaticRNN.memory", "init"))

    def step_output(self, o: Variable) -> None:
        """Collect ``o`` at every step; ``rnn()`` stacks them time-major."""
        self.output(o)


class DynamicRNN(_RNNBase):
    """An RNN over a batch of variable-length sequences (a LoD tensor), **without
    padding**: the sequences are sorted by length and at step t only those longer
    than t are computed, so the batch shrinks as sequences end::

        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(emb)                 # [active, D] at each step
            prev = drnn.memory(shape=[64], value=0.0)
            hidden = layers.fc([word, prev], size=64, act="tanh")
            drnn.update_memory(prev, hidden)
            drnn.output(hidden)
        out = drnn()                                    # [total tokens, 64], emb's LoD

    Outputs come back in the original order with the input's LoD.  Parameters
    created in the block live in the global block, as everywhere.
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__("DynamicRNN", name)
        self.lod_rank_table: Variable | None = None
        self.max_seq_len: Variable | None = None
        self.input_arrays: list[Variable] = []

    def block(self) -> contextlib.AbstractContextManager[Block]:
        return self._rnn_block()

    @contextlib.contextmanager
    def _rnn_block(self) -> Iterator[Block]:
        with self._loop() as blk:
            yield blk
        assert self.lod_rank_table is not None
        for array in self.output_arrays:
            self.outputs.append(array_to_lod_tensor(array, self.lod_rank_table))

    def step_input(self, x: Variable, level: int = 0) -> Variable:
        """The step-t element of each active sequence of ``x`` (rank order)."""
        parent = self._assert_in("step_input")
        _check_var(x, "DynamicRNN.step_input", "x")
        if self.lod_rank_table is None:
            self.lod_rank_table = _new_var(parent, f"{self.helper.name}.lod_rank_table",
                                           type=_RANK_TABLE, stop_gradient=True)
            self._parent_op("lod_rank_table", {"X": x}, {"Out": self.lod_rank_table},
                            {"level": int(level)})
            self.max_seq_len = _new_var(parent, f"{self.helper.name}.max_seq_len", _INT64,
                                        stop_gradient=True)
            self._parent_op("max_sequence_len", {"RankTable": self.lod_rank_table},
                            {"Out": self.max_seq_len})
            self._set_length(self.max_seq_len)
        array = _new_var(parent, f"{self.helper.name}.input_array", x.dtype, type=_ARRAY)
        self._parent_op("lod_tensor_to_array", {"X": x, "RankTable": self.lod_rank_table},
                        {"Out": array})
        self.input_arrays.append(array)
        assert self.step_idx is not None
        return array_read(array, self.step_idx)

    def static_input(self, x: Variable) -> Variable:
        """A per-sequence value (one row, or one level-0 sequence, per sequence of the
        step input) seen at every step: reordered by rank and shrunk with the batch."""
        parent = self._assert_in("static_input")
        if self.lod_rank_table is None:
            raise ValueError("DynamicRNN.static_input() must come after step_input()")
        reordered = _new_var(parent, f"{self.helper.name}.static_input", x.dtype)
        self._parent_op("reorder_lod_tensor_by_rank",
                        {"X": x, "RankTable": self.lod_rank_table}, {"Out": reordered})
        assert self.step_idx is not None
        return shrink_memory(reordered, self.step_idx, self.lod_rank_table)

    def memory(self, init: Variable | None = None, shape: Sequence[int] | None = None,
               value: float = 0.0, need_reorder: bool = False,
               dtype: Any = "float32") -> Variable:
        """A memory: ``init`` (one row per sequence; ``need_reorder`` when it is in the
        input's order rather than rank order), or ``value`` with ``shape`` (without
        the batch dim).  At each step it holds the active sequences' rows."""
        parent = self._assert_in("memory")
        if self.lod_rank_table is None:
            raise ValueError("DynamicRNN.memory() must come after step_input()")
        assert self.step_idx is not None
        if init is None:
            if not shape:
                raise ValueError("DynamicRNN.memory: give init, or shape")
            first = _new_var(parent, f"{self.helper.name}.in0", self.input_arrays[0].dtype)
            self._parent_op("read_from_array", {"X": self.input_arrays[0], "I": self._zero()},
                            {"Out": first})
            init = _new_var(parent, f"{self.helper.name}.mem_init", dtype, stop_gradient=True)
            self._parent_op("fill_constant_batch_size_like", {"Input": first}, {"Out": init},
                            {"shape": [-1, *[int(d) for d in shape]], "dtype": init.dtype,
                             "value": float(value)})
        else:
            _check_var(init, "DynamicRNN.memory", "init")
            if need_reorder:
                reordered = _new_var(parent, f"{self.helper.name}.mem_init_reordered",
                                     init.dtype)
                self._parent_op("reorder_lod_tensor_by_rank",
                                {"X": init, "RankTable": self.lod_rank_table},
                                {"Out": reordered})
                init = reordered
        mem = self._memory_from(init)
        shrunk = shrink_memory(mem, self.step_idx, self.lod_rank_table)
        self.mem_dict[shrunk.name] = self.mem_dict.pop(mem.name)
        return shrunk
