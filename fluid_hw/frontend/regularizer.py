"""Weight decay (Fluid 1.x): a term added to a parameter's gradient before its update.

``L2Decay(c)`` adds ``c * param``, ``L1Decay(c)`` adds ``c * sign(param)``.  Give one
to an optimizer (``regularization=``) for every parameter, or to a parameter
(``ParamAttr(regularizer=...)``), which then overrides the optimizer's.  The ops
carry ``op_role="backward"``: they complete the gradient, which keeps its name
``<param>@GRAD``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import OpAttrError
from ..ir.program import Block, Variable
from .layers.control_flow import RoleOps

__all__ = ["L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer",
           "WeightDecayRegularizer", "append_regularization_ops"]

ROLE = "backward"


class WeightDecayRegularizer:
    """Base class: ``reg(param, grad, block)`` appends the ops computing the decay term
    and returns it (a variable of the parameter's shape)."""

    def __init__(self, regularization_coeff: float = 0.0) -> None:
        if isinstance(regularization_coeff, bool) or not isinstance(
                regularization_coeff, (int, float)) or regularization_coeff < 0:
            raise OpAttrError(f"{type(self).__name__}: regularization_coeff must be a "
                              f"non-negative number, got {regularization_coeff!r}")
        self._regularization_coeff = float(regularization_coeff)

    def __call__(self, param: Variable, grad: Variable, block: Block) -> Variable:
        raise NotImplementedError

    def _ops(self, param: Variable, block: Block) -> RoleOps:
        return RoleOps(block, ROLE, f"{param.name}_{type(self).__name__.lower()}")

    def __str__(self) -> str:
        return f"{type(self).__name__}, regularization_coeff={self._regularization_coeff:f}"


class L2Decay(WeightDecayRegularizer):
    """Adds ``regularization_coeff * param`` to the gradient."""

    def __call__(self, param: Variable, grad: Variable, block: Block) -> Variable:
        return self._ops(param, block).scale(param, self._regularization_coeff)


class L1Decay(WeightDecayRegularizer):
    """Adds ``regularization_coeff * sign(param)`` to the gradient."""

    def __call__(self, param: Variable, grad: Variable, block: Block) -> Variable:
        ops = self._ops(param, block)
        return ops.scale(ops.unary("sign", param), self._regularization_coeff)


# Fluid's longer names
L2DecayRegularizer = L2Decay
L1DecayRegularizer = L1Decay


def append_regularization_ops(
    parameters_and_grads: Sequence[tuple[Variable, Variable | None]],
    regularization: WeightDecayRegularizer | None = None,
) -> list[tuple[Variable, Variable | None]]:
    """Add each parameter's decay term to its gradient, in place (``sum`` into the
    gradient variable).  A parameter's own ``regularizer`` wins over
    ``regularization``; parameters without either, or without a gradient, are
    left alone."""
    out = []
    for param, grad in parameters_and_grads:
        reg = getattr(param, "regularizer", None) or regularization
        if grad is None or reg is None:
            out.append((param, grad))
            continue
        if not isinstance(reg, WeightDecayRegularizer):
            raise OpAttrError(f"parameter {param.name!r}: regularizer must be an L1Decay or "
                              f"L2Decay, got {reg!r}")
        block = grad.block
        term = reg(param, grad, block)
        RoleOps(block, ROLE, param.name).sum([grad, term], out=grad)
        out.append((param, grad))
    return out
