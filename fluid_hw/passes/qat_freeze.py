"""Freeze a quantisation-aware-trained program into the integer program.

    int_prog = freeze(qat.test_program, scope, feed_names=["pixels"],
                      fetch_names=[prob.name])

Input: a program with the fake-quantise ops ``fluid_hw.passes.qat.quant_aware``
inserted (its test clone, or a saved inference model of it) and the trained values in
``scope``.  Output: the fixed-point program of docs/fixed_point.md that the golden
model runs and the FPGA back end compiles.  Per layer (``mul`` / ``conv2d`` /
``depthwise_conv2d``, its bias add and relu, between an input and an output
quantiser):

* the network input's quantiser becomes ``quantize`` (scale = the quantiser's step,
  bits, signed / unsigned / bipolar): it computes the same integers;
* the layer becomes ``quantized_fc`` / ``quantized_conv2d`` with the weight
  quantiser's integers (int8 holding ``w`` bits; ``weight_bits``, ``weight_type``,
  ``acc_bits`` = the accumulator width the input range, weight range, fan-in and
  bias need) and an int32 bias ``round_half_even(b / (step_in * step_w[c]))``;
* the output quantiser becomes ``requantize`` with ``m * 2^-n`` ~ ``step_in *
  step_w[c] / step_out`` (``passes.quantize.requant_params``), the output's bits and
  kind and the folded relu.  A bipolar output takes the sign of the accumulator
  (``m = 1, n = 0``: exact; its scale only matters to the layer after);
* a quantised value that a float op (softmax...) or a fetch reads comes out through
  ``dequantize`` under the quantiser's output name.

What the fake-quantised program computes and the integer program differ only in the
last rounding: the float program rounds the float sum ``x W + b`` (its bias already on
the accumulator's grid, ``fake_quantize_dequantize_bias``) to the output grid half to
even, the integer one rounds the exact sum scaled by the 15-bit multiplier half up: a
value within about 2^-16 of a boundary can move one step (docs/qat.md gives the
measured agreement).  A program without bias quantisers (a persistable bias added
directly) freezes too, its bias rounded here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FluidError, QuantizationError
from ..ir import dtypes
from ..ir.ops.fake_quant import grid, quantize_values, statistic, step_of
from ..ir.ops.quant import WEIGHT_DTYPE, quantized_dtype
from ..ir.program import Operator, Program, Variable, VarType
from ..ir.verifier import verify_program
from ._graph import OpSpec, add_param, fresh_name, rebuild_block, remove_unused_vars
from .base import ParamStore, PassContext, get_pass, get_value
from .manager import PassManager, fixpoint
from .precision import acc_bits, weight_range
from .qat import ACT_QUANT, LAYER_OPS, grid_passthrough
from .quantize import (
    _CONV_ATTR_NAMES,
    _POOL_ATTR_NAMES,
    QuantConfig,
    _Quantizer,
    output_quantiser,
    requant_params,
    round_half_even,
)
from .quantize_rnn import RECURRENT_OPS

__all__ = ["freeze"]

BIAS_QUANT = "fake_quantize_dequantize_bias"
WEIGHT_QUANT = ("fake_quantize_dequantize_abs_max",
                "fake_channel_wise_quantize_dequantize_abs_max")


@dataclass
class _Grid:
    """An integer value of the frozen program: its variable, step, bits and kind."""

    var: str
    step: np.float32
    bits: int
    kind: str

    @property
    def range(self) -> tuple[int, int]:
        lo, hi, _ = grid(self.bits, self.kind)
        return lo, hi


class _Freezer:
    def __init__(self, program: Program, scope: ParamStore, targets: list[str],
                 thresholds: bool = False) -> None:
        self.thresholds = thresholds
        self.p = program
        self.block = program.global_block()
        self.scope = scope
        self.targets = targets
        self.ops = list(self.block.ops)
        self.producer = {n: i for i, op in enumerate(self.ops) for n in op.output_arg_names}
        self.items: list[Any] = []
        self.ints: dict[str, _Grid] = {}  # quantiser output (float name) -> integer value
        self.floated: set[str] = set()
        self.consumed: set[int] = set()
        self.half_step = False  # the current layer's bias sits on half steps
        self.bn: Operator | None = None  # the current layer's folded batch norm

    # -- helpers
    def consumers(self, name: str) -> list[int]:
        return [i for i, op in enumerate(self.ops) if name in op.input_arg_names]

    def value(self, name: str, what: str) -> np.ndarray:
        v = get_value(self.scope, name)
        if v is None:
            raise QuantizationError(f"freeze: the scope has no value for {what} {name!r}; "
                                    "give the scope the trained program ran in")
        return np.asarray(v)

    def new_var(self, base: str, like: str, dtype: int, shape: Sequence[int] | None = None
                ) -> str:
        src = self.block._var_recursive(like)
        name = fresh_name(self.block, base)
        self.block.create_var(name=name, shape=list(shape if shape is not None else src.shape),
                              dtype=dtype, lod_level=src.lod_level)
        return name

    def act_grid(self, op: Operator) -> tuple[np.float32, int, str]:
        bits, kind = op.attr("bit_length"), op.attr("kind")
        name = op.input("InScale")[0]
        scale = self.value(name, "the moving scale")
        if not float(scale.reshape(-1)[0]) > 0:
            raise QuantizationError(f"freeze: the scale {name!r} of {op.input('X')[0]!r} is "
                                    f"{float(scale.reshape(-1)[0])}; train the program (the "
                                    "scales are observed in training mode) before freezing")
        if bits > 8 and bits != 16:
            raise QuantizationError(f"freeze: {op.input('X')[0]!r} is quantised to {bits} "
                                    "bits; the integer program holds 1 to 8 or 16 bits")
        return np.float32(step_of(scale.reshape(1), bits, kind)[0]), bits, kind

    def int_dtype(self, g_bits: int, kind: str) -> int:
        return quantized_dtype(g_bits, kind != "unsigned")

    def float_of(self, name: str) -> None:
        g = self.ints.get(name)
        if g is None or name in self.floated:
            return
        self.items.append(OpSpec("dequantize", {"X": [g.var]}, {"Out": [name]},
                                 {"scale": float(g.step)}))
        self.floated.add(name)

    def is_layer(self, op: Operator) -> bool:
        """A layer op whose weight comes from a weight quantiser."""
        if op.type not in LAYER_OPS:
            return False
        w = op.input(LAYER_OPS[op.type][1])
        return bool(w) and w[0] in self.producer and \
            self.ops[self.producer[w[0]]].type in WEIGHT_QUANT

    # -- the network input's quantiser
    def emit_input_quant(self, i: int, op: Operator) -> None:
        step, bits, kind = self.act_grid(op)
        x, out = op.input("X")[0], op.output("Out")[0]
        q = self.new_var(f"{x}.int{bits}", x, self.int_dtype(bits, kind))
        self.items.append(OpSpec("quantize", {"X": [x]}, {"Out": [q]},
                                 {"scale": float(step), "bits": bits,
                                  "signed": kind != "unsigned", "bipolar": kind == "bipolar"}))
        self.ints[out] = _Grid(q, step, bits, kind)
        self.consumed.add(i)

    # -- a layer and what folds into it
    def chain(self, i: int, op: Operator) -> tuple[str | None, bool, int]:
        """(bias parameter, relu, index of the output quantiser) after layer op ``i``."""
        out = op.output(LAYER_OPS[op.type][2])[0]
        bias, relu = None, False
        nxt = self.consumers(out)
        if len(nxt) == 1 and self.ops[nxt[0]].type == "elementwise_add":
            add = self.ops[nxt[0]]
            y = add.input("Y")[0]
            j = self.producer.get(y, -1)
            v = self.block._find_var_recursive(y)
            if add.input("X") == [out] and j >= 0 and self.ops[j].type == BIAS_QUANT:
                bias, self.half_step = self.ops[j].input("X")[0], self.ops[j].attr("half_step")
                self.consumed |= {j, nxt[0]}
            elif add.input("X") == [out] and v is not None and v.persistable:
                bias, self.half_step = y, False
                self.consumed.add(nxt[0])
            if bias is not None:
                out = add.output("Out")[0]
                nxt = self.consumers(out)
        self.bn = None
        if len(nxt) == 1 and self.ops[nxt[0]].type == "batch_norm" and \
                self.ops[nxt[0]].input("X") == [out] and \
                self.ops[nxt[0]].attr("data_layout") in ("NCHW", "AnyLayout"):
            self.bn = self.ops[nxt[0]]
            self.consumed.add(nxt[0])
            out = self.bn.output("Y")[0]
            nxt = self.consumers(out)
        if len(nxt) == 1 and self.ops[nxt[0]].type == "relu":
            relu = True
            self.consumed.add(nxt[0])
            out = self.ops[nxt[0]].output("Out")[0]
            nxt = self.consumers(out)
        if len(nxt) != 1 or self.ops[nxt[0]].type != ACT_QUANT:
            raise QuantizationError(
                f"freeze: {op.type} (-> {op.output_arg_names[0]}) is not followed by an output "
                f"quantiser ({ACT_QUANT}) reading {out!r} alone; freeze takes the programs "
                "quant_aware makes (their test clone)")
        return bias, relu, nxt[0]

    def weight(self, op: Operator, slot: str) -> tuple[np.ndarray, np.ndarray, Operator]:
        """Integer weights and their steps (one per channel, or one) from the weight
        quantiser feeding ``op``'s ``slot``."""
        wq = op.input(slot)[0]
        j = self.producer.get(wq, -1)
        wop = self.ops[j] if j >= 0 else None
        if wop is None or wop.type not in WEIGHT_QUANT:
            raise QuantizationError(f"freeze: {op.type} (-> {op.output_arg_names[0]}) reads "
                                    f"weight {wq!r}, which no weight quantiser "
                                    f"({' / '.join(WEIGHT_QUANT)}) produces")
        self.consumed.add(j)
        w = self.value(wop.input("X")[0], "the weight").astype(np.float32)
        bits, kind = wop.attr("bit_length"), wop.attr("kind")
        if wop.type == WEIGHT_QUANT[1]:
            axis = wop.attr("quant_axis")
            axes = tuple(a for a in range(w.ndim) if a != axis)
            steps = step_of(statistic(w, kind, axes), bits, kind)
            shape = [1] * w.ndim
            shape[axis] = w.shape[axis]
            q = quantize_values(w, steps.reshape(shape), bits, kind)
        else:
            steps = step_of(statistic(w, kind), bits, kind)
            q = quantize_values(w, steps.reshape([1] * w.ndim), bits, kind)
        return q.astype(dtypes.to_numpy(WEIGHT_DTYPE[bits])), steps, wop

    def fold_bn(self, bn: Operator, wq: np.ndarray, axis: int, acc_step: np.ndarray,
                b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A test-mode batch norm after a layer, folded into its integer form: ``y = acc *
        acc_step * k + shift`` with ``k = gamma / sqrt(var + eps)``, ``shift = beta - mean
        * k`` (+ the layer's bias * k): the weight integers keep their magnitudes (a
        channel with k < 0 flips sign), the accumulator's step becomes ``acc_step *
        |k|`` and the bias ``b * k + shift`` is rounded to it."""
        gamma, beta, mean, var = (self.value(bn.input(s)[0], f"batch norm {s}")
                                  .astype(np.float64).reshape(-1)
                                  for s in ("Scale", "Bias", "Mean", "Variance"))
        k = gamma / np.sqrt(var + np.float64(bn.attr("epsilon")))
        shift = beta - mean * k + (b * k if b is not None else 0.0)
        sign = np.where(k < 0, -1, 1)
        shape = [1] * wq.ndim
        shape[axis] = wq.shape[axis]
        wq = (wq.astype(np.int64) * sign.reshape(shape)).astype(wq.dtype)
        mag = np.abs(k)
        zero = mag == 0  # a channel the batch norm zeroes: weights 0, output = shift
        if zero.any():
            wq = np.where(zero.reshape(shape), 0, wq).astype(wq.dtype)
        return wq, acc_step * np.where(zero, 1.0, mag), shift

    def emit_layer(self, i: int, op: Operator) -> None:
        xs, ws, os_, axis = LAYER_OPS[op.type]
        conv = op.type != "mul"
        x = op.input(xs)[0]
        gin = self.ints.get(x)
        if gin is None:
            raise QuantizationError(f"freeze: {op.type} (-> {op.output(os_)[0]}) reads {x!r}, "
                                    "which is not the output of a quantiser; freeze takes the "
                                    "programs quant_aware makes")
        self.consumed.add(i)
        wq, s_w, wop = self.weight(op, ws)
        bias, relu, k = self.chain(i, op)
        fq = self.ops[k]
        self.consumed.add(k)
        s_out, obits, okind = self.act_grid(fq)
        channels = wq.shape[axis]
        acc_step = np.float64(gin.step) * np.broadcast_to(s_w.astype(np.float64), (channels,))
        fan_in = int(np.prod(wq.shape[1:])) if conv else wq.shape[0]
        xin = gin.var
        if not conv and len(self.block._var_recursive(x).shape) != 2:  # mul flattens
            xin = self.new_var(f"{gin.var}.flat", x, self.block._var_recursive(gin.var).dtype,
                               [-1, wq.shape[0]])
            self.items.append(OpSpec("flatten2", {"X": [gin.var]}, {"Out": [xin]}, {"axis": 1}))
        ins: dict[str, list[str]] = {xs if conv else "X": [xin]}
        bq_max = 0
        where = f"{op.type} (-> {fq.output('Out')[0]})"
        b = self.value(bias, "the bias").astype(np.float64).reshape(-1) if bias is not None \
            else None
        if self.bn is not None:  # fold the test-mode batch norm (module doc)
            wq, acc_step, b = self.fold_bn(self.bn, wq, axis, acc_step, b)
            bias = bias or f"{self.bn.input('Bias')[0]}.folded"
        if b is not None and bias is not None:
            half = self.half_step and self.bn is None
            bq = np.floor(b / acc_step) if half else round_half_even(b / acc_step)
            bq_max = int(np.max(np.abs(bq))) if bq.size else 0
            if bq_max >= 2**31:
                raise QuantizationError(f"freeze: {where}: the integer bias reaches {bq_max}, "
                                        "beyond int32; the input or weight step is too small "
                                        "for this bias")
            ins["Bias"] = [add_param(self.block, self.scope, f"{bias}.int32",
                                     bq.astype(np.int32))]
        wbits, wkind = wop.attr("bit_length"), wop.attr("kind")
        need = acc_bits(gin.range, weight_range(wbits, wkind), fan_in, bq_max)
        if need > 32:
            raise QuantizationError(f"freeze: {where}: {fan_in} products and the bias need a "
                                    f"{need}-bit accumulator, beyond int32; use fewer bits")
        w_name = add_param(self.block, self.scope, f"{wop.input('X')[0]}.int{wbits}", wq)
        ins["Filter" if conv else "W"] = [w_name]
        attrs: dict[str, Any] = {"in_scale": float(gin.step),
                                 "weight_scale": [float(v) for v in s_w],
                                 "weight_bits": wbits, "weight_type": wkind, "acc_bits": need}
        if conv:
            attrs.update({a: op.attr(a) for a in _CONV_ATTR_NAMES})
            kind, slot, shape = "quantized_conv2d", "Output", None
        else:
            kind, slot = "quantized_fc", "Out"
            shape = [self.block._var_recursive(xin).shape[0], wq.shape[1]]
        out_float = fq.output("Out")[0]
        acc = self.new_var(f"{out_float}.acc", out_float, VarType.INT32, shape)
        self.items.append(OpSpec(kind, ins, {slot: [acc]}, attrs))
        if okind == "bipolar":
            mn = [(1, 0)]  # the sign of the accumulator: exact (module doc)
        else:
            mult = acc_step / np.float64(s_out)
            mn = [requant_params(float(v)) for v in (mult if s_w.size > 1 else mult[:1])]
        base = fq.input("X")[0]
        m_arr = np.array([p[0] for p in mn], np.int32)
        n_arr = np.array([p[1] for p in mn], np.int32)
        outq = self.new_var(f"{base}.int{obits}", out_float, self.int_dtype(obits, okind))
        bipolar, use_relu = okind == "bipolar", relu and okind != "bipolar"
        self.items.append(output_quantiser(
            self.block, self.scope, base, acc, outq, (obits, okind), use_relu, m_arr, n_arr,
            s_out, self.thresholds,
            {"relu": use_relu, "bits": obits, "signed": okind != "unsigned",
             "bipolar": bipolar, "out_scale": float(s_out),
             "in_scale": [float(v) for v in acc_step]}))
        self.ints[out_float] = _Grid(outq, s_out, obits, okind)

    def emit_passthrough(self, op: Operator) -> None:
        """Max pooling or a layout op on a quantised value: the same op on its integers
        (``quantized_pool2d`` for pooling), on the same grid."""
        g = self.ints[op.input("X")[0]]
        out = op.output("Out")[0]
        outq = self.new_var(f"{out}.int{g.bits}", out, self.int_dtype(g.bits, g.kind))
        if op.type == "pool2d":
            spec = OpSpec("quantized_pool2d", {"X": [g.var]}, {"Out": [outq]},
                          {a: op.attr(a) for a in _POOL_ATTR_NAMES})
        else:
            attrs = {k: v for k, v in op.all_attrs().items() if not k.startswith("op_")}
            spec = OpSpec(op.type, {"X": [g.var]}, {"Out": [outq]}, attrs)
        self.items.append(spec)
        self.ints[out] = _Grid(outq, g.step, g.bits, g.kind)

    def run(self) -> Program:
        layers = {i for i, op in enumerate(self.ops) if self.is_layer(op)}
        if not layers:
            raise QuantizationError("freeze: the program has no quantised layer (run "
                                    "quant_aware on the training program, then freeze its "
                                    "test clone)")
        for i, op in enumerate(self.ops):
            if i in self.consumed:
                continue
            if i in layers:
                self.emit_layer(i, op)
            elif op.type == ACT_QUANT:
                self.emit_input_quant(i, op)
            elif grid_passthrough(op) and op.input("X")[0] in self.ints:
                self.emit_passthrough(op)
            elif op.type in WEIGHT_QUANT and all(
                    j in layers for j in self.consumers(op.output("Out")[0])):
                continue  # taken by its layer
            else:
                for n in op.input_arg_names:
                    self.float_of(n)
                self.items.append(op.desc)
        for t in self.targets:
            self.float_of(t)
        rebuild_block(self.block, self.items)
        remove_unused_vars(self.p, PassContext(fetch_names=self.targets))
        return self.p


def _freeze_recurrent(program: Program, scope: ParamStore, ctx: PassContext,
                      targets: list[str]) -> Program:
    """A program with ``lstm`` / ``gru`` recurrences (docs/qat.md, 'Recurrent layers'):
    the post-training pass's rewrite (``passes.quantize``, its recurrent cells from
    ``passes.quantize_rnn``) on the program without its fake quantisers, with each
    observed value's range the QAT moving scale instead of a calibration run.  The
    weights are the trained floats: the pass quantises them per column to 8 bits, the
    integers the 8-bit weight quantisers computed.  The gate tables' input ranges were not
    observed: each table spans its function's saturation range."""
    p = program.clone()
    block = p.global_block()
    ranges: dict[str, float] = {}
    for op in list(block.ops):
        if op.type == ACT_QUANT:
            bits, kind = op.attr("bit_length"), op.attr("kind")
            cell = any(op.input("X")[0] in o.output("Cell") for o in block.ops
                       if o.type == "lstm")
            if kind != "signed" or bits != (16 if cell else 8):
                raise QuantizationError(
                    f"freeze: {op.input('X')[0]!r} is quantised to {bits} bits {kind}; a "
                    "program with recurrent layers freezes through the post-training pass, "
                    "whose activations are 8-bit signed: use QATConfig(precision=Precision())")
            scale = float(np.asarray(get_value(scope, op.input("InScale")[0])).reshape(-1)[0]) \
                if get_value(scope, op.input("InScale")[0]) is not None else 0.0
            if not scale > 0:
                raise QuantizationError(f"freeze: the scale of {op.input('X')[0]!r} is "
                                        f"{scale}; train the program (the scales are observed "
                                        "in training mode) before freezing")
            ranges[op.input("X")[0]] = scale
        elif op.type in WEIGHT_QUANT and (op.attr("bit_length"), op.attr("kind")) != \
                (8, "signed"):
            raise QuantizationError(
                f"freeze: weight {op.input('X')[0]!r} is quantised to {op.attr('bit_length')} "
                f"bits {op.attr('kind')}; a program with recurrent layers freezes through the "
                "post-training pass, whose weights are 8-bit signed")
        if op.type == WEIGHT_QUANT[0]:  # an embedding's table: its rows' range
            table = np.asarray(get_value(scope, op.input("X")[0]), np.float64)
            for o in block.ops:
                if o.type == "lookup_table" and o.input("W") == op.output("Out"):
                    ranges[o.output("Out")[0]] = float(np.max(np.abs(table)))
        if op.type in (ACT_QUANT, BIAS_QUANT, *WEIGHT_QUANT):
            x, out = op.input("X")[0], op.output("Out")[0]
            for o in block.ops:
                if out in o.input_arg_names:
                    o._rename_input(out, x)
            block._remove_op(next(i for i, o in enumerate(block.ops) if o is op))
    steps: list[Any] = ["prune", fixpoint("remove_identity", "reshape_transpose_cancel",
                                          "dead_code_elimination"),
                        "conv_bn_fuse", "fc_bn_fuse", get_pass("fc_fuse", activations=("relu",)),
                        get_pass("conv_elementwise_add_act_fuse", activations=("relu",)),
                        "dead_code_elimination"]  # passes.quantize's, with fusion
    fp = PassManager(steps).run(p, ctx)
    return _Quantizer(fp.clone(), QuantConfig(), scope, ranges, targets).run()


def freeze(program: Program, scope: ParamStore, *, feed_names: Sequence[str | Variable],
           fetch_names: Sequence[str | Variable], thresholds: bool = False) -> Program:
    """The integer inference program of a quantisation-aware-trained ``program`` (its
    test clone, or a saved inference model of it: see the module doc), pruned to
    ``fetch_names`` (names or variables, as ``load_inference_model`` returns them).
    Integer weights, biases, multipliers and shifts are added to ``scope``; the input
    program is not changed.  ``thresholds``: a layer whose output has 1 to 4 bits gets the
    ``multi_threshold`` giving the same integers as its ``requantize``
    (``QuantConfig(thresholds=True)``'s rule: compare instead of multiply)."""
    targets = [t if isinstance(t, str) else t.name for t in fetch_names]
    feeds = [f if isinstance(f, str) else f.name for f in feed_names]
    if not targets:
        raise QuantizationError("freeze needs the program's outputs: fetch_names=[...]")
    ctx = PassContext(scope=scope, feed_names=feeds, fetch_names=targets)
    if any(op.type in RECURRENT_OPS for op in program.global_block().ops):
        out = _freeze_recurrent(program, scope, ctx, targets)
    else:
        pruned = PassManager(["prune"]).run(program, ctx)
        out = _Freezer(pruned, scope, targets, thresholds).run()
    try:
        verify_program(out)
    except FluidError as e:  # a bug here, not in the caller's program
        raise QuantizationError(f"freeze: the integer program does not verify: {e}") from e
    return out
