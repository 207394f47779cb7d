"""MLPerf Tiny ResNet-8 and VWW MobileNetV1-0.25 through fpganet's golden model: accuracies.

The test material lives outside the repository (``../shared/models/mlperf-tiny/``
beside the checkout, read-only; see its SOURCE.md). This script converts its
uint8 NHWC images into the float32 NCHW inputs each float model expects
(ResNet-8: raw pixels 0..255; VWW: pixel / 255; the int8 TFLite models take them NHWC,
``benchmarks/tflite_mlperf.py``), writes them as ``x``/``y``
``.npz`` files that ``fpganet compile --calib`` and ``fpganet run --inputs`` take,
and measures, per calibration method: float top-1 (onnxruntime on the source
model), fpganet golden int8 top-1, their arg-max agreement, and the golden model
against onnxruntime layer by layer.

Usage::

    .venv/bin/python benchmarks/mlperf_tiny.py                       # both models, mse
    .venv/bin/python benchmarks/mlperf_tiny.py --methods mse,minmax,percentile,kl
    .venv/bin/python benchmarks/mlperf_tiny.py --inputs-only -o build/mlperf-tiny

Writes ``OUT/<model>_calib.npz``, ``OUT/<model>_test.npz`` and ``OUT/results.json``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from fpganet.compiler import compile_model
from fpganet.datasets import MLPERF_TINY as MODELS
from fpganet.datasets import mlperf_tiny as load_set         # (model, split, shared): x, y
from fpganet.datasets import mlperf_tiny_dir
from fpganet.datasets import mlperf_tiny_model as model_path  # (model, shared): the float ONNX
from fpganet.files import write_text_atomic
from fpganet.golden import run_golden
from fpganet.qdq_export import compare_layers, run_source_model

#: ``../shared`` beside the checkout, where the project's shared test material lives.
SHARED = mlperf_tiny_dir()


def write_inputs(model, out_dir, shared=SHARED):
    """Write ``<model>_calib.npz`` (``x``) and ``<model>_test.npz`` (``x``, ``y``) into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    calib_x, _ = load_set(model, "calib", shared)
    test_x, test_y = load_set(model, "test", shared)
    calib, test = out_dir / f"{model}_calib.npz", out_dir / f"{model}_test.npz"
    np.savez(calib, x=calib_x)
    np.savez(test, x=test_x, y=test_y)
    return calib, test


def measure(model, method="mse", shared=SHARED, layers=True):
    """Float and golden int8 top-1, their agreement, and the per-layer onnxruntime check.

    Returns
    -------
    dict
    """
    calib_x, _ = load_set(model, "calib", shared)
    x, y = load_set(model, "test", shared)
    start = time.perf_counter()
    net = compile_model(model_path(model, shared), calib_x, method=method)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    q_in = net.quantize_input(x)
    q_out, outputs = run_golden(net, q_in, layer_outputs=True)
    golden_s = time.perf_counter() - start
    golden = q_out.reshape(len(x), -1).argmax(1)
    float_pred = run_source_model(model_path(model, shared), x).reshape(len(x), -1).argmax(1)
    result = {
        "model": model, "method": method, "images": int(len(x)),
        "calibration_images": int(len(calib_x)),
        "float_top1": float(np.mean(float_pred == y)),
        "golden_top1": float(np.mean(golden == y)),
        "agreement": float(np.mean(float_pred == golden)),
        "compile_s": round(compile_s, 2), "golden_s": round(golden_s, 2),
    }
    if layers:
        rows = compare_layers(net, q_in, outputs)
        result["layers"] = [{"name": r.name, "type": r.type, "equal": r.equal_fraction,
                             "max_abs_diff": r.max_abs_diff} for r in rows]
        result["layers_min_equal"] = min(r.equal_fraction for r in rows)
        result["layers_max_abs_diff"] = max(r.max_abs_diff for r in rows)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="build/mlperf-tiny", help="output folder")
    parser.add_argument("--models", default="resnet8,vww")
    parser.add_argument("--methods", default="mse", help="comma-separated calibration methods")
    parser.add_argument("--inputs-only", action="store_true", help="only write the .npz files")
    parser.add_argument("--shared", default=str(SHARED), help="the mlperf-tiny test material")
    args = parser.parse_args(argv)
    if not Path(args.shared).is_dir():
        print(f"no test material at {args.shared}", file=sys.stderr)
        return 2
    results = []
    for model in args.models.split(","):
        calib, test = write_inputs(model, args.output, args.shared)
        print(f"wrote {calib} and {test}")
        if args.inputs_only:
            continue
        for method in args.methods.split(","):
            result = measure(model, method, args.shared)
            results.append(result)
            print(f"{model:8s} {method:16s} float {100 * result['float_top1']:5.1f} %  golden int8 "
                  f"{100 * result['golden_top1']:5.1f} %  agreement {100 * result['agreement']:5.1f} %"
                  f"  layers vs onnxruntime: >= {100 * result['layers_min_equal']:.2f} % equal, "
                  f"max {result['layers_max_abs_diff']} LSB  ({result['compile_s']} s compile, "
                  f"{result['golden_s']} s golden)", flush=True)
    if results:
        path = Path(args.output) / "results.json"
        write_text_atomic(path, json.dumps(results, indent=1) + "\n")   # built aside, renamed into place
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
