"""``make sim``: the main job.

For now (the accelerator around the array is the next milestone) it runs a
random int8 matrix product, larger than the array in every dimension, through
the generated Verilog of the systolic array on Verilator (``SIM=icarus`` for
Icarus), checks every output against numpy, and reports the cycles taken.
"""

import argparse
import json
import sys
import time

import numpy as np

from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.hdl.systolic import SystolicArray
from fpganet.sim import runner


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fpganet.sim.main", description=__doc__.splitlines()[0])
    parser.add_argument("--array", default=None, help="array size ROWSxCOLS (default: the default configuration)")
    parser.add_argument("--shape", default="20x150x100", help="M x K x N of the product (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    try:
        config = AcceleratorConfig.parse_array(args.array) if args.array else AcceleratorConfig()
        M, K, N = (int(part) for part in args.shape.lower().split("x"))
    except (ConfigError, ValueError) as error:
        print(f"fpganet: error: {error}", file=sys.stderr)
        return 2

    sim = runner.default_simulator()
    print(f"fpganet sim: {M}x{K} @ {K}x{N} int8 product on a {config.name} systolic array "
          f"({config.macs_per_cycle} MACs/cycle), generated Verilog on {sim}")
    start = time.perf_counter()
    build = runner.build(SystolicArray(config), "systolic_array", sim=sim)
    print(f"  build      {time.perf_counter() - start:6.1f} s  ({build.directory})")
    params = {"config": config.to_dict(), "seed": args.seed, "shape": [M, K, N]}
    start = time.perf_counter()
    result = build.run("fpganet.sim.tb_main", "main_product", {"FPGANET_TB": json.dumps(params)},
                       log_file=build.directory / "run" / "main.log")
    wall = time.perf_counter() - start
    report_path = build.directory / "run" / "main_report.json"
    if not result.ok or not report_path.exists():
        print(f"FAILED: the Verilog result differs from numpy or the simulation broke; "
              f"log: {build.directory / 'run' / 'main.log'}", file=sys.stderr)
        return 1
    report = json.loads(report_path.read_text())
    useful = M * K * N
    print(f"  simulate   {wall:6.1f} s  ({report['cycles']:,} cycles, simulated)")
    print(f"  check      all {M * N:,} int32 outputs equal numpy's (max |C| = {report['max_abs']:,})")
    print(f"  cycles     {report['cycles']:,} from first beat to last result row (simulated)")
    print(f"  MACs       {useful:,} useful; array utilization "
          f"{useful / (config.macs_per_cycle * report['cycles']):.1%} (simulated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
