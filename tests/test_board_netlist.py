"""The netlists that become the boards' bitstreams, simulated: each board top-level synthesized
exactly as ``fpganet synth --board NAME`` does (``synth_ice40``, ``synth_ecp5``), written back
as Verilog, compiled in Verilator with Yosys's cell models and the stand-ins of
:data:`fpganet.boards.netlist.NETLIST_CELLS`, and driven through its UART pins by the real
host driver (sim/tb_system.py, as tests/test_system_uart.py drives the RTL).

- iCEBreaker: Yosys's iCE40 models (SB_LUT4, SB_CARRY, the flip-flops, SB_MAC16, SB_RAM40_4K,
  SB_SPRAM256KA, SB_IO) and a stand-in for the PLL (``ICE40_PLL_MODEL``); the default design.
- ULX3S: Yosys's ECP5 models (LUT4, PFUMX, L6MUX21, CCU2C, TRELLIS_FF, TRELLIS_DPR16X4,
  TRELLIS_IO), local models of the cells Yosys ships as blackboxes (``DP16KD_MODEL``,
  ``MULT18X18D_MODEL``) and a stand-in for the EHXPLLL (``ECP5_PLL_MODEL``); the default
  design's cells and options on a 2x2 array (:data:`ULX3S_LENET_CONFIG`).

- Placed and routed, both boards: the same designs as nextpnr routes them for the bitstream
  (``--write`` in the same run), with the cells of
  :data:`fpganet.boards.routed_netlist.ROUTED_NETLIST_CELLS`. iCEBreaker: Yosys's models of
  ICESTORM_LC, ICESTORM_RAM, SB_GB and SB_IO, wrappers of SB_MAC16 and SB_SPRAM256KA for
  ICESTORM_DSP and ICESTORM_SPRAM, a stand-in for ICESTORM_PLL. ULX3S: Yosys's TRELLIS_COMB
  and TRELLIS_FF patched for what nextpnr's slices add, TRELLIS_RAMW, DCCA, and the
  synthesized netlist's block models.

The whole designs (LeNet-5 loaded, images checked against the golden model) are opt-in:
their synthesis and Verilator builds take minutes (docs/journal/measurements.md has the
measured times). Run them with ``FPGANET_NETLIST_SIM=1 pytest tests/test_board_netlist.py``;
``FPGANET_NETLIST_SIM=full`` adds the ULX3S's default configuration at 30 MHz (21 minutes).
The small tests keep the path alive in ``make test``: the ULX3S's synthesized top-level and
the iCEBreaker's routed one (whose input is its synthesized netlist), PLL, reset and UART pins
with a small device behind the link. The iCEBreaker's synthesized small test is opt-in.

Not covered: timing (the cell models have no delays; nextpnr's timing report is the check),
the PLL's frequency synthesis (the harness clocks the oscillator pin at the PLL's output
frequency, scaled: the design counts cycles), the step from the routed netlist to the
bitstream (icepack, ecppack), and on the ULX3S the default bitstream's 100 MHz (3.3 times the
cycles a UART bit: the default configuration runs at 30 MHz here).
"""

import json
import os
import time

import pytest

from fpganet.boards.build import BOARDS
from fpganet.boards.icebreaker import SPRAM_ACTIVATIONS_CONFIG
from fpganet.boards.netlist import (PLL_LOCK_EDGES, board_harness, build_board_netlist_sim,
                                    synthesize_board)
from fpganet.boards.routed_netlist import ROUTED_NETLIST_CELLS, route_board
from fpganet.boards.report import parse_yosys_cells
from fpganet.compiler import compile_model
from fpganet.hdl.hostlink import HostLinkSystem
from fpganet.sim.runner import failure_report
from fpganet.sim.standin_device import StandInDevice

TB_MODULE = "fpganet.sim.tb_system"
SMALL_TB_MODULE = "fpganet.sim.tb_board_netlist"
#: The harness's clock: the PLL's output, scaled to a whole number of nanoseconds.
PERIOD_NS = 10
HARNESS_HZ = 1e9 / PERIOD_NS
IMAGES = 4
ICEBREAKER = BOARDS["icebreaker"]
ULX3S = BOARDS["ulx3s"]

#: The ULX3S design whose netlist runs LeNet-5: the default's cells and options (pair PEs of
#: two MULT18X18D, the registered timing set, split-product requantizer, diagonal weights, the
#: result queue, the EHXPLLL) on a 2x2 array with the memories LeNet-5 needs (64 KiB of
#: weights, 43 DP16KD in all), at 30 MHz, so that the UART's 3 Mbaud is 10 cycles a bit as on
#: the iCEBreaker. The default configuration synthesizes to 2.6 times the LUT4 and 3.6 times
#: the flip-flops and its netlist runs ten times slower: 21 minutes at 30 MHz
#: (``FPGANET_NETLIST_SIM=full``), an estimated 50 minutes at its 100 MHz (33.3 cycles a bit).
ULX3S_LENET_CONFIG = ULX3S.default_config.replace(
    rows=2, cols=2, weight_buffer_bytes=64 * 1024, act_buffer_bytes=8 * 1024,
    bias_buffer_words=256, program_words=256, clock_hz=30e6)

opt_in = pytest.mark.skipif(os.environ.get("FPGANET_NETLIST_SIM") not in ("1", "full"),
                            reason="a whole board netlist takes minutes: set "
                                   "FPGANET_NETLIST_SIM=1 to run it")
#: The ULX3S's default array takes 21 minutes (docs/journal/measurements.md).
opt_in_full = pytest.mark.skipif(os.environ.get("FPGANET_NETLIST_SIM") != "full",
                                 reason="the ULX3S's default netlist takes 21 minutes: set "
                                        "FPGANET_NETLIST_SIM=full to run it")


def tb_parameters(top, **more):
    """The testbench's parameters for the board ``top``: the harness's clock and the UART's bit
    time scaled alike, and the reset the board top-level makes (PLL lock, its synchronizer,
    the power-on timer)."""
    link = top.core.link
    reset_cycles = PLL_LOCK_EDGES + 2 + top.reset_cycles + 2
    return {"config": top.core_config.to_dict(), "clock_hz": HARNESS_HZ,
            "baud": HARNESS_HZ / float(link.divisor), "timeout_cycles": link.core.timeout_cycles,
            "reset_ps": reset_cycles * PERIOD_NS * 1000, **more}


def netlist_sim(board, top, netlist, name, *, optimize=True, routed=False):
    harness = board_harness(top, board.platform, name, period_ns=PERIOD_NS)
    return build_board_netlist_sim(netlist, harness, name, family=board.family,
                                   optimize=optimize,
                                   cells=ROUTED_NETLIST_CELLS[board.family] if routed else None)


def board_netlist(board, tmp_path, config=None, *, core=None, routed=False):
    """``(netlist.v, counts, top-level)`` of ``board``'s design: synthesized (counts: Yosys's
    cells) or, with ``routed``, built and routed (counts: the build's report)."""
    if routed:
        return route_board(board, tmp_path / "route", config, core=core)
    netlist, log, top = synthesize_board(board, tmp_path / "synth", config, core=core)
    return netlist, parse_yosys_cells(log), top


def run_lenet(board, tmp_path, config=None, *, routed=False):
    """Synthesize ``board``'s top-level for ``config`` (default: the board's), or with
    ``routed`` build it and take nextpnr's routed netlist, load LeNet-5 through the rx pin, run
    :data:`IMAGES` MNIST images and the damaged frames (sim/tb_system.py's two tests), check
    every logit and stamp; return the cell counts (routed: the build's report)."""
    began = time.monotonic()
    netlist, counts, top = board_netlist(board, tmp_path, config, routed=routed)
    synth_s = time.monotonic() - began
    name = f"{board.name}_{'routed' if routed else 'netlist'}"
    began = time.monotonic()
    sim = netlist_sim(board, top, netlist, name, routed=routed)
    build_s = time.monotonic() - began
    compiled = tmp_path / "lenet5"
    compile_model(out_dir=compiled, config=top.core_config)
    report = tmp_path / "system.json"
    env = {"FPGANET_TB": json.dumps(tb_parameters(
        top, compiled=str(compiled), images=IMAGES, report=str(report)))}
    began = time.monotonic()
    result = sim.run(TB_MODULE, None, env, test_dir=tmp_path / "run")
    run_s = time.monotonic() - began
    assert result.ok, failure_report(result)
    assert result.passed == ["lenet_over_the_uart_pins", "damaged_frames_then_a_good_image"]
    timings = json.loads(report.read_text())
    assert timings["stamp_cycles"] == [timings["model_stamp_cycles"]] * IMAGES, timings
    print(f"{name}: synthesis {synth_s:.0f} s, Verilator build {build_s:.0f} s, "
          f"run {run_s:.0f} s; {json.dumps(timings)}")
    return counts


@opt_in
@pytest.mark.slow
def test_icebreaker_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """LeNet-5 loaded through the rx pin of the synthesized iCEBreaker netlist, MNIST images
    answered as the golden model answers them (every logit) at the modelled cycles, damaged
    frames answered as documented (sim/tb_system.py's two tests)."""
    cells = run_lenet(ICEBREAKER, tmp_path)
    assert (cells.get("SB_MAC16"), cells.get("SB_SPRAM256KA")) == (8, 4), cells


@opt_in
@pytest.mark.slow
def test_icebreaker_spram_activations_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """The same on the iCEBreaker's configuration with its activations in SPRAM
    (``SPRAM_ACTIVATIONS_CONFIG``, ResNet-8's): the banks' SPRAM cells and the engine held
    for each write, the SB_MAC16s' clock enables included, at the modelled cycles."""
    cells = run_lenet(ICEBREAKER, tmp_path, SPRAM_ACTIVATIONS_CONFIG)
    assert (cells.get("SB_MAC16"), cells.get("SB_SPRAM256KA")) == (6, 4), cells


@opt_in
@pytest.mark.slow
def test_icebreaker_routed_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """The same on the iCEBreaker's placed-and-routed netlist: the default bitstream's build
    (its seed, its timing), the netlist nextpnr routed for it."""
    report = run_lenet(ICEBREAKER, tmp_path, routed=True)
    assert report["resources"]["DSP"]["used"] == 8, report["resources"]


@opt_in
@pytest.mark.slow
def test_ulx3s_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """The same on the synthesized ULX3S netlist of :data:`ULX3S_LENET_CONFIG`: its
    MULT18X18D, DP16KD (4-, 9- and 36-bit ports, the writes on the falling edge) and
    EHXPLLL through the models of :data:`fpganet.boards.netlist.NETLIST_CELLS`."""
    cells = run_lenet(ULX3S, tmp_path, ULX3S_LENET_CONFIG)
    assert (cells.get("MULT18X18D"), cells.get("EHXPLLL")) == (12, 1), cells
    assert cells.get("DP16KD", 0) >= 40, cells


@opt_in
@pytest.mark.slow
def test_ulx3s_routed_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """The same on the placed-and-routed netlist of :data:`ULX3S_LENET_CONFIG`, as
    nextpnr-ecp5 routes it for the bitstream: its slices (TRELLIS_COMB, TRELLIS_FF, the LUT
    RAM's TRELLIS_RAMW), the block RAMs' and multipliers' pin multiplexers, the DCCA."""
    report = run_lenet(ULX3S, tmp_path, ULX3S_LENET_CONFIG, routed=True)
    assert report["resources"]["MULT18"]["used"] == 12, report["resources"]


@opt_in_full
@pytest.mark.slow
def test_ulx3s_default_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """The same on the ULX3S's default configuration at 30 MHz: the 8x8 array of pair PEs
    (128 MULT18X18D and 4 in the requantizer), every memory of the default bitstream (194
    DP16KD), the clock alone changed so that a UART bit is 10 cycles, not 33.3."""
    cells = run_lenet(ULX3S, tmp_path, ULX3S.default_config.replace(clock_hz=30e6))
    assert (cells.get("MULT18X18D"), cells.get("DP16KD")) == (132, 194), cells


def small_core(config):
    """The link and a small device of memories behind it (no accelerator)."""
    return HostLinkSystem(config, config.clock_hz, 3_000_000,
                          device=lambda config: StandInDevice(config, depth=16),
                          input_depth=64, output_depth=64, max_write_bytes=64)


def small_netlist_answers(board, tmp_path, *, routed=False):
    """``board``'s top-level with :func:`small_core` behind the UART, synthesized (or routed)
    and simulated as the whole design is; return the cell counts (routed: the build's report)
    and the top-level."""
    netlist, counts, top = board_netlist(board, tmp_path, core=small_core, routed=routed)
    name = f"{board.name}_small_{'routed' if routed else 'netlist'}"
    sim = netlist_sim(board, top, netlist, name, optimize=False, routed=routed)
    env = {"FPGANET_TB": json.dumps(tb_parameters(top))}
    result = sim.run(SMALL_TB_MODULE, None, env, test_dir=tmp_path / "run")
    assert result.ok, failure_report(result)
    return counts, top


@opt_in
@pytest.mark.slow
def test_icebreaker_top_netlist_answers_over_the_uart_pins(tmp_path):
    """The iCEBreaker top-level (PLL, power-on reset, SB_IO pins) with a small core behind the
    UART, synthesized and simulated as the whole design is: the driver's PING is answered
    with the design's parameters, a WRITE is acknowledged and STATUS counts no error."""
    cells, top = small_netlist_answers(ICEBREAKER, tmp_path)
    assert cells.get("SB_PLL40_PAD") == 1 and cells.get("SB_IO") == 2 + top.led_count, cells


@pytest.mark.slow
def test_icebreaker_routed_top_answers_over_the_uart_pins(tmp_path):
    """The same on the netlist nextpnr-ice40 placed and routed from it (with the PLL's
    dedicated wiring and the unconnected pins' values put back)."""
    report, top = small_netlist_answers(ICEBREAKER, tmp_path, routed=True)
    assert report["resources"]["PLL"]["used"] == 1, report["resources"]


@opt_in
def test_ulx3s_top_netlist_answers_over_the_uart_pins(tmp_path):
    """The same with the ULX3S top-level (EHXPLLL, power-on reset, TRELLIS_IO pins)."""
    cells, top = small_netlist_answers(ULX3S, tmp_path)
    assert cells.get("EHXPLLL") == 1 and cells.get("TRELLIS_IO") == 3 + top.led_count, cells
