"""The activations of Paddle 1.5 added for issue 20, through their layers, against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ShapeError
from fluid_hw.ir.registry import get_op

R = np.random.default_rng(7)
X = R.uniform(-8, 8, size=(4, 5)).astype(np.float32)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _elu(v, a):
    return np.where(v > 0, v, a * (np.exp(v) - 1))


SELU_SCALE, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
# layer call -> numpy reference of the same x
REFERENCE = {
    "elu": (lambda L, x: L.elu(x, alpha=0.5), lambda v: _elu(v, 0.5)),
    "relu6": (lambda L, x: L.relu6(x), lambda v: np.clip(v, 0, 6)),
    "selu": (lambda L, x: L.selu(x), lambda v: SELU_SCALE * _elu(v, SELU_ALPHA)),
    "swish": (lambda L, x: L.swish(x, beta=2.0), lambda v: v * _sig(2 * v)),
    "brelu": (lambda L, x: L.brelu(x, t_min=1.0, t_max=4.0), lambda v: np.clip(v, 1, 4)),
    "soft_relu": (lambda L, x: L.soft_relu(x, threshold=3.0),
                  lambda v: np.log(1 + np.exp(np.clip(v, -3, 3)))),
    "softplus": (lambda L, x: L.softplus(x), lambda v: np.log(1 + np.exp(v))),
    "softsign": (lambda L, x: L.softsign(x), lambda v: v / (1 + np.abs(v))),
    "logsigmoid": (lambda L, x: L.logsigmoid(x), lambda v: np.log(_sig(v))),
    "stanh": (lambda L, x: L.stanh(x), lambda v: 1.7159 * np.tanh(2 / 3 * v)),
    "tanh_shrink": (lambda L, x: L.tanh_shrink(x), lambda v: v - np.tanh(v)),
    "softshrink": (lambda L, x: L.softshrink(x, alpha=1.0),
                   lambda v: np.where(v > 1, v - 1, np.where(v < -1, v + 1, 0))),
    "hard_shrink": (lambda L, x: L.hard_shrink(x, threshold=2.0),
                    lambda v: np.where(np.abs(v) > 2, v, 0)),
    "thresholded_relu": (lambda L, x: L.thresholded_relu(x),
                         lambda v: np.where(v > 1, v, 0)),
    "atan": (lambda L, x: L.atan(x), np.arctan),
    "floor": (lambda L, x: L.floor(x), np.floor),
    "ceil": (lambda L, x: L.ceil(x), np.ceil),
    "round": (lambda L, x: L.round(x), np.round),
    "sign": (lambda L, x: L.sign(x), np.sign),
    "cos": (lambda L, x: L.cos(x), np.cos),
    "sin": (lambda L, x: L.sin(x), np.sin),
    "square": (lambda L, x: L.square(x), np.square),
    "clip": (lambda L, x: L.clip(x, min=-1.5, max=2.5), lambda v: np.clip(v, -1.5, 2.5)),
}
POSITIVE = {  # defined on (0, inf) or [-1, 1] only
    "rsqrt": (lambda L, x: L.rsqrt(x), lambda v: 1 / np.sqrt(v)),
    "reciprocal": (lambda L, x: L.reciprocal(x), lambda v: 1 / v),
    "pow": (lambda L, x: L.pow(x, factor=1.5), lambda v: v ** 1.5),
    "acos": (lambda L, x: L.acos(x), np.arccos),
    "asin": (lambda L, x: L.asin(x), np.arcsin),
}


def _run(layer, x):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        xv = fluid.layers.data("x", shape=list(x.shape[1:]), dtype="float32")
        out = layer(fluid.layers, xv)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(start)
    return exe.run(main, feed={"x": x}, fetch_list=[out])[0]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_activation_matches_numpy(name):
    layer, ref = REFERENCE[name]
    np.testing.assert_allclose(_run(layer, X), ref(X.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_activation_on_its_domain_matches_numpy(name):
    layer, ref = POSITIVE[name]
    x = R.uniform(0.05, 0.95, size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(layer, x), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_defaults_are_paddles():
    assert get_op("selu").attr_def("scale").default == pytest.approx(SELU_SCALE)
    assert get_op("soft_relu").attr_def("threshold").default == 40.0
    assert get_op("brelu").attr_def("t_max").default == 24.0
    assert get_op("hard_shrink").attr_def("threshold").default == 0.5


@pytest.mark.parametrize("mode", ["all", "channel", "element"])
def test_prelu_learns_alpha_from_025(mode):
    x = R.uniform(-1, 1, size=(2, 3, 4)).astype(np.float32)
    out = _run(lambda L, v: L.prelu(v, mode), x)
    np.testing.assert_allclose(out, np.where(x > 0, x, 0.25 * x), rtol=1e-6)


def test_bad_arguments_are_named():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        with pytest.raises(ValueError, match="prelu: mode"):
            fluid.layers.prelu(x, "rows")
        with pytest.raises(ValueError, match="clip: min"):
            fluid.layers.clip(x, 2.0, 1.0)
        y = fluid.layers.data("y", shape=[-1, 3], dtype="float32", append_batch_size=False)
        with pytest.raises(ShapeError, match="prelu"):
            fluid.layers.prelu(fluid.layers.transpose(y, [1, 0]), "channel")
