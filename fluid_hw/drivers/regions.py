"""The host API of a build with several accelerator regions (CPU fallback anywhere).

    acc = Accelerator.open("build/net")     # a RegionedAccelerator for such a build
    (prob,) = acc.run(x)                    # host seg 0, region 0, host seg 1, ...

A multi-region build (``segments.json``; see ``fluid_hw.backends.fpga.regions``) is
host programs ``host/seg<k>.pb`` and one single-region build per accelerator region in
``regions/<k>/``.  :meth:`RegionedAccelerator.run` runs host segment ``k`` on the CPU
executor to compute region ``k``'s int8 input, streams it through region ``k``
(:meth:`Accelerator.run_int` over its own transport), and after the last region the
last host segment computes the model's outputs.  Each region is its own accelerator
(own stream ports and registers); over the simulation transport each has its own
Verilator model.  A transport that reaches all regions over one link registers an
opener (:func:`register_region_opener`): ``"serial"`` opens the port once, and each
region's transport selects its region address on the bitstream's one UART bridge.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu import Executor
from ..ir.program import Program
from ..ir.scope import Scope
from .build_dir import NAMES, BuildDir
from .host_side import feed_dict, host_errors, read_host_program, run_host_program
from .transport import DriverError, ParamImage, Transport

__all__ = ["RegionedAccelerator", "SEGMENTS", "register_region_opener"]

SEGMENTS = NAMES["segments"]

#: transport name -> opener(build_dir, region_dirs, **options) -> one transport per region
_REGION_OPENERS: dict[str, Callable[..., list[Transport]]] = {}


def register_region_opener(name: str, opener: Callable[..., list[Transport]]) -> None:
    """Make ``transport=name`` open a multi-region build's regions together (one link for
    all, e.g. one serial port) instead of one transport per region by name."""
    _REGION_OPENERS[name] = opener


class RegionedAccelerator:
    """A compiled model whose accelerator is several regions with host segments between
    (see the module docstring); the same ``run`` / ``counters`` / ``load`` / ``close``
    API as :class:`~.accelerator.Accelerator`."""

    def __init__(self, build_dir: Path, doc: dict[str, Any], host: list[Program],
                 params: dict[str, np.ndarray], regions: list[Any]) -> None:
        self.build_dir = build_dir
        self.feeds: list[str] = list(doc["feeds"])
        self.fetches: list[str] = list(doc["fetches"])
        self.region_info: list[dict[str, Any]] = list(doc["regions"])
        self.host_programs = host
        self.regions = regions
        self.scope = Scope()
        self.scope.vars.update(params)
        self.executor = Executor()

    @classmethod
    def open(cls, build_dir: str | os.PathLike[str], transport: str | Transport = "sim", *,
             load_weights: bool = True, check: bool = True, **options: Any
             ) -> RegionedAccelerator:
        from .accelerator import Accelerator

        d = Path(build_dir)
        bd = BuildDir(d)
        doc = bd.segments()  # the folder checked against its manifest, the file's fields
        regions_doc = doc["regions"]
        host_files = [d / h for h in doc["host"]]
        if isinstance(transport, Transport):
            raise DriverError(f"{d} has {len(regions_doc)} accelerator regions, each its own "
                              "accelerator: give the transport by name (e.g. 'sim'), one is "
                              "opened per region")
        host = [read_host_program(p) for p in host_files]
        params = bd.host_params()
        dirs = [d / r["dir"] for r in regions_doc]
        opener = _REGION_OPENERS.get(transport)
        links: list[Any] = opener(d, dirs, **options) if opener else [transport] * len(dirs)
        regions: list[Any] = []
        try:
            for k, (rd, t) in enumerate(zip(dirs, links)):
                regions.append(Accelerator.open(rd, t, load_weights=load_weights, check=check,
                                                **({} if opener else options)))
                links[k] = None
        except BaseException:
            for acc in regions:
                acc.close()
            for t in links:   # the transports no region took
                if isinstance(t, Transport):
                    t.close()
            raise
        return cls(d, doc, host, params, regions)

    # -- hardware ----------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """The counter registers of every region, summed (per region: ``region_counters``)."""
        total: dict[str, int] = {}
        for acc in self.regions:
            for k, v in acc.counters().items():
                total[k] = total.get(k, 0) + int(v)
        return total

    def region_counters(self) -> list[dict[str, int]]:
        return [acc.counters() for acc in self.regions]

    def load(self, image: ParamImage | str | os.PathLike[str] | None = None) -> int:
        """Load every runtime-weights region's compiled weights (an image applies to one
        region only: use ``regions[k].load(image)``)."""
        if image is not None:
            raise DriverError("a multi-region build loads each region's own weights: call "
                              "regions[k].load(image) for the region the image belongs to")
        return sum(acc.load() for acc in self.regions if acc.host.weights == "runtime")

    # -- the model ---------------------------------------------------------------------
    def _feed(self, batch: Any) -> dict[str, np.ndarray]:
        return feed_dict(batch, self.feeds, self.host_programs[:1])

    def run(self, batch: Any) -> list[Any]:
        """The model on a batch (an array for a one-input model, or a dict name ->
        array; LoD tensors of sequences): its outputs, one array per fetch target (a LoD
        tensor where it holds sequences).  Sequences keep their lengths across every
        boundary (:meth:`~.accelerator.Accelerator.run_value`)."""
        values = self._feed(batch)
        scope = Scope(self.scope)
        with host_errors(self.build_dir):
            for k, (acc, info) in enumerate(zip(self.regions, self.region_info)):
                (x,) = run_host_program(self.executor, self.host_programs[k], values,
                                        [info["hw_input"]], scope)
                values[info["hw_output"]] = acc.run_value(x)
            return run_host_program(self.executor, self.host_programs[-1], values,
                                    self.fetches, scope)

    def close(self) -> None:
        for acc in self.regions:
            acc.close()

    def __enter__(self) -> RegionedAccelerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"RegionedAccelerator({str(self.build_dir)!r}, regions={len(self.regions)}, "
                f"feeds={self.feeds}, fetches={self.fetches})")
