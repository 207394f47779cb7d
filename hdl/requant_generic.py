"""The requantizers whose product is a ``*`` left to the synthesis tool (DSP blocks): the
generic one, the split product, and the ``tflite`` mode's."""

from amaranth import *

from .requant_base import (_MEMBERS, _TFLITE_MEMBERS, Requantizer, _FabricTailRequantizer,
                           _WideTailRequantizer, saturate, split_partials, split_product)

__all__ = ["GenericRequantizer", "SplitProductRequantizer", "TfliteRequantizer"]


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


class SplitProductRequantizer(_FabricTailRequantizer):
    __doc__ = """The requantizer with its product over two stages, for 18x18 DSP multipliers.

    The ``acc_width``-bit factor is split at ``SPLIT_BITS`` (17) into an unsigned low part
    and a signed high part, each multiplied by ``mult`` (each fits one 18x18 DSP
    multiplier, ECP5 MULT18X18D), and the next stage adds the two partial products and
    shifts their sum by the multiple of 16 in ``shift - 1``. With ``acc_width`` up to
    ``SPLIT_BITS`` (17) the product is one ``*``. The stages after are
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
    2. The partial products: ``x`` split at ``SPLIT_BITS`` (17) into an unsigned low part
       and a signed high part, each times ``M`` (:func:`split_product`; Yosys maps each to
       MULT18X18D on an ECP5, two per partial product for the 31-bit ``M``).
    3. Their sum, ``P = x * M``.
    4. The high multiply's rounding: ``((x << left) * M + 2**30) >> 31 = (P + 2**(30-left))
       >> (31-left)``, computed as ``high = ((P >> (30-left)) + 1) >> 1``: a shift and a
       33-bit increment instead of an adder as wide as ``P``.
    5. The divide: ``v = high - (high < 0)`` (``v = high`` when ``right`` is 0), then
       ``t = (2 v) >> right``, which is ``v >> (right-1)`` for ``right`` >= 1 and ``2 high``
       for 0; saturated to ``SATURATE_BITS`` (11) bits (exact, as in the other variants).
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
