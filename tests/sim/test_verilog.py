"""Verilog emission and the generated design files."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from fluid_hw.hls import MVAUStage
from fluid_hw.rtl import AcceleratorTop
from fluid_hw.sim import emit_verilog, write_design

PORTS = ["clk", "rst", "s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
         "m_axis_tdata", "m_axis_tvalid", "m_axis_tready", "m_axis_tlast", "s_axil_awaddr",
         "s_axil_awvalid", "s_axil_awready", "s_axil_wdata", "s_axil_wstrb", "s_axil_wvalid",
         "s_axil_wready", "s_axil_bresp", "s_axil_bvalid", "s_axil_bready", "s_axil_araddr",
         "s_axil_arvalid", "s_axil_arready", "s_axil_rdata", "s_axil_rresp", "s_axil_rvalid",
         "s_axil_rready"]


@pytest.fixture(scope="module")
def top():
    rng = np.random.default_rng(0)
    return AcceleratorTop([MVAUStage("fc", 8, 4, pe=2, simd=4, weights_mode="runtime",
                                     weights=rng.integers(-127, 128, (4, 8)),
                                     multiplier=np.ones(4, int), shift=np.ones(4, int))],
                          name="small_accel")


def test_flat_axi_top(top):
    text = emit_verilog(top).text
    header = text[text.index("module small_accel("):].split(";", 1)[0]
    assert sorted(p.strip() for p in header.split("(", 1)[1].rstrip(")").split(",")) == \
        sorted(PORTS)
    assert "if (rst)" in text  # resets live in the flip-flops (see sim/verilog.py)


def test_design_files(top, tmp_path):
    files = write_design(top, tmp_path)
    info = json.loads(files["design"].read_text())
    assert info["in_lanes"] == 4 and info["runtime_params"] and info["param_segments"]
    md = files["registers_md"].read_text()
    assert "| 0x010 | CONTROL | rw |" in md and "Runtime parameter layout" in md
    h = files["registers_h"].read_text()
    assert "#define SMALL_ACCEL_PARAM_DATA 0x048u" in h
    assert "#define SMALL_ACCEL_STATUS_BUSY_MASK 0x00000001u" in h
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:  # the header is valid C
        src = tmp_path / "t.c"
        src.write_text('#include "registers.h"\nint x = SMALL_ACCEL_ID_RESET;\n')
        subprocess.run([cc, "-fsyntax-only", "-Wall", "-Werror", f"-I{tmp_path}", str(src)],
                       check=True)


def test_runtime_weights_are_not_in_the_verilog(top):
    rng = np.random.default_rng(1)
    other = AcceleratorTop([MVAUStage("fc", 8, 4, pe=2, simd=4, weights_mode="runtime",
                                      weights=rng.integers(-127, 128, (4, 8)),
                                      multiplier=np.ones(4, int), shift=np.ones(4, int))],
                           name="small_accel")
    assert emit_verilog(other).text == emit_verilog(top).text
