"""The host API of a compiled accelerator.

    acc = Accelerator.open("build/mlp", transport="sim")
    (prob,) = acc.run(x)          # float inputs in, the model's outputs out
    acc.counters()                # CYCLES, INFERENCES, BUSY_CYCLES, ... (registers)
    acc.load()                    # runtime weights: the compiled ones, or an image

``run`` is the whole model: the build's *pre* host program (quantising the float
input) on the CPU executor, the accelerator over the transport, then the *post*
host program (dequantising, softmax, arg_max...).  What a build folder holds for it
(``fluid_hw.backends.fpga`` writes them):

* ``design.json``, ``accelerator.v``: the hardware (stream formats, registers);
* ``host/host.json``: feeds, fetches, the values crossing the boundary, and the
  element order of the streams (``in_perm``: stream position -> element of one
  example's flattened accelerator input; ``out_perm`` likewise for the output);
* ``host/pre.pb``, ``host/post.pb``, ``host/params.npz``: the host programs;
* ``weights.npz`` (runtime weights): the parameter image to load.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu import Executor
from ..errors import FluidError
from ..fileio import read_npz
from ..ir.lod import LoDTensor, lengths_to_offsets, offsets_to_lengths, reversed_rows
from ..ir.program import Program
from ..ir.scope import Scope
from . import sim as _sim  # noqa: F401  (registers the "sim" transport)
from .build_dir import (
    BuildDir,
    BuildDirError,
    HostFile,
    _image_check,
    _savez_bytes,
    atomic_write_file,
    read_param_image,
)
from .host_side import feed_dict, host_errors, read_host_program, run_host_program
from .regions import RegionedAccelerator
from .transport import (
    DriverError,
    ParamImage,
    StreamResult,
    Transport,
    check_param_image,
    get_transport,
)

__all__ = ["Accelerator", "HostInfo", "RunRecord", "load_param_image", "save_param_image",
           "ACCEL_ID"]

ACCEL_ID = 0x464C4857  # "FLHW", the ID register of every fluid-hw accelerator
CONTROL_ENABLE, CONTROL_CLEAR = 0b001, 0b100


def save_param_image(path: str | os.PathLike[str], image: ParamImage) -> None:
    """Write a runtime parameter image (``(base, words)`` segments) as ``.npz``
    (atomically: a per-process temporary renamed over ``path``)."""
    bases = np.array([b for b, _ in image], np.int64)
    lengths = np.array([len(w) for _, w in image], np.int64)
    words = np.concatenate([np.asarray(w, np.uint32) for _, w in image]) if len(image) \
        else np.zeros(0, np.uint32)
    atomic_write_file(path, _savez_bytes({"bases": bases, "lengths": lengths,
                                          "words": words}))


def load_param_image(path: str | os.PathLike[str]) -> list[tuple[int, np.ndarray]]:
    """Read an image written by :func:`save_param_image` (bounded, validated: int64
    bases and lengths, uint32 words, lengths that add up)."""
    p = Path(path)

    def bad(detail: str) -> DriverError:
        return DriverError(f"{p}: not a parameter image ({detail}); recompile with "
                           "--weights runtime")
    try:
        z = read_npz(p, kind="params", names=("bases", "lengths", "words"),
                     check=_image_check(p))
    except BuildDirError:
        raise
    except FluidError as e:
        raise bad(str(e)) from None
    return read_param_image(p, z, bad)


class HostInfo(HostFile):
    """``host/host.json``: the host side of the partition (:class:`HostFile`, read by
    its path)."""

    @classmethod
    def read(cls, path: Path) -> HostInfo:
        """``BUILD/host/host.json`` (through :meth:`BuildDir.host`: checked against the
        build's manifest, its fields validated)."""
        return cls(**vars(BuildDir(path.parent.parent).host()))


@dataclass(frozen=True)
class RunRecord:
    """What the last :meth:`Accelerator.run` saw: the accelerator's input and output
    values (program order, ``[N, ...]``), the stream result (timestamps) and the
    counter registers after the run (cleared before it)."""

    hw_inputs: np.ndarray
    hw_outputs: np.ndarray
    stream: StreamResult
    counters: dict[str, int]


class Accelerator:
    """A compiled model on an accelerator (see the module docstring)."""

    def __init__(self, build_dir: Path, transport: Transport, host: HostInfo,
                 programs: dict[str, Program], params: dict[str, np.ndarray]) -> None:
        self.build_dir = build_dir
        self.transport = transport
        self.host = host
        self.programs = programs
        self.scope = Scope()
        self.scope.vars.update(params)
        self.executor = Executor()
        self.last: RunRecord | None = None

    @classmethod
    def open(cls, build_dir: str | os.PathLike[str], transport: str | Transport = "sim", *,
             load_weights: bool = True, check: bool = True, **options: Any) -> Accelerator:
        """Connect to the accelerator of ``build_dir`` over ``transport`` (a name, with
        its ``options``, e.g. ``trace=``, ``ready_prob=``; or a Transport).  Checks the
        ID and design-hash registers against the build (``check``) and, for runtime
        weights, loads the compiled ones (``load_weights``)."""
        d = Path(build_dir)
        if not d.is_dir():
            raise DriverError(f"{d}: no such build folder; make one with `fluid-hw compile`")
        bd = BuildDir(d)
        if bd.is_regioned:  # several accelerator regions: same API
            return RegionedAccelerator.open(d, transport, load_weights=load_weights,  # type: ignore[return-value]
                                            check=check, **options)
        host = HostInfo(**vars(bd.host()))  # the folder checked against its manifest
        programs = {part: read_host_program(d / "host" / f"{part}.pb")
                    for part in ("pre", "post")}
        params = bd.host_params()
        t = transport if isinstance(transport, Transport) else \
            get_transport(transport, d, **options)
        acc = cls(d, t, host, programs, params)
        try:
            if check:
                acc.check()
            if load_weights and host.weights == "runtime":
                acc.load()
        except BaseException:
            t.close()
            raise
        return acc

    # -- hardware ----------------------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        """The design description (``design.json``)."""
        return self.transport.info

    def check(self) -> None:
        """The hardware is a fluid-hw accelerator of this build (ID, DESIGN_HASH)."""
        ident = self.transport.read_register("ID")
        if ident != ACCEL_ID:
            raise DriverError(f"the device answers ID 0x{ident:08X}, not a fluid-hw "
                              f"accelerator (0x{ACCEL_ID:08X})")
        want = int(self.host.design_hash[:8], 16)
        got = self.transport.read_register("DESIGN_HASH")
        if got != want:
            raise DriverError(f"the device runs design 0x{got:08X}, but {self.build_dir} was "
                              f"compiled for 0x{want:08X}: load the matching bitstream or "
                              "recompile")

    def load(self, image: ParamImage | str | os.PathLike[str] | None = None) -> int:
        """Load runtime weights: the build's ``weights.npz`` (default), another image
        file, or an image (``(word address, uint32 words)`` segments, e.g. from
        ``fluid_hw.backends.fpga.param_image``); each of its segments must be a whole
        parameter memory of this design (:func:`~.transport.check_param_image`).
        Returns the words written."""
        if self.host.weights != "runtime":
            raise DriverError(f"{self.build_dir} has constant weights built into the design; "
                              "compile with --weights runtime to load weights")
        source = "the parameter image"
        if image is None:
            source = str(BuildDir(self.build_dir).file("weights"))
            image = BuildDir(self.build_dir).weights()
        if isinstance(image, str | os.PathLike):
            source = str(image)
            image = load_param_image(image)
        check_param_image(self.info, image, source)
        return self.transport.load_params(image)

    def counters(self) -> dict[str, int]:
        """The counter registers (CYCLES, BUSY_CYCLES, INFERENCES, INPUTS, stalls)."""
        return self.transport.counters()

    def clear_counters(self) -> None:
        self.transport.write_register("CONTROL", CONTROL_ENABLE | CONTROL_CLEAR)

    def run_int(self, hw_inputs: np.ndarray) -> np.ndarray:
        """The accelerator alone: its integer input values (program order, ``[N, ...]``)
        -> its integer outputs (program order, ``[N, *out_shape]``)."""
        x = np.asarray(hw_inputs)
        n = len(x)
        flat = x.reshape(n, -1)
        if flat.shape[1] != len(self.host.in_perm):
            raise DriverError(f"the accelerator takes {len(self.host.in_perm)} values per "
                              f"example ({self.host.hw_input}), got {flat.shape[1]}")
        self.clear_counters()
        res = self.transport.stream(flat[:, self.host.in_perm])
        out = np.empty_like(res.outputs)
        out[:, self.host.out_perm] = res.outputs
        y = out.reshape(n, *self.host.out_shape)
        self.last = RunRecord(x, y, res, self.counters())
        return y

    def run_int_sequences(self, steps: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        """The accelerator alone on variable-length sequences (a design whose first stage
        is recurrent): the integer steps of every sequence back to back (program order,
        ``[sum(lengths), ...]``) -> ``[N, *out_shape]`` (the last step's output) or
        ``[sum(lengths), *out_shape]`` (every step's, design mode ``"sequence"``).  A
        build whose recurrence runs backwards (``is_reverse``: host.json
        ``reverse_sequences``) gets each sequence's steps last first, and its
        whole-sequence output is put back in program order."""
        mode = self.info.get("sequence")
        if mode is None:
            raise DriverError(f"{self.build_dir}: the accelerator takes fixed-size items, not "
                              "sequences (its first stage is not recurrent)")
        x = np.asarray(steps)
        ln = [int(v) for v in lengths]
        if any(v < 1 for v in ln):
            raise DriverError("a sequence of no steps cannot be streamed (every sequence "
                              "needs at least one step)")
        flat = x.reshape(len(x), -1)
        if len(flat) != sum(ln):
            raise DriverError(f"{len(flat)} steps for sequences of {sum(ln)} steps in all")
        if flat.shape[1] != len(self.host.in_perm):
            raise DriverError(f"the accelerator takes {len(self.host.in_perm)} values per "
                              f"step ({self.host.hw_input}), got {flat.shape[1]}")
        self.clear_counters()
        # is_reverse: every sequence's steps go out last first (and come back in order)
        order = reversed_rows(lengths_to_offsets(ln)) if self.host.reverse_sequences \
            else None
        if order is not None:
            flat = flat[order]
        res = self.transport.stream_sequences(flat[:, self.host.in_perm], ln)
        out = np.empty_like(res.outputs)
        out[:, self.host.out_perm] = res.outputs
        if order is not None and mode == "sequence":
            out[order] = out.copy()
        y = out.reshape(len(out), *self.host.out_shape)
        self.last = RunRecord(x, y, res, self.counters())
        return y

    def run_value(self, x: Any) -> Any:
        """The accelerator on its input value as a host program computes it, its output
        as the next host program reads it.  ``design.json``'s ``sequence`` says what the
        stages do to sequences (a LoD tensor's rows, one a step):

        * none (every stage per row): a row out for every row in, so a LoD input's
          output keeps its LoD (its sequences' lengths);
        * ``"sequence"`` (recurrent first stage, every step out): the input's lengths;
        * ``"last"`` (recurrent first stage, its last step out): one row a sequence, no
          LoD.
        """
        lod = x.lod() if isinstance(x, LoDTensor) else []
        data = np.asarray(x.data if isinstance(x, LoDTensor) else x)
        mode = self.info.get("sequence")
        if mode is None:
            y = self.run_int(data)
            return LoDTensor(y, [list(level) for level in lod]) if lod else y
        if len(lod) != 1:
            raise DriverError(
                f"{self.build_dir}: the accelerator takes variable-length sequences: feed "
                f"{self.host.hw_input!r} as a LoD tensor of one level "
                f"(fluid.create_lod_tensor(data, [lengths])), not "
                + (f"{len(lod)} levels" if lod else "a dense array"))
        lengths = offsets_to_lengths(lod[0])
        y = self.run_int_sequences(data, lengths)
        return LoDTensor(y, [lengths_to_offsets(lengths)]) if mode == "sequence" else y

    # -- the model ---------------------------------------------------------------------
    def _feed(self, batch: Any) -> dict[str, Any]:
        """The inputs by name; float arrays converted to the input's float dtype."""
        return feed_dict(batch, self.host.feeds, list(self.programs.values()))

    def run(self, batch: Any) -> list[Any]:
        """The model on a batch of float inputs (an array for a one-input model, or a
        dict name -> array; LoD tensors of variable-length sequences): the model's
        outputs, one array per fetch target (a LoD tensor where it holds sequences)."""
        values = self._feed(batch)
        scope = Scope(self.scope)
        with host_errors(self.build_dir):
            (x,) = run_host_program(self.executor, self.programs["pre"], values,
                                    [self.host.hw_input], scope)
            values[self.host.hw_output] = self.run_value(x)
            return run_host_program(self.executor, self.programs["post"], values,
                                    self.host.fetches, scope)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Accelerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Accelerator({str(self.build_dir)!r}, transport={self.transport.name!r}, "
                f"feeds={self.host.feeds}, fetches={self.host.fetches})")

