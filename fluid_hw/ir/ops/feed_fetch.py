"""feed / fetch: how the executor moves data in and out of a program."""

from __future__ import annotations

from ..registry import Attr, InferContext, define_op


@define_op("feed", ["X"], ["Out"], [Attr("col", "int", 0)],
           doc="Out = the col-th entry of the feed list X (set by Executor.run).")
def _feed(ctx: InferContext) -> None:
    pass  # the output variable keeps the shape it was declared with


@define_op("fetch", ["X"], ["Out"], [Attr("col", "int", 0)],
           doc="Store X as the col-th entry of the fetch list Out.")
def _fetch(ctx: InferContext) -> None:
    pass


def _declare_grads() -> None:
    from ..grad import no_grad

    no_grad("io", "feed", "fetch")


_declare_grads()
