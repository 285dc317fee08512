"""Gradient clipping (Fluid 1.8 style): ``optimizer(grad_clip=GradientClipByGlobalNorm(1.0))``.

A clip object maps a list of ``(param, grad)`` pairs to a new list whose clipped
gradients are new variables (``<grad>@CLIP_<k>``).  Without an optimizer-wide
``grad_clip``, a parameter's own ``gradient_clip_attr`` (``ParamAttr(gradient_clip=)``
or :func:`set_gradient_clip`) is used; parameters sharing one clip object (or, for
global-norm clips, one ``group_name``) are clipped together.  The ops carry
``op_role="backward"``: they complete the gradients the update ops read.

- :class:`GradientClipByValue`: ``g = min(max(g, min), max)``;
- :class:`GradientClipByNorm`: ``g *= clip_norm / max(norm(g), clip_norm)``;
- :class:`GradientClipByGlobalNorm`: with ``global_norm = sqrt(sum_i sum(g_i ** 2))``,
  ``g_i *= clip_norm / max(global_norm, clip_norm)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..errors import OpAttrError
from ..ir import unique_name
from ..ir.default_programs import default_main_program
from ..ir.program import Parameter, Program, Variable
from .layers.control_flow import RoleOps

__all__ = ["GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
           "GradientClipByValue", "append_gradient_clip_ops", "set_gradient_clip"]

ROLE = "backward"

ParamsGrads = list[tuple[Variable, Variable | None]]


def _number(value: Any, what: str, cls: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            positive and value <= 0):
        kind = "a positive number" if positive else "a number"
        raise OpAttrError(f"{cls}: {what} must be {kind}, got {value!r}")
    return float(value)


class GradientClipBase:
    """Base class: ``clip(params_grads)`` appends the clipping ops and returns the
    pairs with the clipped gradients.  ``need_clip(param) -> bool`` leaves out
    parameters for which it is false."""

    def __init__(self, need_clip: Callable[[Variable], bool] | None = None) -> None:
        self._need_clip_func = need_clip

    def __call__(self, params_grads: Sequence[tuple[Variable, Variable | None]]) -> ParamsGrads:
        chosen = [(p, g) for p, g in params_grads if g is not None and self._wants(p)]
        clipped = dict(zip((p.name for p, _ in chosen), self._clip(chosen))) if chosen else {}
        return [(p, clipped.get(p.name, g)) if g is not None else (p, g)
                for p, g in params_grads]

    def _wants(self, param: Variable) -> bool:
        return self._need_clip_func is None or bool(self._need_clip_func(param))

    def _clip(self, params_grads: list[tuple[Variable, Variable]]) -> list[Variable]:
        """The clipped gradients, one per pair (all gradients are present)."""
        raise NotImplementedError

    def _group_key(self) -> Hashable:
        """Parameters whose clip attributes have the same key are clipped together."""
        return id(self)

    @staticmethod
    def _ops(grad: Variable) -> RoleOps:
        return RoleOps(grad.block, ROLE, f"{grad.name}@CLIP")

    @staticmethod
    def _sum_squares(ops: RoleOps, g: Variable) -> Variable:
        return ops.unary("reduce_sum", ops.unary("square", g), dim=[0], keep_dim=False,
                         reduce_all=True)

    @staticmethod
    def _scaled(ops: RoleOps, g: Variable, factor: Variable) -> Variable:
        """``g * factor`` for a [1] ``factor``, into a new ``<grad>@CLIP_<k>`` variable."""
        out = ops.tmp(g.dtype, name=unique_name.generate(f"{g.name}@CLIP"))
        ops.op("elementwise_mul", {"X": g, "Y": factor}, {"Out": out}, {"axis": -1})
        return out


class GradientClipByValue(GradientClipBase):
    """Clip every gradient element into ``[min, max]`` (``min`` defaults to ``-max``)."""

    def __init__(self, max: float, min: float | None = None,
                 need_clip: Callable[[Variable], bool] | None = None) -> None:
        super().__init__(need_clip)
        hi = _number(max, "max", "GradientClipByValue")
        lo = -hi if min is None else _number(min, "min", "GradientClipByValue")
        if lo > hi:
            raise OpAttrError(f"GradientClipByValue: min {lo} is larger than max {hi}")
        self.max, self.min = hi, lo

    def _clip(self, params_grads: list[tuple[Variable, Variable]]) -> list[Variable]:
        out = []
        for _, g in params_grads:
            ops = self._ops(g)
            lo = ops.binary("max", g, ops.const(self.min, g.dtype))
            new = ops.tmp(g.dtype, name=unique_name.generate(f"{g.name}@CLIP"))
            ops.op("elementwise_min", {"X": lo, "Y": ops.const(self.max, g.dtype)},
                   {"Out": new}, {"axis": -1})
            out.append(new)
        return out

    def __str__(self) -> str:
        return f"Gradient Clip By Value, min = {self.min:f}, max={self.max:f}"


class GradientClipByNorm(GradientClipBase):
    """Scale each gradient whose L2 norm exceeds ``clip_norm`` down to ``clip_norm``."""

    def __init__(self, clip_norm: float,
                 need_clip: Callable[[Variable], bool] | None = None) -> None:
        super().__init__(need_clip)
        self.clip_norm = _number(clip_norm, "clip_norm", "GradientClipByNorm", positive=True)

    def _clip(self, params_grads: list[tuple[Variable, Variable]]) -> list[Variable]:
        out = []
        for _, g in params_grads:
            ops = self._ops(g)
            norm = ops.unary("sqrt", self._sum_squares(ops, g))
            limit = ops.const(self.clip_norm, g.dtype)
            factor = ops.binary("div", limit, ops.binary("max", norm, limit))
            out.append(self._scaled(ops, g, factor))
        return out

    def __str__(self) -> str:
        return f"Gradient Clip By Norm, clip_norm={self.clip_norm:f}"


class GradientClipByGlobalNorm(GradientClipBase):
    """Scale all gradients together so that their global L2 norm is at most
    ``clip_norm``."""

    def __init__(self, clip_norm: float, group_name: str = "default_group",
                 need_clip: Callable[[Variable], bool] | None = None) -> None:
        super().__init__(need_clip)
        self.clip_norm = _number(clip_norm, "clip_norm", "GradientClipByGlobalNorm",
                                 positive=True)
        self.group_name = group_name

    def _group_key(self) -> Hashable:
        return ("global_norm", self.group_name)

    def _clip(self, params_grads: list[tuple[Variable, Variable]]) -> list[Variable]:
        grads = [g for _, g in params_grads]
        dtypes_ = {g.dtype for g in grads}
        if len(dtypes_) != 1:
            raise OpAttrError(f"GradientClipByGlobalNorm: gradients "
                              f"{[g.name for g in grads]} have different dtypes "
                              f"{sorted(g.dtype_name for g in grads)}; clip them in "
                              "separate groups")
        ops = RoleOps(grads[0].block, ROLE, f"global_norm_{self.group_name}")
        squares = [self._sum_squares(ops, g) for g in grads]
        total = ops.sum(squares) if len(squares) > 1 else squares[0]
        global_norm = ops.unary("sqrt", total)
        limit = ops.const(self.clip_norm, grads[0].dtype)
        factor = ops.binary("div", limit, ops.binary("max", global_norm, limit))
        return [self._scaled(self._ops(g), g, factor) for g in grads]

    def __str__(self) -> str:
        return f"Gradient Clip By GlobalNorm, global_norm={self.clip_norm:f}"


def set_gradient_clip(clip: GradientClipBase, param_list: Sequence[Any] | None = None,
                      program: Program | None = None) -> None:
    """Give ``clip`` to the parameters in ``param_list`` (names or parameters; default:
    all of ``program``'s), as their ``gradient_clip_attr``."""
    if not isinstance(clip, GradientClipBase):
        raise OpAttrError(f"set_gradient_clip: clip must be a GradientClipBy* object, "
                          f"got {clip!r}")
    program = program or default_main_program()
    gb = program.global_block()
    if param_list is None:
        params = gb.all_parameters()
    else:
        params = []
        for p in param_list:
            v = gb._var_recursive(p if isinstance(p, str) else p.name)
            if not isinstance(v, Parameter):
                raise OpAttrError(f"set_gradient_clip: {v.name!r} is not a parameter; only "
                                  "parameters have a gradient clip")
            params.append(v)
    for p in params:
        p.gradient_clip_attr = clip


def append_gradient_clip_ops(params_grads: Sequence[tuple[Variable, Variable | None]]
                             ) -> ParamsGrads:
    """Clip with each parameter's own ``gradient_clip_attr`` (parameters without one
    keep their gradient); parameters whose clips share a group key are clipped
    together."""
    groups: dict[Hashable, tuple[GradientClipBase, list[int]]] = {}
    for i, (p, g) in enumerate(params_grads):
        clip = getattr(p, "gradient_clip_attr", None)
        if clip is None or g is None:
            continue
        if not isinstance(clip, GradientClipBase):
            raise OpAttrError(f"parameter {p.name!r}: gradient_clip must be a "
                              f"GradientClipBy* object, got {clip!r}")
        key = clip._group_key()
        first, idx = groups.setdefault(key, (clip, []))
        # one key, one class: a global-norm group's first clip is a global-norm one too
        if isinstance(clip, GradientClipByGlobalNorm) and \
                isinstance(first, GradientClipByGlobalNorm) and \
                clip.clip_norm != first.clip_norm:
            raise OpAttrError(f"parameter {p.name!r}: global-norm clip group "
                              f"{clip.group_name!r} has clip_norm {clip.clip_norm} here and "
                              f"{first.clip_norm} elsewhere")
        idx.append(i)
    out = list(params_grads)
    for clip, idx in groups.values():
        for i, pair in zip(idx, clip([params_grads[i] for i in idx])):
            out[i] = pair
    return out
