"""fill_constant / uniform_random / gaussian_random."""

from __future__ import annotations

import numpy as np

from ....ir import dtypes
from ..context import KernelContext
from . import register_kernel


@register_kernel("fill_constant")
def fill_constant(ctx: KernelContext) -> None:
    a = ctx.attrs
    ctx.set_output("Out", np.full(a["shape"], a["value"], dtype=dtypes.to_numpy(a["dtype"])))


@register_kernel("uniform_random")
def uniform_random(ctx: KernelContext) -> None:
    a = ctx.attrs
    v = ctx.rng().uniform(a["min"], a["max"], size=a["shape"])
    ctx.set_output("Out", v.astype(dtypes.to_numpy(a["dtype"])))


@register_kernel("gaussian_random")
def gaussian_random(ctx: KernelContext) -> None:
    a = ctx.attrs
    v = ctx.rng().normal(a["mean"], a["std"], size=a["shape"])
    ctx.set_output("Out", v.astype(dtypes.to_numpy(a["dtype"])))
