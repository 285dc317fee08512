"""Published results of other FPGA tools, shown beside the measured rows.

They are *published, not measured*: other models, boards and conditions, quoted from
their sources (docs/bench.md lists them) for scale only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PUBLISHED"]

#: one row each: what, where, the figures as published, and the source
PUBLISHED: list[dict[str, Any]] = [
    {"backend": "hls4ml", "variant": "MLPerf Tiny ResNet (image classification), Pynq-Z2",
     "throughput_per_s": 130.8, "latency_us": None,
     "figure": "median 130.8 inferences/s",
     "source": "hls4ml MLPerf Tiny submission: Borras et al., 'Open-source FPGA-ML codesign "
               "for the MLPerf Tiny Benchmark', arXiv:2206.11791 (2022)"},
    {"backend": "FINN", "variant": "MNIST binarised MLP (SFC-max), ZC706",
     "throughput_per_s": 12.3e6, "latency_us": 0.31,
     "figure": "12.3 M images/s at 0.31 us",
     "source": "Umuroglu et al., 'FINN: A Framework for Fast, Scalable Binarized Neural "
               "Network Inference', FPGA 2017, arXiv:1612.07119"},
]
