"""iCEBreaker (iCE40UP5K-SG48): 5,280 logic cells, 8 SB_MAC16, 30 EBR, 4 SPRAM, 12 MHz oscillator.

The default bitstream carries the whole accelerator behind the UART host link
(:func:`accelerator_core`): a 4x2 array of pair PEs (16 int8 MACs per cycle, each PE both
8x8 products of one SB_MAC16, :class:`~fpganet.hdl.ice40_dsp.Ice40PairProcessingElement`),
the weights in the four SPRAMs (:class:`~fpganet.hdl.ice40_spram.SPRAMWeightBuffer`), a
requantizer of shifts in logic cells (1-bit multipliers), at 30 MHz. The synthesis runs
without ``-dsp``: the hand-instantiated SB_MAC16s must not be re-packed (see
:mod:`fpganet.hdl.ice40_dsp`). nextpnr places it with its ``static`` placer: at 94 % of the
logic cells the default HeAP placer's placements route badly or not at all (docs/journal/boards.md).

The 8-MAC configuration before it (``--pair-products no --weight-buffer-bytes 65536
--requant-mult-bits 15 --requant-latency 5 --act-bank-factor 1 --clock-mhz 27``) keeps
whole requantizer multipliers, on the two SB_MAC16 its array leaves free.
"""

from functools import partial

from amaranth import *
from amaranth.build import Attrs, Pins, Resource, Subsignal
from amaranth.lib import io
from amaranth_boards.icebreaker import ICEBreakerPlatform

from fpganet.config import AcceleratorConfig
from fpganet.hdl.ice40_dsp import UP5K_DSPS, DSPPairing, Ice40PairProcessingElement, Ice40SystolicArray
from fpganet.hdl.ice40_spram import (SPRAM_COUNT, SPRAMActivationBuffer, SPRAMWeightBuffer,
                                    spram_mapping_problem)
from fpganet.hdl.memories import activation_buffer
from fpganet.hdl.scatter import result_writer

from .common import Board, BoardTop, linked_accelerator
from .pll import ice40_pll
from .standin import ArrayStandIn, pair_stand_in_core

__all__ = ["ICEBreakerTop", "BOARD", "DEFAULT_CONFIG", "EIGHT_MAC_CONFIG", "SPRAM_ACTIVATIONS_CONFIG", "BAUD", "accelerator_core", "accelerator_options", "requant_multiplier",
           "SHIFT_ADD_BITS", "stand_in_core", "stand_in_pairs_core"]

#: UART rate of the host link: the iCEBreaker's FT2232H runs its UART up to 3 Mbaud.
BAUD = 3_000_000

#: 4x2 array of pair PEs: 16 MACs/cycle on the eight SB_MAC16, each beat two channels of
#: the reduction. Weights: 16K words of 64 bits in the four SPRAMs side by side (128 KiB;
#: LeNet-5 uses 61 KiB); activations in 16 EBR (8 KiB) as four banks, two per lane, so that
#: a lane's two channels are read in one cycle; program and parameters 256 entries each
#: (LeNet-5 needs 144 and 236); 24-bit accumulators (LeNet-5 reaches |acc| = 3.7 M < 2^23).
#: With no SB_MAC16 left, the requantizer's multipliers have one significant bit, a shift
#: (``requant_mult_bits`` 1: the weight scales absorb the rounding; LeNet-5 keeps 99.12 %,
#: 99.13 % with 15 bits), four stages. The operands are broadcast to the array's rows and
#: columns instead of passed from PE to PE (a flip-flop costs a whole logic cell here).
#: The result writer max-pools row pairs (``fused_max_pool``: a conv and its 2x2 max-pool in
#: one pass). 5,052 of 5,280 LCs. The clock is 30 MHz, ten cycles per bit of the UART's 3 Mbaud
#: (an integer bit period: a fractional one costs about 30 logic cells more): the board's seed
#: 6 routes at 30.5 MHz, timing met (16 x 30 MHz = 0.48 GMAC/s); the other seeds 1-20 at
#: 24.1-29.7 MHz or not within 150 s (docs/journal/boards.md). The timing set is the plain one
#: (``pipeline_registers`` off: every knob of :data:`fpganet.config.TIMING_SETS` off, the block
#: RAMs' outputs unregistered and the banks arbitrated).
DEFAULT_CONFIG = AcceleratorConfig(rows=4, cols=2, acc_width=24, weight_buffer_bytes=128 * 1024,
                                   act_buffer_bytes=8 * 1024, bias_buffer_words=256,
                                   program_words=256, requant_latency=4, requant_mult_bits=1,
                                   broadcast_operands=True, pair_products=True,
                                   act_bank_factor=2, fused_max_pool=True,
                                   pipeline_registers=False, clock_hz=30e6)


#: The 8-MAC configuration before the default (the module's docstring): one product per
#: SB_MAC16, 64 KiB of weights, whole 15-bit requantizer multipliers on the two SB_MAC16 the
#: array leaves free, 27 MHz.
EIGHT_MAC_CONFIG = DEFAULT_CONFIG.replace(pair_products=False, weight_buffer_bytes=64 * 1024,
                                          requant_mult_bits=15, requant_latency=5,
                                          act_bank_factor=1, clock_hz=27e6)


#: The configuration for networks whose activations outgrow the block RAM, as MLPerf Tiny's
#: ResNet-8's 55,578 bytes: the 8-MAC array with its weights in two SPRAMs (64 KiB of 32-bit
#: words; layers of 4-bit weights or fewer packed two a byte), the activations in the other two
#: as two banks of 32 KiB (``single_port_activations``: each byte the engine writes takes a
#: cycle of its own, the engine held), and 1,024 parameter entries and 512 instructions in
#: block RAM (ResNet-8 needs 522 and 366). No fused max-pool: its cells went to the rest.
SPRAM_ACTIVATIONS_CONFIG = EIGHT_MAC_CONFIG.replace(
    act_buffer_bytes=64 * 1024, single_port_activations=True, packed_weights=True,
    bias_buffer_words=1024, program_words=512, fused_max_pool=False)


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
    (SPRAM), ``activations`` (SPRAM with ``single_port_activations``, else block RAM) and
    ``writer`` (the requantizer of :func:`requant_multiplier`)."""
    return {"pe": Ice40PairProcessingElement if config.pair_products else DSPPairing(),
            "weights": SPRAMWeightBuffer,
            "activations": (SPRAMActivationBuffer if config.single_port_activations
                            else activation_buffer),
            "writer": partial(result_writer, requant_multiplier=requant_multiplier(config))}


def accelerator_core(config, *, link="uart", sck_hz=None):
    """The accelerator behind the host link: SB_MAC16 pairs, weights in SPRAM, the
    requantizer's product in the SB_MAC16 the array leaves free or else in logic cells
    (:func:`accelerator_options`)."""
    return linked_accelerator(config, BAUD, link=link, sck_hz=sck_hz,
                              **accelerator_options(config))


#: The requantization modes the UP5K's accelerator builds (the tflite one does not fit).
REQUANT_MODES = ("fpganet",)


def refuse(config, core):
    """A weight buffer the SPRAMs cannot hold; the whole accelerator in the ``tflite``
    requantization mode, which does not fit the UP5K; ternary pairs, which its SB_MAC16 pair
    PEs do not make."""
    if config.ternary_pairs:
        return ("its pair PEs make their products in SB_MAC16's two 8x8 multipliers, and a "
                "ternary pair's 18x12-bit product does not fit its 16x16 one (ternary_pairs is "
                "the ECP5's)")
    if core is accelerator_core and (problem := spram_mapping_problem(config)):
        return problem
    if core is accelerator_core and config.requant_mode not in REQUANT_MODES:
        return ("the tflite requantization's 32x31-bit product per lane would be logic cells "
                "(the eight SB_MAC16 are the array's): the 4x2 accelerator needs 7,218 of the "
                "5,280 LC (measured); use --requant-mode fpganet")
    return None


def stand_in_core(config):
    """The stand-in core with the accelerator's PEs: with ``pair_products`` (the default)
    :func:`stand_in_pairs_core`, else two PEs per SB_MAC16."""
    if config.pair_products:
        return stand_in_pairs_core(config)
    return ArrayStandIn(config, array=Ice40SystolicArray)


stand_in_pairs_core = pair_stand_in_core(
    Ice40PairProcessingElement,
    """The stand-in core with pair PEs: one SB_MAC16 and one accumulator per PE, each beat two
    steps of K, so ``2 x rows x cols`` MACs a cycle.""")


#: SCK of the SPI link: the FT2232H's fastest MPSSE clock.
SCK_HZ = 30e6


class ICEBreakerTop(BoardTop):
    """iCEBreaker top-level: SB_PLL40_PAD from the 12 MHz oscillator (pin 35), two LEDs; the
    SPI link on the FT2232H's channel A (the flash's pins, LEDR_N as chip select)."""

    oscillator_hz = 12e6
    led_count = 2
    sck_hz = SCK_HZ

    def spi_link_pins(self, m, platform):
        """FLASH_SCK (15), FLASH_IO0 (14, the host's data out) and FLASH_IO1 (17, the
        target's data out) of channel A's MPSSE (ADBUS0-2), and LEDR_N (11, ADBUS3) as the
        FPGA's chip select (board v1.0e on): the red LED's pin. The flash's own select
        (FLASH_SSB, ADBUS4) stays high, driven by the host."""
        platform.add_resources([Resource(
            "host_spi", 0,
            Subsignal("sck", Pins("15", dir="i")), Subsignal("mosi", Pins("14", dir="i")),
            Subsignal("miso", Pins("17", dir="o")),
            # Pulled up: deselected while the FTDI channel is not in MPSSE mode.
            Subsignal("cs_n", Pins("11", dir="i"), Attrs(PULLUP=1)),
            Attrs(IO_STANDARD="SB_LVCMOS"))])
        spi = platform.request("host_spi", 0, dir="-")
        pins = {}
        for name in ("sck", "mosi", "cs_n"):
            m.submodules[f"spi_{name}"] = pins[name] = io.Buffer("i", getattr(spi, name))
        m.submodules.spi_miso = pins["miso"] = io.Buffer("o", spi.miso)
        return pins, {0}

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
    requant_modes=REQUANT_MODES,
    family="ice40",
    bitstream="bin",
    # No -dsp: the SB_MAC16s are instantiated in 8x8 mode by hand (yosys issue 2922).
    synth_opts=(),
    # At 91-94 % of the logic cells HeAP's placements route badly (7 of 12 seeds at 16-21
    # MHz, the others 90-930 overused wires); the static placer's route in 30-40 s.
    # router1 does not converge on the whole accelerator; router2 does.
    nextpnr_opts=("--placer", "static", "--router", "router2"),
    # Seeds 1-20 of the default at 30 MHz: 30.5 MHz with seed 6, the others 24.1-29.7 or
    # not routed within 150 s (docs/journal/boards.md).
    seed=6,
    # The whole accelerator builds in about a minute on two cores.
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
    capacity={"LC": 5280, "EBR": 30, "SPRAM": SPRAM_COUNT, "DSP": UP5K_DSPS},
    # The default routed with seed 6 (docs/journal/boards.md, benchmarks/results/boards.json).
    routed_logic=5052,
    variants={"8-mac": EIGHT_MAC_CONFIG, "spram-activations": SPRAM_ACTIVATIONS_CONFIG},
    weight_buffer=SPRAMWeightBuffer,
    links=("uart", "spi"),
    # SCK takes a global buffer from the window generator's reset (docs/journal/measurements.md,
    # "The SPI host link"): seeds 1-21 made 14.9-29.2 MHz; with nextpnr's timing-driven
    # ripup, seeds 1-3 and 5-13 made 25.9-29.9 MHz, seed 3 the best.
    link_builds={"spi": (3, ("--tmg-ripup",))},
    # Measured on the one low-bit fold the UP5K holds, TFC_2W2A's 2 x 16 with its weights
    # loaded: seed 6 did not route within 300-400 s at three RTL revisions (2 overused
    # wires); seed 1 did (31.5-34.2 MHz), until the unit's enables came from a flip-flop:
    # then seed 1 made 28.3 MHz and seed 4 30.4 (docs/journal/measurements.md). The binary
    # engine's builds route on seed 6.
    engine_seeds={"lowbit": 4},
)
