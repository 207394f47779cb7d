"""Max-pool unit: the engine's reduction in ``POOL`` mode.

It takes the same operand beats as the systolic array (only ``b`` and ``last``
matter) and keeps, per lane, the maximum of the tile's bytes; after the
``last`` beat it offers the maxima as one result row, in the array's
:func:`~fpganet.hdl.systolic.result_layout` (sign-extended, ``row`` 0, ``last``
set), so the same result writer takes both.
"""

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .systolic import operand_layout, result_layout

__all__ = ["MaxPool"]


class MaxPool(wiring.Component):
    """Per-lane running maximum over the beats of a tile.

    Parameters
    ----------
    config : AcceleratorConfig

    Members
    -------
    start : In(1)
        Pulse before the first beat of an instruction: the next beat opens a tile.
    operands : In(stream.Signature(operand_layout(config)))
        Beats; ``b[j]`` is lane ``j``'s signed byte, ``last`` closes the tile.
    results : Out(stream.Signature(result_layout(config)))
        One row per tile: ``sums[j]`` the maximum of lane ``j`` (sign-extended),
        ``row`` 0, ``last`` 1.

    Latency: the row is valid :attr:`latency` cycles after the transfer of the
    tile's last beat (``config.pool_latency``: without the pipeline registers the beats
    are registered on entry). Throughput: one beat per cycle. Back-pressure, as the
    array's: a ``last`` beat is held (``operands.ready`` low) while the previous
    row has not been taken; other beats always flow. ``operands.ready`` depends
    only on ``operands.payload.last`` and state.
    """

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.config = config
        super().__init__({
            "start": In(1),
            "operands": In(stream.Signature(operand_layout(config))),
            "results": Out(stream.Signature(result_layout(config))),
        })

    @property
    def latency(self):
        """Cycles from the transfer of a tile's last beat to its result row."""
        return self.config.pool_latency

    @property
    def rows(self):
        """Result rows per tile."""
        return 1

    def elaborate(self, platform):
        m = Module()
        cols = self.config.cols
        operand = signed(self.config.operand_width)
        maxima = [Signal(operand, name=f"max{j}") for j in range(cols)]
        result = [Signal(operand, name=f"result{j}") for j in range(cols)]
        fresh = Signal(init=1)      # the next beat opens a tile
        pending = Signal()

        accept = Signal()
        take = Signal()
        # The beat the compares take: the transferred one, or a register loaded with it.
        beat_valid, beat_last = accept, self.operands.payload.last
        # With pair products a beat's odd channel rides in the high half; POOL's K_C is 1.
        beat_b = [self.operands.payload.b[j][:self.config.operand_width].as_signed()
                  for j in range(cols)]
        blocked = pending            # a last beat waits: the row is not taken (or not yet made)
        if self.latency == 2:
            beat_valid, beat_last = Signal(name="beat_valid"), Signal(name="beat_last")
            registered = [Signal(operand, name=f"beat_b{j}") for j in range(cols)]
            m.d.sync += beat_valid.eq(accept)
            with m.If(accept):
                m.d.sync += [beat_last.eq(self.operands.payload.last),
                             *(r.eq(b) for r, b in zip(registered, beat_b))]
            beat_b, blocked = registered, pending | (beat_valid & beat_last)
        m.d.comb += [
            self.operands.ready.eq(~(self.operands.payload.last & blocked)),
            accept.eq(self.operands.valid & self.operands.ready),
            self.results.valid.eq(pending),
            take.eq(self.results.valid & self.results.ready),
            self.results.payload.row.eq(0),
            self.results.payload.last.eq(1),
        ]
        for j in range(cols):
            m.d.comb += self.results.payload.sums[j].eq(result[j])

        with m.If(take):
            m.d.sync += pending.eq(0)
        with m.If(beat_valid):
            for j in range(cols):
                b = beat_b[j]
                larger = Mux(fresh | (b > maxima[j]), b, maxima[j])
                with m.If(beat_last):
                    m.d.sync += result[j].eq(larger)
                with m.Else():
                    m.d.sync += maxima[j].eq(larger)
            m.d.sync += fresh.eq(beat_last)
            with m.If(beat_last):
                m.d.sync += pending.eq(1)
        with m.If(self.start):
            m.d.sync += fresh.eq(1)
        return m
