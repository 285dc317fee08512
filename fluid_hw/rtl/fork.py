"""Fork: one stream to ``n`` consumers, every consumer seeing every beat once, in order.

Implementation: a per-output "already taken" flag, no buffer.  Output ``k`` offers the
input beat while ``taken[k]`` is clear (``o_k.valid = i.valid & ~taken[k]``, payload
passed through); a transfer on ``o_k`` sets ``taken[k]`` so that ``k`` does not see the
beat again while another output stalls.  ``i.ready`` rises once every output has taken
the beat or takes it this cycle (``&(taken[k] | o_k.ready)``), and the flags clear with
the input transfer.  Zero latency, one beat per cycle when no output stalls.

Handshake (FINN / AXI practice for a broadcast): no output's ``valid`` depends on any
``ready`` -- it depends combinationally only on ``i.valid``, which by the stream rule does
not depend on ``i.ready`` -- and stays up with a stable payload until its transfer;
``i.ready`` depends combinationally on the outputs' ``ready`` (allowed: ``ready`` may
follow ``valid`` and ``ready``).  Put a :class:`~.stream.SkidBuffer` on a branch whose
``ready`` path is long, and size a skip branch's FIFO as HARDWARE.md ("Graphs, not
chains") says.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth import Cat, Module, Signal
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError

__all__ = ["Fork", "fork_model"]


def fork_model(beats: Sequence[int], n: int = 2) -> list[list[int]]:
    """Behavioural model: ``n`` copies of the beat sequence."""
    return [list(beats) for _ in range(n)]


class Fork(Component):
    """Broadcast of stream ``i`` (``width`` bits) to ``o0`` .. ``o{n-1}``; see the module
    docstring."""

    def __init__(self, width: int, n: int = 2) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise HardwareConfigError(f"Fork: n (the number of outputs) must be an integer "
                                      f">= 1, got {n!r}")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise HardwareConfigError(f"Fork: width must be an integer >= 1, got {width!r}")
        self.width, self.n = width, n
        self.latency = 0
        members = {"i": In(stream.Signature(width))}
        members.update({f"o{k}": Out(stream.Signature(width)) for k in range(n)})
        super().__init__(members)

    @property
    def outputs(self) -> list[stream.Interface]:
        """``o0`` .. ``o{n-1}`` in order."""
        return [getattr(self, f"o{k}") for k in range(self.n)]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        outs = self.outputs
        taken = Signal(self.n)
        done = Cat(*(taken[k] | o.ready for k, o in enumerate(outs)))
        m.d.comb += self.i.ready.eq(done.all())
        for k, o in enumerate(outs):
            m.d.comb += [o.valid.eq(self.i.valid & ~taken[k]), o.payload.eq(self.i.payload)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += taken.eq(0)
        with m.Else():
            m.d.sync += taken.eq(taken | Cat(*(o.valid & o.ready for o in outs)))
        return m
