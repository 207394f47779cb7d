"""iCEBreaker (iCE40UP5K-SG48): 5,280 logic cells, 8 SB_MAC16, 30 EBR, 4 SPRAM, 12 MHz oscillator.

The default configuration is the 8x2 array: 16 int8 MACs per cycle on the
eight SB_MAC16 blocks, two products per block
(:class:`~fpganet.hdl.ice40_dsp.Ice40SystolicArray`), with the weights in the
four SPRAMs (:class:`~fpganet.hdl.ice40_spram.SPRAMWeightBuffer`). The synthesis
runs without ``-dsp``: the hand-instantiated SB_MAC16s must not be re-packed
(see :mod:`fpganet.hdl.ice40_dsp`).

Two cores: ``accelerator`` (:func:`accelerator_core`, the accelerator behind the
UART host link) and ``stand-in`` (the array fed from ROMs). The accelerator
needs about 6,100 LCs against the UP5K's 5,280 (boards/README.md has the
per-block measurement), so the default bitstream carries the stand-in.
"""

from functools import partial

from amaranth import *
from amaranth.lib import io
from amaranth_boards.icebreaker import ICEBreakerPlatform

from fpganet.config import AcceleratorConfig
from fpganet.hdl.ice40_dsp import UP5K_DSPS, DSPPairing, Ice40SystolicArray
from fpganet.hdl.ice40_spram import SPRAMWeightBuffer
from fpganet.hdl.scatter import ResultWriter

from .common import Board, BoardTop, linked_accelerator
from .pll import ice40_pll
from .standin import ArrayStandIn

__all__ = ["ICEBreakerTop", "BOARD", "DEFAULT_CONFIG", "BAUD", "accelerator_core", "requant_multiplier",
           "stand_in_core"]

#: UART rate of the host link: the iCEBreaker's FT2232H runs its UART up to 3 Mbaud.
BAUD = 3_000_000

#: 8x2 array (16 MACs/cycle on 8 SB_MAC16). Weights: 16K words of 64 bits in the
#: four SPRAMs side by side (128 KiB; LeNet-5 uses 61 KiB); activations in 16 EBR
#: (8 KiB); program and parameters 256 entries each (LeNet-5 needs 142 and 236);
#: 24-bit accumulators (LeNet-5 reaches |acc| = 3.7 M < 2^23). Of the 16-MAC shapes
#: it needs the smallest activation crossbar (2 lanes) and runs LeNet-5 fastest:
#: 39.7 k cycles per image against 43.9 k on 4x4 and 55.9 k on 2x8, because its
#: dense layers use 1 of 2 columns where 2x8 uses 1 of 8. The requantizer has five
#: stages and builds its product from Booth partial products in logic cells (all eight
#: SB_MAC16 are the array's): alone on the UP5K it routes at 41-43 MHz in about 810-990
#: LCs, where the one-stage product of the generic requantizer reaches 24 MHz in ~1,420
#: (with two SB_MAC16 free, :func:`requant_multiplier` picks them: about 370).
#: The operands are broadcast to the array's rows and columns instead of passed from PE
#: to PE (a flip-flop costs a whole logic cell here): 1,653 instead of 2,111 LCs for the
#: array alone (the stand-in), 51.7 MHz routed instead of 48.9; with the result registers'
#: own adders (``separate_result_adder``) 1,276 LCs and 50.8 MHz.
DEFAULT_CONFIG = AcceleratorConfig(rows=8, cols=2, acc_width=24, weight_buffer_bytes=128 * 1024,
                                   act_buffer_bytes=8 * 1024, bias_buffer_words=256,
                                   program_words=256, requant_latency=5, broadcast_operands=True,
                                   clock_hz=40e6)


def requant_multiplier(config):
    """The requantizer's multiplier on the UP5K: two SB_MAC16 per lane (``"ice40_dsp"``,
    about 370 logic cells a lane) when the array leaves them free, else Booth partial
    products in logic cells (``"booth"``, about 810)."""
    spare = UP5K_DSPS - Ice40SystolicArray.dsps_needed(config)
    if config.requant_latency == 5 and config.acc_width < 32 and spare >= 2 * config.requant_lanes:
        return "ice40_dsp"
    return "booth"


def accelerator_core(config):
    """The accelerator behind the UART host link: SB_MAC16 pairs, weights in SPRAM, the
    requantizer's product in the SB_MAC16 the array leaves free or else in logic cells
    (:func:`requant_multiplier`)."""
    return linked_accelerator(config, BAUD, pe=DSPPairing(), weights=SPRAMWeightBuffer,
                              writer=partial(ResultWriter, requant_multiplier=requant_multiplier(config)))


def stand_in_core(config):
    """The stand-in core with the SB_MAC16-paired array."""
    return ArrayStandIn(config, array=Ice40SystolicArray)


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
    default_core=stand_in_core,
    cores={"accelerator": accelerator_core, "stand-in": stand_in_core},
    family="ice40",
    bitstream="bin",
    # No -dsp: the SB_MAC16s are instantiated in 8x8 mode by hand (yosys issue 2922).
    synth_opts=(),
    nextpnr_opts=(),
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
