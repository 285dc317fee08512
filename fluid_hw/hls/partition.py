"""Host / accelerator partition of a quantised inference program.

A quantised program (``fluid_hw.passes.quantize``, docs/fixed_point.md) reads::

    feed -> [float host ops] -> quantize -> { hardware chain } -> dequantize
         -> [trailing host ops: softmax, arg_max, ...] -> fetch

The **hardware chain** is one linear run of ops, each reading the previous one's
output: ops that begin a stage of one of the stage kinds (:mod:`.kinds`:
``quantized_fc`` / ``quantized_conv2d`` + ``requantize``, ``quantized_pool2d``,
``quantized_table``; an integer ``relu`` is folded into a clamp), and the layout
ops ``reshape2`` / ``flatten2`` / ``transpose2`` between them.  Everything
before its first layer is the **pre** host program (quantising the float input),
everything after its last stage the **post** host program (dequantising, softmax,
arg_max...), both run by the CPU executor.  An op without a hardware lowering
*between* hardware stages is an error that names it (general CPU/FPGA
partitioning is a later issue).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LoweringError
from ..ir import dtypes
from ..ir.program import Operator, Program
from ..ir.prune import prune
from ..ir.registry import op_has_category

__all__ = ["LoweringError", "Partition", "partition", "is_layout", "stream_inputs",
           "main_input", "main_output", "lowerable"]

def is_layout(op_type: str) -> bool:
    """An op that only moves the elements of an example (the ``layout`` category of
    the op registry): no data moves in hardware, the lowering follows the order."""
    return op_has_category(op_type, "layout")
_IO_OPS = ("feed", "fetch")
#: recurrent cells (hls.kinds.recurrent): Input in, Hidden out
_RECURRENCES = ("quantized_lstm", "quantized_gru", "quantized_rnn")


def main_input(op: Operator) -> str:
    """The activation an op of the chain reads."""
    slot = "Input" if op.type in ("quantized_conv2d", *_RECURRENCES) else "X"
    return op.input(slot)[0]


def stream_inputs(op: Operator) -> list[str]:
    """The activations an op of the region reads (a join reads two, a concat all its
    inputs)."""
    if op.type == "quantized_add":
        return [op.input("X")[0], op.input("Y")[0]]
    if op.type == "quantized_concat":
        return list(op.input("X"))
    return [main_input(op)]


def main_output(op: Operator) -> str:
    """The activation an op of the chain writes."""
    slot = "Output" if op.type == "quantized_conv2d" else \
        "Hidden" if op.type in _RECURRENCES else "Out"
    return op.output(slot)[0]


def _is_int(program: Program, name: str) -> bool:
    gb = program.global_block()
    return gb.has_var(name) and dtypes.is_integer(gb.var(name).dtype)


def starts_stage(program: Program, op: Operator) -> bool:
    """Whether ``op`` begins a hardware stage of some kind (:mod:`.kinds`)."""
    from .kinds import kind_for_op

    return kind_for_op(program, op) is not None


def lowerable(program: Program, op: Operator) -> bool:
    """Whether ``op`` has a hardware lowering (as part of a stage or as layout)."""
    t = op.type
    if t in ("requantize", "multi_threshold") or starts_stage(program, op):
        return True
    if t == "relu" or is_layout(t):
        return _is_int(program, op.input("X")[0])
    return False


def _describe(op: Operator) -> str:
    what = op.type
    if op.type == "quantized_pool2d":
        what = f"quantized_pool2d ({op.attr('pooling_type')})"
    elif op.type == "quantized_conv2d" and op.attr("groups") != 1:
        what = (f"quantized_conv2d (groups={op.attr('groups')}: only groups=1 and depthwise "
                "convolutions, one filter per channel, have a hardware lowering)")
    return f"{what} (-> {', '.join(op.output_arg_names) or 'nothing'})"


@dataclass
class Partition:
    """The three parts of a quantised program.  ``pre``/``hw``/``post``: op indices of
    its global block (feed and fetch ops excluded); ``hw_input``: the int8 value the
    accelerator streams in (computed by ``pre``); ``hw_output``: the value it streams
    out (read by ``post``)."""

    program: Program
    feeds: list[str]
    fetches: list[str]
    pre: list[int]
    hw: list[int]
    post: list[int]
    hw_input: str
    hw_output: str
    host_programs: dict[str, Program] = field(default_factory=dict)

    @property
    def pre_program(self) -> Program:
        return self.host_programs["pre"]

    @property
    def post_program(self) -> Program:
        return self.host_programs["post"]

    def describe(self) -> dict[str, Any]:
        ops = self.program.global_block().ops
        notes = host_notes(self.program, [ops[i] for i in self.pre + self.post])
        return {"feeds": self.feeds, "fetches": self.fetches,
                "hw_input": self.hw_input, "hw_output": self.hw_output,
                "pre": [ops[i].type for i in self.pre], "hw": [ops[i].type for i in self.hw],
                "post": [ops[i].type for i in self.post], **({"notes": notes} if notes else {})}


def host_notes(program: Program, ops: Sequence[Operator]) -> list[str]:
    """Why ops of a type some stage kind lowers run on the host (a ``nearest_interp`` by
    a fractional factor): one line each, for the compile listing."""
    from .kinds import host_reason

    out = []
    for op in ops:
        why = host_reason(program, op)
        if why:
            out.append(f"{_describe(op)} runs on the host: {why}")
    return out


def _host_segment(program: Program) -> dict[str, object]:
    ops = list(program.global_block().ops)
    notes = host_notes(program, ops)
    return {"where": "host", "ops": [op.type for op in ops],
            **({"notes": notes} if notes else {})}


def _feeds_fetches(program: Program, feeds: Sequence[str] | None,
                   fetches: Sequence[str] | None) -> tuple[list[str], list[str]]:
    if feeds is None:
        feeds = program.get_feed_target_names()
    if fetches is None:
        fetches = program.get_fetch_target_names()
    if not feeds or not fetches:
        raise LoweringError("the program has no feed or fetch ops: save it with "
                            "io.save_inference_model, or name its inputs and outputs "
                            "(feed_names=..., fetch_names=...)")
    return list(feeds), list(fetches)


def partition(program: Program, feed_names: Sequence[str] | None = None,
              fetch_names: Sequence[str] | None = None) -> Partition:
    """Split a quantised inference program (see the module docstring)."""
    feeds, fetches = _feeds_fetches(program, feed_names, fetch_names)
    gb = program.global_block()
    ops = list(gb.ops)
    body = [i for i, op in enumerate(ops) if op.type not in _IO_OPS]
    layers = [i for i in body if starts_stage(program, ops[i])]
    if not layers:
        raise _nothing_to_lower(ops, body)
    first = layers[0]
    hw_input = main_input(ops[first])
    if not _is_int(program, hw_input):
        raise LoweringError(f"{_describe(ops[first])} reads {hw_input!r}, which is not an "
                            "integer tensor; the program is not quantised consistently")
    chain = _grow_region(program, ops, body, first)
    hw_output = main_output(ops[chain[-1]])
    hw_set = set(chain)
    rest = [i for i in body if i > chain[-1] or (i < first)]
    pre_set = {i for i in body if i < first}
    post = [i for i in body if i > chain[-1] and i not in hw_set]
    stray = [i for i in body if first < i < chain[-1] and i not in hw_set]
    late_layers = [i for i in post if starts_stage(program, ops[i])]
    if late_layers or stray:
        blocking = [i for i in post if not lowerable(program, ops[i]) and
                    (not late_layers or i < late_layers[-1])] + stray
        if not blocking and late_layers:
            blocking = [late_layers[0]]
        names = "; ".join(_describe(ops[i]) for i in blocking)
        nxt = ops[late_layers[0]] if late_layers else None
        raise LoweringError(
            f"op(s) without an FPGA lowering sit in the middle of the network: {names}"
            + (f", and the hardware stage {_describe(nxt)} follows" if nxt is not None
               else "")
            + ". The accelerator is one chain of hardware stages (hls.kinds: fc, "
            "convolution, depthwise convolution, max / average pooling, table activations) "
            "with reshape2 / flatten2 / transpose2 between them; only ops before the first "
            "stage and after the last one run on the host. `fluid-hw compile` cuts such a "
            "model into accelerator regions with host segments between them "
            "(hls.partition.segment); lower() takes a program of one region")
    _check_flows_out(ops, chain, hw_output)
    # values inside the chain must not be read anywhere else
    inner = {main_output(ops[i]) for i in chain} - {hw_output}
    for i in rest:
        hit = inner & set(ops[i].input_arg_names)
        if hit:
            raise LoweringError(
                f"{_describe(ops[i])} reads {sorted(hit)[0]!r}, an intermediate value of the "
                "accelerator; only the last stage's output leaves the hardware. Fetch the "
                "model's output instead, or stop the model at that value")
    hit = inner & set(fetches)
    if hit:
        raise LoweringError(f"the model fetches {sorted(hit)[0]!r}, an intermediate value of "
                            "the accelerator; only the last stage's output leaves the hardware")
    part = Partition(program, feeds, fetches, sorted(pre_set), chain, post, hw_input,
                     hw_output)
    part.host_programs = {"pre": _host_program(program, feeds, [hw_input], pre_set, "pre"),
                          "post": _host_program(program, [hw_output, *feeds], fetches,
                                                set(post), "post")}
    return part


def _host_program(program: Program, feeds: list[str], targets: list[str], allowed: set[int],
                  what: str) -> Program:
    """The ops computing ``targets`` from ``feeds``, which must all be in ``allowed``."""
    gb = program.global_block()
    stripped = program.clone()
    sb = stripped.global_block()
    for i in range(len(sb.ops) - 1, -1, -1):
        if sb.ops[i].type in _IO_OPS:
            sb._remove_op(i)
    host = prune(stripped, feeds, targets)
    kept = {(op.type, tuple(op.output_arg_names)) for op in host.global_block().ops}
    want = {(gb.ops[i].type, tuple(gb.ops[i].output_arg_names)) for i in allowed}
    extra = kept - want
    if extra:
        t, outs = sorted(extra)[0]
        raise LoweringError(f"the {what} host program would need {t} (-> {', '.join(outs)}), "
                            "which is not on the host side of the accelerator")
    return host


# -- several accelerator regions, host segments between them -----------------------------

@dataclass
class Region:
    """One accelerator region of a program: ``ops`` (indices of the global block, in
    program order), the int8 value streamed in and the one streamed out."""

    ops: list[int]
    hw_input: str
    hw_output: str


@dataclass
class Segmentation:
    """A quantised program cut into accelerator regions and the host programs around
    them: ``host[k]`` computes region ``k``'s input from the model's feeds and the
    outputs of regions ``0..k-1``; ``host[-1]`` computes the fetches.  One region and
    host programs before and after it is the ordinary :class:`Partition`."""

    program: Program
    feeds: list[str]
    fetches: list[str]
    regions: list[Region]
    host: list[Program]

    def sub_program(self, k: int) -> Program:
        """Region ``k`` alone: its ops, reading ``hw_input`` and computing
        ``hw_output`` (what a single-region build of it compiles)."""
        r = self.regions[k]
        keep = set(r.ops)
        sub = self.program.clone()
        sb = sub.global_block()
        for i in range(len(sb.ops) - 1, -1, -1):
            if i not in keep:
                sb._remove_op(i)
        return prune(sub, [r.hw_input], [r.hw_output])

    def describe(self) -> dict[str, Any]:
        """Which ops run where, in order."""
        ops = self.program.global_block().ops
        segs: list[dict[str, object]] = []
        for k, r in enumerate(self.regions):
            segs.append(_host_segment(self.host[k]))
            segs.append({"where": f"fpga region {k}", "in": r.hw_input, "out": r.hw_output,
                         "ops": [ops[i].type for i in r.ops]})
        segs.append(_host_segment(self.host[-1]))
        return {"feeds": self.feeds, "fetches": self.fetches, "segments": segs}


def _nothing_to_lower(ops: list[Operator], body: list[int]) -> LoweringError:
    kinds = sorted({ops[i].type for i in body})
    return LoweringError(
        "the program has no op that begins a hardware stage (quantized_fc, "
        "quantized_conv2d, quantized_pool2d, quantized_table, quantized_add), so there is "
        f"nothing for the accelerator (its ops: {', '.join(kinds)}). Compile a float model "
        "with calibration data (fluid-hw compile MODEL --calibration X.npy) to quantise it")


def _check_flows_out(ops: list[Operator], region: list[int], output: str) -> None:
    """Every value a region computes is read inside it or is its one output stream."""
    read = {v for i in region for v in stream_inputs(ops[i])}
    dead = [i for i in region if main_output(ops[i]) not in read | {output}]
    if dead:
        raise LoweringError(
            f"{_describe(ops[dead[0]])} computes a value inside the accelerator that no "
            "hardware stage reads and that is not its output: the accelerator has one "
            "output stream. Fetch only the model's output, or keep that branch on the CPU")


def _grow_region(program: Program, ops: list[Operator], body: list[int], first: int
                 ) -> list[int]:
    """The ops from ``first`` on, in program order, each lowerable and reading only the
    region's input and values the region computes (trailing layout left to the host)."""
    chain: list[int] = []
    avail = {main_input(ops[first])}
    for i in body[body.index(first):]:
        op = ops[i]
        if not (lowerable(program, op) and all(v in avail for v in stream_inputs(op))):
            break
        chain.append(i)
        avail.add(main_output(op))
    while chain and is_layout(ops[chain[-1]].type):
        chain.pop()
    return chain


def segment(program: Program, feed_names: Sequence[str] | None = None,
            fetch_names: Sequence[str] | None = None) -> Segmentation:
    """Cut a quantised inference program into accelerator regions wherever ops without a
    hardware lowering sit (the quantisation pass puts a dequantize before and a
    quantize after such an op, so every region streams int8 in and out): every maximal
    run of lowerable ops from a stage onwards is a region, everything else runs on the
    host.  A region must have one output (one stream out)."""
    feeds, fetches = _feeds_fetches(program, feed_names, fetch_names)
    gb = program.global_block()
    ops = list(gb.ops)
    body = [i for i, op in enumerate(ops) if op.type not in _IO_OPS]
    regions: list[Region] = []
    in_region: set[int] = set()
    for i in body:
        if i in in_region or (regions and i < regions[-1].ops[-1]) or \
                not starts_stage(program, ops[i]):
            continue
        x = main_input(ops[i])
        if not _is_int(program, x):
            raise LoweringError(f"{_describe(ops[i])} reads {x!r}, which is not an integer "
                                "tensor; the program is not quantised consistently")
        chain = _grow_region(program, ops, body, i)
        in_region |= set(chain)
        regions.append(Region(chain, x, ""))
    if not regions:
        raise _nothing_to_lower(ops, body)
    # each region's output: the one value it computes that something else reads
    for r in regions:
        own = set(r.ops)
        made = {main_output(ops[i]): i for i in r.ops}
        outside = {v for i in body if i not in own for v in ops[i].input_arg_names}
        outs = [v for v in made if v in outside or v in fetches]
        if len(outs) != 1:
            what = ", ".join(repr(v) for v in outs)
            raise LoweringError(
                f"the accelerator region {_describe(ops[r.ops[0]])} ... "
                f"{_describe(ops[r.ops[-1]])} has {len(outs)} values read outside it "
                f"({what}); a region streams one value out. Fetch only the model's outputs, "
                "or keep the ops that read the others on the CPU (QuantConfig(exclude=...))")
        r.hw_output = outs[0]
        _check_flows_out(ops, r.ops, r.hw_output)
    host_ops = {i for i in body if i not in in_region}
    host: list[Program] = []
    for k in range(len(regions) + 1):
        known = [*feeds, *(r.hw_output for r in regions[:k])]
        targets = [regions[k].hw_input] if k < len(regions) else fetches
        host.append(_host_program(program, known, targets, host_ops, f"host segment {k}"))
    return Segmentation(program, feeds, fetches, regions, host)
