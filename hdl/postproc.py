"""Post-processing: bias, requantization, output zero point and clamp (the numerics contract).

For each lane::

    y = clamp(zp_out + ((acc + bias) * mult + (1 << (shift - 1)) >> shift), lo, hi)

with ``>>`` an arithmetic (floor) shift, so ties round toward +infinity; exactly
``fpganet.quantize.fixed_point.requantize`` followed by the clamp of
docs/reference/architecture.md. The rounding uses ``(x >> (shift-1)) + 1 >> 1``, which equals
``(x + 2^(shift-1)) >> shift`` for every integer ``x`` and needs no wide adder.

``x >> (shift-1)`` is saturated to 11 bits before the rounding (exact: see
:data:`SATURATE_BITS`). ``acc + bias`` is kept in ``acc_width`` bits: the contract's no-overflow rule
(``|bias| + 128 * sum|w| < 2^(acc_width-1)``) makes it exact. ``lo > hi`` gives
``hi`` (as numpy's ``clip``).

The requantizer comes in seven components, one per way of building the ``(acc + bias) *
mult`` product, each with its own :attr:`~Requantizer.latency`; the same ports and the same
bytes:

=====================================  ==========  =======  =========================================
component                              multiplier  latency  the product
=====================================  ==========  =======  =========================================
:class:`GenericRequantizer`            generic     4        a ``*`` left to the synthesis tool
:class:`SplitProductRequantizer`       generic     5        two ``*`` of 17-bit parts, then their sum
:class:`BoothRequantizer`              booth       4        radix-4 partial products in logic cells
:class:`PipelinedBoothRequantizer`     booth       5        the same, the adder tree over two stages
:class:`Ice40DSPRequantizer`           ice40_dsp   5        two iCE40 SB_MAC16 per lane
:class:`ShiftAddRequantizer`           shift_add   4        a shifted copy per multiplier bit, summed
:class:`PipelinedShiftAddRequantizer`  shift_add   5        the same, the sum registered
=====================================  ==========  =======  =========================================

An eighth, :class:`TfliteRequantizer` (latency 6), computes the ``tflite`` requantization mode
(``config.requant_mode``, docs/reference/numerics.md section 8): TFLite's rounding doubling high multiply
by a 31-bit multiplier and rounding divide by a power of two, with the parameter entry's
ports of that mode (:data:`fpganet.isa.PARAM_LAYOUTS`).

:func:`requantizer` picks the one for ``config.requant_mode``, ``config.requant_latency`` and
a ``multiplier`` name (:data:`MULTIPLIERS`): the only place the choice is made.
"""

from types import SimpleNamespace

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import PARAM_LAYOUTS

from .ice40_dsp import Multiply16, MultiplyAdd16

__all__ = ["Requantizer", "GenericRequantizer", "SplitProductRequantizer", "BoothRequantizer",
           "PipelinedBoothRequantizer", "Ice40DSPRequantizer", "ShiftAddRequantizer",
           "PipelinedShiftAddRequantizer", "TfliteRequantizer", "requantizer", "MULTIPLIERS",
           "VARIANTS"]

#: ``product >> (shift - 1)`` is saturated to this many signed bits before rounding: any value
#: beyond makes ``zp_out + round`` leave the int8 range for every ``zp_out``, so the clamp gives
#: the same byte, and the rounding, offset and clamp work on 11 bits instead of ~48.
SATURATE_BITS = 11

#: In :class:`SplitProductRequantizer`, ``acc + bias`` is multiplied in two parts split at this
#: bit: 17 unsigned bits are what an 18x18 signed DSP multiplier (ECP5 MULT18X18D) takes.
SPLIT_BITS = 17

#: Radix-4 digits of the 15-bit unsigned ``mult`` for the Booth requantizers.
DIGITS = 8

#: ``multiplier`` names of :func:`requantizer`: how the ``(acc + bias) * mult`` product is built.
MULTIPLIERS = ("generic", "booth", "ice40_dsp", "shift_add")

#: In :class:`Ice40DSPRequantizer`, the bits of the signed high part of ``acc + bias`` that
#: one SB_MAC16 multiplies (a second multiplies the unsigned bits below).
DSP_BITS = 16

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
    component of its own: a variant (the module's table) adds the product and the stages
    around it, and states its :attr:`latency`; :func:`requantizer` picks one.

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
    """:class:`GenericRequantizer`'s stages around the product: the whole shift and the
    saturation after a registered ``product`` of ``acc_width + 16`` bits, then the rounding
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


class GenericRequantizer(_WideTailRequantizer):
    __doc__ = """The requantizer with its product a ``*`` left to the synthesis tool (DSP
    blocks where there are some free); four stages.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_latency`` 4.
    lanes : int
        Results per cycle: one ``acc_width x requant_mult_bits``-bit multiplier each.
    {members}
    Latency: 4 cycles (:attr:`latency`): bias add, product, shift and saturation, round,
    offset and clamp. Throughput: one set per cycle, always; no back-pressure.
    """.format(members=_MEMBERS)

    latency = 4

    def _product(self, m, lane):
        factor, low = self._top_bits()
        product = lane.biased * factor
        m.d.sync += lane.product.eq(product << low if low else product)


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


class BoothRequantizer(_FabricTailRequantizer):
    __doc__ = """The requantizer with its product from radix-4 Booth partial products in
    logic cells (for an FPGA without a free multiplier: the iCE40 whose DSPs are the
    array's); four stages.

    The bias stage also recodes ``mult`` and selects the eight partial products behind
    the bias adder (:func:`booth_digits`, :func:`booth_rows`; registered); the product
    stage sums them with a tree of explicit two-operand adders, one logic cell per adder
    bit on an iCE40 (:func:`booth_product`). The shift stage shifts by the multiple of 16
    in ``shift - 1``, then by the rest, and saturates; the last stage rounds, offsets and
    clamps.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_latency`` 4.
    lanes : int
        Results per cycle: one partial-product tree each.
    {members}
    Latency: 4 cycles (:attr:`latency`): bias add and partial products, adder tree, shift
    and saturation, round, offset and clamp. Throughput: one set per cycle, always; no
    back-pressure.
    """.format(members=_MEMBERS)

    latency = 4

    def _prepare(self, m):
        # Stage 1 recodes mult and selects the partial products behind the bias adder (one
        # LUT level), so the next stage holds only adders.
        self._digits = digits = []
        for k, values in enumerate(booth_digits(self.mult)):
            # Kept as nets: the LUT mapper would otherwise fold the recoding into each
            # row LUT (more LUTs, deeper).
            digit = [Signal(name=f"digit{k}_{n}", attrs={"keep": 1}) for n in ("sel0", "sel1")]
            m.d.comb += [signal.eq(value) for signal, value in zip(digit, values)]
            digits.append((*digit, values[2]))
        self._negs = negs = [Signal(name=f"digit{k}_neg") for k in range(DIGITS)]
        m.d.sync += [neg.eq(digit[2]) for neg, digit in zip(negs, digits)]
        super()._prepare(m)

    def _booth_total(self, m, lane, *, pipelined):
        """The partial products, registered, and their sum (:func:`booth_product`)."""
        index, width = lane.index, self.config.acc_width
        sum_in = Signal(signed(width), name=f"sum_in{index}")   # acc + bias, unregistered
        m.d.comb += sum_in.eq(self.acc[index] + self.bias)
        rows = [Signal(signed(width + 1), name=f"row{index}_{k}") for k in range(DIGITS)]
        m.d.sync += [row.eq(value) for row, value in zip(rows, booth_rows(sum_in, self._digits))]
        return booth_product(m, rows, self._negs, len(lane.product),
                             pipelined=pipelined, name=f"booth{index}")

    def _coarse_product(self, m, lane):
        m.d.sync += lane.product.eq(self._booth_total(m, lane, pipelined=False))
        return self._coarse(m, lane)


class PipelinedBoothRequantizer(BoothRequantizer):
    __doc__ = """:class:`BoothRequantizer` with its adder tree over two stages; five stages.

    The first product stage adds the eight partial products into two half-sums (two adder
    levels), the second adds the half-sums and shifts by the multiple of 16 in
    ``shift - 1``; the shift stage then shifts by the rest.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_latency`` 5.
    lanes : int
        Results per cycle: one partial-product tree each.
    {members}
    Latency: 5 cycles (:attr:`latency`): bias add and partial products, two half-sums,
    their sum and the coarse shift, fine shift and saturation, round, offset and clamp.
    Throughput: one set per cycle, always; no back-pressure.
    """.format(members=_MEMBERS)

    latency = 5

    def _coarse_product(self, m, lane):
        return self._coarse_registered(m, lane, self._booth_total(m, lane, pipelined=True))


class Ice40DSPRequantizer(_FabricTailRequantizer):
    __doc__ = """The requantizer with its product in two iCE40 SB_MAC16 per lane; five stages.

    One SB_MAC16 (:class:`~fpganet.hdl.ice40_dsp.MultiplyAdd16`) multiplies the top
    :data:`DSP_BITS` bits of ``acc + bias`` and adds, in its accumulator, the product of
    the bits below from a second one (:class:`~fpganet.hdl.ice40_dsp.Multiply16`; none
    for ``acc_width`` <= 16). The stages after the product are
    :class:`BoothRequantizer`'s, the whole shift in the shift stage.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width`` up to ``2 * DSP_BITS - 1``; ``requant_latency`` 5.
    lanes : int
        Results per cycle: two SB_MAC16 each (one with ``acc_width`` <= 16).
    model : bool
        Describe the SB_MAC16 in Amaranth (for ``amaranth.sim``).
    {members}
    Latency: 5 cycles (:attr:`latency`): bias add, the DSPs' product registers, the first
    DSP's accumulator register, shift and saturation, round, offset and clamp.
    Throughput: one set per cycle, always; no back-pressure.
    """.format(members=_MEMBERS)

    latency = 5

    def __init__(self, config, lanes=1, *, model=False):
        super().__init__(config, lanes)
        if config.acc_width > 2 * DSP_BITS - 1:
            raise ValueError(f"Ice40DSPRequantizer takes acc_width up to {2 * DSP_BITS - 1}, "
                             f"not {config.acc_width}")
        self.model = bool(model)

    def _coarse_product(self, m, lane):
        # Stage 2: the DSP's product register and the low part's product; stage 3: the
        # DSP's accumulator register, where the low part's upper bits join the product.
        index, biased, product, mult1 = lane.index, lane.biased, lane.product, self._mult1
        low_bits = max(0, self.config.acc_width - DSP_BITS)
        m.submodules[f"multiply_add{index}"] = mac = MultiplyAdd16(model=self.model)
        m.d.sync += biased.eq(self.acc[index] + self.bias)
        m.d.comb += [mac.a.eq(biased[low_bits:].as_signed()), mac.b.eq(mult1)]
        if low_bits:
            # The low bits are unsigned and fewer than 16: positive as signed.
            m.submodules[f"multiply_low{index}"] = low = Multiply16(model=self.model)
            low_keep = Signal(low_bits, name=f"product_low{index}_kept")
            m.d.comb += [low.a.eq(biased[:low_bits]), low.b.eq(mult1),
                         mac.addend.eq(low.o[low_bits:])]
            m.d.sync += low_keep.eq(low.o[:low_bits])
            m.d.comb += product.eq(Cat(low_keep, mac.o))
        else:
            m.d.comb += product.eq(mac.o)
        return self._coarse(m, lane)


class ShiftAddRequantizer(_FabricTailRequantizer):
    __doc__ = """The requantizer for multipliers of few significant bits: ``acc + bias`` times
    each set bit, shifted, summed on carry chains; four stages.

    With ``config.requant_mult_bits`` = ``b``, every multiplier is a multiple of
    ``2**(15 - b)`` with its top bit set (:attr:`AcceleratorConfig.mult_step`), so the product
    is ``(acc + bias) << 14`` plus ``(acc + bias) << i`` for each set bit ``i`` in
    ``15 - b .. 13``: ``b - 1`` adders in a tree (:func:`shifted_sum`), none at ``b = 1``.
    The bits of ``mult`` below ``15 - b`` are not read. The stages after the product are
    :class:`BoothRequantizer`'s.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``, ``requant_mult_bits``; ``requant_latency`` 4.
    lanes : int
        Results per cycle: ``requant_mult_bits - 1`` adders each.
    {members}
    Latency: 4 cycles (:attr:`latency`): bias add, product, shift and saturation, round,
    offset and clamp. At ``b = 1`` the product is ``acc + bias`` itself, no adder, and its
    stage registers the shift by the multiple of 16 in ``shift - 1`` instead of a copy.
    Throughput: one set per cycle, always; no back-pressure.
    """.format(members=_MEMBERS)

    latency = 4

    def _sum(self, m, lane):
        """``lane.biased`` (stage 1, registered here) times the multiplier's top bits,
        combinational."""
        index, biased = lane.index, lane.biased
        m.d.sync += biased.eq(self.acc[index] + self.bias)
        factor, low = self._top_bits()
        top = len(factor) - 1                   # always set: mult is in [2**14, 2**15)
        terms = [(Mux(factor[bit], biased, 0), low + bit) for bit in range(top)]
        return shifted_sum(m, terms + [(biased, low + top)], len(lane.product),
                           name=f"sum{index}")

    def _coarse_product(self, m, lane):
        if self.config.requant_mult_bits == 1:
            return self._coarse_registered(m, lane, self._sum(m, lane))
        m.d.sync += lane.product.eq(self._sum(m, lane))
        return self._coarse(m, lane)


class PipelinedShiftAddRequantizer(ShiftAddRequantizer):
    __doc__ = """:class:`ShiftAddRequantizer` with the sum registered before the shift by the
    multiple of 16 in ``shift - 1``; five stages.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``, ``requant_mult_bits``; ``requant_latency`` 5.
    lanes : int
        Results per cycle: ``requant_mult_bits - 1`` adders each.
    {members}
    Latency: 5 cycles (:attr:`latency`): bias add, product, the coarse shift, fine shift and
    saturation, round, offset and clamp. Throughput: one set per cycle, always; no
    back-pressure.
    """.format(members=_MEMBERS)

    latency = 5

    def _coarse_product(self, m, lane):
        total = Signal(signed(len(lane.product)), name=f"sum{lane.index}_reg")
        m.d.sync += total.eq(self._sum(m, lane))
        return self._coarse_registered(m, lane, total)


class SplitProductRequantizer(_FabricTailRequantizer):
    __doc__ = """The requantizer with its product over two stages, for 18x18 DSP multipliers.

    The ``acc_width``-bit factor is split at :data:`SPLIT_BITS` into an unsigned low part
    and a signed high part, each multiplied by ``mult`` (each fits one 18x18 DSP
    multiplier, ECP5 MULT18X18D), and the next stage adds the two partial products and
    shifts their sum by the multiple of 16 in ``shift - 1``. With ``acc_width`` up to
    :data:`SPLIT_BITS` the product is one ``*``. The stages after are
    :class:`BoothRequantizer`'s (the fine shift beside the saturation's mask), with the
    clamp's thresholds registered (:meth:`Requantizer._clamp_thresholds`): on the ULX3S the
    whole shift in front of the saturation was a critical path (13.2 ns).

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_latency`` 5.
    lanes : int
        Results per cycle: two partial products each.
    {members}
    Latency: 5 cycles (:attr:`latency`): bias add, partial products, their sum and the
    coarse shift, fine shift and saturation, round, offset and clamp. Throughput: one set per cycle, always; no
    back-pressure.
    """.format(members=_MEMBERS)

    latency = 5
    registered_bounds = True

    def _coarse_product(self, m, lane):
        m.d.sync += lane.biased.eq(self.acc[lane.index] + self.bias)
        factor, low = self._top_bits()
        total = split_partials(m, lane, factor)
        return self._coarse_registered(m, lane, total << low if low else total)


class TfliteRequantizer(Requantizer):
    __doc__ = """The ``tflite`` requantization (docs/reference/numerics.md section 8) for 18x18 DSP
    multipliers; six stages.

    For each lane::

        y = clamp(zp + multiply_tflite(acc + bias, 2**30 + mult, shift, single), lo, hi)

    with ``fpganet.quantize.fixed_point.multiply_tflite`` TFLite's
    ``MultiplyByQuantizedMultiplier``: ``left = max(shift, 0)``, ``right = max(-shift, 0)``,
    ``high = ((x << left) * M + 2**30) >> 31`` (the rounding doubling high multiply), then
    ``(high + 2**(right-1) - (high < 0)) >> right`` (the rounding divide, half away from
    zero; ``high`` itself for ``right`` 0). ``acc + bias`` is kept in ``acc_width`` bits;
    the contract keeps it from overflowing and ``(acc + bias) << left`` within int32, which
    keeps ``high`` within 32 bits. With ``single`` the multiply rounds once,
    ``high = (x * M + 2**(30 - shift)) >> (31 - shift)``: the same stages with the first
    rounding at ``31 - shift`` and no divide (``right`` 0).

    The stages:

    1. ``x = acc + bias``; from ``shift``, the first rounding's ``30 - left`` and
       ``right`` (``single``: ``30 - shift`` and 0); ``M = 2**30 + mult``, 31 bits.
    2. The partial products: ``x`` split at :data:`SPLIT_BITS` into an unsigned low part
       and a signed high part, each times ``M`` (:func:`split_product`; Yosys maps each to
       MULT18X18D on an ECP5, two per partial product for the 31-bit ``M``).
    3. Their sum, ``P = x * M``.
    4. The high multiply's rounding: ``((x << left) * M + 2**30) >> 31 = (P + 2**(30-left))
       >> (31-left)``, computed as ``high = ((P >> (30-left)) + 1) >> 1``: a shift and a
       33-bit increment instead of an adder as wide as ``P``.
    5. The divide: ``v = high - (high < 0)`` (``v = high`` when ``right`` is 0), then
       ``t = (2 v) >> right``, which is ``v >> (right-1)`` for ``right`` >= 1 and ``2 high``
       for 0; saturated to :data:`SATURATE_BITS` bits (exact, as in the other variants).
    6. ``(t + 1) >> 1``, which is ``(v + 2**(right-1)) >> right`` (the same rounding
       identity), or ``high`` for ``right`` 0; plus ``zp``, clamped; ``lo > hi`` gives
       ``hi``; ``bypass`` gives ``acc``'s low byte.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_width``; ``requant_mode`` ``"tflite"``, ``requant_latency`` 6.
    lanes : int
        Results per cycle: two partial products each (four MULT18X18D on an ECP5).
    {members}
    Latency: 6 cycles (:attr:`latency`): bias add, partial products, their sum, the high
    multiply's rounding, the divide and saturation, round, offset and clamp. Throughput:
    one set per cycle, always; no back-pressure.
    """.format(members=_TFLITE_MEMBERS)

    latency = 6
    requant_mode = "tflite"
    _product_extra = 31     # M is 31 bits

    def _prepare(self, m):
        # Stage 1: the shifts from the exponent, carried along with the data; down (30 -
        # left, 0..30; single: 30 - shift, 0..61) reaches stage 4 with P, right (0..31;
        # single: 0) stage 5 with high.
        shift, once = self.shift, self.single
        down = [Signal(6, name=f"down{s}") for s in range(1, 4)]
        right = [Signal(5, name=f"right{s}") for s in range(1, 5)]
        m.d.sync += [down[0].eq(Mux((shift < 0) & ~once, 30, 30 - shift)),
                     right[0].eq(Mux((shift < 0) & ~once, -shift, 0))]
        m.d.sync += [later.eq(earlier) for chain in (down, right)
                     for earlier, later in zip(chain, chain[1:])]
        self._down, self._right = down[-1], right[-1]
        self._factor = Cat(self._mult1, C(1, 1))           # M = 2**30 + mult

    def _lane(self, m, lane):
        index = lane.index
        m.d.sync += [lane.biased.eq(self.acc[index] + self.bias),
                     lane.raw[0].eq(self.acc[index][:8])]
        self._bypass_delay(m, lane)
        split_product(m, lane, self._factor)               # stages 2 and 3
        # Stage 4: high = (P + 2**(30-left)) >> (31-left); P >> (30-left) is 33 bits (and
        # so is P >> (30 - shift) when single rounds further down).
        scaled = Signal(signed(33), name=f"scaled{index}")
        high = Signal(signed(32), name=f"high{index}")
        m.d.comb += scaled.eq(lane.product >> self._down)
        m.d.sync += high.eq((scaled + 1) >> 1)
        # Stage 5: the divide by 2**right, before its last rounding.
        m.d.sync += lane.saturated.eq(saturate(self._divide(m, index, high)))
        self._round_offset_clamp(m, lane)                  # stage 6

    def _divide(self, m, index, high):
        """``(2 v) >> right`` with ``v = high - (high < 0)`` for ``right`` >= 1, ``high``
        for 0: the rounding divide, less its last ``+1 >> 1`` (combinational)."""
        away = Signal(signed(32), name=f"away{index}")     # ties then round away from zero
        m.d.comb += away.eq(high - (high[-1] & (self._right != 0)))
        return Cat(C(0, 1), away).as_signed() >> self._right


#: The requantizer for each ``(multiplier, requant_latency)``; latency 6 is the ``tflite``
#: requantization mode's.
VARIANTS = {
    ("generic", 4): GenericRequantizer,
    ("generic", 5): SplitProductRequantizer,
    ("booth", 4): BoothRequantizer,
    ("booth", 5): PipelinedBoothRequantizer,
    ("ice40_dsp", 5): Ice40DSPRequantizer,
    ("shift_add", 4): ShiftAddRequantizer,
    ("shift_add", 5): PipelinedShiftAddRequantizer,
    ("generic", 6): TfliteRequantizer,
}


def requantizer(config, lanes=1, *, multiplier="generic", dsp_model=False):
    """The requantizer variant for ``config.requant_mode``, ``config.requant_latency`` and
    ``multiplier``.

    Parameters
    ----------
    config : AcceleratorConfig
    lanes : int
        Results per cycle.
    multiplier : str
        One of :data:`MULTIPLIERS`: ``"generic"`` (a ``*``), ``"booth"`` (logic cells),
        ``"ice40_dsp"`` (two SB_MAC16 per lane; ``requant_latency`` 5 only), ``"shift_add"``
        (``config.requant_mult_bits - 1`` adders per lane, for few bits). The ``tflite``
        requantization mode has ``"generic"`` only (:class:`TfliteRequantizer`).
    dsp_model : bool
        With ``"ice40_dsp"``: the SB_MAC16 described in Amaranth (for ``amaranth.sim``).

    Returns
    -------
    Requantizer
        One of :data:`VARIANTS`, whose :attr:`~Requantizer.latency` is
        ``config.requant_latency``.
    """
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
    if multiplier not in MULTIPLIERS:
        raise ValueError(f"multiplier must be one of {MULTIPLIERS}, not {multiplier!r}")
    if config.requant_mode == "tflite" and multiplier != "generic":
        raise ValueError(f"the tflite requantization mode has the generic multiplier only, "
                         f"not {multiplier!r}")
    variant = VARIANTS.get((multiplier, config.requant_latency))
    if variant is None:
        raise ValueError(f"multiplier {multiplier!r} needs requant_latency 5, not "
                         f"{config.requant_latency}")
    if variant is Ice40DSPRequantizer:
        return variant(config, lanes, model=dsp_model)
    return variant(config, lanes)


def coarse_shift(value, amount):
    """``value >> 16 * amount`` (arithmetic) for a 2-bit ``amount``: two mux levels."""
    return Mux(amount[1], Mux(amount[0], value >> 48, value >> 32),
               Mux(amount[0], value >> 16, value))


def add_terms(m, a, b, width, *, name, extras=()):
    """``a + b + extras`` of ``(value, lsb)`` terms (each ``value << lsb``), modulo
    ``2**width``, as one two-operand adder (combinational): ``a`` the lower, ``extras`` bits
    of ``b``'s operand below ``b``'s lsb (a Booth row's ``+1``), which extend the adder
    downwards; the bits of ``a`` below the adder pass through. Yosys maps the one ``+`` to an
    iCE40 carry chain, one logic cell per adder bit.

    Returns
    -------
    (Signal, int)
        The sum and its lsb, ``a``'s.
    """
    (va, la), (vb, lb) = a, b
    start = min([lb] + [position for _, position in extras])
    assert la <= start
    operand = [C(0, 1)] * (lb - start)
    for bit, position in extras:
        operand[position - start] = bit
    high = Cat(*operand, vb).as_signed()
    upper = va[start - la:].as_signed() if start > la else va
    total_width = min(max(len(upper), len(high)) + 1, width - start)
    total = Signal(signed(total_width), name=name)
    m.d.comb += total.eq(upper + high)
    if start == la:
        return total, la
    low = va[:start - la]
    joined = Signal(signed(len(low) + total_width), name=f"{name}_all")
    m.d.comb += joined.eq(Cat(low, total))
    return joined, la


def shifted_sum(m, terms, width, *, name):
    """The sum of ``(value, lsb)`` terms, each ``value << lsb``, modulo ``2**width``, as a
    tree of :func:`add_terms` adders (combinational).

    Returns
    -------
    Value
        Signed; its bits below the lowest ``lsb`` are zero.
    """
    terms = sorted(terms, key=lambda term: term[1])
    level = 0
    while len(terms) > 1:
        pairs = zip(terms[0::2], terms[1::2])
        terms = [add_terms(m, low, high, width, name=f"{name}_{level}_{j}")
                 for j, (low, high) in enumerate(pairs)] + terms[len(terms) - len(terms) % 2:]
        level += 1
    value, lsb = terms[0]
    return Cat(C(0, lsb), value).as_signed()


def booth_digits(mult):
    """The radix-4 recoding of the unsigned ``mult`` (combinational).

    The digits are ``d_k`` in {-1, 0, 1, 2} with ``mult = sum(d_k 4^k)``: digit ``k`` is
    ``v = mult[2k] + 2 mult[2k+1] + c_k`` reduced mod 4 into that set, the carry ``c_(k+1)``
    set for ``v >= 3``. Unlike the usual {-2..2} digits, four row choices remain
    (0, x, 2x, ~x), so a partial-product bit is one 4-input function of
    (``x[j]``, ``x[j-1]``, two select bits): one LUT4 on an iCE40, the negation
    included (:func:`booth_rows`); the ``+1`` that completes ``-x = ~x + 1`` goes into
    the adders (:func:`booth_product`). The top digit is in 0..2 (``mult < 2 * 4^7``),
    never negative.

    Returns
    -------
    list of (Value, Value, Value)
        ``(sel0, sel1, neg)`` per digit: the row is ``0, x, 2x, ~x`` for
        ``(sel1, sel0)`` = 00, 01, 10, 11, and ``neg = sel1 & sel0``.
    """
    bits = Cat(mult, C(0, 2 * DIGITS - len(mult)))
    low, high = bits[0::2], bits[1::2]                  # mult[2k], mult[2k+1]
    # c_k: the low 2k bits exceed what digits 0..k-1 reach, 2 (4^k - 1) / 3. One compare
    # with a constant per digit: a short carry chain each, not a ripple through the digits.
    digits = []
    for k in range(DIGITS):
        carry = mult[:2 * k] >= (2 * 4 ** k + 1) // 3 if k else C(0, 1)
        b0, b1 = low[k], high[k]
        odd = b0 ^ carry                                # v = b0 + 2 b1 + carry is 1 or 3
        digits.append((odd,                             # sel0
                       b1 ^ (b0 & carry),               # sel1: v is 2 or 3
                       odd & b1))                       # neg: v is 3
    return digits


def booth_rows(x, digits):
    """The partial products ``r_k`` of :func:`booth_digits`: ``0, x, 2x`` or ``~x``, each
    ``len(x) + 1`` signed bits, one LUT4 per bit (combinational)."""
    x_one = Cat(x, x[-1])             # x, sign-extended by one bit
    x_two = Cat(C(0, 1), x)           # 2x
    return [Mux(sel1, Mux(sel0, ~x_one, x_two), Mux(sel0, x_one, 0)).as_signed()
            for sel0, sel1, _ in digits]


def booth_product(m, rows, negs, width, *, pipelined, name):
    """``x * mult`` from :func:`booth_rows` and the digits' ``neg``, as a tree of
    two-operand adders.

    The eight rows (row ``k`` weighs ``4^k``) are added in pairs (level 1), the pairs
    into two half-sums (level 2), the halves into the product (level 3). The ``+1`` of
    each negative row (``negs[k]`` at bit ``2k``) rides in a zero bit of an adder
    operand just below the other operand's lowest bit, which extends that adder by two
    bits. Each adder is one ``+`` of two signals, which Yosys maps to an iCE40 carry
    chain (one logic cell per bit); the bits below an adder's operands pass through.
    Everything is modulo ``2^width`` (``width`` holds the product).

    With ``pipelined``, the two half-sums (and the one ``neg`` the last adder takes) are
    registered, the first of two stages, and the returned value is the last adder, for the
    caller's register; otherwise the whole tree is combinational.

    Returns
    -------
    Value
        ``x * mult``, signed ``width`` bits.
    """
    rows = [(row, 2 * k) for k, row in enumerate(rows)]
    negs = [(neg, 2 * k) for k, neg in enumerate(negs)]

    def add(a, b, extras, label):
        return add_terms(m, a, b, width, name=f"{name}_{label}", extras=extras)

    # Level 1: pairs of rows, each with the lower row's +1.
    pairs = [add(rows[2 * j], rows[2 * j + 1], [negs[2 * j]], f"pair{j}") for j in range(4)]
    # Level 2: two half-sums, each with the +1 of its first pair's upper row.
    halves = [add(pairs[2 * h], pairs[2 * h + 1], [negs[4 * h + 1]], f"half{h}") for h in range(2)]
    last_neg = negs[3]
    if pipelined:
        registered = []
        for h, (value, lsb) in enumerate(halves):
            reg = Signal(signed(len(value)), name=f"{name}_half{h}_reg")
            m.d.sync += reg.eq(value)
            registered.append((reg, lsb))
        halves = registered
        neg = Signal(name=f"{name}_neg3_reg")     # the digits belong to the next set by now
        m.d.sync += neg.eq(last_neg[0])
        last_neg = (neg, last_neg[1])
    # Level 3: the product, with digit 3's +1 (digit 7 is never negative).
    return add(halves[0], halves[1], [last_neg], "sum")[0]
