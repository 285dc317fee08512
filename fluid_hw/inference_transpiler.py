"""Fluid's ``fluid.transpiler.InferenceTranspiler``: rewrites an inference program
in place for faster inference, as Fluid 1.5's does -- each test-mode
``batch_norm`` right after a convolution or a fully connected layer is folded into
that layer's weights and bias (the ``conv_bn_fuse`` and ``fc_bn_fuse`` passes),
the folded weights written into the scope beside the originals."""

from __future__ import annotations

from typing import Any

from .ir.program import Block, Program
from .ir.scope import Scope, global_scope
from .passes.base import PassContext, get_pass

__all__ = ["InferenceTranspiler"]

#: the passes ``transpile`` runs, in order
PASSES = ("conv_bn_fuse", "fc_bn_fuse")


def _take_over(program: Program, rewritten: Program) -> None:
    """Make ``program`` the rewritten one (Fluid's transpilers work in place)."""
    program.desc = rewritten.desc
    program._param_extras = rewritten._param_extras
    program.blocks = [Block(program, i) for i in range(len(rewritten.desc.blocks))]
    program._bump()


class InferenceTranspiler:
    """``InferenceTranspiler().transpile(program, place, scope)``: fold batch norms
    of ``program`` (a test program: ``clone(for_test=True)`` or one loaded with
    ``load_inference_model``) into the layers before them."""

    def transpile(self, program: Program, place: Any, scope: Scope | None = None) -> None:
        if not isinstance(program, Program):
            raise TypeError(f"InferenceTranspiler.transpile: program is a "
                            f"{type(program).__name__}; give a fluid_hw.Program")
        ctx = PassContext(scope=scope if scope is not None else global_scope(),
                          feed_names=program.get_feed_target_names() or None,
                          fetch_names=program.get_fetch_target_names() or None)
        for name in PASSES:
            out, changed = get_pass(name).apply(program, ctx)
            if changed:
                _take_over(program, out)
