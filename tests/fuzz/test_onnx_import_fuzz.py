"""ONNX import under mutation: every mutant either imports or raises a FluidError.

The mutants (tests/fuzz/onnx_mutations.py, fixed seed) are imported in a child process
under an address-space limit, so an abort inside onnx's C++ code, a hang or an
allocation beyond the limit fails this test instead of killing the test run.
"""

from __future__ import annotations

import sys

import pytest

from tests.fuzz._child import run_fuzz_child

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")  # the seed models come from tests/onnx

SEED = 14
CASES = 2000
#: address space the imports may add to what the child maps after its imports
MEMORY_MIB = 2048
#: a case slower than this counts as a hang
CASE_SECONDS = 10.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="address-space limit via /proc and RLIMIT_AS")


def test_mutated_models_import_or_raise_a_fluid_error():
    results, counts = run_fuzz_child("tests.fuzz.onnx_mutations", seed=SEED, cases=CASES,
                                     memory_mib=MEMORY_MIB, timeout=300)
    slow = [r for r in results if r["seconds"] > CASE_SECONDS]
    assert not slow, [(r["case"], r["what"], r["seconds"]) for r in slow]
    # both outcomes are common: the mutants are neither all rejected up front nor all
    # harmless
    assert counts["ok"] > CASES // 10 and counts["fluid"] > CASES // 10, counts
