"""The whole system in RTL simulation over its SPI pins: LeNet-5 compiled for the iCEBreaker
(its configuration, two images a START) loaded into the accelerator's generated Verilog by
the real host driver through a model of the FTDI MPSSE's timing, answered bit for bit as the
golden model answers, cycle for cycle as the performance model counts, and noise, cut
transactions and a truncated frame survived (sim/tb_system_spi.py).

The design's clock and SCK run at the same rate, as on the board (30 MHz each); the harness
makes them 100 MHz, and every time the test measures scales by 100/30 to the board's.
Verilator only, as tests/test_system_uart.py.
"""

import pytest

from fpganet.boards.icebreaker import DEFAULT_CONFIG
from fpganet.compiler import compile_model
from fpganet.estimate.figures import SPI_LINK
from fpganet.sim.system_run import HARNESS_CLOCK_HZ, run_spi_system

#: SCK's period: the design's clock's, as the iCEBreaker's 30 MHz SCK and 30 MHz clock.
SCK_PS = 10_000
#: The first SCK edge's offset from the clock's: the two are not in phase.
PHASE_PS = 3_300
#: The host's time between transactions, scaled as the clocks are (100 MHz here, 30 on the
#: board): the estimator's assumed USB turnaround of the FT2232H (not measured here).
GAP_PS = round(SPI_LINK["turnaround_s"] * 1e12 * 30e6 / HARNESS_CLOCK_HZ)
#: The board's inter-byte timeout in cycles (10 ms at 30 MHz): longer than a START's compute.
TIMEOUT_CYCLES = 300_000
IMAGES = 8
BATCH = 2


@pytest.fixture(scope="module")
def compiled_lenet(tmp_path_factory):
    out = tmp_path_factory.mktemp("system_spi") / "lenet5"
    compile_model(out_dir=out, config=DEFAULT_CONFIG, batch=BATCH)
    return out


@pytest.mark.slow
def test_lenet_over_the_spi_pins(compiled_lenet):
    result, timings = run_spi_system(compiled_lenet, DEFAULT_CONFIG, images=IMAGES, sck_ps=SCK_PS,
                                     phase_ps=PHASE_PS, gap_ps=GAP_PS,
                                     timeout_cycles=TIMEOUT_CYCLES)
    assert result.passed == ["network_over_the_spi_pins", "noise_cuts_then_a_good_image"]
    # Every run as long as the model counts; the STARTs after the first queued on the board
    # while the one before computed: the steady period per START is its compute to 1 %.
    model_ps = timings["model_total_cycles"] * 1e12 / HARNESS_CLOCK_HZ
    assert all(abs(run - model_ps) <= 10_000 for run in timings["run_ps"]), timings["run_ps"]
    per_start = timings["steady_ps"] / (timings["steady_images"] // BATCH)
    assert model_ps <= per_start < 1.01 * model_ps, (
        f"the runs after the first took {per_start / 1e6:.1f} us a START; one START computes "
        f"in {model_ps / 1e6:.1f} us: {timings}")


def test_estimate_over_the_spi_link(compiled_lenet, capsys):
    """`fpganet estimate --link spi`: the link's bytes at 30 MHz and three transactions a
    START, whose assumed turnaround leaves LeNet-5 at its compute bound; with --baud, one
    line."""
    import json as json_module

    from fpganet.cli import main
    assert main(["estimate", str(compiled_lenet), "--link", "spi", "--json", "--no-measure",
                 "--activity", "default"]) == 0
    estimate = json_module.loads(capsys.readouterr().out)
    throughput = estimate["fpga"]["throughput"]
    assert throughput["link"]["name"] == "SPI"
    assert throughput["link"]["transactions_per_image"] == 3 / BATCH
    assert throughput["bottleneck"]["value"] == "compute"
    assert throughput["images_per_s"]["value"] == throughput["compute_images_per_s"]["value"]
    assert main(["estimate", str(compiled_lenet), "--link", "spi", "--baud", "1e6"]) == 2
    assert capsys.readouterr().err.strip() == ("fpganet: error: --baud is the UART's: give it or "
                                               "--link spi, not both")
