"""A stand-in core for board builds until the full accelerator exists.

:class:`ArrayStandIn` puts the real systolic array on the chip and keeps it
busy the way the accelerator will: its operands come from two block-RAM
"buffers" (a weight ROM of ``rows`` bytes per word and an activation ROM of
``cols`` bytes per word, filled with fixed pseudo-random data and read at a
counter's address), tiles of ``tile_k`` beats follow each other with
back-pressure from the array, and every result row is folded into a 32-bit
checksum that drives the status LEDs, so synthesis can remove nothing. The
resources and the routed clock of a board build with this core are those of
the array plus a small shell; the accelerator's buffers, controller and
post-processing come on top.

A board top-level takes a *core factory* ``core(config)`` returning an
Elaboratable with a ``status`` output (any width; the low bits drive the
LEDs). Swapping in the accelerator is the one line that picks the factory.
"""

import random

from amaranth import *
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import Out

from fpganet.config import ConfigError
from fpganet.hdl.systolic import SystolicArray

__all__ = ["ArrayStandIn", "pair_problem", "pair_stand_in_core"]


class ArrayStandIn(wiring.Component):
    """The systolic array fed from ROMs, its results folded into a checksum.

    Parameters
    ----------
    config : AcceleratorConfig
    array : callable
        ``array(config)`` returns the array (default :class:`SystolicArray`;
        iCE40 boards pass :class:`~fpganet.hdl.ice40_dsp.Ice40SystolicArray`).
    tile_k : int
        Beats per tile (K). At least ``min_tile_cycles`` keeps the array busy.
    depth : int
        Words in each operand ROM (one block RAM deep on iCE40 and ECP5).
    seed : int
        Seed of the ROM contents.

    Members
    -------
    status : Out(8)
        Checksum bits folded down to 8 (LED 0 toggles with every tile).
    """

    def __init__(self, config, *, array=SystolicArray, tile_k=64, depth=256, seed=1):
        self.config = config
        self.array = array(config)
        self.tile_k = tile_k
        self.depth = depth
        self.seed = seed
        super().__init__({"status": Out(8)})

    def elaborate(self, platform):
        m = Module()
        config = self.config
        rows, cols, width = config.rows, config.cols, config.pe_operand_width
        m.submodules.array = array = self.array

        rng = random.Random(self.seed)
        weights_shape = unsigned(rows * width)
        acts_shape = unsigned(cols * width)
        m.submodules.weights = weights = memory.Memory(
            shape=weights_shape, depth=self.depth,
            init=[rng.getrandbits(rows * width) for _ in range(self.depth)])
        m.submodules.acts = acts = memory.Memory(
            shape=acts_shape, depth=self.depth,
            init=[rng.getrandbits(cols * width) for _ in range(self.depth)])
        w_port = weights.read_port()
        x_port = acts.read_port()

        # Two pipeline stages in front of the array: the ROMs' output registers
        # (a read issued in one cycle gives its word in the next) and a register
        # of the whole beat, as the accelerator's operand path will have. Both
        # hold (read enable low) while the array refuses the beat in front of it.
        address = Signal(range(self.depth))
        beat = Signal(range(self.tile_k))
        read_valid, read_last = Signal(), Signal()
        beat_q = Signal.like(array.operands.payload)
        valid_q = Signal()
        advance = Signal()
        m.d.comb += [
            advance.eq(~valid_q | array.operands.ready),
            w_port.addr.eq(address), x_port.addr.eq(address),
            w_port.en.eq(advance), x_port.en.eq(advance),
            array.operands.valid.eq(valid_q),
            array.operands.payload.eq(beat_q),
        ]
        with m.If(advance):
            m.d.sync += [
                read_valid.eq(1),
                read_last.eq(beat == self.tile_k - 1),
                address.eq(address + 1),
                beat.eq(Mux(beat == self.tile_k - 1, 0, beat + 1)),
                valid_q.eq(read_valid),
                beat_q.last.eq(read_last),
            ]
            for i in range(rows):
                m.d.sync += beat_q.a[i].eq(w_port.data[i * width:(i + 1) * width])
            for j in range(cols):
                m.d.sync += beat_q.b[j].eq(x_port.data[j * width:(j + 1) * width])

        # Every result row into a 32-bit checksum: the row registered, its sums
        # XOR-folded into a register, then rotated into the checksum (pipelined so that the shell,
        # not being measured, stays off the critical path).
        m.d.comb += array.results.ready.eq(1)
        row = Signal.like(array.results.payload)
        row_taken = Signal()
        m.d.sync += [row.eq(array.results.payload), row_taken.eq(array.results.valid)]
        sums = [row.sums[j].as_unsigned() for j in range(cols)]
        chunks = [value[k:k + 32] for value in sums for k in range(0, len(value), 32)]
        row_fold = Signal(32)
        row_valid = Signal()
        m.d.sync += [
            row_valid.eq(row_taken),
            row_fold.eq(_xor_all(chunks) ^ Cat(row.row, row.last)),
        ]
        checksum = Signal(32)
        tiles = Signal()
        with m.If(row_valid):
            m.d.sync += checksum.eq(checksum.rotate_left(1) ^ row_fold)
        with m.If(array.results.valid & array.results.payload.last):
            m.d.sync += tiles.eq(~tiles)
        m.d.comb += self.status.eq(Cat(tiles, *[checksum[k::7].xor() for k in range(7)]))
        return m


def pair_problem(config):
    """Why ``config`` with ``pair_products`` cannot be built, or None."""
    try:
        config.replace(pair_products=True)
    except ConfigError as error:
        return f"stand-in-pairs: {error}"
    return None


def pair_stand_in_core(pe, description):
    """A core factory: :class:`ArrayStandIn` with an array of the pair PE class ``pe``, built
    for the configuration given with ``pair_products``; ``description`` is its docstring. It
    refuses what :func:`pair_problem` names (``refuse``, read by the build's check)."""
    def core(config):
        return ArrayStandIn(config.replace(pair_products=True),
                            array=lambda c: SystolicArray(c, pe=pe))
    core.__doc__ = description
    #: It builds the configuration with pair_products (read by the build's ``macs_per_cycle``).
    core.pair_products = True
    core.refuse = pair_problem
    return core


def _xor_all(values):
    result = values[0]
    for value in values[1:]:
        result = result ^ value
    return result
