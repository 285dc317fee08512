"""The pass registry knows every pass by name without the caller importing its module:
``get_pass`` loads :data:`fluid_hw.passes.base.PASS_MODULES` on the first lookup, and
that list names every module of the package that registers a pass."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import fluid_hw.passes as passes_pkg
from fluid_hw.passes.base import PASS_MODULES


def test_every_registering_module_is_listed():
    folder = Path(passes_pkg.__file__).parent
    registering = sorted(p.stem for p in folder.glob("*.py")
                         if re.search(r"^@register_pass\b", p.read_text(), re.M))
    assert "quantize_rnn_loop" in registering
    assert sorted(PASS_MODULES) == registering


def test_rnn_loop_to_sequence_by_name_in_a_fresh_interpreter():
    """In a new process (nothing imported the pass's module before): the lookup by name
    finds the pass, and the package imports without a cycle."""
    code = (
        "import sys\n"
        "from fluid_hw.passes import get_pass, all_passes\n"
        "assert 'fluid_hw.passes.quantize_rnn_loop' not in sys.modules\n"
        "p = get_pass('rnn_loop_to_sequence')\n"
        "print(type(p).__name__, p.name, len(all_passes()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    name, pass_name, count = out.stdout.split()
    assert (name, pass_name) == ("LoopToSequence", "rnn_loop_to_sequence")
    assert int(count) >= len(PASS_MODULES)
