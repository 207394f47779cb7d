"""The whole system in RTL simulation: LeNet-5 loaded into the accelerator's generated Verilog
over its UART rx pin, driven bit by bit by the real host driver, MNIST images answered as
the golden model answers them, and damaged frames survived (sim/tb_system.py).

Verilator only. Icarus runs the accelerator at about 1,300 cycles/s, and loading LeNet-5 is
2.8 million cycles of line time even at the fastest bit rate the UART takes (4 clock cycles
per bit): over half an hour.
"""

import json
import os

import pytest

from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig
from fpganet.hdl.accelerator import Accelerator
from fpganet.hdl.uart import MIN_DIVISOR
from fpganet.sim import system_run
from fpganet.sim.runner import failure_report

TB_MODULE = "fpganet.sim.tb_system"
TOP = "system_uart"
#: The default configuration (2x8, 64 KiB of weights, 8 KiB of activations), the iCEBreaker's.
CONFIG = AcceleratorConfig()
#: The free-running harness's clock (runner.clock_harness: 10 ns).
CLOCK_HZ = 100_000_000
#: 4 clock cycles per bit, the fewest the UART takes: the iCEBreaker's 12 MHz at 3 Mbaud,
#: scaled to the harness's clock. Every bit of the load is simulated, so this sets its cost.
BAUD = CLOCK_HZ // MIN_DIVISOR
#: Inter-byte timeout: 1 ms, longer than one LeNet-5 image (57,000 cycles), so that the
#: driver's READ_OUTPUT waits for the answer instead of polling.
TIMEOUT_CYCLES = 100_000
IMAGES = 4


#: The default configuration, and the same with the ULX3S's pipeline registers (the host
#: link's replier then registers its CRC's input): that one only with
#: ``FPGANET_FULL_SYSTEM=all`` (40 s more; amaranth.sim runs the pipelined link in
#: tests/test_hostlink_core.py, and tests/test_system_spi.py runs a second whole system).
CONFIGS = {"default": CONFIG, "pipelined": CONFIG.replace(pipeline_registers=True)}
if os.environ.get("FPGANET_FULL_SYSTEM") != "all":
    del CONFIGS["pipelined"]


@pytest.fixture(scope="module", params=list(CONFIGS))
def compiled_lenet(request, tmp_path_factory):
    config = CONFIGS[request.param]
    out = tmp_path_factory.mktemp("system") / "lenet5"
    compile_model(out_dir=out, config=config)
    return out, config


def build_system(config, device=Accelerator, name=TOP):
    """The UART host link and ``device(config)`` with UART pins only, built free-running."""
    return system_run.build_system(config, link="uart", rate=BAUD, device=device, name=name,
                                   timeout_cycles=TIMEOUT_CYCLES)


@pytest.mark.slow
def test_lenet_over_the_uart_pins(compiled_lenet, tmp_path):
    """LeNet-5 loaded and run through the UART pins, bit-exact against the golden model and
    cycle-exact against the performance model; garbage, a truncated frame, a bad CRC and an
    unknown type answered as documented, then a good image answered correctly."""
    compiled, config = compiled_lenet
    build = build_system(config)
    report = tmp_path / "system.json"
    env = {"FPGANET_TB": json.dumps({
        "config": config.to_dict(), "clock_hz": CLOCK_HZ, "baud": BAUD,
        "timeout_cycles": TIMEOUT_CYCLES, "compiled": str(compiled), "images": IMAGES,
        "report": str(report)})}
    result = build.run(TB_MODULE, None, env)
    assert result.ok, failure_report(result)
    assert result.passed == ["lenet_over_the_uart_pins", "damaged_frames_then_a_good_image"]
    timings = json.loads(report.read_text())
    assert timings["stamp_cycles"] == [timings["model_stamp_cycles"]] * IMAGES, timings
    # The load is line time (10 bits per byte of each WRITE and its ACK, back to back) plus
    # the WRITEs' moves into the memories (2 cycles per byte and 1 per word: about 6 %).
    assert timings["load_line_ms"] < timings["load_sim_ms"] < 1.1 * timings["load_line_ms"], \
        f"the load took {timings['load_sim_ms']:.2f} ms of simulated time: {timings}"
