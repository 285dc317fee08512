"""Saving and loading models and variables: round trips, atomic writes, bad files."""

import os
from pathlib import Path

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors


def _model():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[6])
        h = fluid.layers.fc(x, size=5, act="relu")
        y = fluid.layers.fc(h, size=3, act="softmax")
        # a branch the inference model does not need: pruned on save
        fluid.layers.fc(x, size=7)
    return main, startup, y


@pytest.mark.parametrize("params_filename", [None, "params.npz"])
def test_inference_model_roundtrip(tmp_path, params_filename):
    main, startup, y = _model()
    exe = fluid.Executor()
    x = np.random.default_rng(1).random((4, 6), dtype=np.float32)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        (ref,) = exe.run(main, feed={"x": x}, fetch_list=[y])
        saved = fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main,
                                              params_filename=params_filename)
    assert len(saved) == 4  # the unused fc's parameters are pruned away
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe,
                                                             params_filename=params_filename)
        (out,) = exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)
    assert feeds == ["x"] and [f.name for f in fetches] == [y.name]
    np.testing.assert_array_equal(out, ref)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_persistables_roundtrip(tmp_path):
    main, startup, _ = _model()
    exe = fluid.Executor()
    s1 = fluid.Scope()
    with fluid.scope_guard(s1):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path), main)
    s2 = fluid.Scope()
    with fluid.scope_guard(s2):
        names = fluid.io.load_persistables(exe, str(tmp_path), main)
    assert len(names) == 6
    for n in names:
        np.testing.assert_array_equal(s1.find_value(n), s2.find_value(n))


def test_params_are_npy_without_pickle(tmp_path):
    main, startup, y = _model()
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main)
    w = np.load(tmp_path / "fc_0.w_0.npy", allow_pickle=False)
    assert w.shape == (6, 5) and w.dtype == np.float32


def _saved(tmp_path):
    main, startup, y = _model()
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main)
    return exe


def _load_fails(tmp_path, exe, *words):
    scope = fluid.Scope()
    with fluid.scope_guard(scope), pytest.raises(errors.FormatError) as ei:
        fluid.io.load_inference_model(str(tmp_path), exe)
    for w in words:
        assert w in str(ei.value)
    assert not any(v is not None for v in scope.vars.values()), "half-loaded scope"


def test_pickled_object_array_is_refused(tmp_path):
    exe = _saved(tmp_path)
    np.save(tmp_path / "fc_0.w_0.npy", np.array([{"evil": 1}], dtype=object),
            allow_pickle=True)
    _load_fails(tmp_path, exe, "fc_0.w_0.npy")


def test_truncated_parameter_file(tmp_path):
    exe = _saved(tmp_path)
    p = tmp_path / "fc_1.b_0.npy"
    p.write_bytes(p.read_bytes()[:20])
    _load_fails(tmp_path, exe, "fc_1.b_0.npy")


def test_parameter_shape_mismatch(tmp_path):
    exe = _saved(tmp_path)
    np.save(tmp_path / "fc_0.w_0.npy", np.zeros((5, 6), np.float32))
    _load_fails(tmp_path, exe, "fc_0.w_0.npy", "[6, 5]", "[5, 6]")


def test_parameter_dtype_mismatch(tmp_path):
    exe = _saved(tmp_path)
    np.save(tmp_path / "fc_0.b_0.npy", np.zeros((5,), np.float64))
    _load_fails(tmp_path, exe, "fc_0.b_0.npy", "float64")


def test_missing_parameter_file(tmp_path):
    exe = _saved(tmp_path)
    (tmp_path / "fc_1.w_0.npy").unlink()
    _load_fails(tmp_path, exe, "fc_1.w_0.npy", "not found")


def test_corrupted_model_file(tmp_path):
    exe = _saved(tmp_path)
    m = tmp_path / "__model__"
    m.write_bytes(m.read_bytes()[:-7])
    _load_fails(tmp_path, exe, "__model__")


def test_missing_model_folder(tmp_path):
    with pytest.raises(errors.FormatError, match="no such model folder"):
        fluid.io.load_inference_model(str(tmp_path / "nope"), fluid.Executor())


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    fluid.io.atomic_write(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        fluid.io.atomic_write(target, b"new contents")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_save_before_startup_is_a_clear_error(tmp_path):
    main, _, y = _model()
    with fluid.scope_guard(fluid.Scope()), pytest.raises(errors.FormatError, match="startup"):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], fluid.Executor(), main)


def test_draw_program_writes_graphviz(tmp_path):
    main, _, _ = _model()
    path = fluid.debugger.draw_program(main, tmp_path / "prog.dot")
    text = Path(path).read_text()
    assert text.startswith("digraph") and '"mul"' in text and "fc_0.w_0" in text
