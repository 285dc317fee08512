"""Running passes: a flat list of named steps, groups iterated to a fixpoint,
verification after every pass, IR dumps, and stopping after a named pass.

    pm = PassManager(["prune", fixpoint("remove_identity", "dead_code_elimination"),
                      "fc_fuse"])
    optimised = pm.run(program, PassContext(scope=scope, fetch_names=["prob"]))
    for rec in pm.records: print(rec)

``FLUID_HW_DUMP_IR=<dir>`` (or ``dump_dir=``) writes the program after each pass
as ``<dir>/NN_<pass>.txt`` (readable) and ``.pb`` (loadable), starting with
``00_input``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import FluidError
from ..ir.program import Program
from ..ir.verifier import verify_program
from ..tools import logger
from .base import Pass, PassContext, PassError, get_pass

log = logger("passes")

DUMP_ENV = "FLUID_HW_DUMP_IR"


@dataclass(frozen=True)
class Fixpoint:
    """Passes run in order, again and again, until a whole round changes nothing."""

    passes: tuple[Pass, ...]
    max_rounds: int = 10

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.passes]


def fixpoint(*passes: str | Pass, max_rounds: int = 10) -> Fixpoint:
    """A group for :class:`PassManager` iterated until nothing changes."""
    return Fixpoint(tuple(_resolve(p) for p in passes), max_rounds)


def _resolve(p: str | Pass) -> Pass:
    return get_pass(p) if isinstance(p, str) else p


@dataclass(frozen=True)
class PassRecord:
    """One pass run: whether it changed the program, how long it took, and notes."""

    name: str
    changed: bool
    seconds: float
    round: int = 0
    note: str = ""

    def __str__(self) -> str:
        r = f" (round {self.round})" if self.round else ""
        n = f" - {self.note}" if self.note else ""
        return (f"{self.name:34s}{r:11s} {'changed' if self.changed else 'no change':9s} "
                f"{self.seconds * 1e3:8.2f} ms{n}")


class PassManager:
    """Runs passes by name; see the module docstring."""

    def __init__(self, passes: Sequence[str | Pass | Fixpoint], *, verify: bool = True,
                 dump_dir: str | os.PathLike[str] | None = None,
                 stop_after: str | None = None) -> None:
        self.steps: list[Pass | Fixpoint] = [s if isinstance(s, Fixpoint) else _resolve(s)
                                             for s in passes]
        self.verify = verify
        self.dump_dir = dump_dir
        if stop_after is not None and stop_after not in self.names:
            raise PassError(f"stop_after={stop_after!r} is not a pass of this pipeline "
                            f"({', '.join(self.names)})")
        self.stop_after = stop_after
        self.records: list[PassRecord] = []
        self.context: PassContext | None = None

    @property
    def names(self) -> list[str]:
        out: list[str] = []
        for s in self.steps:
            out += s.names if isinstance(s, Fixpoint) else [s.name]
        return out

    @property
    def passes(self) -> list[Pass]:
        out: list[Pass] = []
        for s in self.steps:
            out += list(s.passes) if isinstance(s, Fixpoint) else [s]
        return out

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        """The program after every step (the input is never modified)."""
        ctx = ctx if ctx is not None else PassContext()
        self.context = ctx
        self.records = []
        for p in self.passes:
            p.check_requirements(ctx)
        dump = self.dump_dir if self.dump_dir is not None else os.environ.get(DUMP_ENV) or None
        self._dump_path = Path(dump) if dump else None
        self._n = 0
        if self.verify:
            self._verify(program, "the input program (before any pass)")
        self._dump(program, "input")
        for step in self.steps:
            if isinstance(step, Pass):
                program, _ = self._run_one(step, program, ctx)
                if step.name == self.stop_after:
                    return program
                continue
            for rnd in range(1, step.max_rounds + 1):
                any_change = False
                for p in step.passes:
                    program, changed = self._run_one(p, program, ctx, rnd)
                    any_change |= changed
                    if p.name == self.stop_after:
                        return program
                if not any_change:
                    break
            else:
                raise PassError(f"passes {step.names} still change the program after "
                                f"{step.max_rounds} rounds; two of them undo each other")
        return program

    def _run_one(self, p: Pass, program: Program, ctx: PassContext,
                 rnd: int = 0) -> tuple[Program, bool]:
        t0 = time.perf_counter()
        try:
            out, changed = p.apply(program, ctx)
        except PassError:
            raise
        except FluidError as e:
            raise PassError(f"pass {p.name!r} failed: {type(e).__name__}: {e}") from e
        dt = time.perf_counter() - t0
        note = ""
        if len(program.blocks) > 1 and not p.handles_sub_blocks:
            note = (f"left {len(program.blocks) - 1} sub-block(s) and the ops holding them "
                    "untouched")
        self.records.append(PassRecord(p.name, changed, dt, rnd, note))
        log.debug("%s", self.records[-1])
        if self.verify:
            self._verify(out, f"the program after pass {p.name!r}")
        self._dump(out, p.name)
        return out, changed

    def _verify(self, program: Program, what: str) -> None:
        try:
            verify_program(program)
        except FluidError as e:
            hint = f" (set {DUMP_ENV}=<dir> to see each step)" if self._dump_path is None else ""
            raise PassError(f"{what} is invalid: {e}{hint}") from e

    def _dump(self, program: Program, name: str) -> None:
        if self._dump_path is None:
            return
        self._dump_path.mkdir(parents=True, exist_ok=True)
        stem = self._dump_path / f"{self._n:02d}_{name}"
        stem.with_suffix(".txt").write_text(str(program) + "\n")
        stem.with_suffix(".pb").write_bytes(program.serialize_to_string())
        self._n += 1


#: the standard inference pipeline's steps (see :func:`inference_pipeline`)
INFERENCE_STEPS: tuple[str | tuple[str, ...], ...] = (
    "prune",
    ("remove_identity", "reshape_transpose_cancel", "constant_folding",
     "dead_code_elimination"),
    "conv_bn_fuse",
    "fc_bn_fuse",
    "fc_fuse",
    "conv_elementwise_add_act_fuse",
    "fuse_elewise_act",
    "dead_code_elimination",
)


def inference_pipeline(*, memory_reuse: bool = False, fuse_elementwise: bool = True,
                       fused_activations: tuple[str, ...] | None = None,
                       verify: bool = True, stop_after: str | None = None) -> PassManager:
    """The standard device-independent optimisation of an inference program, used by
    every back end and by ``fluid-hw compile``:

    prune to the fetch targets (test mode); then, to a fixpoint, remove_identity,
    reshape_transpose_cancel, constant_folding, dead_code_elimination; then fold
    batch norms into convolutions and fc layers and fuse fc, conv+bias+act and
    elementwise+act chains; a last dead-code sweep.  ``memory_reuse=True`` (the CPU
    executor) appends the buffer-sharing pass; ``fuse_elementwise=False`` leaves
    elementwise+activation pairs alone (the quantiser wants them unfused);
    ``fused_activations`` limits the activations fc / conv fusion takes in (the
    quantiser: ``("relu",)``; another activation becomes a table of its own).

    Needs ``PassContext(scope=..., executor=..., fetch_names=...)`` (or a program
    with fetch ops) when run.
    """
    steps: list[str | Pass | Fixpoint] = []
    for s in INFERENCE_STEPS:
        if isinstance(s, tuple):
            steps.append(fixpoint(*s))
        elif s in ("fc_fuse", "conv_elementwise_add_act_fuse") and \
                fused_activations is not None:
            steps.append(get_pass(s, activations=tuple(fused_activations)))
        elif s != "fuse_elewise_act" or fuse_elementwise:
            steps.append(s)
    if memory_reuse:
        steps.append("memory_reuse")
    return PassManager(steps, verify=verify, stop_after=stop_after)
