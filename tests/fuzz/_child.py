"""Run a fuzz driver in a child process (one worker under an address-space limit) and
check its JSON rows: it finished, ran every case, and no case raised a foreign
exception."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _last_case(rows: list[dict]) -> str:
    started = [r for r in rows if "start" in r]
    return f"case {started[-1]['start']} ({started[-1]['what']})" if started else "start-up"


def run_fuzz_child(module: str, *, seed: int, cases: int, memory_mib: int, timeout: int
                   ) -> tuple[list[dict], dict]:
    """``python -m module --seed --cases --memory-mib``: its result rows (one per case)
    and its final counts by outcome."""
    cmd = [sys.executable, "-m", module, "--seed", str(seed), "--cases", str(cases),
           "--memory-mib", str(memory_mib)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the fuzz child hung in {_last_case(_rows(out))}")
    rows = _rows(done.stdout)
    assert done.returncode == 0 and rows and "done" in rows[-1], (
        f"the fuzz child died (status {done.returncode}) in {_last_case(rows)}:\n"
        f"{done.stderr[-3000:]}")
    results = [r for r in rows if "outcome" in r]
    assert len(results) == cases
    foreign = [r for r in results if r["outcome"] == "foreign"]
    assert not foreign, "\n\n".join(
        f"case {r['case']} ({r['what']}): {r['type']}: {r['message']}\n{r['traceback']}"
        for r in foreign[:5])
    return results, rows[-1]["done"]
