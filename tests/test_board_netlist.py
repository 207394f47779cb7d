"""The netlist that becomes the iCEBreaker's bitstream, simulated: the board top-level
synthesized by ``synth_ice40`` exactly as ``fpganet synth --board icebreaker`` does, written
back as Verilog, compiled in Verilator with Yosys's iCE40 cell models (SB_LUT4, SB_CARRY,
the flip-flops, SB_MAC16, SB_RAM40_4K, SB_SPRAM256KA, SB_IO) and a stand-in for the PLL
(:data:`fpganet.boards.netlist.ICE40_PLL_MODEL`), and driven through its UART pins by the
real host driver (sim/tb_system.py, as tests/test_system_uart.py drives the RTL).

The whole design (LeNet-5 loaded, images checked against the golden model) is opt-in: its
synthesis and Verilator build take minutes (docs/journal/measurements.md has the measured
times). Run it with ``FPGANET_NETLIST_SIM=1 pytest tests/test_board_netlist.py``. The small
test keeps the path alive in ``make test``: the same top-level, PLL, reset and UART pins with
a small device behind the link.

Not covered: timing (the cell models have no delays; nextpnr's timing report is the check),
the PLL's frequency synthesis (the harness clocks the oscillator pin at the PLL's output
frequency, scaled: the design counts cycles), placement and routing (the placed-and-routed
netlist is not simulated).
"""

import json
import os
import time

import pytest

from fpganet.boards.build import BOARDS
from fpganet.boards.netlist import (PLL_LOCK_EDGES, board_harness, build_board_netlist_sim,
                                    synthesize_board)
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
BOARD = BOARDS["icebreaker"]

opt_in = pytest.mark.skipif(os.environ.get("FPGANET_NETLIST_SIM") != "1",
                            reason="the whole iCEBreaker netlist takes minutes: set "
                                   "FPGANET_NETLIST_SIM=1 to run it")


def tb_parameters(top, **more):
    """The testbench's parameters for the board ``top``: the harness's clock and the UART's bit
    time scaled alike, and the reset the board top-level makes (PLL lock, its synchronizer,
    the power-on timer)."""
    link = top.core.link
    reset_cycles = PLL_LOCK_EDGES + 2 + top.reset_cycles + 2
    return {"config": top.core_config.to_dict(), "clock_hz": HARNESS_HZ,
            "baud": HARNESS_HZ / float(link.divisor), "timeout_cycles": link.core.timeout_cycles,
            "reset_ps": reset_cycles * PERIOD_NS * 1000, **more}


def netlist_sim(top, netlist, name, *, optimize=True):
    harness = board_harness(top, BOARD.platform, name, period_ns=PERIOD_NS)
    return build_board_netlist_sim(netlist, harness, name, optimize=optimize)


@opt_in
@pytest.mark.slow
def test_icebreaker_netlist_runs_lenet_over_the_uart_pins(tmp_path):
    """LeNet-5 loaded through the rx pin of the synthesized iCEBreaker netlist, MNIST images
    answered as the golden model answers them (every logit) at the modelled cycles, damaged
    frames answered as documented (sim/tb_system.py's two tests)."""
    began = time.monotonic()
    netlist, log, top = synthesize_board(BOARD, tmp_path / "synth")
    synth_s = time.monotonic() - began
    cells = parse_yosys_cells(log)
    assert (cells.get("SB_MAC16"), cells.get("SB_SPRAM256KA")) == (8, 4), cells
    began = time.monotonic()
    sim = netlist_sim(top, netlist, "icebreaker_netlist")
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
    print(f"iCEBreaker netlist: synthesis {synth_s:.0f} s, Verilator build {build_s:.0f} s, "
          f"run {run_s:.0f} s; {json.dumps(timings)}")


def small_core(config):
    """The link and a small device of memories behind it (no accelerator)."""
    return HostLinkSystem(config, config.clock_hz, 3_000_000,
                          device=lambda config: StandInDevice(config, depth=16),
                          input_depth=64, output_depth=64, max_write_bytes=64)


@pytest.mark.slow
def test_icebreaker_top_netlist_answers_over_the_uart_pins(tmp_path):
    """The iCEBreaker top-level (PLL, power-on reset, SB_IO pins) with a small core behind the
    UART, synthesized and simulated as the whole design is: the driver's PING is answered
    with the design's parameters, a WRITE is acknowledged and STATUS counts no error."""
    netlist, log, top = synthesize_board(BOARD, tmp_path / "synth", core=small_core)
    cells = parse_yosys_cells(log)
    assert cells.get("SB_PLL40_PAD") == 1 and cells.get("SB_IO") == 2 + top.led_count, cells
    sim = netlist_sim(top, netlist, "icebreaker_small_netlist", optimize=False)
    env = {"FPGANET_TB": json.dumps(tb_parameters(top))}
    result = sim.run(SMALL_TB_MODULE, None, env, test_dir=tmp_path / "run")
    assert result.ok, failure_report(result)
