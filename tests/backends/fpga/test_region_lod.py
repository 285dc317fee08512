"""Sequences (LoD) across the boundaries between accelerator regions and host ops.

A region of per-step stages (no recurrent first stage: ``design.json`` has no
``sequence``) streams a LoD value's rows, one a step, and hands its output on with the
input's lengths; a region whose recurrent first stage outputs its last step (mode
``"last"``) hands on one row a sequence.  Here a per-step ``fc`` is region 0, a sequence
op without a stage kind runs on the host (``sequence_pool`` MAX: one row a sequence;
``sequence_reverse``: every step, the lengths kept), the head is region 1;
``fluid-hw simulate`` and ``Executor(FPGAPlace(build))`` on 64 sequences of 1..50 steps
are bit-exact against the golden model (the CPU executor on the build's ``model/``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.backends.fpga.lod_io import save_lod_npz
from fluid_hw.backends.fpga.place import FPGAPlace
from fluid_hw.cli.main import main
from fluid_hw.drivers import Accelerator
from fluid_hw.frontend import io as fio

HIDDEN, COEFFS = 8, 10


def _lod(rng: np.random.Generator, n: int) -> fluid.LoDTensor:
    lengths = rng.integers(1, 51, n)
    lengths[:2] = (1, 50)
    x = rng.standard_normal((int(lengths.sum()), COEFFS)).astype(np.float32)
    return fluid.create_lod_tensor(x, [lengths.tolist()])


def _two_regions(out: str):
    """A per-step fc, a host sequence op, a head: ``out="last"`` pools each sequence's
    maximum (one row a sequence into the head), ``"sequence"`` reverses each sequence
    (a per-step head, a LoD output)."""
    prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        x = layers.data(name="mfcc", shape=[COEFFS], dtype="float32", lod_level=1)
        h = layers.fc(x, size=HIDDEN, act="relu")
        mid = layers.sequence_pool(h, "max") if out == "last" else layers.sequence_reverse(h)
        y = layers.fc(mid, size=4)
    return prog, startup, y


def _compile(tmp_path, prog, startup, y, cal: fluid.LoDTensor):
    exe = fluid.Executor()
    exe.run(startup)
    fio.save_inference_model(str(tmp_path / "model"), ["mfcc"], [y], exe, main_program=prog)
    save_lod_npz(tmp_path / "x.npz", {"mfcc": cal})
    build = tmp_path / "build"
    assert main(["compile", str(tmp_path / "model"), "--target", "sim", "--out", str(build),
                 "--calibration", str(tmp_path / "x.npz")]) == 0
    return build


def _golden(build, x: fluid.LoDTensor):
    prog, _, fetch = fio.load_inference_model(build / "model", fluid.Executor())
    (want,) = fluid.Executor().run(prog, feed={"mfcc": x}, fetch_list=[fetch[0].name],
                                   return_numpy=False)
    return want


@pytest.mark.slow
@pytest.mark.parametrize("out", ["last", "sequence"])
def test_host_sequence_op_between_two_regions_is_bit_exact(tmp_path, out):
    rng = np.random.default_rng(0)
    cal = _lod(rng, 64)
    lengths = cal.recursive_sequence_lengths()[0]
    build = _compile(tmp_path, *_two_regions(out), cal)
    segments = json.loads((build / "segments.json").read_text())["segments"]
    where = [(s["where"], s["ops"]) for s in segments]
    assert where[1] == ("fpga region 0", ["quantized_fc", "requantize"])
    host_op = "sequence_pool" if out == "last" else "sequence_reverse"
    assert host_op in where[2][1] and where[3][0] == "fpga region 1"
    for k in (0, 1):  # per-step stages: no recurrent first stage in either region
        assert "sequence" not in json.loads((build / f"regions/{k}/design.json").read_text())
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "x.npz")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["mismatches"] == 0
    # region 0 streamed one row a step, no padding: its items are the 64 sequences' steps
    r0 = json.loads((build / "regions/0/report.json").read_text())
    assert r0["bit_exact"] and r0["inputs"] == sum(lengths)
    if out == "last":
        assert report["inputs"] == 64 and not (build / "outputs.lengths.npy").exists()
    else:  # region 1 took the host's LoD rows and handed the lengths on to the output
        assert report["inputs"] == sum(lengths)
        np.testing.assert_array_equal(np.load(build / "outputs.lengths.npy"), lengths)
    # the driver over the transport and Executor(FPGAPlace) on other sequences
    test_x = _lod(np.random.default_rng(1), 20)
    want = _golden(build, test_x)
    with Accelerator.open(build, "sim") as acc:
        (got,) = acc.run(test_x)
        assert len(acc.regions[0].last.hw_inputs) == sum(test_x.recursive_sequence_lengths()[0])
    exe = fluid.Executor(FPGAPlace(build))
    try:
        (via_place,) = exe.run(None, feed={"mfcc": test_x}, fetch_list=exe.build.fetches,
                               return_numpy=False)
    finally:
        exe.close()
    for value in (got, via_place):
        if out == "last":
            assert not (isinstance(value, fluid.LoDTensor) and value.lod())
        else:
            assert value.lod() == test_x.lod() == want.lod()
        data = np.asarray(value.data if isinstance(value, fluid.LoDTensor) else value)
        np.testing.assert_array_equal(data, np.asarray(want.data))


@pytest.mark.slow
def test_per_step_region_keeps_the_lengths(tmp_path):
    """One region of per-step stages (an fc over every step) between a LoD input and a
    LoD output: the driver returns the input's lengths with the rows; a dense batch
    through the same kind of build is unchanged (no LoD)."""
    prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        x = layers.data(name="mfcc", shape=[COEFFS], dtype="float32", lod_level=1)
        y = layers.fc(x, size=HIDDEN, act="relu")
    rng = np.random.default_rng(2)
    cal = _lod(rng, 16)
    lengths = cal.recursive_sequence_lengths()[0]
    build = _compile(tmp_path, prog, startup, y, cal)
    assert "sequence" not in json.loads((build / "design.json").read_text())
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "x.npz")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["inputs"] == sum(lengths)
    np.testing.assert_array_equal(np.load(build / "outputs.lengths.npy"), lengths)
    test_x = _lod(rng, 8)
    want = _golden(build, test_x)
    exe = fluid.Executor(FPGAPlace(build))
    try:
        (got,) = exe.run(None, feed={"mfcc": test_x}, fetch_list=exe.build.fetches,
                         return_numpy=False)
    finally:
        exe.close()
    assert got.lod() == test_x.lod() == want.lod()
    np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))
