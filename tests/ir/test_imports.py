"""Imports point toward the leaves, as the table in shared/DESIGN.md decides."""

import ast
from pathlib import Path

import fluid_hw

ROOT = Path(fluid_hw.__file__).resolve().parent

#: modules that import nothing of ours but `errors`, so that every unit may import them
LEAVES = ("errors", "fileio", "tools", "registries")

# subpackage -> subpackages it may import (besides itself and `errors`)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "fileio": set(),  # a leaf like errors: everything may import it
    "tools": set(),  # external tools and the progress channel: a leaf too
    "registries": set(),  # register_once, the rule of every registry: a leaf too
    "ir": set(),
    "frontend": {"ir"},
    "passes": {"ir"},
    "backends.cpu": {"ir", "passes"},
    "backends.cuda": {"ir", "passes", "backends.cpu"},
    "backends.cluster": {"ir", "passes", "backends.cpu"},
    "rtl": set(),
    "hls": {"ir", "rtl"},
    "sim": {"rtl"},
    "drivers": {"ir", "backends.cpu", "sim"},
    "boards": set(),
    "datasets": set(),
    "backends.fpga": {"ir", "passes", "backends.cpu", "rtl", "hls", "sim", "drivers", "boards",
                      "frontend"},
    # fluid-hw bench: runs a model on every back end, so it sits beside the CLI
    "bench": {"ir", "frontend", "backends.cpu", "backends.cuda", "drivers", "datasets"},
    "cli": {"*"},
    "backends": set(),  # the namespace package itself
    # top-level modules that re-export Fluid names
    "__init__": {"*"},
    "debugger": {"frontend"},
    "transpiler": {"backends.cluster", "inference_transpiler", "memory_optimization"},
    "onnx": {"frontend"},
    "core": {"ir", "backends.cpu", "backends.cuda", "inference"},  # Fluid's fluid.core
    "inference": {"ir", "frontend", "backends.cpu"},  # core.PaddleTensor, predictors
    "dataset": set(),  # synthetic paddle.dataset stand-ins
    "paddle_compat": {"dataset"},  # what a Fluid script imports as `paddle`
    "lod_tensor": {"ir"},  # fluid.lod_tensor
    "inference_transpiler": {"ir", "passes"},  # fluid.transpiler.InferenceTranspiler
    "memory_optimization": set(),  # fluid.memory_optimize, release_memory
}


def unit_of(module: str) -> str:
    parts = module.split(".")[1:]  # drop "fluid_hw"
    if not parts:
        return "__init__"
    if parts[0] == "backends" and len(parts) > 1:
        return f"backends.{parts[1]}"
    return parts[0]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _from_imports(path: Path) -> list[tuple[ast.ImportFrom, str]]:
    """Each ``from X import ...`` of ``path`` with X resolved to an absolute name."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                out.append((node, ".".join(base + ([node.module] if node.module else []))))
            else:
                out.append((node, node.module or ""))
    return out


def _ours(m: str) -> bool:
    return m == "fluid_hw" or m.startswith("fluid_hw.")


def imported_modules(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    for node, target in _from_imports(path):
        if node.level and node.module is None:
            out += [f"{target}.{a.name}" for a in node.names]
        elif target:
            out.append(target)
    return [m for m in out if _ours(m)]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for each private name (``_x``, not a dunder) ``path`` imports
    from a module of another unit, and (module, "") for each private module
    (one with a ``_x`` part) of another unit it imports."""
    me = unit_of(module_name(path))
    names = [(target, a.name) for node, target in _from_imports(path) for a in node.names
             if _ours(target) and unit_of(target) != me and _private(a.name)]
    modules = [(target, "") for target in imported_modules(path)
               if unit_of(target) != me and any(_private(p) for p in target.split("."))]
    return names + modules


def violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        me = module_name(path)
        src = unit_of(me) if me != "fluid_hw" else "__init__"
        allowed = ALLOWED.get(src)
        assert allowed is not None, f"{me}: unit {src!r} missing from the import table"
        for target in imported_modules(path):
            dst = unit_of(target) if target != "fluid_hw" else "__init__"
            if dst in (src, *LEAVES):
                continue
            if dst == "cli":
                bad.append(f"{me} imports {target}: nothing may import the CLI")
            elif "*" not in allowed and dst not in allowed:
                bad.append(f"{me} ({src}) imports {target} ({dst})")
    return bad


def test_import_direction():
    assert violations() == []


def test_checker_catches_a_violation(tmp_path, monkeypatch):
    # the walker itself must see relative imports
    f = ROOT / "ir" / "program.py"
    mods = imported_modules(f)
    assert "fluid_hw.ir.registry" in mods and "fluid_hw.errors" in mods
    assert unit_of("fluid_hw.frontend.layers.nn") == "frontend"
    assert unit_of("fluid_hw.backends.cpu.executor") == "backends.cpu"


#: private names or modules imported across units, kept until their owners move to
#: public ones (none left: add a row only with the reason it cannot be public yet)
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()


def test_no_new_private_names_across_units():
    """What one unit uses of another is public (documented, in ``__all__``): no private
    name, no private module."""
    found = {(module_name(p), target, name) for p in sorted(ROOT.rglob("*.py"))
             for target, name in private_imports(p)}
    assert found - KNOWN_PRIVATE_IMPORTS == set()


def test_cuda_executor_uses_only_the_public_cpu_executor():
    """The CUDA executor reuses the CPU executor's run through its public names and
    hooks, not its private helpers."""
    from fluid_hw.backends.cpu import executor as cpu_executor

    path = ROOT / "backends" / "cuda" / "executor.py"
    assert private_imports(path) == []
    names = [a.name for node, target in _from_imports(path)
             if target == "fluid_hw.backends.cpu.executor" for a in node.names]
    assert names and set(names) <= set(cpu_executor.__all__)
