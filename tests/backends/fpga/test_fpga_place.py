"""``Executor(FPGAPlace(build_dir))``: a compiled model run through its accelerator,
with program None, the build's quantised model, the float model it was compiled from
or a program built in Python with the same names; the same outputs as
``Accelerator.run`` and the golden model; startup programs (const and runtime
weights); every refusal (another model, fetches the build does not produce, missing,
extra and LoD feeds, no build folder)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_model, compile_program, load_build, param_image_for
from fluid_hw.backends.fpga.place import FPGAExecutor
from fluid_hw.drivers import Accelerator, DriverError
from fluid_hw.errors import ExecutionError, FeedError, FetchError
from fluid_hw.frontend import models

from ._programs import Arch, build, golden, inputs, random_values

ARCH = Arch((12,), [{"kind": "fc", "name": "fc0", "n": 6, "relu": True},
                    {"kind": "fc", "name": "fc1", "n": 4, "relu": False}],
            {"fc0": (3, 4), "fc1": (2, 3)})


def _compile_tiny(out, weights, fetches=("prob",)):
    built = build(ARCH)
    values = random_values(built, 5)
    scope = fluid.Scope()
    scope.vars.update(values)
    compile_program(built.program, scope, out, feeds=[built.feed], fetches=list(fetches),
                    weights=weights, folding=ARCH.folding)
    return built, values


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The small quantised MLP of the driver tests, const weights (no Verilator yet)."""
    out = tmp_path_factory.mktemp("place") / "tiny"
    built, values = _compile_tiny(out, "const")
    return built, values, out


@pytest.fixture(scope="module")
def mlp(trained, tmp_path_factory):
    """The trained digits MLP, float model + calibration -> int8 build (model/ and
    float_model/), as ``fluid-hw compile`` makes it in test_digits."""
    t = trained("mlp")
    out = tmp_path_factory.mktemp("place") / "mlp"
    compile_model(t.model_dir, out, calibration=t.calibration)
    return t, out


def _startup():
    """A startup program: parameter initialisers only."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fluid.layers.fc(fluid.layers.data(name="x", shape=[12]), size=4)
    return startup


# -- without Verilator -----------------------------------------------------------------


def test_place_is_exported_and_dispatches(tiny):
    _built, _values, out = tiny
    place = fluid.FPGAPlace(out, ready_prob=0.5)
    assert place == fluid.FPGAPlace(str(out), "sim", ready_prob=0.5) != fluid.FPGAPlace(out)
    assert repr(place) == f"FPGAPlace({str(out)!r}, transport='sim', ready_prob=0.5)"
    exe = fluid.Executor(place)
    assert isinstance(exe, FPGAExecutor) and exe.place is place
    assert exe.build.feeds == ["x"] and exe.build.fetches == ["prob"]
    assert exe.build.weights == "const"
    assert type(fluid.Executor(fluid.CPUPlace())) is fluid.Executor
    # the FPGA back end (Amaranth, Verilator) is imported only when FPGAPlace is used
    code = ("import sys, fluid_hw; assert 'fluid_hw.backends.fpga' not in sys.modules; "
            "fluid_hw.FPGAPlace; assert 'fluid_hw.backends.fpga' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_build_folder(tmp_path):
    with pytest.raises(DriverError, match=r"none: no such build folder.*fluid-hw compile"):
        fluid.Executor(fluid.FPGAPlace(tmp_path / "none"))
    with pytest.raises(DriverError, match=r"not a build folder \(no host/host.json\).*"
                                          r"fluid-hw compile MODEL_DIR --out"):
        fluid.Executor(fluid.FPGAPlace(tmp_path))
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "host.json").write_text("{}")
    with pytest.raises(DriverError, match=r"host.json: malformed.*recompile"):
        fluid.Executor(fluid.FPGAPlace(tmp_path))


def test_refusals_name_the_thing_and_the_fix(tiny, tmp_path):
    built, _values, out = tiny
    exe = fluid.Executor(fluid.FPGAPlace(out))
    x = inputs(ARCH, 4, seed=1)
    # another model: other feed names (a program built in Python, then a saved one)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="image", shape=[12])
        prob = fluid.layers.softmax(fluid.layers.fc(img, size=4))
    with pytest.raises(ExecutionError, match=r"computes something else than the build .*"
                                             r"no variable\(s\) \['x', 'prob'\].*recompile"):
        exe.run(main, feed={"image": x}, fetch_list=[prob])
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        cpu = fluid.Executor()
        cpu.run(startup)
        fluid.io.save_inference_model(str(tmp_path / "other"), ["image"], [prob], cpu,
                                      main_program=main)
        other, _, _ = fluid.io.load_inference_model(str(tmp_path / "other"), cpu)
    with pytest.raises(ExecutionError, match=r"feeds differ \(the program's only: \['image'\]; "
                                             r"the build's only: \['x'\]\); fetches differ .*"
                                             r"--out .*tiny"):
        exe.run(other, feed={"image": x}, fetch_list=[prob.name])
    with pytest.raises(ExecutionError, match="runs a Program"):
        exe.run("model", feed={"x": x}, fetch_list=["prob"])
    # fetches: only the build's outputs
    with pytest.raises(FetchError, match=r"\['logits'\]: the build .* produces only \['prob'\]"):
        exe.run(None, feed={"x": x}, fetch_list=["prob", "logits"])
    with pytest.raises(FetchError, match="Variables or names"):
        exe.run(None, feed={"x": x}, fetch_list=[3])
    # feeds: exactly the build's, dense, checked like the CPU executor checks them
    with pytest.raises(FeedError, match=r"no value for \['x'\].*reads exactly \['x'\]"):
        exe.run(None, feed={}, fetch_list=["prob"])
    with pytest.raises(FeedError, match=r"\['label'\] not read by the build \(drop them\)"):
        exe.run(built.program, feed={"x": x, "label": np.zeros((4, 1), np.int64)},
                fetch_list=["prob"])
    lod = fluid.create_lod_tensor(x, [[1, 3]])
    with pytest.raises(FeedError, match=r"'x': a LoD tensor .* fixed-shape batches"):
        exe.run(None, feed={"x": lod}, fetch_list=["prob"])
    with pytest.raises(FeedError, match=r"'x': got bool data.*astype\('float32'\)"):
        exe.run(None, feed={"x": x.astype(np.bool_)}, fetch_list=["prob"])
    with pytest.raises(FeedError, match=r"'x': got shape \[4, 11\]"):
        exe.run(None, feed={"x": x[:, :11]}, fetch_list=["prob"])
    # a startup program on a const build: nothing to do, nothing opened
    assert exe.run(_startup()) == []
    assert exe._acc is None
    exe.close()


# -- through Verilator -----------------------------------------------------------------


@pytest.mark.slow
def test_same_outputs_as_the_driver_and_the_golden_model(mlp):
    t, out = mlp
    x = np.load(t.x_test)[:40]
    with Accelerator.open(out) as acc:
        (want,) = acc.run(x)
    cpu, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        qprog, qfeeds, qfetch = fluid.io.load_inference_model(str(out / "model"), cpu)
        fprog, _ffeeds, ffetch = fluid.io.load_inference_model(str(out / "float_model"), cpu)
    (golden_prob,) = cpu.run(qprog, feed={qfeeds[0]: x}, fetch_list=qfetch, scope=scope)
    assert golden_prob.tobytes() == want.tobytes()  # the driver is bit-exact

    exe = fluid.Executor(fluid.FPGAPlace(out))
    assert exe.run(models.digits_mlp().startup) == []  # const weights: a no-op
    name = qfetch[0].name
    # a Python-built program of the same model (same variable names) is accepted too
    py = models.digits_mlp().test_program
    for program, fetch in [(None, [name]), (qprog, qfetch), (fprog, ffetch),
                           (fprog, [name]), (py, [py.global_block().var(name)])]:
        (prob,) = exe.run(program, feed={"pixels": x}, fetch_list=fetch)
        assert isinstance(prob, np.ndarray) and prob.tobytes() == want.tobytes(), program
    acc = exe.accelerator  # opened once, reused
    (t_prob,) = exe.run(None, feed={"pixels": x}, fetch_list=[name], return_numpy=False)
    assert isinstance(t_prob, fluid.LoDTensor) and t_prob.data.tobytes() == want.tobytes()
    assert exe.accelerator is acc and acc.counters()["INFERENCES"] == len(x)
    exe.close()
    assert exe._acc is None
    # a fresh executor over another transport configuration: same bits
    with_stalls = fluid.Executor(fluid.FPGAPlace(out, ready_prob=0.5, seed=3))
    (prob,) = with_stalls.run(fprog, feed={"pixels": x}, fetch_list=[name])
    assert prob.tobytes() == want.tobytes()
    assert with_stalls.accelerator.counters()["OUT_STALL_CYCLES"] > 0
    with_stalls.close()


@pytest.mark.slow
def test_runtime_weights_fetch_order_and_startup(tmp_path):
    out = tmp_path / "runtime"
    built, values = _compile_tiny(out, "runtime", fetches=("logits", "prob"))
    x = inputs(ARCH, 16, seed=2)

    def want(vals):
        scope = fluid.Scope()
        scope.vars.update(vals)
        return fluid.Executor().run(built.program, feed={"x": x}, scope=scope,
                                    fetch_list=["prob", "logits"])

    exe = fluid.Executor(fluid.FPGAPlace(out))
    assert exe.build.weights == "runtime" and exe.build.fetches == ["logits", "prob"]
    assert exe.run(_startup()) == [] and exe._acc is not None  # opened: weights loaded
    prob, logits = exe.run(built.program, feed={"x": x}, fetch_list=["prob", "logits"])
    w_prob, w_logits = want(values)
    assert prob.tobytes() == w_prob.tobytes() and logits.tobytes() == w_logits.tobytes()
    assert prob.tobytes() == golden(built, values, x)[1].tobytes()
    (logits2,) = exe.run(None, feed={"x": x}, fetch_list=["logits"])
    assert logits2.tobytes() == w_logits.tobytes()
    # other weights through the driver, then startup loads the build's own again
    new = random_values(built, 99)
    exe.accelerator.load(param_image_for(load_build(out), new))
    (prob,) = exe.run(None, feed={"x": x}, fetch_list=["prob"])
    assert prob.tobytes() == want(new)[0].tobytes() != w_prob.tobytes()
    assert exe.run(_startup()) == []
    (prob,) = exe.run(None, feed={"x": x}, fetch_list=["prob"])
    assert prob.tobytes() == w_prob.tobytes()
    exe.close()
