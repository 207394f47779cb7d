"""Write the generated Verilog of the gateware, with the configuration it was built from.

``fpganet verilog -o build/verilog [--array 2x8]`` (``make verilog``).
"""

import re
import sys
from pathlib import Path

from amaranth.back import verilog

from fpganet.command_line import run_subcommand
from fpganet.config import AcceleratorConfig
from fpganet.files import staged_directory
from fpganet.hdl.systolic import SystolicArray

__all__ = ["DESIGNS", "convert", "export", "configure", "run"]

#: Top-level name -> factory taking an AcceleratorConfig.
DESIGNS = {
    "systolic_array": SystolicArray,
}


#: A combinational process yosys's Verilog backend writes without its time-zero trigger: a
#: part of a signal given only a constant, split off from the process that assigns its other
#: parts (a field set before a ``Switch`` whose cases set the other fields). ``always @*``
#: with nothing to read never runs in a simulator, so that part stays 0 there while the
#: netlist has the constant.
_NEVER_RUNS = re.compile(r"^[ \t]*always @\*\n[ \t]*([^\n=]+?) = \d+'[hbdo][0-9a-fA-FxzXZ_]+;$", re.M)


def convert(component, name):
    """Verilog text of ``component`` as top-level ``name``, for simulators as well as
    synthesis: a RuntimeError names the signal if the text has an ``always @*`` that never
    runs (:data:`_NEVER_RUNS`), since simulated it would differ from the hardware."""
    text = verilog.convert(component, name=name, emit_src=False)
    stuck = _NEVER_RUNS.findall(text)
    if stuck:
        raise RuntimeError(f"generated Verilog of {name} drives {', '.join(stuck)} from a constant in "
                           f"an always @* that never runs in simulation: assign the whole signal "
                           f"in the process, or that part outside it")
    return text


def export(config, directory):
    """Write ``<top>.v`` for every design and ``config.json``; return the paths written.

    The folder is built aside and renamed into place (:func:`fpganet.files.staged_directory`).
    """
    directory = Path(directory)
    names = []
    with staged_directory(directory, what="Verilog folder") as staging:
        for name, factory in DESIGNS.items():
            (staging / f"{name}.v").write_text(convert(factory(config), name))
            names.append(f"{name}.v")
        (staging / "config.json").write_text(config.to_json(indent=2) + "\n")
        names.append("config.json")
    return [directory / name for name in names]


def configure(parser):
    """Arguments of ``fpganet verilog``."""
    parser.add_argument("-o", "--output", default="build/verilog",
                        help="folder to write (default: %(default)s)")
    parser.add_argument("--array", default=None,
                        help="array size ROWSxCOLS (default: the default configuration)")


def run(args):
    """``fpganet verilog``; returns the exit status (errors propagate as FpganetError)."""
    config = AcceleratorConfig.parse_array(args.array) if args.array else AcceleratorConfig()
    for path in export(config, args.output):
        print(f"wrote {path}")
    return 0


def main(argv=None):
    """``python -m fpganet.hdl.export``: the same as ``fpganet verilog``."""
    return run_subcommand("verilog", configure, run, argv)


if __name__ == "__main__":
    sys.exit(main())
