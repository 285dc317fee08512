"""The host API: Accelerator.open(build_dir) over a transport; run() = host programs +
accelerator; counters; runtime weights; checks against the wrong design; transports
as objects and by name."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, load_build, param_image_for
from fluid_hw.drivers import (
    Accelerator,
    DriverError,
    SimTransport,
    StreamResult,
    get_transport,
    load_param_image,
    save_param_image,
    transport_names,
)
from fluid_hw.drivers.build_dir import BuildDir
from fluid_hw.errors import UnknownNameError
from tests.backends.fpga._programs import Arch, build, golden, inputs, random_values

ARCH = Arch((12,), [{"kind": "fc", "name": "fc0", "n": 6, "relu": True},
                    {"kind": "fc", "name": "fc1", "n": 4, "relu": False}],
            {"fc0": (3, 4), "fc1": (2, 3)})


def test_transports_by_name_and_errors(tmp_path):
    assert "sim" in transport_names()
    with pytest.raises(UnknownNameError, match=r"unknown transport 'usb'.*Known: serial, sim"):
        get_transport("usb", tmp_path)
    with pytest.raises(DriverError, match="no such build folder"):
        Accelerator.open(tmp_path / "none")
    with pytest.raises(DriverError, match=r"host.json: not found.*fluid-hw compile"):
        Accelerator.open(tmp_path)
    with pytest.raises(DriverError, match=r"accelerator.v: not found"):
        SimTransport(tmp_path)


def test_param_images_round_trip(tmp_path):
    image = [(0, np.arange(5, dtype=np.uint32)), (64, np.array([7, 2**32 - 1], np.uint32))]
    save_param_image(tmp_path / "w.npz", image)
    back = load_param_image(tmp_path / "w.npz")
    assert [b for b, _ in back] == [0, 64]
    for (_, a), (_, b) in zip(image, back):
        np.testing.assert_array_equal(a, b)
    (tmp_path / "bad.npz").write_bytes(b"nope")
    with pytest.raises(DriverError, match="not a parameter image"):
        load_param_image(tmp_path / "bad.npz")


def _compile(tmp_path, weights):
    built = build(ARCH)
    scope = fluid.Scope()
    values = random_values(built, 5)
    scope.vars.update(values)
    out = tmp_path / weights
    compile_program(built.program, scope, out, feeds=[built.feed], fetches=built.fetches,
                    weights=weights, folding=ARCH.folding)
    return built, values, out


class CountingTransport(SimTransport):
    """A transport is any object with the four methods; this one counts accesses."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.reads = self.writes = self.streams = 0

    def read_register(self, reg):
        self.reads += 1
        return super().read_register(reg)

    def write_register(self, reg, value):
        self.writes += 1
        super().write_register(reg, value)

    def stream(self, inputs):
        self.streams += 1
        return super().stream(inputs)


@pytest.mark.slow
def test_run_counters_and_design_check(tmp_path):
    built, values, out = _compile(tmp_path, "const")
    x = inputs(ARCH, 30, seed=2)
    want_int, want_prob = golden(built, values, x)
    t = CountingTransport(out)
    with Accelerator.open(out, t) as acc:
        assert t.reads == 2  # ID and DESIGN_HASH
        (prob,) = acc.run(x.astype(np.float64))  # float64 is converted to the input's dtype
        assert prob.tobytes() == want_prob.tobytes()
        np.testing.assert_array_equal(acc.last.hw_outputs, want_int)
        assert isinstance(acc.last.stream, StreamResult) and t.streams == 1
        c = acc.counters()
        assert c["INFERENCES"] == c["INPUTS"] == 30 and c["CYCLES"] >= c["BUSY_CYCLES"] > 0
        assert acc.last.counters["INFERENCES"] == 30
        ts = acc.last.stream.timestamps
        assert (np.diff(ts["out_last"]) > 0).all()
        # the integer side alone, and a dict feed
        np.testing.assert_array_equal(acc.run_int(acc.last.hw_inputs), want_int)
        (again,) = acc.run({"x": x})
        assert again.tobytes() == want_prob.tobytes()
        with pytest.raises(DriverError, match="constant weights"):
            acc.load()
        with pytest.raises(DriverError, match="takes 12 values per example"):
            acc.run_int(np.zeros((2, 5), np.int8))
        with pytest.raises(DriverError, match=r"no value for input\(s\) \['x'\]"):
            acc.run({"y": x})
    # a build whose host side names another design is refused
    other = tmp_path / "other"
    shutil.copytree(out, other)
    host = json.loads((other / "host" / "host.json").read_text())
    host["design_hash"] = "0" * 64
    (other / "host" / "host.json").write_text(json.dumps(host))
    # the edit is caught by the build's manifest first ...
    with pytest.raises(DriverError, match=r"host.json: is \d+ bytes, but the build wrote "
                                          r"\d+.*recompile"):
        Accelerator.open(other)
    # ... and a consistent folder for another design by the hardware's DESIGN_HASH
    BuildDir(other).write_manifest("compile")
    with pytest.raises(DriverError, match=r"runs design 0x.*compiled for 0x00000000"):
        Accelerator.open(other)


@pytest.mark.slow
def test_runtime_weights_load_on_open_and_on_demand(tmp_path):
    built, values, out = _compile(tmp_path, "runtime")
    x = inputs(ARCH, 20, seed=3)
    with Accelerator.open(out) as acc:  # loads the compiled weights.npz
        (prob,) = acc.run(x)
        assert prob.tobytes() == golden(built, values, x)[1].tobytes()
        new = random_values(built, 99)
        image = param_image_for(load_build(out), new)
        words = acc.load(image)
        assert words == sum(len(w) for _, w in image) > 0
        (prob,) = acc.run(x)
        assert prob.tobytes() == golden(built, new, x)[1].tobytes()
        save_param_image(tmp_path / "new.npz", image)
        acc.load(load_build(out).directory / "weights.npz")  # back to the compiled ones
        (prob,) = acc.run(x)
        assert prob.tobytes() == golden(built, values, x)[1].tobytes()
        acc.load(tmp_path / "new.npz")
        np.testing.assert_array_equal(acc.run_int(acc.last.hw_inputs),
                                      golden(built, new, x)[0])
    with Accelerator.open(out, load_weights=False) as acc:  # memories start at zero
        acc.run(x)
        assert not acc.last.hw_outputs.any()


@pytest.mark.slow
def test_trace_records_a_waveform(tmp_path):
    built, values, out = _compile(tmp_path, "const")
    x = inputs(ARCH, 3, seed=4)
    vcd = tmp_path / "waves" / "run.vcd"
    with Accelerator.open(out, "sim", trace=vcd) as acc:
        (prob,) = acc.run(x)
    assert prob.tobytes() == golden(built, values, x)[1].tobytes()
    text = vcd.read_text()
    assert "$enddefinitions" in text and "s_axis_tvalid" in text and "m_axis_tlast" in text
