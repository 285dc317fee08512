"""fluid.transpiler.InferenceTranspiler folds batch norms in place with the same
outputs; fluid.memory_optimize / release_memory are no-ops (Fluid 1.6's)."""

import numpy as np
import pytest

import fluid_hw as fluid


def test_inference_transpiler_folds_batch_norm_in_place(fresh):
    main, startup, scope = fresh
    img = fluid.layers.data(name="img", shape=[2, 6, 6])
    conv = fluid.layers.conv2d(img, num_filters=3, filter_size=3, bias_attr=False)
    bn = fluid.layers.batch_norm(conv, act="relu")
    out = fluid.layers.fc(fluid.layers.batch_norm(fluid.layers.fc(bn, size=4)), size=2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    for p in main.all_parameters():  # non-trivial statistics and scales
        t = scope.find_var(p.name).get_tensor()
        t.set(rng.uniform(0.5, 1.5, np.asarray(t).shape).astype(np.float32))
    test = main.clone(for_test=True)
    x = rng.standard_normal((3, 2, 6, 6)).astype(np.float32)
    (want,) = exe.run(test, feed={"img": x}, fetch_list=[out])
    assert [op.type for op in test.global_block().ops].count("batch_norm") == 2
    fluid.transpiler.InferenceTranspiler().transpile(test, fluid.CPUPlace())
    assert "batch_norm" not in [op.type for op in test.global_block().ops]
    (got,) = exe.run(test, feed={"img": x}, fetch_list=[out])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_memory_optimize_and_release_memory_leave_the_program(fresh):
    main, _, _ = fresh
    fluid.layers.fc(fluid.layers.data(name="x", shape=[3]), size=2)
    before = main.serialize_to_string()
    with pytest.warns(UserWarning, match="memory_reuse"):
        fluid.memory_optimize(main)
    with pytest.warns(UserWarning, match="no-op"):
        fluid.release_memory(main)
    assert main.serialize_to_string() == before
