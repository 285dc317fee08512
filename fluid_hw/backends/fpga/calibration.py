"""The LUT/FF calibration of the resource estimates
(:data:`fluid_hw.hls.autofold.CALIBRATION`), measured with Yosys.

    python -m fluid_hw.backends.fpga.calibration WORK_DIR     # ~20 minutes

:func:`calibration_designs` lists the accelerators measured (MLPs at many foldings,
constant and runtime weights, convolutions alone and followed by each issue-13 kind);
:func:`calibrate` synthesises each as its own top for each board's family, and the
UART bridge with the board top's reset and heartbeat (:class:`_BridgeOnly`), and
compares Yosys' counts with :func:`fluid_hw.hls.stages.estimate_pipeline`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from amaranth.hdl import ClockDomain, ClockSignal, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from ...boards import get_board
from ...boards.toolchain import print_progress, synthesize
from ...rtl import AcceleratorTop, AXILiteSignature, StageSpec
from ...rtl.uart_bridge import UartBridge
from ...tools import Progress

__all__ = ["calibrate", "calibration_designs"]


def calibrate(designs: Mapping[str, Sequence[StageSpec]], boards: Sequence[str],
              work: str | os.PathLike[str], progress: Progress = print_progress
              ) -> dict[str, Any]:
    """Synthesise each accelerator (as its own top) for each board's family and compare
    Yosys' LUT and flip-flop counts with :func:`fluid_hw.hls.stages.estimate_pipeline`:
    the data behind :data:`fluid_hw.hls.autofold.CALIBRATION`.  Also measures the
    board top's share (a ``UartBridge`` with reset and heartbeat).  Returns per family
    the ratios per design and their mean."""
    from amaranth.back import rtlil

    from ...hls.stages import estimate_pipeline

    out: dict[str, Any] = {}
    root = Path(work)
    for board_name in boards:
        board = get_board(board_name)
        fam = board.family.name
        rows: dict[str, dict[str, Any]] = {}
        for name, specs in designs.items():
            d = root / fam / name
            d.mkdir(parents=True, exist_ok=True)
            top = AcceleratorTop(list(specs))
            (d / "accel.il").write_text(rtlil.convert(top, name="accel"))
            syn = synthesize(board, d, [d / "accel.il"], "accel", progress=progress)
            e = estimate_pipeline(list(specs)).resources
            rows[name] = {"estimate": {"lut": e.lut, "ff": e.ff, "dsp": e.dsp, "bram": e.bram},
                          "yosys": {k: syn.resources.get(k, 0) for k in
                                    ("lut", "ff", "dsp", "bram")},
                          "lut_ratio": round(syn.resources.get("lut", 0) / e.lut, 3),
                          "ff_ratio": round(syn.resources.get("ff", 0) / e.ff, 3)}
        d = root / fam / "bridge"
        d.mkdir(parents=True, exist_ok=True)
        bridge = _BridgeOnly(UartBridge(in_bytes=1, out_bytes=1, divisor=33,
                                        idle_timeout=2_000_000))
        (d / "bridge.il").write_text(rtlil.convert(bridge, name="bridge"))
        syn = synthesize(board, d, [d / "bridge.il"], "bridge", progress=progress)
        n = len(rows)
        out[fam] = {"designs": rows,
                    "lut_scale": round(sum(r["lut_ratio"] for r in rows.values()) / n, 3),
                    "ff_scale": round(sum(r["ff_ratio"] for r in rows.values()) / n, 3),
                    "board_top": {k: syn.resources.get(k, 0) for k in ("lut", "ff")}}
    return out


class _BridgeOnly(wiring.Component):
    """A UART bridge with the board top's reset synchroniser and heartbeat, every
    port kept (for :func:`calibrate`)."""

    def __init__(self, bridge: UartBridge) -> None:
        self.bridge = bridge
        super().__init__(wiring.Signature({
            "clk": In(1), "rx": In(1), "tx": Out(1), "rst_in": In(1), "led": Out(1),
            "axil": Out(AXILiteSignature(UartBridge.ADDR_WIDTH)),
            "s_axis": Out(stream.Signature(8 * bridge.in_bytes + 1)),
            "m_axis": In(stream.Signature(8 * bridge.out_bytes + 1))}))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(self.clk)
        m.submodules.bridge = b = self.bridge
        m.submodules.reset_sync = ResetSynchronizer(self.rst_in)
        wiring.connect(m, b.axil, wiring.flipped(self.axil))
        wiring.connect(m, b.s_axis, wiring.flipped(self.s_axis))
        wiring.connect(m, wiring.flipped(self.m_axis), b.m_axis)
        hb = Signal(27)
        m.d.sync += hb.eq(hb + 1)
        m.d.comb += [b.rx.eq(self.rx), self.tx.eq(b.tx), self.led.eq(hb[-1])]
        return m


def calibration_designs() -> dict[str, list[StageSpec]]:
    """The accelerators :func:`calibrate` measures: MLPs folded from 1 x 1 to 2 x 16
    and 1 x 128, PE-heavy and SIMD-heavy, constant and runtime weights, a
    convolution + max pool + fully-connected design, and small convolutions alone and
    followed by each of the issue-13 kinds (depthwise convolution, average and global
    average pooling, table activation)."""
    import numpy as np

    from ...hls.stages import ConvStage, MaxPoolStage, MVAUStage

    rng = np.random.default_rng(0)

    def fc(name: str, mw: int, mh: int, pe: int, simd: int, relu: bool = True,
           mode: str = "const") -> MVAUStage:
        arr: dict[str, Any] = {} if mode == "runtime" else dict(
            weights=rng.integers(-127, 128, (mh, mw)), bias=rng.integers(-5000, 5000, mh),
            multiplier=rng.integers(1, 2**15, mh), shift=rng.integers(16, 24, mh))
        return MVAUStage(name, mw, mh, pe=pe, simd=simd, relu=relu, weights_mode=mode, **arr)

    conv = ConvStage("conv", (1, 8, 8), 8, kernel=3, padding=1, pe=2, simd=3, relu=True,
                     weights=rng.integers(-127, 128, (8, 1, 3, 3)),
                     bias=rng.integers(-500, 500, 8), multiplier=rng.integers(1, 2**15, 8),
                     shift=rng.integers(10, 16, 8))
    designs: dict[str, list[StageSpec]] = {
        "mlp_64_128_64_10": [fc("fc_0", 64, 128, 1, 32), fc("fc_1", 128, 64, 1, 32),
                             fc("fc_2", 64, 10, 1, 4, relu=False)],
        "mlp_64_128_64_10_1x1": [fc("fc_0", 64, 128, 1, 1), fc("fc_1", 128, 64, 1, 1),
                                 fc("fc_2", 64, 10, 1, 1, relu=False)],
        "mlp_64_128_64_10_2x16": [fc("fc_0", 64, 128, 2, 16), fc("fc_1", 128, 64, 2, 16),
                                  fc("fc_2", 64, 10, 1, 2, relu=False)],
        "mlp_64_32_10_1x1": [fc("fc_0", 64, 32, 1, 1), fc("fc_1", 32, 10, 1, 1, relu=False)],
        "mlp_64_32_10_4x8": [fc("fc_0", 64, 32, 4, 8), fc("fc_1", 32, 10, 2, 4, relu=False)],
        "mlp_32_16_10": [fc("fc_0", 32, 16, 1, 2), fc("fc_1", 16, 10, 1, 1, relu=False)],
        "fc_128_10_wide": [fc("fc_0", 128, 10, 1, 128, relu=False)],
        "mlp_16_64_16_pe": [fc("fc_0", 16, 64, 8, 2), fc("fc_1", 64, 16, 4, 4, relu=False)],
        "fc_8_8": [fc("fc_0", 8, 8, 1, 1, relu=False)],
        "mlp_runtime_16": [fc("fc_0", 16, 16, 4, 4, mode="runtime"),
                           fc("fc_1", 16, 16, 4, 4, relu=False, mode="runtime")],
        "mlp_runtime_64_32_10": [fc("fc_0", 64, 32, 1, 8, mode="runtime"),
                                 fc("fc_1", 32, 10, 1, 4, relu=False, mode="runtime")],
        "conv_pool_fc": [conv, MaxPoolStage("pool", (8, 8, 8), kernel=2),
                         fc("fc", 128, 10, 2, 8, relu=False)],
    }
    designs.update(_new_kind_designs(rng))
    return designs


def _new_kind_designs(rng: Any) -> dict[str, list[StageSpec]]:
    """Depthwise convolutions, average pools and table activations (issue 13), each
    behind a small 3x3 convolution (constant and runtime parameters); the convolutions
    alone too, so that each stage's share (a design's count less its convolution's) can
    be read off."""
    from ...hls.stages import ConvStage
    from ...rtl import AvgPoolSpec, DepthwiseSpec, TableSpec

    def conv(cout: int, pe: int, shape: tuple[int, int, int] = (1, 8, 8)) -> ConvStage:
        return ConvStage("conv", shape, cout, kernel=3, padding=1, pe=pe, simd=3, relu=True,
                         weights=rng.integers(-127, 128, (cout, shape[0], 3, 3)),
                         bias=rng.integers(-500, 500, cout),
                         multiplier=rng.integers(1, 2**15, cout),
                         shift=rng.integers(10, 16, cout))

    def dw(c: int, pe: int, k: int = 3, stride: int = 1, mode: str = "const"
           ) -> DepthwiseSpec:
        arr = {} if mode == "runtime" else dict(
            weights=rng.integers(-127, 128, (c, 1, k, k)), bias=rng.integers(-500, 500, c),
            multiplier=rng.integers(1, 2**15, c), shift=rng.integers(10, 16, c))
        return DepthwiseSpec("dw", (c, 8, 8), kernel=k, stride=stride, padding=k // 2,
                             pe=pe, relu=True, weights_mode=mode, **arr)

    def avg(c: int, k: int, mode: str = "const") -> AvgPoolSpec:
        return AvgPoolSpec("pool", (c, 8, 8), kernel=k, multiplier=1234, shift=16,
                           weights_mode=mode)

    def table(mode: str = "const") -> TableSpec:
        return TableSpec("act", (8, 8, 8), rng.integers(-128, 128, 256), weights_mode=mode)

    return {
        "conv_8_pe1": [conv(8, 1)],
        "conv_8_pe4": [conv(8, 4)],
        "conv_64_pe1": [conv(64, 1)],
        "conv_64_pe4": [conv(64, 4)],
        "conv_128_pe1": [conv(128, 1)],
        "conv_dw_8_pe1": [conv(8, 1), dw(8, 1)],
        "conv_dw_8_pe4": [conv(8, 4), dw(8, 4)],
        "conv_dw_8_pe1_runtime": [conv(8, 1), dw(8, 1, mode="runtime")],
        "conv_dw_8_pe4_runtime": [conv(8, 4), dw(8, 4, mode="runtime")],
        "conv_dw_64_pe1": [conv(64, 1), dw(64, 1)],
        "conv_dw_64_5x5s2_pe4": [conv(64, 4), dw(64, 4, k=5, stride=2)],
        "conv_avgpool_8_l1": [conv(8, 1), avg(8, 2)],
        "conv_avgpool_8_l4": [conv(8, 4), avg(8, 2)],
        "conv_gap_8_l1": [conv(8, 1), avg(8, 8)],
        "conv_gap_8_l4": [conv(8, 4), avg(8, 8)],
        "conv_gap_128_l1": [conv(128, 1), avg(128, 8)],
        "conv_table_8_l1": [conv(8, 1), table()],
        "conv_table_8_l4": [conv(8, 4), table()],
        "conv_avgpool_8_l1_runtime": [conv(8, 1), avg(8, 2, "runtime")],
        "conv_avgpool_8_l4_runtime": [conv(8, 4), avg(8, 2, "runtime")],
        "conv_table_8_l1_runtime": [conv(8, 1), table("runtime")],
        "conv_table_8_l4_runtime": [conv(8, 4), table("runtime")],
    }



USAGE = "usage: python -m fluid_hw.backends.fpga.calibration WORK_DIR"


def main(argv: Sequence[str]) -> int:  # pragma: no cover - a developer's tool
    """``python -m fluid_hw.backends.fpga.calibration WORK_DIR`` (also ``calibrate
    WORK_DIR``, and through ``python -m fluid_hw.backends.fpga.bitstream calibrate
    WORK_DIR`` as before): :func:`calibrate` on the ULX3S and iCEBreaker families,
    printed as JSON."""
    args = list(argv[1:]) if argv[:1] == ["calibrate"] else list(argv)
    if len(args) != 1:
        print(USAGE)
        return 2
    res = calibrate(calibration_designs(), ["ulx3s-85f", "icebreaker"], args[0])
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
