"""Quantisation-aware training: insert fake-quantise ops into a training program.

    qat = quant_aware(main, startup, QATConfig(Precision(w=2, a=2)))
    fluid_hw.optimizer.Adam(1e-3).minimize(loss)      # after quant_aware
    ...train main...
    int_prog = freeze(qat.test_program, scope, feed_names=["pixels"],
                      fetch_names=[prob.name])       # fluid_hw.passes.qat_freeze

Paddle's ``QuantizationTransformPass`` is the model; docs/qat.md is the guide.  Every
*layer* -- ``mul`` with a persistable weight (what ``layers.fc`` emits), ``conv2d``,
``depthwise_conv2d`` -- with the ops after it that fold into its integer form (a bias
``elementwise_add`` with a persistable 1-D ``Y``, a ``batch_norm``, then a ``relu``)
gets:

* its weight through ``fake_channel_wise_quantize_dequantize_abs_max`` (per output
  channel: ``quant_axis`` 1 for ``mul``, 0 for convolutions) or
  ``fake_quantize_dequantize_abs_max`` (``per_channel=False``), ``w`` bits;
* its output (after the folded relu) through
  ``fake_quantize_dequantize_moving_average_abs_max``, ``a`` bits -- the value the
  integer program's ``requantize`` will produce;
* a ``batch_norm`` right after the layer (before the relu) folds into it: the output
  quantiser sits after the batch norm and relu, and ``freeze`` folds the batch norm's
  running statistics into the integer layer;
* its input, when no layer produced it (the network input), through the same
  moving-average op at ``QATConfig.input_bits`` (8) bits, signed: the frozen
  program's ``quantize``.  Max pooling and layout ops (reshape2, flatten2,
  transpose2) between two layers keep the first one's grid: no quantiser there.
* its bias through ``fake_quantize_dequantize_bias`` (the input's and the weight's
  scales): the float program adds the bias the integer program will (on half steps
  before a bipolar output, so that the float sum never sits on the sign's boundary).

Precision per layer (``fluid_hw.passes.precision.Precision``): ``overrides[name]``
(name = the weight's prefix, ``fc_0`` for ``fc_0.w_0``), else ``precision``; with
``keep_first_last`` (default), a layer not named in ``overrides`` that is the first
(weights) or the last (weights and output) gets 8 bits there, as FINN does.  Output
activation kinds: ``a_type``, except that a signed activation below 8 bits after a
relu becomes unsigned (a relu's output has no negative half to spend codes on), and
a bipolar activation *replaces* the relu before it (``sign`` of a relu's output is
always +1; the quantiser reads the relu's input, as a binarised network's sign
activation does).

An ``lstm`` / ``gru`` (``dynamic_lstm`` / ``dynamic_gru``) reading its input
projection's output (an fc without activation) gets what the integer cell quantises
(docs/qat.md, "Recurrent layers"): the projection's input (an embedding's table when
the projection reads an embedding) and weights (per column, 8 bits) but no output
quantiser (the cell takes the int32 accumulator), the hidden-to-hidden weight per
column at 8 bits, the hidden sequence at 8 bits and, for the lstm, a 16-bit observer of
the cell; the last / first / max step of the hidden sequence keeps its grid.

The moving scales are persistable state (``<var>.scale``, ``.accum``, ``.state``,
initialised to 0.001, 0, 0 by the startup program, so the first training step's
scale is that batch's max|x|), updated in training and read in test mode
(``Program.clone(for_test=True)`` sets ``is_test``), like ``batch_norm``'s running
statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import QuantizationError
from ..ir.ops.fake_quant import FAKE_QUANT_OPS
from ..ir.program import Block, Operator, Program, VarType
from ..ir.registry import op_has_category
from ..tools import logger
from .precision import Precision
from .quantize_rnn import RECURRENT_OPS

__all__ = ["LAYER_OPS", "QATConfig", "QATLayer", "QATProgram", "layer_name", "quant_aware"]

log = logger("quantize")

#: op type -> (input slot, weight slot, output slot, weight's output-channel axis)
LAYER_OPS: dict[str, tuple[str, str, str, int]] = {
    "mul": ("X", "Y", "Out", 1),
    "conv2d": ("Input", "Filter", "Output", 0),
    "depthwise_conv2d": ("Input", "Filter", "Output", 0),
}
ACT_QUANT = "fake_quantize_dequantize_moving_average_abs_max"
SCALE_INIT = 0.001  # Paddle's default scale before any batch was seen


@dataclass(frozen=True)
class QATConfig:
    """What ``quant_aware`` does (module doc): the default ``precision``, per-layer
    ``overrides`` by layer name, 8-bit first / last layers (``keep_first_last``), the
    network input's width (``input_bits``), the observers' ``moving_rate``, layers to
    leave in float (``skip``: layer names)."""

    precision: Precision = field(default_factory=Precision)
    overrides: Mapping[str, Precision] = field(default_factory=dict)
    keep_first_last: bool = True
    input_bits: int = 8
    moving_rate: float = 0.9
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.input_bits not in (2, 3, 4, 5, 6, 7, 8, 16):
            raise QuantizationError(f"QATConfig: input_bits={self.input_bits}: use 2 to 8 or "
                                    "16 (the network input is quantised signed)")
        if not 0.0 <= self.moving_rate < 1.0:
            raise QuantizationError(f"QATConfig: moving_rate={self.moving_rate} must be in "
                                    "[0, 1)")
        object.__setattr__(self, "skip", tuple(self.skip))

    def layer_precision(self, name: str, index: int, count: int) -> Precision:
        """The precision of layer ``name``, the ``index``-th of ``count`` layers."""
        if name in self.overrides:
            return self.overrides[name]
        p = self.precision
        if self.keep_first_last and index == 0:
            p = Precision(8, p.a, "signed", p.a_type, p.per_channel)
        if self.keep_first_last and index == count - 1:
            p = Precision(8, 8, "signed", "signed", p.per_channel)
        return p


@dataclass
class QATLayer:
    """One quantised layer, as ``quant_aware`` set it up."""

    name: str
    op_type: str
    precision: Precision
    weight: str
    act_kind: str  # the output quantiser's kind: signed, unsigned or bipolar
    relu: bool  # a relu folds into the layer (False when a bipolar quantiser replaced it)
    output: str  # the output quantiser's float output (what later ops read)
    scale: str  # the output quantiser's moving scale


@dataclass
class QATProgram:
    """What ``quant_aware`` returns: the program it changed (in place), its test-mode
    clone (taken before any backward pass: what ``freeze`` takes), the layers."""

    program: Program
    test_program: Program
    layers: list[QATLayer]
    #: the control-flow ops whose sub-blocks hold layers that stay float (a DynamicRNN /
    #: StaticRNN body, a conditional branch): why, one line each (also logged)
    float_blocks: list[str] = field(default_factory=list)


def grid_passthrough(op: Operator) -> bool:
    """An op that keeps its input's values (so a quantised input's grid): max pooling and
    the layout ops (reshape2, flatten2, transpose2...)."""
    if op.type == "pool2d":
        return op.attr("pooling_type") == "max" and not op.attr("adaptive") and \
            op.attr("data_format") in ("NCHW", "AnyLayout")
    return op_has_category(op.type, "layout") and len(op.input("X")) == 1


def _grid_source(block: Block, x: str, outputs: set[str],
                 rows: frozenset[str] | set[str] = frozenset()) -> str | None:
    """The layer output whose grid ``x`` is on (through grid passthrough ops, and a
    sequence's last / first / max row of a value in ``rows``), or None."""
    producer = {n: op for op in block.ops for n in op.output_arg_names}
    while x not in outputs:
        op = producer.get(x)
        if op is not None and op.type == "sequence_pool" and op.input("X")[0] in rows and \
                str(op.attr("pooltype")).upper() in ("LAST", "FIRST", "MAX"):
            return str(op.input("X")[0])
        if op is None or not grid_passthrough(op):
            return None
        x = op.input("X")[0]
    return x


def layer_name(weight: str) -> str:
    """A layer's name: its weight's prefix (``fc_0`` for ``fc_0.w_0``)."""
    return weight.split(".", 1)[0]


@dataclass
class _Chain:
    index: int  # the layer op
    op: Operator
    x: str
    w: str
    out: str  # the float value after the folded bias and relu
    last: int  # index of the last folded op
    relu: int | None  # index of the folded relu
    bias: str | None = None
    bn: bool = False  # a batch norm folds in (before the relu)


def _consumers(block: Block, name: str) -> list[int]:
    return [i for i, op in enumerate(block.ops) if name in op.input_arg_names]


def _float_blocks(block: Block) -> list[str]:
    """The ops of ``block`` with sub-blocks holding layers (a weight op with a
    persistable weight), which ``quant_aware`` leaves float: a line each saying so."""
    out = []
    program = block.program
    for i, op in enumerate(block.ops):
        todo, found = list(op.sub_block_indices()), []
        while todo:
            sub = program.block(todo.pop())
            for sop in sub.ops:
                todo += sop.sub_block_indices()
                slot = LAYER_OPS.get(sop.type, (None, None))[1]
                if slot and sop.input(slot) and _persistable(sub, sop.input(slot)[0]):
                    found.append(layer_name(sop.input(slot)[0]))
        if found:
            names = op.output_arg_names
            wrote = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
            out.append(f"quant_aware: the {op.type} op {i} (writing {wrote}) "
                       f"stays float, with its layers {sorted(set(found))}: fake quantisers "
                       "go into the global block only.  For a recurrence, write it as "
                       "dynamic_gru / dynamic_lstm fed by an fc (quantisation-aware, "
                       "docs/qat.md 'Recurrent layers'), or quantise the trained float "
                       "program post-training (passes.quantize turns a DynamicRNN / "
                       "StaticRNN cell into quantized_gru / _lstm / _rnn)")
    return out


def _persistable(block: Block, name: str) -> bool:
    v = block._find_var_recursive(name)
    return v is not None and v.persistable


def _chains(block: Block, skip: tuple[str, ...]) -> list[_Chain]:
    out = []
    for i, op in enumerate(block.ops):
        slots = LAYER_OPS.get(op.type)
        if slots is None:
            continue
        xs, ws, os, _ = slots
        if not op.input(ws) or not _persistable(block, op.input(ws)[0]):
            continue
        w = op.input(ws)[0]
        if layer_name(w) in skip:
            continue
        if op.type == "mul" and (op.attr("x_num_col_dims") != 1 or op.attr("y_num_col_dims") != 1):
            raise QuantizationError(f"quant_aware: mul (-> {op.output('Out')[0]}) with "
                                    "x_num_col_dims / y_num_col_dims other than 1 has no integer "
                                    f"form; leave it in float: QATConfig(skip=[{layer_name(w)!r}])")
        cur, last, relu, bias = op.output(os)[0], i, None, None
        nxt = _consumers(block, cur)
        if len(nxt) == 1:
            add = block.ops[nxt[0]]
            if add.type == "elementwise_add" and add.input("X") == [cur] and \
                    _persistable(block, add.input("Y")[0]) and \
                    len(block._var_recursive(add.input("Y")[0]).shape) == 1:
                cur, last, bias = add.output("Out")[0], nxt[0], add.input("Y")[0]
                nxt = _consumers(block, cur)
        bn = False
        if len(nxt) == 1 and block.ops[nxt[0]].type == "batch_norm" and \
                block.ops[nxt[0]].input("X") == [cur] and \
                block.ops[nxt[0]].attr("data_layout") in ("NCHW", "AnyLayout"):
            bn, last = True, nxt[0]
            cur = block.ops[last].output("Y")[0]
            nxt = _consumers(block, cur)
        if len(nxt) == 1 and block.ops[nxt[0]].type == "relu":
            relu = last = nxt[0]
            cur = block.ops[relu].output("Out")[0]
        out.append(_Chain(i, op, op.input(xs)[0], w, cur, last, relu, bias, bn))
    return out


class _Inserter:
    def __init__(self, program: Program, startup: Program, cfg: QATConfig) -> None:
        self.block = program.global_block()
        self.startup = startup.global_block()
        self.cfg = cfg

    def _like(self, src: str, name: str) -> str:
        v = self.block._var_recursive(src)
        self.block.create_var(name=name, shape=list(v.shape), dtype=v.dtype,
                              lod_level=v.lod_level)
        return name

    def _state(self, base: str, what: str, value: float) -> str:
        name = f"{base}.{what}"
        if self.block._find_var_recursive(name) is not None:
            raise QuantizationError(f"quant_aware: variable {name!r} exists already; was "
                                    "quant_aware run on this program before?")
        for b in (self.block, self.startup):
            b.create_var(name=name, shape=[1], dtype="float32", persistable=True,
                         stop_gradient=True)
        self.startup.append_op("fill_constant", outputs={"Out": name},
                               attrs={"shape": [1], "dtype": VarType.FP32, "value": value})
        return name

    def act_quant(self, index: int, x: str, out_name: str, bits: int, kind: str) -> str:
        """A moving-average quantise-dequantise of ``x`` inserted at ``index``."""
        scale = self._state(out_name, "scale", SCALE_INIT)
        accum = self._state(out_name, "accum", 0.0)
        state = self._state(out_name, "state", 0.0)
        out = self._like(x, f"{out_name}.quantized")
        self.block._insert_op(
            index, ACT_QUANT, {"X": x, "InScale": scale, "InAccum": accum, "InState": state},
            {"Out": out, "OutScale": scale, "OutAccum": accum, "OutState": state},
            {"bit_length": bits, "kind": kind, "moving_rate": self.cfg.moving_rate})
        return out

    def bias_quant(self, index: int, bias: str, w: str, in_grid: tuple[str, int, str],
                   w_grid: tuple[int, str], half_step: bool) -> str:
        """The bias on the accumulator's grid (``fake_quantize_dequantize_bias``)."""
        out = self._like(bias, f"{bias}.quantized")
        self.block._insert_op(
            index, "fake_quantize_dequantize_bias",
            {"X": bias, "InScale": in_grid[0], "WeightScale": f"{w}.scale"}, {"Out": out},
            {"in_bit_length": in_grid[1], "in_kind": in_grid[2],
             "weight_bit_length": w_grid[0], "weight_kind": w_grid[1], "half_step": half_step})
        return out

    def weight_quant(self, index: int, w: str, p: Precision, axis: int) -> str:
        out = self._like(w, f"{w}.quantized")
        scale = self.block.create_var(name=f"{w}.scale", dtype="float32",
                                      stop_gradient=True).name
        if p.per_channel:
            t, attrs = "fake_channel_wise_quantize_dequantize_abs_max", {"quant_axis": axis}
        else:
            t, attrs = "fake_quantize_dequantize_abs_max", {}
        self.block._insert_op(index, t, {"X": w}, {"Out": out, "OutScale": scale},
                              {**attrs, "bit_length": p.w, "kind": p.w_type})
        return out


def _recurrences(block: Block, chains: list[_Chain]) -> list[tuple[int, int]]:
    """(chain, op index) of each ``lstm`` / ``gru`` whose input is a layer chain's output
    (its input projection, no relu, read by nothing else): the integer cell's shape
    (passes.quantize_rnn)."""
    by_out = {c.out: k for k, c in enumerate(chains)}
    out = []
    for i, op in enumerate(block.ops):
        if op.type not in RECURRENT_OPS:
            continue
        x = op.input("Input")[0]
        k = by_out.get(x)
        if k is None or chains[k].relu is not None or chains[k].bn or \
                chains[k].op.type != "mul" or _consumers(block, x) != [i]:
            raise QuantizationError(
                f"quant_aware: {op.type} (-> {op.output('Hidden')[0]}) must read its input "
                "projection's output alone (an fc without activation or batch norm, as "
                f"layers.fc(x, size) then layers.{RECURRENT_OPS[op.type]} build): the integer "
                "cell takes the projection's int32 accumulator (docs/qat.md, 'Recurrent "
                "layers')")
        out.append((k, i))
    return out


def _table(block: Block, x: str) -> Operator | None:
    """The ``lookup_table`` (an embedding with a persistable table) producing ``x``: its
    rows are on the table's grid, so the table is quantised (abs max, 8 bits) instead of
    its output -- a moving-average quantiser on the rows would lag behind the growing
    table and clip (and stop the gradient of) the largest rows in training."""
    op = next((o for o in block.ops if x in o.output_arg_names), None)
    if op is None or op.type != "lookup_table" or not _persistable(block, op.input("W")[0]):
        return None
    return op


def _recurrence_quant(block: Block, ins: _Inserter, op: Operator) -> QATLayer:
    """The fake quantisers of one recurrence (docs/qat.md, 'Recurrent layers'): its
    hidden-to-hidden weight per column at 8 bits, its output hidden sequence at 8 bits
    signed (what later ops read), and an observer of the lstm's cell at 16 bits (its
    scale is the integer cell state's range; nothing reads its output)."""
    at = next(i for i, o in enumerate(block.ops) if o is op)
    hidden = op.output("Hidden")[0]
    q = ins.act_quant(at + 1, hidden, hidden, 8, "signed")
    _rename_reads(block, hidden, q, at + 2)
    if op.type == "lstm" and op.output("Cell"):
        ins.act_quant(at + 1, op.output("Cell")[0], op.output("Cell")[0], 16, "signed")
    w = op.input("Weight")[0]
    p = Precision(8, 8, "signed", "signed", True)
    wq = ins.weight_quant(at, w, p, 1)
    op._rename_input(w, wq)
    return QATLayer(op.output("Hidden")[0], op.type, p, w, "signed", False, q,
                    f"{hidden}.scale")


def _rename_reads(block: Block, old: str, new: str, start: int) -> None:
    for op in block.ops[start:]:
        if old in op.input_arg_names:
            op._rename_input(old, new)


def _act_kind(p: Precision, relu: bool) -> str:
    if p.a_type == "signed" and relu and p.a < 8:
        return "unsigned"
    return p.a_type


def quant_aware(program: Program, startup_program: Program,
                config: QATConfig | None = None) -> QATProgram:
    """Insert fake-quantise ops into the training ``program`` (in place) and their
    state's initialisers into ``startup_program`` (module doc).  Call it before
    ``append_backward`` / ``optimizer.minimize``.  Returns the program, its
    test-mode clone and the layers."""
    cfg = config if config is not None else QATConfig()
    block = program.global_block()
    if any(op.type.endswith("_grad") for op in block.ops):
        raise QuantizationError("quant_aware: the program already has a backward pass; call "
                                "quant_aware before append_backward / optimizer.minimize")
    if any(op.type in FAKE_QUANT_OPS for op in block.ops):
        raise QuantizationError("quant_aware: the program has fake-quantise ops already; was "
                                "quant_aware run on this program before?")
    chains = _chains(block, cfg.skip)
    if not chains:
        raise QuantizationError("quant_aware: the program has no layer to quantise (mul with "
                                "a persistable weight, conv2d, depthwise_conv2d)")
    names = [layer_name(op.input(LAYER_OPS[op.type][1])[0]) for op in block.ops
             if op.type in LAYER_OPS and op.input(LAYER_OPS[op.type][1]) and
             _persistable(block, op.input(LAYER_OPS[op.type][1])[0])]
    unknown = sorted((set(cfg.overrides) | set(cfg.skip)) - set(names))
    if unknown:
        raise QuantizationError(f"quant_aware: no layer named {unknown} (overrides / skip); the "
                                f"program's layers are {names}")
    outputs = {c.out for c in chains}
    # recurrences (lstm / gru) whose input is a projection chain's output
    recs = _recurrences(block, chains)
    proj = {k for k, _ in recs}
    precs = [cfg.layer_precision(layer_name(c.w), k, len(chains)) for k, c in enumerate(chains)]
    for k in proj:  # the integer cell's projection: int8 per column, int32 out
        precs[k] = Precision(8, 8, "signed", "signed", True)
    hiddens = {block.ops[r].output("Hidden")[0] for _, r in recs}
    outputs |= hiddens
    kinds = [_act_kind(p, c.relu is not None) for p, c in zip(precs, chains)]
    # each layer's input grid: (scale variable, bits, kind)
    by_out = {c.out: k for k, c in enumerate(chains)}
    sources = [_grid_source(block, c.x, outputs, hiddens) for c in chains]
    in_grids = [(f"{src}.scale", 8, "signed") if src in hiddens else
                (f"{src}.scale", precs[by_out[src]].a, kinds[by_out[src]]) if src is not None
                else (f"{c.x}.scale", cfg.input_bits, "signed")
                for c, src in zip(chains, sources)]
    rec_ops = [block.ops[r] for _, r in recs]
    ins = _Inserter(program, startup_program, cfg)
    layers: list[QATLayer] = []
    # last layer first, and within a layer the last insertion first: the indices of
    # earlier ops stay valid
    for k in range(len(chains) - 1, -1, -1):
        c, p, kind = chains[k], precs[k], kinds[k]
        name = layer_name(c.w)
        if k in proj:  # no output quantiser: the cell takes the int32 accumulator
            q = c.out
        elif kind == "bipolar" and c.relu is not None:
            relu = block.ops[c.relu]
            src = relu.input("X")[0]
            block._remove_op(c.relu)
            q = ins.act_quant(c.relu, src, c.out, p.a, kind)
            _rename_reads(block, c.out, q, c.relu + 1)
        else:
            q = ins.act_quant(c.last + 1, c.out, c.out, p.a, kind)
            _rename_reads(block, c.out, q, c.last + 2)
        wq = ins.weight_quant(c.index, c.w, p, LAYER_OPS[c.op.type][3])
        op = block.ops[c.index + 1]
        op._rename_input(c.w, wq)
        table = _table(block, c.x) if k in proj else None
        if sources[k] is None and table is not None:  # the embedding's table, not its rows
            t = next(i for i, o in enumerate(block.ops) if o is table)
            tw = table.input("W")[0]
            table._rename_input(tw, ins.weight_quant(t, tw, Precision(8, 8, per_channel=False),
                                                     0))
        elif sources[k] is None:
            xq = ins.act_quant(c.index, c.x, c.x, cfg.input_bits, "signed")
            block.ops[c.index + 2]._rename_input(c.x, xq)
        layers.append(QATLayer(name, c.op.type, p, c.w, kind,
                               c.relu is not None and kind != "bipolar", q,
                               "" if k in proj else f"{c.out}.scale"))
    layers.reverse()
    for rop in rec_ops:
        layers.append(_recurrence_quant(block, ins, rop))
    # the biases last: their quantisers read scales that exist only now
    for k, c in enumerate(chains):
        if c.bias is None or c.bn or k in proj:  # a batch norm's shift is rounded when
            continue  # freezing; a projection's bias joins the cell's gate bias there
        at = next(i for i, op in enumerate(block.ops)
                  if op.type == "elementwise_add" and op.input("Y") == [c.bias])
        bq = ins.bias_quant(at, c.bias, c.w, in_grids[k], (precs[k].w, precs[k].w_type),
                            kinds[k] == "bipolar")
        block.ops[at + 1]._rename_input(c.bias, bq)
    floats = _float_blocks(block)
    for line in floats:
        log.warning(line)
    return QATProgram(program, program.clone(for_test=True), layers, floats)
