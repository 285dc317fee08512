"""CPU kernel registry: one numpy function per op type, found by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....errors import UnknownOpError, unknown_name
from ....registries import register_once

if TYPE_CHECKING:
    from ..context import KernelContext

Kernel = Callable[["KernelContext"], None]
_KERNELS: dict[str, Kernel] = {}


def register_kernel(*op_types: str) -> Callable[[Kernel], Kernel]:
    """``@register_kernel("relu")`` registers the function as relu's CPU kernel."""

    def deco(fn: Kernel) -> Kernel:
        for t in op_types:
            register_once(_KERNELS, t, fn, "CPU kernel for")
        return fn

    return deco


def get_kernel(op_type: str) -> Kernel:
    _load()
    try:
        return _KERNELS[op_type]
    except KeyError:
        raise unknown_name("op type for the CPU back end (no kernel)", op_type, _KERNELS,
                           UnknownOpError) from None


def all_kernels() -> dict[str, Kernel]:
    _load()
    return dict(_KERNELS)


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import (  # noqa: F401
            activation,
            activation_more,
            backward_ops,
            beam_search,
            compare,
            control_flow,
            conv_more,
            elementwise,
            extra,
            fake_quant,
            feed_fetch,
            fluid_compat_ops,
            fused,
            interp,
            interp_more,
            lod_array,
            lod_meta,
            loss,
            math,
            metric_more,
            misc_more,
            nn,
            nn_more,
            onnx_extra,
            onnx_quant,
            optimizer,
            optimizer_more,
            quant,
            quant_rnn,
            random,
            roi,
            sequence,
            sequence_labeling,
            sequence_more,
            tensor,
            tensor_more,
        )
