"""FINN's TFC_1W1A on the binary network engine behind the iCEBreaker's UART host link: a
routed iCE40UP5K build (resources, Fmax) and the engine's cycles, as results rows of
``benchmarks/results/binary.json`` (written whole).

The cycles a vector are the engine's model, which its RTL equals by test
(tests/test_binary_engine.py, tests/test_binary_device.py); images/s compute-bound are
those cycles at the routed Fmax or the target clock, whichever is lower. Nothing here ran
on a board.

Usage::

    .venv/bin/python benchmarks/binary_tfc.py                 # builds (~10 min)
    .venv/bin/python benchmarks/binary_tfc.py --pe 8 --simd 32
"""

import argparse
import sys
from pathlib import Path

from fpganet.argtypes import positive_int
from fpganet.boards.binary import binary_core
from fpganet.boards.build import BOARDS, build
from fpganet.codegen.binary import fold_network, lower_binary_network
from fpganet.compiler import compile_model
from fpganet.datasets import qonnx_model
from fpganet.errors import FpganetError
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.results import make_row, write_rows

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pe", type=positive_int, default=8)
    parser.add_argument("--simd", type=positive_int, default=32)
    parser.add_argument("--build-dir", default=str(ROOT / "build/synth-binary"))
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/binary.json"))
    args = parser.parse_args(argv)
    board = BOARDS["icebreaker"]
    net = compile_model(qonnx_model("tfc-w1a1"))
    folded = fold_network(lower_binary_network(net), args.pe, args.simd)
    cycles = BinaryNetworkEngine(folded).cycles_per_vector()
    report = build(board, board.default_config, f"{args.build_dir}/icebreaker",
                   core=binary_core(folded))
    configuration = f"binary engine {args.pe}x{args.simd}"
    command = f"python benchmarks/binary_tfc.py --pe {args.pe} --simd {args.simd}"

    def row(metric, value, basis="routed"):
        return make_row("tfc-w1a1", "icebreaker", configuration, metric, value, basis, command)
    clock_mhz = min(report["fmax_mhz"], report["clock"]["target_mhz"])
    rows = [row("fmax_mhz", report["fmax_mhz"]), row("clock_mhz", report["clock"]["target_mhz"]),
            row("cycles_per_image", cycles, "model"),
            row("images_per_s_compute", clock_mhz * 1e6 / cycles, "model")]
    for name, metric in {"LC": "luts", "FF": "ffs", "EBR": "brams"}.items():
        if name in report["resources"]:
            rows.append(row(metric, report["resources"][name]["used"]))
    if not report["timing_met"]:
        print(f"timing not met ({report['fmax_mhz']:.1f} MHz)", file=sys.stderr)
    write_rows(args.output, rows)
    for r in rows:
        print(f"{r.metric:22s} {r.value:12,.1f} {r.unit} ({r.basis})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FpganetError as error:
        print(f"binary_tfc: error: {error}", file=sys.stderr)
        sys.exit(2)
