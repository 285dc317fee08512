"""Initializers: each appends one op to the startup program that fills a parameter."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ir.program import Block, Variable


class Initializer:
    """Base class: ``init(var, startup_block)`` appends the op that fills ``var``."""

    seed: int = 0

    def __call__(self, var: Variable, block: Block) -> None:
        raise NotImplementedError

    def _seed(self, block: Block) -> int:
        return self.seed or block.program.random_seed


def _fans(shape: Sequence[int]) -> tuple[int, int]:
    """Fluid's fan computation: [in, out] for fc weights, [out, in, kh, kw] for conv."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    rf = math.prod(shape[2:])
    return shape[1] * rf, shape[0] * rf


class Constant(Initializer):
    def __init__(self, value: float = 0.0, force_cpu: bool = False) -> None:
        self.value = float(value)

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op("fill_constant", outputs={"Out": var},
                        attrs={"shape": list(var.shape), "dtype": var.dtype, "value": self.value})


class Uniform(Initializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0) -> None:
        self.low, self.high, self.seed = float(low), float(high), seed

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op("uniform_random", outputs={"Out": var},
                        attrs={"shape": list(var.shape), "dtype": var.dtype, "min": self.low,
                               "max": self.high, "seed": self._seed(block)})


class Normal(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        self.loc, self.scale, self.seed = float(loc), float(scale), seed

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op("gaussian_random", outputs={"Out": var},
                        attrs={"shape": list(var.shape), "dtype": var.dtype, "mean": self.loc,
                               "std": self.scale, "seed": self._seed(block)})


class Xavier(Initializer):
    """Glorot: U(±sqrt(6/(fan_in+fan_out))) or N(0, sqrt(2/(fan_in+fan_out)))."""

    def __init__(self, uniform: bool = True, fan_in: int | None = None,
                 fan_out: int | None = None, seed: int = 0) -> None:
        self.uniform, self.fan_in, self.fan_out, self.seed = uniform, fan_in, fan_out, seed

    def __call__(self, var: Variable, block: Block) -> None:
        fi, fo = _fans(var.shape)
        fi = self.fan_in or fi
        fo = self.fan_out or fo
        if self.uniform:
            lim = math.sqrt(6.0 / (fi + fo))
            Uniform(-lim, lim, self._seed(block))(var, block)
        else:
            Normal(0.0, math.sqrt(2.0 / (fi + fo)), self._seed(block))(var, block)


class MSRA(Initializer):
    """He/Kaiming: U(±sqrt(6/fan_in)) or N(0, sqrt(2/fan_in))."""

    def __init__(self, uniform: bool = True, fan_in: int | None = None, seed: int = 0) -> None:
        self.uniform, self.fan_in, self.seed = uniform, fan_in, seed

    def __call__(self, var: Variable, block: Block) -> None:
        fi = self.fan_in or _fans(var.shape)[0]
        if self.uniform:
            lim = math.sqrt(6.0 / fi)
            Uniform(-lim, lim, self._seed(block))(var, block)
        else:
            Normal(0.0, math.sqrt(2.0 / fi), self._seed(block))(var, block)


# Fluid's longer names
ConstantInitializer = Constant
UniformInitializer = Uniform
NormalInitializer = Normal
XavierInitializer = Xavier
MSRAInitializer = MSRA
