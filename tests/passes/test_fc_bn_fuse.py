"""fc_bn_fuse: Before / Expected, the folded values, and what is left alone."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.frontend import layers
from fluid_hw.ir.verifier import verify_program
from fluid_hw.passes import PassContext, PassError, get_pass, inference_pipeline
from tests.passes._util import Net, assert_structure, op_types, run

GAMMA, BETA = [1.5, 0.5, -1.0], [0.1, -0.2, 0.3]
MEAN, VAR = [0.5, 0.0, -0.5], [4.0, 1.0, 0.25]
A = np.array([1.5 / 2.0, 0.5 / 1.0, -1.0 / 0.5])  # gamma / sqrt(var), epsilon 0


def _before(form: str = "mul", bias: bool = True, is_test: bool = True,
            act: str = "") -> Net:
    """x [-1, 4] -> fc 3 (as mul [+ add], or one fc op) -> batch_norm -> y."""
    n = Net()
    n.data("x", [-1, 4])
    n.param("w", [4, 3])
    if bias:
        n.param("b0", [3])
    if form == "fc":
        ins = {"Input": "x", "W": "w", **({"Bias": "b0"} if bias else {})}
        n.op("fc", ins, {"Out": "t"}, {"in_num_col_dims": 1, "activation_type": act})
    else:
        n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t" if not bias else "t0"})
        if bias:
            n.op("elementwise_add", {"X": "t0", "Y": "b0"}, {"Out": "t"}, {"axis": 1})
    for name, v in (("gamma", GAMMA), ("beta", BETA), ("mean", MEAN), ("var", VAR)):
        n.param(name, [3], v)
    n.op("batch_norm", {"X": "t", "Scale": "gamma", "Bias": "beta", "Mean": "mean",
                        "Variance": "var"},
         {"Y": "y", "MeanOut": "mean", "VarianceOut": "var", "SavedMean": "sm",
          "SavedVariance": "sv"}, {"is_test": is_test, "epsilon": 0.0})
    return n


def _apply(n: Net, fetch: list[str] | None = None):
    scope = n.scope()
    out, changed = get_pass("fc_bn_fuse").apply(
        n.program, PassContext(scope=scope, fetch_names=fetch or ["y"]))
    return out, changed, scope


def _check_numbers(n: Net, out, scope, bias: bool) -> None:
    """The folded values by the formula, and the same outputs on random inputs."""
    b0 = n.values["b0"] if bias else np.zeros(3)
    np.testing.assert_allclose(scope.vars["w.bn_fused"], n.values["w"] * A[None, :], rtol=1e-6)
    np.testing.assert_allclose(scope.vars["beta.bn_fused"],
                               (b0 - np.array(MEAN)) * A + BETA, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(scope.vars["w"], n.values["w"])  # nothing overwritten
    assert not out.global_block().has_var("gamma")
    verify_program(out)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (want,) = run(n.program, scope, {"x": x}, ["y"])
    (got,) = run(out, scope, {"x": x}, ["y"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_mul_and_add(bias):
    n = _before("mul", bias)
    out, changed, scope = _apply(n)
    e = Net()
    e.data("x", [-1, 4])
    e.param("w.bn_fused", [4, 3])
    e.param("beta.bn_fused", [3])
    t = "t0" if bias else "t"
    e.op("mul", {"X": "x", "Y": "w.bn_fused"}, {"Out": t},
         {"x_num_col_dims": 1, "y_num_col_dims": 1})
    e.op("elementwise_add", {"X": t, "Y": "beta.bn_fused"}, {"Out": "y"}, {"axis": 1})
    assert changed
    assert_structure(out, e.program)
    _check_numbers(n, out, scope, bias)


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_an_fc_op(bias):
    n = _before("fc", bias)
    out, changed, scope = _apply(n)
    e = Net()
    e.data("x", [-1, 4])
    e.param("w.bn_fused", [4, 3])
    e.param("beta.bn_fused", [3])
    e.op("fc", {"Input": "x", "W": "w.bn_fused", "Bias": "beta.bn_fused"}, {"Out": "y"},
         {"in_num_col_dims": 1, "activation_type": ""})
    assert changed
    assert_structure(out, e.program)
    _check_numbers(n, out, scope, bias)


def test_training_mode_batch_norm_stays():
    for form in ("mul", "fc"):
        _, changed, _ = _apply(_before(form, is_test=False))
        assert not changed, form


def test_an_fc_with_its_activation_fused_stays():
    # the batch norm reads relu(fc): folding it into W would move it before the relu
    _, changed, _ = _apply(_before("fc", act="relu"))
    assert not changed


def test_mul_add_relu_then_batch_norm_stays():
    n = Net()
    n.data("x", [-1, 4])
    n.param("w", [4, 3])
    n.param("b0", [3])
    n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t0"})
    n.op("elementwise_add", {"X": "t0", "Y": "b0"}, {"Out": "t1"}, {"axis": 1})
    n.op("relu", {"X": "t1"}, {"Out": "t"})
    for name, v in (("gamma", GAMMA), ("beta", BETA), ("mean", MEAN), ("var", VAR)):
        n.param(name, [3], v)
    n.op("batch_norm", {"X": "t", "Scale": "gamma", "Bias": "beta", "Mean": "mean",
                        "Variance": "var"},
         {"Y": "y", "MeanOut": "mean", "VarianceOut": "var", "SavedMean": "sm",
          "SavedVariance": "sv"}, {"is_test": True})
    _, changed, _ = _apply(n)
    assert not changed


@pytest.mark.parametrize("form", ["mul", "fc"])
def test_an_fc_output_someone_else_reads_is_not_fused(form):
    n = _before(form)
    n.op("sigmoid", {"X": "t"}, {"Out": "z"})
    _, changed, _ = _apply(n, ["y", "z"])
    assert not changed
    _, changed, _ = _apply(_before(form), ["y", "t"])  # fetched
    assert not changed


def test_batch_norm_over_another_axis_is_not_fused():
    # a rank-3 fc output [N, T, C]: an NCHW batch norm normalises T, not the features
    n = Net()
    n.data("x", [-1, 3, 4])
    n.param("w", [4, 3])
    n.op("mul", {"X": "x", "Y": "w"}, {"Out": "t"}, {"x_num_col_dims": 2})
    for name, v in (("gamma", GAMMA), ("beta", BETA), ("mean", MEAN), ("var", VAR)):
        n.param(name, [3], v)
    n.op("batch_norm", {"X": "t", "Scale": "gamma", "Bias": "beta", "Mean": "mean",
                        "Variance": "var"},
         {"Y": "y", "MeanOut": "mean", "VarianceOut": "var", "SavedMean": "sm",
          "SavedVariance": "sv"}, {"is_test": True})
    _, changed, _ = _apply(n)
    assert not changed


def test_fc_bn_fuse_needs_the_parameters():
    with pytest.raises(PassError, match="needs a scope"):
        get_pass("fc_bn_fuse").apply(_before().program)
    _, changed = get_pass("fc_bn_fuse").apply(_before().program,
                                              PassContext(scope={}, fetch_names=["y"]))
    assert not changed


def test_the_pipeline_folds_layers_fc_batch_norm_relu_into_one_fc():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[6], dtype="float32")
        h = layers.batch_norm(layers.fc(x, size=5), act="relu")
        h = layers.batch_norm(layers.fc(h, size=4, bias_attr=False))
        y = layers.fc(h, size=2)
    test = main.clone(for_test=True)
    scope, exe = fluid.Scope(), fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
    rng = np.random.default_rng(1)
    for v in test.global_block().vars.values():  # non-trivial statistics
        if v.name.startswith("batch_norm") and v.persistable:
            lo = 0.5 if v.name.endswith(".w_2") else -1.0
            scope.vars[v.name] = rng.uniform(lo, 2.0, tuple(v.shape)).astype(np.float32)
    ctx = PassContext(scope=scope, executor=exe, feed_names=["x"], fetch_names=[y.name])
    pm = inference_pipeline()
    out = pm.run(test, ctx)
    assert op_types(out) == ["fc", "fc", "fc"]
    assert [op.attr("activation_type") for op in out.global_block().ops] == ["relu", "", ""]
    assert next(r for r in pm.records if r.name == "fc_bn_fuse").changed
    feed = {"x": rng.standard_normal((7, 6)).astype(np.float32)}
    (want,) = run(test, scope, feed, [y.name])
    (got,) = run(out, scope, feed, [y.name])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
