"""ONNX import under mutation: every mutant either imports or raises a FluidError.

The mutants (tests/fuzz/onnx_mutations.py, fixed seed) are imported in a child process
under an address-space limit, so an abort inside onnx's C++ code, a hang or an
allocation beyond the limit fails this test instead of killing the test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")  # the seed models come from tests/onnx

ROOT = Path(__file__).resolve().parents[2]
SEED = 14
CASES = 2000
#: address space the imports may add to what the child maps after its imports
MEMORY_MIB = 2048
#: a case slower than this counts as a hang
CASE_SECONDS = 10.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="address-space limit via /proc and RLIMIT_AS")


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _last_case(rows: list[dict]) -> str:
    started = [r for r in rows if "start" in r]
    return f"case {started[-1]['start']} ({started[-1]['what']})" if started else "start-up"


def test_mutated_models_import_or_raise_a_fluid_error():
    cmd = [sys.executable, "-m", "tests.fuzz.onnx_mutations", "--seed", str(SEED),
           "--cases", str(CASES), "--memory-mib", str(MEMORY_MIB)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the fuzz child hung in {_last_case(_rows(out))}")
    rows = _rows(done.stdout)
    assert done.returncode == 0 and rows and "done" in rows[-1], (
        f"the fuzz child died (status {done.returncode}) in {_last_case(rows)}:\n"
        f"{done.stderr[-3000:]}")
    results = [r for r in rows if "outcome" in r]
    assert len(results) == CASES
    foreign = [r for r in results if r["outcome"] == "foreign"]
    assert not foreign, "\n\n".join(
        f"case {r['case']} ({r['what']}): {r['type']}: {r['message']}\n{r['traceback']}"
        for r in foreign[:5])
    slow = [r for r in results if r["seconds"] > CASE_SECONDS]
    assert not slow, [(r["case"], r["what"], r["seconds"]) for r in slow]
    # both outcomes are common: the mutants are neither all rejected up front nor all
    # harmless
    counts = rows[-1]["done"]
    assert counts["ok"] > CASES // 10 and counts["fluid"] > CASES // 10, counts
