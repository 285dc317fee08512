"""Passes: the base class, the context a pass runs in, and the registry by name.

A pass is ``apply(program, ctx=None) -> (program, changed)``.  It never mutates
its input: :meth:`Pass.apply` clones the program and rewrites the copy.

Passes that rewrite parameter *values* (``conv_bn_fuse``, ``fc_bn_fuse``,
``constant_folding``) read them from ``ctx.scope`` -- a :class:`fluid_hw.ir.scope.Scope`
or any mutable mapping of name -> numpy array -- and never overwrite a value there: they add
new persistable variables with fresh names to the returned program and write
their values into that same scope (its *companion* scope).  The input program
therefore still runs unchanged in the scope, and the output program runs in it
too (or is saved from it with ``io.save_inference_model``).

Passes that need to run ops at compile time (``constant_folding``; calibration in
:func:`fluid_hw.passes.quantize`) take an executor through ``ctx.executor``: any
object with ``run(program, feed=..., fetch_list=..., scope=...) -> list of
arrays`` (the CPU ``Executor`` is one).  ``passes`` may import only ``ir``, so it
never constructs one itself.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from ..errors import PassError, unknown_name
from ..ir.lod import LoDTensor
from ..ir.program import Program
from ..ir.scope import Scope
from ..registries import register_once


class Runner(Protocol):
    """The executor a pass may use: ``fluid_hw.Executor`` satisfies it."""

    def run(self, program: Any = None, feed: Any = None, fetch_list: Any = None, *,
            scope: Any = None) -> list[Any]: ...


#: where parameter values live: a Scope or a plain dict of arrays
ParamStore = Scope | MutableMapping[str, np.ndarray]


def get_value(store: ParamStore, name: str) -> np.ndarray | None:
    """The array ``name`` holds in ``store`` (None when it has none)."""
    if isinstance(store, Scope):
        v = store.find_value(name)
    else:
        v = store.get(name)
    if v is None:
        return None
    return v.data if isinstance(v, LoDTensor) else np.asarray(v)


def set_value(store: ParamStore, name: str, value: np.ndarray) -> None:
    if isinstance(store, Scope):
        store.vars[name] = value
    else:
        store[name] = value


@dataclass
class PassContext:
    """What passes may use besides the program.

    * ``scope``: parameter values (read by, and written to by, weight-rewriting passes);
    * ``executor``: runs ops at compile time (see :class:`Runner`);
    * ``feed_names`` / ``fetch_names``: the program's inputs and outputs.  When not
      given, a program's ``feed`` / ``fetch`` ops say them; a program with neither
      has unknown outputs: every variable that no op reads counts as one.
    * ``reports``: passes leave results here by pass name (``memory_reuse``'s plan).
    """

    scope: ParamStore | None = None
    executor: Runner | None = None
    feed_names: Sequence[str] | None = None
    fetch_names: Sequence[str] | None = None
    reports: dict[str, Any] = field(default_factory=dict)


class Pass:
    """Base class: subclasses set ``name`` and implement :meth:`run` on a copy.

    ``handles_sub_blocks = False`` (every pass here but ``rnn_loop_to_sequence``,
    which replaces a loop and empties its block) means: the pass rewrites the global
    block only; ops that hold sub-blocks and every variable a sub-block reads or writes
    are left exactly as they are.  ``requires`` names the context
    fields the pass cannot do without (``"scope"``, ``"executor"``).
    """

    name: ClassVar[str] = ""
    handles_sub_blocks: ClassVar[bool] = False
    requires: ClassVar[tuple[str, ...]] = ()

    def apply(self, program: Program, ctx: PassContext | None = None) -> tuple[Program, bool]:
        """A rewritten copy of ``program`` and whether anything changed."""
        ctx = ctx if ctx is not None else PassContext()
        self.check_requirements(ctx)
        out = program.clone()
        changed = self.run(out, ctx)
        return out, bool(changed)

    def run(self, program: Program, ctx: PassContext) -> bool:
        """Rewrite ``program`` (already a private copy) in place; return whether it changed."""
        raise NotImplementedError

    def check_requirements(self, ctx: PassContext) -> None:
        fixes = {
            "scope": ("a scope", "pass the parameters: PassContext(scope=<Scope or dict of "
                      "arrays>)"),
            "executor": ("an executor", "pass one: PassContext(executor=fluid_hw.Executor())"),
        }
        for req in self.requires:
            if getattr(ctx, req) is None:
                what, fix = fixes[req]
                raise PassError(f"pass {self.name!r} needs {what}: {fix}, or leave the pass "
                                "out of the pipeline")

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


_PASSES: dict[str, type[Pass]] = {}

P = TypeVar("P", bound=type[Pass])


def register_pass(cls: P) -> P:
    """Class decorator: make a pass available to :func:`get_pass` by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    as_pass: type[Pass] = cls
    register_once(_PASSES, cls.name, as_pass, "pass")
    return cls


def get_pass(name: str, **options: Any) -> Pass:
    """A new instance of pass ``name`` (``options`` go to its constructor)."""
    _load()
    try:
        cls = _PASSES[name]
    except KeyError:
        raise unknown_name("pass", name, _PASSES) from None
    return cls(**options)


def all_passes() -> dict[str, type[Pass]]:
    _load()
    return dict(_PASSES)


def unregister_pass(name: str) -> None:
    """Remove a pass (for tests that register temporary ones)."""
    _PASSES.pop(name, None)


#: the modules of this package that register passes (imported on the first lookup, not
#: at import time: a pass module imports this one); a module with ``@register_pass``
#: belongs here, or ``get_pass`` does not know its pass until something imports it
PASS_MODULES = (
    "constant_folding", "conv_bn_fuse", "conv_elementwise_add_act_fuse",
    "dead_code_elimination", "fc_bn_fuse", "fc_fuse", "fuse_elewise_act", "memory_reuse",
    "prune", "qdq_fold", "quantize_rnn_loop", "remove_identity", "reshape_transpose_cancel",
)

_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in PASS_MODULES:
            importlib.import_module(f"{__package__}.{mod}")
