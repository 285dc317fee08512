"""conv_bn_fuse: Before / Expected, and the folded values."""

import numpy as np
import pytest

from fluid_hw.passes import PassContext, PassError, get_pass
from tests.passes._util import Net, assert_structure, run


def _before(conv_bias: bool, is_test: bool = True) -> Net:
    n = Net()
    n.data("x", [-1, 2, 5, 5])
    n.param("w", [3, 2, 3, 3])
    n.op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "c"}, {"paddings": [1, 1]})
    src = "c"
    if conv_bias:
        n.param("b0", [3])
        n.op("elementwise_add", {"X": "c", "Y": "b0"}, {"Out": "cb"}, {"axis": 1})
        src = "cb"
    n.param("gamma", [3], [1.5, 0.5, -1.0])
    n.param("beta", [3], [0.1, -0.2, 0.3])
    n.param("mean", [3], [0.5, 0.0, -0.5])
    n.param("var", [3], [4.0, 1.0, 0.25])
    n.op("batch_norm", {"X": src, "Scale": "gamma", "Bias": "beta", "Mean": "mean",
                        "Variance": "var"},
         {"Y": "y", "MeanOut": "mean", "VarianceOut": "var", "SavedMean": "sm",
          "SavedVariance": "sv"}, {"is_test": is_test, "epsilon": 0.0})
    return n


@pytest.mark.parametrize("conv_bias", [False, True])
def test_batch_norm_folds_into_the_convolution(conv_bias):
    n = _before(conv_bias)
    scope = n.scope()
    ctx = PassContext(scope=scope, fetch_names=["y"])
    out, changed = get_pass("conv_bn_fuse").apply(n.program, ctx)
    e = Net()
    e.data("x", [-1, 2, 5, 5])
    e.param("w.bn_fused", [3, 2, 3, 3])
    e.param("beta.bn_fused", [3])
    e.op("conv2d", {"Input": "x", "Filter": "w.bn_fused"}, {"Output": "c"},
         {"paddings": [1, 1]})
    e.op("elementwise_add", {"X": "c", "Y": "beta.bn_fused"}, {"Out": "y"}, {"axis": 1})
    assert changed
    assert_structure(out, e.program)
    # the values, by the formula (epsilon 0: a = gamma / sqrt(var))
    a = np.array([1.5 / 2.0, 0.5 / 1.0, -1.0 / 0.5])
    b0 = n.values["b0"] if conv_bias else np.zeros(3)
    np.testing.assert_allclose(scope.vars["w.bn_fused"], n.values["w"] * a[:, None, None, None],
                               rtol=1e-6)
    np.testing.assert_allclose(scope.vars["beta.bn_fused"],
                               (b0 - [0.5, 0.0, -0.5]) * a + [0.1, -0.2, 0.3], rtol=1e-6)
    # nothing overwritten; the old parameters are gone from the program only
    np.testing.assert_array_equal(scope.vars["w"], n.values["w"])
    assert not out.global_block().has_var("gamma")
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(np.float32)
    (want,) = run(n.program, scope, {"x": x}, ["y"])
    (got,) = run(out, scope, {"x": x}, ["y"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_training_mode_batch_norm_stays():
    n = _before(False, is_test=False)
    _, changed = get_pass("conv_bn_fuse").apply(
        n.program, PassContext(scope=n.scope(), fetch_names=["y"]))
    assert not changed


def test_conv_bn_fuse_needs_the_parameters():
    with pytest.raises(PassError, match="needs a scope"):
        get_pass("conv_bn_fuse").apply(_before(False).program)
    # a scope without the values: nothing to fold
    _, changed = get_pass("conv_bn_fuse").apply(_before(False).program,
                                                PassContext(scope={}, fetch_names=["y"]))
    assert not changed


def _unchanged(n, scope):
    before = set(scope.vars)
    out, changed = get_pass("conv_bn_fuse").apply(n.program, PassContext(scope=scope,
                                                                       fetch_names=["y"]))
    assert not changed and set(scope.vars) == before
    assert_structure(out, n.program)


@pytest.mark.parametrize("bad", ["scalar_filter", "short_gamma", "bias_length",
                                 "int_filter", "zero_variance"])
def test_values_that_cannot_fold_are_left_alone(bad):
    # regression (issue 14): verified programs whose values do not fit crashed the pass
    # (IndexError on a 0-d filter, numpy broadcast errors, division by zero)
    n = _before(conv_bias=True)
    scope = n.scope()
    if bad == "scalar_filter":
        scope.vars["w"] = np.float32(2.0)
    elif bad == "short_gamma":
        scope.vars["gamma"] = np.ones(2, np.float32)
    elif bad == "bias_length":
        scope.vars["b0"] = np.ones(5, np.float32)
    elif bad == "int_filter":
        scope.vars["w"] = scope.vars["w"].astype(np.int32)
    else:
        scope.vars["var"] = np.zeros(3, np.float32)
    _unchanged(n, scope)


def test_declared_shapes_the_fused_ops_refuse_are_left_alone():
    # regression (issue 14): the verifier does not re-infer shapes, so a program may
    # declare an input the rebuilt conv2d refuses: ShapeError came out of the pass
    n = _before(conv_bias=False)
    n.block.var("x").desc_shape = []
    _unchanged(n, n.scope())
