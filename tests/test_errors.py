"""Every error class of the project lives in ``fluid_hw/errors.py``, in one hierarchy
under ``FluidError``; the units re-export theirs where they were defined before."""

import ast
import importlib
from pathlib import Path

import pytest

import fluid_hw
from fluid_hw import errors

ROOT = Path(fluid_hw.__file__).resolve().parent


def _exception_classes_outside_errors() -> list[str]:
    """``module:Class`` for each class defined outside errors.py whose bases name an
    exception (``...Error``, ``Exception``, ``...Failure``)."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                if node.name.endswith("Error") or any(
                        b.endswith(("Error", "Exception", "Failure")) for b in bases):
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return found


def test_error_classes_only_in_errors_module():
    assert _exception_classes_outside_errors() == []


def test_errors_module_is_a_leaf():
    """errors.py imports nothing of the project, so every unit (rtl too) may import it."""
    tree = ast.parse((ROOT / "errors.py").read_text())
    mods = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    mods += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [m for m in mods if m.startswith("fluid_hw") or m == ""] == []


def test_every_error_derives_from_fluid_error():
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, errors.FluidError), name


@pytest.mark.parametrize("module, names", [
    ("fluid_hw.hls.partition", ["LoweringError"]),
    ("fluid_hw.hls.folding", ["FoldingError"]),
    ("fluid_hw.hls.autofold", ["AutoFoldError"]),
    ("fluid_hw.rtl", ["HardwareConfigError"]),
    ("fluid_hw.rtl._util", ["HardwareConfigError"]),
    ("fluid_hw.passes", ["PassError", "QuantizationError"]),
    ("fluid_hw.passes.base", ["PassError"]),
    ("fluid_hw.passes.quantize", ["QuantizationError"]),
    ("fluid_hw.boards", ["PLLError", "ResourceBudgetError", "ToolFailedError",
                         "ToolNotFoundError"]),
    ("fluid_hw.sim", ["SimulationError", "ToolNotFoundError", "SimBuildError"]),
    ("fluid_hw.backends.fpga.steps", ["BuildError"]),
    ("fluid_hw.backends.fpga.report", ["ReportError"]),
    ("fluid_hw.drivers.transport", ["DriverError"]),
    ("fluid_hw.backends.cluster.errors", ["ClusterError", "TranspileError", "WireError",
                                          "LaunchError", "MasterError"]),
])
def test_errors_reexported_where_they_were_defined(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert getattr(mod, name) is getattr(errors, name), f"{module}.{name}"


def test_duplicates_merged_or_renamed():
    """The three ToolNotFoundErrors meant the same thing: one class.  The two
    BuildErrors did not: the simulation flow's is SimBuildError (fluid_hw.sim still
    calls it BuildError), the FPGA back end's keeps the name."""
    from fluid_hw import boards, sim
    from fluid_hw.backends.fpga import steps

    assert boards.ToolNotFoundError is sim.ToolNotFoundError is errors.ToolNotFoundError
    assert sim.BuildError is errors.SimBuildError
    assert steps.BuildError is errors.BuildError is not errors.SimBuildError


def test_registry_lookups_use_unknown_name():
    from fluid_hw.boards.toolchain import find_tool
    from fluid_hw.passes import get_pass

    with pytest.raises(errors.UnknownNameError, match=r"unknown pass 'nope'.*Known: "):
        get_pass("nope")
    with pytest.raises(errors.UnknownNameError, match=r"unknown tool 'yosis'\. Did you mean "
                                                      r"yosys\?.*Known: "):
        find_tool("yosis")
    from fluid_hw.boards.devices import get_board, get_device, get_family

    with pytest.raises(errors.UnknownNameError, match=r"Did you mean ulx3s-85f"):
        get_board("ulx3s-86f")
    with pytest.raises(errors.UnknownNameError, match=r"unknown device .*Known: LFE5U-25F"):
        get_device("xc7a35t")
    with pytest.raises(errors.UnknownNameError, match=r"unknown FPGA family .*Known: ecp5"):
        get_family("gowin")
