"""The iCE40 DSP mapping: two int8 products per SB_MAC16, checked before and after synthesis.

The RTL model (``model=True``) runs in amaranth.sim; the real thing, the
SB_MAC16 instances in 8x8 mode, is checked on the synthesized netlist:
``synth_ice40`` (no ``-dsp``, as the board build runs it), ``write_verilog``,
Yosys's ``cells_sim.v`` model of SB_MAC16, and the array testbench
``fpganet.sim.tb_systolic`` on Icarus Verilog, against numpy.
"""

import json

import numpy as np
import pytest

from fpganet.boards.netlist import build_netlist_sim, netlist_simulator, synthesize_netlist
from fpganet.boards.report import parse_yosys_cells
from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.hdl.ice40_dsp import (DSPPairing, DSPProcessingElement, Ice40SystolicArray, Multiply16,
                                   MultiplyAdd16)
from fpganet.hdl.systolic import ProcessingElement, SystolicArray
from fpganet.sim.matmul import assemble, plan_tiles, reference_matmul

from amaranth.hdl import Fragment
from test_systolic_amaranth import ArrayHarness

TB_MODULE = "fpganet.sim.tb_systolic"
ALL_TESTCASES = ["extreme_operands", "latency_and_tile_rate", "random_products"]

needs_icarus = pytest.mark.skipif(netlist_simulator() is None,
                                  reason="Icarus Verilog (iverilog) is not installed")


@pytest.mark.parametrize("rows,cols,max_dsps", [(2, 8, None), (3, 3, None), (8, 2, 7)])
def test_paired_array_model_matches_numpy(rows, cols, max_dsps):
    config = AcceleratorConfig(rows=rows, cols=cols, broadcast_operands=max_dsps is not None)
    rng = np.random.default_rng(rows * 10 + cols)
    A = rng.integers(-128, 128, size=(7, 19))
    B = rng.integers(-128, 128, size=(19, 11))
    tiles = plan_tiles(A, B, rows, cols)
    dut = Ice40SystolicArray(config, model=True, max_dsps=max_dsps)
    harness = ArrayHarness(dut, tiles, rng=rng, valid_gaps=0.2, ready_stalls=0.3).run()
    np.testing.assert_array_equal(assemble(tiles, harness.tile_sums(), (7, 11)),
                                  reference_matmul(A, B))
    assert dut.dsps == Ice40SystolicArray.dsps_needed(config, max_dsps)


def test_pairing_shares_one_dsp_per_two_pes():
    config = AcceleratorConfig(rows=1, cols=5)
    pairing = DSPPairing(max_dsps=2)
    pes = [pairing(config) for _ in range(5)]
    assert [type(pe) for pe in pes] == [DSPProcessingElement] * 4 + [ProcessingElement]
    assert [pe.owns_dsp for pe in pes[:4]] == [True, False, True, False]
    assert pairing.dsps == 2 and pairing.fabric_pes == 1
    pairing = DSPPairing()
    first = pairing(config)
    pairing.finish()
    second = pairing(config)
    assert first.owns_dsp and second.owns_dsp and first._partner is None


def test_pairing_serves_several_designs():
    """An odd PE count: the last PE keeps its DSP; the next design starts fresh pairs."""
    config = AcceleratorConfig(rows=1, cols=3)
    pairing = DSPPairing()
    first = SystolicArray(config, pe=pairing)
    Fragment.get(first, None)
    second = SystolicArray(config, pe=pairing)
    Fragment.get(second, None)
    assert pairing.dsps == 4


def test_dsp_pe_refuses_wide_operands():
    with pytest.raises(ConfigError, match="8-bit"):
        Ice40SystolicArray(AcceleratorConfig(operand_width=9, acc_width=32))


def _synthesize_and_run(tmp_path, synth_opts, seed):
    config = AcceleratorConfig(rows=2, cols=8)
    netlist, log = synthesize_netlist(Ice40SystolicArray(config), "systolic_array", tmp_path,
                                      family="ice40", synth_opts=synth_opts)
    build = build_netlist_sim(netlist, "systolic_array", family="ice40")
    env = {"FPGANET_TB": json.dumps({"config": config.to_dict(), "seed": seed, "products": 4,
                                     "max_dim": 20, "valid_gaps": 0.3, "ready_stalls": 0.3})}
    return netlist, log, build.run(TB_MODULE, None, env)


@needs_icarus
def test_synthesized_ice40_array_matches_numpy(tmp_path):
    """The 2x8 array after synth_ice40 (no -dsp): 8 SB_MAC16 in 8x8 mode, correct sums."""
    netlist, log, result = _synthesize_and_run(tmp_path, (), seed=5)
    assert parse_yosys_cells(log).get("SB_MAC16") == 8
    text = netlist.read_text()
    assert text.count(".MODE_8x8(1'h1)") == 8
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert sorted(result.passed) == ALL_TESTCASES


@needs_icarus
def test_synth_ice40_dsp_breaks_hand_instantiated_8x8_mode(tmp_path):
    """Why the board build refuses -dsp: it rewrites the SB_MAC16s (yosys issue 2922).

    If this starts to pass, a newer Yosys has fixed the issue and iCE40 builds
    may use -dsp again for other multipliers.
    """
    netlist, _, result = _synthesize_and_run(tmp_path, ("-dsp",), seed=6)
    assert ".MODE_8x8(1'h1)" not in netlist.read_text()
    assert "random_products" in result.failed


@needs_icarus
@pytest.mark.parametrize("component", [MultiplyAdd16, Multiply16])
def test_synthesized_multiply_add_matches_numpy(tmp_path, component):
    """The requantizer's SB_MAC16s (a 16x16 product plus an addend in the accumulator, and a
    plain registered product) after synth_ice40: the hand-set parameters compute what the
    models do, with the models' latency."""
    netlist, log = synthesize_netlist(component(), "multiply_add", tmp_path, family="ice40")
    assert parse_yosys_cells(log).get("SB_MAC16") == 1
    build = build_netlist_sim(netlist, "multiply_add", family="ice40")
    params = {"seed": 3, "cycles": 3000, "addend": component is MultiplyAdd16}
    result = build.run("fpganet.sim.tb_multiply_add", None, {"FPGANET_TB": json.dumps(params)})
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert result.passed == ["random_multiply_add"]
