"""cocotb tests of the generated Verilog of the systolic array, on Verilator and Icarus."""

import json
import shutil

import pytest

from fpganet.config import AcceleratorConfig
from fpganet.hdl.systolic import ProcessingElement, SystolicArray
from fpganet.sim import runner

from faults import MiswiredPE

TB_MODULE = "fpganet.sim.tb_systolic"
ALL_TESTCASES = ["extreme_operands", "latency_and_tile_rate", "random_products"]


def simulators():
    return [
        pytest.param("verilator", id="verilator"),
        pytest.param("icarus", id="icarus", marks=pytest.mark.skipif(
            shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not installed")),
    ]


def run_tb(config, sim, testcase=None, *, pe=ProcessingElement, **params):
    build = runner.build(SystolicArray(config, pe=pe), "systolic_array", sim=sim)
    env = {"FPGANET_TB": json.dumps({"config": config.to_dict(), **params})}
    return build.run(TB_MODULE, testcase, env)


@pytest.mark.parametrize("sim", simulators())
@pytest.mark.parametrize("rows,cols", [(2, 8), (3, 5)])
def test_array_verilog_matches_numpy(sim, rows, cols):
    config = AcceleratorConfig(rows=rows, cols=cols)
    result = run_tb(config, sim, seed=rows * 31 + cols, products=8,
                    max_dim=3 * max(rows, cols) + 3, valid_gaps=0.3, ready_stalls=0.4)
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert sorted(result.passed) == ALL_TESTCASES


def test_miswired_array_is_caught():
    """The same testbench fails on an array whose PEs pass `a` south instead of `b`."""
    config = AcceleratorConfig(rows=3, cols=5)
    result = run_tb(config, "verilator", "random_products", pe=MiswiredPE, seed=1, products=3)
    assert result.failed == ["random_products"]
