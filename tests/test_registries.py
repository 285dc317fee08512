"""fluid_hw.registries: the one 'registered twice' rule, kept by every registry."""

import pytest

from fluid_hw.backends.cpu.kernels import get_kernel, register_kernel
from fluid_hw.backends.cuda.kernels import device_kernels, register_device_kernel
from fluid_hw.ir.registry import get_op, register_op
from fluid_hw.passes.base import get_pass, register_pass
from fluid_hw.registries import register_once


def test_register_once_adds_then_refuses():
    table: dict[str, int] = {}
    assert register_once(table, "a", 1, "thing") == 1
    with pytest.raises(ValueError, match=r"^thing 'a' registered twice$"):
        register_once(table, "a", 2, "thing")
    assert table == {"a": 1}


def test_each_registry_refuses_a_second_registration():
    relu = get_op("relu")
    with pytest.raises(ValueError, match=r"^op 'relu' registered twice$"):
        register_op(relu)
    cls = type(get_pass("dead_code_elimination"))
    with pytest.raises(ValueError, match=r"^pass 'dead_code_elimination' registered twice$"):
        register_pass(cls)
    with pytest.raises(ValueError, match=r"^CPU kernel for 'relu' registered twice$"):
        register_kernel("relu")(get_kernel("relu"))
    assert "conv2d" in device_kernels()
    with pytest.raises(ValueError, match=r"^device kernel for 'conv2d' registered twice$"):
        register_device_kernel("conv2d")(device_kernels()["conv2d"])
