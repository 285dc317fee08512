"""Gradient cases for the fake-quantise ops (ir/ops/fake_quant.py).

Their gradients are straight-through estimators, not the derivative of a step
function, so each case carries a ``checker`` that compares append_backward's
gradient with the estimator's rule computed here in numpy: ``dOut`` (quantise-
dequantise), ``dOut / step`` (quantise), zero where a moving-average quantiser's
input lies outside its grid's range.  ``fake_dequantize_max_abs`` is linear: central
differences check it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.frontend.backward import gradients
from tests.grad_harness import GradCase, _build

R = np.random.default_rng(5)
Rule = Callable[[np.ndarray, np.ndarray, dict[str, Any]], np.ndarray]


def check_ste(case: STECase) -> None:
    prog, feed, float_inputs, loss = _build(case)
    assert float_inputs == ["x_0"], f"{case}: check X only, got {float_inputs}"
    (g,) = gradients(loss, [prog.global_block().var("x_0")])
    with fluid.scope_guard(fluid.Scope()):
        (got,) = fluid.Executor().run(prog, feed=feed, fetch_list=[g.name])
    want = case.rule(feed["x_0"], feed["w_out_out_0"], {**case.inputs, **case.attrs})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=str(case))
    assert case.expect_zeros == bool((want == 0).any()), \
        f"{case}: the case should{'' if case.expect_zeros else ' not'} clip some X"


@dataclass
class STECase(GradCase):
    rule: Rule = field(default=lambda x, d, a: d, repr=False)
    expect_zeros: bool = False
    checker: Callable[[Any], None] = field(default=check_ste, repr=False)


def _step(scale: np.ndarray, levels: int) -> np.ndarray:
    return np.asarray(scale, np.float32) / np.float32(levels)


def _per_tensor(levels: int) -> Rule:
    return lambda x, d, a: d / _step(np.abs(x).max(), levels).astype(np.float64)


def _per_channel_axis0(levels: int) -> Rule:
    return lambda x, d, a: d / _step(np.abs(x).max(axis=(1, 2)), levels).astype(
        np.float64).reshape(-1, 1, 1)


def _moving(lo: int, hi: int, levels: int, dequant: bool) -> Rule:
    def rule(x: np.ndarray, d: np.ndarray, a: dict[str, Any]) -> np.ndarray:
        rate = a.get("moving_rate", 0.9)
        scale = (rate * a["InAccum"][0] + np.abs(x).max()) / (rate * a["InState"][0] + 1)
        step = np.float64(_step(scale, levels))
        g = d if dequant else d / step
        return np.where((x >= lo * step) & (x <= hi * step), g, 0.0)

    return rule


def x(*shape: int) -> np.ndarray:
    return R.uniform(-2, 2, size=shape)


_MOVING_OUT = ["OutScale", "OutAccum", "OutState"]
_STATE = {"InScale": np.array([0.5]), "InAccum": np.array([0.3]), "InState": np.array([1.0])}

CASES = [
    STECase("fake_quantize_dequantize_abs_max", {"X": x(3, 4)}, {"bit_length": 4},
            outputs=["Out"], extra_outputs=["OutScale"], id="fqd_abs_max-identity"),
    STECase("fake_channel_wise_quantize_dequantize_abs_max", {"X": x(4, 3)},
            {"bit_length": 1, "kind": "bipolar", "quant_axis": 1}, outputs=["Out"],
            extra_outputs=["OutScale"], id="fqd_channel_wise-bipolar-identity"),
    STECase("fake_quantize_abs_max", {"X": x(3, 4)}, {"bit_length": 8}, outputs=["Out"],
            extra_outputs=["OutScale"], rule=_per_tensor(127), id="fq_abs_max-over-step"),
    STECase("fake_channel_wise_quantize_abs_max", {"X": x(2, 3, 2)}, {"bit_length": 4},
            outputs=["Out"], extra_outputs=["OutScale"], rule=_per_channel_axis0(7),
            id="fq_channel_wise-over-step"),
    STECase("fake_quantize_dequantize_moving_average_abs_max", {"X": x(4, 5), **_STATE},
            {"bit_length": 2}, outputs=["Out"], extra_outputs=_MOVING_OUT, check=["X"],
            rule=_moving(-2, 1, 1, True), expect_zeros=True, id="fqd_moving-2bit-clipped"),
    STECase("fake_quantize_moving_average_abs_max", {"X": x(4, 5), **_STATE},
            {"bit_length": 3, "kind": "unsigned"}, outputs=["Out"], extra_outputs=_MOVING_OUT,
            check=["X"], rule=_moving(0, 7, 7, False), expect_zeros=True,
            id="fq_moving-unsigned-clipped"),
    STECase("fake_quantize_dequantize_moving_average_abs_max", {"X": x(4, 5), **_STATE},
            {"bit_length": 2, "ste_clip": False}, outputs=["Out"], extra_outputs=_MOVING_OUT,
            check=["X"], id="fqd_moving-no-clip-identity"),
    STECase("fake_quantize_dequantize_bias",
            {"X": x(5), "InScale": np.array([0.7]), "WeightScale": x(5) + 3.0},
            {"in_bit_length": 2, "in_kind": "unsigned", "weight_bit_length": 3},
            check=["X"], id="fqd_bias-identity"),
    GradCase("fake_channel_wise_dequantize_max_abs",
             {"X": x(3, 4), "Scales": [np.array([0.5, 1.0, 2.0]), np.array([3.0])]},
             {"quant_bits": [4, 8]}, check=["X"], id="fake_channel_wise_dequantize_max_abs"),
    GradCase("fake_dequantize_max_abs", {"X": x(3, 4), "Scale": np.array([1.5])},
             {"max_range": 127.0}, check=["X"], id="fake_dequantize_max_abs"),
]
