"""The requantizers whose product is built for the iCE40: Booth partial products and
shift-add sums in logic cells, or two SB_MAC16 per lane."""

from amaranth import *

from .fabric_arith import DIGITS, booth_digits, booth_product, booth_rows, shifted_sum
from .ice40_dsp import Multiply16, MultiplyAdd16
from .requant_base import _MEMBERS, _FabricTailRequantizer

__all__ = ["BoothRequantizer", "PipelinedBoothRequantizer", "Ice40DSPRequantizer",
           "ShiftAddRequantizer", "PipelinedShiftAddRequantizer", "DSP_BITS"]

#: In :class:`Ice40DSPRequantizer`, the bits of the signed high part of ``acc + bias`` that
#: one SB_MAC16 multiplies (a second multiplies the unsigned bits below).
DSP_BITS = 16


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
