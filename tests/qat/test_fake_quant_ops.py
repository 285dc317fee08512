"""The fake-quantise ops against numpy models of their definitions (Paddle 1.5's
semantics with round-half-even, ir/ops/fake_quant.py), their state in training and
test mode, and their errors."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import OpAttrError

R = np.random.default_rng(3)


def _run(op_type, inputs, attrs, outputs, state=None):
    """One op on fed / scoped arrays; returns the named outputs."""
    prog = fluid.Program()
    b = prog.global_block()
    feed, scope = {}, fluid.Scope()
    ins = {}
    for slot, v in inputs.items():
        if isinstance(v, list):  # a duplicable slot
            ins[slot] = []
            for i, vi in enumerate(v):
                name = f"{slot.lower()}_{i}"
                b.create_var(name=name, shape=list(vi.shape), dtype=vi.dtype)
                feed[name] = vi
                ins[slot].append(name)
            continue
        persist = state is not None and slot in state
        name = state[slot] if persist else slot.lower()
        b.create_var(name=name, shape=list(v.shape), dtype=v.dtype, persistable=persist)
        (scope.vars.__setitem__(name, v) if persist else feed.__setitem__(name, v))
        ins[slot] = name
    outs = {}
    for slot in [*outputs, *(k for k in (state or {}) if k.startswith("Out") and
                             k not in outputs)]:
        # state outputs are the state inputs themselves (in place, as batch_norm's)
        outs[slot] = state[slot] if state and slot in state else slot.lower() + "_out"
        if not b.has_var(outs[slot]):
            b.create_var(name=outs[slot])
    b.append_op(op_type, ins, outs, attrs)
    got = fluid.Executor().run(prog, feed=feed, fetch_list=[outs[s] for s in outputs],
                               scope=scope)
    return got, scope


def test_abs_max_quantise_and_dequantise_follow_the_grid():
    x = R.uniform(-3, 3, size=(5, 7)).astype(np.float32)
    (q, s), _ = _run("fake_quantize_abs_max", {"X": x}, {"bit_length": 4}, ["Out", "OutScale"])
    step = np.float32(np.abs(x).max()) / np.float32(7)
    np.testing.assert_array_equal(s, [np.abs(x).max()])
    np.testing.assert_array_equal(q, np.rint(x.astype(np.float64) / np.float64(step)))
    assert q.min() >= -7 and q.max() <= 7 and np.abs(q).max() == 7
    (d,), _ = _run("fake_dequantize_max_abs", {"X": q, "Scale": s}, {"max_range": 7.0}, ["Out"])
    (qd, _), _ = _run("fake_quantize_dequantize_abs_max", {"X": x}, {"bit_length": 4},
                      ["Out", "OutScale"])
    np.testing.assert_allclose(d, qd, rtol=1e-6)
    np.testing.assert_allclose(qd, (q * np.float64(step)).astype(np.float32), rtol=0)
    assert np.abs(qd - x).max() <= step / 2 + 1e-6


def test_channel_wise_dequantise_inverts_the_channel_wise_quantiser():
    w = R.normal(size=(4, 2, 3, 3)).astype(np.float32)  # conv filter: channels on axis 0
    (q, s), _ = _run("fake_channel_wise_quantize_abs_max", {"X": w}, {"bit_length": 8},
                     ["Out", "OutScale"])
    (d,), _ = _run("fake_channel_wise_dequantize_max_abs", {"X": q, "Scales": s},
                   {"quant_bits": [8]}, ["Out"])
    (qd, _), _ = _run("fake_channel_wise_quantize_dequantize_abs_max", {"X": w},
                      {"bit_length": 8}, ["Out", "OutScale"])
    np.testing.assert_allclose(d, qd, rtol=1e-6)
    in_scale = np.array([2.0], np.float32)  # a layer's output: weight and input scales
    (d2,), _ = _run("fake_channel_wise_dequantize_max_abs",
                    {"X": q, "Scales": [s, in_scale]}, {"quant_bits": [8, 4]}, ["Out"])
    np.testing.assert_allclose(d2, q * (s / 127).reshape(4, 1, 1, 1) * (2.0 / 7), rtol=1e-6)


def test_rounding_is_half_to_even():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 127.0]], np.float32)  # max 127: step 1
    (q, _), _ = _run("fake_quantize_abs_max", {"X": x}, {"bit_length": 8}, ["Out", "OutScale"])
    np.testing.assert_array_equal(q, [[0, 2, 2, -0, -2, 127]])


def test_channel_wise_scales_per_output_channel_and_bipolar_mean():
    w = R.normal(size=(6, 4)).astype(np.float32)  # fc weight [K, C]: channels on axis 1
    (q, s), _ = _run("fake_channel_wise_quantize_abs_max", {"X": w},
                     {"bit_length": 2, "quant_axis": 1}, ["Out", "OutScale"])
    np.testing.assert_array_equal(s, np.abs(w).max(axis=0))
    np.testing.assert_array_equal(q, np.rint(w / s.reshape(1, 4)))  # ternary: levels 1
    assert set(q.reshape(-1).tolist()) <= {-1.0, 0.0, 1.0}
    (qb, sb), _ = _run("fake_channel_wise_quantize_dequantize_abs_max", {"X": w},
                       {"bit_length": 1, "kind": "bipolar", "quant_axis": 1},
                       ["Out", "OutScale"])
    np.testing.assert_allclose(sb, np.abs(w).mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(qb, np.where(w >= 0, 1, -1) * sb.reshape(1, 4))


def test_moving_average_state_in_training_and_test_mode():
    xs = [R.uniform(-m, m, size=(4, 3)).astype(np.float32) for m in (1.0, 4.0, 2.0)]
    state = {"InScale": "scale", "InAccum": "accum", "InState": "state",
             "OutScale": "scale", "OutAccum": "accum", "OutState": "state"}
    scope_vals = {"InScale": np.array([0.001], np.float32),
                  "InAccum": np.zeros(1, np.float32), "InState": np.zeros(1, np.float32)}
    accum = st = 0.0
    for x in xs:
        (out, scale), scope = _run(
            "fake_quantize_dequantize_moving_average_abs_max", {"X": x, **scope_vals},
            {"bit_length": 3, "kind": "unsigned", "moving_rate": 0.9}, ["Out", "OutScale"],
            state=state)
        st, accum = 0.9 * st + 1, 0.9 * accum + float(np.abs(x).max())
        np.testing.assert_allclose(scale, [accum / st], rtol=1e-6)
        step = np.float64(np.float32(scale[0]) / np.float32(7))
        np.testing.assert_array_equal(
            out, (np.clip(np.rint(x / step), 0, 7) * step).astype(np.float32))
        scope_vals = {k: np.array(scope.find_value(v)) for k, v in
                      (("InScale", "scale"), ("InAccum", "accum"), ("InState", "state"))}
    assert scope_vals["InState"][0] == pytest.approx(0.9 * 0.9 + 0.9 + 1)
    # test mode: the stored scale, nothing updated
    big = np.full((2, 3), 100.0, np.float32)
    (out, scale), scope = _run(
        "fake_quantize_dequantize_moving_average_abs_max", {"X": big, **scope_vals},
        {"bit_length": 3, "kind": "unsigned", "is_test": True}, ["Out", "OutScale"],
        state=state)
    np.testing.assert_array_equal(scale, scope_vals["InScale"])
    np.testing.assert_allclose(out, np.float32(scale[0]), rtol=1e-6)  # saturated at 7 steps
    np.testing.assert_array_equal(scope.find_value("accum"), scope_vals["InAccum"])


def test_bipolar_activation_is_the_sign_times_the_scale():
    x = np.array([[-0.3, 0.0, 2.0, -4.0]], np.float32)
    (out, s), _ = _run("fake_quantize_dequantize_moving_average_abs_max",
                       {"X": x, "InScale": np.array([1.0], np.float32)},
                       {"bit_length": 1, "kind": "bipolar", "moving_rate": 0.5},
                       ["Out", "OutScale"])
    np.testing.assert_allclose(s, [0.5 * 1.0 + 0.5 * 4.0])  # no accum/state: plain EMA
    np.testing.assert_array_equal(out, np.array([[-1, 1, 1, -1]], np.float32) * s[0])


def test_an_all_zero_tensor_gives_zeros():
    (q, s), _ = _run("fake_quantize_dequantize_abs_max", {"X": np.zeros((2, 2), np.float32)},
                     {"bit_length": 8}, ["Out", "OutScale"])
    assert not q.any() and s[0] == 0


@pytest.mark.parametrize("attrs, msg", [
    ({"bit_length": 1}, "1-bit signed grid has no symmetric levels; use kind='bipolar'"),
    ({"bit_length": 2, "kind": "bipolar"}, "kind 'bipolar' is 1-bit"),
    ({"bit_length": 17}, "out of range"),
    ({"kind": "ternary"}, "allowed values"),
])
def test_bad_grids_are_refused_naming_the_op(attrs, msg):
    prog = fluid.Program()
    b = prog.global_block()
    b.create_var(name="x", shape=[2, 2], dtype="float32")
    b.create_var(name="o")
    b.create_var(name="s")
    with pytest.raises(OpAttrError, match="fake_quantize_abs_max") as e:
        b.append_op("fake_quantize_abs_max", {"X": "x"}, {"Out": "o", "OutScale": "s"}, attrs)
    assert msg in str(e.value)


@pytest.mark.parametrize("half_step", [False, True])
def test_bias_lands_on_the_accumulator_grid(half_step):
    b = np.array([0.31, -0.2, 1.0, 0.0], np.float32)
    s_in, s_w = np.array([2.0], np.float32), np.array([0.5, 1.0, 1.5, 0.7], np.float32)
    (out,), _ = _run("fake_quantize_dequantize_bias",
                     {"X": b, "InScale": s_in, "WeightScale": s_w},
                     {"in_bit_length": 8, "weight_bit_length": 2, "half_step": half_step},
                     ["Out"])
    acc = np.float64(np.float32(2.0) / np.float32(127)) * s_w.astype(np.float64)  # 2-bit: /1
    k = np.floor(b / acc) + 0.5 if half_step else np.rint(b / acc)
    np.testing.assert_array_equal(out, (k * acc).astype(np.float32))
    assert np.abs(out - b).max() <= acc.max() / 2 + 1e-7
