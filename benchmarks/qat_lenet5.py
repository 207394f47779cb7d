"""Quantization-aware training of LeNet-5 in PyTorch, exported as QDQ ONNX, compiled by fpganet.

The float LeNet-5 (the embedded ``lenet.onnx``, by default) is rebuilt in PyTorch with
its own weights (its outputs checked against onnxruntime's on the float ONNX, within
1e-4), prepared for quantization-aware training with ``torch.ao.quantization`` (per-channel
symmetric int8 weights, -127..127 as the accelerator's; per-tensor asymmetric int8
activations; Conv+ReLU and Gemm+ReLU fused; the max pools pass their input's quantization
through, as the accelerator does) and fine-tuned on the 60,000 MNIST training images.
The fake-quantized model is exported as QDQ ONNX (QuantizeLinear/DequantizeLinear, opset
13), compiled by ``fpganet compile`` without ``--calib`` and run on fpganet's golden model;
onnxruntime runs the same QDQ model. Measured on the 10,000 MNIST test images (and on the
eval split 500..9999, which fpganet's post-training quantization does not calibrate on):
top-1 of the float model, of fpganet's post-training quantization of it (the embedded
calibration split, the default method), of the QAT model in fpganet, in onnxruntime and
in PyTorch (fake-quantized), and the arg-max agreement of fpganet with onnxruntime.

MNIST is by Yann LeCun, Corinna Cortes and Christopher J.C. Burges. The training images
are downloaded (from the mirrors torchvision uses) into ``--data-dir`` and checked against
their SHA-256; files already there (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
or their ``.gz``, also in torchvision's ``MNIST/raw/`` layout) are used as they are.

Usage::

    .venv/bin/pip install -e '.[qat]'
    .venv/bin/python benchmarks/qat_lenet5.py [--epochs 3] [--data-dir DIR] [-o build/qat-lenet5]

Writes ``OUT/lenet5_qat.onnx``, ``OUT/compiled/`` (``fpganet compile``) and ``OUT/results.json``.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

import numpy as np

from fpganet import datasets
from fpganet.compiler import compile_model
from fpganet.datasets import preprocess_mnist
from fpganet.errors import FpganetError
from fpganet.files import atomic_file
from fpganet.golden import run_golden

HERE = Path(__file__).resolve().parent
#: Where torchvision fetches MNIST from (torchvision.datasets.MNIST.mirrors).
MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
#: SHA-256 of the decompressed training files (their MD5s are the reference values other
#: MNIST loaders check: 6bbc9ace898e44ae57da46a324031adb, a25bea736e30d166cdddb491f175f624).
TRAIN_FILES = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
}
#: The float graph this script rebuilds, node by node (SOURCE.md of lenet5-mnist).
LENET5_OPS = ["Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Reshape", "Gemm", "Relu",
              "Gemm", "Relu", "Gemm", "Softmax"]
FLOAT_TOLERANCE = 1e-4
#: Training batches the observers see before the first weight update.
WARMUP_BATCHES = 16


class BadInput(Exception):
    """Refused input: one line, exit status 2."""


# MNIST training images ------------------------------------------------------------------------

def _read_idx(data):
    """An IDX file's bytes -> uint8 array (MNIST's format: magic, dimensions, bytes)."""
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != 8:
        raise BadInput("not an unsigned-byte IDX file")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def _fetch(name, directory):
    """Bytes of the decompressed MNIST file ``name``: from ``directory`` if there, else
    downloaded into it (written aside and renamed); checked against :data:`TRAIN_FILES`."""
    for folder in (directory, directory / "MNIST" / "raw"):
        for candidate, opener in ((folder / name, open), (folder / f"{name}.gz", gzip.open)):
            if candidate.is_file():
                try:
                    with opener(candidate, "rb") as handle:
                        data = handle.read()
                except (OSError, EOFError) as error:
                    raise BadInput(f"{candidate}: cannot be read ({error})") from None
                if hashlib.sha256(data).hexdigest() != TRAIN_FILES[name]:
                    raise BadInput(f"{candidate}: not the MNIST file {name} (SHA-256 differs); "
                                   f"remove it to download it again")
                return data
    errors = []
    for mirror in MIRRORS:
        try:
            with urllib.request.urlopen(f"{mirror}{name}.gz", timeout=60) as response:
                data = gzip.decompress(response.read())
        except Exception as error:   # offline, refused, truncated: try the next mirror
            errors.append(f"{mirror}: {error}")
            continue
        if hashlib.sha256(data).hexdigest() != TRAIN_FILES[name]:
            errors.append(f"{mirror}: SHA-256 differs")
            continue
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_file(directory / name) as stream:
            stream.write(data)
        return data
    raise BadInput(f"cannot download MNIST {name} ({'; '.join(errors)}); put {name} or "
                   f"{name}.gz into {directory}")


def mnist_train_pixels(directory):
    """The 60,000 MNIST training images as uint8 pixels ``[N, 28, 28]``, and int64 labels."""
    directory = Path(directory).expanduser()
    images = _read_idx(_fetch("train-images-idx3-ubyte", directory))
    labels = _read_idx(_fetch("train-labels-idx1-ubyte", directory))
    return images, labels.astype(np.int64)


def mnist_train(directory):
    """The 60,000 MNIST training images, preprocessed as LeNet-5 expects, and labels."""
    images, labels = mnist_train_pixels(directory)
    return preprocess_mnist(images), labels


def mnist_test():
    """The 10,000 MNIST test images (the embedded copy), preprocessed, and labels."""
    return datasets.mnist("all")


# LeNet-5 in PyTorch ---------------------------------------------------------------------------

def float_weights(path):
    """The float ONNX's weights, after checking that it is the LeNet-5 rebuilt here."""
    # Imported here, not at the top: onnx is slow to import.
    import onnx
    from onnx import helper, numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as error:
        raise BadInput(f"{path}: not a readable ONNX model ({str(error).splitlines()[0][:200]})")
    ops = [node.op_type for node in model.graph.node if node.op_type != "Constant"]
    if ops != LENET5_OPS:
        raise BadInput(f"{path}: not the LeNet-5 graph this script rebuilds ({' '.join(ops)})")
    attrs = {node.name or node.output[0]: {a.name: helper.get_attribute_value(a)
                                          for a in node.attribute} for node in model.graph.node}
    convs = [node for node in model.graph.node if node.op_type == "Conv"]
    pools = [node for node in model.graph.node if node.op_type == "MaxPool"]
    expected = ([2, 2, 2, 2], [0, 0, 0, 0])
    for node, pads in zip(convs, expected):
        a = attrs[node.name or node.output[0]]
        if (list(a.get("pads", [0] * 4)) != pads or list(a.get("strides", [1, 1])) != [1, 1]
                or a.get("group", 1) != 1):
            raise BadInput(f"{path}: Conv '{node.name}' has other attributes than LeNet-5's")
    for node in pools:
        a = attrs[node.name or node.output[0]]
        if list(a.get("kernel_shape", [])) != [2, 2] or list(a.get("strides", [])) != [2, 2]:
            raise BadInput(f"{path}: MaxPool '{node.name}' is not 2x2, stride 2")
    for node in model.graph.node:
        if node.op_type == "Gemm":
            a = attrs[node.name or node.output[0]]
            if a.get("transB", 0) != 1 or a.get("alpha", 1.0) != 1 or a.get("beta", 1.0) != 1:
                raise BadInput(f"{path}: Gemm '{node.name}' is not x @ W.T + b")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    layers = [node for node in model.graph.node if node.op_type in ("Conv", "Gemm")]
    weights = [(inits[node.input[1]], inits[node.input[2]]) for node in layers]
    shapes = [(6, 1, 5, 5), (16, 6, 5, 5), (120, 400), (84, 120), (10, 84)]
    if [w.shape for w, _ in weights] != shapes:
        raise BadInput(f"{path}: weight shapes {[list(w.shape) for w, _ in weights]} are not "
                       f"LeNet-5's")
    logits = next(node for node in model.graph.node if node.op_type == "Softmax").input[0]
    return weights, logits


def lenet5(weights):
    """LeNet-5 as a torch module (quantization stubs around it), with ``weights`` loaded."""
    import torch
    from torch import nn
    from torch.ao import quantization as tq

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = tq.QuantStub()
            self.conv1, self.relu1 = nn.Conv2d(1, 6, 5, padding=2), nn.ReLU()
            self.pool1 = nn.MaxPool2d(2)
            self.conv2, self.relu2 = nn.Conv2d(6, 16, 5), nn.ReLU()
            self.pool2 = nn.MaxPool2d(2)
            self.fc1, self.relu3 = nn.Linear(400, 120), nn.ReLU()
            self.fc2, self.relu4 = nn.Linear(120, 84), nn.ReLU()
            self.fc3 = nn.Linear(84, 10)
            self.dequant = tq.DeQuantStub()

        def forward(self, x):   # logits; the ONNX's final Softmax is left to the loss
            x = self.pool1(self.relu1(self.conv1(self.quant(x))))
            x = self.pool2(self.relu2(self.conv2(x)))
            x = torch.flatten(x, 1)
            x = self.relu4(self.fc2(self.relu3(self.fc1(x))))
            return self.dequant(self.fc3(x))

    model = LeNet5()
    with torch.no_grad():
        for layer, (w, b) in zip([model.conv1, model.conv2, model.fc1, model.fc2, model.fc3],
                                 weights):
            layer.weight.copy_(torch.from_numpy(np.array(w)))
            layer.bias.copy_(torch.from_numpy(np.array(b)))
    return model


def prepare_qat(model):
    """Fake quantization as the accelerator computes: per-channel symmetric int8 weights in
    -127..127 (its weights are symmetric), per-tensor asymmetric int8 activations."""
    import torch
    from torch.ao import quantization as tq

    weight = tq.FakeQuantize.with_args(
        observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=-127, quant_max=127,
        dtype=torch.qint8, qscheme=torch.per_channel_symmetric, ch_axis=0)
    activation = tq.FakeQuantize.with_args(
        observer=tq.MovingAverageMinMaxObserver, quant_min=-128, quant_max=127,
        dtype=torch.qint8, qscheme=torch.per_tensor_affine)
    model.train()
    model.qconfig = tq.QConfig(activation=activation, weight=weight)
    model = tq.fuse_modules_qat(model, [["conv1", "relu1"], ["conv2", "relu2"],
                                        ["fc1", "relu3"], ["fc2", "relu4"]])
    # No observer of their own: a max pool passes its input's scale through, as on the
    # accelerator (a second scale there would be refused on import).
    model.pool1.qconfig = model.pool2.qconfig = None
    return tq.prepare_qat(model)


def predict(model, x, batch=1000):
    """Logits of a torch model on numpy inputs (evaluation mode, no gradients)."""
    import torch

    model.eval()
    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(x[i:i + batch])).numpy()
                               for i in range(0, len(x), batch)])


def train(model, x, y, epochs, batch, lr, seed, freeze_epoch):
    """Fine-tune ``model`` (SGD with momentum, cosine-decayed learning rate, shuffled with
    ``seed``, after :data:`WARMUP_BATCHES` batches for the observers); the observers stop from epoch ``freeze_epoch`` on (counted from 1), so the
    last epochs train the weights under fixed scales. Returns the mean loss of each epoch."""
    import torch
    from torch.ao import quantization as tq

    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    # The observers first see some training batches without a weight update: every scale
    # then exists before the first step, and before any freeze.
    model.train()
    with torch.no_grad():
        warmup = torch.randperm(len(x), generator=generator)[:WARMUP_BATCHES * batch]
        for start in range(0, len(warmup), batch):
            model(xt[warmup[start:start + batch]])

    def freeze(epoch):
        if epoch >= freeze_epoch:
            model.apply(tq.disable_observer)
    return fit_epochs(model, optimizer, xt, yt, epochs, batch, generator, freeze)


def fit_epochs(model, optimizer, xt, yt, epochs, batch, generator, before_epoch=None):
    """``epochs`` passes of mini-batches of the tensors ``xt``, ``yt`` shuffled by ``generator``
    (cross-entropy; the learning rate decayed on a cosine, stepped each batch),
    ``before_epoch(epoch)`` first; the mean loss of each."""
    import torch

    steps = epochs * ((len(xt) + batch - 1) // batch)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    for epoch in range(1, epochs + 1):
        model.train()
        if before_epoch is not None:
            before_epoch(epoch)
        order = torch.randperm(len(xt), generator=generator)
        total = 0.0
        for start in range(0, len(xt), batch):
            index = order[start:start + batch]
            optimizer.zero_grad()
            loss = loss_fn(model(xt[index]), yt[index])
            loss.backward()
            optimizer.step()
            schedule.step()
            total += float(loss.detach()) * len(index)
        losses.append(total / len(xt))
        print(f"epoch {epoch}: loss {losses[-1]:.4f}", flush=True)
    return losses


def export_qdq(model, path, sample):
    """The fake-quantized model as QDQ ONNX (opset 13: per-channel Q/DQ), batch dynamic."""
    import torch
    from torch.ao import quantization as tq

    model.eval()
    model.apply(tq.disable_observer)
    for module in model.modules():
        fake = getattr(module, "weight_fake_quant", None)
        if fake is not None:
            # The ONNX exporter knows only the int8 range -128..127, not the -127..127 the
            # weights were trained in: each weight becomes its fake-quantized value (the
            # model computes the same), which the wider range quantizes to the same code.
            with torch.no_grad():
                module.weight.copy_(fake(module.weight))
            fake.activation_post_process.quant_min = -128
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.from_numpy(sample), buffer, opset_version=13,
                          dynamo=False, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    with atomic_file(path) as stream:
        stream.write(buffer.getvalue())


# Measurements ---------------------------------------------------------------------------------

def onnxruntime_outputs(path, x, name):
    """The tensor ``name`` of a float ONNX model run by onnxruntime (its fixed batch of 10)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    if name not in {output.name for output in model.graph.output}:
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    shape = session.get_inputs()[0].shape
    batch = shape[0] if isinstance(shape[0], int) else 1000
    feed = session.get_inputs()[0].name
    return np.concatenate([session.run([name], {feed: x[i:i + batch]})[0]
                           for i in range(0, len(x), batch)])


def top1(logits, y, subset):
    """Top-1 on all images and on ``subset`` (a slice)."""
    hits = np.asarray(logits).reshape(len(y), -1).argmax(1) == y
    return {"all": float(hits.mean()), "eval": float(hits[subset].mean())}


def git_commit():
    """The checkout's commit, marked ``+modified`` when tracked files differ from it."""
    try:
        def git(*words):
            return subprocess.run(["git", *words], cwd=HERE, capture_output=True, text=True,
                                  check=True).stdout.strip()
        return git("rev-parse", "HEAD") + ("+modified" if git("status", "--porcelain",
                                                              "--untracked-files=no") else "")
    except Exception:   # not a git checkout
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="float LeNet-5 ONNX (default: the embedded lenet.onnx)")
    parser.add_argument("--data-dir", default="~/.cache/fpganet/mnist",
                        help="MNIST training files, downloaded there if missing")
    parser.add_argument("-o", "--output", default="build/qat-lenet5", help="output folder")
    parser.add_argument("--epochs", type=int, default=3, help="QAT fine-tuning epochs")
    parser.add_argument("--freeze-epoch", type=int,
                        help="first epoch with frozen observers (default: the last one)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4, help="initial SGD learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--train-limit", type=int, help="first N training images only")
    args = parser.parse_args(argv)

    try:
        return run(args)
    except (BadInput, FpganetError) as error:   # refused input, an output not writable
        print(f"qat_lenet5: error: {error}", file=sys.stderr)
        return 2


def run(args):
    for name in ("epochs", "batch_size", "threads"):
        if getattr(args, name) < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be at least 1")
    if args.train_limit is not None and args.train_limit < 1:
        raise BadInput("--train-limit must be at least 1")
    freeze = args.epochs if args.freeze_epoch is None else args.freeze_epoch
    if not 1 <= freeze <= args.epochs + 1:
        raise BadInput(f"--freeze-epoch must be 1..{args.epochs + 1} (epochs + 1: never)")
    if not np.isfinite(args.lr) or args.lr <= 0:
        raise BadInput("--lr must be a positive number")
    try:
        import torch
    except ImportError:
        raise BadInput("PyTorch is not installed: pip install -e '.[qat]'") from None
    import onnx
    import onnxruntime
    sys.path.insert(0, str(HERE))
    from qdq_lenet5 import compare_qdq

    warnings.filterwarnings("ignore", category=DeprecationWarning)   # torch.ao's notice
    started = time.perf_counter()
    times = {}
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    source = Path(args.model) if args.model else datasets.LENET5_ONNX
    if not source.is_file():
        raise BadInput(f"{source}: no such file")
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"cannot create {out}: {error.strerror}") from None

    # 1. The float model in torch, checked against onnxruntime on the same ONNX; the
    #    training data first, so that a missing download stops the run at once.
    weights, logits_name = float_weights(source)
    tick = time.perf_counter()
    train_x, train_y = mnist_train(args.data_dir)
    if args.train_limit:
        train_x, train_y = train_x[:args.train_limit], train_y[:args.train_limit]
    times["data_s"] = round(time.perf_counter() - tick, 1)
    model = lenet5(weights)
    x, y = mnist_test()
    split = datasets.SPLITS["eval"]
    tick = time.perf_counter()
    ort_logits = onnxruntime_outputs(source, x, logits_name)
    torch_logits = predict(model, x)
    float_difference = float(np.max(np.abs(torch_logits - ort_logits)))
    if float_difference > FLOAT_TOLERANCE:
        print(f"qat_lenet5: the torch LeNet-5 differs from onnxruntime by {float_difference:.2e}"
              f" (> {FLOAT_TOLERANCE})", file=sys.stderr)
        return 1
    float_top1 = top1(ort_logits, y, split)
    times["float_check_s"] = round(time.perf_counter() - tick, 1)
    print(f"torch float == onnxruntime float within {float_difference:.1e}; float top-1 "
          f"{100 * float_top1['all']:.2f} %", flush=True)

    # 2. fpganet's post-training quantization of the float model: the usual compile, the
    #    embedded calibration split (test images 0..499), the default method.
    tick = time.perf_counter()
    ptq = compile_model(source, datasets.mnist("calib")[0], program=False)
    ptq_top1 = top1(run_golden(ptq, ptq.quantize_input(x)), y, split)
    times["ptq_s"] = round(time.perf_counter() - tick, 1)
    print(f"fpganet PTQ top-1 {100 * ptq_top1['all']:.2f} %", flush=True)

    # 3. Quantization-aware fine-tuning on the training images.
    tick = time.perf_counter()
    qat = prepare_qat(model)
    losses = train(qat, train_x, train_y, args.epochs, args.batch_size, args.lr, args.seed,
                   freeze)
    times["train_s"] = round(time.perf_counter() - tick, 1)
    qat.eval()
    qat.apply(torch.ao.quantization.disable_observer)
    torch_qat_top1 = top1(predict(qat, x), y, split)

    # 4. Export, compile with the command line (no --calib), measure against onnxruntime.
    tick = time.perf_counter()
    path = out / "lenet5_qat.onnx"
    export_qdq(qat, path, x[:10])
    compiled = out / "compiled"
    command = [sys.executable, "-m", "fpganet", "compile", str(path), "-o", str(compiled)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        print(f"qat_lenet5: fpganet compile failed: {result.stderr.strip()}", file=sys.stderr)
        return 1
    times["export_compile_s"] = round(time.perf_counter() - tick, 1)
    tick = time.perf_counter()
    try:
        net = compile_model(path, program=False)
    except FpganetError as error:
        print(f"qat_lenet5: {error}", file=sys.stderr)
        return 1
    compared = compare_qdq(net, path, x, batch=1000)
    golden = compared["golden"].reshape(len(x), -1)
    theirs = compared["onnxruntime"].reshape(len(x), -1)
    times["golden_onnxruntime_s"] = round(time.perf_counter() - tick, 1)
    agree = golden.argmax(1) == theirs.argmax(1)
    qdq_model = onnx.load(str(path))
    ops = sorted({node.op_type for node in qdq_model.graph.node})

    results = {
        "what": "LeNet-5 on MNIST: float, fpganet post-training quantization, and "
                "quantization-aware training in PyTorch exported as QDQ ONNX and compiled by "
                "fpganet without calibration; every figure measured by this run",
        "images": {"all": int(len(x)), "eval": int(len(y[split])),
                   "eval_split": "test images 500..9999 (PTQ calibrates on 0..499)"},
        "top1": {
            "float_onnxruntime": float_top1,
            "fpganet_ptq": ptq_top1,
            "qat_torch_fake_quant": torch_qat_top1,
            "qat_fpganet_golden": top1(golden, y, split),
            "qat_onnxruntime": top1(theirs, y, split),
        },
        "qat_fpganet_vs_onnxruntime": {
            "argmax_agreement": float(agree.mean()),
            "argmax_disagreements": int(np.sum(~agree)),
            "int8_logits_all_equal": float(np.mean(np.all(golden == theirs, axis=1))),
            "logit_codes_equal": float(np.mean(golden == theirs)),
            "max_logit_code_difference": int(np.max(np.abs(golden.astype(int) - theirs))),
            "per_layer_codes_equal": compared["end_to_end"],
            "isolated_layer_codes_equal": {name: share for name, (share, _) in
                                           compared["isolated"].items()},
            "isolated_max_difference": {name: diff for name, (_, diff) in
                                        compared["isolated"].items()},
        },
        "sources": {
            "float_onnxruntime": f"{source.name} in onnxruntime (float32), arg-max of the "
                                 f"logits (the Softmax's input)",
            "fpganet_ptq": "fpganet.compiler.compile_model(float model, MNIST test images "
                           "0..499, default calibration method), golden model's int8 logits",
            "qat_torch_fake_quant": "the fine-tuned torch model, fake-quantized, eval mode",
            "qat_fpganet_golden": f"`fpganet compile {path.name}` (no --calib), golden model's "
                                  f"int8 logits",
            "qat_onnxruntime": f"{path.name} in onnxruntime (CPU), int8 codes of the last "
                               f"QuantizeLinear",
            "float_check": "torch float logits against onnxruntime's on the float ONNX, all "
                           "test images",
        },
        "float_check_max_abs_difference": float_difference,
        "training": {
            "data": "MNIST training images (Yann LeCun, Corinna Cortes, Christopher J.C. "
                    "Burges), SHA-256 checked",
            "data_sha256": TRAIN_FILES,
            "images": int(len(train_x)),
            "epochs": args.epochs,
            "observers_frozen_from_epoch": freeze,
            "batch_size": args.batch_size,
            "optimizer": "SGD, momentum 0.9, cosine-decayed learning rate",
            "observer_warmup_batches": WARMUP_BATCHES,
            "learning_rate": args.lr,
            "seed": args.seed,
            "threads": args.threads,
            "epoch_losses": [round(loss, 5) for loss in losses],
            "quantization": "torch.ao.quantization eager mode: weights per-channel symmetric "
                            "int8 -127..127, activations per-tensor asymmetric int8; "
                            "Conv+ReLU and Linear+ReLU fused; max pools pass through",
        },
        "qdq_model": {"file": path.name, "opset": 13, "operators": ops,
                      "nodes": len(qdq_model.graph.node),
                      "compile_command": f"fpganet compile {path.name} -o {compiled.name}"},
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                     "onnxruntime": onnxruntime.__version__, "numpy": np.__version__,
                     "python": platform.python_version(), "fpganet_commit": git_commit()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "seconds": dict(times, total=round(time.perf_counter() - started, 1)),
    }
    report = out / "results.json"
    with atomic_file(report) as stream:
        stream.write((json.dumps(results, indent=1) + "\n").encode())
    t = results["top1"]
    for label, key in (("float (onnxruntime)", "float_onnxruntime"),
                       ("fpganet PTQ", "fpganet_ptq"), ("QAT, torch fake-quant", "qat_torch_fake_quant"),
                       ("QAT, fpganet golden", "qat_fpganet_golden"),
                       ("QAT, onnxruntime", "qat_onnxruntime")):
        print(f"{label:24s} top-1 {100 * t[key]['all']:.2f} % (eval split "
              f"{100 * t[key]['eval']:.2f} %)")
    agreement = results["qat_fpganet_vs_onnxruntime"]
    print(f"fpganet vs onnxruntime on the QAT model: arg-max agreement "
          f"{100 * agreement['argmax_agreement']:.2f} % ({agreement['argmax_disagreements']} "
          f"differ), int8 logits all equal {100 * agreement['int8_logits_all_equal']:.1f} %")
    print(f"wrote {report} ({results['seconds']['total']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
