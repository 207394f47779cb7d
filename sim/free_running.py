"""A self-driving wrapper of the systolic array, for simulations where Python only waits.

:class:`FreeRunningArray` feeds the array from counters instead of a testbench,
takes every result row and folds it into a checksum, and raises ``done`` when
the last row of the last tile has arrived. :func:`expected_checksum` computes
the same checksum in numpy, so a free-running simulation is still checked.
"""

import numpy as np
from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fpganet.hdl.systolic import SystolicArray
from fpganet.sim.matmul import wrap

__all__ = ["FreeRunningArray", "pattern_operands", "expected_checksum"]

# Operand k of beat g: ((g * A_STEP + index * A_SPREAD + offset) mod 256) as a signed byte.
A_STEP, A_SPREAD = 7, 13
B_STEP, B_SPREAD, B_OFFSET = 5, 11, 3


def pattern_operands(config, tiles, tile_k):
    """The operands the wrapper generates: arrays a [tiles*K, rows], b [tiles*K, cols]."""
    beats = np.arange(tiles * tile_k)[:, None]
    a = (beats * A_STEP + np.arange(config.rows)[None, :] * A_SPREAD) % 256
    b = (beats * B_STEP + np.arange(config.cols)[None, :] * B_SPREAD + B_OFFSET) % 256
    return np.where(a >= 128, a - 256, a), np.where(b >= 128, b - 256, b)


def expected_checksum(config, tiles, tile_k):
    """Sum, wrapped to 32 bits, of every result the array returns."""
    a, b = pattern_operands(config, tiles, tile_k)
    total = 0
    for t in range(tiles):
        beats = slice(t * tile_k, (t + 1) * tile_k)
        sums = wrap(a[beats].T @ b[beats], config.acc_width)
        total += int(sums.sum())
    return int(wrap(total, 32))


class FreeRunningArray(wiring.Component):
    """The systolic array fed by counters, checked by a checksum.

    Parameters
    ----------
    config : AcceleratorConfig
    tiles : int
        Tiles to compute before ``done``.
    tile_k : int
        Beats per tile.

    Members
    -------
    done : Out(1)
        High from the cycle after the final result row was taken.
    checksum : Out(signed(32))
        Sum of all results taken so far, wrapped to 32 bits.
    cycles : Out(32)
        Cycles from reset to ``done``.
    """

    def __init__(self, config, tiles, tile_k):
        if tiles < 1 or tile_k < 1:
            raise ValueError(f"tiles and tile_k must be at least 1, not {tiles}, {tile_k}")
        self.config = config
        self.tiles = tiles
        self.tile_k = tile_k
        super().__init__({
            "done": Out(1),
            "checksum": Out(signed(32)),
            "cycles": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        m.submodules.array = array = SystolicArray(config)

        total_beats = self.tiles * self.tile_k
        beat = Signal(range(total_beats + 1))
        k = Signal(range(self.tile_k))
        operands = array.operands
        m.d.comb += operands.valid.eq(beat < total_beats)
        for i in range(config.rows):
            m.d.comb += operands.payload.a[i].eq((beat * A_STEP + i * A_SPREAD)[:8])
        for j in range(config.cols):
            m.d.comb += operands.payload.b[j].eq((beat * B_STEP + j * B_SPREAD + B_OFFSET)[:8])
        m.d.comb += operands.payload.last.eq(k == self.tile_k - 1)
        with m.If(operands.valid & operands.ready):
            m.d.sync += [beat.eq(beat + 1), k.eq(Mux(k == self.tile_k - 1, 0, k + 1))]

        rows_left = Signal(range(self.tiles * config.rows + 1), init=self.tiles * config.rows)
        m.d.comb += array.results.ready.eq(1)
        with m.If(array.results.valid):
            row_sum = sum(array.results.payload.sums[j] for j in range(config.cols))
            m.d.sync += [self.checksum.eq(self.checksum + row_sum), rows_left.eq(rows_left - 1)]
        m.d.comb += self.done.eq(rows_left == 0)
        with m.If(~self.done):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m
