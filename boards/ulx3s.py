"""ULX3S with the ECP5-85F (LFE5U-85F-6BG381): 83,640 LUT4s, 156 MULT18X18D, 208 EBR, 25 MHz oscillator.

The default core is the accelerator behind the UART host link
(:func:`accelerator_core`) on an 8x8 array of pair processing elements (128 int8
MACs per cycle) with two requantizer lanes, two MULT18X18D per processing element
with the product registers inside the DSPs
(:class:`~fpganet.hdl.ecp5_dsp.ECP5PairProcessingElement`), diagonal weights for
depthwise layers, an 8-row result queue, and a 100 MHz clock from an EHXPLLL.
nextpnr-ecp5 routes with router1: router2 oscillated on this design.
``--core stand-in`` builds the array alone, fed from ROMs.
"""

from amaranth import *
from amaranth.lib import io
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from fpganet.config import AcceleratorConfig
from fpganet.hdl.ecp5_dsp import (ECP5PairProcessingElement, ECP5ProcessingElement,
                                  ECP5TernaryPairProcessingElement)
from fpganet.hdl.systolic import SystolicArray

from .common import Board, BoardTop, linked_accelerator
from .pll import ecp5_pll
from .standin import ArrayStandIn, pair_stand_in_core

__all__ = ["ULX3STop", "BOARD", "DEFAULT_CONFIG", "BINARY_WEIGHTS_CONFIG", "BAUD", "accelerator_core", "ecp5_array",
           "stand_in_core", "stand_in_pairs_core"]

#: UART rate of the host link: the ULX3S's FT231X runs up to 3 Mbaud.
BAUD = 3_000_000

#: 8x8 array of pair PEs (``pair_products``: two MULT18X18D and one accumulator a PE, each
#: beat two steps of K, so 128 MACs/cycle on 128 of 156 MULT18X18D) with two requantizer
#: lanes, sized for the MLPerf Tiny networks: 288 KiB of weights (VWW MobileNetV1-0.25 needs
#: 204.8 KiB, its depthwise layers stored as ``CONV diagonal`` words, one per kernel position;
#: ResNet-8 80.3 KiB; LeNet-5 62.5 KiB), 64 KiB of activations in 16 banks, two per lane,
#: read as 8 superbanks of two (a lane's two channels in one cycle where the channel stride
#: allows), 4,096 parameter entries (VWW 2,994). Block RAM: 194 of 208 EBR.
#:
#: The 8-row result queue (``result_queue_rows``) lets the array start a tile while the
#: writer drains the one before.
#:
#: The clock is 100 MHz from the PLL. With the registered timing set
#: (``AcceleratorConfig.pipeline_registers``, every knob of :data:`fpganet.config.TIMING_SETS`
#: on: ``registered_bram_outputs``, ``registered_operands``, ``registered_results``,
#: ``registered_decode``, ``bank_access`` ``"scheduled"``, ``registered_writes``,
#: ``registered_host_output``; in detail: block RAM outputs, the gathered operands, the
#: array's result row and its row-valid flag, the writer's lane-group sums, the instruction
#: word and the window's start in registers, bank schedules computed ahead, the writer's
#: lanes stepped in closed form from step constants registered in two stages, the counters'
#: wraps and the loop flag in flip-flops, write stages for the program and parameter
#: memories, the link's reply CRC and output FIFO registered, the activation banks read
#: without Yosys's read-first emulation, the weight blocks in 4-bit-wide block RAMs, the
#: region unit's run room in a flip-flop, a skid register behind the window's offer and
#: copies of its stall, the clamp against registered thresholds) and the split-product
#: requantizer (``requant_latency`` 5), it routes at 100.1 MHz with the board's seed 3,
#: timing met (docs/journal/boards.md: 101.7 on the same cells before two named wires of the ISA's
#: pool bit; seed 2 96.4 MHz; other seeds of nearly the same netlist 92.5-100.04 MHz).
DEFAULT_CONFIG = AcceleratorConfig(rows=8, cols=8, requant_lanes=2, weight_buffer_bytes=288 * 1024,
                                   act_buffer_bytes=64 * 1024, act_bank_factor=2,
                                   bias_buffer_words=4096, pipeline_registers=True, requant_latency=5,
                                   diagonal_weights=True, result_queue_rows=8, pair_products=True,
                                   clock_hz=100e6)


#: The configuration for binary networks of CIFAR-10 size, as FINN's CNV-W1A1 (its weights
#: 195,328 bytes, all but the first layer's eight a byte; its activations 122,746): the default
#: with ``binary_weights``, 128 KiB of activation buffer and 192 KiB of weights.
BINARY_WEIGHTS_CONFIG = DEFAULT_CONFIG.replace(binary_weights=True, act_buffer_bytes=128 * 1024,
                                               weight_buffer_bytes=192 * 1024)


def ecp5_array(config):
    """The array with one MULT18X18D per PE, its output register as the product register."""
    return SystolicArray(config, pe=ECP5ProcessingElement)


def accelerator_core(config):
    """The accelerator behind the UART host link, one MULT18X18D per product (per pair with
    ``ternary_pairs``)."""
    return linked_accelerator(config, BAUD, pe=ECP5TernaryPairProcessingElement
                              if config.ternary_pairs else ECP5PairProcessingElement
                              if config.pair_products else ECP5ProcessingElement)


def stand_in_core(config):
    """The stand-in core with the ECP5 DSP array."""
    return ArrayStandIn(config, array=ecp5_array)


stand_in_pairs_core = pair_stand_in_core(
    ECP5PairProcessingElement,
    """The stand-in core with pair PEs: two MULT18X18D and one accumulator per PE, each beat
    two steps of K, so ``2 x rows x cols`` MACs a cycle.""")


class ULX3STop(BoardTop):
    """ULX3S top-level: EHXPLLL from the 25 MHz oscillator, eight LEDs."""

    oscillator_hz = 25e6
    led_count = 8

    def pll_settings(self):
        return ecp5_pll(self.oscillator_hz, self.config.clock_hz)

    def clock(self, m, platform):
        clk25 = platform.request("clk25", dir="-")
        m.submodules.clk25_buf = buf = io.Buffer("i", clk25)
        if not self.pll:
            return buf.i, Const(1)
        settings = self.pll_settings()
        clock, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{settings.f_in / 1e6:g}",
            a_FREQUENCY_PIN_CLKOP=f"{settings.f_out / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8",
            a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED",
            p_STDBY_ENABLE="DISABLED", p_DPHASE_SOURCE="DISABLED",
            p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=settings.clki_div,
            p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_DIV=settings.clkop_div,
            p_CLKOP_CPHASE=settings.clkop_cphase,
            p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=settings.clkfb_div,
            i_RST=Const(0), i_STDBY=Const(0),
            i_CLKI=buf.i, i_CLKFB=clock,
            i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1),
            i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1),
            i_PLLWAKESYNC=Const(0), i_ENCLKOP=Const(0),
            o_CLKOP=clock,
            o_LOCK=locked,
        )
        return clock, locked


BOARD = Board(
    name="ulx3s",
    description="ULX3S, Lattice ECP5 LFE5U-85F-6BG381C",
    platform=ULX3S_85F_Platform,
    top=ULX3STop,
    default_config=DEFAULT_CONFIG,
    variants={"binary-weights": BINARY_WEIGHTS_CONFIG},
    default_core=accelerator_core,
    cores={"accelerator": accelerator_core, "stand-in": stand_in_core,
           "stand-in-pairs": stand_in_pairs_core},
    family="ecp5",
    bitstream="bit",
    synth_opts=(),
    # router1: router2 oscillated on the accelerator (overuse falling to a few hundred wires,
    # then climbing) and did not finish in 25 minutes; router1 routed it in 9.
    nextpnr_opts=("--router", "router1"),
    # At 100 MHz seed 3 routes at 100.1 MHz (timing met; 101.7 before the pool bit's named
    # wires), seed 2 at 96.4; seeds move this
    # design's Fmax by up to 11 MHz, and the best one changes with the netlist
    # (docs/journal/boards.md).
    seed=3,
    # The default accelerator took 9-35 minutes on two cores, the longest with other jobs.
    build_timeout_s=5400,
    resources={
        "TRELLIS_COMB": "LUT4",
        "TRELLIS_FF": "FF",
        "TRELLIS_RAMW": "LUTRAM",
        "DP16KD": "EBR",
        "MULT18X18D": "MULT18",
        "ALU54B": "ALU54",
        "EHXPLLL": "PLL",
        "TRELLIS_IO": "IO",
    },
    capacity={"LUT4": 83640, "EBR": 208, "MULT18": 156},
    logic_resource="LUT4",
    # The default routed with seed 3 (docs/journal/boards.md, benchmarks/results/boards.json).
    routed_logic=17469,
)
