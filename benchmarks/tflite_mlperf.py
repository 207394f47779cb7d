"""MLPerf Tiny's int8 TFLite models compiled by fpganet, against LiteRT's reference kernels.

``fpganet compile MODEL.tflite`` keeps the model's own scales, zero points, int8 weights
and int32 biases (``src/fpganet/model/tflite_import.py``, ``docs/guide/tflite.md``). This script
compiles the two MLPerf Tiny reference int8 models (ResNet-8 and VWW MobileNetV1-0.25,
from ``../shared/models/mlperf-tiny/``, see its SOURCE.md), runs fpganet's golden model and
LiteRT (``ai-edge-litert``, ``OpResolverType.BUILTIN_REF``: the reference kernels, which
define TFLite's numerics) on the same int8 inputs of the 200 test images, and measures:
top-1 agreement, the share of int8 logits exactly equal, their largest difference, top-1
accuracy of both against the labels, and per layer, each layer fed LiteRT's own int8 inputs
(so a difference is that layer's, not one carried from earlier): the share of outputs
equal and the largest difference.

Usage::

    .venv/bin/python benchmarks/tflite_mlperf.py                # both models
    .venv/bin/python benchmarks/tflite_mlperf.py --models resnet8 --limit 50

Writes ``OUT/results.json`` (default ``build/tflite-mlperf``).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from fpganet.argtypes import positive_int
from fpganet.compiler import compile_model
from fpganet.config import DEFAULT_CONFIG
from fpganet.datasets import mlperf_tiny, mlperf_tiny_dir
from fpganet.errors import FpganetError
from fpganet.files import write_text_atomic
from fpganet.golden import run_golden, run_layer
from fpganet.isa import REQUANT_MODES
from fpganet.qnet import NETWORK_INPUT, quantize_input

#: model key -> the int8 TFLite file in the shared folder.
TFLITE = {"resnet8": "resnet8_int8.tflite", "vww": "vww_mobilenetv1_025_int8.tflite"}


def tflite_path(model, shared=None):
    return Path(shared or mlperf_tiny_dir()) / TFLITE[model]


def litert(path, preserve=False, reference=True):
    """A LiteRT interpreter on the reference kernels (``reference=False``: the optimized ones)."""
    # Imported here, not at the top: ai-edge-litert is an optional dependency (the dev extra).
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_REF if reference else OpResolverType.BUILTIN
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=kind,
                              experimental_preserve_all_tensors=preserve)
    interpreter.allocate_tensors()
    return interpreter


def litert_input(net, x):
    """The int8 inputs LiteRT takes for the float inputs ``x`` fpganet takes (both in the
    model's own layout, NHWC): the host's quantization, without the change to CHW."""
    return quantize_input(x, net.input_scale, net.input_zp)


def run_litert(interpreter, q, tensors=()):
    """LiteRT int8 outputs of int8 inputs in the model's layout (:func:`litert_input`), one
    image per invoke.

    Returns
    -------
    numpy.ndarray
        int8 [N, ...] of the model's output tensor (the SOFTMAX input when the last op is a
        SOFTMAX: the logits, what fpganet outputs).
    dict
        tensor name -> int8 [N, ...] (NHWC as LiteRT holds them) for ``tensors``.
    """
    details = {d["name"]: d["index"] for d in interpreter.get_tensor_details()}
    input_index = interpreter.get_input_details()[0]["index"]
    output_index = logits_index(interpreter)
    outputs, kept = [], {name: [] for name in tensors}
    for image in q:
        interpreter.set_tensor(input_index, image[None].astype(np.int8))
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(output_index)[0].copy())
        for name in tensors:
            kept[name].append(interpreter.get_tensor(details[name])[0].copy())
    return np.stack(outputs), {name: np.stack(v) for name, v in kept.items()}


def logits_index(interpreter):
    """The tensor the final SOFTMAX reads (fpganet drops it), else the model's output."""
    output = interpreter.get_output_details()[0]["index"]
    for op in interpreter._get_ops_details():
        if op["op_name"] == "SOFTMAX" and list(op["outputs"]) == [output]:
            return int(op["inputs"][0])
    return output


def nchw(a):
    """LiteRT's NHWC (or [N, K]) int8 tensor as fpganet's [N, C, H, W] (or [N, K, 1, 1])."""
    return a.transpose(0, 3, 1, 2) if a.ndim == 4 else a.reshape(*a.shape, 1, 1)


def compare_layers(net, interpreter, x):
    """Each fpganet layer fed LiteRT's int8 inputs, against LiteRT's int8 output."""
    names = {d["name"] for d in interpreter.get_tensor_details()}
    wanted = [layer.name for layer in net.layers if layer.name in names]
    _, tensors = run_litert(interpreter, litert_input(net, x), wanted)
    q_in = net.quantize_input(x)
    source_of = {NETWORK_INPUT: q_in}
    rows = []
    for index, layer in enumerate(net.layers):
        if layer.name not in tensors:
            rows.append({"index": index, "type": layer.type, "name": layer.name,
                         "compared": False})
            continue
        source_of[index] = nchw(tensors[layer.name]).reshape(len(q_in), *layer.out_shape)
    for index, layer in enumerate(net.layers):
        if index not in source_of or any(s not in source_of for s in net.layer_inputs(index)):
            continue
        inputs = [source_of[s].reshape(len(q_in), *net.layers[s].out_shape) if s >= 0
                  else source_of[s] for s in net.layer_inputs(index)]
        mine = run_layer(layer, *inputs, mode=net.config.requant_mode).astype(np.int64)
        theirs = source_of[index].astype(np.int64)
        diff = np.abs(mine - theirs)
        rows.append({"index": index, "type": layer.type, "name": layer.name, "compared": True,
                     "equal": float(np.mean(diff == 0)), "max_abs_diff": int(diff.max()),
                     "off_by_one": float(np.mean(diff == 1))})
    return sorted(rows, key=lambda row: row["index"])


def measure(model, limit=None, shared=None, layers=True, mode="fpganet"):
    path = tflite_path(model, shared)
    x, y = mlperf_tiny(model, "test", shared, layout="nhwc")
    pixels = np.load(Path(shared or mlperf_tiny_dir())
                     / {"resnet8": "cifar10_ic01_200.npz", "vww": "vww01_200.npz"}[model])["x"]
    if limit:
        x, y, pixels = x[:limit], y[:limit], pixels[:limit]
    start = time.time()
    net = compile_model(path, config=DEFAULT_CONFIG.replace(requant_mode=mode))
    compile_s = time.time() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q_in = net.quantize_input(x)
    expected = (pixels.astype(np.int16) - 128).astype(np.int8).transpose(0, 3, 1, 2)
    input_exact = bool(np.array_equal(q_in, expected))
    start = time.time()
    golden = run_golden(net, q_in).reshape(len(x), -1)
    golden_s = time.time() - start
    interpreter = litert(path)
    start = time.time()
    reference, _ = run_litert(interpreter, litert_input(net, x))
    reference = reference.reshape(len(x), -1)
    litert_s = time.time() - start
    optimized, _ = run_litert(litert(path, reference=False), litert_input(net, x))
    optimized = optimized.reshape(len(x), -1)
    diff = np.abs(golden.astype(np.int64) - reference.astype(np.int64))
    diff_opt = np.abs(optimized.astype(np.int64) - reference.astype(np.int64))
    g_top, r_top = golden.argmax(1), reference.argmax(1)
    result = {
        "model": model, "tflite": str(path), "images": int(len(x)), "requant_mode": mode,
        "input_equals_pixel_minus_128": input_exact,
        "input": {"scale": net.input_scale, "zero_point": net.input_zp},
        "top1_agreement": float(np.mean(g_top == r_top)),
        "logits_equal": float(np.mean(diff == 0)),
        "logits_max_abs_diff": int(diff.max()),
        "logits_diff_histogram": {str(d): int(np.sum(diff == d)) for d in np.unique(diff)},
        # For scale: LiteRT's own optimized kernels (OpResolverType.BUILTIN) against its reference.
        "litert_optimized_vs_ref": {"top1_agreement": float(np.mean(optimized.argmax(1) == r_top)),
                                    "logits_equal": float(np.mean(diff_opt == 0)),
                                    "logits_max_abs_diff": int(diff_opt.max())},
        "accuracy_fpganet": float(np.mean(g_top == y)),
        "accuracy_litert_ref": float(np.mean(r_top == y)),
        "layers": len(net.layers), "macs": int(net.macs),
        "seconds": {"compile": compile_s, "golden": golden_s, "litert_ref": litert_s},
    }
    if layers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result["per_layer"] = compare_layers(net, litert(path, preserve=True), x)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])

    parser.add_argument("--models", default="resnet8,vww", help=f"of {', '.join(TFLITE)}")
    parser.add_argument("--limit", type=positive_int, help="only the first N test images")
    parser.add_argument("--no-layers", action="store_true", help="skip the per-layer comparison")
    parser.add_argument("--requant-mode", default="fpganet", choices=REQUANT_MODES,
                        help="the requantization the network is compiled for (default fpganet)")
    parser.add_argument("-o", "--output", default="build/tflite-mlperf")
    args = parser.parse_args(argv)
    models = args.models.split(",")
    unknown = [model for model in models if model not in TFLITE]
    if unknown:
        parser.error(f"--models: unknown model {unknown[0]!r} (known: {', '.join(TFLITE)})")
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        results = [measure(model, args.limit, layers=not args.no_layers, mode=args.requant_mode)
                   for model in models]
    except (FpganetError, OSError) as error:     # the shared material missing, an unwritable -o
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    for r in results:
        model = r["model"]
        print(f"{model}: {r['images']} images, input == pixel - 128: "
              f"{r['input_equals_pixel_minus_128']}; top-1 agreement with LiteRT BUILTIN_REF "
              f"{100 * r['top1_agreement']:.1f} %, logits equal {100 * r['logits_equal']:.1f} %, "
              f"max |diff| {r['logits_max_abs_diff']} LSB; accuracy fpganet "
              f"{100 * r['accuracy_fpganet']:.1f} %, LiteRT {100 * r['accuracy_litert_ref']:.1f} %")
        o = r["litert_optimized_vs_ref"]
        print(f"  (LiteRT optimized vs reference kernels: top-1 agreement "
              f"{100 * o['top1_agreement']:.1f} %, logits equal {100 * o['logits_equal']:.1f} %, "
              f"max |diff| {o['logits_max_abs_diff']} LSB)")
        for row in r.get("per_layer", []):
            if row["compared"]:
                print(f"  {row['index']:2d} {row['type']:8s} {100 * row['equal']:8.3f} % equal, "
                      f"{100 * row['off_by_one']:7.3f} % off by 1, max |diff| "
                      f"{row['max_abs_diff']}  {row['name'][:60]}")
    write_text_atomic(out / "results.json", json.dumps({"results": results}, indent=1) + "\n")
    print(f"wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
