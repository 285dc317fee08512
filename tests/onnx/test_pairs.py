"""The one-to-one ONNX <-> fluid pairs: one table makes both directions' entries, and
the op tables import the context module, not their drivers."""

import ast
from pathlib import Path

import onnx.defs

from fluid_hw.frontend.onnx import _export_ops, _import_ops
from fluid_hw.frontend.onnx._export_ops import EXPORTERS
from fluid_hw.frontend.onnx._import_ops import IMPORTERS
from fluid_hw.frontend.onnx._pairs import PAIRS
from fluid_hw.ir.registry import has_op

HERE = Path(_import_ops.__file__).resolve().parent


def test_pairs_make_the_entries_of_both_tables():
    assert len({p.onnx for p in PAIRS}) == len({p.fluid for p in PAIRS}) == len(PAIRS)
    for p in PAIRS:
        assert onnx.defs.has(p.onnx), p.onnx
        assert has_op(p.fluid), p.fluid
        assert EXPORTERS[p.fluid].onnx == p.onnx
        if p.imports:
            assert IMPORTERS[p.onnx].fluid == p.fluid
        else:  # the importer converts it its own way
            assert IMPORTERS[p.onnx] is _import_ops._SPECIAL[p.onnx]


def test_special_entries_do_not_shadow_pairs():
    assert not {p.fluid for p in PAIRS} & _export_ops._SPECIAL.keys()
    assert not {p.onnx for p in PAIRS if p.imports} & _import_ops._SPECIAL.keys()


def _imports(module: str) -> set[str]:
    tree = ast.parse((HERE / f"{module}.py").read_text())
    return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def test_op_tables_do_not_import_their_drivers():
    assert "importer" not in _imports("_import_ops")
    assert "exporter" not in _imports("_export_ops")
    assert "_context" in _imports("_import_ops") and "_context" in _imports("_export_ops")
