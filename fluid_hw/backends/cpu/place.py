"""Places name the device a tensor or executor lives on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CPUPlace:
    """The host CPU (the reference back end)."""

    def __repr__(self) -> str:
        return "CPUPlace()"


@dataclass(frozen=True)
class CUDAPlace:
    """GPU ``device_id`` (used by the CUDA back end)."""

    device_id: int = 0
