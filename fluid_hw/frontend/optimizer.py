"""Optimizers (Fluid 1.x): ``SGD``, ``Momentum``, ``Adam``, ``RMSProp``.

``opt.minimize(loss)`` appends, in this order (Fluid's):

1. the backward pass (:func:`fluid_hw.frontend.backward.append_backward`);
2. gradient clipping (the optimizer's ``grad_clip``, else each parameter's own
   ``gradient_clip_attr``), see :mod:`fluid_hw.frontend.clip`;
3. weight decay (each parameter's ``regularizer``, else the optimizer's
   ``regularization``), see :mod:`fluid_hw.frontend.regularizer`;
4. one update op per trainable parameter (``op_role="optimize"``, and
   ``op_role_var=[param, grad]``), reading the learning rate and the optimizer's
   accumulators.

The learning rate is a persistable float32 [1] variable (``learning_rate_<k>``)
filled in the startup program, or the variable given (an LR schedule); a
parameter's ``ParamAttr(learning_rate=m)`` with ``m != 1`` multiplies it by a
``scale`` op.  Accumulators are persistable variables ``<param>_<acc>_<k>``
(``fc_0.w_0_moment1_0``) of the main program's global block, initialised by
``fill_constant`` in the startup program.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import GradientError, OpAttrError
from ..ir import dtypes, unique_name
from ..ir.default_programs import default_main_program, default_startup_program, program_guard
from ..ir.program import Block, Operator, Parameter, Program, Variable
from .backward import append_backward
from .clip import GradientClipBase, append_gradient_clip_ops
from .initializer import Constant
from .layers.control_flow import RoleOps
from .regularizer import WeightDecayRegularizer, append_regularization_ops

__all__ = [
    "Adam", "AdamOptimizer", "Momentum", "MomentumOptimizer", "Optimizer", "RMSProp",
    "RMSPropOptimizer", "SGD", "SGDOptimizer",
    # Fluid 1.5's others (issue 20)
    "Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adamax",
    "AdamaxOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Ftrl", "FtrlOptimizer",
    "LarsMomentum", "LarsMomentumOptimizer", "ModelAverage", "ExponentialMovingAverage",
]

ROLE = "optimize"

ParamsGrads = list[tuple[Parameter, Variable]]


def _hyper(cls: str, name: str, value: Any, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """Check one hyper-parameter is a number in the given range; return it as float."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        rng = ""
        if lo is not None or hi is not None:
            left = f"{'(' if lo_open else '['}{lo if lo is not None else '-inf'}"
            right = f"{hi if hi is not None else 'inf'}{')' if hi_open else ']'}"
            rng = f" in {left}, {right}"
        raise OpAttrError(f"{cls}: {name} must be a number{rng}, got {value!r}")
    return float(value)


class Optimizer:
    """Base class.  Subclasses set :attr:`type`, their accumulators and op slots in
    :attr:`_state` and their op's attributes in :meth:`_op_attrs`."""

    type = ""

    def __init__(self, learning_rate: float | Variable,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None) -> None:
        cls = type(self).__name__
        if isinstance(learning_rate, Variable):
            if learning_rate.dtype not in dtypes.FLOAT_DTYPES or \
                    any(d not in (1, -1) for d in learning_rate.shape):
                raise OpAttrError(f"{cls}: a learning_rate variable must be a float tensor "
                                  f"with one element, got {learning_rate!r}")
        else:
            _hyper(cls, "learning_rate", learning_rate, lo=0.0, lo_open=True)
        if regularization is not None and not isinstance(regularization,
                                                         WeightDecayRegularizer):
            raise OpAttrError(f"{cls}: regularization must be an L1Decay or L2Decay, got "
                              f"{regularization!r}")
        if grad_clip is not None and not isinstance(grad_clip, GradientClipBase):
            raise OpAttrError(f"{cls}: grad_clip must be a GradientClipBy* object, got "
                              f"{grad_clip!r}")
        self._learning_rate = learning_rate
        self.regularization = regularization
        self._grad_clip = grad_clip
        self._name = name
        self._learning_rate_map: dict[Program, Variable] = {}
        #: accumulator name -> parameter name -> variable
        self._accumulators: defaultdict[str, dict[str, Variable]] = defaultdict(dict)

    # -- learning rate -----------------------------------------------------
    def _create_global_learning_rate(self) -> None:
        program = default_main_program()
        if program in self._learning_rate_map:
            return
        if isinstance(self._learning_rate, Variable):
            self._learning_rate_map[program] = self._learning_rate
            return
        name = unique_name.generate("learning_rate")
        lr = program.global_block().create_var(name=name, shape=[1], dtype="float32",
                                               persistable=True, stop_gradient=True)
        self._init_in_startup(lr, float(self._learning_rate))
        self._learning_rate_map[program] = lr

    def _global_learning_rate(self, program: Program | None = None) -> Variable:
        return self._learning_rate_map[program or default_main_program()]

    def _create_param_lr(self, param: Parameter) -> Variable:
        """The global learning rate, scaled by the parameter's multiplier."""
        lr = self._global_learning_rate()
        attr = getattr(param, "optimize_attr", None) or {}
        mult = attr.get("learning_rate", 1.0)
        if isinstance(mult, Variable):
            raise OpAttrError(f"{type(self).__name__}: parameter {param.name!r} has a Variable "
                              "learning-rate multiplier; give a number")
        if float(mult) == 1.0:
            return lr
        return RoleOps(default_main_program().global_block(), ROLE, "learning_rate").scale(
            lr, float(mult))

    # -- accumulators ----------------------------------------------------------
    def _init_in_startup(self, var: Variable, value: float) -> None:
        sb = default_startup_program().global_block()
        if not sb.has_var(var.name):
            sv = sb.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                               persistable=True)
            Constant(value)(sv, sb)

    def _add_accumulator(self, name: str, param: Parameter, fill_value: float = 0.0,
                         shape: Sequence[int] | None = None, dtype: Any = None) -> Variable:
        """A persistable ``<param>_<name>_<k>`` variable filled with ``fill_value``."""
        accs = self._accumulators[name]
        if param.name in accs:
            return accs[param.name]
        gb = default_main_program().global_block()
        var = gb.create_var(name=unique_name.generate(f"{param.name}_{name}"),
                            shape=list(shape) if shape is not None else list(param.shape),
                            dtype=dtype if dtype is not None else param.dtype,
                            persistable=True, stop_gradient=True)
        self._init_in_startup(var, fill_value)
        accs[param.name] = var
        return var

    def _get_accumulator(self, name: str, param: Parameter) -> Variable:
        try:
            return self._accumulators[name][param.name]
        except KeyError:
            raise GradientError(f"{type(self).__name__}: no accumulator {name!r} for "
                                f"parameter {param.name!r}") from None

    #: the optimizer's state, one ``(accumulator, input slot, output slot)`` per
    #: accumulator of each parameter, in the order they are created
    _state: tuple[tuple[str, str, str], ...] = ()
    #: whether the update op reads ``LearningRate``
    _reads_learning_rate = True

    def _accumulator_init(self, name: str) -> dict[str, Any]:
        """:meth:`_add_accumulator`'s ``fill_value`` / ``shape`` for accumulator ``name``
        (none: zeros shaped like the parameter)."""
        return {}

    def _op_attrs(self) -> dict[str, Any]:
        """The update op's attributes."""
        return {}

    def _create_accumulators(self, block: Block, parameters: list[Parameter]) -> None:
        """The :attr:`_state` variables of each parameter."""
        for p in parameters:
            for name, _, _ in self._state:
                self._add_accumulator(name, p, **self._accumulator_init(name))

    def _append_optimize_op(self, block: Block, param: Parameter, grad: Variable) -> Operator:
        """The update op: ``Param``, ``Grad``, the learning rate and the :attr:`_state`
        accumulators in, ``ParamOut`` and the accumulators out."""
        state = [(i, o, self._get_accumulator(name, param)) for name, i, o in self._state]
        inputs: dict[str, Any] = {"Param": param, "Grad": grad}
        if self._reads_learning_rate:
            inputs["LearningRate"] = self._create_param_lr(param)
        inputs.update({i: v for i, _, v in state})
        outputs: dict[str, Any] = {"ParamOut": param, **{o: v for _, o, v in state}}
        return self._update_op(block, param, grad, inputs, outputs, self._op_attrs())

    def _update_op(self, block: Block, param: Parameter, grad: Variable,
                   inputs: dict[str, Any], outputs: dict[str, Any],
                   attrs: dict[str, Any] | None = None) -> Operator:
        """Append this optimizer's op for ``param`` with the roles set."""
        return RoleOps(block, ROLE, param.name).op(
            self.type, inputs, outputs, {**(attrs or {}), "op_role_var": [param.name, grad.name]})

    # -- the passes ------------------------------------------------------------------
    def _create_optimization_pass(self, params_grads: ParamsGrads) -> list[Operator]:
        gb = default_main_program().global_block()
        todo = [(p, g) for p, g in params_grads if g is not None and p.trainable]
        self._create_global_learning_rate()
        self._create_accumulators(gb, [p for p, _ in todo])
        return [self._append_optimize_op(gb, p, g) for p, g in todo]

    def _check_parameters(self, program: Program, parameter_list: Sequence[Any] | None) -> None:
        gb = program.global_block()
        for p in parameter_list or ():
            name = p if isinstance(p, str) else p.name
            v = gb._find_var_recursive(name)
            if v is None:
                raise GradientError(f"{type(self).__name__}.minimize: parameter {name!r} is not "
                                    "a variable of the loss's program")
            if v.dtype not in dtypes.FLOAT_DTYPES:
                raise GradientError(f"{type(self).__name__}.minimize: parameter {name!r} is "
                                    f"{v.dtype_name}; only float parameters can be optimized "
                                    "(leave it out of parameter_list)")

    def backward(self, loss: Variable, startup_program: Program | None = None,
                 parameter_list: Sequence[Any] | None = None,
                 no_grad_set: Iterable[Any] | None = None,
                 callbacks: Any = None) -> ParamsGrads:
        """Append the backward pass of ``loss``; return its (parameter, gradient) pairs."""
        self._check_parameters(loss.block.program, parameter_list)
        return append_backward(loss, parameter_list, no_grad_set)

    def apply_gradients(self, params_grads: ParamsGrads) -> list[Operator]:
        """Clip, regularize and update, in the default main program."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        if self._grad_clip is not None:
            params_grads = self._grad_clip(params_grads)  # type: ignore[assignment]
        else:
            params_grads = append_gradient_clip_ops(params_grads)  # type: ignore[assignment]
        params_grads = append_regularization_ops(  # type: ignore[assignment]
            params_grads, self.regularization)
        return self._create_optimization_pass(params_grads)

    def apply_optimize(self, loss: Variable, startup_program: Program | None,
                       params_grads: ParamsGrads) -> list[Operator]:
        """:meth:`apply_gradients` in the loss's program and ``startup_program``."""
        with program_guard(loss.block.program, startup_program or default_startup_program()):
            return self.apply_gradients(params_grads)

    def minimize(self, loss: Variable, startup_program: Program | None = None,
                 parameter_list: Sequence[Any] | None = None,
                 no_grad_set: Iterable[Any] | None = None
                 ) -> tuple[list[Operator], ParamsGrads]:
        """Append the backward pass and the updates that lower ``loss``; return
        ``(optimize_ops, params_grads)`` (the gradients before clipping/decay)."""
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        optimize_ops = self.apply_optimize(loss, startup_program, params_grads)
        return optimize_ops, params_grads


class SGD(Optimizer):
    """``param -= lr * grad``."""

    type = "sgd"


class Momentum(Optimizer):
    """``v = momentum * v + grad``; ``param -= lr * v`` (Nesterov:
    ``param -= lr * (grad + momentum * v)``)."""

    type = "momentum"
    _velocity = "velocity"
    _state = ((_velocity, "Velocity", "VelocityOut"),)

    def __init__(self, learning_rate: float | Variable, momentum: float,
                 use_nesterov: bool = False, regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        self._momentum = _hyper(type(self).__name__, "momentum", momentum, lo=0.0)
        self._use_nesterov = bool(use_nesterov)

    def _op_attrs(self) -> dict[str, Any]:
        return {"mu": self._momentum, "use_nesterov": self._use_nesterov}


class Adam(Optimizer):
    """Adam with Fluid's bias correction folded into the learning rate."""

    type = "adam"
    _moment1 = "moment1"
    _moment2 = "moment2"
    _beta1_pow = "beta1_pow_acc"
    _beta2_pow = "beta2_pow_acc"
    _state = ((_moment1, "Moment1", "Moment1Out"), (_moment2, "Moment2", "Moment2Out"),
              (_beta1_pow, "Beta1Pow", "Beta1PowOut"), (_beta2_pow, "Beta2Pow", "Beta2PowOut"))

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None,
                 lazy_mode: bool = False) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._beta1 = _hyper(cls, "beta1", beta1, 0.0, 1.0, hi_open=True)
        self._beta2 = _hyper(cls, "beta2", beta2, 0.0, 1.0, hi_open=True)
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)
        self._lazy_mode = lazy_mode  # dense gradients only: accepted for Fluid code

    def _accumulator_init(self, name: str) -> dict[str, Any]:
        pows = {self._beta1_pow: self._beta1, self._beta2_pow: self._beta2}
        return {"fill_value": pows[name], "shape": [1]} if name in pows else {}

    def _op_attrs(self) -> dict[str, Any]:
        return {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}


class RMSProp(Optimizer):
    """RMSProp: ``ms = rho*ms + (1-rho)*g^2``; ``mom = momentum*mom + lr*g/sqrt(ms+eps)``
    (centered: ``sqrt(ms - mg^2 + eps)``); ``param -= mom``."""

    type = "rmsprop"
    _momentum_acc = "momentum"
    _mean_square = "mean_square"
    _mean_grad = "mean_grad"
    _state = ((_momentum_acc, "Moment", "MomentOut"), (_mean_square, "MeanSquare", "MeanSquareOut"),
              (_mean_grad, "MeanGrad", "MeanGradOut"))

    def __init__(self, learning_rate: float | Variable, rho: float = 0.95,
                 epsilon: float = 1.0e-6, momentum: float = 0.0, centered: bool = False,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._rho = _hyper(cls, "rho", rho, 0.0, 1.0)
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)
        self._momentum = _hyper(cls, "momentum", momentum, lo=0.0)
        self._centered = bool(centered)

    def _op_attrs(self) -> dict[str, Any]:
        return {"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
                "centered": self._centered}


class Adagrad(Optimizer):
    """``m += g^2``; ``param -= lr * g / (sqrt(m) + epsilon)``."""

    type = "adagrad"
    _moment = "moment"
    _state = ((_moment, "Moment", "MomentOut"),)

    def __init__(self, learning_rate: float | Variable, epsilon: float = 1.0e-6,
                 regularization: WeightDecayRegularizer | None = None, name: str | None = None,
                 initial_accumulator_value: float = 0.0,
                 grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)
        self._initial = _hyper(cls, "initial_accumulator_value", initial_accumulator_value,
                               lo=0.0)

    def _accumulator_init(self, name: str) -> dict[str, Any]:
        return {"fill_value": self._initial}

    def _op_attrs(self) -> dict[str, Any]:
        return {"epsilon": self._epsilon}


class DecayedAdagrad(Optimizer):
    """``m = decay * m + (1 - decay) * g^2``; ``param -= lr * g / (sqrt(m) + epsilon)``."""

    type = "decayed_adagrad"
    _moment = "moment"
    _state = ((_moment, "Moment", "MomentOut"),)

    def __init__(self, learning_rate: float | Variable, decay: float = 0.95,
                 epsilon: float = 1.0e-6, regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None, grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._decay = _hyper(cls, "decay", decay, 0.0, 1.0)
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)

    def _op_attrs(self) -> dict[str, Any]:
        return {"decay": self._decay, "epsilon": self._epsilon}


class Adamax(Optimizer):
    """Adam with the infinity norm: ``u = max(beta2 * u + eps, |g|)``;
    ``param -= lr / (1 - beta1^t) * m / u``."""

    type = "adamax"
    _moment = "moment"
    _inf_norm = "inf_norm"
    _beta1_pow = "beta1_pow_acc"
    _state = ((_moment, "Moment", "MomentOut"), (_inf_norm, "InfNorm", "InfNormOut"),
              (_beta1_pow, "Beta1Pow", "Beta1PowOut"))

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 regularization: WeightDecayRegularizer | None = None, name: str | None = None,
                 grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._beta1 = _hyper(cls, "beta1", beta1, 0.0, 1.0, hi_open=True)
        self._beta2 = _hyper(cls, "beta2", beta2, 0.0, 1.0, hi_open=True)
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)

    def _accumulator_init(self, name: str) -> dict[str, Any]:
        return {"fill_value": self._beta1, "shape": [1]} if name == self._beta1_pow else {}

    def _op_attrs(self) -> dict[str, Any]:
        return {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}


class Adadelta(Optimizer):
    """Adadelta (Paddle's: the learning rate is not used by the update)."""

    type = "adadelta"
    _avg_sq_grad = "_avg_squared_grad"
    _avg_sq_update = "_avg_squared_update"
    _state = ((_avg_sq_grad, "AvgSquaredGrad", "AvgSquaredGradOut"),
              (_avg_sq_update, "AvgSquaredUpdate", "AvgSquaredUpdateOut"))
    _reads_learning_rate = False

    def __init__(self, learning_rate: float | Variable, epsilon: float = 1.0e-6,
                 rho: float = 0.95, regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None, grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._epsilon = _hyper(cls, "epsilon", epsilon, lo=0.0)
        self._rho = _hyper(cls, "rho", rho, 0.0, 1.0)

    def _op_attrs(self) -> dict[str, Any]:
        return {"epsilon": self._epsilon, "rho": self._rho}


class Ftrl(Optimizer):
    """FTRL-proximal with L1 / L2 regularisation (``l1``, ``l2``) and a learning-rate
    power ``lr_power``."""

    type = "ftrl"
    _squared = "squared"
    _linear = "linear"
    _state = ((_squared, "SquaredAccumulator", "SquaredAccumOut"),
              (_linear, "LinearAccumulator", "LinearAccumOut"))

    def __init__(self, learning_rate: float | Variable, l1: float = 0.0, l2: float = 0.0,
                 lr_power: float = -0.5, regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None, grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._l1 = _hyper(cls, "l1", l1, lo=0.0)
        self._l2 = _hyper(cls, "l2", l2, lo=0.0)
        self._lr_power = _hyper(cls, "lr_power", lr_power, hi=0.0)

    def _op_attrs(self) -> dict[str, Any]:
        return {"l1": self._l1, "l2": self._l2, "lr_power": self._lr_power}


class LarsMomentum(Optimizer):
    """Momentum with a layer-wise adaptive rate: ``local_lr = lr * lars_coeff * |param| /
    (|grad| + lars_weight_decay * |param|)``."""

    type = "lars_momentum"
    _velocity = "velocity"
    _state = ((_velocity, "Velocity", "VelocityOut"),)

    def __init__(self, learning_rate: float | Variable, momentum: float,
                 lars_coeff: float = 0.001, lars_weight_decay: float = 0.0005,
                 regularization: WeightDecayRegularizer | None = None, name: str | None = None,
                 grad_clip: GradientClipBase | None = None) -> None:
        super().__init__(learning_rate, regularization, grad_clip, name)
        cls = type(self).__name__
        self._momentum = _hyper(cls, "momentum", momentum, lo=0.0)
        self._lars_coeff = _hyper(cls, "lars_coeff", lars_coeff, lo=0.0)
        self._lars_weight_decay = _hyper(cls, "lars_weight_decay", lars_weight_decay, lo=0.0)

    def _op_attrs(self) -> dict[str, Any]:
        return {"mu": self._momentum, "lars_coeff": self._lars_coeff,
                "lars_weight_decay": self._lars_weight_decay}


# Fluid's longer names
AdagradOptimizer = Adagrad
DecayedAdagradOptimizer = DecayedAdagrad
AdamaxOptimizer = Adamax
AdadeltaOptimizer = Adadelta
FtrlOptimizer = Ftrl
LarsMomentumOptimizer = LarsMomentum
SGDOptimizer = SGD
MomentumOptimizer = Momentum
AdamOptimizer = Adam
RMSPropOptimizer = RMSProp

from .averaging import ExponentialMovingAverage, ModelAverage  # noqa: E402
