"""The accelerator's AXI4-Lite register map, as data.

One list of :class:`Register` drives the hardware decoder (:mod:`.axil`), the
generated ``registers.md`` and ``registers.h`` (:func:`emit_markdown`,
:func:`emit_c_header`) and every host-side access (by name, never by number).

Rules of the bus (also written into ``registers.md``): 32-bit registers at
word-aligned byte offsets (address bits 1..0 are ignored); write address and data
may come in either order; every access is answered -- OKAY, or SLVERR for an
unmapped address, a write to a read-only register, a write to a write-only
register with ``wstrb != 0b1111``, or a PARAM_DATA write whose PARAM_ADDR is in no
parameter segment.  Write-only registers read as 0.

:data:`VERSION` is (major, minor): the major number changes when a register moves or
changes meaning (an old host would misread the device), the minor one when something
is added or a behaviour is tightened that an old host still works with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Field", "Register", "register_map", "ACCEL_ID", "VERSION", "emit_markdown",
           "emit_c_header", "design_constants", "OKAY", "SLVERR"]

ACCEL_ID = 0x464C4857  # "FLHW"
VERSION = (1, 1)  # 1.1: STATUS.DROPPING, SLVERR for PARAM_DATA off a segment
OKAY, SLVERR = 0, 2


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    doc: str


@dataclass(frozen=True)
class Register:
    """``access``: ``ro`` (value from the design), ``rw`` (stored by the design, written
    through the bus), ``wo`` (a write is an event; reads 0)."""

    name: str
    offset: int
    access: str
    doc: str
    reset: int = 0
    fields: tuple[Field, ...] = field(default=())

    @property
    def readable(self) -> bool:
        return self.access in ("ro", "rw")

    @property
    def writable(self) -> bool:
        return self.access in ("rw", "wo")


def _fmt(doc: str) -> tuple[Field, ...]:
    return (Field("LEN", 0, 16, f"{doc} vector length in elements"),
            Field("LANES", 16, 8, "elements per stream beat"),
            Field("BITS", 24, 8, "bits per element (two's complement)"))


_COMMON: tuple[Register, ...] = (
    Register("ID", 0x00, "ro", 'Identification, 0x464C4857 ("FLHW").', ACCEL_ID),
    Register("VERSION", 0x04, "ro", "Register-map version.",
             VERSION[0] << 16 | VERSION[1],
             (Field("MINOR", 0, 16, "minor version"), Field("MAJOR", 16, 16, "major version"))),
    Register("DESIGN_HASH", 0x08, "ro",
             "First 32 bits of the design hash (structure, and constant weights), to check "
             "that the host talks to the design it compiled."),
    Register("CONFIG", 0x0C, "ro", "Build-time configuration.", 0,
             (Field("RUNTIME_PARAMS", 0, 1, "1: weights are loaded through PARAM_*"),
              Field("STAGES", 8, 8, "number of hardware stages"))),
    Register("CONTROL", 0x10, "rw", "Control.", 1,
             (Field("ENABLE", 0, 1, "accept input (s_axis_tready is held low while 0); "
                                   "resets to 1"),
              Field("SOFT_RESET", 1, 1, "write 1: discard every item in the datapath, clear "
                                        "the counters and STATUS flags (weights are kept; "
                                        "packets stay whole, see below); reads 0"),
              Field("CLEAR_COUNTERS", 2, 1, "write 1: clear the counters and STATUS.DONE "
                                            "(items in flight and TLAST_ERROR are kept); "
                                            "reads 0"))),
    Register("STATUS", 0x14, "ro", "Status.", 0x4,
             (Field("BUSY", 0, 1, "an input packet has been (partly) accepted whose output "
                                  "packet has not been fully sent, or SOFT_RESET is still "
                                  "completing an output packet"),
              Field("DONE", 1, 1, "not busy, and an output packet completed since the last "
                                  "reset, SOFT_RESET or CLEAR_COUNTERS"),
              Field("ENABLED", 2, 1, "CONTROL.ENABLE"),
              Field("TLAST_ERROR", 3, 1, "sticky: s_axis_tlast was seen off, or missing at, "
                                         "the last beat of an input packet; cleared by "
                                         "SOFT_RESET"),
              Field("DROPPING", 4, 1, "the rest of an input packet cut by SOFT_RESET is "
                                      "being taken and discarded"))),
    Register("IN_FORMAT", 0x18, "ro", "Input stream format.", 0, _fmt("input")),
    Register("OUT_FORMAT", 0x1C, "ro", "Output stream format.", 0, _fmt("output")),
    Register("CYCLES_LO", 0x20, "ro",
             "Clock cycles since reset or clear, low word; reading it latches CYCLES_HI."),
    Register("CYCLES_HI", 0x24, "ro", "High word of the cycle count latched by CYCLES_LO."),
    Register("BUSY_CYCLES", 0x28, "ro", "Cycles with STATUS.BUSY set."),
    Register("INFERENCES", 0x2C, "ro",
             "Output packets completed (beats with m_axis_tlast taken), not counting those "
             "SOFT_RESET completed."),
    Register("INPUTS", 0x30, "ro", "Input packets accepted (their last beat)."),
    Register("IN_STALL_CYCLES", 0x34, "ro",
             "Cycles with s_axis_tvalid high and s_axis_tready low (the accelerator holds "
             "the source back)."),
    Register("IN_STARVE_CYCLES", 0x38, "ro",
             "Cycles with STATUS.BUSY and s_axis_tready high but s_axis_tvalid low (the "
             "accelerator waits for input)."),
    Register("OUT_STALL_CYCLES", 0x3C, "ro",
             "Cycles with m_axis_tvalid high and m_axis_tready low (the sink holds the "
             "accelerator back)."),
    Register("PARAM_WORDS", 0x40, "ro",
             "Size of the runtime parameter address space in 32-bit words (0: constant "
             "weights only)."),
)

_PARAM: tuple[Register, ...] = (
    Register("PARAM_ADDR", 0x44, "rw",
             "Word address of the next PARAM_DATA write; increments after each accepted "
             "one."),
    Register("PARAM_DATA", 0x48, "wo",
             "Runtime parameter load window: writes the word at PARAM_ADDR. SLVERR, and "
             "nothing written (PARAM_ADDR unchanged), where PARAM_ADDR is in no segment "
             "(a gap between segments, or at or beyond PARAM_WORDS). Load only while "
             "STATUS.BUSY is clear."),
)


def register_map(runtime_params: bool) -> tuple[Register, ...]:
    """Registers of a design; the PARAM_ADDR/PARAM_DATA window exists only in designs
    with runtime parameters (elsewhere those addresses answer SLVERR)."""
    return _COMMON + (_PARAM if runtime_params else ())


def design_constants(info: dict[str, Any]) -> dict[str, int]:
    """Values of the registers that are constant in a given design (``info`` is
    ``AcceleratorTop.describe()``)."""
    return {
        "ID": ACCEL_ID,
        "VERSION": VERSION[0] << 16 | VERSION[1],
        "DESIGN_HASH": int(info["design_hash"][:8], 16),
        "CONFIG": int(bool(info["runtime_params"])) | len(info["stages"]) << 8,
        "IN_FORMAT": info["in_len"] | info["in_lanes"] << 16 | info["in_bits"] << 24,
        "OUT_FORMAT": info["out_len"] | info["out_lanes"] << 16 | info["out_bits"] << 24,
        "PARAM_WORDS": info["param_words"],
    }


#: registers.md's description of each kind of parameter segment's entries
_ENTRY_FORMATS = {
    "weights": "Weight entries: `simd` int8 lanes, lane 0 in the lowest byte of the first "
               "word. ",
    "requant": "Requantisation entries: word 0 bias (int32), word 1 multiplier "
               "(bits 15..0) | shift << 16 (an average pool: one entry, bias 0, for every "
               "channel). ",
    "table": "Table entries: one word each, the int8 output (bits 7..0) for the input "
             "whose unsigned byte is the entry's index (entry 0: input 0, entry 128: "
             "input -128); every lane's copy of the table takes the write. ",
    "join": "Join entries: word 0 `ma` (bits 14..0) | `mb` << 16, word 1 `na` "
            "(bits 5..0) | `nb` << 8: the multipliers and shifts of inputs a and b. ",
    "concat": "Concat entries: one word each, `m` (bits 14..0) | `n` << 16 (bits 21..16): "
              "entry `p` the multiplier and shift of input `p`. ",
}


def _sequence_streams(info: dict[str, Any]) -> list[str]:
    """registers.md's packet rules of a design whose first stage is recurrent
    (``info["sequence"]``; none otherwise)."""
    mode = info.get("sequence")
    if mode is None:
        return []
    step, lanes = info["in_len"], info["in_lanes"]
    out = ("one output packet per sequence: the output above, computed from the "
           "sequence's last step" if mode == "last" else
           f"one output beat per time step ({info['out_len']} elements), `m_axis_tlast` "
           "on the sequence's last step: an output packet is the whole output sequence")
    return ["", "### Sequences", "",
            "This design's first stage is recurrent: *one input item is a sequence*. An "
            f"input packet is T >= 1 time steps of {step} elements ({step // lanes} "
            f"beat(s) per step), T * {step} elements back to back with no padding, "
            "`s_axis_tlast` on the last beat of the sequence's last step (its end: the "
            "state resets for the next packet). The `in_len` above is one step. "
            "`s_axis_tlast` on a beat inside a step sets STATUS.TLAST_ERROR (the data "
            "still flows). Packets are sequences also for SOFT_RESET (a half-accepted "
            f"sequence is dropped up to its TLAST), INPUTS and INFERENCES. Output: {out}; "
            "outputs leave in input order."]


def emit_markdown(regs: Sequence[Register], info: dict[str, Any]) -> str:
    """``registers.md``: the register table, fields, bus rules, stream formats and, for
    runtime parameters, the load layout.  ``info`` is ``AcceleratorTop.describe()``."""
    name = info.get("name", "accelerator")
    runtime = bool(info.get("param_segments"))
    lines = [f"# {name}: register map", "",
             f"AXI4-Lite, {info.get('addr_width', 12)}-bit byte addresses, 32-bit data. "
             f"Design hash `{info.get('design_hash', '')}`.", "",
             "Bus rules: word-aligned offsets (address bits 1..0 ignored); AW and W may "
             "arrive in either order; every access gets a response: OKAY, or SLVERR for "
             "an unmapped address, a write to a read-only register, "
             + ("a partial (`wstrb != 0xF`) write to a write-only register, or a PARAM_DATA "
                "write whose PARAM_ADDR is in no parameter segment" if runtime else
                "or a partial (`wstrb != 0xF`) write to a write-only register")
             + "; a write answered SLVERR changes nothing. Write-only registers read as 0. "
             "64-bit counters: read `_LO` first, it latches `_HI`.", "",
             "Reset: `rst` is active high and synchronous (sampled on the rising edge of "
             "`clk`; hold it for at least one cycle). It puts every register at the "
             "reset value below, empties the datapath and drops the AXI4-Lite and "
             "AXI4-Stream handshakes"
             + ("; the weight memories keep their contents (runtime weights are loaded "
                "once after configuration, not after every reset)." if runtime else "."),
             "",
             "| offset | name | access | reset / value | description |",
             "| --- | --- | --- | --- | --- |"]
    const = design_constants(info)
    for r in regs:
        value = const.get(r.name, r.reset)
        lines.append(f"| 0x{r.offset:03X} | {r.name} | {r.access} | 0x{value:X} | {r.doc} |")
    for r in regs:
        if r.fields:
            lines += ["", f"## {r.name} fields", "", "| bits | field | description |",
                      "| --- | --- | --- |"]
            for f in r.fields:
                bits = f"{f.lsb}" if f.width == 1 else f"{f.lsb + f.width - 1}:{f.lsb}"
                lines.append(f"| {bits} | {f.name} | {f.doc} |")
    in_beats = info["in_len"] // info["in_lanes"]
    out_beats = info["out_len"] // info["out_lanes"]
    lines += ["", "## Streams and packets", "",
              "A *packet* is one item -- an input vector or an image (later a sequence) -- "
              "with TLAST on its last beat; each input packet gives one output packet, in "
              "order.",
              "",
              f"* `s_axis`: {info['in_lanes']} int{info['in_bits']} element(s) per beat "
              f"(element 0 in bits 7..0), {info['in_len']} elements ({in_beats} beats) per "
              "input packet. The accelerator frames input packets by counting beats; "
              "`s_axis_tlast` must be on each packet's last beat and is checked (a "
              "mismatch sets STATUS.TLAST_ERROR; the data still flows).",
              f"* `m_axis`: {info['out_lanes']} int{info['out_bits']} element(s) per beat, "
              f"{info['out_len']} elements ({out_beats} beats) per output packet, "
              "`m_axis_tlast` on its last beat. Once `m_axis_tvalid` is high it stays high, "
              "with the same data, until the beat is taken -- also across SOFT_RESET.",
              "* Image tensors travel in HWC order (channel fastest).",
              *_sequence_streams(info),
              "", "## SOFT_RESET", "",
              "CONTROL.SOFT_RESET discards every item inside the accelerator and clears the "
              "counters and STATUS flags, keeping packets whole on both streams:",
              "",
              "* an output packet partly sent (or a beat waiting on `m_axis`) is completed: "
              "the beats already made are sent, the rest of the packet is zero beats, "
              "`m_axis_tlast` on its last; STATUS.BUSY stays set until all of it has been "
              "taken, and it is not counted in INFERENCES. Outputs of items sent after "
              "the reset wait behind it.",
              "* an input packet partly accepted is dropped whole: its remaining beats are "
              "taken and discarded (STATUS.DROPPING meanwhile), so the next packet starts "
              "in step. A host that will not finish the cut packet writes SOFT_RESET again "
              "while DROPPING is set: the drop ends and the next beat starts a packet.",
              "",
              "## What clears what", "",
              "| | rst | SOFT_RESET | CLEAR_COUNTERS |",
              "| --- | --- | --- | --- |",
              "| items in the datapath, BUSY | discarded | discarded (packets completed as "
              "above) | kept |",
              "| counters (CYCLES .. OUT_STALL_CYCLES), DONE | 0 | 0 | 0 |",
              "| STATUS.TLAST_ERROR | 0 | 0 | kept |",
              "| CONTROL.ENABLE | 1 | as written | as written |",
              *(["| PARAM_ADDR | 0 | kept | kept |", "| weight memories | kept | kept | kept |"]
                if runtime else []),
              "| AXI4-Lite transaction under way | dropped | answered | answered |"]
    segs = info.get("param_segments", [])
    if segs:
        kinds = {s["kind"] for s in segs}
        lines += ["", "## Runtime parameter layout", "",
                  "Write PARAM_ADDR, then the words of a segment to PARAM_DATA in order. "
                  + "".join(text for kind, text in _ENTRY_FORMATS.items() if kind in kinds)
                  + "A write past a segment's "
                  "words, into the gap before the next segment, or at or beyond "
                  "PARAM_WORDS answers SLVERR and writes nothing.", "",
                  "The build's `weights.npz` holds this image: a NumPy `.npz` (no pickled "
                  "objects) of `bases` (int64 [S], each segment's first word address), "
                  "`lengths` (int64 [S], its words) and `words` (uint32, the segments' "
                  "words one after the other); segment i is `words[sum(lengths[:i]):]"
                  "[:lengths[i]]`, written from PARAM_ADDR = `bases[i]`.", "",
                  "| word address | stage | memory | PE | entries | words/entry |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for s in segs:
            lines.append(f"| 0x{s['base']:X} | {s['stage']} | {s['kind']} | {s['pe']} | "
                         f"{s['depth']} | {s['words_per_entry']} |")
    return "\n".join(lines) + "\n"


def emit_c_header(regs: Sequence[Register], info: dict[str, Any]) -> str:
    """``registers.h``: offsets (``<NAME>_<REG>``), reset values, field shifts and masks,
    and the design's stream formats (``<NAME>_CFG_*``)."""
    p = "".join(c if c.isalnum() else "_" for c in info.get("name", "accel")).upper()
    guard = f"{p}_REGISTERS_H"
    out = [f"/* Generated by fluid-hw from the register map of {info.get('name')}. */",
           f"#ifndef {guard}", f"#define {guard}", "", "#include <stdint.h>", "",
           "/* design constants */",
           f"#define {p}_CFG_DESIGN_HASH \"{info.get('design_hash', '')}\"",
           f"#define {p}_CFG_IN_LEN {info['in_len']}u",
           f"#define {p}_CFG_IN_LANES {info['in_lanes']}u",
           f"#define {p}_CFG_IN_BITS {info['in_bits']}u",
           f"#define {p}_CFG_OUT_LEN {info['out_len']}u",
           f"#define {p}_CFG_OUT_LANES {info['out_lanes']}u",
           f"#define {p}_CFG_OUT_BITS {info['out_bits']}u",
           f"#define {p}_CFG_PARAM_WORDS {info.get('param_words', 0)}u", "",
           "/* registers: byte offsets, reset values, field shifts and masks */"]
    const = design_constants(info)
    for r in regs:
        out.append(f"#define {p}_{r.name} 0x{r.offset:03X}u  /* {r.access} */")
        out.append(f"#define {p}_{r.name}_RESET 0x{const.get(r.name, r.reset):08X}u")
        for f in r.fields:
            mask = ((1 << f.width) - 1) << f.lsb
            out.append(f"#define {p}_{r.name}_{f.name}_SHIFT {f.lsb}u")
            out.append(f"#define {p}_{r.name}_{f.name}_MASK 0x{mask:08X}u")
    out += ["", f"#endif /* {guard} */", ""]
    return "\n".join(out)
