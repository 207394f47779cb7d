"""The ONNX importer's op registry: each handler on a one-node model, and the supported list.

Each registered op is imported here as the only node of a model (a second node only where
the op cannot stand alone: BatchNormalization, a constant Add and MatMul fold into the
Gemm before them) with :class:`~fpganet.model.onnx_context.ImportContext` before ReLU
fusion, and its IR checked against onnxruntime on random inputs.
"""

import numpy as np
import pytest

from fpganet.errors import FpganetError
from fpganet.model import SUPPORTED_OPS, import_model, run_float
from fpganet.model.ir import Add, AvgPool, Conv, Dense, MaxPool, Relu, Reshape
from fpganet.model.onnx_context import ImportContext
from fpganet.model.onnx_ops import ONNX_OPS, OnnxOp, onnx_handler
from onnx_builders import init, make, node, ort_run, weights

MAP = ("N", 4, 6, 6)
VECTOR = ("N", 6)


def gemm_before(name):
    """A Gemm on [N, 6] making the [N, 5] tensor ``name`` (for ops that fold into it)."""
    return ([node("Gemm", ["x", "gw", "gb"], [name], transB=1)],
            [init("gw", weights((5, 6), 40)), init("gb", weights((5,), 41, 0.1))])


def one_node(op, inputs=("x",), inits=(), **attrs):
    return [node(op, list(inputs), ["y"], **attrs)], list(inits)


def bn_after_gemm():
    nodes, inits = gemm_before("g")
    nodes.append(node("BatchNormalization", ["g", "s", "bb", "m", "v"], ["y"]))
    inits += [init("s", weights((5,), 42) + 1), init("bb", weights((5,), 43)),
              init("m", weights((5,), 44)), init("v", np.abs(weights((5,), 45)) + 0.5)]
    return nodes, inits


def add_after_gemm():
    nodes, inits = gemm_before("g")
    nodes.append(node("Add", ["g", "c"], ["y"]))
    return nodes, inits + [init("c", weights((5,), 46))]


def matmul_add():
    return ([node("MatMul", ["x", "mw"], ["t"]), node("Add", ["t", "mb"], ["y"])],
            [init("mw", weights((6, 3), 47)), init("mb", weights((3,), 48))])


#: op -> (nodes and initializers, input shape, the IR layer types it makes).
CASES = {
    "Conv": (one_node("Conv", ("x", "w", "b"), [init("w", weights((5, 4, 3, 3), 1)),
                                                init("b", weights((5,), 2))], pads=[1, 0, 1, 2]),
             MAP, [Conv]),
    "Relu": (one_node("Relu"), MAP, [Relu]),
    "Clip": (one_node("Clip", ("x", "lo", "hi"), [init("lo", np.float32(0)),
                                                  init("hi", np.float32(0.5))]), MAP, [Relu]),
    "MaxPool": (one_node("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                MAP, [MaxPool]),
    "AveragePool": (one_node("AveragePool", kernel_shape=[2, 2], strides=[2, 2]), MAP, [AvgPool]),
    "GlobalAveragePool": (one_node("GlobalAveragePool"), MAP, [AvgPool]),
    "ReduceMean": (one_node("ReduceMean", axes=[2, 3]), MAP, [AvgPool]),
    "Gemm": (one_node("Gemm", ("x", "w", "b"), [init("w", weights((5, 6), 3)),
                                                init("b", weights((5,), 4))], transB=1),
             VECTOR, [Dense]),
    "MatMul": (matmul_add(), VECTOR, [Dense]),
    "Add": (add_after_gemm(), VECTOR, [Dense]),
    "BatchNormalization": (bn_after_gemm(), VECTOR, [Dense]),
    "Flatten": (one_node("Flatten"), MAP, [Reshape]),
    "Reshape": (one_node("Reshape", ("x", "shape"), [init("shape", np.array([-1, 72, 2]))]),
                MAP, [Reshape]),
    "Unsqueeze": (one_node("Unsqueeze", ("x", "axes"), [init("axes", np.array([2]))]), VECTOR,
                  []),
    "Squeeze": (one_node("Squeeze", ("x", "axes"), [init("axes", np.array([2]))]),
                ("N", 6, 1), []),
    "Transpose": (([node("Transpose", ["x"], ["t"], perm=[1, 0]),
                    node("Gemm", ["w", "t"], ["u"]), node("Transpose", ["u"], ["y"], perm=[1, 0])],
                   [init("w", weights((4, 6), 5))]), VECTOR, [Dense]),
    "Dropout": (one_node("Dropout"), MAP, []),
    "Identity": (one_node("Identity"), MAP, []),
    "Softmax": (one_node("Softmax"), VECTOR, []),
    "LogSoftmax": (one_node("LogSoftmax"), VECTOR, []),
}


def test_every_registered_op_has_a_case_here():
    assert sorted(CASES) == sorted(ONNX_OPS)


@pytest.mark.parametrize("op", sorted(CASES))
def test_handler_on_a_one_node_model(op):
    (nodes, inits), in_shape, kinds = CASES[op]
    assert any(n.op_type == op for n in nodes)
    model = make(nodes, inits, in_shape=in_shape)
    graph = ImportContext(model).run()
    assert [type(layer) for layer in graph.layers] == kinds
    x = np.random.default_rng(7).normal(0, 1, (3, *in_shape[1:])).astype(np.float32)
    expected = ort_run(model, x)
    if graph.dropped_output_op:
        assert graph.dropped_output_op == op
        expected = x   # the IR outputs the logits before the dropped normalization
    got = run_float(graph, x) if graph.layers else x
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


def test_supported_ops_are_the_registry():
    assert SUPPORTED_OPS == {op: entry.restriction for op, entry in ONNX_OPS.items()}
    assert all(entry.op_type == op for op, entry in ONNX_OPS.items())


def unsupported_list(model):
    with pytest.raises(FpganetError) as caught:
        import_model(model)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unsupported op 'Sigmoid' in Sigmoid node 'act'; supported: ")
    return message.split("; supported: ")[1].split(", ")


def test_refusal_lists_exactly_the_registry():
    model = make([node("Sigmoid", ["x"], ["y"], name="act")], in_shape=VECTOR)
    assert unsupported_list(model) == sorted(ONNX_OPS)


def test_a_new_op_is_one_registered_function(monkeypatch):
    """Registering a handler is all the importer needs: the op imports, and the refusal
    message names every registered op."""
    model = make([node("Sigmoid", ["x"], ["y"], name="act")], in_shape=VECTOR)
    monkeypatch.setitem(ONNX_OPS, "Tanh", OnnxOp("Tanh", None))
    assert "Tanh" in unsupported_list(model)

    def sigmoid_as_identity(ctx, node, index, data):
        return data.view, data.orientation

    onnx_handler("Sigmoid", "test only")(sigmoid_as_identity)
    try:
        graph = import_model(model)
    finally:
        del ONNX_OPS["Sigmoid"]
    assert graph.layers == [] and graph.output_shape == (6,)
    unsupported_list(model)


def test_two_handlers_for_one_op_are_refused():
    with pytest.raises(ValueError, match="two handlers for ONNX op 'Conv'"):
        onnx_handler("Conv")(lambda ctx, node, index, data: None)


# TFLite --------------------------------------------------------------------------------------

def tflite_model(build_ops, in_shape=(1, 6, 6, 4), dtype=None, quant=None):
    """A float (or int8 input, with ``quant``) TFLite model: ``build_ops(m, x)`` adds the ops
    and returns the output tensor."""
    from test_tflite_float import FLOAT32, TFLiteModel

    m = TFLiteModel(seed=3)
    x = m.tensor("image", in_shape, FLOAT32 if dtype is None else dtype, quant=quant)
    y = build_ops(m, x)
    return m.build([x], [y])


def tfl_conv(m, x, depthwise=False):
    from test_tflite_float import SAME

    if depthwise:
        w, b = m.weights("dw", (1, 3, 3, 8))
        y = m.tensor("y", (1, 3, 3, 8))
        return m.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", Padding=SAME,
                    StrideH=2, StrideW=2, DepthMultiplier=2, FusedActivationFunction=0,
                    DilationHFactor=1, DilationWFactor=1)
    w, b = m.weights("conv", (5, 3, 2, 4))
    y = m.tensor("y", (1, 3, 3, 5))
    return m.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", Padding=SAME, StrideH=2,
                StrideW=2, FusedActivationFunction=3, DilationHFactor=1, DilationWFactor=1)


def tfl_flatten_dense(m, x, reshape=True):
    flat = x
    if reshape:
        flat = m.tensor("flat", (1, 144))
        m.op("RESHAPE", [x, m.const("shape", np.array([1, 144], np.int32))], [flat],
             "ReshapeOptions", NewShape=[1, 144])
    w, b = m.weights("fc", (7, 144))
    y = m.tensor("y", (1, 7))
    return m.op("FULLY_CONNECTED", [flat, w, b], [y], "FullyConnectedOptions",
                FusedActivationFunction=1)


def tfl_pool(code, **fields):
    def build(m, x):
        y = m.tensor("y", (1, 3, 3, 4))
        return m.op(code, [x], [y], "Pool2DOptions", StrideH=2, StrideW=2, FilterHeight=2,
                    FilterWidth=2, FusedActivationFunction=0, **fields)
    return build


def tfl_single(code, out_shape=(1, 6, 6, 4), *extra, options=None, **fields):
    def build(m, x):
        y = m.tensor("y", out_shape)
        inputs = [x] + [m.const(name, array) for name, array in extra]
        return m.op(code, inputs, [y], options, **fields)
    return build


def tfl_softmax(m, x):
    logits = tfl_flatten_dense(m, x)
    y = m.tensor("probabilities", (1, 7))
    return m.op("SOFTMAX", [logits], [y], "SoftmaxOptions", Beta=1.0)


#: float op -> (builder, the IR layer types its walk makes).
TFLITE_CASES = {
    "CONV_2D": (tfl_conv, [Conv]),
    "DEPTHWISE_CONV_2D": (lambda m, x: tfl_conv(m, x, depthwise=True), [Conv]),
    # TFLite's FULLY_CONNECTED flattens an H x W x C input itself.
    "FULLY_CONNECTED": (lambda m, x: tfl_flatten_dense(m, x, reshape=False), [Reshape, Dense]),
    "RESHAPE": (tfl_flatten_dense, [Reshape, Dense]),
    "ADD": (lambda m, x: m.op("ADD", [x, x], [m.tensor("y", (1, 6, 6, 4))], "AddOptions",
                              FusedActivationFunction=0), [Add]),
    "AVERAGE_POOL_2D": (tfl_pool("AVERAGE_POOL_2D", Padding=1), [AvgPool]),
    "MAX_POOL_2D": (tfl_pool("MAX_POOL_2D", Padding=0), [MaxPool]),
    "MEAN": (tfl_single("MEAN", (1, 4), ("axes", np.array([1, 2], np.int32)),
                        options="ReducerOptions", KeepDims=False), [AvgPool]),
    "RELU": (tfl_single("RELU"), [Relu]),
    "RELU6": (tfl_single("RELU6"), [Relu]),
    "SOFTMAX": (tfl_softmax, [Reshape, Dense]),
}


def tflite_parts(path):
    from fpganet.model.tflite_import import _parse

    parsed = _parse(path)
    return parsed.tensors, parsed.ops, parsed.graph_inputs, parsed.graph_outputs


def test_every_float_tflite_op_has_a_case_here():
    from fpganet.model.tflite_import import FLOAT_OPS

    assert sorted(TFLITE_CASES) == sorted(FLOAT_OPS)


@pytest.mark.parametrize("code", sorted(TFLITE_CASES))
def test_tflite_handler_on_a_small_float_model(code, tmp_path):
    """The op's handler (before ReLU fusion) against LiteRT's float kernels."""
    from fpganet.model.ir import Graph
    from fpganet.model.tflite_context import FloatContext
    from test_tflite_float import litert

    build, kinds = TFLITE_CASES[code]
    path = tmp_path / f"{code}.tflite"
    path.write_bytes(tflite_model(build))
    tensors, ops, inputs, outputs = tflite_parts(path)
    assert any(op.code == code for op in ops)
    ctx = FloatContext(tensors, ops, inputs, outputs)
    ctx.run()
    assert [type(layer) for layer in ctx.layers] == kinds
    name, shape = ctx.logits_name_shape()
    graph = Graph("t", ctx.input_name, ctx.input_shape, name, shape, ctx.layers,
                  input_layout="nhwc")
    # Spread wide enough that RELU6 clips; the model's own NHWC inputs, as LiteRT takes them.
    x = 4 * np.random.default_rng(8).standard_normal((4, *ctx.input_shape)).astype(np.float32)
    reference, _ = litert(path, x)
    ours = run_float(graph, x)
    if ours.ndim == 4:   # NCHW against LiteRT's NHWC
        ours = ours.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(ours.reshape(reference.shape), reference, rtol=1e-4, atol=1e-4)


def tflite_unsupported_list(path, load):
    with pytest.raises(FpganetError) as caught:
        load(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unsupported op TANH (#0, output 'y'); supported: ")
    return tuple(message.split("; supported: ")[1].split(", "))


@pytest.mark.parametrize("kind", ["float", "int8"])
def test_tflite_refusal_lists_exactly_the_registry(kind, tmp_path):
    from fpganet.model.tflite_import import FLOAT_OPS, TFLITE_OPS, load_tflite, load_tflite_float
    from fpganet.model.tflite_registry import HANDLERS, supported
    from test_tflite_float import INT8

    int8 = kind == "int8"
    path = tmp_path / "tanh.tflite"
    path.write_bytes(tflite_model(tfl_single("TANH"), dtype=INT8 if int8 else None,
                                  quant=([0.1], [0]) if int8 else None))
    listed = tflite_unsupported_list(path, load_tflite if int8 else load_tflite_float)
    assert listed == supported(kind) == (TFLITE_OPS if int8 else FLOAT_OPS)
    assert set(listed) <= set(HANDLERS[kind])


def test_float_tflite_quantize_is_refused_as_a_mixed_model(tmp_path):
    from fpganet.model.tflite_import import load_tflite_float

    path = tmp_path / "mixed.tflite"
    path.write_bytes(tflite_model(lambda m, x: tfl_conv(m, m.op(
        "QUANTIZE", [x], [m.tensor("q", (1, 6, 6, 4))]))))
    with pytest.raises(FpganetError, match="QUANTIZE #0 .* in a model with float32 weights: "
                                           "a mixed model"):
        load_tflite_float(path)


# The int8 TFLite path: the float IR with the model's quantization attached -------------------

def int8_tflite_model():
    """image int8 [1, 6, 6, 4] -> CONV_2D 3x3 SAME stride 2 RELU (per-channel weight scales)
    -> FULLY_CONNECTED over the flattened 3x3x5 map -> logits int8 [1, 3]."""
    from test_tflite_float import INT8, INT32, SAME, TFLiteModel

    rng = np.random.default_rng(11)
    m = TFLiteModel()
    x = m.tensor("image", (1, 6, 6, 4), INT8, quant=([0.05], [-3]))
    conv_codes = rng.integers(-127, 128, (5, 3, 3, 4)).astype(np.int8)
    conv_scales = rng.uniform(0.002, 0.01, 5).astype(np.float32)
    w = m.tensor("conv/w", conv_codes.shape, INT8, conv_codes.tobytes(),
                 quant=(conv_scales, [0] * 5))
    b = m.tensor("conv/b", (5,), INT32, rng.integers(-500, 500, 5).astype(np.int32).tobytes())
    y = m.tensor("conv", (1, 3, 3, 5), INT8, quant=([0.08], [-128]))
    m.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", Padding=SAME, StrideH=2, StrideW=2,
         FusedActivationFunction=1, DilationHFactor=1, DilationWFactor=1)
    fc_codes = rng.integers(-127, 128, (3, 45)).astype(np.int8)
    fw = m.tensor("fc/w", fc_codes.shape, INT8, fc_codes.tobytes(), quant=([0.004], [0]))
    fb = m.tensor("fc/b", (3,), INT32, rng.integers(-900, 900, 3).astype(np.int32).tobytes())
    logits = m.tensor("logits", (1, 3), INT8, quant=([0.2], [5]))
    m.op("FULLY_CONNECTED", [y, fw, fb], [logits], "FullyConnectedOptions",
         FusedActivationFunction=0)
    return m.build([x], [logits]), conv_codes, conv_scales


def test_int8_tflite_enters_through_the_float_ir(tmp_path):
    from fpganet.model.tflite_import import load_tflite, load_tflite_graph

    data, conv_codes, conv_scales = int8_tflite_model()
    path = tmp_path / "int8.tflite"
    path.write_bytes(data)
    graph = load_tflite_graph(path)
    assert [type(layer) for layer in graph.layers] == [Conv, Reshape, Dense]
    given = graph.quantization
    assert given["activations"] == {-1: (pytest.approx(0.05), -3), 0: (pytest.approx(0.08), -128),
                                    2: (pytest.approx(0.2), 5)}
    assert sorted(given["integers"]) == sorted(given["weight_scales"]) == [0, 2]
    oihw = conv_codes.transpose(0, 3, 1, 2)
    assert np.array_equal(given["integers"][0].weight, oihw)
    assert given["integers"][0].origin == "CONV_2D #0 ('conv')"
    # The IR's float weights are the codes times their scales (a float reference model).
    np.testing.assert_allclose(graph.layers[0].weight, oihw * conv_scales[:, None, None, None],
                               rtol=1e-6)
    net = load_tflite(path)
    assert [layer.name for layer in net.layers] == [layer.name for layer in graph.layers]
    assert np.array_equal(net.layers[0].weight, oihw)
    assert net.calibration["method"] == "tflite" and net.source["format"] == "tflite"


def test_quantizer_takes_the_given_integers(tmp_path):
    """The integers attached to the IR are used as they are, not requantized from the float
    weights: changing one changes the network."""
    from fpganet.config import DEFAULT_CONFIG
    from fpganet.model.tflite_import import load_tflite_graph
    from fpganet.quantize import quantize_graph

    path = tmp_path / "int8.tflite"
    path.write_bytes(int8_tflite_model()[0])
    graph = load_tflite_graph(path)
    before = quantize_graph(graph, None, config=DEFAULT_CONFIG).layers[0]
    graph.quantization["integers"][0].bias[1] += 7
    after = quantize_graph(graph, None, config=DEFAULT_CONFIG).layers[0]
    assert after.bias[1] == before.bias[1] + 7
    assert np.array_equal(np.delete(after.bias, 1), np.delete(before.bias, 1))
