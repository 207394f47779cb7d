"""Two int8 products per iCE40 SB_MAC16: the systolic array on the UP5K's eight DSPs.

The iCE40 UltraPlus has eight SB_MAC16 blocks and 5,280 logic cells. A 16x16
SB_MAC16 in *8x8 mode* (``MODE_8x8 = 1``) holds two independent signed 8x8
multipliers: the top one multiplies ``A[15:8] * B[15:8]``, the bottom one
``A[7:0] * B[7:0]``, each with its own product register (``TOP_8x8_MULT_REG``,
``BOT_8x8_MULT_REG``) and each on its own half of the output (``O[31:16]``,
``O[15:0]`` with ``TOP/BOTOUTPUT_SELECT = 2``). So one SB_MAC16 serves two
processing elements, and the 2x8 array's 16 PEs make 16 int8 MACs per cycle on
the 8 DSPs; the 32-bit accumulators stay in the fabric (an SB_MAC16 half has
only a 16-bit accumulator).

The SB_MAC16 is instantiated by hand, and the design must then be synthesized
**without** ``synth_ice40 -dsp``: with ``-dsp``, Yosys's ``ice40_dsp`` pass
re-packs hand-made SB_MAC16 cells as 16x16 multipliers (yosys issue 2922), and
the netlist computes something else. :func:`fpganet.boards.build` leaves
``-dsp`` off for iCE40 builds; ``tests/test_boards_ice40_dsp.py`` simulates the
synthesized netlist (Yosys ``write_verilog`` with its own ``cells_sim.v``
model of SB_MAC16) against numpy.

Usage: ``Ice40SystolicArray(config)`` is a :class:`SystolicArray` whose PEs
share SB_MAC16s in pairs; ``SystolicArray(config, pe=DSPPairing())`` is the
same through the array's ``pe=`` factory (the factory pairs PEs in the order
it creates them). Both keep the array's interface, latency and numerics.
``model=True`` replaces the SB_MAC16 by an equivalent Amaranth description so
that ``amaranth.sim`` can run the design.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import ConfigError
from fpganet.hdl.systolic import PairProducts, ProcessingElement, SystolicArray

__all__ = ["sb_mac16_8x8_parameters", "sb_mac16_multiply_add_parameters", "Mac8x8Pair",
           "sb_mac16_multiply_parameters", "MultiplyAdd16", "Multiply16", "DSPProcessingElement", "DSPPairing",
           "Ice40PairProcessingElement",
           "Ice40SystolicArray", "UP5K_DSPS"]

#: SB_MAC16 blocks on the iCE40UP5K.
UP5K_DSPS = 8


_SB_MAC16_WIDTHS = {
    "NEG_TRIGGER": 1, "C_REG": 1, "A_REG": 1, "B_REG": 1, "D_REG": 1,
    "TOP_8x8_MULT_REG": 1, "BOT_8x8_MULT_REG": 1,
    "PIPELINE_16x16_MULT_REG1": 1, "PIPELINE_16x16_MULT_REG2": 1,
    "TOPOUTPUT_SELECT": 2, "TOPADDSUB_LOWERINPUT": 2, "TOPADDSUB_UPPERINPUT": 1,
    "TOPADDSUB_CARRYSELECT": 2, "BOTOUTPUT_SELECT": 2, "BOTADDSUB_LOWERINPUT": 2,
    "BOTADDSUB_UPPERINPUT": 1, "BOTADDSUB_CARRYSELECT": 2, "MODE_8x8": 1,
    "A_SIGNED": 1, "B_SIGNED": 1,
}


def _sb_mac16_parameters(**values):
    """Every SB_MAC16 parameter as a sized constant: 0 unless given, A and B signed."""
    values = {"A_SIGNED": 1, "B_SIGNED": 1, **values}
    unknown = set(values) - set(_SB_MAC16_WIDTHS)
    assert not unknown, unknown
    return {name: Const(values.get(name, 0), width) for name, width in _SB_MAC16_WIDTHS.items()}


def sb_mac16_8x8_parameters():
    """SB_MAC16 parameters: two registered signed 8x8 multipliers, products on ``O``.

    ``O[31:16] = A[15:8] * B[15:8]`` and ``O[15:0] = A[7:0] * B[7:0]`` (signed,
    16 bits each), one clock after the operands (the 8x8 product registers F
    and G). Widths as in Lattice's "DSP Function Usage Guide for iCE40 Devices"
    (TN1295) and Yosys's ``cells_sim.v``.
    """
    return _sb_mac16_parameters(
        TOP_8x8_MULT_REG=1, BOT_8x8_MULT_REG=1,
        TOPOUTPUT_SELECT=0b10, BOTOUTPUT_SELECT=0b10,     # the 8x8 products, F on top, G below
        MODE_8x8=1)


class Mac8x8Pair(wiring.Component):
    """One SB_MAC16 as two registered signed 8x8 multipliers.

    Members
    -------
    a_top, b_top, a_bot, b_bot : In(signed(8))
    p_top, p_bot : Out(signed(16))
        ``a_top * b_top`` and ``a_bot * b_bot`` of the previous cycle.

    Parameters
    ----------
    model : bool
        Describe the two registered products in Amaranth instead of
        instantiating SB_MAC16 (for ``amaranth.sim``; synthesizes to LUTs).
    """

    def __init__(self, *, model=False):
        self.model = model
        super().__init__({
            "a_top": In(signed(8)), "b_top": In(signed(8)),
            "a_bot": In(signed(8)), "b_bot": In(signed(8)),
            "p_top": Out(signed(16)), "p_bot": Out(signed(16)),
        })

    def elaborate(self, platform):
        m = Module()
        if self.model:
            m.d.sync += [self.p_top.eq(self.a_top * self.b_top),
                         self.p_bot.eq(self.a_bot * self.b_bot)]
            return m
        m.submodules.mac = _sb_mac16(sb_mac16_8x8_parameters(), a=Cat(self.a_bot, self.a_top),
                                     b=Cat(self.b_bot, self.b_top), c=Const(0, 16), d=Const(0, 16),
                                     o=Cat(self.p_bot, self.p_top))
        return m


def sb_mac16_multiply_add_parameters():
    """SB_MAC16 parameters: a registered signed 16x16 product plus an addend, registered.

    ``O = P + {C, D}`` one clock after ``P = A * B`` is registered (the 16x16 pipeline
    register 2): the bottom accumulator adds ``D`` to the product's low half, the top one
    adds ``C`` to its high half with the bottom's carry, and both sums are registered
    (output select 1). A and B are signed (TN1295; Yosys's ``cells_sim.v``).
    """
    return _sb_mac16_parameters(
        PIPELINE_16x16_MULT_REG2=1,
        # Lower input 2: the 16x16 product's half; upper input 1: C (top) or D (bottom).
        TOPADDSUB_LOWERINPUT=0b10, TOPADDSUB_UPPERINPUT=1, TOPADDSUB_CARRYSELECT=0b10,
        BOTADDSUB_LOWERINPUT=0b10, BOTADDSUB_UPPERINPUT=1,
        TOPOUTPUT_SELECT=0b01, BOTOUTPUT_SELECT=0b01)


class MultiplyAdd16(wiring.Component):
    """One SB_MAC16 as ``(a * b) + addend``, two pipeline stages.

    Members
    -------
    a, b : In(signed(16))
    addend : In(32)
        Added to the product one cycle after ``a`` and ``b`` (modulo ``2^32``).
    o : Out(signed(32))
        ``a * b`` of two cycles ago plus ``addend`` of the previous cycle.

    Latency 2 (:attr:`latency`), one result per cycle, no back-pressure. The product
    and the sum are the DSP's own registers, so no logic cell is spent on either.

    Parameters
    ----------
    model : bool
        Describe the same two stages in Amaranth instead of instantiating SB_MAC16
        (for ``amaranth.sim``).
    """

    latency = 2

    def __init__(self, *, model=False):
        self.model = model
        super().__init__({
            "a": In(signed(16)), "b": In(signed(16)), "addend": In(32),
            "o": Out(signed(32)),
        })

    def elaborate(self, platform):
        m = Module()
        if self.model:
            product = Signal(signed(32))
            m.d.sync += [product.eq(self.a * self.b), self.o.eq(product + self.addend)]
            return m
        m.submodules.mac = _sb_mac16(sb_mac16_multiply_add_parameters(), a=self.a, b=self.b,
                                     c=self.addend[16:], d=self.addend[:16], o=self.o)
        return m


def sb_mac16_multiply_parameters():
    """SB_MAC16 parameters: a signed 16x16 product, registered (the 16x16 pipeline
    register 2), on ``O`` (output select 3)."""
    return _sb_mac16_parameters(PIPELINE_16x16_MULT_REG2=1, TOPOUTPUT_SELECT=0b11,
                                BOTOUTPUT_SELECT=0b11)


class Multiply16(wiring.Component):
    """One SB_MAC16 as a registered signed 16x16 multiplier.

    Members
    -------
    a, b : In(signed(16))
    o : Out(signed(32))
        ``a * b`` of the previous cycle.

    Latency 1 (:attr:`latency`), one product per cycle; ``model`` as in
    :class:`MultiplyAdd16`.
    """

    latency = 1

    def __init__(self, *, model=False):
        self.model = model
        super().__init__({"a": In(signed(16)), "b": In(signed(16)), "o": Out(signed(32))})

    def elaborate(self, platform):
        m = Module()
        if self.model:
            m.d.sync += self.o.eq(self.a * self.b)
            return m
        m.submodules.mac = _sb_mac16(sb_mac16_multiply_parameters(), a=self.a, b=self.b,
                                     c=Const(0, 16), d=Const(0, 16), o=self.o)
        return m


def _sb_mac16(parameters, *, a, b, c, d, o):
    return Instance(
        "SB_MAC16",
        **{f"p_{name}": value for name, value in parameters.items()},
        i_CLK=ClockSignal(), i_CE=Const(1, 1),
        i_A=a, i_B=b, i_C=c, i_D=d,
        i_AHOLD=0, i_BHOLD=0, i_CHOLD=0, i_DHOLD=0,
        i_IRSTTOP=0, i_IRSTBOT=0, i_ORSTTOP=0, i_ORSTBOT=0,
        i_OLOADTOP=0, i_OLOADBOT=0, i_ADDSUBTOP=0, i_ADDSUBBOT=0,
        i_OHOLDTOP=0, i_OHOLDBOT=0,
        i_CI=0, i_ACCUMCI=0, i_SIGNEXTIN=0,
        o_O=o,
    )


class DSPProcessingElement(ProcessingElement):
    """A :class:`ProcessingElement` whose registered product comes from half an SB_MAC16.

    Same ports, latency (2) and numerics as :class:`ProcessingElement`. Two PEs
    share one SB_MAC16: :meth:`pair` makes ``self`` the owner of the DSP (its top
    half) and ``partner`` the user of the bottom half. A PE never paired owns
    a DSP of its own (top half only). Operands narrower than 8 bits are
    sign-extended; ``operand_width`` above 8 is refused.
    """

    def __init__(self, config, *, model=False):
        super().__init__(config, separate_result_adder=True)
        if config.operand_width > 8:
            raise ConfigError(f"the SB_MAC16 8x8 mode multiplies at most 8-bit operands, "
                              f"not operand_width {config.operand_width}")
        self.model = model
        #: The registered product, driven by the SB_MAC16 of this PE or of its owner.
        self.product = Signal(signed(16))
        self._partner = None
        self._owner = None
        self._pairing = None
        self._elaborated = False

    def pair(self, partner):
        """Share this PE's SB_MAC16 with ``partner`` (which then owns none)."""
        if not isinstance(partner, DSPProcessingElement):
            raise TypeError(f"can only pair with a DSPProcessingElement, not {partner!r}")
        if self._elaborated or partner._elaborated:
            raise ValueError("cannot pair a PE that has already been elaborated")
        if self._owner is not None or self._partner is not None:
            raise ValueError("this PE already shares its DSP")
        if partner._owner is not None or partner._partner is not None:
            raise ValueError("the partner PE already shares a DSP")
        self._partner = partner
        partner._owner = self

    @property
    def owns_dsp(self):
        return self._owner is None

    def elaborate(self, platform):
        self._elaborated = True
        if self._pairing is not None:
            self._pairing._close(self)
        return super().elaborate(platform)

    def _product(self, m):
        # The base class's forwarding registers, flags and accumulator around half an
        # SB_MAC16: the owner drives both halves' products, a partner's comes from its owner.
        if self.owns_dsp:
            m.submodules.mac = mac = Mac8x8Pair(model=self.model)
            m.d.comb += [mac.a_top.eq(self.a_in), mac.b_top.eq(self.b_in),
                         self.product.eq(mac.p_top)]
            if self._partner is not None:
                partner = self._partner
                m.d.comb += [mac.a_bot.eq(partner.a_in), mac.b_bot.eq(partner.b_in),
                             partner.product.eq(mac.p_bot)]
        return self.product


class Ice40PairProcessingElement(PairProducts, ProcessingElement):
    """Two products a cycle into one accumulator (:class:`~fpganet.hdl.systolic.PairProducts`)
    from both 8x8 halves of one SB_MAC16.

    Where :class:`DSPPairing` gives the two halves to two PEs, each with its accumulator and
    result register in logic cells, this PE adds the two products and keeps one of each: the
    same MACs a cycle on the same DSPs with half the accumulators (a 4x2 array of these is
    16 MACs on the UP5K's eight SB_MAC16). The accelerator uses it with
    ``config.pair_products`` (boards/icebreaker.py), the stand-in (``--core stand-in-pairs``)
    always.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``pair_products``: each operand two of ``operand_width`` (at most 8) bits.
    model : bool
        Registered products described in Amaranth instead of the SB_MAC16 (for
        ``amaranth.sim``).

    Latency 3 (:class:`~fpganet.hdl.systolic.PairProducts`), one beat per cycle.
    """

    def __init__(self, config, *, model=False):
        super().__init__(config, separate_result_adder=True)
        self.model = model

    def _pair_products(self, m, pairs):
        (a_bot, b_bot), (a_top, b_top) = pairs
        m.submodules.mac = mac = Mac8x8Pair(model=self.model)
        m.d.comb += [mac.a_bot.eq(a_bot), mac.b_bot.eq(b_bot),
                     mac.a_top.eq(a_top), mac.b_top.eq(b_top)]
        return mac.p_bot, mac.p_top


class DSPPairing:
    """``pe=`` factory for :class:`SystolicArray`: PEs share SB_MAC16s two by two.

    The PEs are paired in the order the factory creates them (the array
    creates them row by row, so ``(i, 2k)`` shares with ``(i, 2k + 1)``). An
    odd one out keeps a DSP of its own: its pair closes when it is elaborated
    (or at :meth:`finish`), so a factory may serve several designs, for
    example ``Accelerator(config, pe=DSPPairing())``.

    ``max_dsps`` caps the SB_MAC16s used: PEs beyond ``2 * max_dsps`` are plain
    :class:`ProcessingElement` (multiplier in logic cells).
    """

    def __init__(self, *, model=False, max_dsps=None):
        self.model = model
        self.max_dsps = max_dsps
        self.dsps = 0
        self.fabric_pes = 0
        self._pending = None

    def __call__(self, config):
        if self._pending is not None:
            pe = DSPProcessingElement(config, model=self.model)
            self._pending.pair(pe)
            self._pending = None
            return pe
        if self.max_dsps is not None and self.dsps >= self.max_dsps:
            self.fabric_pes += 1
            return ProcessingElement(config, separate_result_adder=True)
        pe = DSPProcessingElement(config, model=self.model)
        pe._pairing = self
        self.dsps += 1
        self._pending = pe
        return pe

    def finish(self):
        """Close the current pair: the next PE starts a new SB_MAC16."""
        self._pending = None

    def _close(self, pe):
        if self._pending is pe:
            self._pending = None


class Ice40SystolicArray(SystolicArray):
    """:class:`SystolicArray` with two PEs per SB_MAC16 (see the module documentation).

    ``max_dsps`` (default: no limit) and ``model`` as in :class:`DSPPairing`.
    After elaboration, :attr:`dsps` says how many SB_MAC16 the array uses.
    """

    def __init__(self, config, *, model=False, max_dsps=None):
        super().__init__(config)
        if config.operand_width > 8:
            raise ConfigError(f"the SB_MAC16 8x8 mode multiplies at most 8-bit operands, "
                              f"not operand_width {config.operand_width}")
        self.model = model
        self.max_dsps = max_dsps
        self.dsps = None

    @staticmethod
    def dsps_needed(config, max_dsps=None):
        """SB_MAC16 blocks an array of ``config`` uses (one a PE with ``pair_products``,
        :class:`Ice40PairProcessingElement`)."""
        pes = config.rows * config.cols
        needed = pes if config.pair_products else (pes + 1) // 2
        return needed if max_dsps is None else min(needed, max_dsps)

    def elaborate(self, platform):
        pairing = DSPPairing(model=self.model, max_dsps=self.max_dsps)
        self._pe_factory = pairing
        m = super().elaborate(platform)
        pairing.finish()
        self.dsps = pairing.dsps
        return m
