"""The weight buffer in iCE40 SPRAM: checked on the synthesized netlist, as it is on the chip.

:class:`fpganet.hdl.ice40_spram.SPRAMWeightBuffer` instantiates SB_SPRAM256KA cells,
which amaranth.sim cannot run: it is synthesized with ``synth_ice40`` (as the
board build does), simulated with Yosys's cell models on Icarus and compared
with a Python model of :class:`fpganet.hdl.memories.WeightBuffer`'s timing. The
generic buffer runs the same testbench on its RTL.
"""

import json

import pytest

from fpganet.boards.netlist import build_netlist_sim, netlist_simulator, synthesize_netlist
from fpganet.boards.report import parse_yosys_cells
from fpganet.cli import main
from fpganet.config import AcceleratorConfig
from fpganet.hdl.ice40_spram import SPRAMWeightBuffer, spram_mapping_problem
from fpganet.hdl.memories import WeightBuffer
from fpganet.sim.runner import build

TB_MODULE = "fpganet.sim.tb_weight_buffer"

needs_icarus = pytest.mark.skipif(netlist_simulator() is None,
                                  reason="Icarus Verilog (iverilog) is not installed")

# (rows, weight_buffer_bytes) -> SPRAM cells (side by side x one above the other)
SHAPES = {
    (8, 128 * 1024): (4, 1),    # the iCEBreaker default: 64-bit words in all four cells
    (2, 64 * 1024): (1, 2),     # 16-bit words, two cells deep: the read-select multiplexer
}


def _params(config, seed, boundary=16384):
    return {"width": 8 * config.rows, "words": config.weight_buffer_words, "writes": 400,
            "reads": 800, "seed": seed, "latency": config.weight_read_latency, "boundary": boundary,
            "enables": config.weight_blocks}


@needs_icarus
@pytest.mark.parametrize("rows,weight_bytes,registered", [(*shape, False) for shape in SHAPES]
                         + [(2, 64 * 1024, True)])
def test_spram_weight_buffer_netlist(rows, weight_bytes, registered, tmp_path):
    """With ``registered_bram_outputs`` (``registered``) the word comes a cycle later, through a
    register behind the cells' multiplexer."""
    config = AcceleratorConfig(rows=rows, cols=2, weight_buffer_bytes=weight_bytes,
                               registered_bram_outputs=registered)
    buffer = SPRAMWeightBuffer(config)
    assert (buffer.lanes, buffer.depth_cells) == SHAPES[rows, weight_bytes]
    netlist, log = synthesize_netlist(buffer, "spram_weights", tmp_path / "synth")
    cells = parse_yosys_cells(log)
    assert cells.get("SB_SPRAM256KA") == buffer.lanes * buffer.depth_cells, cells
    assert not cells.get("SB_RAM40_4K"), "the weights went to block RAM"
    sim = build_netlist_sim(netlist, "spram_weights")
    result = sim.run(TB_MODULE, env={"FPGANET_TB": json.dumps(_params(config, rows))},
                     test_dir=tmp_path / "run")
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"


@pytest.mark.parametrize("weight_bytes,registered", [
    (4096, False),
    (4096, True),                               # one block of block RAMs behind its register
    (2 * (2 * WeightBuffer.block_words + 1024), True),     # three blocks, the last a quarter
])
def test_generic_weight_buffer_rtl(weight_bytes, registered, tmp_path):
    config = AcceleratorConfig(rows=2, cols=2, weight_buffer_bytes=weight_bytes,
                               registered_bram_outputs=registered)
    sim = build(WeightBuffer(config), "weight_buffer")
    params = _params(config, 7, boundary=WeightBuffer.block_words if registered else 16384)
    result = sim.run(TB_MODULE, env={"FPGANET_TB": json.dumps(params)}, test_dir=tmp_path / "run")
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"


@pytest.mark.parametrize("rows,weight_bytes,message", [
    (2, 48 * 1024, "needs weight_buffer_bytes a multiple of 32768 and at most 131072$"),
    (8, 256 * 1024, "needs weight_buffer_bytes a multiple of 131072 and at most 131072$"),
    (8, 64 * 1024, "needs weight_buffer_bytes a multiple of 131072 and at most 131072$"),
    (10, 128 * 1024, "needs at most 8 bytes a weight word .*, not 10$"),
])
def test_spram_weight_buffer_refuses_shapes_it_cannot_map(rows, weight_bytes, message):
    config = AcceleratorConfig(rows=rows, cols=2, weight_buffer_bytes=weight_bytes)
    with pytest.raises(ValueError, match=message):
        SPRAMWeightBuffer(config)
    assert spram_mapping_problem(config.replace(weight_buffer_bytes=128 * 1024, rows=min(rows, 8))) is None


def test_synth_refuses_a_weight_buffer_the_spram_cannot_hold_in_one_line(tmp_path, capsys):
    """The default's pair PEs need 64-bit words over all four SPRAMs: 64 KiB is refused before
    any tool runs."""
    assert main(["synth", "--board", "icebreaker", "--weight-buffer-bytes", "65536",
                 "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fpganet: error: ") and "a multiple of 131072" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
