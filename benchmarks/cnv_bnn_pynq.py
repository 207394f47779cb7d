"""FINN's CNV-W1A1 (CIFAR-10) from the trained parameters BNN-PYNQ publishes, as a QONNX model.

Xilinx/BNN-PYNQ keeps the network its PYNQ-Z1/Z2 overlay runs in FINN's folded layout
(``bnn/params/cifar10/cnvW1A1/<layer>-<pe>-weights.bin`` and ``-thres.bin``, written by its
``finnthesizer.py``): per processing element, one 64-bit word per (channel fold, input fold),
``simd`` weight bits in its low bits (bit ``i`` = input ``fold * simd + i``, 1 = +1, 0 = -1),
channel ``fold * pe + pe_index``; one int64 threshold per channel. A conv layer's inputs are
ordered (kernel row, kernel column, input channel). :func:`unfold` reads that layout back
into one weight matrix and one threshold vector a layer; ``tests/outside/cnv_w1a1_bnn_pynq.npz``
holds them (:func:`save_parameters`), with BNN-PYNQ's licence and SOURCE.md beside it.

The network (``config.h`` of its ``cnvW1A1`` overlay, ``top.cpp``), with FINN's arithmetic
(``finn-hlslib`` at BNN-PYNQ's submodule commit: ``ThresholdsActivation`` answers 1 where
``threshold < accumulator``):

* the pixels as FINN's host code feeds them: ``p / 255 * 2 - 1`` rounded to 8-bit fixed
  point with 7 fractional bits (``ap_fixed<8, 1, AP_RND, AP_SAT>``);
* layer 0, a 3x3 conv of binary weights on those 8-bit codes ``q``: its bit is 1 where
  ``2 * sum(w * q) > T`` (its threshold has 8 fractional bits, the input 7);
* layers 1-5 (3x3 convs) and 6-7 (dense), XNOR popcounts: 1 where ``popcount > T``;
  a 2x2 max pool after layers 1 and 3 (on the bits: an OR);
* layer 8 (dense, 10 of its 64 channels used): the popcount itself, the class its arg-max.

:func:`cnv_qonnx` writes that as QONNX, every float in it exact: the input's ``2x - 1`` and
an 8-bit ``Quant`` of scale 1/128; each layer a ``Conv`` or ``MatMul`` of ``BipolarQuant``
weights, an ``Add`` of ``-(T + 1) / 256`` (layer 0) or ``-(2T - K + 1)`` (``K`` inputs; since
``sum = 2 popcount - K``) and a ``BipolarQuant`` (+1 where its input is >= 0); the logits
``sum / 2 + K / 2``, the popcounts FINN's overlay returns.

Usage::

    python benchmarks/cnv_bnn_pynq.py unfold BNN_PYNQ/bnn/params/cifar10/cnvW1A1  # writes the npz
    python benchmarks/cnv_bnn_pynq.py qonnx -o build/cnv_w1a1.onnx
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from fpganet.errors import FpganetError
from fpganet.files import atomic_file

ROOT = Path(__file__).resolve().parent.parent
PARAMETERS = ROOT / "tests" / "outside" / "cnv_w1a1_bnn_pynq.npz"

#: BNN-PYNQ's cnvW1A1 overlay (``config.h``): (kind, input channels, output channels, kernel,
#: pe, simd); layer 8's weights are padded to 64 channels, 10 of them used.
LAYERS = (("conv", 3, 64, 3, 16, 3), ("conv", 64, 64, 3, 32, 32),
          ("conv", 64, 128, 3, 16, 32), ("conv", 128, 128, 3, 16, 32),
          ("conv", 128, 256, 3, 4, 32), ("conv", 256, 256, 3, 1, 32),
          ("dense", 256, 512, 1, 1, 4), ("dense", 512, 512, 1, 1, 8),
          ("dense", 512, 10, 1, 4, 1))
#: Layers followed by a 2x2 max pool.
POOLED = (1, 3)
IMAGE = (3, 32, 32)
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")


def unfold(folder):
    """``[(weights, thresholds)]`` per layer from BNN-PYNQ's folded files in ``folder``:
    weights int8 +-1 ``[out, fan-in]`` (fan-in ordered kernel row, column, input channel),
    thresholds int64 ``[out]`` (None for the last layer)."""
    folder = Path(folder)
    layers = []
    for index, (_, cin, cout, k, pe, simd) in enumerate(LAYERS):
        fanin = cin * k * k
        folds = -(-fanin // simd)
        words = np.stack([np.fromfile(folder / f"{index}-{p}-weights.bin", dtype="<u8")
                          for p in range(pe)]).reshape(pe, -1, folds)
        shifts = np.arange(simd, dtype=np.uint64)
        bits = (words[..., None] >> shifts) & np.uint64(1)            # [pe, nf, fold, simd]
        bits = bits.reshape(pe, -1, folds * simd).transpose(1, 0, 2)   # channel nf * pe + p
        bits = bits.reshape(-1, folds * simd)[:cout, :fanin]
        weights = (2 * bits.astype(np.int8) - 1).astype(np.int8)
        thresholds = None
        if index < len(LAYERS) - 1:
            per_pe = np.stack([np.fromfile(folder / f"{index}-{p}-thres.bin", dtype="<i8")
                               for p in range(pe)])
            thresholds = per_pe.T.reshape(-1)[:cout]
        layers.append((weights, thresholds))
    return layers


def save_parameters(layers, path=PARAMETERS):
    """The npz :func:`load_parameters` reads, written aside and renamed into place."""
    arrays = {}
    for index, (weights, thresholds) in enumerate(layers):
        arrays[f"w{index}"] = np.packbits(weights > 0, axis=1)
        arrays[f"k{index}"] = np.array(weights.shape[1])
        if thresholds is not None:
            if np.any(np.abs(thresholds) >= 1 << 31):
                raise ValueError(f"layer {index}: a threshold beyond 32 bits")
            arrays[f"t{index}"] = thresholds.astype(np.int32)
    with atomic_file(path) as stream:
        np.savez_compressed(stream, **arrays)


def load_parameters(path=PARAMETERS):
    """The layers :func:`unfold` gives, from the npz :func:`save_parameters` wrote."""
    with np.load(path) as data:
        layers = []
        for index in range(len(LAYERS)):
            fanin = int(data[f"k{index}"])
            bits = np.unpackbits(data[f"w{index}"], axis=1)[:, :fanin]
            weights = (2 * bits.astype(np.int8) - 1).astype(np.int8)
            key = f"t{index}"
            layers.append((weights, data[key].astype(np.int64) if key in data else None))
    return layers


def reference_logits(layers, pixels):
    """int64 [N, 10]: FINN's overlay's arithmetic (the module's docstring) in numpy, on
    uint8 pixels [N, 32, 32, 3] (RGB, NHWC)."""
    v = pixels.astype(np.float64) / 255 * 2 - 1
    x = np.clip(np.floor(v * 128 + 0.5), -128, 127).astype(np.int64)   # AP_RND, AP_SAT
    for index, ((kind, cin, cout, k, _, _), (weights, thresholds)) in enumerate(zip(LAYERS, layers)):
        w = weights.astype(np.int64)
        if kind == "conv":
            n, h, _, _ = x.shape
            o = h - k + 1
            cols = np.stack([x[:, ky:ky + o, kx:kx + o, :] for ky in range(k) for kx in range(k)],
                            axis=3).reshape(n, o, o, k * k * cin)
            total = cols @ w.T
        else:
            total = x.reshape(len(x), -1) @ w.T
        if index == 0:
            x = np.where(2 * total > thresholds, 1, -1)
        elif thresholds is not None:
            x = np.where((total + w.shape[1]) // 2 > thresholds, 1, -1)
        else:
            return (total + w.shape[1]) // 2
        if index in POOLED:
            n, h = x.shape[:2]
            x = x.reshape(n, h // 2, 2, h // 2, 2, -1).max(axis=(2, 4))
    raise AssertionError("the last layer has no thresholds")


def cnv_qonnx(layers):
    """The QONNX ModelProto of the network (the module's docstring); input ``[1, 3, 32, 32]``
    float pixels / 255, output ``[1, 10]`` popcounts."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def node(op, inputs, output, domain="", **attrs):
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    qonnx = "qonnx.custom_op.general"
    x = node("Mul", ["pixels", const("two", 2.0)], "doubled")
    x = node("Add", [x, const("minus_one", -1.0)], "centred")
    x = node("Quant", [x, const("input_scale", 1 / 128), const("zero", 0.0), const("eight", 8.0)],
             "input_q", domain=qonnx, signed=1, narrow=0, rounding_mode="ROUND")
    one = const("one", 1.0)
    for index, ((kind, cin, cout, k, _, _), (weights, thresholds)) in enumerate(zip(LAYERS, layers)):
        if kind == "conv":
            w = weights.reshape(cout, k, k, cin).transpose(0, 3, 1, 2)
        else:
            w = weights.T
        wq = node("BipolarQuant", [const(f"w{index}", w), one], f"w{index}_q", domain=qonnx)
        if kind == "conv":
            x = node("Conv", [x, wq], f"conv{index}", kernel_shape=[k, k])
        else:
            if index == 6:
                x = node("Flatten", [x], "flat", axis=1)
            x = node("MatMul", [x, wq], f"dense{index}")
        fanin = weights.shape[1]
        if thresholds is None:
            x = node("Mul", [x, const("half", 0.5)], "half_sum")
            node("Add", [x, const("half_fanin", fanin / 2)], "logits")
            break
        if index == 0:
            bias = -(thresholds + 1) / 256.0
        else:
            bias = -(2.0 * thresholds - fanin + 1)
        shape = (1, cout, 1, 1) if kind == "conv" else (1, cout)
        x = node("Add", [x, const(f"t{index}", bias.reshape(shape))], f"shifted{index}")
        x = node("BipolarQuant", [x, one], f"act{index}", domain=qonnx)
        if index in POOLED:
            x = node("MaxPool", [x], f"pool{index}", kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph(
        nodes, "cnv_w1a1_bnn_pynq",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, *IMAGE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(qonnx, 1)],
                              producer_name="fpganet benchmarks/cnv_bnn_pynq.py")
    return onnx.shape_inference.infer_shapes(model)


def write_model(path, parameters=PARAMETERS):
    """:func:`cnv_qonnx` of the npz at ``parameters``, written to ``path`` aside and renamed."""
    with atomic_file(path) as stream:
        stream.write(cnv_qonnx(load_parameters(parameters)).SerializeToString())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    unfold_cmd = sub.add_parser("unfold", help="BNN-PYNQ's folded files -> the npz")
    unfold_cmd.add_argument("folder", type=Path)
    unfold_cmd.add_argument("-o", type=Path, default=PARAMETERS)
    qonnx_cmd = sub.add_parser("qonnx", help="the npz -> a QONNX model")
    qonnx_cmd.add_argument("-o", type=Path, required=True)
    args = parser.parse_args(argv)
    # Only the npz this script keeps in tests/outside is ever replaced: not a file of the user's.
    if args.o.exists() and args.o.resolve() != PARAMETERS.resolve():
        print(f"cnv_bnn_pynq.py: error: '{args.o}' exists; refusing to overwrite it: choose "
              f"another name", file=sys.stderr)
        return 2
    try:
        if args.command == "unfold":
            save_parameters(unfold(args.folder), args.o)
        else:
            write_model(args.o)
    except (FpganetError, OSError, ValueError) as error:
        print(f"cnv_bnn_pynq.py: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
