"""fpganet's post-training quantization against onnxruntime's ``quantize_static``.

Both quantize the same float ONNX model from the same calibration images:

- fpganet: ``compile_model(model, calib_x, method=...)`` (per-channel symmetric int8
  weights, int8 activations; ``mse`` is the default calibration method), run on the
  golden model (int8 logits);
- onnxruntime: ``quantize_static`` in QDQ format, per-channel int8 weights, int8
  activations, its default MinMax calibration (``fpganet.model.qdq.onnxruntime_qdq``),
  run in onnxruntime (which fuses the QDQ pairs into its int8 kernels).

The float reference is the source ONNX in onnxruntime. Per model: top-1 where labels exist
and, always, the arg-max agreement of each int8 network with the float model. Models:
the MLPerf Tiny ResNet-8 and VWW MobileNetV1-0.25 (the shared material beside the checkout,
``../shared/models/mlperf-tiny/``: its calibration sets, its 200 labelled test images), the
embedded LeNet-5 (MNIST calibration split of 500 images, the 9,500 eval images), and random
float networks (:func:`random_network`: conv / depthwise / residual add / max and average
pools / gemm, random weights; inputs and calibration standard normal, 200 calibration and
500 evaluation samples, fixed seeds).

Usage::

    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py                      # everything
    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py --models lenet5 --random 6
    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py --methods mse,minmax -o build/ptq

Writes ``OUT/results.json`` (default ``build/ptq-vs-onnxruntime/results.json``) and the
models it quantizes under ``OUT/models/``.
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
from fpganet.files import write_text_atomic
from fpganet.golden import run_golden
from fpganet.model.qdq import onnxruntime_qdq
from fpganet.qdq_export import run_source_model

#: Random networks: calibration and evaluation samples.
RANDOM_CALIB, RANDOM_EVAL = 200, 500


# Random float networks ----------------------------------------------------------------------

def random_network(seed):
    """A random float CNN as an ONNX model, and its input shape (C, H, W).

    A stem conv, then two to four blocks drawn from: conv 3x3 or 1x1 (stride 1 or 2) with
    ReLU or ReLU6, depthwise 3x3 then pointwise, a residual block (conv-ReLU-conv + skip,
    Add, ReLU), a 2x2 max or average pool; then a head: global average pool, or flatten,
    and a Gemm to 10 classes, sometimes with a hidden Gemm+ReLU. Weights are He-scaled
    normal with a random log-normal gain per output channel (so channels differ in range,
    as in trained networks), biases normal(0, 0.1); the last Gemm's rows are rescaled and its
    bias set so that each logit has mean 0 and spread 1 on 256 normal inputs of its own.
    """
    # Imported here, not at the top: onnx is slow to import.
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = iter(range(1000))

    def weight(shape, fan_in):
        w = rng.normal(0, np.sqrt(2.0 / fan_in), shape)
        gain = np.exp(rng.normal(0, 0.5, (shape[0],) + (1,) * (len(shape) - 1)))
        return (w * gain).astype(np.float32)

    def add_init(prefix, array):
        name = f"{prefix}_{next(counter)}"
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(kind, inputs, **attrs):
        name = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def conv(x, cin, cout, k, stride=1, group=1):
        w = add_init("w", weight((cout, cin // group, k, k), cin // group * k * k))
        b = add_init("b", rng.normal(0, 0.1, cout).astype(np.float32))
        pad = k // 2
        return op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                  pads=[pad] * 4, group=group)

    def activation(x):
        if rng.random() < 0.25:
            zero = add_init("zero", np.float32(0))
            six = add_init("six", np.float32(6))
            return op("Clip", [x, zero, six])
        return op("Relu", [x])

    channels = int(rng.choice([1, 3, 4]))
    size = int(rng.choice([8, 10, 12, 16]))
    shape = (channels, size, size)
    c = int(rng.choice([4, 6, 8]))
    x = activation(conv("x", channels, c, 3))
    for _ in range(int(rng.integers(2, 5))):
        kind = rng.choice(["conv", "depthwise", "residual", "pool"], p=[0.3, 0.25, 0.3, 0.15])
        if kind == "pool" and size < 4:
            kind = "conv"
        if kind == "conv":
            k = int(rng.choice([1, 3]))
            stride = 2 if size >= 8 and rng.random() < 0.3 else 1
            out = int(rng.choice([c, c + 2, 2 * c]))
            x = activation(conv(x, c, out, k, stride))
            c, size = out, (size + 2 * (k // 2) - k) // stride + 1
        elif kind == "depthwise":
            stride = 2 if size >= 8 and rng.random() < 0.3 else 1
            x = activation(conv(x, c, c, 3, stride, group=c))
            size = (size - 1) // stride + 1
            out = int(rng.choice([c, 2 * c]))
            x = activation(conv(x, c, out, 1))
            c = out
        elif kind == "residual":
            h = op("Relu", [conv(x, c, c, 3)])
            x = op("Relu", [op("Add", [x, conv(h, c, c, 3)])])
        else:
            x = op(str(rng.choice(["MaxPool", "AveragePool"])), [x], kernel_shape=[2, 2],
                   strides=[2, 2])
            size //= 2
    if rng.random() < 0.5:
        x, features = op("Flatten", [op("GlobalAveragePool", [x])]), c
    else:
        x, features = op("Flatten", [x]), c * size * size
    if rng.random() < 0.4:
        hidden = int(rng.choice([16, 32]))
        w = add_init("fw", weight((hidden, features), features))
        b = add_init("fb", rng.normal(0, 0.1, hidden).astype(np.float32))
        x, features = op("Relu", [op("Gemm", [x, w, b], transB=1)]), hidden
    # The head is fitted to the features: on 256 inputs of its own, each class's logit
    # is centred and scaled to unit spread, so the arg-max depends on the input and the
    # classes are about equally likely (a random head on a global average pool would
    # otherwise give one class for every input).
    features_in = x
    head_w = weight((10, features), features)
    graph = helper.make_graph(
        nodes, f"random_{seed}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info(features_in, TensorProto.FLOAT, None)], inits)
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    probe.ir_version = 7
    f = run_model(probe, rng.standard_normal((256, *shape)).astype(np.float32))
    logits = f.reshape(len(f), -1) @ head_w.T
    scale = logits.std(axis=0) + 1e-6
    head_w = (head_w / scale[:, None]).astype(np.float32)
    head_b = (-logits.mean(axis=0) / scale).astype(np.float32)
    w, b = add_init("fw", head_w), add_init("fb", head_b)
    nodes.append(helper.make_node("Gemm", [features_in, w, b], ["y"], name="head", transB=1))
    graph = helper.make_graph(
        nodes, f"random_{seed}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model, shape


def run_model(model, x):
    """First output of an in-memory ONNX ``model`` on ``x`` in onnxruntime (CPU)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def random_data(seed, shape, calib=RANDOM_CALIB, count=RANDOM_EVAL):
    """Standard-normal calibration and evaluation inputs for a random network (own seed)."""
    rng = np.random.default_rng(10_000 + seed)
    return (rng.standard_normal((calib, *shape)).astype(np.float32),
            rng.standard_normal((count, *shape)).astype(np.float32))


# The comparison -----------------------------------------------------------------------------

def compare(model_path, calib_x, x, y=None, methods=("mse",), work=None, batch=None):
    """Quantize ``model_path`` with fpganet (each of ``methods``) and with onnxruntime's
    ``quantize_static`` from ``calib_x``; evaluate on ``x`` (labels ``y`` if given).

    Parameters
    ----------
    batch : int, optional
        The model's fixed batch size, if it has one (the calibration reader's batch).

    Returns
    -------
    dict
        ``float_top1`` (with labels); ``fpganet`` (method -> ``agreement``, ``top1``) and
        ``onnxruntime`` (``agreement``, ``top1``); ``images``, ``calibration_images``.
    """
    model_path = Path(model_path)
    work = Path(work or model_path.parent)
    work.mkdir(parents=True, exist_ok=True)

    def scores(logits):
        pred = np.asarray(logits).reshape(len(x), -1).argmax(1)
        row = {"agreement": float(np.mean(pred == float_pred))}
        if y is not None:
            row["top1"] = float(np.mean(pred == y))
        return row

    float_pred = run_source_model(model_path, x).reshape(len(x), -1).argmax(1)
    result = {"images": int(len(x)), "calibration_images": int(len(calib_x)), "fpganet": {}}
    if y is not None:
        result["float_top1"] = float(np.mean(float_pred == y))
    for method in methods:
        start = time.perf_counter()
        net = compile_model(model_path, calib_x, method=method, program=False)
        result["fpganet"][method] = row = scores(run_golden(net, net.quantize_input(x)))
        row["seconds"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    qdq = work / f"{model_path.stem}.qdq.onnx"
    onnxruntime_qdq(model_path, qdq, calib_x, per_channel=True, activation_type="int8",
                    batch=batch)
    result["onnxruntime"] = row = scores(run_source_model(qdq, x))
    row["seconds"] = round(time.perf_counter() - start, 2)
    return result


def random_networks(count, methods, work, first_seed=0):
    """:func:`compare` on ``count`` random networks, seeds ``first_seed`` onwards."""
    from onnx import save

    rows = []
    for seed in range(first_seed, first_seed + count):
        model, shape = random_network(seed)
        path = Path(work) / f"random_{seed}.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        save(model, str(path))
        calib_x, x = random_data(seed, shape)
        row = compare(path, calib_x, x, methods=methods, work=work)
        row.update(seed=seed, input_shape=list(shape),
                   nodes=[node.op_type for node in model.graph.node])
        rows.append(row)
    return rows


def summary(rows, methods):
    """Mean and least agreement of each quantizer over random networks; on how many
    fpganet (each method) is at least as good as onnxruntime."""
    theirs = np.array([row["onnxruntime"]["agreement"] for row in rows])
    out = {"networks": len(rows),
           "onnxruntime": {"mean": float(theirs.mean()), "min": float(theirs.min())}}
    for method in methods:
        ours = np.array([row["fpganet"][method]["agreement"] for row in rows])
        out[method] = {"mean": float(ours.mean()), "min": float(ours.min()),
                       "at_least_onnxruntime": int(np.sum(ours >= theirs)),
                       "mean_difference": float(np.mean(ours - theirs)),
                       "worst_difference": float(np.min(ours - theirs))}
    return out


def line(name, row, methods):
    def fmt(entry):
        top1 = f"top-1 {100 * entry['top1']:5.1f} %  " if "top1" in entry else ""
        return f"{top1}agreement {100 * entry['agreement']:5.1f} %"
    head = f"float top-1 {100 * row['float_top1']:5.1f} %  " if "float_top1" in row else ""
    ours = "  ".join(f"fpganet {m}: {fmt(row['fpganet'][m])}" for m in methods)
    return f"{name:10s} {head}{ours}  onnxruntime: {fmt(row['onnxruntime'])}"


def main(argv=None):
    import onnxruntime

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="build/ptq-vs-onnxruntime",
                        help="output folder")
    parser.add_argument("--models", default="resnet8,vww,lenet5",
                        help="comma-separated: resnet8, vww, lenet5 (empty: none)")
    parser.add_argument("--random", type=int, default=24, help="random networks (seeds 0..)")
    parser.add_argument("--methods", default="mse,minmax",
                        help="comma-separated fpganet calibration methods")
    parser.add_argument("--limit", type=int, help="LeNet-5: first N eval images")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)   # quantize_static's advice on pre-processing
    methods = tuple(args.methods.split(","))
    out = Path(args.output)
    work = out / "models"
    work.mkdir(parents=True, exist_ok=True)
    results = {"onnxruntime": onnxruntime.__version__, "methods": list(methods), "models": {}}
    for model in filter(None, args.models.split(",")):
        if model == "lenet5":
            calib_x, _ = datasets.mnist("calib")
            x, y = datasets.mnist("eval", limit=args.limit)
            row = compare(datasets.LENET5_ONNX, calib_x, x, y, methods, work, batch=10)
        else:
            try:
                path = datasets.mlperf_tiny_model(model)
            except Exception as error:   # the shared material is not there
                print(f"{model}: skipped ({error})", file=sys.stderr)
                continue
            calib_x, _ = datasets.mlperf_tiny(model, "calib")
            x, y = datasets.mlperf_tiny(model, "test")
            row = compare(path, calib_x, x, y, methods, work)
        results["models"][model] = row
        print(line(model, row, methods), flush=True)
    if args.random:
        rows = random_networks(args.random, methods, work)
        for row in rows:
            print(line(f"random {row['seed']}", row, methods), flush=True)
        results["random"] = {"summary": summary(rows, methods), "networks": rows}
        s = results["random"]["summary"]
        print(f"{s['networks']} random networks: onnxruntime mean {100 * s['onnxruntime']['mean']:.2f}"
              f" % min {100 * s['onnxruntime']['min']:.1f} %; " + "; ".join(
                  f"fpganet {m} mean {100 * s[m]['mean']:.2f} % min {100 * s[m]['min']:.1f} %, "
                  f">= onnxruntime on {s[m]['at_least_onnxruntime']}" for m in methods))
    path = out / "results.json"
    write_text_atomic(path, json.dumps(results, indent=1) + "\n")   # built aside, renamed into place
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
