"""cocotb testbench behind ``make sim`` (see :mod:`fpganet.sim.main`)."""

import json
import os
from pathlib import Path

import cocotb
import numpy as np

from fpganet.config import AcceleratorConfig
from fpganet.sim.matmul import assemble, plan_tiles, reference_matmul
from fpganet.sim.tb_systolic import SystolicArrayTB


@cocotb.test()
async def main_product(dut):
    params = json.loads(os.environ["FPGANET_TB"])
    config = AcceleratorConfig.from_dict(params["config"])
    rng = np.random.default_rng(params["seed"])
    M, K, N = params["shape"]
    A = rng.integers(config.operand_min, config.operand_max + 1, size=(M, K))
    B = rng.integers(config.operand_min, config.operand_max + 1, size=(K, N))
    tb = SystolicArrayTB(dut, config, rng=rng)
    await tb.start()
    tiles = plan_tiles(A, B, config.rows, config.cols)
    start = tb.cycle
    sums = await tb.stream(tiles)
    C = assemble(tiles, sums, (M, N), config.acc_width)
    want = reference_matmul(A, B, config.acc_width)
    assert np.array_equal(C, want), f"{int((C != want).sum())} of {C.size} outputs differ from numpy"
    report = {"cycles": tb.cycle - start, "max_abs": int(np.abs(C).max())}
    Path("main_report.json").write_text(json.dumps(report))
