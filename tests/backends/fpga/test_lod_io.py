"""The command line's .npz format of variable-length sequences (NAME + NAME.lengths):
round trip through load_inputs, calibration batches of whole sequences, the errors."""

from __future__ import annotations

import numpy as np
import pytest

from fluid_hw.backends.fpga import load_inputs
from fluid_hw.backends.fpga.lod_io import item_count, lod_batches, lod_value, save_lod_npz
from fluid_hw.backends.fpga.steps import BuildError
from fluid_hw.ir.lod import LoDTensor


def _seqs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(1, 51, n).astype(np.int64)
    return rng.standard_normal((int(lengths.sum()), 10)).astype(np.float32), lengths


def test_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x, lengths = _seqs(rng, 7)
    dense = rng.standard_normal((7, 3)).astype(np.float32)
    path = save_lod_npz(tmp_path / "in.npz",
                        {"frames": LoDTensor(x, [list(np.concatenate([[0], lengths.cumsum()]))]),
                         "extra": dense})
    with np.load(path) as z:
        assert sorted(z.files) == ["extra", "frames", "frames.lengths"]
        assert z["frames.lengths"].dtype == np.int64
    got = load_inputs(path, ["frames", "extra"], "--inputs")
    t = got["frames"]
    assert isinstance(t, LoDTensor)
    np.testing.assert_array_equal(t.data, x)
    assert t.recursive_sequence_lengths() == [lengths.tolist()]
    np.testing.assert_array_equal(got["extra"], dense)
    assert item_count(t) == 7
    rows, ln = lod_value(t)
    np.testing.assert_array_equal(rows, x)
    np.testing.assert_array_equal(ln, lengths)
    assert lod_value(dense)[1] is None
    # calibration batches: whole sequences, float32
    batches = lod_batches(got, size=3)
    assert [item_count(b["frames"]) for b in batches] == [3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([b["frames"].data for b in batches]), x)
    assert [len(b["extra"]) for b in batches] == [3, 3, 1]


@pytest.mark.parametrize("arrays,match", [
    ({"x": np.zeros((5, 2)), "x.lengths": np.array([2, 2])},
     r"add up to 4 steps but 'x' holds 5 rows"),
    ({"x": np.zeros((4, 2)), "x.lengths": np.array([2, 0, 2])},
     r"sequence 1 of 'x' has length 0; every sequence needs at least one step"),
    ({"x": np.zeros((4, 2)), "x.lengths": np.array([2.0, 2.0])}, r"1-D int64 array"),
    ({"x": np.zeros((4, 2)), "x.lengths": np.array([[2, 2]])}, r"1-D int64 array"),
    ({"x": np.zeros((0, 2)), "x.lengths": np.zeros(0, np.int64)}, r"holds no sequence"),
    ({"x.lengths": np.array([2, 2])}, r"without the sequences they measure \(the array 'x'\)"),
    ({"x": np.zeros((4, 2)), "x.lengths": np.array([4]), "y.lengths": np.array([1]),
      "y": np.zeros((1, 2))}, r"\['y.lengths'\] measure\(s\) no input"),
    ({"x": np.zeros((4, 2)), "x.lengths": np.array([2, 2]), "z": np.zeros((3, 1))},
     r"different numbers of items"),
])
def test_errors(tmp_path, arrays, match):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    feeds = ["x", "z"] if "z" in arrays else ["x"]
    with pytest.raises(BuildError, match=match):
        load_inputs(path, feeds, "--inputs")


def test_token_ids_stay_integers(tmp_path):
    path = save_lod_npz(tmp_path / "t.npz", {"words": LoDTensor(
        np.arange(6, dtype=np.int64).reshape(6, 1), [[0, 2, 6]])})
    (batch,) = lod_batches(load_inputs(path, ["words"], "calibration"))
    assert batch["words"].data.dtype == np.int64
