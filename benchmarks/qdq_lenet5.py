"""Pre-quantized QDQ LeNet-5: fpganet's integer network against onnxruntime on the same model.

onnxruntime's ``quantize_static`` (QDQ format) quantizes the embedded LeNet-5 on the MNIST
calibration split, with per-tensor and per-channel weight scales and uint8 and int8
activations. Each QDQ model is compiled without calibration (its own scales, zero
points and int8 weights) and run on fpganet's golden model; onnxruntime runs the same QDQ
model. Measured on the MNIST eval split (9,500 images): arg-max agreement, the share of
images whose int8 logits are all equal, per-layer element equality, top-1 of both.

Usage::

    .venv/bin/python benchmarks/qdq_lenet5.py [--limit N] [-o build/qdq]
    .venv/bin/python benchmarks/mlperf_tiny.py --inputs-only -o build/mlperf-tiny
    .venv/bin/python benchmarks/qdq_lenet5.py --mlperf-tiny build/mlperf-tiny   # also those
    .venv/bin/python benchmarks/qdq_lenet5.py --requant-mode tflite   # in that mode (no rows)

Writes ``OUT/lenet5_qdq_<weights>_<activations>.onnx`` and ``OUT/results.json``; on the whole
eval split (no ``--limit``) also the results rows ``benchmarks/results/qdq.json`` (``--rows``):
fpganet's top-1 and its agreement with onnxruntime, per QDQ model.
"""

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from fpganet import datasets
from fpganet.compiler import compile_model
from fpganet.config import DEFAULT_CONFIG
from fpganet.golden import run_golden, run_layer
from fpganet.isa import REQUANT_MODES
from fpganet.model import load_onnx
from fpganet.model.qdq import onnxruntime_qdq
from fpganet.qnet import QReshape
from fpganet.results import make_row, write_rows

#: The embedded LeNet-5's ONNX fixes the batch size at 10 (its input and a Reshape constant).
ORT_BATCH = 10

ROWS = Path(__file__).resolve().parent / "results" / "qdq.json"


def onnxruntime_codes(path, x, tensors, batch=ORT_BATCH):
    """Run a QDQ model in onnxruntime; int8 codes of each tensor's QuantizeLinear.

    Parameters
    ----------
    path : str or os.PathLike
    x : numpy.ndarray
        float32 inputs, a multiple of ``batch`` of them.
    tensors : dict
        Layer index -> the ONNX tensor a QuantizeLinear quantizes.
    batch : int
        Inputs per run (the model's fixed batch size, if it has one).

    Returns
    -------
    dict
        Layer index -> int8 [N, ...] (uint8 codes shifted by 128).
    """
    # Imported here, not at the top: onnx is slow to import.
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    q_of = {node.input[0]: node.output[0] for node in model.graph.node
            if node.op_type == "QuantizeLinear"}
    names = {index: q_of[tensor] for index, tensor in tensors.items()}
    existing = {output.name for output in model.graph.output}
    for name in names.values():
        if name not in existing:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    order = list(names)
    parts = {index: [] for index in order}
    for start in range(0, len(x), batch):
        results = session.run([names[index] for index in order],
                              {input_name: x[start:start + batch]})
        for index, value in zip(order, results):
            value = value.astype(np.int16) - (128 if value.dtype == np.uint8 else 0)
            parts[index].append(value.astype(np.int8))
    return {index: np.concatenate(parts[index]) for index in order}


def compare_qdq(net, path, x, batch=ORT_BATCH):
    """fpganet's integer network ``net`` (compiled from the QDQ model at ``path``) against
    onnxruntime running that model, layer by layer.

    Returns
    -------
    dict
        ``golden`` and ``onnxruntime``: int8 outputs [N, ...]; ``end_to_end``: layer name ->
        share of its codes equal in the whole network; ``isolated``: layer name -> (share
        equal, largest difference) with the layer fed onnxruntime's codes of its input.
    """
    tensors = load_onnx(path).quantization["tensors"]
    golden, layers = run_golden(net, net.quantize_input(x), layer_outputs=True)
    ort = onnxruntime_codes(path, x, tensors, batch)
    end_to_end, isolated = {}, {}
    for index, codes in sorted(ort.items()):
        if index < 0:
            same = np.array_equal(codes.reshape(-1), net.quantize_input(x).reshape(-1))
            end_to_end["input"] = 1.0 if same else 0.0
            isolated["input"] = (end_to_end["input"], 0 if same else None)
            continue
        layer = net.layers[index]
        end_to_end[layer.name] = float(np.mean(layers[index].reshape(codes.shape) == codes))
        # A Reshape's codes are its input's (a Flatten's Q/DQ quantizes the pooled map).
        sources = [net.layer_inputs(source)[0] if source >= 0 and source not in ort
                   and isinstance(net.layers[source], QReshape) else source
                   for source in net.layer_inputs(index)]
        if all(source in ort for source in sources):
            shapes = [net.input_chw if source < 0 else tuple(net.layers[source].out_shape)
                      for source in net.layer_inputs(index)]
            fed = [ort[source].reshape(len(x), *shape) for source, shape in zip(sources, shapes)]
            alone = run_layer(layer, *fed, mode=net.config.requant_mode).reshape(codes.shape).astype(np.int16)
            isolated[layer.name] = (float(np.mean(alone == codes)),
                                    int(np.max(np.abs(alone - codes))))
    last = len(net.layers) - 1
    return {"golden": golden, "onnxruntime": ort[last].reshape(golden.shape),
            "end_to_end": end_to_end, "isolated": isolated}


def measure(path, x, y, config=None):
    """Compile the QDQ model at ``path`` without calibration (for ``config``, default the
    default configuration) and compare it with onnxruntime."""
    net = compile_model(path, program=False, config=config)
    result = compare_qdq(net, path, x)
    golden, ort_logits = result["golden"], result["onnxruntime"]
    golden_top = golden.argmax(axis=1)
    ort_top = ort_logits.argmax(axis=1)
    return {
        "images": int(len(x)),
        "argmax_agreement": float(np.mean(golden_top == ort_top)),
        "exact_outputs": float(np.mean(np.all(golden == ort_logits, axis=1))),
        "output_codes_equal": float(np.mean(golden == ort_logits)),
        "max_output_code_difference": int(np.max(np.abs(golden.astype(int) - ort_logits))),
        "fpganet_top1": float(np.mean(golden_top == y)),
        "onnxruntime_top1": float(np.mean(ort_top == y)),
        "per_layer_codes_equal": result["end_to_end"],
        "isolated_layer_codes_equal": {name: share for name, (share, _) in
                                       result["isolated"].items()},
        "isolated_max_difference": {name: diff for name, (_, diff) in
                                    result["isolated"].items()},
    }


def mlperf_tiny(inputs, out):
    """ResNet-8 and VWW MobileNetV1 through ``quantize_static`` (QDQ) and fpganet, against
    onnxruntime on their 200 test images (calibration: the shared calibration sets)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import mlperf_tiny as shared
    from fpganet.compiler import compile_model
    from fpganet.model.qdq import onnxruntime_qdq

    rows = {}
    for model in shared.MODELS:
        calib_x = np.load(inputs / f"{model}_calib.npz")["x"]
        with np.load(inputs / f"{model}_test.npz") as data:
            x, y = data["x"], data["y"]
        for per_channel in (False, True):
            for activations in ("uint8", "int8"):
                key = f"{model}_{'per_channel' if per_channel else 'per_tensor'}_{activations}"
                path = out / f"{key}.onnx"
                onnxruntime_qdq(shared.model_path(model), path, calib_x, per_channel=per_channel,
                                activation_type=activations)
                net = compile_model(path, program=False)
                result = compare_qdq(net, path, x, batch=1)
                ours = result["golden"].reshape(len(x), -1)
                theirs = result["onnxruntime"].reshape(len(x), -1)
                rows[key] = row = {
                    "images": int(len(x)),
                    "argmax_agreement": float(np.mean(ours.argmax(1) == theirs.argmax(1))),
                    "exact_outputs": float(np.mean(np.all(ours == theirs, axis=1))),
                    "fpganet_top1": float(np.mean(ours.argmax(1) == y)),
                    "onnxruntime_top1": float(np.mean(theirs.argmax(1) == y)),
                    "isolated_min_share": min(share for share, _ in result["isolated"].values()),
                    "isolated_max_difference": max(d for _, d in result["isolated"].values()),
                }
                print(f"{key:30s} arg-max {100 * row['argmax_agreement']:.1f} %  exact outputs "
                      f"{100 * row['exact_outputs']:.1f} %  top-1 fpganet "
                      f"{100 * row['fpganet_top1']:.1f} % onnxruntime "
                      f"{100 * row['onnxruntime_top1']:.1f} %  layers alone >= "
                      f"{100 * row['isolated_min_share']:.3f} % equal, max "
                      f"{row['isolated_max_difference']} LSB")
    return rows


def results_rows(models, command):
    """Results rows of the QDQ LeNet-5 models (``{key: measure()}``): network ``lenet5-qdq``,
    configuration the weights and activations (``per-tensor uint8``), on the golden model."""
    rows = []
    for key, row in models.items():
        configuration = key.replace("per_", "per-").replace("_", " ")
        for metric, value in (("top1", row["fpganet_top1"]),
                              ("agreement_top1", row["argmax_agreement"]),
                              ("agreement_outputs", row["output_codes_equal"])):
            rows.append(make_row("lenet5-qdq", "none", configuration, metric, 100 * value,
                                 "model", command))
    return rows


def main(argv=None):
    import onnxruntime

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="first N eval images (a multiple of 10)")
    parser.add_argument("-o", "--output", default="build/qdq", help="output directory")
    parser.add_argument("--mlperf-tiny", metavar="DIR",
                        help="also ResNet-8 and VWW from ../shared, with the x/y files "
                             "benchmarks/mlperf_tiny.py --inputs-only wrote into DIR")
    parser.add_argument("--rows", default=str(ROWS),
                        help="results rows of the LeNet-5 models, written without --limit "
                             "(default benchmarks/results/qdq.json)")
    parser.add_argument("--requant-mode", choices=REQUANT_MODES,
                        help="compile the LeNet-5 models in this requantization mode (default: "
                             "the default configuration's); no results rows then")
    args = parser.parse_args(argv)
    config = args.requant_mode and DEFAULT_CONFIG.replace(requant_mode=args.requant_mode)
    logging.getLogger().setLevel(logging.ERROR)   # quantize_static's advice on pre-processing
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    calib_x, _ = datasets.mnist("calib")
    x, y = datasets.mnist("eval", limit=args.limit)
    n = len(x) - len(x) % ORT_BATCH
    x, y = x[:n], y[:n]
    results = {"onnxruntime": onnxruntime.__version__, "models": {}}
    for per_channel in (False, True):
        for activations in ("uint8", "int8"):
            key = f"{'per_channel' if per_channel else 'per_tensor'}_{activations}"
            path = out / f"lenet5_qdq_{key}.onnx"
            onnxruntime_qdq(datasets.LENET5_ONNX, path, calib_x, per_channel=per_channel,
                            activation_type=activations, batch=ORT_BATCH)
            start = time.perf_counter()
            results["models"][key] = row = measure(path, x, y, config)
            row["seconds"] = round(time.perf_counter() - start, 1)
            print(f"{key:22s} arg-max {100 * row['argmax_agreement']:.2f} %  exact outputs "
                  f"{100 * row['exact_outputs']:.2f} %  codes {100 * row['output_codes_equal']:.2f}"
                  f" %  top-1 fpganet {100 * row['fpganet_top1']:.2f} % onnxruntime "
                  f"{100 * row['onnxruntime_top1']:.2f} %")
            for label, key in (("end to end", "per_layer_codes_equal"),
                               ("isolated", "isolated_layer_codes_equal")):
                print(f"    {label}: " + ", ".join(f"{name} {100 * share:.3f} %"
                                                   for name, share in row[key].items()))
    if args.mlperf_tiny:
        results["mlperf_tiny"] = mlperf_tiny(Path(args.mlperf_tiny), out)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if args.limit is None and args.requant_mode is None:
        write_rows(args.rows, results_rows(results["models"], "python benchmarks/qdq_lenet5.py"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
