"""The placed-and-routed netlists that become the boards' bitstreams, for simulation.

:func:`route_board` builds a bitstream exactly as ``fpganet synth`` does, nextpnr also writing
the routed design (``--write``) in the same run, and :func:`routed_netlist_verilog` turns that
design into Verilog for :func:`fpganet.boards.netlist.build_board_netlist_sim` with the
family's :data:`ROUTED_NETLIST_CELLS`. What the written design leaves to the silicon is put
back first: the iCE40 PLL's dedicated wiring, the ECP5 blocks' pin multiplexers, and the
values of unconnected pins (:data:`UNCONNECTED_HIGH`). The cells beyond the synthesized
netlists' are wrappers for the ones whose buses nextpnr splits into bits, stand-ins, and
patches of Yosys's ECP5 slice models (docs/journal/measurements.md, "The placed-and-routed
netlists in simulation").
"""

import json
import re
import subprocess
from pathlib import Path

from .build import NAME, build_with_top, toolchain_env
from .netlist import NETLIST_CELLS, PLL_LOCK_EDGES, NetlistCells, cells_sim_path

__all__ = ["route_board", "routed_netlist_verilog", "ROUTED_NETLIST_CELLS", "UNCONNECTED_HIGH",
           "ICESTORM_DSP_MODEL", "ICESTORM_SPRAM_MODEL", "ICESTORM_PLL_MODEL",
           "TRELLIS_RAMW_MODEL", "DCCA_MODEL"]


def _bit_ports(name, width):
    """``NAME_<width-1>, ..., NAME_0``: a bus as nextpnr-ice40's routed netlist splits it."""
    return ", ".join(f"{name}_{k}" for k in reversed(range(width)))


def _bus(name, width):
    return "{" + _bit_ports(name, width) + "}"


_MAC16_PARAMS = (("NEG_TRIGGER", 1), ("C_REG", 1), ("A_REG", 1), ("B_REG", 1), ("D_REG", 1),
                 ("TOP_8x8_MULT_REG", 1), ("BOT_8x8_MULT_REG", 1),
                 ("PIPELINE_16x16_MULT_REG1", 1), ("PIPELINE_16x16_MULT_REG2", 1),
                 ("TOPOUTPUT_SELECT", 2), ("TOPADDSUB_LOWERINPUT", 2),
                 ("TOPADDSUB_UPPERINPUT", 1), ("TOPADDSUB_CARRYSELECT", 2),
                 ("BOTOUTPUT_SELECT", 2), ("BOTADDSUB_LOWERINPUT", 2),
                 ("BOTADDSUB_UPPERINPUT", 1), ("BOTADDSUB_CARRYSELECT", 2), ("MODE_8x8", 1),
                 ("A_SIGNED", 1), ("B_SIGNED", 1))
_MAC16_CONTROLS = ("CLK", "CE", "AHOLD", "BHOLD", "CHOLD", "DHOLD", "IRSTTOP", "IRSTBOT",
                   "ORSTTOP", "ORSTBOT", "OLOADTOP", "OLOADBOT", "ADDSUBTOP", "ADDSUBBOT",
                   "OHOLDTOP", "OHOLDBOT", "CI", "ACCUMCI", "SIGNEXTIN")

#: ICESTORM_DSP, nextpnr-ice40's placed SB_MAC16 with its buses split into bits, as a wrapper
#: around Yosys's SB_MAC16 model.
ICESTORM_DSP_MODEL = f"""\
// nextpnr-ice40's placed SB_MAC16 (buses split into bits), around Yosys's SB_MAC16 model.
module ICESTORM_DSP(
  input {", ".join(_MAC16_CONTROLS)},
  input {_bit_ports("A", 16)}, {_bit_ports("B", 16)},
  input {_bit_ports("C", 16)}, {_bit_ports("D", 16)},
  output {_bit_ports("O", 32)},
  output CO, ACCUMCO, SIGNEXTOUT
);
{"".join(f"  parameter [{width - 1}:0] {name} = 0;{chr(10)}" for name, width in _MAC16_PARAMS)}\
  SB_MAC16 #({", ".join(f".{name}({name})" for name, _ in _MAC16_PARAMS)}) mac(
    {", ".join(f".{name}({name})" for name in _MAC16_CONTROLS)},
    .A({_bus("A", 16)}), .B({_bus("B", 16)}), .C({_bus("C", 16)}), .D({_bus("D", 16)}),
    .O({_bus("O", 32)}), .CO(CO), .ACCUMCO(ACCUMCO), .SIGNEXTOUT(SIGNEXTOUT));
endmodule
"""

#: ICESTORM_SPRAM, nextpnr-ice40's placed SB_SPRAM256KA, around Yosys's model of it.
ICESTORM_SPRAM_MODEL = f"""\
// nextpnr-ice40's placed SB_SPRAM256KA (buses split into bits), around Yosys's model.
module ICESTORM_SPRAM(
  input {_bit_ports("ADDRESS", 14)},
  input {_bit_ports("DATAIN", 16)},
  input {_bit_ports("MASKWREN", 4)},
  input WREN, CHIPSELECT, CLOCK, STANDBY, SLEEP, POWEROFF,
  output {_bit_ports("DATAOUT", 16)}
);
  SB_SPRAM256KA ram(
    .ADDRESS({_bus("ADDRESS", 14)}), .DATAIN({_bus("DATAIN", 16)}),
    .MASKWREN({_bus("MASKWREN", 4)}), .WREN(WREN), .CHIPSELECT(CHIPSELECT), .CLOCK(CLOCK),
    .STANDBY(STANDBY), .SLEEP(SLEEP), .POWEROFF(POWEROFF), .DATAOUT({_bus("DATAOUT", 16)}));
endmodule
"""

#: Stand-in for ICESTORM_PLL, nextpnr-ice40's placed PLL, as :data:`ICE40_PLL_MODEL` is for
#: SB_PLL40_PAD: its outputs are REFERENCECLK (which :func:`routed_netlist_verilog` joins to
#: the clock pin), LOCK rises after :data:`PLL_LOCK_EDGES` rising edges.
ICESTORM_PLL_MODEL = f"""\
// Stand-in for nextpnr-ice40's placed PLL in netlist simulation: PLLOUT_A is REFERENCECLK
// (the harness clocks the pin at the PLL's output frequency, scaled), LOCK rises after
// {PLL_LOCK_EDGES} rising edges.
module ICESTORM_PLL(
  input REFERENCECLK, EXTFEEDBACK, BYPASS, RESETB, LATCHINPUTVALUE, SDI, SCLK,
  input {_bit_ports("DYNAMICDELAY", 8)},
  output PLLOUT_A, PLLOUT_A_GLOBAL, PLLOUT_B, PLLOUT_B_GLOBAL, LOCK, SDO
);
{"".join(f"  parameter {name} = 0;{chr(10)}" for name in (
    "DELAY_ADJMODE_FB", "DELAY_ADJMODE_REL", "DIVF", "DIVQ", "DIVR", "ENABLE_ICEGATE_PORTA",
    "ENABLE_ICEGATE_PORTB", "FDA_FEEDBACK", "FDA_RELATIVE", "FEEDBACK_PATH", "FILTER_RANGE",
    "PLLOUT_SELECT_A", "PLLOUT_SELECT_B", "PLLTYPE", "SHIFTREG_DIVMODE", "TEST_MODE"))}\
  parameter PLLOUT_SELECT = "GENCLK";
  reg [7:0] edges = 8'd0;
  always @(posedge REFERENCECLK)
    if (edges != {PLL_LOCK_EDGES}) edges <= edges + 8'd1;
  assign {{PLLOUT_A, PLLOUT_A_GLOBAL}} = {{2{{REFERENCECLK}}}};
  assign {{PLLOUT_B, PLLOUT_B_GLOBAL, SDO}} = 3'b0;
  assign LOCK = edges == {PLL_LOCK_EDGES};
  initial begin
    // nextpnr's encodings: feedback SIMPLE is 1, port A's GENCLK 0.
    if (FEEDBACK_PATH != 1 || PLLOUT_SELECT_A != 0) begin
      $fatal(1, "ICESTORM_PLL stand-in: configuration not modelled");
    end
  end
endmodule
"""

#: TRELLIS_RAMW, the write-port slice nextpnr-ecp5 makes of each TRELLIS_DPR16X4: it only
#: routes the write address and data from its LUT inputs to the DPRAM slices' WAD and WD
#: (prjtrellis's slice documentation; nextpnr's packer connects them so).
TRELLIS_RAMW_MODEL = """\
// nextpnr-ecp5's LUT RAM write-port slice: routing only, from its LUT inputs to the WAD and WD
// of the DPRAM slices beside it.
module TRELLIS_RAMW(input A0, B0, C0, D0, A1, B1, C1, D1,
                    output WADO0, WADO1, WADO2, WADO3, WDO0, WDO1, WDO2, WDO3);
  assign {WADO3, WADO2, WADO1, WADO0} = {A0, C0, B0, D0};
  assign {WDO3, WDO2, WDO1, WDO0} = {B1, D1, A1, C1};
endmodule
"""

#: DCCA, the ECP5 clock buffer with an enable (Yosys ships only a blackbox).
DCCA_MODEL = """\
// The ECP5 global clock buffer with its clock enable (Yosys ships only a blackbox).
module DCCA(input CLKI, CE, output CLKO);
  assign CLKO = CLKI & CE;
endmodule
"""

#: The input pins that read 1 when nextpnr leaves them unconnected, by family and cell type.
#: nextpnr drops a pin's connection to a constant the silicon gives it anyway (every
#: SB_MAC16's ``CE`` tied to 1 in the design, for one); on the ECP5 it ties a block RAM's chip
#: selects, resets and write enables low by inverting them unconnected (``CSA0MUX = "INV"``),
#: so there its block pins float high, as do a slice's LUT inputs (a CCU2 half whose function
#: needs D at 1 has D unconnected). Every other unconnected input reads 0, as the cell
#: models pull them. :func:`routed_netlist_verilog` ties them so, since Verilator cannot see an
#: undriven pin (``=== 1'bz``) inside a design. ``all``: every input of the cell.
UNCONNECTED_HIGH = {
    "ice40": {"ICESTORM_LC": ("CEN",), "ICESTORM_RAM": ("RCLKE", "WCLKE"),
              "ICESTORM_DSP": ("CE",), "SB_IO": ("CLOCK_ENABLE",)},
    "ecp5": {"TRELLIS_COMB": ("A", "B", "C", "D"), "TRELLIS_FF": ("CE",), "DCCA": ("CE",),
             "DP16KD": "all", "MULT18X18D": "all"},
}

#: The cells of each family's placed-and-routed netlist (:func:`route_board`). iCE40: Yosys's
#: models of ICESTORM_LC, ICESTORM_RAM, SB_GB and SB_IO, wrappers for the cells whose buses
#: nextpnr splits, and the PLL stand-in. ECP5: Yosys's TRELLIS_COMB and TRELLIS_FF with what
#: nextpnr's slices add (the FF's ``SD`` choice of its DI or M input, TRELLIS_COMB's
#: ``WCKMUX``, only as the pin itself, and the ``RAMW_BLOCK`` placeholder of a LUT RAM's write
#: slice, and its CCU2 carry
#: out driven, where the model declared a new net), the synthesized netlist's block models,
#: :data:`TRELLIS_RAMW_MODEL` and :data:`DCCA_MODEL`. The models' pulls on unconnected pins go:
#: the netlist has every input tied (:data:`UNCONNECTED_HIGH`).
ROUTED_NETLIST_CELLS = {
    "ice40": NetlistCells(
        replaced=("SB_PLL40_PAD",),
        models=(ICESTORM_DSP_MODEL, ICESTORM_SPRAM_MODEL, ICESTORM_PLL_MODEL),
        patches=NETLIST_CELLS["ice40"].patches + tuple(
            (f"wire {pin}_pd = ({pin} === 1'bz) ? 1'b0 : {pin};", f"wire {pin}_pd = {pin};")
            for pin in ("I0", "I1", "I2", "I3", "SR")) + (
            ("wire CEN_pu = (CEN === 1'bz) ? 1'b1 : CEN;", "wire CEN_pu = CEN;"),
            ("pd = (x === 1'bz) ? 1'b0 : x;", "pd = x;"),
            ("pu = (x === 1'bz) ? 1'b1 : x;", "pu = x;"))),
    "ecp5": NetlistCells(
        replaced=NETLIST_CELLS["ecp5"].replaced,
        models=NETLIST_CELLS["ecp5"].models + (TRELLIS_RAMW_MODEL, DCCA_MODEL),
        patches=NETLIST_CELLS["ecp5"].patches + (
            ("\tparameter [127:0] LSRMODE = \"LSR\";\n",
             "\tparameter [127:0] LSRMODE = \"LSR\";\n\tparameter SD = \"1\";\n"
             "\twire data = (SD == \"0\") ? M : DI;\n"),
            ("\t\t\t\telse if (muxce)\n\t\t\t\t\tQ <= DI;", "\t\t\t\telse if (muxce)\n\t\t\t\t\tQ <= data;"),
            ("\tparameter IS_Z1 = 1'b0;\n",
             "\tparameter IS_Z1 = 1'b0;\n\tparameter WCKMUX = \"WCK\";\n"
             "\tinitial if (MODE == \"DPRAM\" && (WCKMUX != \"WCK\" || WREMUX != \"WRE\"))\n"
             "\t\t$fatal(1, \"TRELLIS_COMB: an inverted LUT RAM write clock or enable is not modelled\");\n"),
            ("\t\t\twire FCO = (~l4o & gated_lut2_0) | (l4o & FCI);",
             "\t\t\tassign FCO = (~l4o & gated_lut2_0) | (l4o & FCI);"),
            ("\t\tend else begin\n\t\t\t$error(\"unsupported COMB mode %s\", MODE);",
             "\t\tend else if (MODE == \"RAMW_BLOCK\") begin: mode_ramw\n"
             "\t\t\tassign F = 1'b0;    // the LUT RAM write slice's place, no logic\n"
             "\t\tend else begin\n\t\t\t$error(\"unsupported COMB mode %s\", MODE);")),
        netlist_lint_off=NETLIST_CELLS["ecp5"].netlist_lint_off),
}


def route_board(board, directory, config=None, *, core=None, seed=None):
    """Build ``board``'s bitstream for ``config`` with ``core`` (defaults: the board's) as
    ``fpganet synth`` does (the same options, ``seed`` the board's by default), nextpnr also
    writing the routed design, in ``directory/build``; write that design as Verilog
    (:func:`routed_netlist_verilog`) in ``directory``.

    Returns ``(netlist.v path, the build's report dict, the board top-level)``."""
    directory = Path(directory)
    report, top = build_with_top(board, config, directory / "build", core=core, seed=seed,
                                 nextpnr_opts=("--write", f"{NAME}_routed.json"))
    netlist = routed_netlist_verilog(directory / "build" / f"{NAME}_routed.json",
                                     directory / f"{NAME}_routed.v", family=board.family)
    return netlist, report, top


def routed_netlist_verilog(routed_json, netlist, *, family):
    """Write nextpnr's routed design ``routed_json`` (``--write``) of a ``family`` chip as the
    Verilog file ``netlist``, ready for :data:`ROUTED_NETLIST_CELLS`; return its path.

    What the written design leaves to the silicon is put in first:
    - iCE40: the PLL's dedicated wiring, the clock pin into its REFERENCECLK (in place of the
      pad's SB_IO, which connects nothing else) and its output into the one global buffer
      that has no input;
    - ECP5: the pin multiplexers of the block RAMs and multipliers (``DIA0MUX = "0"``, ``"INV"``)
      as constants, and ``IS_Z1`` on the slice halves whose output is the wide multiplexer's;
    - the value of every input pin left unconnected (:data:`UNCONNECTED_HIGH`).
    """
    if family not in ROUTED_NETLIST_CELLS:
        raise ValueError(f"routed netlist simulation has cell models for "
                         f"{', '.join(ROUTED_NETLIST_CELLS)}, not {family!r}")
    design = json.loads(Path(routed_json).read_text())
    (module,) = design["modules"].values()
    cells = module["cells"]
    if family == "ice40":
        _join_ice40_pll(module)
    else:
        _apply_ecp5_pin_muxes(cells)
    _tie_unconnected(cells, family)
    netlist = Path(netlist)
    patched = netlist.with_name(netlist.stem + "_tied.json")
    patched.write_text(json.dumps(design))
    env = toolchain_env()
    result = subprocess.run([env["YOSYS"], "-q", "-p",
                             f"read_json {patched.name}; write_verilog -noattr {netlist.name}"],
                            cwd=netlist.parent, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"yosys could not read the routed design {patched}: "
                           f"{(result.stderr or result.stdout).strip()}")
    return netlist


def _tie_unconnected(cells, family):
    """Tie every unconnected input pin that the cell's model has (:data:`UNCONNECTED_HIGH`);
    refuse a cell type the models lack."""
    ports = _model_ports(ROUTED_NETLIST_CELLS[family].text(cells_sim_path(family).parent))
    for name, cell in cells.items():
        if cell["type"] not in ports:
            raise ValueError(f"routed netlist: no {family} model of {name}'s {cell['type']}")
        high = UNCONNECTED_HIGH[family].get(cell["type"], ())
        for port, bits in cell["connections"].items():
            if (not bits and port in ports[cell["type"]]
                    and cell["port_directions"].get(port) == "input"):
                cell["connections"][port] = ["1" if high == "all" or port in high else "0"]


def _only(items, what):
    if len(items) != 1:
        raise ValueError(f"routed netlist: {len(items)} {what}, expected one")
    return items[0]


def _join_ice40_pll(module):
    cells = module["cells"]
    plls = [cell for cell in cells.values() if cell["type"] == "ICESTORM_PLL"]
    if not plls:
        return
    pll = _only(plls, "PLLs")
    pad = pll["attributes"]["BEL_PAD_INPUT"]
    pad_name = _only([name for name, cell in cells.items() if cell["type"] == "SB_IO"
                      and cell["attributes"].get("NEXTPNR_BEL") == pad], f"SB_IO at the PLL's pad {pad}")
    others = [port for port, bits in cells[pad_name]["connections"].items()
              if bits and port != "PACKAGE_PIN"]
    if others:
        raise ValueError(f"routed netlist: the PLL's pad {pad_name} also connects {others}")
    pin = cells.pop(pad_name)["connections"]["PACKAGE_PIN"]
    buffer = _only([cell for cell in cells.values() if cell["type"] == "SB_GB"
                    and not cell["connections"]["USER_SIGNAL_TO_GLOBAL_BUFFER"]],
                   "global buffers without an input")
    used = [bit for cell in cells.values() for bits in cell["connections"].values() for bit in bits]
    used += [bit for net in module["netnames"].values() for bit in net["bits"]]
    used += [bit for port in module.get("ports", {}).values() for bit in port["bits"]]
    clock = 1 + max(bit for bit in used if isinstance(bit, int))
    pll["connections"]["REFERENCECLK"] = pin
    pll["connections"]["PLLOUT_A_GLOBAL"] = [clock]
    pll["port_directions"]["PLLOUT_A_GLOBAL"] = "output"
    buffer["connections"]["USER_SIGNAL_TO_GLOBAL_BUFFER"] = [clock]
    module["netnames"]["pll_clock_joined"] = {"bits": [clock], "hide_name": 0, "attributes": {}}


#: The pin multiplexers the block models apply themselves (an inverted write clock).
_MODELLED_MUXES = {"DP16KD": ("CLKAMUX", "CLKBMUX")}


def _apply_ecp5_pin_muxes(cells):
    """Turn the ECP5 blocks' pin multiplexers into the netlist's constants (a pin at ``"0"``,
    ``"1"``, or ``"INV"`` unconnected, which reads 0); mark the slice halves that feed the wide
    multiplexer (``IS_Z1``)."""
    for name, cell in cells.items():
        if cell["type"] == "TRELLIS_COMB":
            if cell["connections"].get("FXA") or cell["connections"].get("FXB"):
                cell["parameters"]["IS_Z1"] = "1"
            continue
        if cell["type"] not in ("DP16KD", "MULT18X18D"):
            continue
        for param in [key for key in cell["parameters"] if key.endswith("MUX")]:
            port = param[:-len("MUX")]
            if port not in cell["port_directions"] or param in _MODELLED_MUXES.get(cell["type"], ()):
                continue
            value = str(cell["parameters"][param]).strip()
            connected = bool(cell["connections"].get(port))
            if value == port:
                pass                                     # the pin itself
            elif value in ("0", "1") and not connected:
                cell["connections"][port] = [value]
            elif value == "INV" and not connected:
                cell["connections"][port] = ["0"]
            else:
                raise ValueError(f"routed netlist: {name}'s {param} = {value!r} on a "
                                 f"{'connected' if connected else 'free'} pin is not modelled")
            del cell["parameters"][param]


def _model_ports(text):
    """``{module: its port names}`` of the Verilog ``text``'s module headers."""
    ports = {}
    for match in re.finditer(r"\bmodule\s+([\w$\\]+)\s*\((.*?)\);", text, re.S):
        header = re.sub(r"//[^\n]*|\(\*.*?\*\)|`\w+|\[[^\]]*\]|=\s*[^,)]*", " ", match.group(2))
        ports[match.group(1)] = set(re.findall(r"\b(?!input\b|output\b|inout\b|reg\b|wire\b)"
                                               r"[A-Za-z_]\w*\b", header))
    return ports
