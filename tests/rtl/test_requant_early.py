# amaranth: UnusedElaboratable=no
"""The latency mode's requantiser (``RequantPipe(early=True)``): the parameter index two
cycles ahead of the accumulators, 7 stages (1 without requantisation), bit-exact
against requantize_model at the contract's extremes; shared lanes and thresholds are
refused."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fluid_hw.rtl._lane import Clamp
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.requant import (
    EARLY_BIAS_ONLY_LATENCY,
    EARLY_INDEX,
    EARLY_LATENCY,
    RequantPipe,
    requant_latency,
    requantize_model,
)

from .test_requant_shared import _accs, _params


def _run_early(dut: RequantPipe, acc: np.ndarray, valid_at: list[int], seed: int
               ) -> tuple[np.ndarray, list[int]]:
    """Feed row ``k`` of ``acc`` (``[rows, channels]``) at cycle ``valid_at[k]``, its
    channel group on ``i_idx`` ``EARLY_INDEX`` cycles before (random groups otherwise);
    returns the outputs in order and the cycles they came."""
    rng = np.random.default_rng(seed)
    lanes, groups = dut.lanes, dut.groups
    rows = acc.reshape(-1, lanes)
    at = {t: k for k, t in enumerate(valid_at)}
    outs: list[list[int]] = []
    when: list[int] = []
    bits = dut.out_bits

    async def bench(ctx: object) -> None:
        for cycle in range(valid_at[-1] + dut.latency + 2):
            k = at.get(cycle + EARLY_INDEX)
            ctx.set(dut.i_idx, k % groups if k is not None else int(rng.integers(groups)))
            k = at.get(cycle)
            ctx.set(dut.i_valid, k is not None)
            ctx.set(dut.i_acc, pack_lanes(rows[k], 32) if k is not None else
                    int(rng.integers(0, 2**32)))
            _, _, valid, data = await ctx.tick().sample(dut.o_valid, dut.o_data)
            if valid:
                outs.append(unpack_lanes(data, lanes, bits))
                when.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(outs).reshape(acc.shape), when


CASES = [  # lanes, channels, relu, clamp, requantize
    (4, 8, False, None, True),
    (2, 6, True, None, True),
    (3, 6, False, Clamp(-3, 5), True),
    (1, 4, False, Clamp(-1, 1, bipolar=True), True),
    (4, 8, False, None, False),  # bias only: int32 out
]


@pytest.mark.parametrize("lanes,c,relu,clamp,requantize", CASES)
def test_early_pipe_bit_exact_with_its_latency(lanes, c, relu, clamp, requantize):
    rng = np.random.default_rng(lanes * 11 + c)
    bias, m, n = _params(rng, c)
    acc = _accs(rng, 5, c)
    groups = c // lanes
    dut = RequantPipe("rq", lanes, c, bias=bias, multiplier=m if requantize else None,
                      shift=n if requantize else None, relu=relu, clamp=clamp,
                      requantize=requantize, units=lanes, early=True)
    assert dut.latency == (EARLY_LATENCY if requantize else EARLY_BIAS_ONLY_LATENCY)
    assert requant_latency(lanes, lanes, requantize, early=True) == dut.latency
    # back to back, then with gaps
    valid_at = [3 + k for k in range(2 * groups)]
    valid_at += [valid_at[-1] + 3 * (k + 1) for k in range(len(acc) * groups - len(valid_at))]
    got, when = _run_early(dut, acc, valid_at, seed=c)
    assert when == [t + dut.latency for t in valid_at]
    if requantize:
        want = requantize_model(acc, bias, m, n, relu, clamp)
    else:
        want = requantize_model(acc, bias, None, None, False)
    np.testing.assert_array_equal(got.astype(np.int64), np.asarray(want, np.int64))


def test_early_pipe_refuses_sharing_and_thresholds():
    with pytest.raises(HardwareConfigError, match="early=True"):
        RequantPipe("rq", 4, 8, bias=np.zeros(8), multiplier=np.ones(8), shift=np.ones(8),
                    units=2, early=True)
    with pytest.raises(HardwareConfigError, match="early=True"):
        RequantPipe("rq", 2, 2, thresholds=np.zeros((2, 3)), clamp=Clamp(0, 3),
                    early=True)
