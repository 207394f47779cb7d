"""The ECP5 block RAM model, checked on the weight buffer as ``synth_ecp5`` maps it.

Yosys ships DP16KD as a blackbox; :data:`fpganet.boards.netlist.DP16KD_MODEL` models it for
the netlist simulations (``tests/test_board_netlist.py`` runs the ULX3S's whole design on
it). Here the generic :class:`fpganet.hdl.memories.WeightBuffer` is synthesized with
``synth_ecp5`` (as the board build does: DP16KD with 4-bit ports, written on the falling
edge), simulated on Icarus with Yosys's ECP5 models and that one, and compared cycle by cycle
with the Python model of ``fpganet.sim.tb_weight_buffer``, which its RTL passes too
(``tests/test_boards_ice40_spram.py``).
"""

import json

import pytest

from fpganet.boards.netlist import build_netlist_sim, netlist_simulator, synthesize_netlist
from fpganet.boards.report import parse_yosys_cells
from fpganet.config import AcceleratorConfig
from fpganet.hdl.memories import WeightBuffer

from test_boards_ice40_spram import TB_MODULE, _params


@pytest.mark.skipif(netlist_simulator() is None, reason="Icarus Verilog (iverilog) is not installed")
def test_ecp5_weight_buffer_netlist_on_the_dp16kd_model(tmp_path):
    """Three blocks of block RAM (the last a quarter) behind the registered output: every
    word written read back at the buffer's latency."""
    config = AcceleratorConfig(rows=2, cols=2, registered_bram_outputs=True,
                               weight_buffer_bytes=2 * (2 * WeightBuffer.block_words + 1024))
    netlist, log = synthesize_netlist(WeightBuffer(config), "weight_buffer", tmp_path / "synth",
                                      family="ecp5")
    cells = parse_yosys_cells(log)
    assert cells.get("DP16KD", 0) >= 4, cells
    sim = build_netlist_sim(netlist, "weight_buffer", family="ecp5")
    params = _params(config, 5, boundary=WeightBuffer.block_words)
    result = sim.run(TB_MODULE, env={"FPGANET_TB": json.dumps(params)}, test_dir=tmp_path / "run")
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
