"""Every generated kernel's CUDA source compiles with ``nvcc --ptx -arch=sm_90``.

nvcc needs no driver and no GPU; the test is skipped, saying so, where nvcc is
absent.  The kernels are those of the digits MLP and CNN programs (training and
inference, fused and unfused), of the fused ops the passes produce, every
activation and binary function in both operand layouts, and the fixed kernels.
"""

import re

import pytest

import fluid_hw as fluid
from fluid_hw.backends.cuda import CUDAExecutor, HostShimRuntime, compile_ptx
from fluid_hw.backends.cuda.codegen import (
    BINARY,
    UNARY,
    ChainSpec,
    Ref,
    Step,
    chain_kernel,
    fixed_kernels,
)
from fluid_hw.backends.cuda.runtime import find_tool
from fluid_hw.errors import FluidError
from fluid_hw.frontend import models
from tests.backends.cuda.test_host_shim import fused_op_programs


def _nvcc_or_skip():
    try:
        return find_tool("NVCC", ["nvcc", "/usr/local/cuda/bin/nvcc"], "nvcc", "")
    except FluidError:
        pytest.skip("nvcc is not installed (CUDA toolkit absent): generated CUDA sources "
                    "cannot be compile-checked on this machine")


CONSTS = {"leaky_relu": (("alpha", 0.02),),
          "scale": (("scale", 2.5), ("bias", -1.0), ("bias_after_scale", 0.0))}


def catalogue():
    ks = list(fixed_kernels())
    for fn in UNARY:
        ks.append(chain_kernel(ChainSpec((Step(fn, (Ref("in", 0),), CONSTS.get(fn, ())),),
                                         ("full",), (0,))))
    for fn in BINARY:
        for modes in (("full", "full"), ("full", "bcast"), ("bcast", "full")):
            ks.append(chain_kernel(ChainSpec((Step(fn, (Ref("in", 0), Ref("in", 1))),),
                                             modes, (0,))))
    return ks


def program_kernels():
    rt = HostShimRuntime()
    ks = []
    for build in (models.digits_mlp, models.digits_cnn):
        for fuse in (True, False):
            m = build(optimizer=fluid.optimizer.Adam(learning_rate=0.01))
            exe = CUDAExecutor(runtime=rt, fuse=fuse)
            for prog in (m.main, m.test_program):
                prep = exe.prepare_device(prog, m.feed_names, [m.loss.name])
                ks += prep.plan.kernels()
    for _, prog, feed, fetch in fused_op_programs():
        exe = CUDAExecutor(runtime=rt)
        with fluid.scope_guard(fluid.Scope()):
            exe.run(prog, feed=feed, fetch_list=fetch)
        for prep in exe._prepared.values():
            ks += prep.plan.kernels()
    return ks


def test_every_generated_kernel_compiles_with_nvcc(tmp_path):
    _nvcc_or_skip()
    ks = catalogue() + program_kernels()
    names = {k.name for k in ks}
    assert len(names) > 40
    assert any("relu" in k.source and "+" in k.source for k in ks), "a fused bias + relu"
    ptx = compile_ptx(ks, arch="sm_90", workdir=str(tmp_path))
    entries = set(re.findall(r"\.entry\s+(\w+)\(", ptx))
    assert names <= entries, f"missing from the PTX: {sorted(names - entries)}"
    assert ".target sm_90" in ptx


def test_a_broken_source_is_reported_with_nvcc_messages(tmp_path):
    _nvcc_or_skip()
    good = fixed_kernels()[0]
    bad = type(good)("fhw_bad", good.source.replace("fhw_softmax_rows", "fhw_bad")
                     .replace("fmaxf(m, xr[c])", "fmaxf(m, undefined_name)"), good.params)
    with pytest.raises(FluidError, match="undefined_name"):
        compile_ptx([bad], workdir=str(tmp_path))


def test_no_nvcc_gives_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("NVCC", str(tmp_path / "no-such-nvcc"))
    with pytest.raises(FluidError, match="NVCC="):
        compile_ptx(fixed_kernels())
