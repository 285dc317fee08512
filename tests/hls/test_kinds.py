"""hls.kinds: the registry of stage kinds (one spec class per kind, a clear error for
an unknown one, the kind each quantised op begins); specs of every kind read back from
their structure with the same estimates; float programs with depthwise convolutions,
average pools and element-wise activations lowered to the new kinds, the pipeline
model bit-exact against the golden model (also on fuzzed shapes); what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluid_hw as fluid
from fluid_hw.boards import get_device
from fluid_hw.errors import UnknownNameError
from fluid_hw.hls.autofold import AutoFoldError, autofold, device_estimate, specs_from_design
from fluid_hw.hls.kinds import KINDS, get_kind, kind_for_op, kind_of
from fluid_hw.hls.lower import lower
from fluid_hw.hls.partition import LoweringError
from fluid_hw.hls.stages import ConvStage, MaxPoolStage, MVAUStage, estimate_pipeline
from fluid_hw.ir import Program
from fluid_hw.passes import quantize
from fluid_hw.rtl import (
    AvgPoolSpec,
    DepthwiseSpec,
    HardwareConfigError,
    TableSpec,
    param_layout,
    stage_lanes,
)
from fluid_hw.rtl.spec import SPEC_KINDS, spec_from_structure
from tests.hls.test_lower import check_stages

L = fluid.layers
RNG = np.random.default_rng(13)


# -- the registry ---------------------------------------------------------------------------

#: the chain kinds (issue 13 added dwconv, avgpool and table)
CHAIN_KINDS = {"mvau", "conv", "dwconv", "maxpool", "avgpool", "table"}


def test_every_kind_has_its_spec_registered_under_its_name():
    assert set(KINDS) >= CHAIN_KINDS
    for name, kind in KINDS.items():
        assert kind.name == name == kind.spec.kind
        # the hls classes (MVAUStage...) extend the rtl spec registered for the kind
        assert issubclass(kind.spec, SPEC_KINDS[name]), name
        assert get_kind(name) is kind
    assert SPEC_KINDS["dwconv"] is DepthwiseSpec and SPEC_KINDS["avgpool"] is AvgPoolSpec
    assert SPEC_KINDS["table"] is TableSpec


def test_an_unknown_kind_is_named_with_the_known_ones():
    with pytest.raises(UnknownNameError) as e:
        get_kind("nope")
    assert str(e.value) == f"unknown stage kind 'nope'. Known: {', '.join(sorted(KINDS))}"
    with pytest.raises(HardwareConfigError, match=r"stage 's': unknown kind 'nope' \(known: "
                                                  f"{', '.join(sorted(SPEC_KINDS))}\\)"):
        spec_from_structure({"kind": "nope", "name": "s"})
    with pytest.raises(AutoFoldError, match="unknown kind 'nope'"):
        specs_from_design([{"kind": "nope", "name": "s"}])


def _op_program() -> tuple[Program, dict[str, object]]:
    """Quantised ops on an int8 image [4, 6, 6] (and a vector [8]), one of each form."""
    p = Program()
    b = p.global_block()
    b.create_var(name="img", shape=[-1, 4, 6, 6], dtype="int8")
    b.create_var(name="vec", shape=[-1, 8], dtype="int8")
    filters = {"f_full": [3, 4, 3, 3], "f_dw": [4, 1, 3, 3], "f_group": [4, 2, 3, 3],
               "f_mult": [8, 1, 3, 3]}
    for name, shape in filters.items():
        b.create_var(name=name, shape=shape, dtype="int8", persistable=True)
    b.create_var(name="w", shape=[8, 3], dtype="int8", persistable=True)
    b.create_var(name="table", shape=[256], dtype="int8", persistable=True)
    ops: dict[str, object] = {}

    def add(key, type_, ins, out_slot, attrs=None):
        out = b.create_var(name=f"{key}.out", dtype="int32")
        ops[key] = b.append_op(type_, {k: [v] for k, v in ins.items()}, {out_slot: [out.name]},
                               attrs or {})

    add("fc", "quantized_fc", {"X": "vec", "W": "w"}, "Out")
    add("conv", "quantized_conv2d", {"Input": "img", "Filter": "f_full"}, "Output")
    add("dw", "quantized_conv2d", {"Input": "img", "Filter": "f_dw"}, "Output", {"groups": 4})
    add("grouped", "quantized_conv2d", {"Input": "img", "Filter": "f_group"}, "Output",
        {"groups": 2})
    # groups = channels but two filters per channel (a channel multiplier)
    add("dw_mult", "quantized_conv2d", {"Input": "img", "Filter": "f_mult"}, "Output",
        {"groups": 4})
    for kind in ("max", "sum", "avg"):
        add(kind, "quantized_pool2d", {"X": "img"}, "Out",
            {"pooling_type": kind, "ksize": [2, 2], "strides": [2, 2]})
    add("table", "quantized_table", {"X": "vec", "Table": "table"}, "Out")
    add("relu", "relu", {"X": "vec"}, "Out")
    return p, ops


def test_kind_for_op_picks_the_kind_each_op_begins():
    p, ops = _op_program()
    want = {"fc": "mvau", "conv": "conv", "dw": "dwconv", "grouped": None, "dw_mult": None,
            "max": "maxpool", "sum": "avgpool", "avg": None, "table": "table", "relu": None}
    got = {key: getattr(kind_for_op(p, op), "name", None) for key, op in ops.items()}
    assert got == want
    # exactly one kind matches each op that has one
    for key, op in ops.items():
        assert sum(k.matches(p, op) for k in KINDS.values()) == (want[key] is not None), key


# -- specs read back from their structure -------------------------------------------------

def _requant(m: int) -> dict[str, np.ndarray]:
    return {"bias": RNG.integers(-999, 999, m), "multiplier": RNG.integers(1, 2**15, m),
            "shift": RNG.integers(14, 20, m)}


def _chain(mode: str) -> list:
    """One stage of every kind (two depthwise: strided / dilated, asymmetric pads), in a
    chain whose shapes connect: [2, 9, 9] -> ... -> 3 outputs."""
    const = mode == "const"

    def arr(shape: tuple[int, ...], m: int) -> dict[str, np.ndarray]:
        return {"weights": RNG.integers(-127, 128, shape), **_requant(m)} if const else {}

    return [
        ConvStage("conv", (2, 9, 9), 6, kernel=3, padding=1, pe=3, simd=6, relu=True,
                  weights_mode=mode, **arr((6, 2, 3, 3), 6)),
        DepthwiseSpec("dw", (6, 9, 9), kernel=3, stride=2, padding=(1, 0, 1, 2), pe=2,
                      weights_mode=mode, **arr((6, 1, 3, 3), 6)),
        TableSpec("act", (6, 5, 5), RNG.integers(-128, 128, 256)),
        DepthwiseSpec("dw2", (6, 5, 5), kernel=(3, 2), dilation=2, padding=(2, 1), pe=3,
                      relu=True, weights_mode=mode, **arr((6, 1, 3, 2), 6)),
        MaxPoolStage("pool", (6, 5, 5), 2, stride=1),
        AvgPoolSpec("avg", (6, 4, 4), 2, multiplier=21845, shift=20, relu=True),
        AvgPoolSpec("gap", (6, 2, 2), (2, 2), multiplier=16384, shift=16, lanes=3),
        MVAUStage("fc", 6, 3, pe=3, simd=2, weights_mode=mode, requantize=False,
                  **({"weights": RNG.integers(-127, 128, (3, 6)),
                      "bias": RNG.integers(-99, 99, 3)} if const else {})),
    ]


@pytest.mark.parametrize("mode", ["const", "runtime"])
def test_specs_of_every_kind_read_back_with_the_same_estimates(mode):
    specs = _chain(mode)
    assert {s.kind for s in specs} == CHAIN_KINDS
    lanes = stage_lanes(specs)
    for pinned in (False, True):  # design.json records every stage's lanes
        design = [dict(s.structure(), **({"lanes": list(ln)} if pinned else {}))
                  for s, ln in zip(specs, lanes)]
        for back in ([spec_from_structure(dict(d)) for d in design],
                     specs_from_design(design)):
            assert [type(b).kind for b in back] == [s.kind for s in specs]
            for s, b, ln in zip(specs, back, lanes):
                want = s.structure()
                if pinned and want.get("lanes", 0) is None:
                    want["lanes"] = ln[0]  # a lane-following stage keeps the lanes it had
                assert b.structure() == want, s.name
                assert b.runtime == s.runtime and kind_of(b) is kind_of(s)
            assert stage_lanes(back) == lanes
            for fifo in (2, 6):
                assert estimate_pipeline(back, fifo_depth=fifo) == \
                    estimate_pipeline(specs, fifo_depth=fifo)
            for family in ("ecp5", "ice40"):
                assert device_estimate(back, family, fifo_depth=4) == \
                    device_estimate(specs, family, fifo_depth=4)
    # the chain as built: every kind's stream length
    assert [s.out_len for s in specs] == [486, 150, 150, 150, 96, 24, 6, 3]


def test_a_structure_missing_a_field_is_refused():
    bad = _chain("const")[1].structure()
    del bad["kernel"]
    with pytest.raises(HardwareConfigError, match=r"stage 'dw': incomplete dwconv structure "
                                                  r"\(KeyError\('kernel'\)\); recompile"):
        spec_from_structure(bad)
    with pytest.raises(AutoFoldError, match="stage 'dw': incomplete structure"):
        specs_from_design([bad])


def test_autofold_folds_a_depthwise_stage():
    """A depthwise stage folds over its channels only (PE divides C, SIMD 1)."""
    dw = _chain("const")[1]
    a = autofold([dw], get_device("LFE5U-85F"))
    pe, simd = a.folding["dw"]
    assert simd == 1 and dw.in_shape[0] % pe == 0


# -- lowering float programs to the new kinds ------------------------------------------------

def clip(x, lo: float, hi: float):
    """fluid's ``clip`` (no layer for it yet)."""
    h = fluid.LayerHelper("clip")
    out = h.create_variable_for_type_inference(x.dtype)
    h.append_op("clip", {"X": x}, {"Out": out}, {"min": float(lo), "max": float(hi)})
    return out


def _quantised(body, shape, seed: int = 0):
    """The float program ``body(x)`` on an input of ``shape``, initialised and quantised
    with random calibration data: (program, scope, fetch name)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed + 1
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=list(shape), dtype="float32")
        y = body(x)
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
    rng = np.random.default_rng(seed)
    calib = [{"x": rng.standard_normal((16, *shape)).astype(np.float32)} for _ in range(2)]
    q = quantize(main, calib, scope=scope, executor=exe, feed_names=["x"],
                 fetch_names=[y.name])
    return q, scope, y.name


def _mixed(x):
    h = L.conv2d(x, 4, 3, padding=1)
    h = L.conv2d(h, 4, 3, padding=1, groups=4)      # depthwise
    h = L.relu(L.tanh(h))                           # relu after a table
    h = L.relu(L.pool2d(h, 2, "avg", 2))            # relu after an average pool
    h = L.sigmoid(L.conv2d(h, 3, 1))
    h = L.pool2d(h, pool_type="avg", global_pooling=True)
    return L.fc(h, 5)


def _activations(x):
    h = L.leaky_relu(L.fc(x, 8), 0.1)
    h = clip(L.scale(h, 0.5, 0.25), -1.0, 1.0)
    h = L.scale(L.relu(h), 2.0)                     # relu after a table, then a table
    return L.fc(h, 3)


def _image_tables(x):
    h = L.leaky_relu(L.conv2d(x, 5, 3, padding=1), 0.2)
    h = L.relu(L.pool2d(h, 2, "max", 2))            # relu after max pool after a table
    h = L.conv2d(h, 5, 3, stride=2, padding=2, dilation=2, groups=5, act="relu")
    h = clip(h, 0.0, 1.5)
    h = L.pool2d(h, 3, "avg", 1, pool_padding=1, exclusive=False)  # inclusive: a sum
    return L.fc(L.sigmoid(h), 3)


@pytest.mark.parametrize("body,shape,kinds,relu,tables", [
    (_mixed, [2, 8, 8],
     ["conv", "dwconv", "table", "avgpool", "conv", "table", "avgpool", "mvau"],
     [False, False, True, True, False, False, False, False], ["tanh", "sigmoid"]),
    (_activations, [6], ["mvau", "table", "table", "table", "table", "mvau"],
     [False, False, False, True, False, False], ["leaky_relu", "scale", "clip", "scale"]),
    (_image_tables, [3, 6, 6], ["conv", "table", "maxpool", "dwconv", "table", "avgpool",
                                "table", "mvau"],
     [False, True, False, True, False, False, False, False],
     ["leaky_relu", "clip", "sigmoid"]),
], ids=["mixed", "activations", "image-tables"])
def test_new_kinds_lower_bit_exactly(body, shape, kinds, relu, tables):
    q, scope, fetch = _quantised(body, shape)
    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch])
    assert [s.kind for s in low.stages] == kinds
    assert [s.relu for s in low.stages] == relu
    assert [type(s).kind for s in low.specs] == kinds
    ops = q.global_block().ops
    assert [ops[s.ops[0]].attr("function") for s in low.stages if s.kind == "table"] == tables
    for s, spec in zip(low.stages, low.specs):
        if s.kind == "table" and s.relu:  # the relu after it is folded into its entries
            assert spec.table.min() == 0
            assert np.asarray(scope.find_value(s.params["table"])).min() < 0
    for s in low.stages:
        first = ops[s.ops[0]].type
        assert first == {"mvau": "quantized_fc", "table": "quantized_table",
                         "maxpool": "quantized_pool2d", "avgpool": "quantized_pool2d"}.get(
                             s.kind, "quantized_conv2d"), s.name
        if s.kind == "avgpool":
            assert ops[s.ops[0]].attr("pooling_type") == "sum"
            assert ops[s.ops[1]].type == "requantize"
        if s.kind == "dwconv":
            assert s.fold_dims == (1, s.in_shape[0]) and low.folding[s.name][1] == 1
    # every stage's model and the whole pipeline against the golden model, 32 inputs
    x = np.random.default_rng(1).standard_normal((32, *shape)).astype(np.float32)
    check_stages(low, q, scope, {"x": x})
    assert len(low.fifo) == len(kinds) + 1
    est = low.estimate()
    assert [e.name for e in est.stages] == [s.name for s in low.stages]
    assert est.initiation_interval >= max(e.cycles for e in est.stages)


@pytest.mark.parametrize("weights", ["const", "runtime"])
def test_depthwise_weights_are_a_rom_or_loaded_through_the_registers(weights):
    q, scope, fetch = _quantised(_mixed, [2, 8, 8])
    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch], weights=weights,
                folding={"conv2d_1": (2, 1)})
    dw = low.specs[1]
    assert dw.kind == "dwconv" and dw.runtime == (weights == "runtime")
    assert dw.weights.shape == (4, 1, 3, 3) and (dw.pe, dw.simd) == (2, 1)
    mems = kind_of(dw).memories(dw, (2, 2))
    # per PE: its channels' 3x3 weights, their bias / multiplier / shift
    mem = "rom" if weights == "const" else "ram"
    # two PE lanes' weights; their results come once every 9 cycles: one shared
    # requantiser lane, whose parameters hold both channels of each group (2 x 2 entries)
    assert mems[:3] == [(2 * 9, 8, mem)] * 2 + [(4, 54, mem)]
    segs, _ = param_layout(low.specs)
    if weights == "const":
        assert segs == []
        return
    # every stage with parameters (matrices, tables, average pools, joins) loads them
    assert {s.stage for s in segs} == {s.name for s in low.specs if s.kind != "maxpool"}
    dw_segs = [(s.kind, s.pe, s.depth) for s in segs if s.stage == dw.name]
    assert dw_segs == [("weights", 0, 18), ("weights", 1, 18), ("requant", 0, 2),
                       ("requant", 1, 2)]


@pytest.mark.parametrize("body,what", [
    # its windows divide by different counts: it stays quantized_pool2d avg (a divide)
    (lambda x: L.fc(L.pool2d(L.conv2d(x, 4, 3, padding=1), 2, "avg", 2, pool_padding=1,
                             exclusive=True), 3), "quantized_pool2d (avg) (-> pool2d_0.tmp_0"),
    # grouped, but not depthwise; depthwise with two filters per channel
    (lambda x: L.fc(L.conv2d(L.conv2d(x, 4, 1), 4, 3, padding=1, groups=2), 3),
     "quantized_conv2d (groups=2: only groups=1 and depthwise convolutions, one filter per "
     "channel, have a hardware lowering) (-> conv2d_1.tmp_1.acc)"),
    (lambda x: L.fc(L.conv2d(L.conv2d(x, 4, 1), 8, 3, padding=1, groups=4), 3),
     "quantized_conv2d (groups=4: only groups=1 and depthwise convolutions, one filter per "
     "channel, have a hardware lowering) (-> conv2d_1.tmp_1.acc)"),
], ids=["exclusive-padded-avg", "grouped-conv", "channel-multiplier"])
def test_ops_without_a_kind_between_stages_are_refused_by_name(body, what):
    q, scope, fetch = _quantised(body, [2, 6, 6])
    with pytest.raises(LoweringError) as e:
        lower(q, scope, feed_names=["x"], fetch_names=[fetch])
    msg = str(e.value)
    assert what in msg and "middle of the network" in msg
    assert "the hardware stage quantized_fc" in msg


# -- fuzzed shapes, model level ------------------------------------------------------------------

@st.composite
def _dw_nets(draw):
    c = draw(st.sampled_from([1, 3, 5]))
    h, w = draw(st.integers(3, 9)), draw(st.integers(3, 9))
    k = draw(st.sampled_from([1, 3, 5, 7]))
    d = 1 if k == 1 else draw(st.sampled_from([1, 2]))
    s = draw(st.sampled_from([1, 2]))
    eff = d * (k - 1) + 1
    pad = draw(st.integers(max(0, -(-(eff - min(h, w)) // 2)), eff - 1))
    oh, ow = (h + 2 * pad - eff) // s + 1, (w + 2 * pad - eff) // s + 1
    pool = draw(st.sampled_from(["none", "global", "2x2", "3x3s1p1"]))
    if pool in ("2x2", "3x3s1p1") and min(oh, ow) < 2:
        pool = "global"
    return {"shape": [c, h, w], "k": k, "dilation": d, "stride": s, "pad": pad,
            "relu": draw(st.booleans()), "act": draw(st.sampled_from(
                [None, "sigmoid", "tanh", "leaky_relu"])), "pool": pool,
            "pool_relu": draw(st.booleans()), "seed": draw(st.integers(0, 2**16))}


def _dw_body(n):
    def body(x):
        h = L.conv2d(x, n["shape"][0], n["k"], stride=n["stride"], padding=n["pad"],
                     dilation=n["dilation"], groups=n["shape"][0],
                     act="relu" if n["relu"] else None)
        if n["act"] == "leaky_relu":
            h = L.leaky_relu(h, 0.1)
        elif n["act"]:
            h = getattr(L, n["act"])(h)
        if n["pool"] == "global":
            h = L.pool2d(h, pool_type="avg", global_pooling=True)
        elif n["pool"] == "2x2":
            h = L.pool2d(h, 2, "avg", 2)
        elif n["pool"] == "3x3s1p1":
            h = L.pool2d(h, 3, "avg", 1, pool_padding=1, exclusive=False)
        if n["pool"] != "none" and n["pool_relu"]:
            h = L.relu(h)
        return L.fc(h, 3)
    return body


@settings(max_examples=80, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(n=_dw_nets())
def test_fuzzed_depthwise_pool_table_shapes_match_the_golden_model(n):
    q, scope, fetch = _quantised(_dw_body(n), n["shape"], n["seed"])
    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch])
    # one channel: groups 1, an ordinary convolution
    kinds = ["dwconv" if n["shape"][0] > 1 else "conv"] + (["table"] if n["act"] else []) + \
        ([] if n["pool"] == "none" else ["avgpool"]) + ["mvau"]
    assert [s.kind for s in low.stages] == kinds, n
    dw = low.specs[0]
    assert dw.dilation == (n["dilation"],) * 2 and dw.stride == (n["stride"],) * 2
    x = np.random.default_rng(n["seed"]).standard_normal((16, *n["shape"])) \
        .astype(np.float32)
    check_stages(low, q, scope, {"x": x})
