"""The op registry: every op type is an :class:`OpDef`, a piece of data.

An OpDef declares its input/output slots, its attribute schema, shape and dtype
inference and an optional extra verifier.  Back ends register kernels against
the same op type in their own registries; nothing dispatches on ``op.type``
with if/else chains.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import OpAttrError, ShapeError, UnknownOpError, unknown_name
from ..registries import register_once
from . import attrs as _attrs
from . import dtypes

if TYPE_CHECKING:
    from .program import Operator, Variable

REQUIRED: Any = object()  # marker: attribute has no default


@dataclass(frozen=True)
class Slot:
    """An input or output slot of an op (``X``, ``Out``...)."""

    name: str
    duplicable: bool = False  # takes a list of variables
    dispensable: bool = False  # may be absent
    intermediate: bool = False  # e.g. XShape: produced for the backward pass only
    doc: str = ""


@dataclass(frozen=True)
class Attr:
    """An attribute in an op's schema."""

    name: str
    kind: str  # one of attrs.KINDS
    default: Any = REQUIRED
    allowed: tuple[Any, ...] | None = None
    doc: str = ""
    #: inclusive bounds on a numeric value (on each element of a list kind); None: open
    min: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in _attrs.KINDS:
            raise ValueError(f"attr {self.name}: unknown kind {self.kind!r}")
        if (self.min is not None or self.max is not None) and self.kind not in _NUMERIC:
            raise ValueError(f"attr {self.name}: a range needs a numeric kind, not {self.kind!r}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def range_text(self) -> str:
        """The declared range, as a message says it (``>= 1``, ``in [0, 1]``)."""
        if self.min is not None and self.max is not None:
            return f"in [{self.min:g}, {self.max:g}]"
        return f">= {self.min:g}" if self.min is not None else f"<= {self.max:g}"

    def range_error(self, value: Any) -> str | None:
        """Why ``value`` is out of the declared range (None when it is within it or
        there is none).  A list kind's elements are checked one by one."""
        if self.min is None and self.max is None:
            return None
        items = value if isinstance(value, (list, tuple)) else [value]
        for v in items:
            try:
                bad = (self.min is not None and not v >= self.min) or \
                    (self.max is not None and not v <= self.max)
            except TypeError:
                return None  # not a number: the kind check reports it
            if bad:
                each = "each element of " if isinstance(value, (list, tuple)) else ""
                return (f"attribute {self.name!r} = {value!r} is out of range: "
                        f"{each}{self.name} must be {self.range_text()}")
        return None


_NUMERIC = frozenset({"int", "long", "float", "float64", "ints", "longs", "floats"})


InferFn = Callable[["InferContext"], None]
VerifyFn = Callable[["Operator"], None]


@dataclass
class OpDef:
    """Definition of one op type."""

    type: str
    inputs: Sequence[Slot] = ()
    outputs: Sequence[Slot] = ()
    attrs: Sequence[Attr] = ()
    infer: InferFn | None = None
    verify: VerifyFn | None = None
    doc: str = ""
    #: gradient maker (added by the training issue); None: op has no gradient
    grad: Any = None
    #: what kind of op it is, for passes and back ends that treat ops by category
    #: instead of by name (:data:`CATEGORIES`)
    categories: frozenset[str] = frozenset()
    _attr_map: dict[str, Attr] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.inputs = tuple(self.inputs)
        self.outputs = tuple(self.outputs)
        self.attrs = tuple(self.attrs)
        self._attr_map = {a.name: a for a in self.attrs}

    def input_slot(self, name: str) -> Slot | None:
        return next((s for s in self.inputs if s.name == name), None)

    def output_slot(self, name: str) -> Slot | None:
        return next((s for s in self.outputs if s.name == name), None)

    def attr_def(self, name: str) -> Attr | None:
        return self._attr_map.get(name)

    def complete_attrs(self, given: dict[str, Any]) -> dict[str, Any]:
        """Check ``given`` against the schema and fill in defaults.

        Raises :class:`OpAttrError` naming the op and the attribute.
        """
        out: dict[str, Any] = {}
        for name, value in given.items():
            a = self._attr_map.get(name)
            if a is None:
                if name.startswith("op_") or name.startswith("_"):
                    out[name] = value  # free-form annotations (op_role, ...)
                    continue
                known = ", ".join(sorted(self._attr_map)) or "none"
                raise OpAttrError(f"op {self.type}: unknown attribute {name!r} (known: {known})")
            if value is None and not a.required:
                value = a.default
            if not _attrs.check_value(a.kind, value):
                raise OpAttrError(
                    f"op {self.type}: attribute {name!r} must be {a.kind}, got {value!r}"
                )
            if a.allowed is not None and value not in a.allowed:
                raise OpAttrError(
                    f"op {self.type}: attribute {name!r} is {value!r}; "
                    f"allowed values: {list(a.allowed)}"
                )
            why = a.range_error(value)
            if why is not None:
                raise OpAttrError(f"op {self.type}: {why}")
            out[name] = value
        for a in self.attrs:
            if a.name not in out:
                if a.required:
                    raise OpAttrError(f"op {self.type}: required attribute {a.name!r} is missing")
                out[a.name] = a.default
        return out

    def with_defaults(self, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` plus the default of every schema attribute it lacks (no checks):
        what kernels see of an op loaded from a file that stores only some attributes."""
        out = dict(given)
        for a in self.attrs:
            if a.name not in out and not a.required:
                out[a.name] = list(a.default) if isinstance(a.default, list) else a.default
        return out


_REGISTRY: dict[str, OpDef] = {}


def register_op(opdef: OpDef) -> OpDef:
    """Add an op definition; registering a type twice is a programming error."""
    return register_once(_REGISTRY, opdef.type, opdef, "op")


def define_op(
    type: str,
    inputs: Iterable[Slot | str] = (),
    outputs: Iterable[Slot | str] = (),
    attrs: Iterable[Attr] = (),
    doc: str = "",
    **kw: Any,
) -> Callable[[InferFn], InferFn]:
    """Decorator form: ``@define_op("relu", ["X"], ["Out"])`` over the infer function."""

    def deco(fn: InferFn) -> InferFn:
        register_op(
            OpDef(
                type,
                tuple(s if isinstance(s, Slot) else Slot(s) for s in inputs),
                tuple(s if isinstance(s, Slot) else Slot(s) for s in outputs),
                tuple(attrs),
                infer=fn,
                doc=doc or (fn.__doc__ or ""),
                **kw,
            )
        )
        return fn

    return deco


def get_op(type: str) -> OpDef:
    """The definition of op ``type``; an unknown type lists the known ones."""
    _load_builtin_ops()
    try:
        return _REGISTRY[type]
    except KeyError:
        raise unknown_name("op type", type, _REGISTRY, UnknownOpError) from None


#: op categories (``OpDef.categories``), for passes and back ends that treat ops by kind:
#: ``elementwise``: one input ``X``, one output ``Out`` of X's shape, each element a
#: function of the same element of X and the attributes only (the quantisation pass
#: tabulates such an op of one int8 value into ``quantized_table``);
#: ``layer``: a layer with weights the quantisation pass turns into an integer layer
#: (fc, mul, convolutions);
#: ``layout``: moves the elements of each example without computing (reshape,
#: flatten, transpose, squeeze, unsqueeze): integer values pass through, and the FPGA
#: lowering only follows the element order;
#: ``copy``: each output element is a copy of one element of ``X``, chosen by the
#: attributes and shapes alone (nearest-neighbour upsampling): integer values pass
#: through with their scale, but unlike ``layout`` the example's size changes, so the
#: FPGA lowering needs a stage kind for it;
#: ``quantised``: exists only inside a quantised region (docs/fixed_point.md)
CATEGORIES = ("elementwise", "layer", "layout", "copy", "quantised")


def op_has_category(type: str, category: str) -> bool:
    """Whether op ``type`` is registered and belongs to ``category``."""
    if category not in CATEGORIES:
        raise unknown_name("op category", category, CATEGORIES)
    return has_op(type) and category in get_op(type).categories


def mark_category(category: str, *types: str) -> None:
    """Put the (registered) ops ``types`` into ``category``."""
    if category not in CATEGORIES:
        raise unknown_name("op category", category, CATEGORIES)
    for t in types:
        d = _REGISTRY[t]
        d.categories = d.categories | {category}


def has_op(type: str) -> bool:
    _load_builtin_ops()
    return type in _REGISTRY


def all_ops() -> dict[str, OpDef]:
    _load_builtin_ops()
    return dict(_REGISTRY)


_loaded = False


def _load_builtin_ops() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import ops  # noqa: F401  (registers the built-in op definitions)


class InferContext:
    """What an op's infer function sees: its input vars, attrs, and a way to set outputs."""

    def __init__(self, op: Operator, opdef: OpDef):
        self.op = op
        self.opdef = opdef

    # -- inputs --------------------------------------------------------
    def has_input(self, slot: str) -> bool:
        return bool(self.op.input(slot))

    def has_output(self, slot: str) -> bool:
        return bool(self.op.output(slot))

    def input_count(self, slot: str) -> int:
        return len(self.op.input(slot))

    def input_var(self, slot: str, i: int = 0) -> Variable:
        names = self.op.input(slot)
        if i >= len(names):
            self.fail(f"input slot {slot!r} needs at least {i + 1} variable(s)")
        return self.op.block._var_recursive(names[i])

    def input_vars(self, slot: str) -> list[Variable]:
        return [self.op.block._var_recursive(n) for n in self.op.input(slot)]

    def input_shape(self, slot: str, i: int = 0) -> list[int]:
        return list(self.input_var(slot, i).shape)

    def input_dtype(self, slot: str, i: int = 0) -> int:
        return self.input_var(slot, i).dtype

    def attr(self, name: str) -> Any:
        return self.op.attr(name)

    # -- outputs -------------------------------------------------------
    def set_output(
        self,
        slot: str,
        shape: Sequence[int] | None,
        dtype: Any = None,
        i: int = 0,
        lod_level: int | None = None,
    ) -> None:
        names = self.op.output(slot)
        if i >= len(names):
            if self.opdef.output_slot(slot) and (
                self.opdef.output_slot(slot).dispensable  # type: ignore[union-attr]
                or self.opdef.output_slot(slot).intermediate  # type: ignore[union-attr]
            ):
                return
            self.fail(f"output slot {slot!r} has no variable #{i}")
        var = self.op.block._var_recursive(names[i])
        if shape is not None:
            var.desc_shape = [int(d) for d in shape]
        if dtype is not None:
            var.dtype = dtypes.to_enum(dtype)
        if lod_level is not None:
            var.lod_level = lod_level

    def share(self, in_slot: str, out_slot: str, i: int = 0, lod: bool = True) -> None:
        """Output ``out_slot`` gets the shape, dtype (and lod level) of ``in_slot``."""
        v = self.input_var(in_slot, i)
        self.set_output(out_slot, v.shape, v.dtype, i, v.lod_level if lod else None)

    # -- errors --------------------------------------------------------
    def describe_inputs(self) -> str:
        parts = []
        for slot in self.op.input_names:
            for n in self.op.input(slot):
                v = self.op.block._find_var_recursive(n)
                shape = list(v.shape) if v is not None else "?"
                parts.append(f"{slot}={n!r} {shape}")
        return ", ".join(parts)

    def fail(self, msg: str) -> None:
        outs = ", ".join(self.op.output_arg_names) or "no outputs"
        raise ShapeError(f"op {self.op.type} (-> {outs}): {msg}. Inputs: {self.describe_inputs()}")

    def check(self, cond: bool, msg: str) -> None:
        if not cond:
            self.fail(msg)


def check_attr_for_op(opdef: OpDef, name: str, value: Any) -> str:
    """The attribute kind to store ``name`` with, checking it against the schema."""
    a = opdef.attr_def(name)
    if a is None:
        return _attrs.guess_kind(value)
    if not _attrs.check_value(a.kind, value):
        raise OpAttrError(f"op {opdef.type}: attribute {name!r} must be {a.kind}, got {value!r}")
    why = a.range_error(value)
    if why is not None:
        raise OpAttrError(f"op {opdef.type}: {why}")
    return a.kind
