"""The ECP5 processing element (product register in the MULT18X18D), before and after synthesis.

Yosys has no simulation model of MULT18X18D; the netlist check compiles the
synth_ecp5 output with Yosys's ECP5 ``cells_sim.v`` and the behavioural model
in :data:`fpganet.boards.netlist.MULT18X18D_MODEL`, and runs the array
testbench on Icarus. It shows that synthesis keeps the instances as written
and that the wiring and timing (latency 2) are right; the model's reading of
the MULT18X18D parameters is from Lattice's documentation (TN1267).
"""

import functools
import json
import os

import numpy as np
import pytest

from fpganet.boards.netlist import build_netlist_sim, netlist_simulator, synthesize_netlist
from fpganet.boards.report import parse_yosys_cells
from fpganet.config import AcceleratorConfig
from fpganet.hdl.ecp5_dsp import ECP5ProcessingElement, ECP5TernaryPairProcessingElement
from fpganet.hdl.systolic import SystolicArray
from fpganet.sim.matmul import assemble, plan_tiles, reference_matmul

from test_systolic_amaranth import ArrayHarness

ALL_TESTCASES = ["extreme_operands", "latency_and_tile_rate", "random_products"]


def test_ecp5_pe_model_matches_numpy():
    config = AcceleratorConfig(rows=3, cols=4)
    rng = np.random.default_rng(11)
    A = rng.integers(-128, 128, size=(5, 13))
    B = rng.integers(-128, 128, size=(13, 9))
    tiles = plan_tiles(A, B, 3, 4)
    dut = SystolicArray(config, pe=functools.partial(ECP5ProcessingElement, model=True))
    harness = ArrayHarness(dut, tiles, rng=rng, valid_gaps=0.2, ready_stalls=0.3).run()
    np.testing.assert_array_equal(assemble(tiles, harness.tile_sums(), (5, 9)),
                                  reference_matmul(A, B))


def _synthesized_array_run(config, pe, tmp_path, seed):
    """The array of ``pe`` through synth_ecp5, its netlist run by the array testbench on
    Icarus (every test case passed, asserted); returns the netlist and Yosys's log."""
    netlist, log = synthesize_netlist(SystolicArray(config, pe=pe), "systolic_array", tmp_path,
                                      family="ecp5")
    build = build_netlist_sim(netlist, "systolic_array", family="ecp5")
    env = {"FPGANET_TB": json.dumps({"config": config.to_dict(), "seed": seed, "products": 4,
                                     "max_dim": 14, "valid_gaps": 0.3, "ready_stalls": 0.3})}
    result = build.run("fpganet.sim.tb_systolic", None, env)
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert sorted(result.passed) == ALL_TESTCASES
    return netlist, log


@pytest.mark.skipif(netlist_simulator() is None, reason="Icarus Verilog (iverilog) is not installed")
def test_synthesized_ecp5_array_matches_numpy(tmp_path):
    netlist, log = _synthesized_array_run(AcceleratorConfig(rows=3, cols=4), ECP5ProcessingElement,
                                          tmp_path, seed=7)
    assert parse_yosys_cells(log).get("MULT18X18D") == 12
    assert netlist.read_text().count('.REG_OUTPUT_CLK("CLK0")') == 12


@pytest.mark.skipif(netlist_simulator() is None, reason="Icarus Verilog (iverilog) is not installed")
@pytest.mark.skipif(os.environ.get("FPGANET_NETLIST_SIM") not in ("1", "full"),
                    reason="a synthesized netlist (about 30 s): FPGANET_NETLIST_SIM=1")
def test_synthesized_ecp5_ternary_pair_array_matches_numpy(tmp_path):
    """The ternary pair PE's one MULT18X18D (activations unsigned on A, SIGNEDA 0) through
    synth_ecp5 and the behavioural model: two products a PE a cycle, weights -1, 0, +1."""
    config = AcceleratorConfig(rows=3, cols=4, pair_products=True, ternary_pairs=True)
    _, log = _synthesized_array_run(config, ECP5TernaryPairProcessingElement, tmp_path, seed=8)
    assert parse_yosys_cells(log).get("MULT18X18D") == 12            # one a PE, not two
