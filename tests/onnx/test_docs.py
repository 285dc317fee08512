"""docs/onnx.md carries the current coverage table."""

import re

import pytest

from tests.onnx import coverage


@pytest.mark.slow  # renders the whole table: every op against onnxruntime, export, node tests
def test_coverage_table_is_current():
    section = coverage.current_section()
    found = re.search(r"\(onnx ([^,]+), onnxruntime ([^;]+);", section)
    assert found, "docs/onnx.md: the coverage section has no version line"
    installed = (coverage.onnx_version(), coverage.ort_version())
    if found.groups() != installed:
        pytest.skip(f"docs/onnx.md was generated with onnx/onnxruntime {found.groups()}, "
                    f"these are {installed}: run .venv/bin/python -m tests.onnx.coverage")
    assert section == coverage.render(), (
        "docs/onnx.md is out of date: run .venv/bin/python -m tests.onnx.coverage")
