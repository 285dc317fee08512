"""fluid.core's inference API: a saved inference model run through
AnalysisConfig / create_paddle_predictor / PaddleTensor gives the executor's
results, dense and LoD."""

import numpy as np
import pytest

import fluid_hw as fluid


def test_predictor_matches_the_executor(fresh, tmp_path):
    main, startup, _ = fresh
    x = fluid.layers.data(name="x", shape=[4])
    words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    pooled = fluid.layers.sequence_pool(fluid.layers.embedding(words, size=[10, 3]), "sum")
    out = fluid.layers.fc([x, pooled], size=2, act="softmax")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(str(tmp_path), ["x", "words"], [out], exe)
    xv = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    wv = fluid.create_lod_tensor(np.array([[1], [2], [3]], np.int64), [[2, 1]])
    (want,) = exe.run(main, feed={"x": xv, "words": wv}, fetch_list=[out])

    for config in (fluid.core.AnalysisConfig(str(tmp_path)),
                   fluid.core.NativeConfig(model_dir=str(tmp_path))):
        config.disable_gpu()
        predictor = fluid.core.create_paddle_predictor(config)
        assert predictor.get_input_names() == ["x", "words"]
        (got,) = predictor.run([fluid.core.PaddleTensor(xv),
                                fluid.core.PaddleTensor(np.array([[1], [2], [3]], np.int64),
                                                        lod=[[0, 2, 3]])])
        assert got.name == out.name and got.shape == [2, 2]
        np.testing.assert_allclose(got.as_ndarray(), want, rtol=1e-6)
    with pytest.raises(ValueError, match="reads 2"):
        predictor.run([fluid.core.PaddleTensor(xv)])
    with pytest.raises(ValueError, match="not the model's"):
        predictor.run([fluid.core.PaddleTensor(xv, name="x"),
                       fluid.core.PaddleTensor(xv, name="y")])
