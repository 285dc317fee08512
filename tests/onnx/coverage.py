"""ONNX op coverage: every imported op against onnxruntime (random models), against
ONNX's own node tests, and through export -> onnxruntime; rendered into docs/onnx.md.

    .venv/bin/python -m tests.onnx.coverage        # rewrite the table in docs/onnx.md

The table sits between the ``<!-- coverage:begin -->`` / ``<!-- coverage:end -->``
markers; tests/onnx/test_docs.py fails when it is out of date.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("FLUID_HW_CHECK_KERNELS", "1")

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.errors import FluidError
from fluid_hw.frontend.onnx._export_ops import EXPORTERS
from fluid_hw.frontend.onnx._import_ops import IMPORTERS
from tests.onnx import backend_data
from tests.onnx.backend_data import Result
from tests.onnx.harness import check_exported, mismatch, run_fluid_model, run_ort
from tests.onnx.random_models import GENERATORS, cases_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "onnx.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"

#: fluid programs that export cannot express in ONNX yet (LoD sequence ops)
NOT_EXPORTED = {"LSTM": "sequence ops (LoD) have no ONNX export",
                "GRU": "sequence ops (LoD) have no ONNX export",
                "RNN": "sequence ops (LoD) have no ONNX export"}


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


@functools.cache
def ort_results(op: str) -> tuple[Result, ...]:
    """Each random model of ``op``: imported and run on the CPU executor == onnxruntime."""
    out = []
    with fluid.scope_guard(fluid.Scope()):
        for c in cases_for(op):
            try:
                m = fonnx.load(c.model)
                problem = mismatch(run_fluid_model(m, c.feeds), run_ort(c.model, c.feeds),
                                   c.rtol, c.atol)
            except Exception as e:  # any crash is a failure to report, with its cause
                problem = _err(e)
            out.append(Result(c.id, "fail" if problem else "pass", problem or ""))
    return tuple(out)


@functools.cache
def export_results(op: str) -> tuple[Result, ...]:
    """Each random model of ``op``: imported, exported again, run on onnxruntime ==
    onnxruntime on the original model."""
    out = []
    with fluid.scope_guard(fluid.Scope()):
        for c in cases_for(op):
            try:
                m = fonnx.load(c.model)
                opset = max(17, c.model.opset_import[0].version)
                try:
                    exported = fonnx.export(m.program, feed_names=m.feed_names,
                                            fetch_names=m.fetch_names, scope=m.scope,
                                            opset=opset)
                except FluidError as e:
                    if op in NOT_EXPORTED:
                        out.append(Result(c.id, "skip", NOT_EXPORTED[op]))
                        continue
                    raise e
                check_exported(exported)
                feeds = {m.names[k]: v for k, v in c.feeds.items()}
                problem = mismatch(run_ort(exported, feeds), run_ort(c.model, c.feeds),
                                   c.rtol, c.atol)
            except Exception as e:
                problem = _err(e)
            out.append(Result(c.id, "fail" if problem else "pass", problem or ""))
    return tuple(out)


def _rate(results: tuple[Result, ...]) -> str:
    if not results:
        return "-"
    n = sum(r.status == "pass" for r in results)
    return f"{n}/{len(results)}"


_TYPE = re.compile(r"(?:element type|cast to) ([A-Z][A-Z0-9]+)")


def _summary(results: tuple[Result, ...]) -> str:
    """Skip and failure reasons, grouped; element types folded into one entry."""
    groups: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r.status == "pass":
            continue
        reason = re.sub(r"graph input '[^']*'", "graph input", r.reason)
        m = _TYPE.search(reason)
        if m:
            key = (f"{r.status}: " + ("input" if "element type" in reason else "cast to")
                   + " types fluid-hw tensors cannot hold")
            groups[key].append(m.group(1))
        else:
            groups[f"{r.status}: {reason}"].append("")
    parts = []
    for key, items in groups.items():
        types = sorted({t for t in items if t})
        detail = f" ({', '.join(types)})" if types else ""
        parts.append(f"{len(items)}x {key}{detail}")
    return "; ".join(parts).replace("|", "\\|")


def ops() -> list[str]:
    return sorted(IMPORTERS)


@functools.cache
def function_ops() -> list[str]:
    """Default-domain ops without an import entry that ONNX defines by a function body
    (the importer expands them) and that have node tests."""
    import onnx.defs

    found = []
    for op in sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                      if s.domain == "" and (s.has_function
                                             or s.has_context_dependent_function)}
                     - set(IMPORTERS)):
        try:
            if backend_data.cases_for(op):
                found.append(op)
        except (ValueError, TypeError):  # sequence-typed inputs: no case built here
            continue
    return found


def render() -> str:
    lines = [
        BEGIN,
        "",
        f"Generated by `python -m tests.onnx.coverage` (onnx {onnx_version()}, "
        f"onnxruntime {ort_version()}; ONNX node tests read from the "
        f"{backend_data.source()}).",
        "",
        "| ONNX op | fluid ops | vs onnxruntime | export round trip | ONNX node tests "
        "| not passed: why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    totals = [0, 0, 0, 0, 0, 0]
    for op in ops():
        ort_r = ort_results(op) if op in GENERATORS else ()
        exp_r = export_results(op) if op in GENERATORS else ()
        bk_r = backend_data.results_for(op)
        for k, rs in enumerate((ort_r, exp_r, bk_r)):
            totals[2 * k] += sum(r.status == "pass" for r in rs)
            totals[2 * k + 1] += len(rs)
        why = "; ".join(s for s in (_summary(ort_r), _summary(exp_r), _summary(bk_r)) if s)
        lines.append(f"| {op} | {IMPORTERS[op].fluid} | {_rate(ort_r)} | {_rate(exp_r)} | "
                     f"{_rate(bk_r)} | {why} |")
    lines += [f"| **total** | | **{totals[0]}/{totals[1]}** | **{totals[2]}/{totals[3]}** | "
              f"**{totals[4]}/{totals[5]}** | |", ""]
    lines += ["Ops without a converter of their own, imported as the function body ONNX "
              "defines for them (ONNX's node tests):", "",
              "| ONNX op | ONNX node tests | not passed: why |", "| --- | --- | --- |"]
    fn_total = [0, 0]
    for op in function_ops():
        bk_r = backend_data.results_for(op)
        fn_total[0] += sum(r.status == "pass" for r in bk_r)
        fn_total[1] += len(bk_r)
        lines.append(f"| {op} | {_rate(bk_r)} | {_summary(bk_r)} |")
    lines += [f"| **total** | **{fn_total[0]}/{fn_total[1]}** | |", ""]
    lines += ["Exported fluid ops (fluid op -> ONNX):", ""]
    lines += [", ".join(f"`{k}` -> {v.onnx}" for k, v in sorted(EXPORTERS.items())), ""]
    lines += ["<details><summary>Every ONNX node test not passed, with its reason</summary>",
              "", "| test | reason |", "| --- | --- |"]
    for op in ops():
        for r in backend_data.results_for(op):
            if r.status != "pass":
                lines.append(f"| {r.name.split('/')[0]} | {r.status}: "
                             f"{r.reason.replace('|', chr(92) + '|')} |")
    lines += ["", "</details>", "", END]
    return "\n".join(lines)


def onnx_version() -> str:
    import onnx

    return onnx.__version__


def ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def current_section() -> str:
    text = DOC.read_text()
    return text[text.index(BEGIN):text.index(END) + len(END)]


def write() -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + render() + text[end:])


if __name__ == "__main__":
    write()
    print(f"wrote {DOC}", file=sys.stderr)
