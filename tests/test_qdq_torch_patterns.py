"""QDQ ONNX as ``torch.onnx.export`` writes a fake-quantized (QAT) model, built here with the
``onnx`` helper API (no torch needed): float weights behind a per-channel QuantizeLinear ->
DequantizeLinear pair (axis 0, int8 zero points), float biases, one int8 zero point shared
by several Q/DQ nodes through Identity nodes, a Flatten before the Gemm, no Softmax. fpganet
must fold each weight's QuantizeLinear into the int8 codes onnxruntime computes, compile
without calibration and agree with onnxruntime; what it cannot represent is refused in one
line. ``benchmarks/qat_lenet5.py`` runs the real export end to end.
"""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpganet.cli import main
from fpganet.compiler import compile_model
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.qnet import QConv

ort = pytest.importorskip("onnxruntime")

SHAPE = (1, 8, 8)
#: Weight tensors whose QuantizeLinear codes the tests read back from onnxruntime.
WEIGHTS = ("conv1.weight", "conv2.weight", "fc.weight")


def _weight(rng, shape, scales, ties=True):
    """Float weights that quantize to codes in -120..120 under ``scales`` (per output
    channel); with ``ties``, a quarter of them lie halfway between two codes."""
    codes = rng.integers(-120, 121, shape).astype(np.float32)
    if ties:
        codes += np.where(rng.random(shape) < 0.25, np.float32(0.5), np.float32(0))
    return (codes * scales.reshape((-1,) + (1,) * (len(shape) - 1))).astype(np.float32)


def torch_style_model(seed=0, mutate=None):
    """Conv(1->4, 3x3, pad 1)+ReLU, Conv(4->6, 3x3, pad 1)+ReLU, MaxPool 2x2, Flatten,
    Gemm(96->5): the Q/DQ pattern of torch.onnx.export (opset 13) of an eager-mode QAT model."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def init(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def qdq(tensor, scale, zero_point, tag, axis=None):
        extra = {} if axis is None else {"axis": axis}
        nodes.append(helper.make_node("QuantizeLinear", [tensor, scale, zero_point],
                                      [f"{tag}/Q"], name=f"{tag}/QuantizeLinear", **extra))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}/Q", scale, zero_point],
                                      [f"{tag}/DQ"], name=f"{tag}/DequantizeLinear", **extra))
        return f"{tag}/DQ"

    def weight_qdq(name, shape):
        scales = rng.uniform(0.002, 0.01, shape[0]).astype(np.float32)
        init(name, _weight(rng, shape, scales))
        init(f"{name}_scale", scales)
        init(f"{name}_zp", np.zeros(shape[0], np.int8))
        return qdq(name, f"{name}_scale", f"{name}_zp", name, axis=0)

    # One zero point (-128, after a ReLU) shared through Identity nodes, as torch writes it.
    init("shared_zp", np.array([-128], np.int8))
    nodes.append(helper.make_node("Identity", ["shared_zp"], ["zp_relu1"], name="Identity_1"))
    nodes.append(helper.make_node("Identity", ["shared_zp"], ["zp_relu2"], name="Identity_2"))
    x = qdq("input", init("in_scale", np.array([0.03], np.float32)),
            init("in_zp", np.array([-5], np.int8)), "input_q")
    x = helper.make_node("Conv", [x, weight_qdq("conv1.weight", (4, 1, 3, 3)),
                                  init("conv1.bias", rng.normal(0, 0.1, 4).astype(np.float32))],
                         ["conv1"], name="conv1", pads=[1] * 4, kernel_shape=[3, 3])
    nodes += [x, helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1")]
    x = qdq("relu1", init("relu1_scale", np.array([0.02], np.float32)), "zp_relu1", "relu1_q")
    x = helper.make_node("Conv", [x, weight_qdq("conv2.weight", (6, 4, 3, 3)),
                                  init("conv2.bias", rng.normal(0, 0.1, 6).astype(np.float32))],
                         ["conv2"], name="conv2", pads=[1] * 4, kernel_shape=[3, 3])
    nodes += [x, helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2")]
    x = qdq("relu2", init("relu2_scale", np.array([0.02], np.float32)), "zp_relu2", "relu2_q")
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="pool", kernel_shape=[2, 2],
                                  strides=[2, 2]))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1))
    nodes.append(helper.make_node("Gemm", ["flat", weight_qdq("fc.weight", (5, 96)),
                                           init("fc.bias", rng.normal(0, 0.1, 5).astype(np.float32))],
                                  ["fc"], name="fc", transB=1))
    qdq("fc", init("fc_scale", np.array([0.05], np.float32)),
        init("fc_zp", np.array([3], np.int8)), "fc_q")
    graph = helper.make_graph(
        nodes, "torch_qat_pattern",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *SHAPE])],
        [helper.make_tensor_value_info("fc_q/DQ", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    if mutate:
        mutate(model)
    onnx.checker.check_model(model)
    return model


def _save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _onnxruntime(model, x, names):
    """onnxruntime's values of the tensors ``names`` (graph outputs added for them)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for name in names:
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(list(names), {"input": x})))


def test_torch_export_pattern_compiles_and_agrees_with_onnxruntime(tmp_path):
    model = torch_style_model()
    path = _save(model, tmp_path)
    net = compile_model(path, out_dir=tmp_path / "OUT")
    assert net.calibration["method"] == "qdq" and net.calibration["samples"] == 0
    x = np.random.default_rng(1).normal(0, 1, (200, *SHAPE)).astype(np.float32)
    theirs = _onnxruntime(model, x, [f"{w}/Q" for w in WEIGHTS] + ["fc_q/Q", "input_q/Q"])
    # The weights: exactly the codes onnxruntime's QuantizeLinear gives, ties included.
    layers = [layer for layer in net.layers if isinstance(layer, QConv)]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for layer, name in zip(layers, WEIGHTS, strict=True):
        codes = theirs[f"{name}/Q"]
        np.testing.assert_array_equal(layer.weight.reshape(codes.shape), codes)
        np.testing.assert_array_equal(layer.s_w, inits[f"{name}_scale"])
    # The input's quantization, and the logits within the requantization's 1 LSB.
    np.testing.assert_array_equal(net.quantize_input(x), theirs["input_q/Q"])
    ours = run_golden(net, net.quantize_input(x)).reshape(len(x), -1).astype(np.int16)
    logits = theirs["fc_q/Q"].astype(np.int16)
    assert np.max(np.abs(ours - logits)) <= 1
    assert np.mean(ours.argmax(1) == logits.argmax(1)) >= 0.97
    assert main(["compile", str(path), "-o", str(tmp_path / "CLI")]) == 0


def _low_weight(model):
    """A conv weight below -127.5 scales: its ONNX code is -128."""
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == "conv1.weight":
            w = numpy_helper.to_array(tensor).copy()
            scales = numpy_helper.to_array(next(t for t in model.graph.initializer
                                                if t.name == "conv1.weight_scale"))
            w[0, 0, 0, 0] = -127.8 * scales[0]
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(w, tensor.name))


def _nonzero_weight_zero_point(model):
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == "conv2.weight_zp":
            model.graph.initializer[index].CopyFrom(
                numpy_helper.from_array(np.full(6, 2, np.int8), tensor.name))


def _identity_of_activation(model):
    """The shared zero point's Identity reads an activation, not a constant."""
    node = next(n for n in model.graph.node if n.name == "Identity_2")
    node.input[0] = "input"


def _weight_q_read_by_conv(model):
    """The weight's QuantizeLinear output goes straight into a Conv (no DequantizeLinear)."""
    conv = next(n for n in model.graph.node if n.name == "conv2")
    conv.input[1] = "conv2.weight/Q"


def _weight_axis_1(model):
    for node in model.graph.node:
        if node.name.startswith("conv2.weight/"):
            node.attribute[0].i = 1


def _nan_weight(model):
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == "fc.weight":
            w = numpy_helper.to_array(tensor).copy()
            w[1, 2] = np.nan
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(w, tensor.name))


@pytest.mark.parametrize("mutate, message", [
    (_low_weight, "reach -128"),
    (_nonzero_weight_zero_point, "nonzero zero point"),
    (_identity_of_activation, "not a constant"),
    (_weight_q_read_by_conv, "feeds Conv .conv2.; only a DequantizeLinear may read"),
    (_weight_axis_1, "scales along axis 1"),
    (_nan_weight, "NaN or infinity"),
])
def test_torch_pattern_it_cannot_represent_is_refused_in_one_line(mutate, message, tmp_path,
                                                                  capfd):
    path = _save(torch_style_model(mutate=mutate), tmp_path)
    with pytest.raises(FpganetError, match=message):
        compile_model(path, program=False)
    assert main(["compile", str(path), "-o", str(tmp_path / "OUT")]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
