"""iCEBreaker (iCE40UP5K-SG48): 5,280 logic cells, 8 SB_MAC16, 30 EBR, 4 SPRAM, 12 MHz oscillator.

The default bitstream carries the whole accelerator behind the UART host link
(:func:`accelerator_core`): a 4x2 array (8 int8 MACs per cycle, two products per
SB_MAC16, :class:`~fpganet.hdl.ice40_dsp.Ice40SystolicArray`), the requantizer's
product on two more SB_MAC16, the weights in two SPRAMs
(:class:`~fpganet.hdl.ice40_spram.SPRAMWeightBuffer`), at 27 MHz. The synthesis
runs without ``-dsp``: the hand-instantiated SB_MAC16s must not be re-packed (see
:mod:`fpganet.hdl.ice40_dsp`).

The 16-MAC 8x2 array the device's eight SB_MAC16 allow does not route with the rest
of the accelerator (with 1-bit multipliers it packs in 5,120 of 5,280 LCs; boards/README.md
has the per-block measurement); ``--rows 8 --weight-buffer-bytes 131072`` builds it, and
the ``stand-in`` core (the array fed from ROMs) shows its clock alone.
"""

from functools import partial

from amaranth import *
from amaranth.lib import io
from amaranth_boards.icebreaker import ICEBreakerPlatform

from fpganet.config import AcceleratorConfig
from fpganet.hdl.ice40_dsp import UP5K_DSPS, DSPPairing, Ice40PairProcessingElement, Ice40SystolicArray
from fpganet.hdl.ice40_spram import SPRAMWeightBuffer, spram_mapping_problem
from fpganet.hdl.scatter import ResultWriter

from .common import Board, BoardTop, linked_accelerator
from .pll import ice40_pll
from .standin import ArrayStandIn, pair_stand_in_core

__all__ = ["ICEBreakerTop", "BOARD", "DEFAULT_CONFIG", "BAUD", "accelerator_core", "accelerator_options", "requant_multiplier",
           "SHIFT_ADD_BITS", "stand_in_core", "stand_in_pairs_core"]

#: UART rate of the host link: the iCEBreaker's FT2232H runs its UART up to 3 Mbaud.
BAUD = 3_000_000

#: 4x2 array (8 MACs/cycle on 4 SB_MAC16, two more for the requantizer's product).
#: Weights: 16K words of 32 bits in two SPRAMs side by side (64 KiB; LeNet-5 uses 61 KiB);
#: activations in 16 EBR (8 KiB); program and parameters 256 entries each (LeNet-5 needs
#: 141 and 236); 24-bit accumulators (LeNet-5 reaches |acc| = 3.7 M < 2^23). Of the
#: shapes with two columns it is the largest whose whole accelerator routes on the UP5K:
#: 4,572 of 5,280 LCs, where 8x2 packs in 5,142 with 1-bit multipliers but does not route.
#: The operands are broadcast to the array's rows and columns instead of passed
#: from PE to PE (a flip-flop costs a whole logic cell here). The clock is 27 MHz, nine
#: cycles per bit of the UART's 3 Mbaud (an integer bit period: a fractional one costs
#: about 30 logic cells more): routed with a 27 MHz target the design reaches 28.4 MHz with
#: seed 5 and 27.0 with seed 3, 26.9 and 24.1 with seeds 4 and 6 (nextpnr router2; router1
#: does not converge on it), its longest paths limited by routing at this fill
#: (boards/README.md).
DEFAULT_CONFIG = AcceleratorConfig(rows=4, cols=2, acc_width=24, weight_buffer_bytes=64 * 1024,
                                   act_buffer_bytes=8 * 1024, bias_buffer_words=256,
                                   program_words=256, requant_latency=5, broadcast_operands=True,
                                   clock_hz=27e6)


#: Most multiplier bits (``requant_mult_bits``) for which the shift-and-add product costs
#: fewer logic cells than Booth's (the 8x2 result writer alone, 5 stages: 953 cells at 1 bit,
#: 985 at 2, 1,097 at 4, 1,304 at 8, 1,667 at 15; Booth 1,460): interpolated between 8 and
#: 15 bits, about 52 cells a bit, not measured at 9-11.
SHIFT_ADD_BITS = 10


def requant_multiplier(config):
    """The requantizer's multiplier on the UP5K: two SB_MAC16 per lane (``"ice40_dsp"``,
    about 370 logic cells a lane) when the array leaves them free; else, for multipliers of
    :data:`SHIFT_ADD_BITS` or fewer significant bits, a shifted copy of ``acc + bias`` per bit
    (``"shift_add"``, about 400 cells at 1 bit), or Booth partial products in logic cells
    (``"booth"``, about 810). The ``tflite`` requantization mode has its one 32x31-bit
    product per lane (``"generic"``)."""
    if config.requant_mode == "tflite":
        return "generic"
    spare = UP5K_DSPS - Ice40SystolicArray.dsps_needed(config)
    if config.requant_latency == 5 and config.acc_width < 32 and spare >= 2 * config.requant_lanes:
        return "ice40_dsp"
    if config.requant_mult_bits <= SHIFT_ADD_BITS:
        return "shift_add"
    return "booth"


def accelerator_options(config):
    """The UP5K's factories for :class:`~fpganet.hdl.accelerator.Accelerator`: ``pe`` (SB_MAC16
    pairs; a fresh :class:`DSPPairing` each call, as it pairs the PEs it makes), ``weights``
    (SPRAM) and ``writer`` (the requantizer of :func:`requant_multiplier`)."""
    return {"pe": Ice40PairProcessingElement if config.pair_products else DSPPairing(),
            "weights": SPRAMWeightBuffer,
            "writer": partial(ResultWriter, requant_multiplier=requant_multiplier(config))}


def accelerator_core(config):
    """The accelerator behind the UART host link: SB_MAC16 pairs, weights in SPRAM, the
    requantizer's product in the SB_MAC16 the array leaves free or else in logic cells
    (:func:`accelerator_options`)."""
    return linked_accelerator(config, BAUD, **accelerator_options(config))


def refuse(config, core):
    """A weight buffer the SPRAMs cannot hold; the whole accelerator in the ``tflite``
    requantization mode, which does not fit the UP5K."""
    if core is accelerator_core and (problem := spram_mapping_problem(config)):
        return problem
    if core is accelerator_core and config.requant_mode == "tflite":
        return ("the tflite requantization's 32x31-bit product per lane would be logic cells "
                "(the eight SB_MAC16 are the array's): the 4x2 accelerator needs 7,218 of the "
                "5,280 LC (measured); use --requant-mode fpganet")
    return None


def stand_in_core(config):
    """The stand-in core with the SB_MAC16-paired array."""
    return ArrayStandIn(config, array=Ice40SystolicArray)


stand_in_pairs_core = pair_stand_in_core(
    Ice40PairProcessingElement,
    """The stand-in core with pair PEs: one SB_MAC16 and one accumulator per PE, each beat two
    steps of K, so ``2 x rows x cols`` MACs a cycle.""")


class ICEBreakerTop(BoardTop):
    """iCEBreaker top-level: SB_PLL40_PAD from the 12 MHz oscillator (pin 35), two LEDs."""

    oscillator_hz = 12e6
    led_count = 2

    def pll_settings(self):
        return ice40_pll(self.oscillator_hz, self.config.clock_hz)

    def clock(self, m, platform):
        clk12 = platform.request("clk12", dir="-")
        if not self.pll:
            m.submodules.clk12_buf = buf = io.Buffer("i", clk12)
            return buf.i, Const(1)
        settings = self.pll_settings()
        clock, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE",
            p_PLLOUT_SELECT="GENCLK",
            p_DIVR=Const(settings.divr, 4),
            p_DIVF=Const(settings.divf, 7),
            p_DIVQ=Const(settings.divq, 3),
            p_FILTER_RANGE=Const(settings.filter_range, 3),
            i_PACKAGEPIN=clk12.io,
            i_RESETB=Const(1),
            i_BYPASS=Const(0),
            o_PLLOUTGLOBAL=clock,
            o_LOCK=locked,
        )
        return clock, locked


BOARD = Board(
    name="icebreaker",
    description="iCEBreaker, Lattice iCE40UP5K-SG48",
    platform=ICEBreakerPlatform,
    top=ICEBreakerTop,
    default_config=DEFAULT_CONFIG,
    default_core=accelerator_core,
    cores={"accelerator": accelerator_core, "stand-in": stand_in_core,
           "stand-in-pairs": stand_in_pairs_core},
    refuse=refuse,
    family="ice40",
    bitstream="bin",
    # No -dsp: the SB_MAC16s are instantiated in 8x8 mode by hand (yosys issue 2922).
    synth_opts=(),
    # router1 does not converge on the whole accelerator (2,438 overused wires after
    # 290,000 iterations at 4x2); router2 routes it in about 90 s.
    nextpnr_opts=("--router", "router2"),
    # Seeds 3, 4, 5 and 6 of the 4x2 default at 27 MHz: 27.0 / 26.9 / 28.4 / 24.1 MHz, routed
    # in under a minute each (boards/README.md).
    seed=5,
    # The whole accelerator builds in 1-3 minutes on two cores.
    build_timeout_s=900,
    resources={
        "ICESTORM_LC": "LC",
        "ICESTORM_RAM": "EBR",
        "ICESTORM_SPRAM": "SPRAM",
        "ICESTORM_DSP": "DSP",
        "ICESTORM_PLL": "PLL",
        "SB_IO": "IO",
        "SB_GB": "GB",
    },
)
