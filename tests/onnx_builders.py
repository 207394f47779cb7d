"""Small ONNX graphs built with onnx.helper, and onnxruntime to run them (for the tests)."""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper


def init(name, array):
    """An initializer from a numpy array."""
    return numpy_helper.from_array(np.asarray(array), name)


def weights(shape, seed, scale=0.3):
    return (np.random.default_rng(seed).normal(0, scale, shape)).astype(np.float32)


def make(nodes, initializers=(), in_shape=("N", 3, 9, 9), opset=13, in_name="x", out_name="y",
         extra_outputs=()):
    """A model with one float input ``in_name`` and one float output ``out_name`` (shape left open)."""
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None), *extra_outputs],
        list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def node(op, inputs, outputs, name=None, **attrs):
    return helper.make_node(op, inputs, outputs, name=name or f"{op.lower()}_{outputs[0]}", **attrs)


def constant(name, array):
    """A Constant node producing ``name``."""
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=numpy_helper.from_array(np.asarray(array), name))


def ort_run(model, x, in_name="x"):
    """First output of ``model`` on ``x`` with onnxruntime (CPU)."""
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {in_name: np.asarray(x, np.float32)})[0]


def save(model, path):
    path.write_bytes(model.SerializeToString())
    return path


def nhwc_cnn(channels=3):
    """A Keras/tf2onnx-style input [N, 8, 8, channels], a Transpose to NCHW, Conv(4, 3x3) Relu
    Flatten Gemm(10)."""
    return make([node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
                 node("Conv", ["t", "w"], ["c"]), node("Relu", ["c"], ["r"]),
                 node("Flatten", ["r"], ["f"]), node("Gemm", ["f", "g"], ["y"], transB=1)],
                [init("w", weights((4, channels, 3, 3), 1)), init("g", weights((10, 144), 2))],
                in_shape=("N", 8, 8, channels))


def small_cnn(in_channels=3, size=9, opset=13):
    """Conv(stride 2, asymmetric pads, 3x2 kernel) Relu MaxPool(pads) Flatten Gemm Relu Gemm."""
    c1, c2 = 5, 7
    w1 = weights((c1, in_channels, 3, 2), 1)
    b1 = weights((c1,), 2, 0.1)
    w2 = weights((c2, c1, 3, 3), 3)
    b2 = weights((c2,), 4, 0.1)
    # size 9: conv1 (pads t1 l0 b2 r1, stride 2) -> 5x5; conv2 (pads 1, stride 1) -> 5x5;
    # maxpool 3x3 stride 2 pads 1 -> 3x3.
    h1 = (size + 1 + 2 - 3) // 2 + 1
    w1_out = (size + 0 + 1 - 2) // 2 + 1
    hp, wp = (h1 + 2 - 3) // 2 + 1, (w1_out + 2 - 3) // 2 + 1
    features = c2 * hp * wp
    f1 = weights((11, features), 5, 0.2)
    fb1 = weights((11,), 6, 0.1)
    f2 = weights((4, 11), 7, 0.3)
    fb2 = weights((4,), 8, 0.1)
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 2, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        node("MaxPool", ["c2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Relu", ["p2"], ["r2"]),
        node("Flatten", ["r2"], ["f"]),
        node("Gemm", ["f", "f1", "fb1"], ["g1"], transB=1),
        node("Relu", ["g1"], ["r3"]),
        node("Gemm", ["r3", "f2", "fb2"], ["y"], transB=1),
    ]
    inits = [init(n, a) for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("f1", f1),
                                     ("fb1", fb1), ("f2", f2), ("fb2", fb2))]
    return make(nodes, inits, in_shape=("N", in_channels, size, size), opset=opset)
