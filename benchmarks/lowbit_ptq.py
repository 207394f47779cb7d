"""Post-training quantization of float models to weights of 8, 6, 4, 3 and 2 bits: round to
nearest against GPTQ (``fpganet compile --weight-bits N --weight-rounding R``).

Each float model is compiled from its calibration images (activations int8, ``mse`` ranges as
always; only the weights' width and rounding change, :mod:`fpganet.quantize.rounding`) and
run on the golden model. Per network, width and rounding: top-1 against the labels, the
arg-max agreement with the float model (the source ONNX in onnxruntime), and the bytes its
weights take in the ULX3S's weight memory with ``packed_weights`` (layers of 4 bits or fewer
two weights to a byte; the compiler's plan, padded to whole weight words), on

- LeNet-5 (embedded): the MNIST calibration split (500 images), the 9,500 eval images;
- MLPerf Tiny ResNet-8 and VWW MobileNetV1-0.25 (``../shared/models/mlperf-tiny/``): their
  calibration sets (487 and 100 images), the shared 200 labelled test images.

Usage::

    .venv/bin/python benchmarks/lowbit_ptq.py                       # everything (~5 minutes)
    .venv/bin/python benchmarks/lowbit_ptq.py --networks lenet5 --bits 4 --rows ''

Writes the results rows ``benchmarks/results/lowbit_ptq.json`` (``--rows``; empty: none) and
``OUT/results.json`` (default ``build/lowbit-ptq``) with each compile's seconds.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from fpganet import datasets
from fpganet.boards.build import BOARDS
from fpganet.compiler import compile_model
from fpganet.estimate.layer_table import stored_weight_bytes
from fpganet.errors import FpganetWarning
from fpganet.files import write_text_atomic
from fpganet.golden import run_golden
from fpganet.qdq_export import run_source_model
from fpganet.quantize.rounding import ROUNDINGS
from fpganet.results import make_row, write_rows

ROWS = Path(__file__).resolve().parent / "results" / "lowbit_ptq.json"
NETWORKS = ("lenet5", "resnet8", "vww")
BITS = (8, 6, 4, 3, 2)
COMMAND = "python benchmarks/lowbit_ptq.py"
#: Mixed widths: the conv and dense layers (in the model's order) kept at 8 bits when the rest
#: have 4 (GPTQ), per network: ResNet-8's first two convolutions and its dense layer.
MIXED = {"resnet8": (0, 1, 9)}
#: Where the weight bytes are counted: the ULX3S default, its weights packed where they can be.
PACKED_BOARD = "ulx3s"
PACKED_CONFIG = BOARDS[PACKED_BOARD].default_config.replace(packed_weights=True)


def material(network):
    """``(model path, calibration x, test x, test labels)`` of ``network``."""
    if network == "lenet5":
        calib_x, _ = datasets.mnist("calib")
        x, y = datasets.mnist("eval")
        return datasets.LENET5_ONNX, calib_x, x, y
    calib_x, _ = datasets.mlperf_tiny(network, "calib")
    x, y = datasets.mlperf_tiny(network, "test")
    return datasets.mlperf_tiny_model(network), calib_x, x, y


def measure(network, bits_list=BITS, roundings=tuple(ROUNDINGS)):
    """{"float_top1", "images", "runs": {"w<bits> <rounding>": {top1, agreement, seconds,
    weight_bytes}}}, and ``"w4 mixed gptq"`` for a network of :data:`MIXED`."""
    model, calib_x, x, y = material(network)
    float_pred = run_source_model(model, x).reshape(len(x), -1).argmax(1)
    result = {"images": int(len(x)), "calibration_images": int(len(calib_x)),
              "float_top1": float(np.mean(float_pred == y)), "runs": {}}
    runs = [(bits, rounding, None) for bits in bits_list for rounding in roundings]
    if network in MIXED:
        runs.append((4, "gptq", MIXED[network]))
    names = None                        # the layers with weights, from the first compile
    for bits, rounding, wider in runs:
        if wider and names is None:         # no width run before it (--bits '')
            names = [layer.name for layer in compile_model(model, calib_x, program=False).conv_layers]
        overrides = {names[index]: 8 for index in wider} if wider else None
        start = time.perf_counter()
        with warnings.catch_warnings():     # the calibration notes, the same at every width
            warnings.simplefilter("ignore", FpganetWarning)
            net = compile_model(model, calib_x, weight_bits=bits, weight_rounding=rounding,
                                layer_weight_bits=overrides, program=False)
        names = names or [layer.name for layer in net.conv_layers]
        seconds = time.perf_counter() - start
        pred = run_golden(net, net.quantize_input(x)).reshape(len(x), -1).argmax(1)
        stored = stored_weight_bytes(net, PACKED_CONFIG)
        key = f"w{bits}{' mixed' if wider else ''} {rounding}"
        result["runs"][key] = run = {
            "bits": bits, "rounding": rounding, "top1": float(np.mean(pred == y)),
            "agreement": float(np.mean(pred == float_pred)), "seconds": round(seconds, 1),
            "weight_bytes": None if stored is None else int(sum(stored))}
        print(f"{network:8s} {key:14s} top-1 {100 * run['top1']:6.2f} %  "
              f"agreement with float {100 * run['agreement']:6.2f} %  weights "
              f"{run['weight_bytes']} bytes  compile {run['seconds']:.1f} s", flush=True)
    return result


def results_rows(results):
    rows = []
    for network, result in results.items():
        rows.append(make_row(network, "none", "float", "top1", 100 * result["float_top1"],
                             "model", COMMAND))
        for configuration, run in result["runs"].items():
            configuration = f"ptq {configuration}"
            rows.append(make_row(network, "none", configuration, "top1", 100 * run["top1"],
                                 "model", COMMAND))
            rows.append(make_row(network, "none", configuration, "agreement_top1",
                                 100 * run["agreement"], "model", COMMAND))
            if run.get("weight_bytes") is not None:
                rows.append(make_row(network, PACKED_BOARD, f"{configuration} packed",
                                     "weight_bytes", run["weight_bytes"], "model", COMMAND))
    return rows


def _list(kind):
    def parse(text):
        return [kind(item) for item in text.split(",") if item]
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=_list(str), default=list(NETWORKS),
                        help=f"comma-separated, of {', '.join(NETWORKS)} (default all)")
    parser.add_argument("--bits", type=_list(int), default=list(BITS),
                        help=f"weight widths (default {','.join(map(str, BITS))})")
    parser.add_argument("-o", "--output", default="build/lowbit-ptq", help="output directory")
    parser.add_argument("--rows", default=str(ROWS),
                        help="results rows to write ('' for none; default "
                             "benchmarks/results/lowbit_ptq.json)")
    args = parser.parse_args(argv)
    unknown = set(args.networks) - set(NETWORKS)
    if unknown:
        parser.error(f"unknown network(s) {', '.join(sorted(unknown))}")
    results = {network: measure(network, args.bits) for network in args.networks}
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
    if args.rows:
        write_rows(args.rows, results_rows(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
