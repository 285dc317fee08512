"""Learning-rate schedules (Fluid 1.x): each returns a float32 [1] variable that the
main program recomputes on every run from a global step counter.

The counter is the persistable int64 variable ``@LR_DECAY_COUNTER@``, filled in
the startup program and incremented by an op at the very front of the main
program, so the first run sees step 0 (step 1 for :func:`noam_decay`).  Every op
added here carries ``op_role="lr_sched"``.  Pass the returned variable as an
optimizer's ``learning_rate``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ...errors import OpAttrError
from ...ir.default_programs import default_main_program
from ...ir.program import Variable
from .control_flow import RoleOps, step_counter

__all__ = [
    "exponential_decay", "natural_exp_decay", "inverse_time_decay", "polynomial_decay",
    "piecewise_decay", "cosine_decay", "noam_decay", "linear_lr_warmup",
]

LR_COUNTER_NAME = "@LR_DECAY_COUNTER@"
ROLE = "lr_sched"


def _ops() -> RoleOps:
    return RoleOps(default_main_program().global_block(), ROLE, "learning_rate")


def _decay_step(ops: RoleOps, begin: int = 0) -> Variable:
    """The global step as float32 [1]: ``begin`` on the first run."""
    counter = step_counter(LR_COUNTER_NAME, begin, 1, op_role=ROLE)
    return ops.cast(counter, "float32")


def _positive(name: str, value: float, fn: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise OpAttrError(f"{fn}: {name} must be a positive number, got {value!r}")
    return float(value)


def _div_steps(ops: RoleOps, step: Variable, decay_steps: float, staircase: bool) -> Variable:
    # a true division (not a multiplication by 1/decay_steps) so that staircase
    # boundaries fall exactly on multiples of decay_steps
    div = ops.binary("div", step, ops.const(decay_steps))
    return ops.unary("floor", div) if staircase else div


def exponential_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                      staircase: bool = False) -> Variable:
    """``learning_rate * decay_rate ** (step / decay_steps)`` (the exponent floored
    with ``staircase``)."""
    decay_steps = _positive("decay_steps", decay_steps, "exponential_decay")
    ops = _ops()
    div = _div_steps(ops, _decay_step(ops), decay_steps, staircase)
    factor = ops.binary("pow", ops.const(decay_rate), div)
    return ops.scale(factor, learning_rate)


def natural_exp_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                      staircase: bool = False) -> Variable:
    """``learning_rate * exp(-decay_rate * step / decay_steps)``."""
    decay_steps = _positive("decay_steps", decay_steps, "natural_exp_decay")
    ops = _ops()
    div = _div_steps(ops, _decay_step(ops), decay_steps, staircase)
    return ops.scale(ops.unary("exp", ops.scale(div, -float(decay_rate))), learning_rate)


def inverse_time_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                       staircase: bool = False) -> Variable:
    """``learning_rate / (1 + decay_rate * step / decay_steps)``."""
    decay_steps = _positive("decay_steps", decay_steps, "inverse_time_decay")
    ops = _ops()
    div = _div_steps(ops, _decay_step(ops), decay_steps, staircase)
    denom = ops.scale(div, float(decay_rate), 1.0)
    return ops.binary("div", ops.const(learning_rate), denom)


def polynomial_decay(learning_rate: float, decay_steps: float,
                     end_learning_rate: float = 0.0001, power: float = 1.0,
                     cycle: bool = False) -> Variable:
    """``(lr - end_lr) * (1 - step / decay_steps) ** power + end_lr``.

    Without ``cycle`` the step stops at ``decay_steps``; with it ``decay_steps`` is
    multiplied by ``ceil(step / decay_steps)`` (at least 1).
    """
    decay_steps = _positive("decay_steps", decay_steps, "polynomial_decay")
    ops = _ops()
    step = _decay_step(ops)
    steps_var = ops.const(decay_steps)
    if cycle:
        div = ops.unary("ceil", ops.binary("div", step, steps_var))
        div = ops.binary("max", div, ops.const(1.0))  # step 0 is in the first cycle
        steps_var = ops.scale(div, decay_steps)
    else:
        step = ops.binary("min", step, steps_var)
    frac = ops.scale(ops.binary("div", step, steps_var), -1.0, 1.0)  # 1 - step/steps
    factor = ops.binary("pow", frac, ops.const(power))
    return ops.scale(factor, float(learning_rate) - float(end_learning_rate),
                     float(end_learning_rate))


def piecewise_decay(boundaries: Sequence[float], values: Sequence[float]) -> Variable:
    """``values[i]`` while ``boundaries[i-1] <= step < boundaries[i]`` (``values[0]``
    before the first boundary, ``values[-1]`` from the last on)."""
    if len(values) - len(boundaries) != 1:
        raise OpAttrError(f"piecewise_decay: needs one more value than boundaries, got "
                          f"{len(boundaries)} boundaries and {len(values)} values")
    if any(b >= c for b, c in itertools.pairwise(boundaries)):
        raise OpAttrError(f"piecewise_decay: boundaries {list(boundaries)} must be "
                          "strictly increasing")
    ops = _ops()
    if not boundaries:
        return ops.const(values[0])
    step = _decay_step(ops)
    # below[i] = 1.0 where step < boundaries[i]; the pieces' indicators are its
    # differences, exactly 0 or 1, so the sum below is exactly one of the values
    below = [ops.cast(ops.binary("less_than", step, ops.const(b)), "float32")
             for b in boundaries]
    inds = [below[0], *(ops.binary("sub", below[i], below[i - 1])
                        for i in range(1, len(below))), ops.scale(below[-1], -1.0, 1.0)]
    return ops.sum([ops.scale(ind, v) for ind, v in zip(inds, values)])


def cosine_decay(learning_rate: float, step_each_epoch: int, epochs: int) -> Variable:
    """``learning_rate * 0.5 * (cos(floor(step / step_each_epoch) * pi / epochs) + 1)``."""
    per_epoch = _positive("step_each_epoch", step_each_epoch, "cosine_decay")
    n_epochs = _positive("epochs", epochs, "cosine_decay")
    ops = _ops()
    epoch = _div_steps(ops, _decay_step(ops), per_epoch, True)
    cos = ops.unary("cos", ops.scale(epoch, math.pi / n_epochs))
    return ops.scale(cos, 0.5 * float(learning_rate), 0.5 * float(learning_rate))


def noam_decay(d_model: float, warmup_steps: float, learning_rate: float = 1.0) -> Variable:
    """``learning_rate * d_model**-0.5 * min(step**-0.5, warmup_steps**-1.5 * step)``,
    counting steps from 1 (the Transformer schedule)."""
    d_model = _positive("d_model", d_model, "noam_decay")
    warmup_steps = _positive("warmup_steps", warmup_steps, "noam_decay")
    ops = _ops()
    step = _decay_step(ops, begin=1)
    a = ops.binary("pow", step, ops.const(-0.5))
    b = ops.scale(step, warmup_steps ** -1.5)
    return ops.scale(ops.binary("min", a, b), float(learning_rate) * d_model ** -0.5)


def linear_lr_warmup(learning_rate: float | Variable, warmup_steps: int, start_lr: float,
                     end_lr: float) -> Variable:
    """``start_lr + (end_lr - start_lr) * step / warmup_steps`` while
    ``step < warmup_steps``, then ``learning_rate`` (a number or a schedule)."""
    n_warmup = _positive("warmup_steps", warmup_steps, "linear_lr_warmup")
    ops = _ops()
    step = _decay_step(ops)
    warm = ops.scale(ops.binary("div", step, ops.const(n_warmup)),
                     float(end_lr) - float(start_lr), float(start_lr))
    base = learning_rate if isinstance(learning_rate, Variable) else ops.const(learning_rate)
    m = ops.cast(ops.binary("less_than", step, ops.const(n_warmup)), "float32")
    not_m = ops.scale(m, -1.0, 1.0)
    return ops.sum([ops.binary("mul", warm, m), ops.binary("mul", base, not_m)])
