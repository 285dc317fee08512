"""Saving and loading programs and their variables, safely.

* Programs are protobuf bytes (``__model__``); parameters are ``.npy`` files
  (one per variable) or one ``.npz``.  Both are read through
  :mod:`fluid_hw.fileio`'s bounded reads: regular files only, inside the model
  folder, within a size limit, headers checked against the file and against the
  program's declaration before anything is allocated, never unpickled.
* Every file is written atomically: to a temporary file in the same folder,
  then renamed over the target.  A crash never leaves a half-written file.
* Anything malformed raises :class:`fluid_hw.errors.FormatError` naming the file,
  and nothing is put into the scope unless everything loaded.
"""

from __future__ import annotations

import io as _io
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..fileio import ArrayCheck, atomic_write, read_file, read_npy, read_npz
from ..ir import dtypes
from ..ir.default_programs import default_main_program
from ..ir.lod import LoDTensor
from ..ir.program import Program, Variable, VarType
from ..ir.prune import prune
from ..ir.scope import Scope, global_scope
from .readers import PyReader

__all__ = [
    "MODEL_FILENAME", "PyReader", "atomic_write", "get_program_persistable_vars",
    "load_inference_model",
    "load_params", "load_persistables", "load_program", "load_vars", "save_inference_model",
    "save_params", "save_persistables", "save_program", "save_vars",
]

MODEL_FILENAME = "__model__"
_NOT_SAVED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.RAW, VarType.STEP_SCOPES)


# -- files ----------------------------------------------------------------
def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = _io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    return buf.getvalue()


def _check_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        raise FormatError(f"variable name {name!r} cannot be used as a file name; "
                          "save with params_filename=... to store all in one .npz")


# -- which variables ------------------------------------------------------
def is_persistable(var: Variable) -> bool:
    return var.persistable and var.type not in _NOT_SAVED


def is_parameter(var: Variable) -> bool:
    return var.is_parameter


def get_program_persistable_vars(program: Program) -> list[Variable]:
    return [v for v in program.global_block().vars.values() if is_persistable(v)]


# -- saving / loading variables ---------------------------------------------
def _value_of(scope: Scope, var: Variable) -> np.ndarray:
    v = scope.find_value(var.name)
    if isinstance(v, LoDTensor):
        v = v.data
    if v is None:
        raise FormatError(f"variable {var.name!r} has no value in the scope; run the startup "
                          "program (or load the parameters) before saving")
    return np.asarray(v)


def save_vars(executor: Any, dirname: str | os.PathLike[str],
              main_program: Program | None = None, vars: Iterable[Variable] | None = None,
              predicate: Callable[[Variable], bool] | None = None,
              filename: str | None = None, scope: Scope | None = None) -> list[str]:
    """Save variables' values: one ``<name>.npy`` each, or all in ``filename`` (.npz)."""
    program = main_program or default_main_program()
    scope = scope or global_scope()
    if vars is None:
        vars = [v for v in program.global_block().vars.values() if (predicate or is_persistable)(v)]
    arrays = {v.name: _value_of(scope, v) for v in vars}
    d = Path(dirname)
    if filename is not None:
        atomic_write(d / filename, _npz_bytes(arrays))
    else:
        for name in arrays:
            _check_name(name)
        for name, arr in arrays.items():
            atomic_write(d / f"{name}.npy", _npy_bytes(arr))
    return list(arrays)


def load_vars(executor: Any, dirname: str | os.PathLike[str],
              main_program: Program | None = None, vars: Iterable[Variable] | None = None,
              predicate: Callable[[Variable], bool] | None = None,
              filename: str | None = None, scope: Scope | None = None) -> list[str]:
    """Load variables' values into the scope, checking each against its declaration.
    Nothing is written to the scope unless every variable loaded."""
    program = main_program or default_main_program()
    scope = scope or global_scope()
    if vars is None:
        vars = [v for v in program.global_block().vars.values() if (predicate or is_persistable)(v)]
    vars = list(vars)
    d = Path(dirname)
    staged: dict[str, np.ndarray] = {}
    if filename is not None:
        path = d / filename
        by_name = {v.name: v for v in vars}
        staged = read_npz(path, kind="params", root=d, names=list(by_name),
                          check=_declared(path, by_name))
    else:
        for v in vars:
            _check_name(v.name)
            path = d / f"{v.name}.npy"
            staged[v.name] = read_npy(path, kind="params", root=d,
                                      check=_declared(path, {v.name: v}))
    scope.vars.update(staged)
    return list(staged)


def _declared(path: Path, by_name: dict[str, Variable]) -> ArrayCheck:
    """The check :func:`read_npy` / :func:`read_npz` apply to each array's header
    before allocating it: parameters are strict, their dtype and shape are the
    declared ones.  ``by_name`` maps ``.npz`` keys (one variable for a ``.npy``)."""
    def check(key: str | None, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        var = by_name[key] if key is not None else next(iter(by_name.values()))
        if var.dtype not in dtypes.TENSOR_DTYPES:
            return
        want = dtypes.to_numpy(var.dtype)
        if dtype != want:
            raise FormatError(f"{path}: variable {var.name!r} is {want}, the file holds "
                              f"{dtype}; save the parameters again from this program (or "
                              f"np.save the array as {want})")
        decl = var.shape
        if len(decl) != len(shape) or any(d not in (-1, s) for d, s in zip(decl, shape)):
            raise FormatError(f"{path}: variable {var.name!r} has shape {list(decl)}, the file "
                              f"holds {list(shape)}; save the parameters again from this program")
    return check


def save_params(executor: Any, dirname: str, main_program: Program | None = None,
                filename: str | None = None) -> list[str]:
    return save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_params(executor: Any, dirname: str, main_program: Program | None = None,
                filename: str | None = None) -> list[str]:
    return load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor: Any, dirname: str, main_program: Program | None = None,
                      filename: str | None = None) -> list[str]:
    """Parameters and optimizer state: a checkpoint."""
    return save_vars(executor, dirname, main_program, predicate=is_persistable,
                     filename=filename)


def load_persistables(executor: Any, dirname: str, main_program: Program | None = None,
                      filename: str | None = None) -> list[str]:
    return load_vars(executor, dirname, main_program, predicate=is_persistable,
                     filename=filename)


# -- programs -------------------------------------------------------------
def save_program(program: Program, path: str | os.PathLike[str]) -> None:
    atomic_write(path, program.serialize_to_string())


def load_program(path: str | os.PathLike[str]) -> Program:
    p = Path(path)
    return Program.parse_from_string(read_file(p, kind="program"), source=str(p))


def save_inference_model(dirname: str | os.PathLike[str], feeded_var_names: Sequence[str],
                         target_vars: Sequence[Variable | str] | Variable, executor: Any,
                         main_program: Program | None = None,
                         model_filename: str | None = None,
                         params_filename: str | None = None,
                         export_for_deployment: bool = True) -> list[str]:
    """Prune ``main_program`` to ``target_vars``, switch it to test mode, add feed
    and fetch ops, and save it with the parameters it uses."""
    program = main_program or default_main_program()
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    gb = program.global_block()
    for n in feeded_var_names:
        if not gb.has_var(n):
            raise FormatError(f"save_inference_model: feed {n!r} is not a variable of the "
                              "program")
    targets = [t.name if isinstance(t, Variable) else str(t) for t in target_vars]
    for t in targets:
        if not gb.has_var(t):
            raise FormatError(f"save_inference_model: target {t!r} is not a variable of the "
                              "program")
    inf = prune(program.clone(for_test=True), feeded_var_names, targets)
    inf.add_feed_fetch_ops(feeded_var_names, targets)
    d = Path(dirname)
    saved = save_vars(executor, d, inf, predicate=is_persistable, filename=params_filename,
                      scope=global_scope())
    save_program(inf, d / (model_filename or MODEL_FILENAME))
    return saved


def load_inference_model(dirname: str | os.PathLike[str], executor: Any,
                         model_filename: str | None = None,
                         params_filename: str | None = None,
                         scope: Scope | None = None) -> tuple[Program, list[str], list[Variable]]:
    """Returns ``(program, feed_target_names, fetch_targets)``; parameters go into
    the global scope (or ``scope``)."""
    d = Path(dirname)
    if not d.is_dir():
        raise FormatError(f"{d}: no such model folder")
    model = d / (model_filename or MODEL_FILENAME)
    program = Program.parse_from_string(read_file(model, kind="program", root=d),
                                        source=str(model))
    gb = program.global_block()
    fetches = program.get_fetch_target_names()
    if not fetches:
        raise FormatError(f"{d / (model_filename or MODEL_FILENAME)}: not an inference model "
                          "(no fetch ops); save it with save_inference_model")
    load_vars(executor, d, program, predicate=is_persistable, filename=params_filename,
              scope=scope)
    return program, program.get_feed_target_names(), [gb.var(n) for n in fetches]
