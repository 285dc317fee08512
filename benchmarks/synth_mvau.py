"""One MVAU through Yosys' ``synth_ecp5``: its cell counts for a folding, a number of
LUT products and a weight width (docs/fpga_backend.md, "Multiplier kinds and narrow
weights", quotes these).

    .venv/bin/python benchmarks/synth_mvau.py --mw 64 --mh 128 --pe 16 --simd 8 \\
        --lut-mults 64 --weight-bits 8

The unit is built as a board build makes it (``ff_style="trellis"``: MULT18X18D and
CCU2C primitives, const random weights in block RAM where large enough, requantised
outputs) and synthesised alone; the counts include its requantiser lanes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from amaranth.back import rtlil

from fluid_hw.rtl import product_modules
from fluid_hw.rtl.multipliers import weight_range
from fluid_hw.rtl.mvau import MVAU
from fluid_hw.tools import find_tool

CELLS = ("MULT18X18D", "LUT4", "CCU2C", "DP16KD", "TRELLIS_FF")


def synth_mvau(mw: int, mh: int, pe: int, simd: int, lut_mults: int = 0,
               weight_bits: int = 8, seed: int = 0) -> dict[str, int]:
    """``synth_ecp5`` cell counts (:data:`CELLS`) of the MVAU."""
    rng = np.random.default_rng(seed)
    lo, hi = weight_range(weight_bits)
    w = rng.choice([-1, 1], (mh, mw)) if weight_bits == 1 else \
        rng.integers(lo, hi + 1, (mh, mw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=rng.integers(-999, 999, mh),
                   multiplier=rng.integers(1, 2**15, mh), shift=rng.integers(10, 20, mh),
                   ff_style="trellis", lut_mults=lut_mults, weight_bits=weight_bits)
        text = rtlil.convert(dut, name="top")
        text += product_modules(text)  # the shared LUT-product modules (rtl._lutmul)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "top.il").write_text(text)
        (work / "s.ys").write_text("read_rtlil top.il\nsynth_ecp5 -top top\n"
                                   "tee -q -o stat.json stat -json\n")
        subprocess.run([*find_tool("yosys"), "-q", "-s", "s.ys"], cwd=work, check=True,
                       capture_output=True)
        cells = json.loads((work / "stat.json").read_text())["design"]["num_cells_by_type"]
    return {k: int(cells.get(k, 0)) for k in CELLS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, default in (("--mw", 64), ("--mh", 128), ("--pe", 16), ("--simd", 8),
                          ("--lut-mults", 0), ("--weight-bits", 8)):
        ap.add_argument(flag, type=int, default=default)
    a = ap.parse_args()
    t = time.perf_counter()
    cells = synth_mvau(a.mw, a.mh, a.pe, a.simd, a.lut_mults, a.weight_bits)
    print(f"MW={a.mw} MH={a.mh} PE={a.pe} SIMD={a.simd} lut_mults={a.lut_mults} "
          f"weight_bits={a.weight_bits}: " + ", ".join(f"{k} {v}" for k, v in cells.items())
          + f" ({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
