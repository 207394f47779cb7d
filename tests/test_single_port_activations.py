"""Single-port activation banks (``config.single_port_activations``): the banks against their
contract, on the RTL and, in iCE40 SPRAM, on the synthesized netlist with Yosys's cell models;
the configuration's refusals; the engine's hold. Whole networks on the accelerator with them
run in tests/test_rtl_networks.py (outputs equal golden, cycles equal the model's)."""

import json

import pytest
from amaranth import Fragment, Instance, Module, Signal

from fpganet.boards.netlist import build_netlist_sim, netlist_simulator, synthesize_netlist
from fpganet.boards.report import parse_yosys_cells
from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.hdl.engine_hold import EngineHold
from fpganet.hdl.ice40_spram import SPRAMActivationBuffer, spram_mapping_problem
from fpganet.hdl.memories import SinglePortActivationBuffer
from fpganet.sim.runner import build

TB_MODULE = "fpganet.sim.tb_activation_buffer"

needs_icarus = pytest.mark.skipif(netlist_simulator() is None,
                                  reason="Icarus Verilog (iverilog) is not installed")


def _config(act_bytes, cols=2):
    return AcceleratorConfig(rows=4, cols=cols, weight_buffer_bytes=64 * 1024,
                             act_buffer_bytes=act_bytes, single_port_activations=True)


def _params(config, seed, cycles=1500):
    return {"banks": config.act_banks, "depth": config.act_bank_depth,
            "word": config.bank_word_width, "cycles": cycles, "seed": seed}


def test_single_port_bank_rtl(tmp_path):
    config = _config(4096)
    sim = build(SinglePortActivationBuffer(config), "single_port_act")
    result = sim.run(TB_MODULE, env={"FPGANET_TB": json.dumps(_params(config, 3))},
                     test_dir=tmp_path / "run")
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"


@needs_icarus
def test_spram_activation_buffer_netlist(tmp_path):
    """Two banks of 32 KiB, an SPRAM each, both bytes of its words: ResNet-8's on the UP5K."""
    config = _config(64 * 1024)
    buffer = SPRAMActivationBuffer(config)
    netlist, log = synthesize_netlist(buffer, "spram_act", tmp_path / "synth")
    cells = parse_yosys_cells(log)
    assert cells.get("SB_SPRAM256KA") == 2, cells
    assert not cells.get("SB_RAM40_4K"), "the banks went to block RAM"
    sim = build_netlist_sim(netlist, "spram_act")
    result = sim.run(TB_MODULE, env={"FPGANET_TB": json.dumps(_params(config, 4, 3000))},
                     test_dir=tmp_path / "run")
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"


def test_spram_mapping_counts_the_activation_banks():
    config = _config(64 * 1024)
    assert spram_mapping_problem(config) is None
    assert spram_mapping_problem(config.replace(weight_buffer_bytes=128 * 1024)).endswith(
        "at most 65536 beside the 2 of the activation banks")
    assert "one holds 32768 bytes a bank" in spram_mapping_problem(config.replace(act_buffer_bytes=128 * 1024))
    assert spram_mapping_problem(config.replace(act_bank_factor=4)) == (
        "8 activation banks (act_buffer_bytes 65536) take an SPRAM each, and the UP5K's 4 must "
        "also hold the weights")
    with pytest.raises(ValueError, match="an SPRAM has no initial contents"):
        SPRAMActivationBuffer(config, init=[1])


@pytest.mark.parametrize("changes,named", [
    ({"requant_lanes": 2}, "requant_lanes 2"),
    ({"fused_max_pool": True}, "fused_max_pool"),
    ({"pipeline_registers": True}, "registered_bram_outputs, registered_writes"),
])
def test_single_port_activations_refuses_what_it_cannot_hold(changes, named):
    with pytest.raises(ConfigError, match=f"single_port_activations needs .* configuration has {named}$"):
        _config(4096, cols=4).replace(**changes)


def test_engine_hold_enables_the_dsp_and_refuses_other_cells():
    hold = Signal()
    m = Module()
    m.submodules.mac = Instance("SB_MAC16", i_CE=1, i_CLK=0)
    held = Fragment.get(EngineHold(~hold)(m), None)
    mac = next(sub for sub, name, _ in held.subfragments if name == "mac")
    value, _ = mac.ports["CE"]
    assert any(signal is hold for signal in value._rhs_signals())
    other = Module()
    other.submodules.ram = Instance("SB_RAM40_4K", i_RCLK=0)
    with pytest.raises(ValueError, match="cannot hold a SB_RAM40_4K instance"):
        Fragment.get(EngineHold(~hold)(other), None)
