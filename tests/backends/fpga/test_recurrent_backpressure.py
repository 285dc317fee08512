"""A tiny GRU network (fc projection, dynamic_gru, sequence_last_step, fc) through
``fluid-hw compile --target sim`` and ``fluid-hw simulate`` on LoD .npz inputs: 16
sequences of mixed lengths 1..50 streamed without padding under random output
back-pressure, bit-exact against the golden model in Verilator, and the measured
cycles per time step against the recurrent stage's cycle model."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.cli.main import main
from fluid_hw.rtl.recurrent import recurrent_step_cycles

IN, D = 4, 8
LENGTHS = [1, 50, 1, 2, 3, 5, 8, 13, 1, 21, 4, 2, 7, 1, 30, 6]


def _sequences(rng: np.random.Generator, lengths: list[int]) -> dict[str, np.ndarray]:
    x = np.concatenate([rng.normal(0, 1, (t, IN)) for t in lengths]).astype(np.float32)
    return {"x": x, "x.lengths": np.asarray(lengths, np.int64)}


@pytest.mark.slow
def test_gru_network_compile_simulate_bit_exact(tmp_path, capsys):
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[IN], dtype="float32", lod_level=1)
        hid = layers.dynamic_gru(layers.fc(x, size=3 * D), size=D)
        out = layers.fc(layers.sequence_last_step(hid), size=3)
    exe = fluid.Executor()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path / "model"), ["x"], [out], exe,
                                      main_program=main_prog)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", **_sequences(rng, [int(v) for v in
                                                     rng.integers(1, 51, 64)]))
    np.savez(tmp_path / "in.npz", **_sequences(rng, LENGTHS))
    build = tmp_path / "b"
    assert main(["compile", str(tmp_path / "model"), "--out", str(build), "--target", "sim",
                 "--calibration", str(tmp_path / "cal.npz"), "--fold", "gru_0=2x2"]) == 0
    design = json.loads((build / "design.json").read_text())
    assert design["stages"][0]["kind"] == "recurrent"
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "in.npz"),
                 "--ready-prob", "0.5"]) == 0
    assert "bit-exact on 16 of 16 inputs" in capsys.readouterr().out
    rep = json.loads((build / "report.json").read_text())
    assert rep["bit_exact"] and rep["inputs"] == len(LENGTHS)
    assert np.load(build / "outputs.npy").shape == (len(LENGTHS), 3)
    # the recurrent stage is the bottleneck: all cycles / all steps ~ its step cycles
    model = recurrent_step_cycles("gru", IN, D, 2, 2, False)
    per_step = rep["measured"]["counters"]["CYCLES"] / sum(LENGTHS)
    print(f"GRU {IN}->{D} PE 2 SIMD 2: {per_step:.1f} cycles a step measured in Verilator "
          f"(ready 0.5), model {model}")
    assert abs(per_step - model) <= 0.05 * model
