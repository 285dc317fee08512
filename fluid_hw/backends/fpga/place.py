"""``Executor(FPGAPlace(build_dir))``: a compiled model run through its accelerator.

    exe = fluid.Executor(fluid.FPGAPlace("build/mlp"))        # transport="sim"
    exe.run(startup)                                          # see "startup" below
    (prob,) = exe.run(program, feed={"pixels": x}, fetch_list=[prob_var])
    exe.close()

A build runs the one model it was compiled from; the executor runs it through the
host driver (:meth:`fluid_hw.drivers.Accelerator.open`, opened on first use and kept
until :meth:`FPGAExecutor.close`): host *pre* program on the CPU executor, the
accelerator over the transport, host *post* program.  So:

* ``program`` selects, it does not define, what runs: None (the build's model), the
  build's quantised model (``BUILD/model/``), the float model it was compiled from, or
  any program that feeds and fetches the build's names (``host.json`` ``feeds`` /
  ``fetches``).  A program with other feed or fetch targets computes something else
  and is refused (recompile for it).  Parameters in the scope are not read: the
  weights are the build's.
* ``fetch_list``: Variables or names, each one of the build's fetches, in any order
  (the order is honoured).  Intermediate values are not produced by the hardware.
* ``feed``: exactly the build's inputs, checked against the program's variables as
  the CPU executor checks them (dtype, shape, LoD): dense arrays, or LoD tensors of
  variable-length sequences (one LoD level) where the model reads sequences -- the
  sequences stream back to back, unpadded (docs/recurrent.md), and keep their lengths
  across every accelerator region and host segment; a sequence output comes back as a
  LoD tensor (``return_numpy=False``) or its rows.
* ``startup``: a program that only writes persistable variables (parameter
  initialisation) does not touch the scope.  On a ``const`` build (weights built into
  the design) it is a no-op; on a ``runtime`` build it loads the build's compiled
  ``weights.npz`` (:meth:`Accelerator.load`; opening the accelerator loads them too).
  Other weights: ``exe.accelerator.load(image)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers import Accelerator, DriverError, Transport
from ...drivers.build_dir import NAMES, BuildDir
from ...errors import ExecutionError, FeedError, FetchError, FluidError
from ...frontend import io as fio
from ...ir.lod import LoDTensor
from ...ir.program import Program
from ...ir.scope import Scope
from ..cpu.executor import Executor, FeedTarget, check_feed, target_name

__all__ = ["FPGAPlace", "FPGAExecutor", "BuildIO", "read_build_io"]

_COMPILE_HINT = "make one with `fluid-hw compile MODEL_DIR --out {d}`"


class FPGAPlace:
    """The accelerator of the build folder ``build_dir`` (made by ``fluid-hw
    compile``), reached over ``transport`` (``"sim"``: Verilator; ``"serial"``: a
    board; or a :class:`~fluid_hw.drivers.Transport` object) with its options (e.g.
    ``ready_prob=``, ``trace=``).
    ``Executor(FPGAPlace(...))`` is an :class:`FPGAExecutor`."""

    def __init__(self, build_dir: str | os.PathLike[str], transport: str | Transport = "sim",
                 **transport_options: Any) -> None:
        self.build_dir = Path(build_dir)
        self.transport = transport
        self.transport_options = dict(transport_options)

    def _key(self) -> tuple[Any, ...]:
        return (str(self.build_dir), self.transport, sorted(self.transport_options.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FPGAPlace) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((str(self.build_dir), str(self.transport)))

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.transport_options.items())
        return f"FPGAPlace({str(self.build_dir)!r}, transport={self.transport!r}{opts})"


@dataclass(frozen=True)
class BuildIO:
    """What a build computes: its input and output names, and its weights mode."""

    feeds: list[str]
    fetches: list[str]
    weights: str  # "const" or "runtime"


def read_build_io(build_dir: str | os.PathLike[str]) -> BuildIO:
    """The feeds and fetches of a build folder (``host/host.json``, or ``segments.json``
    for a build of several accelerator regions) and its weights mode."""
    d = Path(build_dir)
    if not d.is_dir():
        raise DriverError(f"{d}: no such build folder; {_COMPILE_HINT.format(d=d)}")
    # single-region builds describe their host side in host/host.json; multi-region
    # builds in segments.json: both carry the model's `feeds` and `fetches`
    for path in (d / NAMES["host_json"], d / NAMES["segments"]):
        if path.is_file():
            break
    else:
        raise DriverError(f"{d}: not a build folder (no host/host.json); "
                          f"{_COMPILE_HINT.format(d=d)}")
    bd = BuildDir(d)  # checked against its manifest, the file's fields validated
    if path.name == NAMES["segments"]:
        doc = bd.segments()
        feeds, fetches = list(doc["feeds"]), list(doc["fetches"])
        weights = bd.report().get("weights") or "const"
    else:
        host = bd.host()
        feeds, fetches, weights = host.feeds, host.fetches, host.weights
    return BuildIO(feeds, fetches, str(weights))


@dataclass
class _Checked:
    """A program found to be the build's model (or its startup)."""

    program: Program
    version: int
    startup: bool
    feeds: dict[str, FeedTarget]


class FPGAExecutor(Executor):
    """Runs a compiled model through its accelerator (see the module docstring)."""

    place: FPGAPlace

    def __init__(self, place: Any = None, seed: int | None = None) -> None:
        if not isinstance(place, FPGAPlace):
            raise ExecutionError(f"FPGAExecutor needs an FPGAPlace(build_dir), got {place!r}")
        super().__init__(place, seed)
        self.build = read_build_io(place.build_dir)
        self._acc: Any = None
        self._model: Program | None = None
        self._checked: dict[tuple[int, bool], _Checked] = {}

    @property
    def build_dir(self) -> Path:
        return self.place.build_dir

    @property
    def accelerator(self) -> Any:
        """The driver of the build (:meth:`Accelerator.open`), opened on first use and
        kept until :meth:`close`: counters, ``load(image)``..."""
        if self._acc is None:
            p = self.place
            self._acc = Accelerator.open(p.build_dir, p.transport, **p.transport_options)
        return self._acc

    def close(self) -> None:
        """Close the accelerator's link (a later run opens it again)."""
        acc, self._acc = self._acc, None
        if acc is not None:
            acc.close()
        self._checked.clear()
        super().close()

    # -- what the program is -------------------------------------------------------------
    def _build_model(self) -> Program:
        """``BUILD/model/``: the quantised program as compiled (for ``program=None``)."""
        if self._model is None:
            d = self.build_dir / "model"
            try:
                self._model, _, _ = fio.load_inference_model(d, Executor(), scope=Scope())
            except FluidError as e:
                raise DriverError(f"{d}: cannot load the build's model ({e}); recompile "
                                  f"(`fluid-hw compile MODEL_DIR --out {self.build_dir}`)"
                                  ) from None
        return self._model

    def _check_program(self, program: Program, startup_ok: bool) -> _Checked:
        key = (id(program), startup_ok)
        hit = self._checked.get(key)
        if hit is not None and hit.program is program and hit.version == program._version:
            return hit
        gb = program.global_block()
        ops = list(gb.ops)
        fed = [n for _, n in sorted((op.attr("col"), op.output("Out")[0])
                                    for op in ops if op.type == "feed")]
        fetched = [n for _, n in sorted((op.attr("col"), op.input("X")[0])
                                        for op in ops if op.type == "fetch")]
        startup = not fed and not fetched and all(
            (v := gb._find_var_recursive(n)) is not None and v.persistable
            for op in ops for n in op.output_arg_names)
        if startup and startup_ok:
            hit = _Checked(program, program._version, True, {})
        else:
            self._check_computes_the_build(program, fed, fetched)
            hit = _Checked(program, program._version, False,
                           {n: FeedTarget.of(gb._var_recursive(n))
                            for n in self.build.feeds})
        self._checked[key] = hit
        return hit

    def _check_computes_the_build(self, program: Program, fed: list[str],
                                  fetched: list[str]) -> None:
        b = self.build
        problems = []
        if fed or fetched:  # an inference program: its own feed and fetch targets
            for what, mine, theirs in (("feeds", fed, b.feeds), ("fetches", fetched,
                                                                   b.fetches)):
                extra = [n for n in mine if n not in theirs]
                lacking = [n for n in theirs if n not in mine]
                if extra or lacking:
                    problems.append(f"{what} differ (the program's only: {extra}; the "
                                    f"build's only: {lacking})")
        else:  # a program built in Python: it must hold the build's inputs and outputs
            gb = program.global_block()
            lacking = [n for n in b.feeds + b.fetches if gb._find_var_recursive(n) is None]
            if lacking:
                problems.append(f"the program has no variable(s) {lacking} (the build "
                                f"feeds {b.feeds}, fetches {b.fetches})")
        if problems:
            raise ExecutionError(
                f"the program computes something else than the build {self.build_dir}: "
                f"{'; '.join(problems)}.  A build runs only the model it was compiled "
                f"from: recompile it for this program (`fluid-hw compile MODEL_DIR --out "
                f"{self.build_dir}`), or run the program with Executor(CPUPlace())")

    # -- feeds and fetches --------------------------------------------------------------
    def _fetch_names(self, fetch_list: Sequence[Any] | None) -> list[str]:
        names = [target_name(f) for f in (fetch_list or [])]
        bad = [n for n in names if n not in self.build.fetches]
        if bad:
            raise FetchError(f"fetch target(s) {bad}: the build {self.build_dir} produces "
                             f"only {self.build.fetches} (intermediate values stay in the "
                             "hardware; fetch them with Executor(CPUPlace()) on the build's "
                             "model/)")
        return names

    def _feed_values(self, checked: _Checked, feed: Mapping[str, Any]
                     ) -> dict[str, Any]:
        want = self.build.feeds
        missing = [n for n in want if n not in feed]
        extra = [n for n in feed if n not in want]
        if missing or extra:
            what = (f"no value for {missing}" if missing else "") + \
                ("; " if missing and extra else "") + \
                (f"{extra} not read by the build (drop them)" if extra else "")
            raise FeedError(f"feed: {what}; the build {self.build_dir} reads exactly {want}")
        out = {}
        for n in want:
            value = feed[n]
            t = checked.feeds[n]
            lod = isinstance(value, LoDTensor) and bool(value.lod())
            if lod and not t.lod_level:
                raise FeedError(f"feed {n!r}: a LoD tensor (variable-length sequences), but "
                                "the program's variable has lod_level 0 and the accelerator "
                                "takes fixed-shape batches: feed a dense array")
            if lod and len(value.lod()) != 1:
                raise FeedError(f"feed {n!r}: {len(value.lod())} LoD levels; the accelerator "
                                "streams one level of sequences (lengths, no nesting)")
            checked_value = check_feed(t, value)  # a LoD tensor stays one
            if not lod and isinstance(checked_value, LoDTensor):
                checked_value = np.asarray(checked_value.data)
            out[n] = checked_value
        return out

    # -- running -------------------------------------------------------------------------
    def run(
        self,
        program: Program | None = None,
        feed: Mapping[str, Any] | None = None,
        fetch_list: Sequence[Any] | None = None,
        feed_var_name: str = "feed",
        fetch_var_name: str = "fetch",
        scope: Scope | None = None,
        return_numpy: bool = True,
        use_program_cache: bool = True,
    ) -> list[Any]:
        """Run the build's model: ``program`` None, its model or one with the same feeds
        and fetches; a startup program loads runtime weights (module docstring).
        ``scope``, ``feed_var_name``, ``fetch_var_name`` are accepted for Fluid
        compatibility and unused: the accelerator holds its own state."""
        feed = dict(feed or {})
        if program is None:
            program = self._build_model()
        elif not isinstance(program, Program):
            raise ExecutionError(f"Executor(FPGAPlace) runs a Program (or None: the build's "
                                 f"model), got {type(program).__name__}")
        if not use_program_cache:
            self._checked.clear()
        checked = self._check_program(program, startup_ok=not feed and not fetch_list)
        if checked.startup:
            if self.build.weights == "runtime":
                if self._acc is None:
                    _ = self.accelerator  # opening loads the compiled weights
                else:
                    self._acc.load()
            return []
        names = self._fetch_names(fetch_list)
        values = self._feed_values(checked, feed)
        outs = dict(zip(self.build.fetches, self.accelerator.run(values)))
        if return_numpy:
            return [np.asarray(outs[n]) for n in names]
        return [outs[n] if isinstance(outs[n], LoDTensor) else LoDTensor(np.asarray(outs[n]))
                for n in names]

    def __repr__(self) -> str:
        return f"Executor({self.place!r})"
