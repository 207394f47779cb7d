"""FINN's CNV-W1A1 (BNN-PYNQ's parameters, ``cnv_bnn_pynq.py``) with its eight binary layers
on the binary network engine: their convolutions walked over bit-packed maps, the max pools
fused, the dense layers after; as rows of ``benchmarks/results/cnv_engine.json``.

The engine's input is the first layer's output bits, which the golden model computes here:
the first layer (8-bit pixels) runs on the int8 array, and the two are not yet one
accelerator. So the rows are of the binary layers alone (``layers 2-9``), of the first layer
on the int8 array (its cycles from the array's cycle model), and of the two one after the
other, which is what one accelerator holding both would at best do (modelled, not built).

For each fold ``PExSIMD``: the engine's Verilog (Verilator, cocotb) on ``--rtl-images``
CIFAR-10 test images of the shared material; each image's logits (the last layer's counts
through its requantization) must equal the golden model's, and the cycles between images the
engine's cycle model. With ``--synth DIR`` each fold's engine is built for the ULX3S behind
its UART link, weights in the bitstream (:func:`build_engine`: ``DIR/cnv-w1a1-ulx3s-PExSIMD``,
about half an hour each), or with ``--report FOLD=REPORT.json`` such a build's report is
read: the routed resources and Fmax, and images/s at the Fmax or the target clock, whichever
is lower; without either, images/s at the ULX3S's 100 MHz target (modelled).
Nothing here ran on a board.

Usage::

    .venv/bin/python benchmarks/cnv_engine.py --folds 64x64,32x64 --rtl-images 20
    .venv/bin/python benchmarks/cnv_engine.py --folds 64x64 --synth build/synth-cnv-engine
"""

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from fpganet.argtypes import positive_int
from fpganet.boards.binary import binary_core
from fpganet.boards.build import BOARDS, build
from fpganet.boards.ulx3s import BINARY_WEIGHTS_CONFIG
from fpganet.codegen.binary import codes_of_counts, fold_network, lower_binary_network
from fpganet.codegen.fuzz_engine import expected_totals
from fpganet.compiler import compile_model
from fpganet.datasets import mlperf_tiny
from fpganet.estimate.workload import simulated_cycles
from fpganet.golden import run_golden
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.results import ResultsError, check_rows, make_row, write_rows
from fpganet.sim.fuzz_engine import run_engine_verilog

ROOT = Path(__file__).resolve().parents[1]
NETWORK = "cnv-w1a1"
BOARD = "ulx3s"
#: The ULX3S's target clock (boards/ulx3s.py).
TARGET_MHZ = 100.0
_spec = importlib.util.spec_from_file_location("cnv_bnn_pynq",
                                               ROOT / "benchmarks" / "cnv_bnn_pynq.py")
cnv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cnv)


def _fold(text):
    try:
        pe, simd = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not PExSIMD") from None
    return pe, simd


def _folds(text):
    return [_fold(item) for item in text.split(",")]


def _report(text):
    fold, _, path = text.partition("=")
    if not path:
        raise argparse.ArgumentTypeError(f"'{text}' is not PExSIMD=REPORT.json")
    try:
        report = json.loads(Path(path).read_text())
        report["fmax_mhz"], report["clock"]["target_mhz"], report["resources"]
    except (OSError, ValueError, KeyError, TypeError):
        raise argparse.ArgumentTypeError(f"'{path}' is not a build's report.json") from None
    return _fold(fold), report


def network(scratch):
    """CNV-W1A1 compiled for the ULX3S's ``binary-weights`` variant, and its binary layers
    from the second on."""
    path = Path(scratch) / "cnv_w1a1.onnx"
    onnx.save(cnv.cnv_qonnx(cnv.load_parameters()), path)
    net = compile_model(path, config=BINARY_WEIGHTS_CONFIG)
    return net, lower_binary_network(net, start=1)


def build_engine(folded, directory, seed=1):
    """Build the engine of ``folded`` for the ULX3S behind the UART link (the core ``fpganet
    synth`` builds for a folder compiled with ``--engine binary``) into
    ``directory/cnv-w1a1-ulx3s-PExSIMD``; its report's path."""
    board = BOARDS[BOARD]
    output = Path(directory) / f"{NETWORK}-{BOARD}-{folded.pe}x{folded.simd}"
    build(board, board.default_config, output, seed=seed, timeout_s=3 * 3600,
          core=binary_core(folded))
    return output / "report.json"


def engine_rtl(folded, layers, bits, logits):
    """The engine's Verilog on the first layer's output bits [N, 64, 30, 30]: whether every
    image's logits equal ``logits`` and the cycles between images the model's (the
    testbench asserts both), and those cycles."""
    totals = expected_totals(folded, layers, bits)
    assert np.array_equal(codes_of_counts(layers[-1], totals[:, :layers[-1].m]), logits)
    failed = run_engine_verilog(folded, bits, totals, f"cnv_engine_{folded.pe}x{folded.simd}")
    return not failed, BinaryNetworkEngine(folded).cycles_per_vector()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=_folds, default=[(64, 64)], metavar="PExSIMD,...")
    parser.add_argument("--rtl-images", type=positive_int, default=20, metavar="N")
    parser.add_argument("--report", type=_report, action="append", default=[],
                        metavar="PExSIMD=REPORT.json")
    parser.add_argument("--synth", metavar="DIR",
                        help="build each fold's engine for the ULX3S into DIR first")
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/cnv_engine.json"))
    args = parser.parse_args(argv)
    command = "benchmarks/cnv_engine.py " + " ".join(argv if argv is not None else sys.argv[1:])
    reports = dict(args.report)
    # The rows already there are kept; a file that holds anything else is not overwritten.
    path, kept = Path(args.output), []
    if path.exists():
        try:
            kept = check_rows(json.loads(path.read_text()), str(path))
        except (OSError, ValueError, ResultsError):
            parser.error(f"'{path}' exists and is not a results file; not overwriting it")
    with tempfile.TemporaryDirectory(prefix="cnv-engine-") as scratch:
        net, layers = network(scratch)
    x, _ = mlperf_tiny("resnet8", "test", layout="nchw")
    q = net.quantize_input((x[:args.rtl_images] / 255).astype(np.float32))
    logits, outputs = run_golden(net, q, layer_outputs=True)
    bits = (outputs[0] - layers[0].in_lo).astype(np.uint8)
    logits = logits.reshape(len(q), -1)

    rows = []

    def row(configuration, metric, value, basis):
        rows.append(make_row(NETWORK, BOARD, configuration, metric, value, basis, command))

    first = simulated_cycles(net, BINARY_WEIGHTS_CONFIG)["per_layer"][0]
    config = BINARY_WEIGHTS_CONFIG
    array = f"layer 1 on the int8 array {config.rows}x{config.cols} (binary-weights)"
    row(array, "cycles_per_image", first, "model")
    for pe, simd in args.folds:
        folded = fold_network(layers, pe, simd)
        configuration = f"binary engine {pe}x{simd}, layers 2-9"
        ok, cycles = engine_rtl(folded, layers, bits, logits)
        print(f"{configuration}: {cycles:,} cycles an image, RTL "
              f"{'equal to' if ok else 'DIFFERENT from'} golden on {len(q)} images", flush=True)
        if not ok:
            raise SystemExit(f"{configuration}: the RTL differs from the golden model")
        row(configuration, "cycles_per_image", cycles, "rtl")
        row(configuration, "rtl_bit_exact", 100.0, "rtl")
        row(configuration, "rtl_cycles_exact", 100.0, "rtl")
        # The clock the build targets, and the one images/s are at: the routed Fmax where
        # the build misses its target.
        target, mhz, basis = TARGET_MHZ, TARGET_MHZ, "model"
        if args.synth:
            reports[(pe, simd)] = json.loads(build_engine(folded, args.synth).read_text())
        report = reports.get((pe, simd))
        if report is not None:
            target, basis = report["clock"]["target_mhz"], "routed"
            mhz = min(target, report["fmax_mhz"])
            row(configuration, "fmax_mhz", report["fmax_mhz"], "routed")
            row(configuration, "seed", report["seed"], "routed")
            row(configuration, "build_s", report["runtime_s"], "routed")
            for name, metric in {"LUT4": "luts", "FF": "ffs", "EBR": "brams"}.items():
                used = report["resources"].get(name, {}).get("used")
                if used:
                    row(configuration, metric, used, "routed")
        row(configuration, "clock_mhz", target, basis)
        row(configuration, "images_per_s_compute", mhz * 1e6 / cycles, basis)
        both = (f"layer 1 on the int8 array, then layers 2-9 on the binary engine {pe}x{simd} "
                f"(not built as one)")
        row(both, "cycles_per_image", first + cycles, "model")
        row(both, "clock_mhz", TARGET_MHZ, "model")
        row(both, "images_per_s_compute", TARGET_MHZ * 1e6 / (first + cycles), "model")
    keys = {r.key for r in rows}
    write_rows(path, [r for r in kept if r.key not in keys] + rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
