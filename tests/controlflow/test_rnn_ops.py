"""dynamic_lstm / dynamic_gru (ops ``lstm`` / ``gru``) against padded-and-masked numpy
references on random ragged batches, forward and gradients; gru_unit inside a
DynamicRNN equals dynamic_gru."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.frontend.backward import gradients
from tests.controlflow import refs

D = 3
BATCHES = {
    "ragged-1..20": refs.ragged_lengths(np.random.default_rng(11), 6),
    "all-length-1": [1, 1, 1],
    "all-equal": [4, 4, 4, 4],
}
VARIANTS = {
    "lstm": {"peep": True},
    "lstm-no-peepholes-reverse": {"peep": False, "reverse": True},
    "lstm-initial-state": {"peep": True, "init": True},
    "gru": {},
    "gru-reverse-origin-initial-state": {"reverse": True, "origin": True, "init": True},
}


def _run_case(kind: str, opts: dict, lens: list[int]):
    lstm = kind.startswith("lstm")
    width = (4 if lstm else 3) * D
    n = len(lens)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[width], dtype="float64", lod_level=1,
                        stop_gradient=False)
        h0 = layers.data(name="h0", shape=[D], dtype="float64", stop_gradient=False)
        c0 = layers.data(name="c0", shape=[D], dtype="float64", stop_gradient=False)
        init = opts.get("init", False)
        if lstm:
            hid, _ = layers.dynamic_lstm(x, 4 * D, h_0=h0 if init else None,
                                         c_0=c0 if init else None, use_peepholes=opts["peep"],
                                         is_reverse=opts.get("reverse", False),
                                         dtype="float64")
        else:
            hid = layers.dynamic_gru(x, D, is_reverse=opts.get("reverse", False),
                                     origin_mode=opts.get("origin", False),
                                     h_0=h0 if init else None)
        wout = layers.data(name="wout", shape=[D], dtype="float64", lod_level=1)
        loss = layers.reduce_sum(layers.elementwise_mul(hid, wout))
        params = main.global_block().all_parameters()
        wrt = [x, *params] + ([h0] + ([c0] if lstm else []) if init else [])
        grads = gradients(loss, wrt)
    rng = np.random.default_rng(sum(lens))
    vals = {"x": rng.standard_normal((sum(lens), width)) * 0.5,
            "wout": rng.standard_normal((sum(lens), D)),
            "h0": rng.standard_normal((n, D)), "c0": rng.standard_normal((n, D))}
    pvals = [rng.standard_normal(tuple(p.shape)) * 0.5 for p in params]
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        for p, v in zip(params, pvals):
            scope.var(p.name).get_tensor().set(v)
        feed = {"x": fluid.create_lod_tensor(vals["x"], [lens]),
                "wout": fluid.create_lod_tensor(vals["wout"], [lens]),
                "h0": vals["h0"], "c0": vals["c0"]}
        res = fluid.Executor().run(main, feed=feed, fetch_list=[hid, *grads],
                                   return_numpy=False)

    def ref():
        w, b = pvals[0], pvals[1] if len(pvals) > 1 else np.zeros((1, 3 * D))
        hv = vals["h0"] if init else None
        if lstm:
            return refs.lstm(vals["x"], lens, w, b, opts["peep"], opts.get("reverse", False),
                             hv, vals["c0"] if init else None)[0]
        return refs.gru(vals["x"], lens, w, b, opts.get("reverse", False),
                        opts.get("origin", False), hv)

    arrays = [vals["x"], *pvals] + ([vals["h0"]] + ([vals["c0"]] if lstm else [])
                                    if init else [])
    return res, ref, arrays, vals["wout"]


@pytest.mark.parametrize("batch", list(BATCHES))
@pytest.mark.parametrize("kind", list(VARIANTS))
def test_matches_padded_reference(kind, batch):
    lens = BATCHES[batch]
    res, ref, arrays, wout = _run_case(kind, VARIANTS[kind], lens)
    assert res[0].recursive_sequence_lengths() == [lens]
    np.testing.assert_allclose(np.asarray(res[0]), ref(), rtol=1e-12, atol=1e-12)

    def loss():
        return float((ref() * wout).sum())

    for arr, got in zip(arrays, res[1:]):
        refs.assert_grad(loss, arr, got)


def test_gru_unit_in_dynamic_rnn_equals_dynamic_gru():
    lens = [3, 7, 1, 4]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[3 * D], dtype="float32", lod_level=1)
        whole = layers.dynamic_gru(x, D, param_attr="gru_w", bias_attr="gru_b")
        drnn = layers.DynamicRNN()
        with drnn.block():
            xt = drnn.step_input(x)
            prev = drnn.memory(shape=[D])
            h, _, _ = layers.gru_unit(xt, prev, 3 * D, param_attr="gru_w", bias_attr="gru_b")
            drnn.update_memory(prev, h)
            drnn.output(h)
        stepped = drnn()
    assert len(main.global_block().all_parameters()) == 2  # shared by name
    xv = np.random.default_rng(3).standard_normal((sum(lens), 3 * D)).astype(np.float32)
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor()
        exe.run(startup)
        a, b = exe.run(main, feed={"x": fluid.create_lod_tensor(xv, [lens])},
                       fetch_list=[whole, stepped])
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lstm_needs_lod_input():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data(name="x", shape=[8])
        with pytest.raises(fluid.errors.ShapeError, match="lod_level 0"):
            layers.dynamic_lstm(x, 8)
