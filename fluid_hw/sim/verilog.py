"""Verilog emission of an accelerator, cached, and the design files written beside
it (``registers.md``, ``registers.h``, ``design.json``).

Amaranth's own ``back.verilog`` keeps every register's reset inside combinational
``always @*`` blocks, which makes all of them depend on the ``rst`` input: Verilator
then re-evaluates the whole design on every input change (0.5 M cycles/s on the
digits MLP).  So the RTLIL from ``amaranth.back.rtlil`` goes through a short Yosys
script of semantics-preserving passes (``proc; opt_expr; opt_clean; opt_dff;
opt_merge``) that turns reset multiplexers into synchronous-reset flip-flops and merges
identical cells: 3x faster simulation and 5x faster Verilator runs.  The same Verilog
is what synthesis reads (Yosys would merge those cells there too).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import amaranth
from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil

import fluid_hw.rtl as rtl
from fluid_hw.fileio import atomic_write
from fluid_hw.rtl import AcceleratorTop, emit_c_header, emit_markdown, product_modules

from ._tools import SimBuildError, cache_dir, ensure_yosys, log

__all__ = ["emit_verilog", "design_files", "write_design", "design_key", "EmitResult",
           "YOSYS_SCRIPT"]

#: Yosys passes between Amaranth's RTLIL and the Verilog (see the module docstring).
YOSYS_SCRIPT = ("proc", "opt_expr", "opt_clean", "opt_dff", "opt_merge", "opt_clean",
                "memory_collect")


@cache
def _rtl_digest() -> str:
    """Hash of the RTL generator's sources: a changed generator never hits old caches."""
    h = hashlib.sha256(f"{amaranth.__version__}{YOSYS_SCRIPT}".encode())
    for p in sorted(Path(rtl.__file__).parent.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def design_key(top: AcceleratorTop) -> str:
    """Cache key of a design's Verilog: its design hash (structure, and the weights only
    when they are built in) and the generator's sources."""
    return hashlib.sha256(f"{top.design_hash}/{_rtl_digest()}".encode()).hexdigest()[:24]


class EmitResult:
    """Verilog text, the design description and how long emission took (0 if cached)."""

    def __init__(self, text: str, info: dict[str, Any], seconds: float, cached: bool) -> None:
        self.text, self.info, self.seconds, self.cached = text, info, seconds, cached


def emit_verilog(top: AcceleratorTop, *, use_cache: bool = True) -> EmitResult:
    """Verilog of ``top`` (module name ``top.name``); cached under the build cache."""
    key = design_key(top)
    d = cache_dir() / "verilog"
    path = d / f"{key}.v"
    info = top.describe()
    if use_cache and path.exists():
        top._MustUse__used = True  # not elaborated again: no "created but never used"
        return EmitResult(path.read_text(), info, 0.0, True)
    ensure_yosys()
    log(f"emitting Verilog for {top.name} ({len(top.specs)} stages)")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Yosys chatter about unused memory ports
            il = rtlil.convert(top, name=top.name, emit_src=False)
            il += product_modules(il)  # the shared LUT-product modules it instantiates
            yosys = find_yosys(lambda ver: ver >= (0, 40))
            script = [f"read_rtlil <<rtlil\n{il}\nrtlil", *YOSYS_SCRIPT,
                      "write_verilog -norename"]
            text = yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)
    except Exception as e:  # Yosys or Amaranth failure: name the design
        raise SimBuildError(f"Verilog emission of {top.name!r} failed: {e}") from e
    seconds = time.perf_counter() - t0
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text.encode(), durable=False)  # concurrent emitters never see half
    return EmitResult(text, info, seconds, False)


def design_files(top: AcceleratorTop) -> dict[str, str]:
    """The text of a design's build files by name: ``accelerator.v``, ``registers.md``,
    ``registers.h`` and ``design.json`` (the FPGA back end writes them into a build
    folder through ``fluid_hw.drivers.build_dir``, which ``sim`` may not import)."""
    res = emit_verilog(top)
    return {
        "accelerator.v": res.text,
        "registers.md": emit_markdown(top.registers, res.info),
        "registers.h": emit_c_header(top.registers, res.info),
        "design.json": json.dumps(res.info, indent=1),
    }


def write_design(top: AcceleratorTop, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write :func:`design_files` into ``out_dir`` (each file atomically); return their
    paths by kind (``verilog``, ``registers_md``, ``registers_h``, ``design``)."""
    out = Path(out_dir)
    texts = design_files(top)
    files = dict(zip(("verilog", "registers_md", "registers_h", "design"),
                     (out / name for name in texts)))
    for path, text in zip(files.values(), texts.values()):
        atomic_write(path, text.encode())
    return files
