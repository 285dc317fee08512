"""Matrix-vector-activation unit (MVAU) with PE x SIMD folding.

Computes ``y = requant(W @ x + bias)`` for a weight matrix ``W`` of ``mh`` rows
(output channels) by ``mw`` columns (inputs), weight x activation products (int8 x int8,
or narrower: :mod:`.multipliers`) summed in int32.

Folding: ``pe`` rows and ``simd`` columns per cycle; ``SF = mw / simd`` synapse folds,
``NF = mh / pe`` neuron folds, ``NF * SF`` cycles per input vector.

Streams:

* ``i``: the input vector in ``SF`` beats of ``simd`` int8 lanes (element ``k`` of the
  vector is lane ``k % simd`` of beat ``k // simd``).
* ``o``: the output vector in ``NF`` beats of ``pe`` lanes (channel ``c`` is lane
  ``c % pe`` of beat ``c // pe``), int8 after requantisation, int32 without.

Structure: the input vector is written into one half of a double buffer while the
other half is reused ``NF`` times; per-PE weight memories (``NF * SF`` words of
``simd`` int8, word ``nf * SF + sf`` of PE ``p`` holds ``W[nf*pe + p, sf*simd:(sf+1)*simd]``);
a fabric register after every memory read, one on each multiplier input (a private
copy of the input vector per PE), two after each multiplier, a registered adder
tree, an int32 accumulator, then :class:`~.requant.RequantPipe`.  The datapath
never stalls: a :class:`~.stream.CreditQueue` at the output decides when work may
start.

Clock enables: only the control pipeline, the accumulators and the memories' write
side have them.  The datapath registers (the stage-2 weight and input copies, the
adder tree's levels, the shared DSPs' correction bits) load every cycle, like the
multipliers (:mod:`._dsp`, :mod:`._lutmul`): the pipeline has a fixed latency and the
valid bits travelling beside the data say which results count.  A clock enable from
one valid bit of the control pipeline would reach every register of a stage: about
3,000 flip-flops at stage 2 of a PE 2 x SIMD 128 unit of 4-bit weights.

Latency mode (``stream_input=True``): the first neuron fold issues synapse fold ``sf``
of a vector as soon as its beat has been written (the later folds reuse the buffered
vector), so the output starts about one pipeline depth after the last input beat
instead of after a whole vector time more; and the requantiser is not shared (one
lane a PE: no ``ceil(PE / R) - 1`` extra cycles) and shallower
(:class:`~.requant.RequantPipe` ``early``: its parameters are read two cycles ahead of
the accumulator, 7 stages instead of 11, 1 instead of 3 without requantisation).
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._ff import check_ff_style, copy_register
from ._lane import Clamp, lane_product
from ._mem import ParamWriteSignature, param_memory
from ._util import Component, HardwareConfigError, as_int_array, ceil_log2
from .multipliers import (
    check_lane_options,
    decode_weight,
    dsp_pairs,
    encode_weights,
    lane_kinds,
    packed_pair,
    product_bits,
    weight_lane_bits,
    weight_range,
)
from .requant import (
    EARLY_INDEX,
    PARAM_ENTRY_BITS,
    RequantPipe,
    requant_latency,
    requant_units,
    requantize_model,
)
from .stream import CreditQueue, credit_depth

__all__ = ["MVAU", "mvau_model", "mvau_weight_entries", "adder_tree_depth", "mvau_latency"]


def mvau_model(x: np.ndarray, weights: np.ndarray, bias: np.ndarray | None = None,
               multiplier: np.ndarray | None = None, shift: np.ndarray | None = None,
               relu: bool = False, clamp: Clamp | None = None,
               thresholds: np.ndarray | None = None) -> np.ndarray:
    """Behavioural model: ``x`` int8 [N, mw], ``weights`` int8 [mh, mw] -> [N, mh]."""
    acc = np.asarray(x, np.int64) @ np.asarray(weights, np.int64).T
    return requantize_model(acc, bias, multiplier, shift, relu, clamp, thresholds)


def adder_tree_depth(simd: int, paired: bool = False) -> int:
    """Registered levels of the adder tree summing ``simd`` products; ``paired``
    (latency mode): a register after the first level of adders (the products' routes
    from the multipliers end in it), then after every second level, and the last."""
    levels = ceil_log2(simd)
    return levels // 2 + 1 if paired and levels else levels


def mvau_latency(simd: int, requantize: bool = True, *, pe: int = 1, sf: int = 1,
                 thresholds: bool = False, stream_input: bool = False) -> int:
    """Cycles from issuing a vector's last beat to its output entering the output queue
    (memory read, fabric registers, two product registers, adder tree, accumulator,
    then the requantiser, shared by the ``pe`` lanes over
    :func:`~.requant.requant_units` ``(pe, sf)`` physical lanes unless ``thresholds``
    replace it, or ``stream_input`` (latency mode: one lane a PE)); the queue adds
    :attr:`~.stream.CreditQueue.latency`."""
    units = pe if stream_input else requant_units(pe, sf, requantize and not thresholds)
    early = stream_input and not thresholds
    return 5 + adder_tree_depth(simd, stream_input) + \
        requant_latency(pe, units, requantize, early)


def mvau_weight_entries(weights: np.ndarray, pe: int, simd: int, weight_bits: int = 8
                        ) -> list[list[int]]:
    """Weight memory contents: one list of ``NF * SF`` words per PE, each word
    ``simd`` lanes of ``weight_bits`` packed lane 0 lowest (also the runtime load
    format; codes as :func:`.multipliers.encode_weights`)."""
    mh, mw = weights.shape
    nf, sf = mh // pe, mw // simd
    w = encode_weights(np.asarray(weights, np.int64).reshape(nf, pe, sf, simd), weight_bits)
    shifts = np.arange(simd, dtype=object) * weight_bits
    out = []
    for p in range(pe):
        words = []
        for f in range(nf):
            for s in range(sf):
                words.append(int(sum(int(v) << int(b) for v, b in zip(w[f, p, s], shifts))))
        out.append(words)
    return out


class MVAU(Component):
    """Matrix-vector-activation unit; see the module docstring.

    ``weights`` int8 [mh, mw] (``None`` with ``runtime=True``: loaded through ``wr``,
    memory ``p`` = PE ``p``'s weights, memory ``pe + p`` = PE ``p``'s requantisation
    parameters).  ``multiplier``/``shift`` ``None`` (and ``requantize=False``) gives
    int32 outputs.  ``latency``: cycles from issuing the last beat of a vector to its
    output being written into the output queue.  ``ff_style="trellis"``: the per-PE
    copies of the input vector are ECP5 ``TRELLIS_FF`` primitives (see :mod:`._ff`).
    ``lut_mults``: how many of the ``pe * simd`` products are LUT multipliers (the
    highest-indexed lanes, or pairs of them: :func:`~.multipliers.lane_kinds`);
    ``weight_bits``: the width the weights are held in (1:
    bipolar); ``act_bits``: the width of the activation operand (2-8: the input lanes'
    values must lie in its two's complement range, as an upstream requantiser's rails
    guarantee); see :mod:`.multipliers`.  ``stream_input``: latency mode (see the module
    docstring).
    """

    def __init__(self, name: str, mw: int, mh: int, pe: int, simd: int, *,
                 weights: np.ndarray | None = None, bias: np.ndarray | None = None,
                 multiplier: np.ndarray | None = None, shift: np.ndarray | None = None,
                 relu: bool = False, requantize: bool = True, runtime: bool = False,
                 ff_style: str = "plain", clamp: Clamp | None = None,
                 thresholds: np.ndarray | None = None, lut_mults: int = 0,
                 weight_bits: int = 8, act_bits: int = 8, stream_input: bool = False
                 ) -> None:
        if pe < 1 or simd < 1 or mh % pe or mw % simd:
            raise HardwareConfigError(
                f"MVAU {name!r}: PE={pe} must divide MH={mh} and SIMD={simd} must divide "
                f"MW={mw}")
        self.name, self.mw, self.mh, self.pe, self.simd = name, mw, mh, pe, simd
        check_ff_style(f"MVAU {name!r}", ff_style)
        check_lane_options(f"MVAU {name!r}", pe, simd, lut_mults, weight_bits, act_bits)
        self.lut_mults, self.weight_bits, self.act_bits = lut_mults, weight_bits, act_bits
        self.sf, self.nf = mw // simd, mh // pe
        self.runtime, self.ff_style = runtime, ff_style
        self.stream_input = stream_input
        if runtime:
            self.weight_words = None
        else:
            if weights is None:
                raise HardwareConfigError(f"MVAU {name!r}: const weights need a weight matrix")
            w = as_int_array(name if weight_bits == 8 else f"{name} (weight_bits={weight_bits})",
                             "weights", weights, (mh, mw), *weight_range(weight_bits))
            if weight_bits == 1 and not np.all(w):
                raise HardwareConfigError(f"MVAU {name!r}: bipolar weights (weight_bits=1) "
                                          "are -1 or +1, not 0")
            self.weight_words = mvau_weight_entries(w, pe, simd, weight_bits)
        self.requant = RequantPipe(name, pe, mh, bias=bias, multiplier=multiplier,
                                   shift=shift, relu=relu, requantize=requantize,
                                   runtime=runtime, ff_style=ff_style, clamp=clamp,
                                   thresholds=thresholds,
                                   # a PE group of accumulators every SF cycles at most
                                   units=pe if stream_input else
                                   requant_units(pe, self.sf, thresholds is None),
                                   # latency mode: the parameters read ahead
                                   early=stream_input and thresholds is None)
        self.out_bits = self.requant.out_bits
        self.tree_depth = adder_tree_depth(simd, stream_input)
        # issue -> memory data (1) -> fabric regs (2) -> product (3) -> product (4)
        # -> tree levels -> accumulator
        self.acc_latency = 5 + self.tree_depth
        self.latency = self.acc_latency + self.requant.latency
        assert self.latency == mvau_latency(simd, requantize, pe=pe, sf=self.sf,
                                            thresholds=thresholds is not None,
                                            stream_input=stream_input)
        self.queue_depth = credit_depth(self.latency, self.sf)
        self.word_bits = weight_bits * simd
        members = {"i": In(stream.Signature(8 * simd)),
                   "o": Out(stream.Signature(self.out_bits * pe))}
        if runtime:
            self.wr_addr_width = max(ceil_log2(self.nf * self.sf), ceil_log2(self.nf))
            self.wr_data_width = max(self.word_bits, PARAM_ENTRY_BITS)
            members["wr"] = In(ParamWriteSignature(2 * pe, self.wr_addr_width,
                                                   self.wr_data_width))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        pe, simd, sf, nf = self.pe, self.simd, self.sf, self.nf
        m.submodules.requant = rq = self.requant
        m.submodules.queue = q = CreditQueue(self.out_bits * pe, self.queue_depth)

        # ---- input double buffer ------------------------------------------------
        sf_bits = ceil_log2(sf)
        m.submodules.inbuf = inbuf = Memory(shape=8 * simd, depth=2 << sf_bits, init=[])
        in_wp = inbuf.write_port()
        in_rp = inbuf.read_port(domain="sync")
        full = Signal(2)
        wbank = Signal()
        wsf = Signal(range(max(2, sf)))
        take = self.i.valid & self.i.ready
        m.d.comb += [
            self.i.ready.eq(~full.bit_select(wbank, 1)),
            in_wp.en.eq(take),
            in_wp.addr.eq(Cat(wsf, wbank) if sf_bits else wbank),
            in_wp.data.eq(self.i.payload),
        ]
        set_full = Signal(2)
        clr_full = Signal(2)
        with m.If(take):
            with m.If(wsf == sf - 1):
                m.d.sync += [wsf.eq(0), wbank.eq(~wbank)]
                m.d.comb += set_full.bit_select(wbank, 1).eq(1)
            with m.Else():
                m.d.sync += wsf.eq(wsf + 1)

        # ---- issue --------------------------------------------------------------
        rbank = Signal()
        isf = Signal(range(max(2, sf)))
        inf = Signal(range(max(2, nf)))
        waddr = Signal(range(max(2, nf * sf)))
        last_sf = isf == sf - 1
        last_nf = inf == nf - 1
        issue = Signal()
        # the beat isf of bank rbank is in the buffer
        ready: Value = full.bit_select(rbank, 1)
        if self.stream_input:  # latency mode: fold 0 follows the beats being written
            ready = ready | ((wbank == rbank) & (wsf > isf))
        m.d.comb += [
            issue.eq(ready & (~last_sf | q.can_issue)),
            q.issue.eq(issue & last_sf),
            in_rp.addr.eq(Cat(isf, rbank) if sf_bits else rbank),
        ]
        with m.If(issue):
            m.d.sync += waddr.eq(Mux(last_sf & last_nf, 0, waddr + 1))
            with m.If(last_sf):
                m.d.sync += isf.eq(0)
                with m.If(last_nf):
                    m.d.sync += [inf.eq(0), rbank.eq(~rbank)]
                    m.d.comb += clr_full.bit_select(rbank, 1).eq(1)
                with m.Else():
                    m.d.sync += inf.eq(inf + 1)
            with m.Else():
                m.d.sync += isf.eq(isf + 1)
        m.d.sync += full.eq((full | set_full) & ~clr_full)

        # control pipeline: valid / first / last / neuron fold, aligned with the data
        def delay(sig: Value, n: int, tag: str) -> list[Value]:
            chain = [sig]
            for i in range(n):
                r = Signal(len(chain[-1]), name=f"{tag}_d{i + 1}")
                m.d.sync += r.eq(chain[-1])
                chain.append(r)
            return chain

        first_issue = Signal()
        m.d.comb += first_issue.eq(isf == 0)
        lat = self.acc_latency
        v = delay(issue, lat, "valid")
        first = delay(first_issue, lat, "first")
        last = delay(last_sf, lat, "last")
        nfi = delay(inf, lat, "nf")

        # ---- per-PE datapath ----------------------------------------------------
        # stage 2: fabric registers after the memory reads (a private copy of the input
        # vector per PE), one register per lane; stages 3 and 4: the product, twice
        wb, ab = self.weight_bits, self.act_bits
        lut = lane_kinds(pe, simd, self.lut_mults, wb, ab)
        pairs = dsp_pairs(pe, simd, self.lut_mults, wb, ab)
        width = product_bits(wb, ab)
        # PE p and p + 1 share a multiplier in lane s (pairs): the product is made with
        # PE p + 1's lane, and PE p's adder tree waits for it
        lanes: list[list[tuple[Signal, Signal]]] = []
        prods: list[list[Value | None]] = []
        carries: list[list[Value]] = []  # a shared DSP's correction bits, per PE
        accs: list[Value] = []
        for p in range(pe):
            init = None if self.weight_words is None else self.weight_words[p]
            wrp = param_memory(m, f"weights{p}", depth=nf * sf, width=self.word_bits,
                               init=init, write=getattr(self, "wr", None), write_index=p)
            m.d.comb += wrp.addr.eq(waddr)
            lanes.append([])
            prods.append([])
            carries.append([])
            for s in range(simd):
                code = wrp.data.word_select(s, wb)
                # a bipolar LUT lane keeps the weight's code (bipolar_product); the
                # others the value to multiply
                w2 = Signal(1, name=f"pe{p}_w{s}") if wb == 1 and lut[p][s] else \
                    Signal(signed(weight_lane_bits(wb)), name=f"pe{p}_w{s}")
                x2 = Signal(signed(ab), name=f"pe{p}_xs{s}")
                # free-running datapath registers (module docstring, "Clock enables")
                m.d.sync += w2.eq(code if len(w2) == 1 else decode_weight(code, wb))
                xs = copy_register(m, in_rp.data.word_select(s, 8)[:ab], None,
                                   f"pe{p}_x{s}", self.ff_style)
                m.d.comb += x2.eq(xs)
                lanes[p].append((w2, x2))
                if (p, s) in pairs:
                    prods[p].append(None)
                elif (p - 1, s) in pairs:
                    (w0, x0), (w1, _) = lanes[p - 1][s], lanes[p][s]
                    lo, hi, c = packed_pair(m, v, w0, w1, x0, wb, self.ff_style,
                                            f"pe{p - 1}_{p}_m{s}")
                    prods[p - 1][s] = lo
                    prods[p].append(hi)
                    carries[p].append(c)
                else:
                    prods[p].append(lane_product(
                        m, v, w2, x2, self.ff_style, lut=lut[p][s], width=width,
                        dsp_name=f"pe{p}_{'l' if lut[p][s] else ''}m{s}",
                        p3_name=f"pe{p}_p{s}", p4_name=f"pe{p}_pp{s}"))
            for q_ in range(len(accs), p + 1):  # the PEs whose products are all made
                if any(x is None for x in prods[q_]):
                    break
                accs.append(self._tree_and_acc(m, q_, prods[q_], v, first,
                                               carries[q_]))
        assert len(accs) == pe

        acc_valid = Signal()
        m.d.comb += acc_valid.eq(v[lat] & last[lat])
        m.d.comb += [
            rq.i_valid.eq(acc_valid),
            rq.i_acc.eq(Cat(*accs)),
            # the early pipe (latency mode) reads its parameters EARLY_INDEX cycles ahead
            rq.i_idx.eq(nfi[lat - EARLY_INDEX] if rq.early else nfi[lat]),
            q.w_valid.eq(rq.o_valid),
            q.w_data.eq(rq.o_data),
        ]
        if self.runtime:
            m.d.comb += [
                rq.wr.en.eq(self.wr.en[pe:]),
                rq.wr.addr.eq(self.wr.addr),
                rq.wr.data.eq(self.wr.data),
            ]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m

    def _tree_and_acc(self, m: Module, p: int, prods: list[Value], v: list[Value],
                      first: list[Value], carries: list[Value]) -> Signal:
        """PE ``p``'s registered adder tree over its lanes' products and its int32
        accumulator (cleared by the first synapse fold of each neuron fold).  The
        ``carries`` (1-bit, aligned with the products: the shared DSPs' corrections)
        are the carry-ins of the tree's adders, then the accumulator's, each delayed to
        its adder's stage (a tree has SIMD - 1 adders: with the accumulator's, one for
        each of at most SIMD corrections)."""
        lat = self.acc_latency
        pending = list(carries)
        levels = ceil_log2(len(prods))
        # latency mode: a register after the first level (no logic on the routes from
        # the multipliers: a build with the first two levels together ran at 90 MHz,
        # its critical path a MULT18X18D's 6.5 ns route into the adders), then after
        # every second level, and the last
        registered = [not self.stream_input or lvl % 2 == 0 or lvl == levels - 1
                      for lvl in range(levels)]

        def carry(level: int) -> Value | None:
            """The next correction bit, delayed to the inputs of tree level ``level``."""
            if not pending:
                return None
            c, i = pending.pop(0), len(carries) - len(pending) - 1
            for d in range(sum(registered[:level])):
                r = Signal(name=f"pe{p}_c{i}_d{d + 1}")
                m.d.sync += r.eq(c)
                c = r
            return c

        level = 0
        while len(prods) > 1:
            nxt = []
            for j in range(0, len(prods), 2):
                pair = prods[j:j + 2]
                total = pair[0] + pair[1] if len(pair) == 2 else pair[0]
                c = carry(level)
                if c is not None:
                    total = total + c
                if registered[level]:
                    r = Signal(signed(len(pair[0]) + 1), name=f"pe{p}_t{level}_{j // 2}")
                    m.d.sync += r.eq(total)
                    nxt.append(r)
                else:
                    nxt.append(total)
            prods = nxt
            level += 1
        total = prods[0]
        while pending:  # the rest (at most one) into the accumulator's adder
            c = carry(level)
            assert c is not None
            total = total + c
        # accumulator
        acc = Signal(signed(32), name=f"pe{p}_acc")
        k = lat - 1  # the tree output is aligned with control stage lat - 1
        with m.If(v[k]):
            m.d.sync += acc.eq(Mux(first[k], 0, acc) + total)
        return acc
