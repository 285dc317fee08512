"""Energy per inference, only from named sources.

* CPU: the RAPL energy counters of the Linux ``powercap`` interface
  (``/sys/class/powercap/intel-rapl:N/energy_uj``, one per package; AMD exposes the
  same files).  They count the whole package -- every process on it, not only the
  benchmark -- so the figure is an upper bound for the model.  Where the files are
  absent or unreadable (a virtual machine, a container, a kernel that restricts them
  to root) the energy is *unavailable*, and says why.
* GPU: NVML's total-energy counter (``pynvml``) when importable, else the board power
  ``nvidia-smi`` reports, sampled while the benchmark runs (mean power x time).
* FPGA: a device power *estimate* for the design's utilisation and clock, given with
  its source (e.g. Lattice's Power Calculator in Radiant / Diamond for the build's
  resources and Fmax): :class:`PowerEstimate`.  fluid-hw ships no such figure: none
  was available to check here, and a guessed one is not a measurement.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EnergyMeter", "NvidiaSmiMeter", "PowerEstimate", "RaplMeter", "cpu_meter",
           "gpu_meter"]

POWERCAP = Path("/sys/class/powercap")


class EnergyMeter:
    """Joules used between :meth:`start` and :meth:`stop`; ``source`` names where they
    come from."""

    source = "none"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> float:
        raise NotImplementedError


class RaplMeter(EnergyMeter):
    """The package domains' ``energy_uj`` counters (wrap-around handled)."""

    def __init__(self, domains: list[Path]) -> None:
        self.domains = domains
        names = [(d / "name").read_text().strip() for d in domains]
        self.source = f"RAPL ({', '.join(names)}; whole package, all processes)"
        self._start: list[int] = []

    def _read(self) -> list[int]:
        return [int((d / "energy_uj").read_text()) for d in self.domains]

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> float:
        total = 0
        for d, a, b in zip(self.domains, self._start, self._read()):
            if b < a:  # the counter wrapped
                b += int((d / "max_energy_range_uj").read_text())
            total += b - a
        return total * 1e-6


def cpu_meter(root: Path = POWERCAP) -> tuple[EnergyMeter | None, str]:
    """A RAPL meter over the package domains, or ``(None, why not)``."""
    if not root.is_dir():
        return None, f"unavailable: no RAPL counters ({root} does not exist on this machine)"
    domains = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not domains:
        return None, f"unavailable: no RAPL package domain under {root}"
    try:
        meter = RaplMeter(domains)
        meter._read()
    except OSError as e:
        return None, (f"unavailable: the RAPL counters under {root} are not readable "
                      f"({e.strerror}; reading them may need root)")
    return meter, meter.source


class NvmlMeter(EnergyMeter):
    """NVML's total energy counter of GPU ``index`` (millijoules since driver load)."""

    def __init__(self, index: int) -> None:
        pynvml = importlib.import_module("pynvml")  # untyped, and often absent: Any
        pynvml.nvmlInit()
        self._nvml = pynvml
        self._h = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(self._h)  # supported (Volta and later)?
        self.source = f"NVML total energy counter, GPU {index}"
        self._start = 0

    def start(self) -> None:
        self._start = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._h))

    def stop(self) -> float:
        return (int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._h)) - self._start) \
            * 1e-3


class NvidiaSmiMeter(EnergyMeter):
    """Board power from ``nvidia-smi`` every ``period_s`` while running: mean x time."""

    def __init__(self, index: int, period_s: float = 0.05) -> None:
        exe = shutil.which("nvidia-smi")
        if exe is None:
            raise FileNotFoundError("nvidia-smi")
        self.cmd = [exe, "--query-gpu=power.draw", "--format=csv,noheader,nounits",
                    "-i", str(index)]
        self.power_w()  # works at all?
        self.period_s = period_s
        self.source = f"nvidia-smi power.draw, GPU {index}, sampled every {period_s:g} s"
        self._samples: list[float] = []
        self._t0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def power_w(self) -> float:
        out = subprocess.run(self.cmd, capture_output=True, text=True, timeout=10,
                             check=True).stdout
        return float(out.strip().splitlines()[0])

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                self._samples.append(self.power_w())
            self._stop.wait(self.period_s)

    def start(self) -> None:
        self._samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = time.perf_counter()
        self._thread.start()

    def stop(self) -> float:
        dt = time.perf_counter() - self._t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._samples:
            raise RuntimeError("nvidia-smi gave no power sample while running")
        return sum(self._samples) / len(self._samples) * dt


def gpu_meter(index: int = 0) -> tuple[EnergyMeter | None, str]:
    """NVML's counter, else nvidia-smi sampling, else ``(None, why not)``."""
    try:
        m: EnergyMeter = NvmlMeter(index)
        return m, m.source
    except Exception:  # no pynvml, no driver, or a GPU without the counter
        pass
    try:
        m = NvidiaSmiMeter(index)
        return m, m.source
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return None, f"unavailable: neither pynvml nor a working nvidia-smi ({e})"


@dataclass(frozen=True)
class PowerEstimate:
    """A device's power while running a design, from a documented estimate."""

    watts: float
    source: str  # the tool or document, and for what utilisation and clock

    def __post_init__(self) -> None:
        if not (self.watts > 0 and self.source.strip()):
            from ..errors import BenchError

            raise BenchError("an FPGA power estimate needs watts > 0 and its source "
                             "(e.g. --fpga-power 0.4 --fpga-power-source 'Lattice Power "
                             "Calculator, 7k LUT, 74 DSP at 106 MHz')")
