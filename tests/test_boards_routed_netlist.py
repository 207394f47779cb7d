"""What :func:`fpganet.boards.routed_netlist.routed_netlist_verilog` puts back into nextpnr's
routed designs before they are simulated, on small designs written here: the iCE40 PLL's
dedicated wiring, the ECP5 blocks' pin multiplexers, the unconnected pins' values, and its
refusals. The whole routed netlists run in tests/test_board_netlist.py."""

import json

import pytest

from fpganet.boards.netlist import cells_sim_path
from fpganet.boards.routed_netlist import (ROUTED_NETLIST_CELLS, _model_ports,
                                           routed_netlist_verilog)

ROUTED_CELLS = {
    "ice40": ("ICESTORM_LC", "ICESTORM_RAM", "ICESTORM_DSP", "ICESTORM_SPRAM", "ICESTORM_PLL",
              "SB_GB", "SB_IO"),
    "ecp5": ("TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_RAMW", "TRELLIS_IO", "DP16KD", "MULT18X18D",
             "DCCA", "EHXPLLL"),
}


def cell(kind, connections, *, inputs=(), parameters=None, attributes=None):
    """A cell of nextpnr's written design: ``connections`` {port: bits}, every port an output
    but those in ``inputs``."""
    return {"type": kind, "parameters": parameters or {}, "attributes": attributes or {},
            "port_directions": {port: "input" if port in inputs else "output"
                                for port in connections},
            "connections": connections}


def routed(tmp_path, cells, family, ports=None):
    """Write ``cells`` as a routed design, convert it; return the tied design's cells."""
    design = {"modules": {"top": {"attributes": {}, "ports": ports or {}, "cells": cells,
                                  "netnames": {}}}}
    (tmp_path / "routed.json").write_text(json.dumps(design))
    netlist = routed_netlist_verilog(tmp_path / "routed.json", tmp_path / "routed.v",
                                     family=family)
    assert netlist.read_text().count("endmodule") == 1
    return json.loads((tmp_path / "routed_tied.json").read_text())["modules"]["top"]["cells"]


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_every_patch_applies_and_every_routed_cell_has_a_model(family):
    """Each text patch of Yosys's models is found (NetlistCells.text refuses one that is not),
    and every cell type nextpnr writes has a model whose ports are read."""
    ports = _model_ports(ROUTED_NETLIST_CELLS[family].text(cells_sim_path(family).parent))
    for kind in ROUTED_CELLS[family]:
        assert ports.get(kind), kind
    assert {"A_15", "O_31", "CE"} <= ports["ICESTORM_DSP"] if family == "ice40" else \
        {"WADO3", "WDO0", "D1"} <= ports["TRELLIS_RAMW"]


def test_ice40_pll_is_joined_to_the_pin_and_the_global_buffer(tmp_path):
    """The clock pad's SB_IO goes, its pin feeds the PLL's REFERENCECLK, and the PLL's output a
    new net into the global buffer without an input; the LC's free clock enable reads 1, its
    free inputs 0."""
    ports = {"clk": {"direction": "input", "bits": [2]}, "led": {"direction": "output",
                                                                 "bits": [5]}}
    cells = {
        "pad": cell("SB_IO", {"PACKAGE_PIN": [2], "D_IN_0": []}, inputs=("PACKAGE_PIN",),
                    attributes={"NEXTPNR_BEL": "X12/Y31/io1"}),
        "pll": cell("ICESTORM_PLL", {"LOCK": [3], "REFERENCECLK": []},
                    inputs=("REFERENCECLK",), attributes={"BEL_PAD_INPUT": "X12/Y31/io1"},
                    parameters={"FEEDBACK_PATH": "001"}),
        "gb": cell("SB_GB", {"USER_SIGNAL_TO_GLOBAL_BUFFER": [], "GLOBAL_BUFFER_OUTPUT": [4]},
                   inputs=("USER_SIGNAL_TO_GLOBAL_BUFFER",)),
        "lc": cell("ICESTORM_LC", {"I0": [3], "I1": [], "CLK": [4], "CEN": [], "O": [5]},
                   inputs=("I0", "I1", "CLK", "CEN"), parameters={"LUT_INIT": "0000000000000010",
                                                                  "DFF_ENABLE": "1"}),
    }
    tied = routed(tmp_path, cells, "ice40", ports)
    assert "pad" not in tied
    assert tied["pll"]["connections"]["REFERENCECLK"] == [2]
    clock = tied["pll"]["connections"]["PLLOUT_A_GLOBAL"]
    assert clock == [6] and tied["gb"]["connections"]["USER_SIGNAL_TO_GLOBAL_BUFFER"] == clock
    assert tied["lc"]["connections"]["CEN"] == ["1"] and tied["lc"]["connections"]["I1"] == ["0"]


def test_ice40_pll_pad_that_connects_more_is_refused(tmp_path):
    cells = {
        "pad": cell("SB_IO", {"PACKAGE_PIN": [2], "D_IN_0": [7]}, inputs=("PACKAGE_PIN",),
                    attributes={"NEXTPNR_BEL": "X1/Y0/io0"}),
        "pll": cell("ICESTORM_PLL", {"LOCK": [3]}, attributes={"BEL_PAD_INPUT": "X1/Y0/io0"}),
        "gb": cell("SB_GB", {"USER_SIGNAL_TO_GLOBAL_BUFFER": [], "GLOBAL_BUFFER_OUTPUT": [4]},
                   inputs=("USER_SIGNAL_TO_GLOBAL_BUFFER",)),
    }
    with pytest.raises(ValueError, match="also connects"):
        routed(tmp_path, cells, "ice40")


def test_ecp5_pin_multiplexers_become_constants(tmp_path):
    """A block pin at ``"0"`` or ``"1"`` is that constant, ``"INV"`` on a free pin 0 (it floats
    high), the pin's own name the pin; the clock's inversion stays for the DP16KD model; a free
    LUT input of a slice reads 1, a free flip-flop reset 0; a slice half feeding the wide
    multiplexer gets IS_Z1."""
    ram = cell("DP16KD", {"CSA0": [], "DIA4": [], "CEA": [2], "CLKA": [3], "RSTB": []},
               inputs=("CSA0", "DIA4", "CEA", "CLKA", "RSTB"),
               parameters={"CSA0MUX": "INV", "DIA4MUX": "0 ", "CEAMUX": "CEA", "CLKAMUX": "INV",
                           "DATA_WIDTH_A": "00000000000000000000000000001001",
                           "DATA_WIDTH_B": "00000000000000000000000000001001"})
    comb = cell("TRELLIS_COMB", {"A": [2], "D": [], "FXA": [4], "M": [2], "OFX": [5]},
                inputs=("A", "D", "FXA", "M"))
    flop = cell("TRELLIS_FF", {"CLK": [3], "LSR": [], "DI": [5], "Q": [6]},
                inputs=("CLK", "LSR", "DI"))
    tied = routed(tmp_path, {"ram": ram, "comb": comb, "flop": flop}, "ecp5")
    ram = tied["ram"]
    assert (ram["connections"]["CSA0"], ram["connections"]["DIA4"]) == (["0"], ["0"])
    assert ram["connections"]["CEA"] == [2] and ram["connections"]["RSTB"] == ["1"]
    assert "CSA0MUX" not in ram["parameters"] and "CEAMUX" not in ram["parameters"]
    assert ram["parameters"]["CLKAMUX"] == "INV"
    assert tied["comb"]["connections"]["D"] == ["1"] and tied["comb"]["parameters"]["IS_Z1"] == "1"
    assert tied["flop"]["connections"]["LSR"] == ["0"]


def test_ecp5_inverted_connected_pin_is_refused(tmp_path):
    ram = cell("DP16KD", {"WEA": [2]}, inputs=("WEA",), parameters={"WEAMUX": "INV"})
    with pytest.raises(ValueError, match="WEAMUX = 'INV' on a connected pin is not modelled"):
        routed(tmp_path, {"ram": ram}, "ecp5")


def test_a_cell_without_a_model_or_an_unknown_family_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no ecp5 model of x's MYSTERY"):
        routed(tmp_path, {"x": cell("MYSTERY", {"A": []}, inputs=("A",))}, "ecp5")
    with pytest.raises(ValueError, match="not 'gowin'"):
        routed(tmp_path, {}, "gowin")
