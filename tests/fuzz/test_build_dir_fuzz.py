"""Build-folder tampering: `simulate`, `bitstream` and `Accelerator.open` refuse every
damaged folder with a FluidError that names the file and says to recompile.

A small runtime-weights build is compiled once; each case damages a copy of it (fixed
seeds): every file truncated, weights.npz / host/params.npz with another dtype or shape
or a pickle payload, a FIFO or a symlink to /dev/zero in place of a file, a file from
another build (a mixed folder), the manifest itself damaged or gone, a compile stopped
or killed after every step over an older build, and two compiles into one folder.  No
tool runs (bitstream's flow is replaced by a tripwire; the driver gets a transport
that fails the test when touched) and no foreign exception may come out.  Also the
regression tests of issue 14's "silent corruption" defects about build folders.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import random
import shutil
import stat
import time
from pathlib import Path

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, simulate
from fluid_hw.backends.fpga.compile import COMPILE_STEPS
from fluid_hw.drivers import Accelerator, Transport
from fluid_hw.drivers.build_dir import NAMES, BuildDir, BuildLockedError
from fluid_hw.errors import FluidError
from tests.backends.fpga._programs import Arch, build, inputs, random_values

bitstream_mod = importlib.import_module("fluid_hw.backends.fpga.bitstream")
SEED = 14
ARCH = Arch((12,), [{"kind": "fc", "name": "fc0", "n": 6, "relu": True},
                    {"kind": "fc", "name": "fc1", "n": 4, "relu": False}],
            {"fc0": (3, 4), "fc1": (2, 3)})


class Tripwire(Transport):
    """A transport that fails the test if a damaged folder ever reaches it."""

    name = "tripwire"
    info: dict = {}

    def read_register(self, reg):
        raise AssertionError("a damaged build folder reached the transport")

    write_register = stream = load_params = read_register

    def close(self):
        pass


def _compile(out: Path, seed: int, weights: str = "runtime", **kw):
    built = build(ARCH)
    scope = fluid.Scope()
    scope.vars.update(random_values(built, seed))
    return compile_program(built.program, scope, out, feeds=[built.feed],
                           fetches=built.fetches, weights=weights, folding=ARCH.folding, **kw)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("builds")
    _compile(root / "good", 5)
    _compile(root / "other", 6, weights="const")  # another design
    return root


@pytest.fixture(autouse=True)
def no_tools(monkeypatch):
    def tripwire(*a, **k):
        raise AssertionError("a synthesis tool was started on a damaged build folder")
    for tool in ("write_board_top", "synthesize", "place_and_route", "pack"):
        monkeypatch.setattr(bitstream_mod, tool, tripwire)  # the bitstream steps' tools


def _readers(d: Path):
    x = inputs(ARCH, 2, seed=1)
    return {
        "simulate": lambda: simulate(d, {"x": x}),
        "bitstream": lambda: bitstream_mod.bitstream(d, board="ulx3s-85f", progress=None),
        "open": lambda: Accelerator.open(d, Tripwire()),
    }


def assert_refused(d: Path, names: str | tuple[str, ...], why: str = "") -> None:
    """Each reader raises a FluidError naming one of ``names`` and saying recompile."""
    names = (names,) if isinstance(names, str) else names
    for reader, call in _readers(d).items():
        try:
            call()
        except FluidError as e:
            msg = str(e)
            assert any(n in msg for n in names), f"{why} {reader}: {msg}"
            assert "recompile" in msg, f"{why} {reader}: {msg}"
        else:
            raise AssertionError(f"{why}: {reader} accepted the damaged folder {d}")


def _copy(builds: Path, tmp_path: Path, name: str = "b") -> Path:
    d = tmp_path / name
    shutil.copytree(builds / "good", d, symlinks=True)
    return d


def _files(d: Path) -> list[str]:
    return sorted(BuildDir(d).manifest()["files"])


def test_the_good_build_is_accepted(builds, tmp_path):
    d = _copy(builds, tmp_path)
    BuildDir(d).verify()
    acc = Accelerator.open(d, Tripwire(), check=False, load_weights=False)
    assert acc.host.weights == "runtime"
    assert BuildDir(d).weights()  # a valid parameter image
    modes = {stat.S_IMODE((d / f).stat().st_mode) for f in _files(d)}
    assert len(modes) == 1, f"file modes differ: {modes}"   # one mode for the build's files


def test_truncating_any_file_is_refused(builds, tmp_path):
    rng = random.Random(SEED)
    for k, rel in enumerate(_files(builds / "good")):
        d = _copy(builds, tmp_path, f"t{k}")
        size = (d / rel).stat().st_size
        cuts = {0, max(size - 1, 0), *(rng.randrange(size) for _ in range(3) if size)}
        for n in sorted(cuts):
            if n == size:
                continue
            with open(d / rel, "r+b") as f:
                f.truncate(n)
            assert_refused(d, rel, f"{rel} truncated to {n}")


def test_a_flipped_bit_in_any_file_is_refused(builds, tmp_path):
    rng = random.Random(SEED + 1)
    for k, rel in enumerate(_files(builds / "good")):
        d = _copy(builds, tmp_path, f"f{k}")
        data = bytearray((d / rel).read_bytes())
        if not data:
            continue
        for _ in range(2):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        if bytes(data) == (builds / "good" / rel).read_bytes():
            continue  # the two flips undid each other
        (d / rel).write_bytes(bytes(data))
        assert_refused(d, rel, f"{rel} with flipped bits")


def _npz(arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_wrong_dtype_shape_and_pickle_in_npz_files_are_refused(builds, tmp_path):
    good = BuildDir(builds / "good")
    image = {k: v for k, v in np.load(good.file("weights")).items()}
    params = {"fc0.w": np.zeros((3, 4), np.int8)}
    bad = {
        "weights.npz": [{**image, "words": image["words"].astype(np.float64)},
                        {**image, "words": image["words"][:-1]},
                        {**image, "bases": image["bases"].reshape(-1, 1)},
                        {"words": np.array([{"x": 1}], dtype=object)}],   # pickle payload
        "host/params.npz": [{"fc0.w": np.zeros((3, 4), np.float64)},
                            {"fc0.w": np.zeros((4, 3), np.int8), **params},
                            {"evil": np.array([print], dtype=object)}],
    }
    for rel, variants in bad.items():
        for k, arrays in enumerate(variants):
            d = _copy(builds, tmp_path, f"n{rel.replace('/', '_')}{k}")
            (d / rel).write_bytes(_npz(arrays))
            assert_refused(d, rel, f"{rel} variant {k}")


def test_fifo_and_symlink_to_dev_zero_are_refused(builds, tmp_path):
    for k, rel in enumerate(["design.json", "report.json", "accelerator.v", "weights.npz",
                             "host/params.npz", "host/host.json", "model/__model__",
                             "manifest.json"]):
        for how in ("fifo", "zero"):
            d = _copy(builds, tmp_path, f"{how}{k}")
            (d / rel).unlink()
            if how == "fifo":
                os.mkfifo(d / rel)
            else:
                os.symlink("/dev/zero", d / rel)
            t0 = time.monotonic()
            assert_refused(d, rel, f"{rel} as a {how}")
            assert time.monotonic() - t0 < 30


def test_a_file_from_another_build_is_refused(builds, tmp_path):
    other = builds / "other"
    for k, rel in enumerate(["design.json", "accelerator.v", "report.json", "host/host.json",
                             "registers.md", "model/__model__", "host/params.npz"]):
        if (other / rel).read_bytes() == (builds / "good" / rel).read_bytes():
            continue  # the same in both builds (a program differing only in weights)
        d = _copy(builds, tmp_path, f"m{k}")
        shutil.copyfile(other / rel, d / rel)
        assert_refused(d, rel, f"{rel} from another build")
    # a whole other build's manifest over this one's files
    d = _copy(builds, tmp_path, "mman")
    shutil.copyfile(other / NAMES["manifest"], d / NAMES["manifest"])
    assert_refused(d, (".npz", ".json", ".v", "model/", "manifest"), "another manifest")
    # a file of a build step that this build's manifest does not list
    d = _copy(builds, tmp_path, "mextra")
    (d / "accelerator.bit").write_bytes(b"\xff" * 64)
    assert_refused(d, "accelerator.bit", "an unlisted bitstream")


def test_a_damaged_or_missing_manifest_is_refused(builds, tmp_path):
    rng = np.random.default_rng(SEED)
    man = NAMES["manifest"]
    text = (builds / "good" / man).read_bytes()
    variants = [b"", b"{", b"[]", b"\xff\xfe", json.dumps({"format": 99}).encode(),
                text[: len(text) // 2],
                text.replace(b'"size": ', b'"size": -', 1),
                json.dumps({**json.loads(text), "files": {"../x": {"size": 1,
                                                                   "sha256": ""}}}).encode()]
    for _ in range(4):  # random byte flips
        b = bytearray(text)
        for i in rng.integers(0, len(b), 3):
            b[i] ^= 1 << int(rng.integers(0, 8))
        variants.append(bytes(b))
    for k, v in enumerate(variants):
        d = _copy(builds, tmp_path, f"x{k}")
        (d / man).write_bytes(v)
        if v == text:
            continue
        assert_refused(d, (man, ".json", ".v", ".npz", ".pb", "model/"), f"manifest {k}")
    d = _copy(builds, tmp_path, "gone")
    (d / man).unlink()   # a build from before manifests: refused, nothing can be checked
    assert_refused(d, man, "no manifest")


@pytest.mark.parametrize("step", [s.name for s in COMPILE_STEPS[:-1]])
def test_a_compile_stopped_after_any_step_over_an_older_build_is_refused(builds, tmp_path,
                                                                         step):
    """stop_after leaves the folder as a compile killed after that step would (the
    in-progress marker stays): the older report.json beside the new files is refused."""
    d = tmp_path / "b"
    shutil.copytree(builds / "other", d)
    _compile(d, 5, stop_after=step)
    assert_refused(d, NAMES["manifest"], f"stopped after {step}")
    _compile(d, 5)  # finishing the compile makes it a build again
    BuildDir(d).verify()


def test_a_compile_killed_in_a_step_is_refused(builds, tmp_path, monkeypatch):
    d = tmp_path / "b"
    shutil.copytree(builds / "other", d)
    from fluid_hw.backends.fpga import compile as comp

    def killed(st):
        raise KeyboardInterrupt  # as a SIGINT in the middle of the step
    steps = list(comp.COMPILE_STEPS)
    steps[6] = comp.Step(steps[6].name, killed)
    monkeypatch.setattr(comp, "COMPILE_STEPS", steps)
    with pytest.raises(KeyboardInterrupt):
        _compile(d, 5)
    monkeypatch.undo()
    assert_refused(d, NAMES["manifest"], "killed in write_host")


@pytest.mark.parametrize("k", range(len(COMPILE_STEPS)))
def test_a_compile_sigkilled_before_any_step_is_refused(builds, tmp_path, k):
    """A real SIGKILL: a forked child compiles into a copy of an older build and kills
    itself as step ``k`` begins (nothing cleans up); every reader refuses the folder."""
    import signal

    from fluid_hw.backends.fpga import compile as comp

    d = tmp_path / "b"
    shutil.copytree(builds / "other", d)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            steps = list(comp.COMPILE_STEPS)
            steps[k] = comp.Step(steps[k].name, lambda st: os.kill(os.getpid(),
                                                                    signal.SIGKILL))
            comp.COMPILE_STEPS[:] = steps  # the child's copy only
            os.environ["FLUID_HW_QUIET"] = "1"
            _compile(d, 5)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert_refused(d, NAMES["manifest"], f"killed as step {k} began")
    _compile(d, 5)  # the dead compile's lock is taken over
    BuildDir(d).verify()


def _hold_lock(d: Path, step: str = "compile"):
    """A child process holding the folder's lock; returns (pid, release)."""
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            with BuildDir(d).writing(step, manifest=False):
                os.write(ready_w, b"1")
                os.read(r, 1)
        finally:
            os._exit(0)
    os.read(ready_r, 1)

    def release(kill: bool = False):
        if kill:
            os.kill(pid, 9)
        else:
            os.write(w, b"1")
        os.waitpid(pid, 0)
        for fd in (r, w, ready_r, ready_w):
            os.close(fd)
    return pid, release


def test_two_compiles_into_one_folder(builds, tmp_path):
    d = tmp_path / "b"
    shutil.copytree(builds / "good", d)
    pid, release = _hold_lock(d)
    try:
        t0 = time.monotonic()
        with pytest.raises(BuildLockedError, match=rf"`fluid-hw compile` \(pid {pid}\) is "
                                                   "writing this build folder"):
            _compile(d, 6)
        assert time.monotonic() - t0 < 5  # at once, not after waiting
        with pytest.raises(BuildLockedError, match=rf"pid {pid}"):
            simulate(d, {"x": inputs(ARCH, 2, seed=1)})
    finally:
        release(kill=True)  # a holder that dies: its lock is taken over
    BuildDir(d).verify()    # the refused compile wrote nothing
    _compile(d, 6)
    BuildDir(d).verify()
    # a stale lock file of a dead process (no flock held) is simply taken over
    (d / NAMES["lock"]).write_text(json.dumps({"pid": 999999, "step": "compile"}))
    _compile(d, 5)
    BuildDir(d).verify()


# -- regressions: issue 14, "Silent corruption" (build folders) ------------------------

def _remanifest(d: Path) -> None:
    """Make the damage consistent with the manifest: the readers' own checks must
    catch it (as for a folder damaged before its step wrote the manifest)."""
    BuildDir(d).write_manifest("compile")


def test_regression_truncated_or_float64_weights_npz(builds, tmp_path):
    for k, arrays in enumerate([None, "float64"]):
        d = _copy(builds, tmp_path, f"w{k}")
        w = d / "weights.npz"
        if arrays is None:
            data = w.read_bytes()
            w.write_bytes(data[: len(data) // 2])
        else:
            image = dict(np.load(w))
            w.write_bytes(_npz({**image, "words": image["words"].astype(np.float64)}))
        _remanifest(d)
        with pytest.raises(FluidError, match=r"weights.npz.*recompile"):
            BuildDir(d).weights()
        with pytest.raises(FluidError, match=r"weights.npz.*recompile"):
            Accelerator.open(d, Tripwire(), check=False)


def test_regression_compile_killed_after_seventh_step_is_not_bit_exact(builds, tmp_path):
    d = tmp_path / "b"
    shutil.copytree(builds / "other", d)
    _compile(d, 5, stop_after=COMPILE_STEPS[6].name)
    old = json.loads((d / "report.json").read_text())
    assert old["design_hash"] != json.loads((d / "design.json").read_text())["design_hash"]
    with pytest.raises(FluidError, match=r"manifest.json.*did not finish.*recompile"):
        simulate(d, {"x": inputs(ARCH, 2, seed=1)})


def test_regression_bitstream_of_a_half_truncated_verilog(builds, tmp_path):
    d = _copy(builds, tmp_path)
    v = d / "accelerator.v"
    v.write_bytes(v.read_bytes()[: v.stat().st_size // 2])
    with pytest.raises(FluidError, match=r"accelerator.v: is \d+ bytes, but the build wrote"):
        bitstream_mod.bitstream(d, board="ulx3s-85f", progress=None)
    _remanifest(d)  # even with a manifest that agrees, the Verilog must end its module
    with pytest.raises(FluidError, match=r"accelerator.v: does not end its last module"):
        bitstream_mod.bitstream(d, board="ulx3s-85f", progress=None)


def test_regression_atomic_writes_with_per_process_temporaries(builds, tmp_path):
    """save_param_image, bitstream.json, outputs and report writes go through one
    atomic writer: a temporary named for the process, renamed over the file."""
    from fluid_hw.drivers import load_param_image, save_param_image

    image = BuildDir(builds / "good").weights()
    p = tmp_path / "w.npz"
    (tmp_path / "w.npz.tmp.npz").write_bytes(b"another writer's temporary")
    save_param_image(p, image)
    assert (tmp_path / "w.npz.tmp.npz").read_bytes() == b"another writer's temporary"
    for (b0, w0), (b1, w1) in zip(image, load_param_image(p)):
        assert b0 == b1 and np.array_equal(w0, w1)
    assert sorted(q.name for q in tmp_path.iterdir()) == ["w.npz", "w.npz.tmp.npz"]


@pytest.fixture(scope="module")
def regioned(tmp_path_factory):
    from tests.backends.fpga._two_regions import two_region_build

    d = tmp_path_factory.mktemp("regioned") / "net"
    two_region_build(d)
    return d


def test_a_damaged_multi_region_build_is_refused(regioned, tmp_path):
    """A build of two regions: the top manifest covers regions/<k>/ too, and each region
    has its own; truncating or flipping any file is refused by all three readers."""
    x = np.zeros((2, 16), np.float32)
    BuildDir(regioned).verify()
    rng = random.Random(SEED + 2)
    files = _files(regioned)
    assert any(f.startswith("regions/1/") for f in files)
    for k, rel in enumerate(rng.sample(files, 12)):
        d = tmp_path / f"r{k}"
        shutil.copytree(regioned, d)
        data = (d / rel).read_bytes()
        (d / rel).write_bytes(data[: len(data) // 2] if k % 2 else data + b"\0")
        for reader, call in {
            "simulate": lambda d=d: simulate(d, {"x": x}),
            "bitstream": lambda d=d: bitstream_mod.bitstream(d, board="ulx3s-85f",
                                                             progress=None),
            "open": lambda d=d: Accelerator.open(d, "sim"),
        }.items():
            with pytest.raises(FluidError) as e:
                call()
            assert rel in str(e.value) and "recompile" in str(e.value), (reader, rel)
