"""Two small models others published compile as their authors wrote them, and their golden
outputs agree with their own runtime's on every test input (files: ``tests/outside/``, their
SOURCE.md).

- tflite-micro's micro_speech (int8 TFLite, a flat [1, 1960] input and its RESHAPE): the
  golden model in the ``tflite`` mode equals LiteRT's reference kernels on every input.
- The ONNX zoo's mnist-8 (CNTK, opset 8), rebuilt from the zoo's first CNTK export of the same
  network (its weights): the int8 golden model picks onnxruntime's float class on every MNIST
  image tested, and ``fpganet check`` passes. The file as first exported (opset 1) is refused
  in one line, as onnxruntime refuses it.
"""

from pathlib import Path

import numpy as np
import pytest

from fpganet import load_compiled, run_network
from fpganet.cli import main
from fpganet.datasets import mnist, write_inputs

OUTSIDE = Path(__file__).parent / "outside"
MICRO_SPEECH = OUTSIDE / "micro_speech_quantized.tflite"
MNIST_CNTK = OUTSIDE / "mnist-cntk.onnx"


def mnist8_model():
    """The zoo's mnist-8 graph, as CNTK wrote it at opset 8 (IR 3: every initializer a graph
    input too; biases [C, 1, 1]; the dense weight a Reshape of an initializer), with the
    weights of ``mnist-cntk.onnx`` (the same network at opset 1, where they are Constants)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    source = onnx.load(MNIST_CNTK)
    weights = {node.output[0]: numpy_helper.to_array(node.attribute[0].t)
               for node in source.graph.node if node.op_type == "Constant"}
    initializers = [
        numpy_helper.from_array(weights["Parameter5"], "Parameter5"),
        numpy_helper.from_array(weights["Parameter6"].reshape(8, 1, 1), "Parameter6"),
        numpy_helper.from_array(weights["Parameter87"], "Parameter87"),
        numpy_helper.from_array(weights["Parameter88"].reshape(16, 1, 1), "Parameter88"),
        numpy_helper.from_array(weights["Parameter193"], "Parameter193"),
        numpy_helper.from_array(np.array([256, 10], np.int64), "Parameter193_reshape1_shape"),
        numpy_helper.from_array(weights["Parameter194"], "Parameter194"),
        numpy_helper.from_array(np.array([1, 256], np.int64), "Pooling160_Output_0_reshape0_shape"),
    ]
    conv = dict(kernel_shape=[5, 5], strides=[1, 1], auto_pad="SAME_UPPER", group=1,
                dilations=[1, 1])

    def pool(size):
        return dict(kernel_shape=[size, size], strides=[size, size], pads=[0, 0, 0, 0],
                    auto_pad="NOTSET")
    node = helper.make_node
    nodes = [
        node("Reshape", ["Parameter193", "Parameter193_reshape1_shape"], ["Parameter193_reshape1"],
             "Times212_reshape1"),
        node("Conv", ["Input3", "Parameter5"], ["Convolution28_Output_0"], "Convolution28", **conv),
        node("Add", ["Convolution28_Output_0", "Parameter6"], ["Plus30_Output_0"], "Plus30"),
        node("Relu", ["Plus30_Output_0"], ["ReLU32_Output_0"], "ReLU32"),
        node("MaxPool", ["ReLU32_Output_0"], ["Pooling66_Output_0"], "Pooling66", **pool(2)),
        node("Conv", ["Pooling66_Output_0", "Parameter87"], ["Convolution110_Output_0"],
             "Convolution110", **conv),
        node("Add", ["Convolution110_Output_0", "Parameter88"], ["Plus112_Output_0"], "Plus112"),
        node("Relu", ["Plus112_Output_0"], ["ReLU114_Output_0"], "ReLU114"),
        node("MaxPool", ["ReLU114_Output_0"], ["Pooling160_Output_0"], "Pooling160", **pool(3)),
        node("Reshape", ["Pooling160_Output_0", "Pooling160_Output_0_reshape0_shape"],
             ["Pooling160_Output_0_reshape0"], "Times212_reshape0"),
        node("MatMul", ["Pooling160_Output_0_reshape0", "Parameter193_reshape1"],
             ["Times212_Output_0"], "Times212"),
        node("Add", ["Times212_Output_0", "Parameter194"], ["Plus214_Output_0"], "Plus214"),
    ]
    inputs = [helper.make_tensor_value_info("Input3", TensorProto.FLOAT, [1, 1, 28, 28])]
    inputs += [helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
               for tensor in initializers]
    graph = helper.make_graph(nodes, "CNTKGraph", inputs, [helper.make_tensor_value_info(
        "Plus214_Output_0", TensorProto.FLOAT, [1, 10])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)],
                              producer_name="CNTK")
    model.ir_version = 3
    onnx.checker.check_model(model)
    return model


def test_mnist8_as_exported_compiles_and_keeps_onnxruntimes_classes(tmp_path, capsys):
    import onnx
    import onnxruntime as ort

    path = tmp_path / "mnist-8.onnx"
    onnx.save(mnist8_model(), path)
    calib = write_inputs(tmp_path / "calib.npz", mnist("calib", limit=100, unit=True)[0])
    x, y = mnist("eval", limit=300, unit=True)
    test = write_inputs(tmp_path / "test.npz", x, y)
    # 8,864 activation bytes: more than the iCEBreaker's default holds, so the ULX3S.
    assert main(["compile", str(path), "--calib", str(calib), "--board", "ulx3s",
                 "-o", str(tmp_path / "out")]) == 0
    session = ort.InferenceSession(str(path))
    reference = np.concatenate([session.run(None, {"Input3": image[None]})[0] for image in x])
    golden = run_network(load_compiled(tmp_path / "out"), x).logits
    assert np.array_equal(golden.argmax(1), reference.argmax(1))
    assert (reference.argmax(1) == y).mean() >= 0.98       # the zoo's 1.1 % top-1 error
    capsys.readouterr()
    assert main(["check", str(tmp_path / "out"), "--inputs", str(test)]) == 0
    assert "check passed" in capsys.readouterr().out


def test_mnist_at_opset_1_is_refused_in_one_line(tmp_path, capsys):
    calib = write_inputs(tmp_path / "calib.npz", mnist("calib", limit=10, unit=True)[0])
    assert main(["compile", str(MNIST_CNTK), "--calib", str(calib), "--board", "ulx3s",
                 "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "opset 1" in err and "opset 7 and later" in err
    assert not (tmp_path / "out").exists()


def test_micro_speech_compiles_as_published_and_equals_litert(tmp_path, capsys):
    """`check` compares the golden logits with LiteRT's (the tensor before the dropped
    SOFTMAX) bit for bit, end to end and layer by layer."""
    pytest.importorskip("ai_edge_litert.interpreter")
    assert main(["compile", str(MICRO_SPEECH), "-o", str(tmp_path / "out")]) == 0
    net = load_compiled(tmp_path / "out")
    assert net.config.requant_mode == "tflite" and list(net.input_shape) == [1960]
    # Random spectrograms over the whole int8 range of the input's quantization (scale 0.1017,
    # zero point -128: 0 to 25.9).
    x = np.random.default_rng(3).uniform(0, 26, (64, 1960)).astype(np.float32)
    assert set(np.unique(net.quantize_input(x))) == set(range(-128, 128))
    inputs = write_inputs(tmp_path / "x.npz", x)
    capsys.readouterr()
    assert main(["check", str(tmp_path / "out"), "--inputs", str(inputs), "--limit", "64"]) == 0
    out = capsys.readouterr().out
    assert "100.00 % of outputs equal" in out and "check passed" in out
