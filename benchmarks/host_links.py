"""Images a second delivered over each host link, measured in full-system RTL simulation.

LeNet-5 compiled for the iCEBreaker (its configuration, ``--batch 2``) runs in Verilator on
the accelerator's generated Verilog behind the SPI link, driven bit by bit by the real host
driver through a model of the FTDI MPSSE's timing (sim/tb_system_spi.py): SCK and the
design's clock at the board's 30 MHz each (the harness runs both at 100 MHz and the times
scale by 100/30), and an assumed 250 us host turnaround between transactions (USB; not
measured). The accelerator's busy flag gives each START's run and the idle time between;
the delivered rate is the steady state's, from the second START's run to the last one's end.

The estimator's delivered rates (``fpganet estimate [--link spi]``) of both links go beside
it: the UART's is the link's bytes at 3 Mbaud.

    python benchmarks/host_links.py [--images N]   # writes benchmarks/results/links.json
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fpganet.argtypes import positive_int
from fpganet.boards.icebreaker import DEFAULT_CONFIG, SCK_HZ
from fpganet.compiler import compile_model, load_compiled
from fpganet.estimate.comparison import estimate
from fpganet.estimate.figures import SPI_LINK
from fpganet.estimate.throughput import HostLink
from fpganet.errors import FpganetError
from fpganet.results import make_row, write_rows
from fpganet.sim.system_run import HARNESS_CLOCK_HZ, run_spi_system

ROOT = Path(__file__).resolve().parent.parent
BATCH = 2
#: The board's clock and SCK: the harness's times scale by HARNESS_CLOCK_HZ / BOARD_HZ.
BOARD_HZ = 30e6
#: The host's turnaround between transactions on the board: the estimator's assumption.
TURNAROUND_S = SPI_LINK["turnaround_s"]
#: The board's inter-byte timeout in cycles (10 ms at 30 MHz).
TIMEOUT_CYCLES = 300_000


def measure(images):
    """The SPI run's report (sim/tb_system_spi.py) for ``images`` images."""
    scale = HARNESS_CLOCK_HZ / BOARD_HZ
    with tempfile.TemporaryDirectory() as folder:
        compiled = Path(folder) / "lenet5"
        compile_model(out_dir=compiled, config=DEFAULT_CONFIG, batch=BATCH, board="icebreaker")
        _, report = run_spi_system(
            compiled, DEFAULT_CONFIG, images=images, sck_ps=round(1e12 / SCK_HZ / scale),
            phase_ps=3_300, gap_ps=round(TURNAROUND_S * 1e12 / scale),
            timeout_cycles=TIMEOUT_CYCLES)
        net = load_compiled(compiled)
        estimated = {
            name: json.loads(estimate(net, board="icebreaker", link=link, measure=False,
                                      synth=False, program_batch=BATCH).to_json())
            ["fpga"]["throughput"]["images_per_s"]["value"]
            for name, link in (("UART", None), ("SPI", HostLink.spi(images_per_start=BATCH)))}
    return report, estimated, scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=positive_int, default=16,
                        help="images to run (default 16: 8 STARTs)")
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/links.json"))
    args = parser.parse_args(argv)
    if args.images < 2 * BATCH or args.images % BATCH:
        raise FpganetError(f"--images must be a multiple of {BATCH}, at least {2 * BATCH}")
    report, estimated, scale = measure(args.images)
    command = f"python benchmarks/host_links.py --images {args.images}"
    starts = report["steady_images"] // BATCH
    steady_s = report["steady_ps"] * 1e-12 * scale
    run_s = sum(report["run_ps"][1:]) * 1e-12 * scale / (len(report["run_ps"]) - 1)
    cycles = report["model_total_cycles"]
    spi = "batch 2, SPI link"
    rows = [
        make_row("lenet5", "icebreaker", spi, "images_per_s_delivered",
                 report["steady_images"] / steady_s, "rtl", command),
        make_row("lenet5", "icebreaker", spi, "images_per_s_compute", BATCH / run_s, "rtl",
                 command),
        make_row("lenet5", "icebreaker", spi, "cycles_per_image", cycles / BATCH, "rtl",
                 command),
    ]
    for link, value in estimated.items():
        rows.append(make_row("lenet5", "icebreaker", f"batch 2, {link} link, estimated",
                             "images_per_s_delivered", value, "estimated", command))
    for row in rows:
        print(f"{row.configuration:20s} {row.metric:24s} {row.value:12,.1f} {row.unit} "
              f"({row.basis})")
    print(f"{starts} STARTs after the first, idle between runs "
          f"{[round(t * 1e-6 * scale, 2) for t in report['idle_ps']]} us (board time)")
    write_rows(args.output, rows)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FpganetError as error:
        print(f"host_links: error: {error}", file=sys.stderr)
        sys.exit(2)
