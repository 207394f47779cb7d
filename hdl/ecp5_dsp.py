"""ECP5 processing element with the product register inside the MULT18X18D.

Yosys maps a multiplier onto an ECP5 MULT18X18D with all its registers off
(``synth_ecp5`` has no register-packing pass for it), so the PE's product
register lands in the fabric and the critical path runs from the operand
flip-flop through the routing into the DSP, through the multiplier and back
out through the routing into the fabric (about 10.5 ns on an 8x8 array:
95 MHz). Instantiating the MULT18X18D by hand with ``REG_OUTPUT_CLK = "CLK0"``
puts the product register in the DSP and cuts that path in two, with the
PE's latency (2) and numerics unchanged.

``SystolicArray(config, pe=ECP5ProcessingElement)`` uses it; ``model=True``
(``pe=functools.partial(ECP5ProcessingElement, model=True)``) describes the
same registered product in Amaranth for ``amaranth.sim``.

Yosys ships no simulation model of MULT18X18D (only a blackbox), so the
netlist check (``tests/test_boards_ecp5_dsp.py``) uses
``boards/models/mult18x18d.v``, a behavioural model of the configurations
used here, written from Lattice TN1267 (ECP5 sysDSP usage guide).
"""

from amaranth import *

from fpganet.config import ConfigError
from fpganet.hdl.systolic import PairProducts, ProcessingElement, TernaryPairs

__all__ = ["ECP5ProcessingElement", "ECP5PairProcessingElement", "ECP5TernaryPairProcessingElement",
           "mult18x18d_parameters"]


def mult18x18d_parameters():
    """MULT18X18D parameters: signed 18x18 product, output register on CLK0, nothing else."""
    return {
        "REG_INPUTA_CLK": "NONE", "REG_INPUTA_CE": "CE0", "REG_INPUTA_RST": "RST0",
        "REG_INPUTB_CLK": "NONE", "REG_INPUTB_CE": "CE0", "REG_INPUTB_RST": "RST0",
        "REG_INPUTC_CLK": "NONE", "REG_INPUTC_CE": "CE0", "REG_INPUTC_RST": "RST0",
        "REG_PIPELINE_CLK": "NONE", "REG_PIPELINE_CE": "CE0", "REG_PIPELINE_RST": "RST0",
        "REG_OUTPUT_CLK": "CLK0", "REG_OUTPUT_CE": "CE0", "REG_OUTPUT_RST": "RST0",
        "CLK0_DIV": "ENABLED", "CLK1_DIV": "ENABLED", "CLK2_DIV": "ENABLED", "CLK3_DIV": "ENABLED",
        "HIGHSPEED_CLK": "NONE", "GSR": "DISABLED", "CAS_MATCH_REG": "FALSE",
        "SOURCEB_MODE": "B_SHIFT", "MULT_BYPASS": "DISABLED", "RESETMODE": "SYNC",
    }


class ECP5ProcessingElement(ProcessingElement):
    """A :class:`ProcessingElement` whose product register is the MULT18X18D output register.

    Same ports, latency and numerics as :class:`ProcessingElement`; operands up
    to 18 bits (sign-extended to the DSP's 18-bit inputs).
    """

    def __init__(self, config, *, model=False):
        super().__init__(config)
        if config.operand_width > 18:
            raise ConfigError(f"MULT18X18D multiplies at most 18-bit operands, "
                              f"not operand_width {config.operand_width}")
        self.model = model

    def _product(self, m):
        # The base class's forwarding registers, flags and accumulator; only the product
        # register moves into the MULT18X18D (or, with ``model``, stays the base's).
        if self.model:
            return super()._product(m)
        return self._dsp_product(m, self.a_in, self.b_in, "mult")

    def _dsp_product(self, m, a, b, name, width=None, signed_a=True):
        """``a * b`` (at most 18 bits each; ``b`` signed, ``a`` too unless ``signed_a`` is
        false) from a MULT18X18D named ``name`` with its output register on: the product, of
        ``width`` bits (default ``config.product_width``), one cycle after the operands."""
        width = width or self.config.product_width
        product = Signal(signed(width))
        a18 = Signal(signed(18) if signed_a else unsigned(18))
        b18 = Signal(signed(18))
        p36 = Signal(36)
        m.d.comb += [a18.eq(a), b18.eq(b),
                     product.eq(p36[:width])]
        ports = {}
        for k in range(18):
            ports[f"i_A{k}"] = a18[k]
            ports[f"i_B{k}"] = b18[k]
            ports[f"i_C{k}"] = Const(0)
        for k in range(36):
            ports[f"o_P{k}"] = p36[k]
        m.submodules[name] = Instance(
            "MULT18X18D",
            **{f"p_{key}": value for key, value in mult18x18d_parameters().items()},
            i_SIGNEDA=Const(int(signed_a)), i_SIGNEDB=Const(1),
            i_SOURCEA=Const(0), i_SOURCEB=Const(0),
            i_CLK0=ClockSignal(), i_CLK1=Const(0), i_CLK2=Const(0), i_CLK3=Const(0),
            i_CE0=Const(1), i_CE1=Const(0), i_CE2=Const(0), i_CE3=Const(0),
            i_RST0=Const(0), i_RST1=Const(0), i_RST2=Const(0), i_RST3=Const(0),
            **ports,
        )
        return product


class ECP5PairProcessingElement(PairProducts, ECP5ProcessingElement):
    """Two products a cycle into one accumulator (:class:`~fpganet.hdl.systolic.PairProducts`)
    from two MULT18X18D, each with its output register as the product register.

    The array side of 128 MACs on the ECP5-85F, whose 156 MULT18X18D sit in three rows of 52
    with the PEs' fabric crowded around them: an 8x8 array of these has the 8x8's fabric.
    The accelerator uses it with ``config.pair_products`` (boards/ulx3s.py), the stand-in
    (``--core stand-in-pairs``) always.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``pair_products``: each operand two of ``operand_width`` (at most 8) bits.
    model : bool
        Registered products described in Amaranth instead of MULT18X18D (for ``amaranth.sim``).

    Latency 3 (:class:`~fpganet.hdl.systolic.PairProducts`), one beat per cycle.
    """

    def _pair_products(self, m, pairs):
        if self.model:
            return super()._pair_products(m, pairs)
        return [self._dsp_product(m, a, b, f"mult{k}") for k, (a, b) in enumerate(pairs)]


class ECP5TernaryPairProcessingElement(TernaryPairs, ECP5ProcessingElement):
    """A pair PE whose two products come from one MULT18X18D (:class:`~fpganet.hdl.systolic.
    TernaryPairs`: every weight -1, 0 or +1), its output register the product register: half
    the multipliers of :class:`ECP5PairProcessingElement`, same latency (3) and numerics.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``pair_products`` and ``ternary_pairs``.
    model : bool
        The registered product described in Amaranth instead of MULT18X18D (for
        ``amaranth.sim``).
    """

    def _ternary_product(self, m, unsigned_a, signed_b):
        if self.model:
            return super()._ternary_product(m, unsigned_a, signed_b)
        return self._dsp_product(m, unsigned_a, signed_b, "mult",
                                 width=len(unsigned_a) + len(signed_b), signed_a=False)
