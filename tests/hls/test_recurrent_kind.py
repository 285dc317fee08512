"""Kind ``recurrent``: a quantised fc + dynamic_lstm / dynamic_gru / DynamicRNN plain
recurrence (+ sequence_last_step)
program lowers to one recurrent stage; its spec (arrays from the scope) reproduces the
CPU executor bit for bit; its cycle model is the component's; the refusals name the op."""

from __future__ import annotations

import numpy as np
import pytest

from fluid_hw.hls.kinds import KINDS, get_kind
from fluid_hw.hls.lower import discover, lower
from fluid_hw.ir.lod import lengths_to_offsets, reversed_rows
from fluid_hw.rtl.recurrent import GATES, recurrent_step_cycles
from tests.rtl._recurrent_programs import golden, quantised_cell, sequences


@pytest.mark.parametrize("cell", ["lstm", "lstm_np", "gru", "tanh"])
def test_recurrence_lowers_to_one_stage_bit_exact(cell):
    qprog, scope, exe, last = quantised_cell(cell, 8, 16)
    found = discover(qprog, ["x"], [last])
    op = {"gru": "quantized_gru", "tanh": "quantized_rnn"}.get(cell, "quantized_lstm")
    assert found.partition.describe()["hw"] == ["quantized_fc", op, "sequence_pool"]
    (st,) = found.stages
    assert st.kind == "recurrent" and st.layout["mode"] == "last"
    assert st.layout["peepholes"] == (cell == "lstm")
    low = lower(qprog, scope, folding={st.name: (4, 2)}, feed_names=["x"], fetch_names=[last])
    (spec,) = low.specs
    assert (spec.pe, spec.simd) == (4, 2)
    rng = np.random.default_rng(2)
    lengths = [1, 50, 3, 1, 17]
    xq, hid = golden(qprog, scope, exe, sequences(rng, 5, 8, lengths))
    np.testing.assert_array_equal(spec.model(xq, lengths), hid[np.cumsum(lengths) - 1])
    kind = get_kind("recurrent")
    assert kind.cycles(spec, (8, 16)) == spec.step_cycles() == recurrent_step_cycles(
        spec.cell, 8, 16, 4, 2, spec.peepholes)
    est = low.estimate()
    assert est.initiation_interval == spec.step_cycles()
    res = kind.resources(spec, (8, 16))
    assert res.dsp >= 4 * 2  # the engine's products and the element-wise unit's
    gates = GATES[spec.cell]
    assert len(kind.memories(spec, (8, 16))) == 4 + 2 * gates * 4 + gates


def test_recurrent_kind_is_registered_before_mvau():
    names = list(KINDS)
    assert names.index("recurrent") < names.index("mvau")


def test_whole_sequence_output_forward_and_reversed():
    qprog, scope, exe, last = quantised_cell("gru", 4, 8, pool=False)
    # the whole hidden sequence as the output: mode "sequence"
    found = discover(qprog, ["x"], [last])
    assert [s.layout["mode"] for s in found.stages] == ["sequence"]
    low = lower(qprog, scope, folding={found.stages[0].name: (2, 4)}, feed_names=["x"],
                fetch_names=[last])
    rng = np.random.default_rng(4)
    lengths = [2, 1, 9]
    xq, hid = golden(qprog, scope, exe, sequences(rng, 3, 4, lengths))
    np.testing.assert_array_equal(low.specs[0].model(xq, lengths), hid)
    rec = next(op for op in qprog.global_block().ops if op.type == "quantized_gru")
    rec.set_attr("is_reverse", True)
    # is_reverse: the same stage, fed each sequence last step first by the driver
    found = discover(qprog, ["x"], [last])
    assert found.stages[0].layout["reverse"] and found.stages[0].layout["mode"] == "sequence"
    xq, hid = golden(qprog, scope, exe, sequences(rng, 3, 4, lengths))
    order = reversed_rows(lengths_to_offsets(lengths))
    got = low.specs[0].model(xq[order], lengths)
    np.testing.assert_array_equal(got[order], hid)
    assert not np.array_equal(low.specs[0].model(xq, lengths), hid)


def test_automatic_folding_for_a_device_limits_pe_and_lanes():
    """At PE 32, the LSTM at 16 x 2 and at 8 x 8, the full reference models did not route
    or missed 100 MHz on the ECP5-85F: the device search offers a recurrent stage at
    most PE 16, 48 / gates (the LSTM 12, so 8 at hidden 32) and 32 lanes (a hand --fold
    may still ask for more), and the report says that this binds."""
    from fluid_hw.hls.autofold import _floor_of, fold_units
    from fluid_hw.hls.folding import candidates
    from fluid_hw.rtl.recurrent_spec import RecurrentSpec

    spec = RecurrentSpec("gru_0", "gru", 10, 64, 1, 1, "last", False)
    (unit,) = fold_units([spec])
    assert unit.max_pe == 16 and unit.max_lanes == get_kind("recurrent").max_lanes == 32
    assert max(pe for pe, _ in candidates(unit.mw, unit.mh)) == 64
    assert max(o.pe for o in unit.options) == 16
    assert max(o.pe * o.simd for o in unit.options) == 32
    assert unit.option(32, 2).pe == 32  # a hand folding is still costed
    lstm = RecurrentSpec("lstm_0", "lstm", 16, 32, 1, 1, "last", True)
    (unit,) = fold_units([lstm])
    assert unit.max_pe == 12
    assert {(o.pe, o.simd) for o in unit.options if o.pe * o.simd == 32} == \
        {(8, 4), (4, 8), (2, 16)}
    fastest = min(unit.options, key=lambda o: (o.ii, o.macs))
    assert (fastest.pe, fastest.simd) == (8, 4)
    assert unit.option(16, 2).ii < fastest.ii
    what, why = _floor_of(unit, fastest)
    assert what == "the stage kind's limit for automatic folding"
    assert "at most PE 12 and 32 lanes" in why
    (rnn,) = fold_units([RecurrentSpec("fc_0", "rnn", 10, 64, 1, 1, "last", False)])
    assert rnn.max_pe == 16
