"""Hostile and damaged model folders: every one is refused with a FormatError that
names the file, without hanging, exhausting memory or unpickling (issue 14)."""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, fileio

W = "fc_0.w_0.npy"  # float32 (6, 5)
B = "fc_1.b_0.npy"  # float32 (3,)
PARAMS = "params.npz"
needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero")


# -- a saved model, once per module, in both layouts --------------------------------
def _build(main: fluid.Program, startup: fluid.Program) -> fluid.Variable:
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[6])
        h = fluid.layers.fc(x, size=5, act="relu")
        return fluid.layers.fc(h, size=3, act="softmax")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, Path]:
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    y = _build(main, startup)
    exe = fluid.Executor()
    root = tmp_path_factory.mktemp("saved")
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(root / "npy"), ["x"], [y], exe, main)
        fluid.io.save_inference_model(str(root / "npz"), ["x"], [y], exe, main,
                                      params_filename=PARAMS)
    return {None: root / "npy", PARAMS: root / "npz"}


@pytest.fixture
def model(saved: dict[str | None, Path], tmp_path: Path) -> Path:
    """A fresh copy of the one-.npy-per-parameter model folder."""
    return Path(shutil.copytree(saved[None], tmp_path / "model"))


@pytest.fixture
def npz_model(saved: dict[str | None, Path], tmp_path: Path) -> Path:
    """A fresh copy of the model folder whose parameters are one params.npz."""
    return Path(shutil.copytree(saved[PARAMS], tmp_path / "npz_model"))


@contextlib.contextmanager
def bounded_memory(extra: int = 1 << 30) -> Iterator[None]:
    """Lower this process's address-space limit to what it uses now plus ``extra``,
    so a loader that reads /dev/zero or allocates a claimed 4 TiB fails fast instead
    of taking the machine down.  Restored afterwards."""
    try:
        import resource
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = used + extra
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _load(d: Path, params_filename: str | None = None) -> None:
    with bounded_memory():
        fluid.io.load_inference_model(str(d), fluid.Executor(),
                                      params_filename=params_filename, scope=fluid.Scope())


def _refused(d: Path, *words: str, params_filename: str | None = None) -> str:
    scope = fluid.Scope()
    with fluid.scope_guard(scope), pytest.raises(errors.FormatError) as ei, bounded_memory():
        fluid.io.load_inference_model(str(d), fluid.Executor(),
                                      params_filename=params_filename, scope=scope)
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg
    assert not scope.vars, "half-loaded scope"
    return msg


def _no_hang(fn: Callable[[], object], fifo: Path, timeout: float = 10.0) -> object:
    """Run ``fn`` in a thread; fail (and unblock it by opening ``fifo``'s writing
    end) if it has not returned within ``timeout`` seconds."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
        pytest.fail(f"reading {fifo.name} hung (a FIFO must be refused before it is opened)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=arr.dtype.hasobject)
    return buf.getvalue()


def _npy_header(shape: tuple[int, ...], descr: str = "<f4", fortran: bool = False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": fortran, "shape": shape})
    return buf.getvalue()


def _rewrite_npz(path: Path, change: Callable[[str, bytes], bytes]) -> None:
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, change(name, data))


# -- not regular files --------------------------------------------------------------
@needs_posix
@pytest.mark.parametrize("name", [W, "__model__"])
def test_fifo_is_refused_without_hanging(model: Path, name: str) -> None:
    (model / name).unlink()
    os.mkfifo(model / name)
    t = time.perf_counter()
    with pytest.raises(errors.FormatError, match=rf"{name}: is a FIFO"):
        _no_hang(lambda: _load(model), model / name)
    assert time.perf_counter() - t < 5


@needs_posix
def test_fifo_params_npz_is_refused(npz_model: Path) -> None:
    (npz_model / PARAMS).unlink()
    os.mkfifo(npz_model / PARAMS)
    with pytest.raises(errors.FormatError, match=r"params\.npz: is a FIFO"):
        _no_hang(lambda: _load(npz_model, PARAMS), npz_model / PARAMS)


@needs_posix
@pytest.mark.parametrize("name", [W, "__model__"])
def test_symlink_to_dev_zero_is_refused(model: Path, name: str) -> None:
    (model / name).unlink()
    os.symlink("/dev/zero", model / name)
    _refused(model, name, "/dev/zero")


@needs_posix
def test_device_is_refused_by_the_reader_itself(tmp_path: Path) -> None:
    link = tmp_path / "__model__"
    os.symlink("/dev/zero", link)
    with bounded_memory(), pytest.raises(errors.FormatError, match="a character device"):
        fluid.io.load_program(link)  # no model folder here: the device itself is refused


def test_directory_is_refused(model: Path) -> None:
    (model / W).unlink()
    (model / W).mkdir()
    _refused(model, W, "is a folder")


@needs_posix
def test_symlink_leaving_the_folder_is_refused(model: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.npy"
    shutil.copy(model / W, outside)  # a perfectly valid parameter, but not in the folder
    (model / W).unlink()
    os.symlink(outside, model / W)
    _refused(model, W, "outside the folder")


@needs_posix
def test_symlink_inside_the_folder_is_read(model: Path) -> None:
    (model / "store").mkdir()
    (model / W).rename(model / "store" / W)
    os.symlink(Path("store") / W, model / W)
    _load(model)


def test_params_filename_leaving_the_folder_is_refused(npz_model: Path, tmp_path: Path) -> None:
    shutil.copy(npz_model / PARAMS, tmp_path / PARAMS)
    _refused(npz_model, "outside the folder", params_filename=f"../{PARAMS}")


# -- sizes --------------------------------------------------------------------------
def test_claimed_shape_larger_than_the_file(model: Path) -> None:
    data = _npy_header((2**40,))
    assert len(data) == 128
    (model / W).write_bytes(data)
    _refused(model, W, "(1099511627776,)", "4.0 TiB", "0 bytes follow")


def test_claimed_shape_larger_than_the_file_in_npz(npz_model: Path) -> None:
    _rewrite_npz(npz_model / PARAMS,
                 lambda n, d: _npy_header((2**40,)) if n == W else d)
    _refused(npz_model, PARAMS, "fc_0.w_0", "4.0 TiB", params_filename=PARAMS)


def test_size_limit_and_its_override(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUID_HW_MAX_PARAMS_BYTES", "100")
    _refused(model, W, "FLUID_HW_MAX_PARAMS_BYTES")
    monkeypatch.setenv("FLUID_HW_MAX_PARAMS_BYTES", "1K")
    _load(model)
    monkeypatch.setenv("FLUID_HW_MAX_PROGRAM_BYTES", "64")
    _refused(model, "__model__", "FLUID_HW_MAX_PROGRAM_BYTES")
    monkeypatch.setenv("FLUID_HW_MAX_PROGRAM_BYTES", "lots")
    with pytest.raises(errors.FluidError, match="FLUID_HW_MAX_PROGRAM_BYTES='lots'"):
        _load(model)


def test_limits_are_stated() -> None:
    assert fileio.read_limit("params") == fileio.LIMITS["params"] == 2 << 30
    assert fileio.read_limit("program") == 64 << 20
    with pytest.raises(errors.FluidError, match="Known: data, onnx, params, program"):
        fileio.read_limit("nope")


def test_compressed_npz_loads_and_its_declared_size_counts(
        npz_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = npz_model / PARAMS
    with np.load(p) as z:
        arrays = {k: z[k] for k in z.files}
    with open(p, "wb") as f:  # a .npz, not .npz.npz
        np.savez_compressed(f, **arrays, pad=np.zeros(1 << 16, np.float32))
    assert p.stat().st_size < 4096
    _load(npz_model, PARAMS)
    # 256 KiB of zeros deflate to a few hundred bytes: the limit bounds what is unpacked
    monkeypatch.setenv("FLUID_HW_MAX_PARAMS_BYTES", "64K")
    _refused(npz_model, PARAMS, "FLUID_HW_MAX_PARAMS_BYTES", params_filename=PARAMS)


# -- damaged .npy / .npz ------------------------------------------------------------
def test_flipped_header_byte(model: Path) -> None:
    data = bytearray((model / W).read_bytes())
    i = data.index(b"'descr':") + len(b"'descr'")
    data[i] = ord("(")  # numpy's own parser raised tokenize.TokenError here
    (model / W).write_bytes(bytes(data))
    _refused(model, W, "not a valid .npy", "save it again")


@pytest.mark.parametrize("cut", [8, 20, 100, 127, 129])
def test_truncated_parameter(model: Path, cut: int) -> None:
    data = (model / W).read_bytes()
    (model / W).write_bytes(data[:len(data) - cut] if cut < len(data) - 1 else data[:cut])
    _refused(model, W, "truncated", "save it again")


@pytest.mark.parametrize("cut", [10, 60, 200])
def test_truncated_npz(npz_model: Path, cut: int) -> None:
    p = npz_model / PARAMS
    p.write_bytes(p.read_bytes()[:-cut])
    _refused(npz_model, PARAMS, "truncated", "save it again", params_filename=PARAMS)


def test_truncated_member_in_npz(npz_model: Path) -> None:
    _rewrite_npz(npz_model / PARAMS, lambda n, d: d[:-4] if n == W else d)
    _refused(npz_model, PARAMS, "fc_0.w_0", "truncated", params_filename=PARAMS)


def test_npz_member_with_bad_crc(npz_model: Path) -> None:
    p = npz_model / PARAMS
    data = bytearray(p.read_bytes())
    i = data.index(b"\x93NUMPY", data.index(W.encode()))  # fc_0.w_0's .npy header
    data[i + 140] ^= 0xFF  # one of its data bytes: only the CRC notices
    p.write_bytes(bytes(data))
    _refused(npz_model, PARAMS, "params.npz", params_filename=PARAMS)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16])
def test_wrong_dtype_parameter(model: Path, dtype: type) -> None:
    (model / W).write_bytes(_npy(np.zeros((6, 5), dtype)))
    _refused(model, W, "'fc_0.w_0'", "float32", np.dtype(dtype).name, "save the parameters")


def test_float64_parameter_in_npz(npz_model: Path) -> None:
    _rewrite_npz(npz_model / PARAMS,
                 lambda n, d: _npy(np.zeros((3,), np.float64)) if n == B else d)
    _refused(npz_model, PARAMS, "'fc_1.b_0'", "float32", "float64", "save the parameters",
             params_filename=PARAMS)


def test_wrong_shape_parameter(model: Path) -> None:
    (model / W).write_bytes(_npy(np.zeros((5, 6), np.float32)))
    _refused(model, W, "[6, 5]", "[5, 6]", "save the parameters")


def test_big_endian_float32_is_not_silently_reinterpreted(model: Path) -> None:
    (model / W).write_bytes(_npy(np.zeros((6, 5), ">f4")))
    _refused(model, W, "float32", ">f4")


def test_fortran_order_parameter_loads_correctly(model: Path) -> None:
    want = np.arange(30, dtype=np.float32).reshape(6, 5)
    (model / W).write_bytes(_npy(np.asfortranarray(want)))
    scope = fluid.Scope()
    fluid.io.load_inference_model(str(model), fluid.Executor(), scope=scope)
    np.testing.assert_array_equal(scope.find_value("fc_0.w_0"), want)


def test_pickle_payload_is_refused(model: Path) -> None:
    (model / W).write_bytes(_npy(np.array([{"evil": 1}], dtype=object)))
    _refused(model, W, "pickle")


def test_pickle_payload_in_npz_is_refused(npz_model: Path) -> None:
    _rewrite_npz(npz_model / PARAMS,
                 lambda n, d: _npy(np.array([{"evil": 1}], dtype=object)) if n == W else d)
    _refused(npz_model, PARAMS, "pickle", params_filename=PARAMS)


def test_params_file_that_is_an_npy(npz_model: Path) -> None:
    (npz_model / PARAMS).write_bytes(_npy(np.zeros((6, 5), np.float32)))
    _refused(npz_model, PARAMS, "a single .npy array", params_filename=PARAMS)


def test_parameter_file_that_is_an_npz(model: Path, npz_model: Path) -> None:
    shutil.copy(npz_model / PARAMS, model / W)
    _refused(model, W, ".npz")


def test_npz_missing_an_array_lists_what_it_holds(npz_model: Path) -> None:
    with zipfile.ZipFile(npz_model / PARAMS) as z:
        keep = {i.filename: z.read(i) for i in z.infolist() if i.filename != B}
    with zipfile.ZipFile(npz_model / PARAMS, "w") as z:
        for n, d in keep.items():
            z.writestr(n, d)
    _refused(npz_model, "'fc_1.b_0'", "it holds", "fc_0.w_0", params_filename=PARAMS)


# -- fuzz -----------------------------------------------------------------------------
_DESCRS = ["<f8", "<f4", ">f4", "|O", "<U3", "|b1", "<i8", "<c8", "|V4", "<M8[s]", "xx", "|S1"]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """One damaging edit of a file: truncation, byte flips or a header rewrite."""
    kind = rng.randrange(6)
    if kind == 0 and data:
        return data[:rng.randrange(len(data))]
    if kind in (1, 2) and data:
        b = bytearray(data)
        span = 128 if kind == 1 else len(b)  # headers, mostly
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(min(span, len(b)))] = rng.randrange(256)
        return bytes(b)
    if kind == 3:
        shape = tuple(rng.choice([0, 1, 3, 5, 6, 2**20, 2**40, 2**61])
                      for _ in range(rng.randint(0, 3)))
        body = data[128:] if data.startswith(b"\x93NUMPY") else data
        return _npy_header(shape, rng.choice(_DESCRS), rng.random() < 0.3) + body
    if kind == 4 and data:  # an extension of the file
        return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    header = data[:128].decode("latin1")
    for a, b in (("'descr'", "'desc'"), ("(6, 5)", "(6, 5, -1)"), ("False", "None"),
                 ("'<f4'", "[('a', '<f4')]"), ("}", ""), ("(", "((" * 50)):
        if a in header and rng.random() < 0.5:
            header = header.replace(a, b, 1)
    return header.encode("latin1") + data[128:]


def test_fuzz_damaged_model_folders(saved: dict[str | None, Path], tmp_path: Path) -> None:
    """A few hundred seeded damages of both layouts: a load either gives the
    declared arrays or a FluidError, never another exception, hang or huge allocation."""
    rng = random.Random(14)
    t0, outcomes = time.perf_counter(), {"loaded": 0, "refused": 0}
    for case in range(400):
        params = rng.choice([None, PARAMS])
        d = Path(shutil.copytree(saved[params], tmp_path / f"c{case}"))
        files = sorted(p.name for p in d.iterdir())
        name = rng.choice(files)
        if params is not None and rng.random() < 0.5:  # damage a member, not the archive
            member = rng.choice([W, B])
            _rewrite_npz(d / PARAMS, lambda n, data, m=member: _mutate(rng, data) if n == m
                         else data)
        else:
            (d / name).write_bytes(_mutate(rng, (d / name).read_bytes()))
        scope = fluid.Scope()
        try:
            with bounded_memory(256 << 20):
                prog, _, _ = fluid.io.load_inference_model(str(d), fluid.Executor(),
                                                           params_filename=params, scope=scope)
        except errors.FluidError:
            outcomes["refused"] += 1
            assert not scope.vars, f"case {case}: half-loaded scope"
        except BaseException as e:
            pytest.fail(f"case {case} ({name}, params={params}): {type(e).__module__}."
                        f"{type(e).__name__}: {e}")
        else:
            outcomes["loaded"] += 1
            for v in prog.global_block().vars.values():
                if v.name in scope.vars:
                    arr = scope.vars[v.name]
                    assert arr.dtype == np.float32 and list(arr.shape) == list(v.shape)
        shutil.rmtree(d)
    assert outcomes["refused"] > 300, outcomes
    assert time.perf_counter() - t0 < 30
