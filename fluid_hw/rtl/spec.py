"""Stage specifications: what the top-level generator builds, as plain data.

``fluid_hw.hls.stages`` subclasses these with estimates; the top generator
(:class:`~.top.AcceleratorTop`) only needs what is here.  Conventions:

* Weights of a fully-connected stage are ``[mh, mw]`` (one row per output channel),
  the transpose of ``quantized_fc``'s ``W [K, C]`` (use :meth:`MVAUSpec.from_fc`).
* Convolution filters are ``[M, C, kh, kw]`` as in ``quantized_conv2d``.
* Images stream in HWC order (channel fastest) into and out of every image stage; a
  fully-connected stage after one takes its input in that order too, so its weight
  columns must be permuted from CHW (:func:`hwc_order`).
* ``weights_mode="runtime"``: weights, bias, multiplier and shift (a table's entries, a
  join's or a concat's multipliers and shifts) are not built into the hardware but loaded through
  the AXI4-Lite window (:func:`param_image`, from each stage's
  :meth:`~StageSpec.param_memories` and :meth:`~StageSpec.param_entries`); the arrays
  given here, if any, are the values the host loads by default.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from math import gcd
from typing import Any

import numpy as np

from ._lane import Clamp
from ._util import HardwareConfigError, as_int_array, ceil_log2
from .multipliers import check_lane_options, weight_range
from .mvau import mvau_weight_entries
from .requant import PARAM_ENTRY_BITS, requant_entries
from .swg import WindowGeometry

__all__ = ["StageSpec", "MVAUSpec", "ConvSpec", "MaxPoolSpec", "ParamSegment", "SPEC_KINDS",
           "spec_from_structure", "param_layout", "param_image", "design_hash", "hwc_order"]

#: stage kind (``StageSpec.kind``, the ``kind`` of a design.json stage) -> its spec class;
#: every spec class with a ``kind`` of its own registers itself here
SPEC_KINDS: dict[str, type[StageSpec]] = {}


def hwc_order(channels: int, height: int, width: int) -> np.ndarray:
    """Index array ``idx`` with ``x_hwc = x_chw.reshape(-1)[idx]``: the element order in
    which an image stage streams a CHW tensor.  A following fully-connected stage's
    weight columns are ``W[:, idx]``."""
    return np.arange(channels * height * width).reshape(channels, height, width) \
        .transpose(1, 2, 0).reshape(-1)


def _pair(name: str, what: str, v: int | tuple[int, ...]) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(int(x) for x in v)
    if len(t) != 2:
        raise HardwareConfigError(f"{name}: {what} must be an int or a pair, got {v!r}")
    return t


def _pads(name: str, v: int | tuple[int, ...]) -> tuple[int, int, int, int]:
    """Padding as int, (ph, pw) or (top, left, bottom, right)."""
    t = (v,) * 4 if isinstance(v, int) else tuple(int(x) for x in v)
    if len(t) == 2:
        t = (t[0], t[1], t[0], t[1])
    if len(t) != 4:
        raise HardwareConfigError(f"{name}: padding must be an int, a pair or 4 values "
                                  f"(top, left, bottom, right), got {v!r}")
    return t


def _digest(a: np.ndarray | None) -> str | None:
    return None if a is None else hashlib.sha256(
        np.ascontiguousarray(np.asarray(a, np.int64)).tobytes()).hexdigest()[:16]


class StageSpec:
    """Common interface of stage specifications.

    A kind of stage is a subclass with its own ``kind`` (registered in
    :data:`SPEC_KINDS`) that says what hardware it is (:meth:`component`), what it
    computes (:meth:`model`), how it streams (``in_len``/``out_len``, lanes) and how it
    reads back from a design description (:meth:`from_structure`).  The top-level
    generator knows stages only through this interface."""

    name: str

    kind = "stage"
    #: whether PE x SIMD folding applies (a matrix-like stage: ``pe``, ``simd``,
    #: ``mw``, ``mh``); other stages take their lanes from the stage before them
    folds = False
    #: input streams (a join takes two) and the component's port for each
    n_inputs = 1
    input_ports: tuple[str, ...] = ("i",)
    # stream format: each kind says (properties: most derive it from their shape)
    @property
    def in_len(self) -> int:
        """Elements per inference in."""
        raise NotImplementedError

    @property
    def out_len(self) -> int:
        """Elements per inference out."""
        raise NotImplementedError

    @property
    def in_lanes(self) -> int:
        """Elements per input beat."""
        raise NotImplementedError

    @property
    def out_lanes(self) -> int:
        """Elements per output beat."""
        raise NotImplementedError

    @property
    def out_bits(self) -> int:
        """Bits per output element."""
        return 8

    @property
    def runtime(self) -> bool:
        """Whether the stage's parameters are written at run time."""
        return False


    def validate(self) -> None:  # pragma: no cover - overridden
        pass

    def port_len(self, port: int) -> int:
        """Elements per inference on input ``port`` (``in_len`` unless the ports differ:
        a concat)."""
        return self.in_len

    def port_shape(self, port: int) -> tuple[int, ...] | None:
        """The per-example shape arriving on input ``port`` (None: not recorded)."""
        shape = getattr(self, "in_shape", None)
        return None if shape is None else tuple(shape)

    def structure(self) -> dict[str, Any]:
        """Everything that shapes the hardware (used for hashing and reports)."""
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """Digests of the parameter arrays (hashed only when built in)."""
        return {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None and kind not in SPEC_KINDS:
            SPEC_KINDS[kind] = cls

    def lanes_after(self, prev: int) -> tuple[int, int]:
        """(input lanes, output lanes) of this stage behind a producer of ``prev``
        lanes (a stage without lanes of its own takes what it can of ``prev``)."""
        return self.in_lanes, self.out_lanes

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        """The Amaranth component (stream ports ``i``, ``o``; ``wr`` for runtime
        parameters) for these lanes."""
        raise HardwareConfigError(f"stage {self.name!r}: kind {self.kind!r} has no component")

    def model(self, x: np.ndarray) -> np.ndarray:
        """Behavioural model: input vectors ``[N, in_len]`` in stream order -> output
        vectors ``[N, out_len]`` (int64), from the spec's current arrays."""
        raise HardwareConfigError(f"stage {self.name!r}: kind {self.kind!r} has no model")

    def cycle_bound(self) -> int:
        """A generous bound of the cycles one inference spends in the stage (for the
        simulators' hang detection)."""
        return self.in_len + self.out_len + 64

    def macs(self) -> int:
        """Multiply-accumulates per inference (0 for stages without multipliers)."""
        return 0

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """The memories a runtime stage loads through the register map, in the order of
        its component's ``wr.en`` bits: ``(kind, index, depth, entry_bits)`` each
        (``kind`` names the entry format in registers.md, ``index`` the PE or lane).
        Empty for a stage whose parameters are built in."""
        return []

    def param_entries(self) -> list[list[int]]:
        """The entries of each of :meth:`param_memories` from the spec's current arrays
        (the load format)."""
        return []

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> StageSpec:
        """The stage rebuilt from its :meth:`structure` (with zero arrays where the
        parameters were built in): for estimates and folding, not for hardware."""
        raise NotImplementedError


def spec_from_structure(st: dict[str, Any]) -> StageSpec:
    """A stage of any kind from its :meth:`StageSpec.structure` (a design.json stage)."""
    kind = st.get("kind")
    cls = SPEC_KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise HardwareConfigError(f"stage {st.get('name')!r}: unknown kind {kind!r} (known: "
                                  f"{', '.join(sorted(SPEC_KINDS))})")
    try:
        return cls.from_structure(st)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise HardwareConfigError(f"stage {st.get('name')!r}: incomplete {kind} structure "
                                  f"({e!r}); recompile the build") from None


def zero_params(st: dict[str, Any], mh: int) -> dict[str, Any]:
    """Placeholder bias / multiplier / shift of a ``const`` matrix stage read back from
    its structure (the estimates do not depend on the values)."""
    arr: dict[str, Any] = {}
    if st.get("bias"):
        arr["bias"] = np.zeros(mh, np.int64)
    if st.get("requantize", True):
        arr["multiplier"] = np.ones(mh, np.int64)
        arr["shift"] = np.zeros(mh, np.int64)
    return arr


class _WindowMixin(StageSpec):
    """Shared by the stages that slide a window over an HWC-streamed image of
    ``in_shape = (C, H, W)``: the normalised geometry and the stream lengths.
    ``_out_channels`` is C unless the stage says otherwise (a convolution)."""

    in_shape: tuple[int, int, int]
    kernel: int | tuple[int, int]
    stride: int | tuple[int, int] | None
    padding: int | tuple[int, ...]
    dilation: int | tuple[int, int]  # the kinds that have one (convolutions)

    def _normalise_window(self) -> None:
        """In ``__post_init__``: pairs and (top, left, bottom, right) pads; a stride of
        None is the kernel (pooling)."""
        self.in_shape = tuple(int(v) for v in self.in_shape)  # type: ignore[assignment]
        self.kernel = _pair(self.name, "kernel", self.kernel)
        self.stride = _pair(self.name, "stride",
                            self.kernel if self.stride is None else self.stride)
        if hasattr(self, "dilation"):
            self.dilation = _pair(self.name, "dilation", self.dilation)
        self.padding = _pads(self.name, self.padding)

    def _check_window(self) -> None:
        if len(self.in_shape) != 3:
            raise HardwareConfigError(f"stage {self.name!r}: in_shape must be (C, H, W)")
        self.geometry.check(f"stage {self.name!r}")

    def _out_channels(self) -> int:
        return self.in_shape[0]

    @property
    def geometry(self) -> WindowGeometry:
        c, h, w = self.in_shape
        return WindowGeometry(c, h, w, self.kernel, self.stride, self.padding,  # type: ignore[arg-type]
                              getattr(self, "dilation", (1, 1)))

    @property
    def out_shape(self) -> tuple[int, int, int]:
        oh, ow = self.geometry.out_hw
        return (self._out_channels(), oh, ow)

    @property
    def in_len(self) -> int:
        c, h, w = self.in_shape
        return c * h * w

    @property
    def out_len(self) -> int:
        m, oh, ow = self.out_shape
        return m * oh * ow

    def _window_structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "in_shape": list(self.in_shape),
                "kernel": list(self.kernel), "stride": list(self.stride),  # type: ignore[arg-type]
                "padding": list(self.padding)}  # type: ignore[arg-type]


class _FollowLanes(StageSpec):
    """Shared by the stages without lanes of their own (``lanes=None``): they take the
    producer's lanes where those divide :meth:`_lane_unit` (the channels of a pool, the
    length of an element-wise stage)."""

    lanes: int | None

    def _lane_unit(self) -> int:
        return self.in_len

    def _check_lanes(self, what: str) -> None:
        if self.lanes is not None and (self.lanes < 1 or self._lane_unit() % self.lanes):
            raise HardwareConfigError(f"stage {self.name!r}: lanes={self.lanes} must divide "
                                      f"the {self._lane_unit()} {what}")

    @property
    def in_lanes(self) -> int:
        return self.lanes or 1

    @property
    def out_lanes(self) -> int:
        return self.lanes or 1

    def lanes_after(self, prev: int) -> tuple[int, int]:
        lanes = self.lanes if self.lanes is not None else gcd(prev, self._lane_unit())
        return lanes, lanes


class _ShapeMixin(StageSpec):
    """An element-wise stage over one value of ``shape`` (per example): the same shape
    and length in and out."""

    shape: tuple[int, ...]

    def _check_shape(self) -> None:
        if not self.shape or any(d < 1 for d in self.shape):
            raise HardwareConfigError(f"stage {self.name!r}: shape {list(self.shape)} must be "
                                      "known and positive")

    @property
    def in_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def in_len(self) -> int:
        return int(np.prod(self.shape))

    @property
    def out_len(self) -> int:
        return self.in_len


class _MatrixMixin(StageSpec):
    """Shared by MVAU and convolution stages: the matrix and its requantisation."""

    mw: int
    mh: int
    pe: int
    simd: int
    bias: np.ndarray | None
    multiplier: np.ndarray | None
    shift: np.ndarray | None
    relu: bool
    weights_mode: str
    requantize: bool
    clamp: Clamp | None
    thresholds: np.ndarray | None
    lut_mults: int
    weight_bits: int
    act_bits: int
    #: whether the kind's unit takes ``lut_mults`` / ``weight_bits`` / ``act_bits`` (the PE x SIMD
    #: matrix units; the per-channel ones hold int8 weights in DSP lanes)
    lane_options = True

    def _check_matrix(self) -> None:
        n = self.name
        if self.weights_mode not in ("const", "runtime"):
            raise HardwareConfigError(f"stage {n!r}: weights_mode must be 'const' or "
                                      f"'runtime', not {self.weights_mode!r}")
        if self.pe < 1 or self.mh % self.pe:
            raise HardwareConfigError(f"stage {n!r}: PE={self.pe} must divide the "
                                      f"{self.mh} output channels")
        if self.simd < 1 or self.mw % self.simd:
            raise HardwareConfigError(f"stage {n!r}: SIMD={self.simd} must divide the "
                                      f"{self.mw} inputs per output (MW)")
        if self.mw * 127 * 128 >= 2**31:
            raise HardwareConfigError(f"stage {n!r}: MW={self.mw} can overflow the int32 "
                                      "accumulator")
        if not self.lane_options and (self.lut_mults or self.weight_bits != 8
                                      or self.act_bits != 8):
            raise HardwareConfigError(f"stage {n!r}: a {self.kind} stage has int8 weights and "
                                      "activations in DSP lanes (lut_mults=0, weight_bits=8, "
                                      f"act_bits=8), got lut_mults={self.lut_mults}, "
                                      f"weight_bits={self.weight_bits}, "
                                      f"act_bits={self.act_bits}")
        check_lane_options(f"stage {n!r}", self.pe, self.simd, self.lut_mults,
                           self.weight_bits, self.act_bits)
        w = self.matrix()
        tag = f"stage {n!r}"
        if w is None and self.weights_mode == "const":
            raise HardwareConfigError(f"stage {n!r}: const weights need the weight array")
        if w is not None:
            wb = self.weight_bits
            arr = as_int_array(tag if wb == 8 else f"{tag} (weight_bits={wb})", "weights", w,
                               (self.mh, self.mw), *weight_range(wb))
            if wb == 1 and not np.all(arr):
                raise HardwareConfigError(f"stage {n!r}: bipolar weights (weight_bits=1) are "
                                          "-1 or +1, not 0")
        if self.bias is not None:
            as_int_array(tag, "bias", self.bias, (self.mh,), -2**31, 2**31 - 1)
        if self.thresholds is not None:
            if self.clamp is None or self.weights_mode != "const" or not self.requantize:
                raise HardwareConfigError(f"stage {n!r}: a multi_threshold stage needs const "
                                          "parameters (weights='const': the runtime "
                                          "parameter load has no threshold entries) and "
                                          "the output's rails (clamp)")
            as_int_array(tag, "thresholds", self.thresholds,
                         (self.mh, int(np.shape(self.thresholds)[1])), -2**31, 2**31 - 1)
        elif self.requantize:
            if self.weights_mode == "const" and (self.multiplier is None or self.shift is None):
                raise HardwareConfigError(f"stage {n!r}: requantisation needs 'multiplier' and "
                                          "'shift' (or requantize=False for int32 outputs)")
            if self.multiplier is not None:
                as_int_array(tag, "multiplier", self.multiplier, (self.mh,), 0, 2**15 - 1)
            if self.shift is not None:
                as_int_array(tag, "shift", self.shift, (self.mh,), 0, 47)
        elif self.relu:
            raise HardwareConfigError(f"stage {n!r}: relu needs requantisation")

    folds = True

    @property
    def fold_dims(self) -> tuple[int, int]:
        """``(mw, mh)`` of the folding: SIMD divides mw, PE divides mh."""
        return self.mw, self.mh

    def matrix(self) -> np.ndarray | None:
        raise NotImplementedError

    def _model_inputs(self, x: np.ndarray) -> np.ndarray:
        """``x``, refused where a value lies outside the activation operand's range
        (``act_bits``): the hardware keeps only those bits of each lane."""
        x = np.asarray(x)
        if self.act_bits < 8 and x.size:
            lo, hi = -(1 << (self.act_bits - 1)), (1 << (self.act_bits - 1)) - 1
            if x.min() < lo or x.max() > hi:
                raise HardwareConfigError(
                    f"stage {self.name!r}: inputs in [{x.min()}, {x.max()}] but the stage "
                    f"multiplies {self.act_bits}-bit activations ([{lo}, {hi}]); build it "
                    "with the act_bits of its input's range (act_operand_bits)")
        return x

    def _model_weights(self, w: np.ndarray | None) -> np.ndarray:
        """``w`` (the stage's weights), which the behavioural model needs."""
        if w is None:
            raise HardwareConfigError(f"stage {self.name!r}: the behavioural model needs "
                                      "the weight array (this runtime stage has none)")
        return w

    def _unit_kwargs(self, ff_style: str) -> dict[str, Any]:
        """Keyword arguments of the MVAU behind the stage."""
        kw: dict[str, Any] = dict(bias=self.bias, multiplier=self.multiplier,
                                  shift=self.shift, relu=self.relu,
                                  requantize=self.requantize, runtime=self.runtime,
                                  ff_style=ff_style)
        if self.clamp is not None:
            kw["clamp"] = self.clamp
        if self.thresholds is not None:
            kw["thresholds"] = self.thresholds
        if self.lut_mults:
            kw["lut_mults"] = self.lut_mults
        if self.weight_bits != 8:
            kw["weight_bits"] = self.weight_bits
        if self.act_bits != 8:
            kw["act_bits"] = self.act_bits
        if not self.runtime:
            kw["weights"] = self.matrix()
        else:
            kw.update(bias=None, multiplier=None, shift=None)
        return kw

    @property
    def runtime(self) -> bool:
        return self.weights_mode == "runtime"

    @property
    def out_bits(self) -> int:
        return 8 if self.requantize else 32

    @property
    def sf(self) -> int:
        return self.mw // self.simd

    @property
    def nf(self) -> int:
        return self.mh // self.pe

    def params(self) -> dict[str, Any]:
        d = {"weights": _digest(self.matrix()), "bias": _digest(self.bias),
             "multiplier": _digest(self.multiplier), "shift": _digest(self.shift)}
        if self.thresholds is not None:
            d["thresholds"] = _digest(self.thresholds)
        return d

    def _matrix_structure(self) -> dict[str, Any]:
        """The part of :meth:`structure` every matrix kind has."""
        st = {"relu": self.relu, "bias": self.bias is not None, "mode": self.weights_mode,
              "requantize": self.requantize}
        if self.clamp is not None:  # narrow or bipolar rails (int8 designs: no key)
            st["clamp"] = self.clamp.as_list()
        if self.thresholds is not None:  # comparators in place of the requantiser
            st["thresholds"] = int(np.shape(self.thresholds)[1])
        if self.lut_mults:  # LUT multipliers (all-DSP designs: no key)
            st["lut_mults"] = self.lut_mults
        if self.weight_bits != 8:  # narrow weights (int8 designs: no key)
            st["weight_bits"] = self.weight_bits
        if self.act_bits != 8:  # narrow activation operands (int8 designs: no key)
            st["act_bits"] = self.act_bits
        return st

    def weight_entries(self) -> list[list[int]]:
        w = self.matrix()
        if w is None:
            raise HardwareConfigError(f"stage {self.name!r}: no weights to load")
        return mvau_weight_entries(np.asarray(w, np.int64), self.pe, self.simd,
                                   self.weight_bits)

    def requant_entries(self) -> list[int]:
        return requant_entries(self.name, self.mh, self.bias,
                               self.multiplier if self.requantize else None,
                               self.shift if self.requantize else None)

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """Per PE its weights, then per PE its requantisation parameters."""
        if not self.runtime:
            return []
        return ([("weights", p, self.nf * self.sf, self.weight_bits * self.simd)
                 for p in range(self.pe)]
                + [("requant", p, self.nf, PARAM_ENTRY_BITS) for p in range(self.pe)])

    def param_entries(self) -> list[list[int]]:
        rq = self.requant_entries()
        return [*self.weight_entries(), *(rq[p::self.pe] for p in range(self.pe))]


def matrix_kwargs(st: dict[str, Any], mh: int, weight_shape: tuple[int, ...]
                  ) -> dict[str, Any]:
    """A matrix stage's keyword arguments read back from its structure: relu, mode and
    requantisation, and for a ``const`` stage placeholder arrays (weights of
    ``weight_shape``, :func:`zero_params`)."""
    mode = st.get("mode", "const")
    wb = int(st.get("weight_bits", 8))
    # placeholder weights (bipolar ones are -1 or +1)
    arr = {**zero_params(st, mh), "weights": np.full(weight_shape, int(wb == 1), np.int64)} \
        if mode == "const" else {}
    out = {"relu": bool(st.get("relu")), "weights_mode": mode,
            "requantize": bool(st.get("requantize", True)),
            "clamp": Clamp.from_list(st.get("clamp")), "lut_mults": int(st.get("lut_mults", 0)),
            "weight_bits": wb, "act_bits": int(st.get("act_bits", 8)), **arr}
    if st.get("thresholds") and mode == "const":
        out["thresholds"] = np.zeros((mh, int(st["thresholds"])), np.int64)
    return out


@dataclass(eq=False, kw_only=True)
class _MatrixFields(_MatrixMixin):
    """The matrix parameters of every matrix kind, as keyword-only fields after the
    kind's own (``name``, its shape)."""

    pe: int = 1
    simd: int = 1
    weights: np.ndarray | None = None
    bias: np.ndarray | None = None
    multiplier: np.ndarray | None = None
    shift: np.ndarray | None = None
    relu: bool = False
    weights_mode: str = "const"
    requantize: bool = True
    #: the requantiser's rails when they are not int8's (narrow / bipolar outputs)
    clamp: Clamp | None = None
    #: int32 [mh, T]: a multi_threshold in place of the requantisation (with clamp)
    thresholds: np.ndarray | None = None
    #: how many of the PE x SIMD products are LUT multipliers (the highest-indexed lanes
    #: ``p * simd + s``; any count, so the folding can fill the LUTs in steps of one
    #: product), the rest MULT18X18Ds (:mod:`.multipliers`)
    lut_mults: int = 0
    #: the width the weights are held in: 1-8 (1: bipolar -1 / +1); memory words of
    #: ``simd * weight_bits``, and at 4 bits or less two products per MULT18X18D
    weight_bits: int = 8
    #: the activation operand's width, 2-8: the input values lie in its two's complement
    #: range (an upstream requantiser's rails); narrower products and adder trees
    act_bits: int = 8


class _PerChannel(_MatrixFields):
    """A matrix kind of one channel a PE lane and no SIMD (``affine``, ``dwconv``): its
    lanes are its PEs."""

    lane_options = False

    def _check_no_simd(self, what: str) -> None:
        if self.simd != 1:
            raise HardwareConfigError(f"stage {self.name!r}: {what} has no SIMD folding "
                                      f"(simd=1), got simd={self.simd}")

    @property
    def in_lanes(self) -> int:
        return self.pe

    @property
    def out_lanes(self) -> int:
        return self.pe


@dataclass(eq=False)
class MVAUSpec(_MatrixFields):
    """A fully-connected layer + requantisation: ``mw`` inputs, ``mh`` outputs,
    ``weights`` int8 [mh, mw]."""

    name: str
    mw: int
    mh: int
    #: latency mode (:mod:`.mvau`): the first neuron fold follows the input beats as they
    #: arrive, the requantiser unshared (``structure()`` names it only when set)
    stream_input: bool = field(default=False, kw_only=True)

    kind = "mvau"

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def from_fc(cls, name: str, w_kc: np.ndarray, **kwargs: Any) -> MVAUSpec:
        """From ``quantized_fc``'s ``W [K, C]`` (transposed to [mh=C, mw=K])."""
        w = np.asarray(w_kc)
        return cls(name, mw=w.shape[0], mh=w.shape[1], weights=w.T, **kwargs)

    def validate(self) -> None:
        self._check_matrix()

    def matrix(self) -> np.ndarray | None:
        return None if self.weights is None else np.asarray(self.weights)

    @property
    def in_len(self) -> int:
        return self.mw

    @property
    def out_len(self) -> int:
        return self.mh

    @property
    def in_lanes(self) -> int:
        return self.simd

    @property
    def out_lanes(self) -> int:
        return self.pe

    def structure(self) -> dict[str, Any]:
        st = {"kind": self.kind, "name": self.name, "mw": self.mw, "mh": self.mh,
              "pe": self.pe, "simd": self.simd, **self._matrix_structure()}
        if self.stream_input:  # latency mode (throughput designs: no key)
            st["stream_input"] = True
        return st

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> MVAUSpec:
        mw, mh = int(st["mw"]), int(st["mh"])
        return cls(st["name"], mw, mh, pe=int(st["pe"]), simd=int(st["simd"]),
                   stream_input=bool(st.get("stream_input", False)),
                   **matrix_kwargs(st, mh, (mh, mw)))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .mvau import MVAU

        kw = self._unit_kwargs(ff_style)
        if self.stream_input:
            kw["stream_input"] = True
        return MVAU(self.name, self.mw, self.mh, self.pe, self.simd, **kw)

    def model(self, x: np.ndarray) -> np.ndarray:
        from .mvau import mvau_model

        x = self._model_inputs(x)
        return np.asarray(mvau_model(x, self._model_weights(self.matrix()), self.bias,
                                     self.multiplier if self.requantize else None,
                                     self.shift, self.relu, self.clamp, self.thresholds),
                          np.int64)

    def cycle_bound(self) -> int:
        return self.nf * self.sf + 64

    def macs(self) -> int:
        return self.mw * self.mh


@dataclass(eq=False)
class ConvSpec(_WindowMixin, _MatrixFields):
    """A convolution (sliding windows + MVAU) + requantisation on an HWC-streamed
    image of ``in_shape = (C, H, W)``; ``weights`` int8 [M, C, kh, kw]."""

    name: str
    in_shape: tuple[int, int, int]
    out_channels: int
    kernel: int | tuple[int, int] = 3
    stride: int | tuple[int, int] = 1
    padding: int | tuple[int, ...] = 0
    dilation: int | tuple[int, int] = 1

    kind = "conv"

    def __post_init__(self) -> None:
        self._normalise_window()
        self.validate()

    def _out_channels(self) -> int:
        return self.out_channels

    @property
    def mw(self) -> int:  # type: ignore[override]
        kh, kw = self.kernel  # type: ignore[misc]
        return kh * kw * self.in_shape[0]

    @property
    def mh(self) -> int:  # type: ignore[override]
        return self.out_channels

    @property
    def window_lanes(self) -> int:
        """Lanes of the window generator's input: gcd(C, SIMD)."""
        return gcd(self.in_shape[0], self.simd)

    @property
    def wide_window(self) -> bool:
        """Whether the windows come from the wide generator (a thin input: fewer
        channels than SIMD, :func:`~.swg_wide.use_wide_window`), ``simd`` elements a
        cycle, rather than ``window_lanes``."""
        from .swg_wide import use_wide_window

        return use_wide_window(self.geometry, self.simd)

    def validate(self) -> None:
        self._check_window()
        if self.weights is not None:
            kh, kw = self.kernel  # type: ignore[misc]
            shape = (self.out_channels, self.in_shape[0], kh, kw)
            if tuple(np.shape(self.weights)) != shape:
                raise HardwareConfigError(f"stage {self.name!r}: filter has shape "
                                          f"{tuple(np.shape(self.weights))}, expected {shape} "
                                          "[M, C, kh, kw]")
        self._check_matrix()

    def matrix(self) -> np.ndarray | None:
        """Filters as the MVAU matrix [M, (ky * kw + kx) * C + c]."""
        if self.weights is None:
            return None
        return np.asarray(self.weights).transpose(0, 2, 3, 1).reshape(self.out_channels, -1)

    @property
    def in_lanes(self) -> int:
        return self.window_lanes

    @property
    def out_lanes(self) -> int:
        return self.pe

    def structure(self) -> dict[str, Any]:
        return {**self._window_structure(), "out_channels": self.out_channels,
                "dilation": list(self.dilation), "pe": self.pe,  # type: ignore[arg-type]
                "simd": self.simd, **self._matrix_structure()}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> ConvSpec:
        c, m = int(st["in_shape"][0]), int(st["out_channels"])
        kh, kw = (int(v) for v in st["kernel"])
        return cls(st["name"], tuple(st["in_shape"]), m,
                   pe=int(st["pe"]), simd=int(st["simd"]), **window_kwargs(st),
                   **matrix_kwargs(st, m, (m, c, kh, kw)))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .conv import ConvUnit

        return ConvUnit(self.name, self.geometry, self.out_channels, self.pe, self.simd,
                        **self._unit_kwargs(ff_style))

    def model(self, x: np.ndarray) -> np.ndarray:
        from .conv import conv2d_model

        c, h, w = self.in_shape
        x = self._model_inputs(x)
        return np.stack([conv2d_model(v.reshape(h, w, c), self._model_weights(self.weights),
                                      self.geometry, self.bias,
                                      self.multiplier if self.requantize else None,
                                      self.shift, self.relu, self.clamp,
                                      self.thresholds).reshape(-1)
                         for v in np.asarray(x)]).astype(np.int64)

    def cycle_bound(self) -> int:
        return _window_bound(self.in_shape, self.geometry, self.nf * self.sf)

    def macs(self) -> int:
        oh, ow = self.geometry.out_hw
        return self.mw * self.mh * oh * ow


@dataclass(eq=False)
class MaxPoolSpec(_WindowMixin, _FollowLanes):
    """Max pooling on an HWC-streamed int8 image of ``in_shape = (C, H, W)``.
    ``lanes`` channels per beat (``None``: the producer's lanes if they divide C)."""

    name: str
    in_shape: tuple[int, int, int]
    kernel: int | tuple[int, int] = 2
    stride: int | tuple[int, int] | None = None
    padding: int | tuple[int, ...] = 0
    lanes: int | None = None

    kind = "maxpool"

    def __post_init__(self) -> None:
        self._normalise_window()
        self.validate()

    def _lane_unit(self) -> int:
        return self.in_shape[0]

    def validate(self) -> None:
        self._check_window()
        self._check_lanes("channels")

    def structure(self) -> dict[str, Any]:
        return {**self._window_structure(), "lanes": self.lanes}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> MaxPoolSpec:
        return cls(st["name"], tuple(st["in_shape"]), kernel=tuple(st["kernel"]),
                   stride=tuple(st["stride"]), padding=tuple(st["padding"]),
                   lanes=structure_lanes(st))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .pool import MaxPool

        return MaxPool(self.name, self.geometry, lanes[0])

    def model(self, x: np.ndarray) -> np.ndarray:
        from .pool import maxpool_model

        c, h, w = self.in_shape
        return np.stack([maxpool_model(v.reshape(h, w, c), self.geometry).reshape(-1)
                         for v in np.asarray(x)]).astype(np.int64)

    def cycle_bound(self) -> int:
        return _window_bound(self.in_shape, self.geometry, 0)


class _ModeMixin(StageSpec):
    """Shared by the lane-following stages whose parameters may be loaded at run time
    (a table, an average pool's requantiser, a join's rescaling): ``weights_mode``
    ``"const"`` | ``"runtime"``."""

    weights_mode: str

    @property
    def runtime(self) -> bool:
        return self.weights_mode == "runtime"

    def _check_mode(self) -> None:
        if self.weights_mode not in ("const", "runtime"):
            raise HardwareConfigError(f"stage {self.name!r}: weights_mode must be 'const' or "
                                      f"'runtime', not {self.weights_mode!r}")

    def _mode_structure(self) -> dict[str, str]:
        """The structure's ``mode``, only where runtime: a const stage's structure (and
        so its design hash) stays what it was before runtime parameters."""
        return {"mode": "runtime"} if self.runtime else {}


def structure_lanes(st: dict[str, Any]) -> int | None:
    """A lane-following stage's lanes from its structure: design.json holds the stage's
    (in, out) lanes, equal for such a stage; None: follow the producer."""
    lanes = st.get("lanes")
    if isinstance(lanes, list | tuple):
        return int(lanes[0])
    return None if lanes is None else int(lanes)


def window_kwargs(st: dict[str, Any]) -> dict[str, Any]:
    """A window stage's geometry keyword arguments read back from its structure."""
    return {"kernel": tuple(int(v) for v in st["kernel"]), "stride": tuple(st["stride"]),
            "padding": tuple(st["padding"]), "dilation": tuple(st.get("dilation", (1, 1)))}


def _window_bound(in_shape: tuple[int, ...], geom: WindowGeometry, work: int) -> int:
    """Cycle bound of a sliding-window stage (its windows, per-pixel work, rows)."""
    c, h, w = in_shape
    oh, ow = geom.out_hw
    kk = geom.kernel[0] * geom.kernel[1]
    return oh * ow * (kk * c + work) + 8 * oh + h * w * c


# ---- runtime parameter layout -------------------------------------------------------

@dataclass(frozen=True)
class ParamSegment:
    """One runtime memory's place in the PARAM_ADDR word address space."""

    index: int          # segment number: base = index << segment_bits
    stage: str
    stage_index: int    # position of the stage in the pipeline
    kind: str           # entry format: "weights" | "requant" | "table" | "join" | "concat"
    pe: int             # the PE or lane of the memory (0 for a stage's only one)
    depth: int          # entries
    entry_bits: int
    words_per_entry: int  # a power of two
    base: int           # first word address

    @property
    def words(self) -> int:
        return self.depth * self.words_per_entry


def _pow2(n: int) -> int:
    return 1 << ceil_log2(n)


def param_layout(specs: list[StageSpec]) -> tuple[list[ParamSegment], int]:
    """Segments of every runtime stage's memories (:meth:`StageSpec.param_memories`, in
    stage order) and ``segment_bits``: segment ``i`` starts at word ``i << segment_bits``;
    an entry takes a power of two of 32-bit words."""
    raw = [(s.name, si, kind, idx, depth, bits, _pow2(-(-bits // 32)))
           for si, s in enumerate(specs) for kind, idx, depth, bits in s.param_memories()]
    if not raw:
        return [], 0
    bits = ceil_log2(max(d * w for *_, d, _, w in raw))
    segs = [ParamSegment(i, n, si, k, p, d, eb, w, i << bits)
            for i, (n, si, k, p, d, eb, w) in enumerate(raw)]
    return segs, bits


def param_image(specs: list[StageSpec]) -> list[tuple[int, np.ndarray]]:
    """The words to load for the runtime stages' current arrays: a list of
    ``(word_address, uint32 words)``, one per segment (write PARAM_ADDR, then the words
    to PARAM_DATA)."""
    segs, _ = param_layout(specs)
    out = []
    entries: dict[int, list[list[int]]] = {}
    first: dict[int, int] = {}  # a stage's first segment
    for seg in segs:
        s = specs[seg.stage_index]
        if seg.stage_index not in entries:
            entries[seg.stage_index] = s.param_entries()
            first[seg.stage_index] = seg.index
        words = np.zeros(seg.words, np.uint32)
        for e, value in enumerate(entries[seg.stage_index][seg.index - first[seg.stage_index]]):
            for k in range(seg.words_per_entry):
                words[e * seg.words_per_entry + k] = (value >> (32 * k)) & 0xFFFFFFFF
        out.append((seg.base, words))
    return out


def design_hash(specs: list[StageSpec], options: dict[str, Any]) -> str:
    """SHA-256 (hex) of the structure of every stage and the top-level options, plus the
    parameter arrays of stages whose parameters are built in (``const``)."""
    doc = {"options": options,
           "stages": [{**s.structure(), **({} if s.runtime else s.params())} for s in specs]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
