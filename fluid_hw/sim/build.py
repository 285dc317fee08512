"""Verilator builds, cached by a hash of what goes into them.

A build directory ``<cache>/<kind>/<key>/`` holds ``accelerator.v``, ``design.json``,
the generated sources and the product.  The key hashes the Verilog text (so runtime
weights, which are not in the Verilog, never cause a rebuild), the driver source,
the flags and the Verilator version.  Builds are made in a private temporary
directory and renamed into place, under a file lock, so parallel test workers
neither collide nor build the same design twice.  Verilator's runtime objects
(``verilated.o`` ...) are built once per flag set and reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fluid_hw.rtl import CCU2C_SIM, MULT18X18D_SIM, TRELLIS_FF_SIM, AcceleratorTop

from ._harness_cpp import HARNESS_CPP
from ._harness_seq_cpp import SEQ_CPP
from ._tools import (
    SimBuildError,
    ToolNotFoundError,
    cache_dir,
    log,
    verilator,
    verilator_env,
    verilator_version,
)
from .verilog import emit_verilog

__all__ = ["HarnessBuild", "build_harness", "build_harness_verilog", "verilate", "build_lock",
           "sim_cells", "slim", "keep_failed", "MAKE_OPT", "VERILATOR_FLAGS"]

#: C++ optimisation of Verilator's generated code: -O2 for the per-cycle code (1.5 M vs
#: 1.2 M cycles/s at -O1 on the digits MLP, for a similar compile time), -O0 for the
#: one-time set-up code.
MAKE_OPT = {"OPT_FAST": "-O2", "OPT_SLOW": "-O0", "OPT_GLOBAL": "-O1"}
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast",
                   "--x-initial", "fast")
_RUNTIME_OBJS = ("verilated", "verilated_threads", "verilated_vcd_c", "verilated_fst_c")


@dataclass(frozen=True)
class HarnessBuild:
    """A built batch harness: the shared library and the design description."""

    key: str
    directory: Path
    library: Path
    info: dict[str, Any]
    trace: str | None
    seconds: float      # build time (0 when taken from the cache)
    cached: bool


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Exclusive lock on ``path`` (a lock file), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str], what: str) -> None:
    p = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True)
    (cwd / f"{what}.log").write_text(p.stdout + p.stderr)
    if p.returncode:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        raise SimBuildError(f"{what} failed (exit {p.returncode}) in {cwd}:\n"
                            f"$ {' '.join(cmd)}\n{tail}")


def _make_vars(extra: dict[str, str]) -> list[str]:
    # the PyPI wheel's verilated.mk leaves the precompiled-header flag empty
    return [f"{k}={v}" for k, v in {**MAKE_OPT, "CFG_CXXFLAGS_PCH_I": "-include",
                                      **extra}.items()]


#: simulation models of the vendor primitives ``ff_style="trellis"`` instantiates
CELL_MODELS = {"TRELLIS_FF": TRELLIS_FF_SIM, "MULT18X18D": MULT18X18D_SIM,
               "CCU2C": CCU2C_SIM}


def cell_models(verilog: str) -> str:
    """The models of the primitives ``verilog`` instantiates, as one Verilog text."""
    return "".join(text for cell, text in CELL_MODELS.items() if cell in verilog)


def sim_cells(verilog: str, work: Path) -> list[Path]:
    """Simulation models of the vendor primitives ``verilog`` instantiates, written into
    ``work`` (``TRELLIS_FF`` and ``MULT18X18D``, from ``ff_style="trellis"``)."""
    text = cell_models(verilog)
    if not text:
        return []
    path = work / "cells_sim.v"
    path.write_text(text)
    return [path]


def slim(directory: Path) -> None:
    """Drop a finished build's intermediates (precompiled headers are ~70 MB each):
    the cache keeps the product, the sources and the logs."""
    for pattern in ("*.gch", "*.o", "*.a"):
        for f in directory.rglob(pattern):
            f.unlink(missing_ok=True)


def keep_failed(work: Path, final: Path) -> None:
    """Keep the last failed build of a key for inspection (``<key>.failed``)."""
    dest = final.with_name(final.name + ".failed")
    shutil.rmtree(dest, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.replace(work, dest)
    shutil.rmtree(work, ignore_errors=True)


def verilate(verilog: Path | Sequence[Path], top_name: str, work: Path, *,
             exe_sources: Sequence[Path],
             output: str, extra_args: Sequence[str] = (), make_vars: dict[str, str] | None = None,
             runtime_tag: str = "", jobs: int = 2) -> Path:
    """Run Verilator on ``verilog`` in ``work/obj`` and build ``output`` with make;
    returns the product's path.  Runtime objects are shared through the cache."""
    env = verilator_env()
    obj = work / "obj"
    sources = [verilog] if isinstance(verilog, Path) else list(verilog)
    cmd = [str(verilator().binary), "--cc", *map(str, sources), "--top-module", top_name,
           "--prefix", "Vaccel", "--Mdir", str(obj), "--exe", *map(str, exe_sources),
           "-o", output, *VERILATOR_FLAGS, *extra_args]
    t0 = time.perf_counter()
    _run(cmd, work, env, "verilator")
    t1 = time.perf_counter()
    rt = cache_dir() / "runtime" / hashlib.sha256(
        f"{verilator_version()}{sorted(MAKE_OPT.items())}{runtime_tag}".encode()).hexdigest()[:16]
    if rt.exists():  # reuse verilated.o and friends (make sees them up to date)
        for f in rt.iterdir():
            shutil.copy(f, obj / f.name)
    _run(["make", "-C", str(obj), "-f", "Vaccel.mk", "-j", str(jobs),
          *_make_vars(make_vars or {}), output], work, env, "make")
    if not rt.exists():
        tmp = rt.with_name(f"{rt.name}.{os.getpid()}.tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        for stem in _RUNTIME_OBJS:
            for ext in (".o", ".d"):
                if (obj / f"{stem}{ext}").exists():
                    shutil.copy(obj / f"{stem}{ext}", tmp / f"{stem}{ext}")
        with contextlib.suppress(OSError):
            os.replace(tmp, rt)
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"verilated {top_name}: Verilator {t1 - t0:.1f} s, C++ {time.perf_counter() - t1:.1f} s")
    return obj / output


def _check_fst() -> None:
    """Verilator's FST writer needs the lz4 headers; say so before a long build fails."""
    p = subprocess.run(["c++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n",
                       capture_output=True, text=True, env=verilator_env())
    if p.returncode:
        raise ToolNotFoundError("FST traces need the lz4 development headers (Debian/Ubuntu: "
                                "apt-get install liblz4-dev); a .vcd trace needs nothing")


def build_harness(top: AcceleratorTop, *, trace: str | None = None,
                  force: bool = False) -> HarnessBuild:
    """Build (or take from the cache) the ctypes batch harness of ``top``.
    ``trace``: ``None``, ``"vcd"`` or ``"fst"`` (a separate build)."""
    res = emit_verilog(top)
    return build_harness_verilog(res.text, res.info, trace=trace, force=force)


def build_harness_verilog(verilog: str, info: dict[str, Any], *, trace: str | None = None,
                          force: bool = False) -> HarnessBuild:
    """Build (or take from the cache) the batch harness of a design given as its Verilog
    text and its description (``AcceleratorTop.describe()``, i.e. a build folder's
    ``accelerator.v`` and ``design.json``).  Same cache and key as :func:`build_harness`."""
    if trace not in (None, "vcd", "fst"):
        raise SimBuildError(f"trace must be None, 'vcd' or 'fst', not {trace!r}")
    if trace == "fst":
        _check_fst()
    name = info["name"]
    cpp = HARNESS_CPP.substitute(TOP=name, IN_LANES=info["in_lanes"],
                                 OUT_LANES=info["out_lanes"], OUT_EBYTES=info["out_bits"] // 8)
    if info.get("sequence"):  # a recurrent first stage: the sequence loop too
        cpp += SEQ_CPP
    flags = [*VERILATOR_FLAGS, {"vcd": "--trace", "fst": "--trace-fst", None: ""}[trace]]
    key = hashlib.sha256("\0".join([verilog, cpp, " ".join(flags), verilator_version(),
                                    json.dumps(MAKE_OPT, sort_keys=True),
                                    cell_models(verilog)]).encode()).hexdigest()[:24]
    root = cache_dir() / "harness"
    final = root / key
    lib = final / "obj" / "libharness.so"
    if not force and lib.exists():
        return HarnessBuild(key, final, lib, info, trace, 0.0, True)
    with build_lock(root / f"{key}.lock"):
        if not force and lib.exists():  # built by another process meanwhile
            return HarnessBuild(key, final, lib, info, trace, 0.0, True)
        log(f"building the Verilator harness of {name} (key {key})")
        t0 = time.perf_counter()
        work = root / f"{key}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "accelerator.v").write_text(verilog)
        (work / "harness.cpp").write_text(cpp)
        (work / "design.json").write_text(json.dumps(info, indent=1))
        extra = {"vcd": ["--trace"], "fst": ["--trace-fst"], None: []}[trace]
        try:
            verilate([work / "accelerator.v", *sim_cells(verilog, work)], name, work,
                     exe_sources=[work / "harness.cpp"],
                     output="libharness.so", extra_args=[*extra, "-CFLAGS", "-fPIC",
                                                         "-LDFLAGS", "-shared"],
                     runtime_tag=f"pic-{trace}")
        except SimBuildError as e:
            keep_failed(work, final)
            raise SimBuildError(f"{e}\n(the build is kept in {final}.failed)") from None
        slim(work)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(work, final)
        seconds = time.perf_counter() - t0
    return HarnessBuild(key, final, lib, info, trace, seconds, False)
