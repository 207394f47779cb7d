"""What the requantizer variants share (:mod:`fpganet.hdl.postproc` picks one): the ports,
the checks, the pipelines beside the product, and the two tails after it, the wide one of
:class:`~fpganet.hdl.requant_generic.GenericRequantizer` and the fabric one of the others.
"""

from types import SimpleNamespace

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import PARAM_LAYOUTS

from .fabric_arith import coarse_shift

__all__ = ["Requantizer", "saturate", "split_product", "split_partials", "SATURATE_BITS",
           "SPLIT_BITS"]

#: ``product >> (shift - 1)`` is saturated to this many signed bits before rounding: any value
#: beyond makes ``zp_out + round`` leave the int8 range for every ``zp_out``, so the clamp gives
#: the same byte, and the rounding, offset and clamp work on 11 bits instead of ~48.
SATURATE_BITS = 11

#: In :class:`~fpganet.hdl.requant_generic.SplitProductRequantizer`, ``acc + bias`` is
#: multiplied in two parts split at this bit: 17 unsigned bits are what an 18x18 signed DSP multiplier (ECP5 MULT18X18D) takes.
SPLIT_BITS = 17

# The members every variant has, for their docstrings; the parameters' shapes are those of
# the mode's parameter entry (fpganet.isa.PARAM_LAYOUTS).
_MEMBERS_OF_MODE = """
    Members
    -------
    i_valid : In(1)
        The inputs below hold a set of ``lanes`` results this cycle.
    acc : In(ArrayLayout(signed(acc_width), lanes))
{parameters}
    zp, lo, hi : In(signed(8))
        Output zero point and clamp bounds; held for the whole instruction, from the
        first set's input on (not pipelined; the generic variants register thresholds
        from them).
    bypass : In(1)
        ``y`` is ``acc``'s low byte instead (max pooling); held like ``zp``.
    o_valid : Out(1)
    y : Out(ArrayLayout(signed(8), lanes))
        The results, :attr:`latency` cycles after the inputs.
"""

_MEMBERS = _MEMBERS_OF_MODE.format(parameters="""\
    bias : In(signed(32))
    mult : In(15)
    shift : In(6)
        Parameters of the output channel (``shift`` in 1..62).""")

_TFLITE_MEMBERS = _MEMBERS_OF_MODE.format(parameters="""\
    single : In(1)
        TFLite's single-rounding multiply instead (``QUANT`` bit 24); held like ``zp``.
    bias : In(signed(28))
    mult : In(30)
        TFLite's multiplier ``M`` less ``2**30`` (``M`` in [2**30, 2**31)).
    shift : In(signed(6))
        TFLite's exponent, -31..30: a left shift when positive, a rounding right shift
        when negative.""")


class Requantizer(wiring.Component):
    __doc__ = """What the requantizer variants share: ports, checks, the pipelines beside the product.

    ``lanes`` requantizers sharing one channel's parameters, in a fixed pipeline. Not a
    component of its own: a variant (:mod:`fpganet.hdl.postproc`'s table) adds the product and
    the stages around it, and states its :attr:`latency`;
    :func:`~fpganet.hdl.postproc.requantizer` picks one.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_mode`` must be the variant's :attr:`requant_mode` (it sets
        the ``bias``, ``mult`` and ``shift`` ports' shapes) and ``requant_latency`` its
        :attr:`latency`.
    lanes : int
        Results per cycle (``config.requant_lanes`` in the accelerator): one
        ``acc_width x 15``-bit product each (``x requant_mult_bits`` for the generic and
        shift-and-add variants; ``x 31`` in the ``tflite`` mode).
    {members}
    Latency: :attr:`latency` cycles, the variant's. Throughput: one set per cycle, always;
    no back-pressure.
    """.format(members=_MEMBERS)

    #: Cycles from the inputs to ``y``; each variant states its own.
    latency = None

    #: The requantization arithmetic (``AcceleratorConfig.requant_mode``) the variant computes.
    requant_mode = "fpganet"

    #: The last stage compares ``saturated`` with thresholds registered from ``zp``, ``lo``
    #: and ``hi`` (:meth:`_clamp_thresholds`) instead of the offset byte with the bounds.
    registered_bounds = False

    def __init__(self, config, lanes=1):
        name = type(self).__name__
        if self.latency is None:
            raise TypeError("Requantizer is the variants' base: use a variant, or requantizer()")
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
        if config.requant_mode != self.requant_mode:
            raise ValueError(f"{name} computes the {self.requant_mode} requantization: it needs "
                             f"requant_mode {self.requant_mode!r}, not {config.requant_mode!r}")
        if config.requant_latency != self.latency:
            raise ValueError(f"{name} has latency {self.latency}: it needs requant_latency "
                             f"{self.latency}, not {config.requant_latency}")
        self.config = config
        self.lanes = lanes
        acc = signed(config.acc_width)
        param = PARAM_LAYOUTS[config.requant_mode]
        # The tflite mode's one-rounding form (QUANT bit 24), held like zp.
        single = {"single": In(1)} if config.requant_mode == "tflite" else {}
        super().__init__({
            **single,
            "i_valid": In(1),
            "acc": In(data.ArrayLayout(acc, lanes)),
            "bias": In(param["bias"].shape),
            "mult": In(param["mult"].shape),
            "shift": In(param["shift"].shape),
            "zp": In(signed(8)),
            "lo": In(signed(8)),
            "hi": In(signed(8)),
            "bypass": In(1),
            "o_valid": Out(1),
            "y": Out(data.ArrayLayout(signed(8), lanes)),
        })

    #: Bits of the product register beyond ``acc_width``.
    _product_extra = 15

    def elaborate(self, platform):
        m = Module()
        stages = self.latency
        valid = [Signal(name=f"valid{s}") for s in range(1, stages + 1)]
        m.d.sync += [valid[0].eq(self.i_valid)] + [valid[s].eq(valid[s - 1]) for s in range(1, stages)]
        m.d.comb += self.o_valid.eq(valid[-1])
        self._mult1 = mult1 = Signal(self.mult.shape(), name="mult1")
        m.d.sync += mult1.eq(self.mult)
        self._prepare(m)
        if self.registered_bounds:
            self._thresholds = self._clamp_thresholds(m)
        product_width = self.config.acc_width + self._product_extra
        for lane in range(self.lanes):
            self._lane(m, SimpleNamespace(
                index=lane,
                biased=Signal(signed(self.config.acc_width), name=f"biased{lane}"),
                product=Signal(signed(product_width), name=f"product{lane}"),
                # product >> (shift - 1)
                halved=Signal(signed(product_width), name=f"halved{lane}"),
                saturated=Signal(signed(SATURATE_BITS), name=f"saturated{lane}"),
                raw=[Signal(signed(8), name=f"raw{lane}_{s}") for s in range(stages - 1)]))
        return m

    def _prepare(self, m):
        """Logic the lanes share (parameters' pipelines, recoding), after ``mult``'s register."""

    def _top_bits(self):
        """``(factor, low)``: the registered ``mult`` is ``factor << low``, ``factor`` its top
        ``config.requant_mult_bits`` bits (the bits below are zero by the contract)."""
        low = len(self._mult1) - self.config.requant_mult_bits
        return (self._mult1[low:] if low else self._mult1), low

    def _lane(self, m, lane):
        """One lane's stages. The variants keep the statement order of the single
        ``elaborate()`` they came from: the RTLIL, and so Yosys's mapping, stay the same."""
        raise NotImplementedError

    def _bypass_delay(self, m, lane):
        """``raw``: the rest of ``acc``'s low byte's delay line (its first register is set
        beside the first stage)."""
        raw = lane.raw
        m.d.sync += [raw[s].eq(raw[s - 1]) for s in range(1, len(raw))]

    def _output(self, m, lane, clamped):
        """The last stage's register: the clamped byte, or ``acc``'s low byte in bypass."""
        m.d.sync += self.y[lane.index].eq(Mux(self.bypass, lane.raw[-1], clamped[:8]))

    def _round_offset_clamp(self, m, lane):
        """The last stage from the registered ``saturated``: round it, add ``zp``, clamp."""
        # The same bytes from fewer chained carry chains: zp + round(saturated / 2) =
        # (saturated + 2 zp + 1) >> 1 is one adder, and both bounds compare against it side
        # by side; lo > hi gives hi as the generic variants' clamp does.
        offset = Signal(signed(SATURATE_BITS), name=f"offset{lane.index}")
        m.d.comb += offset.eq((lane.saturated + Cat(C(1, 1), self.zp).as_signed()) >> 1)
        if self.registered_bounds:
            above, below, inverted = self._thresholds
            above_hi, below_lo = lane.saturated > above, lane.saturated < below
        else:
            above_hi, below_lo, inverted = offset > self.hi, offset < self.lo, self.lo > self.hi
        clamped = Mux(above_hi | inverted, self.hi, Mux(below_lo, self.lo, offset[:8]))
        self._output(m, lane, clamped)

    def _clamp_thresholds(self, m):
        """With :attr:`registered_bounds`: the clamp's thresholds on ``saturated``, registered
        once for all lanes, so the compares need not wait for the offset's adder: the offset
        ``(saturated + 2 zp + 1) >> 1`` is above ``hi`` exactly when ``saturated > 2 (hi -
        zp)``, below ``lo`` exactly when ``saturated < 2 (lo - zp) - 1``, and at ``2 (lo - zp)
        - 1`` it is ``lo`` itself, so ``saturated < 2 (lo - zp)`` clamps to the same byte.
        ``zp``, ``lo`` and ``hi`` are held from the first set's input, :attr:`latency` - 1 >= 3
        cycles before its last stage."""
        above = Signal(signed(SATURATE_BITS), name="clamp_above")
        below = Signal(signed(SATURATE_BITS), name="clamp_below")
        inverted = Signal(name="clamp_inverted")
        m.d.sync += [above.eq((self.hi - self.zp) << 1), below.eq((self.lo - self.zp) << 1),
                     inverted.eq(self.lo > self.hi)]
        return above, below, inverted


def saturate(value):
    """``value`` saturated to :data:`SATURATE_BITS` signed bits (combinational)."""
    upper = value[SATURATE_BITS - 1:]
    high = ~value[-1] & (upper != 0)
    low = value[-1] & ~upper.all()
    return Mux(high, (1 << (SATURATE_BITS - 1)) - 1,
               Mux(low, -(1 << (SATURATE_BITS - 1)), value[:SATURATE_BITS]))


class _WideTailRequantizer(Requantizer):
    """:class:`~fpganet.hdl.requant_generic.GenericRequantizer`'s stages around the product: the
    whole shift and the saturation after a registered ``product`` of ``acc_width + 16`` bits, then the rounding
    and offset in one adder beside the clamp's compares, which read ``saturated`` against
    registered thresholds (:meth:`Requantizer._clamp_thresholds`). The split-product
    variant takes :class:`_FabricTailRequantizer`'s shorter shift stage instead."""

    _product_extra = 16
    registered_bounds = True

    def _prepare(self, m):
        shifts = [Signal(6, name=f"shift{s}") for s in range(1, self.latency - 1)]
        m.d.sync += shifts[0].eq(self.shift)
        m.d.sync += [shifts[s].eq(shifts[s - 1]) for s in range(1, len(shifts))]
        self._shift = shifts[-1]        # with the product

    def _lane(self, m, lane):
        halved, saturated, raw = lane.halved, lane.saturated, lane.raw
        m.d.comb += halved.eq(lane.product >> (self._shift - 1)[:6])
        m.d.sync += [
            lane.biased.eq(self.acc[lane.index] + self.bias),
            raw[0].eq(self.acc[lane.index][:8]),
            saturated.eq(saturate(halved)),
        ]
        self._bypass_delay(m, lane)
        self._product(m, lane)
        self._round_offset_clamp(m, lane)

    def _product(self, m, lane):
        """``product``, registered, from ``biased`` and the registered ``mult``."""
        raise NotImplementedError


def split_product(m, lane, factor):
    """``lane.product``: ``lane.biased`` times the unsigned ``factor`` over two registered
    stages: :func:`split_partials`, then their sum."""
    m.d.sync += lane.product.eq(split_partials(m, lane, factor))


def split_partials(m, lane, factor):
    """``lane.biased * factor``, combinational from registered partial products: those of
    ``biased``'s low :data:`SPLIT_BITS` bits (unsigned) and of the bits above (signed), each
    one 18x18 DSP multiplier, added by the returned value; with ``biased`` up to
    :data:`SPLIT_BITS` bits, one registered ``*``."""
    width, biased, bits = len(lane.biased), lane.biased, len(factor)
    if width > SPLIT_BITS:
        low_part = Signal(SPLIT_BITS + bits, name=f"product_low{lane.index}")
        high_part = Signal(signed(width - SPLIT_BITS + bits), name=f"product_high{lane.index}")
        m.d.sync += [low_part.eq(biased[:SPLIT_BITS] * factor),
                     high_part.eq(biased[SPLIT_BITS:].as_signed() * factor)]
        return (high_part << SPLIT_BITS) + low_part
    whole = Signal(signed(width + bits + 1), name=f"product_whole{lane.index}")
    m.d.sync += whole.eq(biased * factor)
    return whole


class _FabricTailRequantizer(Requantizer):
    """The stages around the product built for the iCE40's logic cells (and the ECP5's split
    product's), after a product of ``acc_width + 15`` bits.

    The shift by ``shift - 1`` takes two steps, a coarse one by a multiple of 16 and a fine
    one by 0..15; ``shift - 1`` is pipelined from the input (no decrement in front of the
    shifter's selects). The saturation test reads a mask of the bits above the 11 kept,
    registered from the shift a stage early, so it runs beside the shifter, not after it.
    The last stage adds ``zp`` and the rounding in one adder and compares with ``lo`` and
    ``hi`` side by side (or ``saturated`` with registered thresholds: ``registered_bounds``).
    """

    def _prepare(self, m):
        self._less = less = [Signal(6, name=f"shift_less{s}") for s in range(1, self.latency - 1)]
        m.d.sync += [less[0].eq((self.shift - 1)[:6])]
        m.d.sync += [less[s].eq(less[s - 1]) for s in range(1, len(less))]

    def _lane(self, m, lane):
        index, saturated, less = lane.index, lane.saturated, self._less
        m.d.sync += lane.raw[0].eq(self.acc[index][:8])
        self._bypass_delay(m, lane)
        coarse = self._coarse_product(m, lane)
        m.d.comb += lane.halved.eq(coarse >> less[-1][:4])
        sign = coarse[-1]
        mask = Signal(len(lane.product) - SATURATE_BITS, name=f"mask{index}")
        m.d.sync += [mask[k].eq(less[-2][:4] <= k) for k in range(len(mask))]
        above = coarse[SATURATE_BITS - 1:-1]
        # Over the 11 bits: a one above them when positive, a zero when negative.
        # Two reductions of two bits per LUT, then one LUT per result bit.
        ones = Signal(name=f"ones{index}")
        all_ones = Signal(name=f"all_ones{index}")
        m.d.comb += [ones.eq((above & mask).any()), all_ones.eq((above | ~mask).all())]
        over = Mux(sign, ~all_ones, ones)
        m.d.sync += saturated.eq(Mux(over, Cat((~sign).replicate(SATURATE_BITS - 1), sign),
                                     lane.halved[:SATURATE_BITS]))
        self._round_offset_clamp(m, lane)

    def _coarse_product(self, m, lane):
        """Drive ``product``; return it shifted by the multiple of 16 in ``shift - 1``: by
        :meth:`_coarse` in front of the fine shift, or (the pipelined Booth tree) registered
        with the last adder."""
        raise NotImplementedError

    def _coarse(self, m, lane):
        """``product`` shifted by the multiple of 16 in ``shift - 1``, combinationally in
        front of the fine shift."""
        coarse = Signal(signed(len(lane.product)), name=f"coarse{lane.index}")
        m.d.comb += coarse.eq(coarse_shift(lane.product, self._less[-1][4:]))
        return coarse

    def _coarse_registered(self, m, lane, total):
        """``product``: ``total`` shifted by the multiple of 16 in ``shift - 1`` in the stage
        that computes it (the pipelined variants, whose last product adder leaves room)."""
        m.d.sync += lane.product.eq(coarse_shift(total, self._less[-2][4:]))
        return lane.product
