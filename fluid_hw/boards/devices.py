"""Devices and boards as data: resources, pins, tool arguments.

Three levels, each a frozen dataclass:

- :class:`Family` (``ecp5``, ``ice40``): how the open toolchain handles it: the
  Yosys synthesis command, the nextpnr and packer argument templates, and the
  tables that turn Yosys cell types and nextpnr BEL types into the generic
  resource names used in build reports (``lut``, ``ff``, ``dsp``, ``bram``...).
- :class:`Device` (``LFE5U-25F``, ``iCE40UP5K``...): its resources and the
  nextpnr device and package arguments.
- :class:`Board` (``ulx3s-25f``, ``icebreaker``...): a device, its oscillator and
  the pins the board top uses (clock, USB-serial TX/RX, an LED, a reset button).

Look boards up with :func:`get_board` (board name, alias or device name) and
devices with :func:`get_device`; both raise an error that lists the known names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType

from ..errors import UnknownNameError, unknown_name

__all__ = [
    "Board",
    "Device",
    "Family",
    "Pin",
    "RESOURCE_KEYS",
    "all_boards",
    "all_devices",
    "get_board",
    "get_device",
    "get_family",
]

#: Generic resource names used in ``resources_used`` / ``resources_available``.
RESOURCE_KEYS = ("lut", "ff", "carry", "lutram", "dsp", "bram", "spram", "pll", "io")


def _frozen(d: Mapping[str, object] | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Family:
    """One FPGA family and how the open toolchain builds for it.

    Argument templates are tuples of strings formatted with ``str.format`` from
    the names ``top``, ``netlist``, ``constraints``, ``pnr_out``, ``report``,
    ``freq``, ``seed``, ``placer``, ``bitstream``, ``device_args`` (spliced as
    several arguments), ``package`` and ``speed``.
    """

    name: str
    #: Yosys commands run after the sources are read.
    synth_commands: tuple[str, ...]
    #: Keys into :data:`fluid_hw.boards.toolchain.TOOLS`.
    pnr_tool: str
    pack_tool: str
    pnr_args: tuple[str, ...]
    pack_args: tuple[str, ...]
    constraints_suffix: str
    pnr_suffix: str
    bitstream_suffix: str
    #: ``(cell type pattern, resource, weight)``: how Yosys cells count; every
    #: row that matches a cell type counts (a CCU2C is two LUTs and one carry).
    yosys_cells: tuple[tuple[str, str, int], ...]
    #: nextpnr utilisation entry (BEL type) -> resource.
    nextpnr_bels: Mapping[str, str]
    #: resource -> how a person names it in messages ("MULT18X18D multipliers").
    resource_names: Mapping[str, str]
    #: The PLL primitive, for messages and docs.
    pll_primitive: str
    #: nextpnr placer: ``static`` gave better Fmax and 2-4x shorter runs than
    #: ``heap`` on ECP5 (HARDWARE.md) and on the UP5K (docs/bitstreams.md).
    default_placer: str = "static"
    #: nextpnr router when none is asked for: nextpnr's own default (``router1``);
    #: ``router2`` copes better with large, congested designs (docs/accelerators.md)
    default_router: str = "router1"

    def count_resources(self, cells_by_type: Mapping[str, int]) -> dict[str, int]:
        """Generic resource counts (``lut``, ``dsp``...) from Yosys' cells by type."""
        out: dict[str, int] = {}
        for cell, n in cells_by_type.items():
            for pattern, res, weight in self.yosys_cells:
                if fnmatchcase(cell, pattern):
                    out[res] = out.get(res, 0) + n * weight
        return out


@dataclass(frozen=True)
class Device:
    """One FPGA: its resources and how nextpnr names it."""

    name: str
    family: Family
    #: nextpnr arguments that select the device, e.g. ``("--25k",)``.
    nextpnr_device: tuple[str, ...]
    #: Package as nextpnr spells it (``CABGA381``, ``sg48``).
    package: str
    speed: str | None
    #: Generic resource name -> count on the device (see :data:`RESOURCE_KEYS`).
    resources: Mapping[str, int]
    #: Block RAM size in bits (one ``bram`` unit), and SPRAM size.
    bram_bits: int
    spram_bits: int = 0
    notes: str = ""

    def describe(self, resource: str) -> str:
        return self.family.resource_names.get(resource, resource)


@dataclass(frozen=True)
class Pin:
    """One package pin the board top uses.

    ``name`` is the top-level port name, ``site`` the package pin, ``direction``
    ``"i"`` or ``"o"``; ``invert`` marks active-low buttons and LEDs; ``attrs``
    are written into the constraints (LPF ``IOBUF`` attributes, PCF flags).
    """

    name: str
    site: str
    direction: str
    invert: bool = False
    attrs: Mapping[str, str] = field(default_factory=_frozen)


@dataclass(frozen=True)
class Board:
    """A board: a device, its oscillator and the pins by role.

    Roles: ``clk`` (the oscillator), ``uart_tx`` (FPGA to host), ``uart_rx``
    (host to FPGA), ``led``, ``reset`` (a push button).
    """

    name: str
    device: Device
    clock_mhz: float
    pins: Mapping[str, Pin]
    #: ``openFPGALoader`` arguments that select the board/cable.
    programmer_args: tuple[str, ...]
    description: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def family(self) -> Family:
        return self.device.family

    def pin(self, role: str) -> Pin:
        try:
            return self.pins[role]
        except KeyError:
            raise UnknownNameError(
                f"board {self.name!r} has no {role!r} pin; it has {', '.join(self.pins)}"
            ) from None


# ---------------------------------------------------------------------------
# families

ECP5 = Family(
    name="ecp5",
    synth_commands=("synth_ecp5 -top {top} -json {netlist}",),
    pnr_tool="nextpnr-ecp5",
    pack_tool="ecppack",
    pnr_args=(
        "{device_args}", "--package", "{package}", "--speed", "{speed}",
        "--json", "{netlist}", "--lpf", "{constraints}", "--textcfg", "{pnr_out}",
        "--freq", "{freq}", "--report", "{report}", "--placer", "{placer}",
        "--timing-allow-fail", "--seed", "{seed}",
    ),
    pack_args=("--compress", "--input", "{pnr_out}", "--bit", "{bitstream}"),
    constraints_suffix=".lpf",
    pnr_suffix=".config",
    bitstream_suffix=".bit",
    yosys_cells=(
        ("LUT4", "lut", 1),
        ("CCU2C", "lut", 2),          # a carry cell fills both LUTs of a slice half
        ("CCU2C", "carry", 1),
        ("TRELLIS_DPR16X4", "lutram", 1),
        ("TRELLIS_FF", "ff", 1),
        ("MULT18X18D", "dsp", 1),
        ("DP16KD", "bram", 1),
        ("EHXPLLL", "pll", 1),
        ("TRELLIS_IO", "io", 1),
    ),
    nextpnr_bels=_frozen({
        "TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "TRELLIS_RAMW": "lutram",
        "MULT18X18D": "dsp", "DP16KD": "bram", "EHXPLLL": "pll", "TRELLIS_IO": "io",
    }),
    resource_names=_frozen({
        "lut": "LUT4s", "ff": "flip-flops (TRELLIS_FF)", "dsp": "MULT18X18D multipliers",
        "bram": "DP16KD block RAMs", "pll": "EHXPLLL PLLs", "io": "I/O pins",
        "lutram": "distributed RAM blocks (TRELLIS_DPR16X4)", "carry": "CCU2C carry cells",
    }),
    pll_primitive="EHXPLLL",
)

ICE40 = Family(
    name="ice40",
    synth_commands=("synth_ice40 -dsp -top {top} -json {netlist}",),
    pnr_tool="nextpnr-ice40",
    pack_tool="icepack",
    pnr_args=(
        "{device_args}", "--package", "{package}",
        "--json", "{netlist}", "--pcf", "{constraints}", "--asc", "{pnr_out}",
        "--freq", "{freq}", "--report", "{report}", "--placer", "{placer}",
        "--timing-allow-fail", "--seed", "{seed}",
    ),
    pack_args=("{pnr_out}", "{bitstream}"),
    constraints_suffix=".pcf",
    pnr_suffix=".asc",
    bitstream_suffix=".bin",
    yosys_cells=(
        ("SB_LUT4", "lut", 1),
        ("SB_CARRY", "carry", 1),
        ("SB_DFF*", "ff", 1),
        ("SB_MAC16", "dsp", 1),
        ("SB_RAM40_4K*", "bram", 1),
        ("SB_SPRAM256KA", "spram", 1),
        ("SB_PLL40_*", "pll", 1),
        ("SB_IO*", "io", 1),
    ),
    nextpnr_bels=_frozen({
        "ICESTORM_LC": "lut", "ICESTORM_DSP": "dsp", "ICESTORM_RAM": "bram",
        "ICESTORM_SPRAM": "spram", "ICESTORM_PLL": "pll", "SB_IO": "io",
    }),
    resource_names=_frozen({
        "lut": "LUT4s (logic cells)", "ff": "flip-flops", "dsp": "SB_MAC16 DSPs",
        "bram": "SB_RAM40_4K block RAMs (4 kbit)", "spram": "SB_SPRAM256KA (256 kbit)",
        "pll": "SB_PLL40 PLLs", "io": "I/O pins", "carry": "SB_CARRY cells",
    }),
    pll_primitive="SB_PLL40_PAD / SB_PLL40_CORE",
)

_FAMILIES: dict[str, Family] = {"ecp5": ECP5, "ice40": ICE40}


# ---------------------------------------------------------------------------
# devices (numbers from the Lattice data sheets; checked against nextpnr's
# reported availability by tests/boards/test_bitstream.py)


def _ecp5(name: str, size: str, luts: int, dsp: int, bram: int, pll: int, io: int) -> Device:
    return Device(
        name=name, family=ECP5, nextpnr_device=(f"--{size}",), package="CABGA381", speed="6",
        resources=_frozen({"lut": luts, "ff": luts, "dsp": dsp, "bram": bram, "pll": pll,
                           "io": io}),
        bram_bits=18 * 1024,
    )


_DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        _ecp5("LFE5U-25F", "25k", luts=24288, dsp=28, bram=56, pll=2, io=197),
        _ecp5("LFE5U-45F", "45k", luts=43848, dsp=72, bram=108, pll=4, io=203),
        _ecp5("LFE5U-85F", "85k", luts=83640, dsp=156, bram=208, pll=4, io=205),
        Device(
            name="iCE40UP5K", family=ICE40, nextpnr_device=("--up5k",), package="sg48",
            speed=None,
            resources=_frozen({"lut": 5280, "ff": 5280, "dsp": 8, "bram": 30, "spram": 4,
                               "pll": 1, "io": 39}),
            bram_bits=4 * 1024, spram_bits=256 * 1024,
            notes="SPRAM cannot be initialised by the bitstream: weights there load at run time",
        ),
    )
}

# ---------------------------------------------------------------------------
# boards (pins as in the vendors' schematics and amaranth-boards)

_LVCMOS33 = _frozen({"IO_TYPE": "LVCMOS33"})


def _ulx3s(size: str) -> Board:
    dev = _DEVICES[f"LFE5U-{size}F"]
    return Board(
        name=f"ulx3s-{size}f",
        device=dev,
        clock_mhz=25.0,
        pins=_frozen({
            "clk": Pin("clk25", "G2", "i", attrs=_LVCMOS33),
            # FTDI FT231X: the FPGA transmits on L4 (ftdi_rxd), receives on M1 (ftdi_txd)
            "uart_tx": Pin("uart_tx", "L4", "o", attrs=_LVCMOS33),
            "uart_rx": Pin("uart_rx", "M1", "i",
                           attrs=_frozen({"IO_TYPE": "LVCMOS33", "PULLMODE": "UP"})),
            "led": Pin("led", "B2", "o", attrs=_frozen({"IO_TYPE": "LVCMOS33", "DRIVE": "4"})),
            # F1 ("fire 1") button: active high, pulled down
            "reset": Pin("button", "R1", "i",
                         attrs=_frozen({"IO_TYPE": "LVCMOS33", "PULLMODE": "DOWN"})),
        }),
        programmer_args=("-b", "ulx3s"),
        description=f"Radiona ULX3S with {dev.name}, 25 MHz oscillator, FT231X USB-serial",
        aliases=(dev.name.lower(), f"ecp5-{size}f"),
    )


_BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        _ulx3s("25"),
        _ulx3s("45"),
        _ulx3s("85"),
        Board(
            name="icebreaker",
            device=_DEVICES["iCE40UP5K"],
            clock_mhz=12.0,
            pins=_frozen({
                "clk": Pin("clk12", "35", "i"),
                # FT2232H channel B: the FPGA transmits on 9, receives on 6
                "uart_tx": Pin("uart_tx", "9", "o"),
                "uart_rx": Pin("uart_rx", "6", "i", attrs=_frozen({"pullup": "yes"})),
                "led": Pin("led", "37", "o", invert=True),     # green LED, active low
                "reset": Pin("button", "10", "i", invert=True,  # user button, active low
                             attrs=_frozen({"pullup": "yes"})),
            }),
            programmer_args=("-b", "ice40_generic"),
            description="1BitSquared iCEBreaker: iCE40UP5K-SG48, 12 MHz oscillator, "
                        "FT2232H USB-serial",
            aliases=("ice40up5k", "up5k"),
        ),
    )
}


def _lookup_table() -> dict[str, Board]:
    table = {name: b for name, b in _BOARDS.items()}
    for b in _BOARDS.values():
        for alias in b.aliases:
            table[alias] = b
    return table


def all_boards() -> dict[str, Board]:
    """Every known board by name (aliases not included)."""
    return dict(_BOARDS)


def all_devices() -> dict[str, Device]:
    """Every known device by name."""
    return dict(_DEVICES)


def get_board(name: str | Board) -> Board:
    """The board called ``name`` (case-insensitive; a device name such as
    ``LFE5U-85F`` or ``up5k`` gives its board)."""
    if isinstance(name, Board):
        return name
    table = _lookup_table()
    board = table.get(str(name).strip().lower())
    if board is None:
        aliases = [a for b in _BOARDS.values() for a in b.aliases]
        raise unknown_name("board (or device)", str(name), [*_BOARDS, *aliases])
    return board


def get_device(name: str | Device) -> Device:
    """The device called ``name`` (case-insensitive, e.g. ``LFE5U-25F``, ``iCE40UP5K``)."""
    if isinstance(name, Device):
        return name
    for dev_name, dev in _DEVICES.items():
        if dev_name.lower() == str(name).strip().lower():
            return dev
    raise unknown_name("device", str(name), _DEVICES)


def get_family(name: str) -> Family:
    """The family called ``name`` (``ecp5`` or ``ice40``)."""
    try:
        return _FAMILIES[name.lower()]
    except KeyError:
        raise unknown_name("FPGA family", name, _FAMILIES) from None
