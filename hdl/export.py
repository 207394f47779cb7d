"""Write the generated Verilog of the gateware, with the configuration it was built from.

``python -m fpganet.hdl.export -o build/verilog [--array 2x8]`` (``make verilog``).
"""

import argparse
import sys
from pathlib import Path

from amaranth.back import verilog

from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.hdl.systolic import SystolicArray

__all__ = ["DESIGNS", "export"]

#: Top-level name -> factory taking an AcceleratorConfig.
DESIGNS = {
    "systolic_array": SystolicArray,
}


def export(config, directory):
    """Write ``<top>.v`` for every design and ``config.json``; return the paths written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, factory in DESIGNS.items():
        path = directory / f"{name}.v"
        path.write_text(verilog.convert(factory(config), name=name, emit_src=False))
        written.append(path)
    config_path = directory / "config.json"
    config_path.write_text(config.to_json(indent=2) + "\n")
    written.append(config_path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fpganet.hdl.export", description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="build/verilog", help="folder to write (default: %(default)s)")
    parser.add_argument("--array", default=None, help="array size ROWSxCOLS (default: the default configuration)")
    args = parser.parse_args(argv)
    try:
        config = AcceleratorConfig.parse_array(args.array) if args.array else AcceleratorConfig()
    except ConfigError as error:
        print(f"fpganet: error: {error}", file=sys.stderr)
        return 2
    for path in export(config, args.output):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
