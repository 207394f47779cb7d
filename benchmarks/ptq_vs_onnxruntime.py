"""fpganet's post-training quantization against onnxruntime's ``quantize_static``.

Both quantize the same float ONNX model from the same calibration images:

- fpganet: ``compile_model(model, calib_x, method=...)`` (per-channel symmetric int8
  weights, int8 activations; ``mse`` is the default calibration method), run on the
  golden model (int8 logits);
- onnxruntime: ``quantize_static`` in QDQ format, per-channel int8 weights, int8
  activations, its default MinMax calibration (``fpganet.model.qdq.onnxruntime_qdq``),
  run in onnxruntime (which fuses the QDQ pairs into its int8 kernels), in two flows
  (:data:`ONNXRUNTIME_FLOWS`): on the model as it is (``onnxruntime``), and after
  ``quant_pre_process`` (``onnxruntime_preprocessed``), the step onnxruntime's documentation
  asks for, which folds each BatchNormalization into its Conv as fpganet's importer does.

The float reference is the source ONNX in onnxruntime. Per model: top-1 where labels exist
and, always, the arg-max agreement of each int8 network with the float model, and the
share of inputs whose largest int8 output is tied (``top_ties``). Models: the MLPerf Tiny
ResNet-8 and VWW MobileNetV1-0.25 (the shared material beside the checkout,
``../shared/models/mlperf-tiny/``: its calibration sets, its 200 labelled test images), the
embedded LeNet-5 (MNIST calibration split of 500 images, the 9,500 eval images), random
float networks (:func:`random_network`: conv / depthwise / residual add / max and average
pools / gemm, random weights; inputs and calibration standard normal, 200 calibration and
500 evaluation samples, fixed seeds), and conv + BatchNormalization networks
(:func:`bn_network`: convs without bias, each followed by a BatchNormalization, a MatMul +
Add head, a symbolic batch; widths 4 to 32; 200 calibration and 2,048 evaluation samples,
and the spread of the difference over slices of 128 of them).

Usage::

    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py                      # everything
    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py --models lenet5 --random 6 --bn 0
    .venv/bin/python benchmarks/ptq_vs_onnxruntime.py --methods mse,minmax -o build/ptq

Writes ``OUT/results.json`` (default ``build/ptq-vs-onnxruntime/results.json``: every figure,
the paired differences, their standard errors, the slices), the models it quantizes under
``OUT/models/``, and the results rows ``benchmarks/results/ptq.json``
(``--rows``, by a complete run): the agreement of each quantizer per network.
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
from fpganet.results import make_row, write_rows

#: The results rows a complete run writes (every model, all the networks, no ``--limit``).
ROWS = Path(__file__).resolve().parent / "results" / "ptq.json"
MODELS = ("resnet8", "vww", "lenet5")
RANDOM_NETWORKS = 24
COMMAND = "python benchmarks/ptq_vs_onnxruntime.py"

#: Random networks: calibration and evaluation samples.
RANDOM_CALIB, RANDOM_EVAL = 200, 500
#: :func:`bn_network` (seed, width) pairs: conv + BatchNormalization nets of four widths.
BN_NETWORKS = ((0, 4), (1, 4), (2, 8), (3, 8), (4, 16), (5, 16), (6, 32), (7, 32))
#: Their evaluation inputs, and the slices the spread of a small measurement is taken over
#: (the issue that brought them measured 128 inputs). With 2,048 a paired difference in
#: agreement is good to about half a point.
BN_EVAL, BN_SLICE = 2048, 128
#: onnxruntime's two ways, key -> whether the model goes through ``quant_pre_process``
#: first (the step onnxruntime's documentation asks for: shape inference and its graph
#: optimizations, which fold each BatchNormalization into its Conv and MatMul + Add into
#: a Gemm); without it quantize_static quantizes the Conv's and the BatchNormalization's
#: outputs each.
ONNXRUNTIME_FLOWS = {"onnxruntime": False, "onnxruntime_preprocessed": True}


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


def bn_network(seed, width):
    """A random float CNN of the kind PyTorch exports, as an ONNX model, and its input
    shape (C, H, W): three convs without bias, each followed by a BatchNormalization and a
    ReLU (``width``, ``2 * width`` at stride 2, ``2 * width`` channels), then a global average
    pool (even seeds) or a 2x2 max pool and flatten (odd seeds), and a MatMul + Add head to
    10 classes; the batch dimension is symbolic (``"batch"``).

    Conv weights are He-scaled normal; each BatchNormalization has a log-normal gamma, a
    normal beta and running mean and a uniform running variance, so that the folded
    channels differ in range. The head is fitted as :func:`random_network`'s is.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(20_000 + seed)
    nodes, inits = [], []
    counter = iter(range(1000))
    channels, size = 3, 16
    shape = (channels, size, size)

    def add_init(prefix, array):
        name = f"{prefix}_{next(counter)}"
        inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def op(kind, inputs, **attrs):
        name = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def conv_bn_relu(x, cin, cout, stride):
        w = add_init("w", rng.normal(0, np.sqrt(2.0 / (cin * 9)), (cout, cin, 3, 3)))
        y = op("Conv", [x, w], kernel_shape=[3, 3], strides=[stride, stride], pads=[1] * 4)
        gamma = add_init("gamma", np.exp(rng.normal(0, 0.5, cout)))
        beta = add_init("beta", rng.normal(0, 0.5, cout))
        mean = add_init("mean", rng.normal(0, 0.5, cout))
        var = add_init("var", rng.uniform(0.1, 2.0, cout))
        return op("Relu", [op("BatchNormalization", [y, gamma, beta, mean, var], epsilon=1e-5)])

    x = conv_bn_relu("x", channels, width, 1)
    x = conv_bn_relu(x, width, 2 * width, 2)
    x = conv_bn_relu(x, 2 * width, 2 * width, 1)
    if seed % 2 == 0:
        x, features = op("Flatten", [op("GlobalAveragePool", [x])]), 2 * width
    else:
        x = op("Flatten", [op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])])
        features = 2 * width * (size // 4) ** 2

    def model_of(head_nodes, output, head_inits, output_shape=None):
        graph = helper.make_graph(
            nodes + head_nodes, f"bn_{seed}_{width}",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", *shape])],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)],
            inits + head_inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        return model

    f = run_model(model_of([], x, []), rng.standard_normal((256, *shape)).astype(np.float32))
    head_w = rng.normal(0, np.sqrt(1.0 / features), (features, 10))
    logits = f.reshape(len(f), -1) @ head_w
    scale = logits.std(axis=0) + 1e-6
    w = numpy_helper.from_array((head_w / scale).astype(np.float32), "head_w")
    b = numpy_helper.from_array((-logits.mean(axis=0) / scale).astype(np.float32), "head_b")
    head = [helper.make_node("MatMul", [x, "head_w"], ["head_mm"], name="head_matmul"),
            helper.make_node("Add", ["head_mm", "head_b"], ["y"], name="head_add")]
    return model_of(head, "y", [w, b], ["batch", 10]), shape


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

def compare(model_path, calib_x, x, y=None, methods=("mse",), work=None, batch=None,
            slice_size=None):
    """Quantize ``model_path`` with fpganet (each of ``methods``) and with onnxruntime's
    ``quantize_static`` (each of :data:`ONNXRUNTIME_FLOWS`) from ``calib_x``; evaluate on
    ``x`` (labels ``y`` if given).

    Parameters
    ----------
    batch : int, optional
        The model's fixed batch size, if it has one (the calibration reader's batch).
    slice_size : int, optional
        Also the least and the largest difference in agreement, fpganet's less
        onnxruntime's, over consecutive slices of this many inputs (what a measurement on
        that few can show).

    Returns
    -------
    dict
        ``float_top1`` (with labels); ``fpganet`` (method -> ``agreement``, ``top1``,
        ``top_ties``: the share of inputs whose largest output is tied, which the arg-max
        breaks towards the first class) and each flow of :data:`ONNXRUNTIME_FLOWS` (the
        same); ``differences`` (``"METHOD-FLOW"`` -> :func:`paired_difference`);
        ``images``, ``calibration_images``; ``slices`` (with ``slice_size``).
    """
    model_path = Path(model_path)
    work = Path(work or model_path.parent)
    work.mkdir(parents=True, exist_ok=True)
    agrees = {}

    def scores(logits, name):
        logits = np.asarray(logits).reshape(len(x), -1)
        pred = logits.argmax(1)
        agrees[name] = pred == float_pred
        top = logits.max(axis=1, keepdims=True)
        row = {"agreement": float(np.mean(agrees[name])),
               "top_ties": float(np.mean(np.sum(logits == top, axis=1) > 1))}
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
        result["fpganet"][method] = row = scores(run_golden(net, net.quantize_input(x)), method)
        row["seconds"] = round(time.perf_counter() - start, 2)
    for key, preprocess in ONNXRUNTIME_FLOWS.items():
        start = time.perf_counter()
        source = model_path
        if preprocess:
            from onnxruntime.quantization.shape_inference import quant_pre_process

            source = work / f"{model_path.stem}.pre.onnx"
            quant_pre_process(str(model_path), str(source))
        qdq = work / f"{source.stem}.qdq.onnx"
        onnxruntime_qdq(source, qdq, calib_x, per_channel=True, activation_type="int8",
                        batch=batch)
        result[key] = row = scores(run_source_model(qdq, x), key)
        row["seconds"] = round(time.perf_counter() - start, 2)
    result["differences"] = {f"{method}-{key}": paired_difference(agrees[method], agrees[key])
                             for method in methods for key in ONNXRUNTIME_FLOWS}
    if slice_size:
        count = len(x) // slice_size
        result["slices"] = slices = {"size": slice_size, "count": count}
        for method in methods:
            for key in ONNXRUNTIME_FLOWS:
                difference = (agrees[method][:count * slice_size].reshape(count, -1).mean(1)
                              - agrees[key][:count * slice_size].reshape(count, -1).mean(1))
                slices[f"{method}-{key}"] = [float(difference.min()), float(difference.max())]
    return result


def paired_difference(ours, theirs):
    """fpganet's agreement less onnxruntime's on the same inputs (``ours``, ``theirs``:
    bool per input, agrees with float), and the standard error of that difference: only the
    inputs where exactly one of them agrees carry it (a paired comparison, as McNemar's)."""
    ours, theirs = np.asarray(ours, bool), np.asarray(theirs, bool)
    n = len(ours)
    gained, lost = int(np.sum(ours & ~theirs)), int(np.sum(~ours & theirs))
    difference = (gained - lost) / n
    variance = ((gained + lost) / n - difference ** 2) / n
    return {"difference": difference, "standard_error": float(np.sqrt(max(variance, 0.0))),
            "gained": gained, "lost": lost}


def random_networks(count, methods, work, first_seed=0):
    """:func:`compare` on ``count`` random networks, seeds ``first_seed`` onwards."""
    rows = []
    for seed in range(first_seed, first_seed + count):
        model, shape = random_network(seed)
        rows.append(_compare_network((model, shape), f"random_{seed}", random_data(seed, shape),
                                     methods, work, seed=seed))
    return rows


def bn_networks(pairs, methods, work):
    """:func:`compare` on :func:`bn_network` of each ``(seed, width)`` pair: calibration
    inputs as :func:`random_data`'s (seed 100 + the network's), :data:`BN_EVAL` evaluation
    inputs, the spread over slices of :data:`BN_SLICE`."""
    rows = []
    for seed, width in pairs:
        model, shape = bn_network(seed, width)
        rows.append(_compare_network((model, shape), f"bn_{seed}_w{width}",
                                     random_data(100 + seed, shape, count=BN_EVAL), methods,
                                     work, slice_size=BN_SLICE, seed=seed, width=width))
    return rows


def _compare_network(network, name, data, methods, work, slice_size=None, **identity):
    from onnx import save

    model, shape = network
    path = Path(work) / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    save(model, str(path))
    calib_x, x = data
    row = compare(path, calib_x, x, methods=methods, work=work, slice_size=slice_size)
    row.update(identity, input_shape=list(shape), nodes=[node.op_type for node in model.graph.node])
    return row


def summary(rows, methods):
    """Mean and least agreement of each quantizer over a set of networks; on how many
    fpganet (each method) is at least as good as each onnxruntime flow, by how much it
    differs from it, and on how many it trails by more than twice the standard error of
    the difference (:func:`paired_difference`; about one network in 40 would by chance)."""
    out = {"networks": len(rows)}
    for key in ONNXRUNTIME_FLOWS:
        theirs = np.array([row[key]["agreement"] for row in rows])
        out[key] = {"mean": float(theirs.mean()), "min": float(theirs.min())}
    for method in methods:
        ours = np.array([row["fpganet"][method]["agreement"] for row in rows])
        out[method] = entry = {"mean": float(ours.mean()), "min": float(ours.min())}
        for key in ONNXRUNTIME_FLOWS:
            theirs = np.array([row[key]["agreement"] for row in rows])
            entry[f"at_least_{key}"] = int(np.sum(ours >= theirs))
            entry[f"mean_difference_{key}"] = float(np.mean(ours - theirs))
            entry[f"worst_difference_{key}"] = float(np.min(ours - theirs))
            # Where fpganet trails, whether by more than the noise of its inputs' count.
            paired = [row["differences"][f"{method}-{key}"] for row in rows]
            entry[f"trails_{key}_beyond_two_standard_errors"] = int(sum(
                d["difference"] < -2 * d["standard_error"] for d in paired))
    return out


def summary_line(what, s, methods):
    theirs = "; ".join(f"{key} mean {100 * s[key]['mean']:.2f} % min {100 * s[key]['min']:.1f} %"
                       for key in ONNXRUNTIME_FLOWS)
    ours = "; ".join(
        f"fpganet {m} mean {100 * s[m]['mean']:.2f} % min {100 * s[m]['min']:.1f} %, >= "
        + "/".join(str(s[m][f"at_least_{key}"]) for key in ONNXRUNTIME_FLOWS)
        for m in methods)
    beyond = "; ".join(f"fpganet {m} trails {key} beyond 2 s.e. on "
                       f"{s[m][f'trails_{key}_beyond_two_standard_errors']}"
                       for m in methods for key in ONNXRUNTIME_FLOWS)
    return f"{s['networks']} {what}: {theirs}; {ours}; {beyond}"


def line(name, row, methods):
    def fmt(entry):
        top1 = f"top-1 {100 * entry['top1']:5.1f} %  " if "top1" in entry else ""
        return f"{top1}agreement {100 * entry['agreement']:5.1f} %"
    head = f"float top-1 {100 * row['float_top1']:5.1f} %  " if "float_top1" in row else ""
    ours = "  ".join(f"fpganet {m}: {fmt(row['fpganet'][m])}" for m in methods)
    theirs = "  ".join(f"{key}: {fmt(row[key])}" for key in ONNXRUNTIME_FLOWS)
    return f"{name:10s} {head}{ours}  {theirs}"


def results_rows(results):
    """Results rows of a run (:func:`main`'s ``results``), all of basis ``model`` on board
    ``none``, configuration the quantizer (``fpganet mse``, ``onnxruntime``, ``onnxruntime
    preprocessed``): per named model its ``agreement_top1`` (with its float model) and
    ``top1``; per conv + BatchNormalization network (``bn-SEED-wWIDTH``) its agreement; for
    the random networks (``random-N``) the mean agreement."""
    def configurations(row):
        for method, entry in row["fpganet"].items():
            yield f"fpganet {method}", entry
        for key in ONNXRUNTIME_FLOWS:
            yield key.replace("_", " "), row[key]

    rows = []
    for network, row in results["models"].items():
        for configuration, entry in configurations(row):
            for metric in ("agreement_top1", "top1"):
                value = entry["agreement" if metric == "agreement_top1" else metric]
                rows.append(make_row(network, "none", configuration, metric, 100 * value,
                                     "model", COMMAND))
    for row in results.get("bn", {}).get("networks", []):
        for configuration, entry in configurations(row):
            rows.append(make_row(f"bn-{row['seed']}-w{row['width']}", "none", configuration,
                                 "agreement_top1", 100 * entry["agreement"], "model", COMMAND))
    if "random" in results:
        summary = results["random"]["summary"]
        network = f"random-{summary['networks']}"
        for method in results["methods"]:
            rows.append(make_row(network, "none", f"fpganet {method}", "agreement_top1",
                                 100 * summary[method]["mean"], "model", COMMAND))
        for key in ONNXRUNTIME_FLOWS:
            rows.append(make_row(network, "none", key.replace("_", " "), "agreement_top1",
                                 100 * summary[key]["mean"], "model", COMMAND))
    return rows


def main(argv=None):
    import onnxruntime

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="build/ptq-vs-onnxruntime",
                        help="output folder")
    parser.add_argument("--rows", default=str(ROWS),
                        help="results rows, written by a run without --limit "
                             "(default benchmarks/results/ptq.json)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated: resnet8, vww, lenet5 (empty: none)")
    parser.add_argument("--random", type=int, default=RANDOM_NETWORKS,
                        help="random networks (seeds 0..)")
    parser.add_argument("--bn", type=int, default=len(BN_NETWORKS),
                        help=f"conv + BatchNormalization networks (the first N of "
                             f"{len(BN_NETWORKS)})")
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
    for key, rows in (("random", random_networks(args.random, methods, work)),
                      ("bn", bn_networks(BN_NETWORKS[:args.bn], methods, work))):
        if not rows:
            continue
        for row in rows:
            print(line(f"{key} {row['seed']}" + (f" w{row['width']}" if "width" in row else ""),
                       row, methods), flush=True)
        results[key] = {"summary": summary(rows, methods), "networks": rows}
        print(summary_line(f"{key} networks", results[key]["summary"], methods))
    path = out / "results.json"
    write_text_atomic(path, json.dumps(results, indent=1) + "\n")   # built aside, renamed into place
    # Rows of a complete run only: a cut would leave figures out or measure them on fewer.
    if (args.limit is None and args.random >= RANDOM_NETWORKS and args.bn == len(BN_NETWORKS)
            and set(results["models"]) == set(MODELS)):
        write_rows(args.rows, results_rows(results))
        print(f"wrote {args.rows}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
