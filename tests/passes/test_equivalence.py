"""Every pass keeps what a program computes: on the digits MLP and CNN (float outputs
within 1e-5), and on random programs (hypothesis).  Structure tests live in
test_<pass>.py."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fluid_hw as fluid
from fluid_hw.passes import PassContext, all_passes, get_pass, inference_pipeline
from tests.passes._util import (
    assert_same_outputs,
    digits,
    op_types,
    random_programs,
    run,
)

PASSES = sorted(all_passes())
#: passes that change op order or values only up to float rounding
ROUNDING = {"conv_bn_fuse"}
#: what each pass must have done to the digits models (it is not a no-op there)
CHANGES = {
    ("prune", "mlp"), ("prune", "cnn"), ("fc_fuse", "mlp"), ("fc_fuse", "cnn"),
    ("conv_bn_fuse", "cnn"),
}


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("name", PASSES)
def test_pass_keeps_digits_outputs(name, kind):
    b = digits(kind)
    prog = b.program
    if name not in ("prune",):  # the rest run on the inference program, as in a pipeline
        prog, _ = get_pass("prune").apply(prog, b.ctx())
    before = prog.desc.SerializeToString()
    out, changed = get_pass(name).apply(prog, b.ctx())
    assert prog.desc.SerializeToString() == before, f"{name} modified its input"
    assert_same_outputs(b.program, out, b, exact=name not in ROUNDING)
    if (name, kind) in CHANGES:
        assert changed


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_inference_pipeline_on_digits(kind):
    b = digits(kind)
    ctx = b.ctx()
    pm = inference_pipeline(memory_reuse=True)
    out = pm.run(b.program, ctx)
    assert_same_outputs(b.program, out, b)
    types = op_types(out)
    assert "batch_norm" not in types and "mul" not in types and "elementwise_add" not in types
    assert types.count("fc") == (3 if kind == "mlp" else 1)
    assert types.count("conv2d_fusion") == (2 if kind == "cnn" else 0)
    assert next(r.name for r in pm.records) == "prune"


PROPERTY = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", PASSES)
@PROPERTY
@given(b=random_programs())
def test_pass_keeps_random_program_outputs(name, b):
    before = b.program.desc.SerializeToString()
    want = run(b.program, b.scope, b.feed, b.fetch)
    out, _ = get_pass(name).apply(b.program, b.ctx())
    assert b.program.desc.SerializeToString() == before
    got = run(out, b.scope, b.feed, b.fetch)
    for n, w, g in zip(b.fetch, want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{name}: {n}")


@PROPERTY
@given(b=random_programs())
def test_pipeline_keeps_random_program_outputs(b):
    want = run(b.program, b.scope, b.feed, b.fetch)
    out = inference_pipeline(memory_reuse=True).run(b.program, b.ctx())
    got = run(out, b.scope, b.feed, b.fetch)
    for n, w, g in zip(b.fetch, want, got):
        # fusion reorders float32 sums: an output that cancels large terms carries an
        # error relative to those terms, so the absolute bound scales with the outputs
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * scale, err_msg=n)


def test_weight_passes_leave_the_scope_usable_by_the_input_program():
    b = digits("cnn")
    before = {k: np.array(v) for k, v in b.scope.vars.items()}
    out = inference_pipeline().run(b.program, b.ctx())
    for k, v in before.items():  # nothing overwritten, only added
        np.testing.assert_array_equal(b.scope.vars[k], v)
    assert_same_outputs(b.program, out, b)


def test_weight_passes_accept_a_dict_of_arrays():
    b = digits("cnn")
    params = {k: np.array(v) for k, v in b.scope.vars.items()}
    ctx = PassContext(scope=params, fetch_names=b.fetch, feed_names=["pixels"])
    out, changed = get_pass("conv_bn_fuse").apply(b.program, ctx)
    assert changed and any(k.endswith(".bn_fused") for k in params)
    scope = fluid.Scope()
    scope.vars.update(params)
    b2 = type(b)(b.program, scope, b.feed, b.fetch)
    assert_same_outputs(b.program, out, b2)
