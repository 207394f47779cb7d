"""cocotb benchmarks of simulation speed: Python in every cycle, or Python waiting for done.

Parameters come from ``FPGANET_TB`` (JSON, see :mod:`fpganet.sim.bench`); each
test writes its measurement to the JSON file named by ``FPGANET_BENCH_OUT``.
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from fpganet.config import AcceleratorConfig
from fpganet.sim.free_running import expected_checksum
from fpganet.sim.tb_systolic import SystolicArrayTB


def _setup():
    params = json.loads(os.environ["FPGANET_TB"])
    return params, AcceleratorConfig.from_dict(params["config"])


def _report(**measurement):
    with open(os.environ["FPGANET_BENCH_OUT"], "w") as file:
        json.dump(measurement, file)


@cocotb.test()
async def python_every_cycle(dut):
    """The testbench drives and samples the streams in every cycle (ReadOnly + RisingEdge)."""
    params, config = _setup()
    rng = np.random.default_rng(0)
    tb = SystolicArrayTB(dut, config, rng=rng)
    await tb.start()
    M, N, K = 2 * config.rows, 2 * config.cols, params["tile_k"]
    A = rng.integers(-128, 128, size=(M, K))
    B = rng.integers(-128, 128, size=(K, N))
    start_cycle, start = tb.cycle, time.perf_counter()
    await tb.check_product(A, B)
    wall = time.perf_counter() - start
    _report(cycles=tb.cycle - start_cycle, wall_s=wall, checked=True)


@cocotb.test()
async def python_waits_for_done(dut):
    """The design feeds itself and the simulator clocks it; Python waits for `done`."""
    params, config = _setup()
    start = time.perf_counter()
    await RisingEdge(dut.done)
    wall = time.perf_counter() - start
    await ReadOnly()  # the final checksum update lands in the same time step as `done`
    cycles = int(dut.cycles.value)
    checksum = dut.checksum.value.to_signed()
    want = expected_checksum(config, params["tiles"], params["tile_k"])
    assert checksum == want, f"checksum {checksum}, expected {want}"
    _report(cycles=cycles, wall_s=wall, checked=True)
