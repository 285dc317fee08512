"""feed / fetch kernels: move values between the executor's lists and the scope."""

from __future__ import annotations

from ..context import KernelContext
from . import register_kernel


@register_kernel("feed")
def feed(ctx: KernelContext) -> None:
    col = ctx.attrs["col"]
    ctx.scope.vars[ctx.out_names["Out"][0]] = ctx.input_value("X")[col]


@register_kernel("fetch")
def fetch(ctx: KernelContext) -> None:
    col = ctx.attrs["col"]
    out = ctx.input_value("X")
    target = ctx.scope.find_value(ctx.out_names["Out"][0])
    if target is None:
        target = ctx.scope.vars[ctx.out_names["Out"][0]] = []
    while len(target) <= col:
        target.append(None)
    target[col] = out
