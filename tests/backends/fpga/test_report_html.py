"""report.html from report.json alone: every section from a complete sample, plots as
embedded PNGs, text escaped; partial reports (compile only, nothing at all) render with
a pointer to the command that fills the missing part in."""

from __future__ import annotations

import base64
import json
import re

import pytest

from fluid_hw.backends.fpga.report import ReportError
from fluid_hw.backends.fpga.report_html import render_report, write_report_html

SAMPLE = {
    "target": "ulx3s-85f", "clock_mhz": 100.0, "weights": "const", "model": "models/<digits>",
    "design_hash": "0123456789abcdef0123",
    "folding": {"fc_0": {"pe": 1, "simd": 32}, "fc_1": {"pe": 1, "simd": 32}},
    "stages": [
        {"name": "fc_0", "op": "quantized_fc", "shape": {"mw": 64, "mh": 128},
         "folding": {"pe": 1, "simd": 32},
         "estimate": {"cycles": 256, "ii": 256, "latency": 300, "lut": 1500, "ff": 3000,
                      "dsp": 34, "bram": 8}},
        {"name": "pool", "op": "pool2d", "shape": {"in": [8, 8, 8], "out": [8, 4, 4]},
         "folding": {"lanes": 2}, "estimate": {"cycles": 100, "ii": 100}},
    ],
    "estimate": {"initiation_interval": 256, "latency_cycles": 900,
                 "cycles_per_inference": 256,
                 "resources": {"lut": 4661, "ff": 9320, "dsp": 74, "bram": 19}},
    "measured": {"initiation_interval": 258, "latency_cycles": 905,
                 "cycles_per_inference": 258},
    "bit_exact": True, "mismatches": 0, "inputs": 360,
    "accuracy": {"float": 0.975, "golden_int8": 0.972, "hardware_int8": 0.972},
    "fmax_mhz": 68.29, "timing_met": False,
    "critical_path": {"from_clock": "clk", "to_clock": "clk", "delay_ns": 14.6,
                      "start": "a.Q", "end": "b.DI",
                      "steps": [{"type": "clk-to-q", "from": "a.Q", "to": "a.Q",
                                 "delay_ns": 0.5},
                                {"type": "routing", "from": "a.Q", "to": "m.B13",
                                 "delay_ns": 3.4, "net": "n"},
                                {"type": "setup", "from": "b.DI", "to": "b.DI",
                                 "delay_ns": 0.0}]},
    "resources_used": {"lut": 5806, "ff": 9416, "dsp": 74, "bram": 19, "pll": 1, "io": 5},
    "resources_available": {"lut": 83640, "ff": 83640, "dsp": 156, "bram": 208, "pll": 4,
                            "io": 205},
    "resources_estimate_vs_actual": {
        "lut": {"estimate": 5100, "actual": 5467, "placed": 5806, "error_pct": -6.7},
        "dsp": {"estimate": 74, "actual": 74, "placed": 74, "error_pct": 0.0},
        "bram": {"estimate": 19, "actual": 19, "placed": 19, "error_pct": 0.0}},
    "throughput_per_s": 266757.8, "latency_us": 13.25,
    "bitstream": {"board": "ulx3s-85f", "device": "LFE5U-85F", "file": "accelerator.bit",
                  "clock_mhz": 100.0, "seconds": {"yosys": 33.3, "nextpnr": 236.4},
                  "logs": {"yosys": "yosys.log", "nextpnr": "nextpnr.log"},
                  "uart": {"baud": 3030303.0, "divisor": 33}},
}


def _pngs(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)",
                                                    page)]


def test_a_complete_report_renders_every_section():
    page = render_report(SAMPLE)
    for text in ("Summary", "Layers", "Device utilisation", "Estimate vs actual", "Timing",
                 "Accuracy", "68.29 MHz", "NOT met", "fc_0", "1 x 32", "quantized_fc",
                 "lanes 2", "97.20 %", "bit-exact", "accelerator.bit", "m.B13", "14.60 ns",
                 "3,030,303 baud", "nextpnr.log", "266,758 /s", "13.25 µs", "-6.7 %"):
        assert text in page, text
    pngs = _pngs(page)
    assert len(pngs) == 3 and all(p.startswith(b"\x89PNG") for p in pngs)
    assert "models/&lt;digits&gt;" in page and "<digits>" not in page   # escaped
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_partial_reports_point_to_the_missing_step():
    compiled = {k: SAMPLE[k] for k in ("target", "clock_mhz", "weights", "stages",
                                       "estimate")}
    page = render_report(compiled)
    assert "fluid-hw bitstream BUILD_DIR" in page and "fluid-hw simulate" in page
    assert "4661" in page or "4,661" in page
    empty = render_report({})
    assert "fluid-hw compile" in empty and "<h2>Layers</h2>" in empty
    assert _pngs(empty) == []


def test_write_report_html(tmp_path):
    with pytest.raises(ReportError, match=r"report.json: not found"):
        write_report_html(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(SAMPLE))
    path = write_report_html(tmp_path)
    assert path == tmp_path / "report.html" and path.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
