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

#: With ``requant_latency`` 5, ``acc + bias`` is multiplied in two parts split at this bit:
#: 17 unsigned bits are what an 18x18 signed DSP multiplier (ECP5 MULT18X18D) takes.
SPLIT_BITS = 17


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

    Latency: ``config.requant_latency`` cycles. At 4 the stages are bias add,
    product, shift, round/offset/clamp. At 5 the product takes two: the
    ``acc_width``-bit factor is split at :data:`SPLIT_BITS` into an unsigned low
    part and a signed high part, each multiplied by ``mult`` (each fits one
    18x18 DSP multiplier), and the next stage adds the two partial products.
    No back-pressure: one set per cycle, always.
    """

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

    @property
    def latency(self):
        """Cycles from the inputs to ``y`` (``config.requant_latency``)."""
        return self.config.requant_latency

    def elaborate(self, platform):
        m = Module()
        width = self.config.acc_width
        stages = self.latency
        split = stages == 5 and width > SPLIT_BITS
        valid = [Signal(name=f"valid{s}") for s in range(1, stages + 1)]
        m.d.sync += [valid[0].eq(self.i_valid)] + [valid[s].eq(valid[s - 1]) for s in range(1, stages)]
        m.d.comb += self.o_valid.eq(valid[-1])
        mult1 = Signal(15)
        shifts = [Signal(6, name=f"shift{s}") for s in range(1, stages - 1)]
        m.d.sync += [mult1.eq(self.mult), shifts[0].eq(self.shift)]
        m.d.sync += [shifts[s].eq(shifts[s - 1]) for s in range(1, len(shifts))]
        shift = shifts[-1]      # with the product
        for lane in range(self.lanes):
            biased = Signal(signed(width), name=f"biased{lane}")
            product = Signal(signed(width + 16), name=f"product{lane}")
            halved = Signal(signed(width + 16), name=f"halved{lane}")       # product >> (shift - 1)
            saturated = Signal(signed(SATURATE_BITS), name=f"saturated{lane}")
            raw = [Signal(signed(8), name=f"raw{lane}_{s}") for s in range(stages - 1)]
            m.d.comb += halved.eq(product >> (shift - 1)[:6])
            upper = halved[SATURATE_BITS - 1:]
            high = ~halved[-1] & (upper != 0)
            low = halved[-1] & ~upper.all()
            m.d.sync += [
                biased.eq(self.acc[lane] + self.bias),
                raw[0].eq(self.acc[lane][:8]),
                saturated.eq(Mux(high, (1 << (SATURATE_BITS - 1)) - 1,
                                 Mux(low, -(1 << (SATURATE_BITS - 1)), halved[:SATURATE_BITS]))),
            ]
            m.d.sync += [raw[s].eq(raw[s - 1]) for s in range(1, len(raw))]
            if stages == 4:
                m.d.sync += product.eq(biased * mult1)
            elif split:
                low_part = Signal(SPLIT_BITS + 15, name=f"product_low{lane}")
                high_part = Signal(signed(width - SPLIT_BITS + 15), name=f"product_high{lane}")
                m.d.sync += [
                    low_part.eq(biased[:SPLIT_BITS] * mult1),
                    high_part.eq(biased[SPLIT_BITS:].as_signed() * mult1),
                    product.eq((high_part << SPLIT_BITS) + low_part),
                ]
            else:
                whole = Signal(signed(width + 16), name=f"product_whole{lane}")
                m.d.sync += [whole.eq(biased * mult1), product.eq(whole)]
            rounded = Signal(signed(SATURATE_BITS), name=f"rounded{lane}")
            offset = Signal(signed(SATURATE_BITS + 1), name=f"offset{lane}")
            m.d.comb += [rounded.eq((saturated + 1) >> 1), offset.eq(rounded + self.zp)]
            floor = Mux(offset < self.lo, self.lo, offset)
            clamped = Mux(floor > self.hi, self.hi, floor)
            m.d.sync += self.y[lane].eq(Mux(self.bypass, raw[-1], clamped[:8]))
        return m
