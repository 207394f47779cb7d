"""Post-processing: bias, requantization, output zero point and clamp (the numerics contract).

For each lane::

    y = clamp(zp_out + ((acc + bias) * mult + (1 << (shift - 1)) >> shift), lo, hi)

with ``>>`` an arithmetic (floor) shift, so ties round toward +infinity; exactly
``fpganet.quantize.fixed_point.requantize`` followed by the clamp of
docs/ARCHITECTURE.md. The rounding uses ``(x >> (shift-1)) + 1 >> 1``, which equals
``(x + 2^(shift-1)) >> shift`` for every integer ``x`` and needs no wide adder.

``x >> (shift-1)`` is saturated to 11 bits before the rounding (exact: see
:data:`SATURATE_BITS`). ``acc + bias`` is kept in ``acc_width`` bits: the contract's no-overflow rule
(``|bias| + 128 * sum|w| < 2^(acc_width-1)``) makes it exact. ``lo > hi`` gives
``hi`` (as numpy's ``clip``).
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

__all__ = ["Requantizer"]

#: ``product >> (shift - 1)`` is saturated to this many signed bits before rounding: any value
#: beyond makes ``zp_out + round`` leave the int8 range for every ``zp_out``, so the clamp gives
#: the same byte, and the rounding, offset and clamp work on 11 bits instead of ~48.
SATURATE_BITS = 11


class Requantizer(wiring.Component):
    """A fixed pipeline of ``lanes`` requantizers sharing one channel's parameters.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``.
    lanes : int
        Results per cycle (``config.requant_lanes`` in the accelerator): one
        ``acc_width x 15``-bit multiplier each.

    Members
    -------
    i_valid : In(1)
        The inputs below hold a set of ``lanes`` results this cycle.
    acc : In(ArrayLayout(signed(acc_width), lanes))
    bias : In(signed(32))
    mult : In(15)
    shift : In(6)
        Parameters of the output channel (``shift`` in 1..62).
    zp, lo, hi : In(signed(8))
        Output zero point and clamp bounds; held for the whole instruction (not
        pipelined).
    bypass : In(1)
        ``y`` is ``acc``'s low byte instead (max pooling); held like ``zp``.
    o_valid : Out(1)
    y : Out(ArrayLayout(signed(8), lanes))
        The results, :attr:`latency` cycles after the inputs.

    No back-pressure: one set per cycle, always.
    """

    #: Cycles from inputs to ``y``: bias add, product, shift, round/offset/clamp.
    latency = 4

    def __init__(self, config, lanes=1):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        self.config = config
        self.lanes = lanes
        acc = signed(config.acc_width)
        super().__init__({
            "i_valid": In(1),
            "acc": In(data.ArrayLayout(acc, lanes)),
            "bias": In(signed(32)),
            "mult": In(15),
            "shift": In(6),
            "zp": In(signed(8)),
            "lo": In(signed(8)),
            "hi": In(signed(8)),
            "bypass": In(1),
            "o_valid": Out(1),
            "y": Out(data.ArrayLayout(signed(8), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.config.acc_width
        valid = [Signal(name=f"valid{s}") for s in range(1, 5)]
        mult1 = Signal(15)
        shift1, shift2 = Signal(6), Signal(6)
        m.d.sync += [valid[0].eq(self.i_valid), valid[1].eq(valid[0]), valid[2].eq(valid[1]),
                     valid[3].eq(valid[2])]
        m.d.sync += [mult1.eq(self.mult), shift1.eq(self.shift), shift2.eq(shift1)]
        m.d.comb += self.o_valid.eq(valid[3])
        for lane in range(self.lanes):
            biased = Signal(signed(width), name=f"biased{lane}")
            product = Signal(signed(width + 16), name=f"product{lane}")
            halved = Signal(signed(width + 16), name=f"halved{lane}")       # product >> (shift - 1)
            saturated = Signal(signed(SATURATE_BITS), name=f"saturated{lane}")
            raw = [Signal(signed(8), name=f"raw{lane}_{s}") for s in range(3)]
            m.d.comb += halved.eq(product >> (shift2 - 1)[:6])
            upper = halved[SATURATE_BITS - 1:]
            high = ~halved[-1] & (upper != 0)
            low = halved[-1] & ~upper.all()
            m.d.sync += [
                biased.eq(self.acc[lane] + self.bias),
                raw[0].eq(self.acc[lane][:8]), raw[1].eq(raw[0]), raw[2].eq(raw[1]),
                product.eq(biased * mult1),
                saturated.eq(Mux(high, (1 << (SATURATE_BITS - 1)) - 1,
                                 Mux(low, -(1 << (SATURATE_BITS - 1)), halved[:SATURATE_BITS]))),
            ]
            rounded = Signal(signed(SATURATE_BITS), name=f"rounded{lane}")
            offset = Signal(signed(SATURATE_BITS + 1), name=f"offset{lane}")
            m.d.comb += [rounded.eq((saturated + 1) >> 1), offset.eq(rounded + self.zp)]
            floor = Mux(offset < self.lo, self.lo, offset)
            clamped = Mux(floor > self.hi, self.hi, floor)
            m.d.sync += self.y[lane].eq(Mux(self.bypass, raw[2], clamped[:8]))
        return m
