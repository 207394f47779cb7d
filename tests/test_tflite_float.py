"""Float32 TFLite models: read into the float IR, quantized with calibration data.

There is no float ``.tflite`` in ../shared and no TensorFlow here, so the models are
assembled in the test with the flatbuffers builder functions of the ``tflite`` schema
package. LiteRT runs them as the reference, on the same arrays as fpganet (the model's own
NHWC layout): fpganet's float IR (``run_float`` on the imported graph) equals LiteRT's float
logits within float rounding; compiled with
calibration data, the golden int8 model's top-1 agrees with LiteRT's float model on most
inputs. A model without ``--calib``, an unsupported op and a dynamic-range quantized model
are refused in one line.
"""

import json
import warnings

import numpy as np
import pytest

from fpganet.cli import main
from fpganet.codegen import run_isa
from fpganet.compiler import compile_model, load_compiled
from fpganet.config import DEFAULT_CONFIG
from fpganet.errors import FpganetError
from fpganet.estimate.measure import measure_network
from fpganet.golden import run_golden
from fpganet.model import Conv, Dense, run_float
from fpganet.model.tflite_import import load_tflite, load_tflite_float, tflite_kind

tflite = pytest.importorskip("tflite")
flatbuffers = pytest.importorskip("flatbuffers")

FLOAT32, INT32, INT8 = 0, 2, 9
SAME, VALID = 0, 1
NONE, RELU, RELU6 = 0, 1, 3
#: Top-1 agreement of the golden int8 model with LiteRT's float model on the test's 300
#: random inputs: measured 0.983 (residual net) and 0.987 (pooling net); on 1000 inputs with
#: three calibration/input seeds 0.964-0.981 and 0.988-0.991. Held with a margin.
AGREEMENT = 0.93


class TFLiteModel:
    """A one-subgraph TFLite model assembled tensor by tensor and op by op."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.tensors = []   # (name, shape, type, data bytes or None, quantization or None)
        self.ops = []       # (builtin name, inputs, outputs, options table name, fields)

    def tensor(self, name, shape, dtype=FLOAT32, data=None, quant=None):
        self.tensors.append((name, list(shape), dtype, data, quant))
        return len(self.tensors) - 1

    def const(self, name, array):
        array = np.ascontiguousarray(array)
        dtype = {np.float32: FLOAT32, np.int32: INT32, np.int8: INT8}[array.dtype.type]
        return self.tensor(name, array.shape, dtype, array.tobytes())

    def weights(self, name, shape):
        """float32 weights ~ N(0, 1/fan_in) and a small bias, as constant tensors."""
        fan_in = int(np.prod(shape[1:]))
        w = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        b = (0.1 * self.rng.standard_normal(shape[0] if name != "dw" else shape[3])) \
            .astype(np.float32)
        return self.const(f"{name}/w", w), self.const(f"{name}/b", b)

    def op(self, code, inputs, outputs, options=None, **fields):
        self.ops.append((code, list(inputs), list(outputs), options, fields))
        return outputs[0]

    def build(self, inputs, outputs):
        """The flatbuffer's bytes (TFL3), schema version 3."""
        b = flatbuffers.Builder(1024)

        def ints(values):
            return b.CreateNumpyVector(np.asarray(values, np.int32))

        def offsets(items):
            b.StartVector(4, len(items), 4)
            for item in reversed(items):
                b.PrependUOffsetTRelative(item)
            return b.EndVector()

        def table(name, **fields):
            getattr(tflite, f"{name}Start")(b)
            for key, value in fields.items():
                getattr(tflite, f"{name}Add{key}")(b, value)
            return getattr(tflite, f"{name}End")(b)

        buffers = [table("Buffer")]          # buffer 0: the empty one every map points to
        tensors = []
        for name, shape, dtype, data, quant in self.tensors:
            buffer = 0
            if data is not None:
                # LiteRT maps constant data in place: align it to 16 bytes.
                b.StartVector(1, len(data), 16)
                b.head -= len(data)
                b.Bytes[b.Head():b.Head() + len(data)] = data
                b.vectorNumElems = len(data)
                buffers.append(table("Buffer", Data=b.EndVector()))
                buffer = len(buffers) - 1
            q = None
            if quant is not None:
                # (scales, zero points[, quantized dimension]).
                q = table("QuantizationParameters",
                          Scale=b.CreateNumpyVector(np.asarray(quant[0], np.float32)),
                          ZeroPoint=b.CreateNumpyVector(np.asarray(quant[1], np.int64)),
                          **({"QuantizedDimension": quant[2]} if len(quant) > 2 else {}))
            fields = dict(Shape=ints(shape), Type=dtype, Buffer=buffer, Name=b.CreateString(name))
            if q is not None:
                fields["Quantization"] = q
            tensors.append(table("Tensor", **fields))
        codes = sorted({op[0] for op in self.ops})
        operators = []
        for code, op_inputs, op_outputs, options, option_fields in self.ops:
            fields = dict(OpcodeIndex=codes.index(code), Inputs=ints(op_inputs),
                          Outputs=ints(op_outputs))
            if options is not None:
                extra = {}
                if "NewShape" in option_fields:
                    extra["NewShape"] = ints(option_fields.pop("NewShape"))
                fields.update(BuiltinOptionsType=getattr(tflite.BuiltinOptions, options),
                              BuiltinOptions=table(options, **option_fields, **extra))
            operators.append(table("Operator", **fields))
        subgraph = table("SubGraph", Tensors=offsets(tensors), Inputs=ints(inputs),
                         Outputs=ints(outputs), Operators=offsets(operators),
                         Name=b.CreateString("main"))
        opcodes = []
        for code in codes:
            value = getattr(tflite.BuiltinOperator, code)
            opcodes.append(table("OperatorCode", DeprecatedBuiltinCode=min(value, 127),
                                 BuiltinCode=value, Version=1))
        model = table("Model", Version=3, OperatorCodes=offsets(opcodes),
                      Subgraphs=offsets([subgraph]), Buffers=offsets(buffers),
                      Description=b.CreateString("fpganet test model"))
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())


def conv(m, name, x, out_shape, weight_shape, stride=1, padding=SAME, activation=NONE):
    w, bias = m.weights(name, weight_shape)
    y = m.tensor(name, out_shape)
    return m.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", Padding=padding, StrideH=stride,
                StrideW=stride, FusedActivationFunction=activation, DilationHFactor=1,
                DilationWFactor=1)


def dense(m, name, x, k, n, activation=NONE):
    w, bias = m.weights(name, (n, k))
    y = m.tensor(name, (1, n))
    return m.op("FULLY_CONNECTED", [x, w, bias], [y], "FullyConnectedOptions",
                FusedActivationFunction=activation)


def softmax(m, x, n):
    y = m.tensor("probabilities", (1, n))
    return m.op("SOFTMAX", [x], [y], "SoftmaxOptions", Beta=1.0)


def residual_model():
    """conv 3x3 SAME RELU -> depthwise 3x3 stride 2 (multiplier 2) RELU6, + a 1x1 stride-2
    conv branch -> ADD RELU -> average pool 2x2 VALID -> RESHAPE [1, 144] -> FULLY_CONNECTED
    -> SOFTMAX. The flatten of a 3x3x16 map checks the (h, w, c) -> (c, h, w) permutation,
    the depthwise multiplier the channel order, stride 2 SAME the odd end padding."""
    m = TFLiteModel(seed=1)
    x = m.tensor("image", (1, 12, 12, 3))
    a = conv(m, "conv1", x, (1, 12, 12, 8), (8, 3, 3, 3), activation=RELU)
    w, bias = m.weights("dw", (1, 3, 3, 16))
    d = m.tensor("dw", (1, 6, 6, 16))
    m.op("DEPTHWISE_CONV_2D", [a, w, bias], [d], "DepthwiseConv2DOptions", Padding=SAME,
         StrideH=2, StrideW=2, DepthMultiplier=2, FusedActivationFunction=RELU6,
         DilationHFactor=1, DilationWFactor=1)
    s = conv(m, "skip", a, (1, 6, 6, 16), (16, 1, 1, 8), stride=2, padding=VALID)
    y = m.tensor("add", (1, 6, 6, 16))
    m.op("ADD", [d, s], [y], "AddOptions", FusedActivationFunction=RELU)
    p = m.tensor("pool", (1, 3, 3, 16))
    m.op("AVERAGE_POOL_2D", [y], [p], "Pool2DOptions", Padding=VALID, StrideH=2, StrideW=2,
         FilterHeight=2, FilterWidth=2, FusedActivationFunction=NONE)
    f = m.tensor("flatten", (1, 144))
    m.op("RESHAPE", [p, m.const("flatten/shape", np.array([1, 144], np.int32))], [f],
         "ReshapeOptions", NewShape=[1, 144])
    logits = dense(m, "logits", f, 144, 10)
    out = softmax(m, logits, 10)
    return m.build([x], [out])


def pooling_model():
    """conv 3x3 VALID -> RELU6 (a standalone op) -> MAX_POOL_2D 3x3 stride 2 SAME -> MEAN
    over H and W (Keras' global average pool) -> FULLY_CONNECTED RELU -> FULLY_CONNECTED."""
    m = TFLiteModel(seed=2)
    x = m.tensor("image", (1, 11, 11, 2))
    a = conv(m, "conv1", x, (1, 9, 9, 12), (12, 3, 3, 2), padding=VALID)
    r = m.tensor("relu6", (1, 9, 9, 12))
    m.op("RELU6", [a], [r])
    p = m.tensor("maxpool", (1, 5, 5, 12))
    m.op("MAX_POOL_2D", [r], [p], "Pool2DOptions", Padding=SAME, StrideH=2, StrideW=2,
         FilterHeight=3, FilterWidth=3, FusedActivationFunction=NONE)
    g = m.tensor("mean", (1, 12))
    m.op("MEAN", [p, m.const("mean/axes", np.array([1, 2], np.int32))], [g], "ReducerOptions",
         KeepDims=False)
    h = dense(m, "hidden", g, 12, 16, activation=RELU)
    out = dense(m, "logits", h, 16, 5)
    return m.build([x], [out])


def flat_input_model():
    """A flat [1, 64] input -> RESHAPE [1, 8, 8, 1] (tflite-micro's micro_speech has [1, 1960]
    to [1, 49, 40, 1]) -> conv 3x3 SAME RELU -> RESHAPE [1, 256] -> FULLY_CONNECTED."""
    m = TFLiteModel(seed=3)
    x = m.tensor("features", (1, 64))
    r = m.tensor("reshape", (1, 8, 8, 1))
    m.op("RESHAPE", [x, m.const("reshape/shape", np.array([1, 8, 8, 1], np.int32))], [r],
         "ReshapeOptions", NewShape=[1, 8, 8, 1])
    a = conv(m, "conv1", r, (1, 8, 8, 4), (4, 3, 3, 1), activation=RELU)
    f = m.tensor("flatten", (1, 256))
    m.op("RESHAPE", [a, m.const("flatten/shape", np.array([1, 256], np.int32))], [f],
         "ReshapeOptions", NewShape=[1, 256])
    out = dense(m, "logits", f, 256, 10)
    return m.build([x], [out])


def three_d_input_model():
    """A [1, 8, 8] input (Keras' ``Input((8, 8))``) -> RESHAPE [1, 8, 8, 1] -> conv 3x3 VALID
    RELU -> RESHAPE [1, 144] -> FULLY_CONNECTED."""
    m = TFLiteModel(seed=5)
    x = m.tensor("image", (1, 8, 8))
    r = m.tensor("reshape", (1, 8, 8, 1))
    m.op("RESHAPE", [x, m.const("reshape/shape", np.array([1, 8, 8, 1], np.int32))], [r],
         "ReshapeOptions", NewShape=[1, 8, 8, 1])
    a = conv(m, "conv1", r, (1, 6, 6, 4), (4, 3, 3, 1), padding=VALID, activation=RELU)
    f = m.tensor("flatten", (1, 144))
    m.op("RESHAPE", [a, m.const("flatten/shape", np.array([1, 144], np.int32))], [f],
         "ReshapeOptions", NewShape=[1, 144])
    out = dense(m, "logits", f, 144, 10)
    return m.build([x], [out])


#: Each model's build function and input shape: the TFLite input's without the batch.
MODELS = {"residual": (residual_model, (12, 12, 3)), "pooling": (pooling_model, (11, 11, 2)),
          "flat_input": (flat_input_model, (64,)), "3d_input": (three_d_input_model, (8, 8))}


def litert(path, x):
    """LiteRT's float logits (the input of a final SOFTMAX) and its outputs, per input."""
    interpreter_module = pytest.importorskip("ai_edge_litert.interpreter")
    with warnings.catch_warnings():
        # It warns that keeping every tensor is for debugging: that is what the logits need.
        warnings.simplefilter("ignore", UserWarning)
        interpreter = interpreter_module.Interpreter(model_path=str(path),
                                                     experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    source, shape = (interpreter.get_input_details()[0][key] for key in ("index", "shape"))
    output = interpreter.get_output_details()[0]["index"]
    softmax_op = [op for op in interpreter._get_ops_details() if op["op_name"] == "SOFTMAX"]
    logits = int(softmax_op[0]["inputs"][0]) if softmax_op else output
    found, outputs = [], []
    for image in x:
        interpreter.set_tensor(source, image[None])
        interpreter.invoke()
        found.append(interpreter.get_tensor(logits)[0].copy())
        outputs.append(interpreter.get_tensor(output)[0].copy())
    return np.stack(found), np.stack(outputs)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request, tmp_path_factory):
    build, shape = MODELS[request.param]
    path = tmp_path_factory.mktemp("tflite") / f"{request.param}.tflite"
    path.write_bytes(build())
    return request.param, path, shape


def test_float_ir_equals_litert(model):
    name, path, shape = model
    assert tflite_kind(path) == "float"
    graph = load_tflite_float(path)
    assert graph.input_shape == shape
    x = np.random.default_rng(10).standard_normal((40, *shape)).astype(np.float32)
    ours = run_float(graph, x)
    reference, probabilities = litert(path, x)
    assert ours.shape == reference.shape
    # float32 sums in another order: equal to 1e-4 of the logits' range.
    np.testing.assert_allclose(ours, reference, rtol=1e-4,
                               atol=1e-4 * float(np.abs(reference).max()))
    if name == "residual":
        assert graph.dropped_output_op == "SOFTMAX"
        e = np.exp(ours - ours.max(axis=1, keepdims=True))
        np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), probabilities, atol=1e-5)
        depthwise = next(layer for layer in graph.layers if isinstance(layer, Conv)
                         and layer.groups > 1)
        assert depthwise.groups == 8 and depthwise.weight.shape == (16, 1, 3, 3)
        assert depthwise.pads == (0, 0, 1, 1) and depthwise.clip_max == 6.0
        assert any("permuted the weight columns" in note for note in graph.notes)
    elif name == "flat_input":
        assert [type(layer).__name__ for layer in graph.layers] == ["Reshape", "Conv", "Reshape", "Dense"]
    elif name == "3d_input":
        assert [type(layer).__name__ for layer in graph.layers] == ["Conv", "Reshape", "Dense"]
    else:
        # The standalone RELU6 folds into the conv before it; MEAN is a global average pool.
        assert graph.layers[0].relu and graph.layers[0].clip_max == 6.0
        assert [type(layer).__name__ for layer in graph.layers] == \
            ["Conv", "MaxPool", "AvgPool", "Dense", "Dense"]
        assert isinstance(graph.layers[-1], Dense)


def test_compiled_with_calibration_agrees_with_litert(model, tmp_path):
    name, path, shape = model
    rng = np.random.default_rng(20)
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=rng.standard_normal((100, *shape)).astype(np.float32))
    out = tmp_path / "OUT"
    assert main(["compile", str(path), "--calib", str(calib), "-o", str(out)]) == 0
    net = compile_model(path, calib)
    assert net.calibration["method"] != "tflite" and net.calibration["samples"] == 100
    assert net.source["format"] == "tflite" and net.source["file"] == path.name
    assert len(net.source["sha256"]) == 64 and not net.source["embedded"]
    assert tuple(net.input_shape) == shape
    x = rng.standard_normal((300, *shape)).astype(np.float32)
    reference, _ = litert(path, x)
    golden = run_golden(net, net.quantize_input(x)).reshape(len(x), -1)
    agreement = float(np.mean(golden.argmax(1) == reference.argmax(1)))
    print(f"{name}: golden int8 vs LiteRT float top-1 agreement {agreement:.3f}")
    assert agreement >= AGREEMENT
    if name == "residual":
        inputs = tmp_path / "x.npz"
        np.savez(inputs, x=x[:20])
        assert main(["check", str(out), "--inputs", str(inputs)]) == 0


def _one_line_refusal(path, expected, capfd, *args):
    out_dir = path.parent / "OUT"
    assert main(["compile", str(path), *args, "-o", str(out_dir)]) == 2
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fpganet: error:"), err
    assert expected in lines[0] and "Traceback" not in err
    assert not out_dir.exists()


def test_float_model_without_calib_is_refused(tmp_path, capfd):
    path = tmp_path / "residual.tflite"
    path.write_bytes(residual_model())
    _one_line_refusal(path, "float32 TFLite model: a calibration file is required", capfd)
    with pytest.raises(FpganetError, match="is a float32 TFLite model, not a fully-int8 one"):
        load_tflite(path)


def test_check_and_estimate_say_the_source_is_tflite(tmp_path, capfd):
    path = tmp_path / "pool.tflite"
    path.write_bytes(pooling_model())
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=np.random.default_rng(0).standard_normal((20, 11, 11, 2)).astype(np.float32))
    assert main(["compile", str(path), "--calib", str(calib), "-o", str(tmp_path / "OUT")]) == 0
    capfd.readouterr()
    assert main(["check", str(tmp_path / "OUT"), "--inputs", str(calib)]) == 0
    out = capfd.readouterr().out
    assert "source model pool.tflite is TFLite: no float comparison" in out
    measured = measure_network(load_compiled(tmp_path / "OUT"), batches=(1,), min_time_s=0.01,
                               providers=["CPUExecutionProvider"], int8=False)
    assert any("source model pool.tflite is TFLite" in line for line in measured["skipped"])


def test_unsupported_op_is_refused_in_one_line(tmp_path, capfd):
    m = TFLiteModel()
    x = m.tensor("image", (1, 4, 4, 2))
    y = m.tensor("tanh", (1, 4, 4, 2))
    m.op("TANH", [x], [y])
    path = tmp_path / "tanh.tflite"
    path.write_bytes(m.build([x], [y]))
    with pytest.raises(FpganetError, match="unsupported op TANH"):
        load_tflite_float(path)
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=np.zeros((2, 4, 4, 2), np.float32))
    _one_line_refusal(path, "unsupported op TANH (#0, output 'tanh')", capfd, "--calib",
                      str(calib))


def test_dynamic_range_model_is_refused_in_one_line(tmp_path, capfd):
    # Float input and output, int8 weights: what TFLite's dynamic-range quantization writes.
    m = TFLiteModel()
    x = m.tensor("image", (1, 4, 4, 2))
    w = m.tensor("conv/w", (3, 1, 1, 2), INT8, np.ones((3, 1, 1, 2), np.int8).tobytes(),
                 quant=([0.1], [0]))
    y = m.tensor("conv", (1, 4, 4, 3))
    m.op("CONV_2D", [x, w, -1], [y], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1,
         DilationHFactor=1, DilationWFactor=1)
    path = tmp_path / "dynamic.tflite"
    path.write_bytes(m.build([x], [y]))
    _one_line_refusal(path, "a dynamic-range quantized model: CONV_2D #0 has int8 weights",
                      capfd)


def test_average_pool_with_same_padding_is_refused(tmp_path):
    # TFLite leaves SAME padding out of the average's divisor; the IR's AvgPool counts it.
    m = TFLiteModel()
    x = m.tensor("image", (1, 5, 5, 2))
    y = m.tensor("pool", (1, 3, 3, 2))
    m.op("AVERAGE_POOL_2D", [x], [y], "Pool2DOptions", Padding=SAME, StrideH=2, StrideW=2,
         FilterHeight=3, FilterWidth=3, FusedActivationFunction=NONE)
    path = tmp_path / "pool.tflite"
    path.write_bytes(m.build([x], [y]))
    with pytest.raises(FpganetError, match=r"AVERAGE_POOL_2D #0 \('pool'\): SAME padding adds"):
        load_tflite_float(path)


def int8_flat_input_model():
    """The fully-int8 form of :func:`flat_input_model`, as tflite-micro's micro_speech is: an
    int8 [1, 64] input, RESHAPE [1, 8, 8, 1], conv RELU, RESHAPE [1, 256], FULLY_CONNECTED."""
    m = TFLiteModel(seed=4)
    rng = m.rng
    in_q, conv_q, out_q = (0.05, -3), (0.04, -128), (0.1, 5)
    x = m.tensor("features", (1, 64), INT8, quant=([in_q[0]], [in_q[1]]))
    r = m.tensor("reshape", (1, 8, 8, 1), INT8, quant=([in_q[0]], [in_q[1]]))
    m.op("RESHAPE", [x, m.const("reshape/shape", np.array([1, 8, 8, 1], np.int32))], [r],
         "ReshapeOptions", NewShape=[1, 8, 8, 1])
    w_scale = rng.uniform(0.005, 0.01, 4).astype(np.float32)
    w = m.tensor("conv1/w", (4, 3, 3, 1), INT8, rng.integers(-127, 128, (4, 3, 3, 1), dtype=np.int8).tobytes(),
                 quant=(w_scale, [0] * 4))
    b = m.tensor("conv1/b", (4,), INT32, rng.integers(-500, 500, 4, dtype=np.int32).tobytes(),
                 quant=(in_q[0] * w_scale, [0] * 4))
    a = m.tensor("conv1", (1, 8, 8, 4), INT8, quant=([conv_q[0]], [conv_q[1]]))
    m.op("CONV_2D", [r, w, b], [a], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1,
         FusedActivationFunction=RELU, DilationHFactor=1, DilationWFactor=1)
    f = m.tensor("flatten", (1, 256), INT8, quant=([conv_q[0]], [conv_q[1]]))
    m.op("RESHAPE", [a, m.const("flatten/shape", np.array([1, 256], np.int32))], [f],
         "ReshapeOptions", NewShape=[1, 256])
    y = int8_dense(m, "logits", f, 256, 10, conv_q[0], 0.002, out_q)
    return m.build([x], [y])


def int8_dense(m, name, x, k, n, in_scale, w_scale, out_q, activation=NONE):
    """An int8 FULLY_CONNECTED [1, k] -> [1, n] with random codes, per-tensor weight scale."""
    rng = m.rng
    w = m.tensor(f"{name}/w", (n, k), INT8, rng.integers(-127, 128, (n, k), dtype=np.int8).tobytes(),
                 quant=([w_scale], [0]))
    b = m.tensor(f"{name}/b", (n,), INT32, rng.integers(-2000, 2000, n, dtype=np.int32).tobytes(),
                 quant=([in_scale * w_scale], [0]))
    y = m.tensor(name, (1, n), INT8, quant=([out_q[0]], [out_q[1]]))
    return m.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions",
                FusedActivationFunction=activation)


def litert_int8(path, q_in):
    """LiteRT's reference kernels' int8 outputs for int8 inputs in the model's own layout."""
    litert_module = pytest.importorskip("ai_edge_litert.interpreter")
    interpreter = litert_module.Interpreter(
        model_path=str(path), experimental_op_resolver_type=litert_module.OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    source, output = (interpreter.get_input_details()[0]["index"],
                      interpreter.get_output_details()[0]["index"])
    theirs = []
    for image in q_in:
        interpreter.set_tensor(source, image[None])
        interpreter.invoke()
        theirs.append(interpreter.get_tensor(output)[0].copy())
    return np.stack(theirs)


def test_int8_flat_input_reshaped_into_a_map_is_litert_bit_exact(tmp_path):
    """micro_speech's input RESHAPE in an int8 model: compiled in the ``tflite`` mode, the
    golden model gives LiteRT's reference kernels' int8 outputs, and the program the ISA
    simulator runs gives the golden model's."""
    path = tmp_path / "int8_flat.tflite"
    path.write_bytes(int8_flat_input_model())
    config = DEFAULT_CONFIG.replace(requant_mode="tflite")
    net = compile_model(path, out_dir=tmp_path / "OUT", config=config)
    assert [layer.type for layer in net.layers][0] == "reshape"
    q_in = np.random.default_rng(5).integers(-128, 128, (20, 64)).astype(np.int8)
    ours = run_golden(net, q_in).reshape(len(q_in), -1)
    np.testing.assert_array_equal(ours, litert_int8(path, q_in))
    assert len(np.unique(ours)) > 20          # not saturated: the test can fail
    isa, _ = run_isa(net, q_in[:2], config=config)
    np.testing.assert_array_equal(isa.reshape(2, -1), ours[:2])


#: The dense-only model's input: [1, K] int8 with this (scale, zero point).
DENSE_K, DENSE_INPUT_Q = 80, (0.05, -3)


def int8_dense_model():
    """A dense-only fully-int8 model with a 2-D input, as MLPerf Tiny's anomaly-detection
    autoencoder ([1, 640]) is: int8 [1, K] -> FULLY_CONNECTED RELU -> FULLY_CONNECTED [1, K]."""
    m = TFLiteModel(seed=6)
    hidden_q, out_q = (0.06, -128), (0.08, 4)
    x = m.tensor("features", (1, DENSE_K), INT8, quant=([DENSE_INPUT_Q[0]], [DENSE_INPUT_Q[1]]))
    h = int8_dense(m, "encoder", x, DENSE_K, 24, DENSE_INPUT_Q[0], 0.004, hidden_q, RELU)
    y = int8_dense(m, "decoder", h, 24, DENSE_K, hidden_q[0], 0.006, out_q)
    return m.build([x], [y])


def test_int8_dense_model_runs_on_inputs_of_its_own_2d_shape(tmp_path, capfd):
    """`fpganet run` takes a [1, K]-input model's inputs as [N, K], as LiteRT does (it asked
    for [N, K, 1, 1]); compiled in the ``tflite`` mode, the program on the ISA simulator gives
    LiteRT's reference kernels' int8 outputs. The accelerator's shape is refused in one line."""
    path = tmp_path / "dense.tflite"
    path.write_bytes(int8_dense_model())
    out = tmp_path / "OUT"
    assert main(["compile", str(path), "--requant-mode", "tflite", "-o", str(out)]) == 0
    net = load_compiled(out)
    assert net.input_shape == (DENSE_K,) and net.input_chw == (DENSE_K, 1, 1)
    assert [layer.type for layer in net.layers] == ["conv", "conv"]
    q_in = np.random.default_rng(7).integers(-128, 128, (30, DENSE_K)).astype(np.int8)
    scale, zero_point = DENSE_INPUT_Q
    x = (np.float32(scale) * (q_in.astype(np.float32) - zero_point)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    assert main(["run", str(out), "--inputs", str(tmp_path / "x.npz"), "--backend", "isa",
                 "--out", str(tmp_path / "r.npz")]) == 0
    with np.load(tmp_path / "r.npz") as result:
        ours = result["q"]
    np.testing.assert_array_equal(ours, litert_int8(path, q_in))
    assert len(np.unique(ours)) > 20          # not saturated: the test can fail
    np.savez(tmp_path / "chw.npz", x=x.reshape(30, DENSE_K, 1, 1))
    capfd.readouterr()
    assert main(["run", str(out), "--inputs", str(tmp_path / "chw.npz")]) == 2
    err = capfd.readouterr().err.strip()
    assert err.startswith("fpganet: error:") and "\n" not in err
    assert f"has shape [30, {DENSE_K}, 1, 1]; the model input 'features' expects [N, {DENSE_K}]" in err


def test_nhwc_model_takes_nhwc_inputs_transposed_on_the_host(tmp_path, capfd):
    """A 4-D TFLite input is given [N, H, W, C], as LiteRT takes it: the manifest records the
    layout, the host transposes to the accelerator's CHW (the golden model on hand-transposed
    inputs agrees, and so does the ONNX export `check` runs), and NCHW is refused."""
    from fpganet.link import load_compiled_job
    from fpganet.link.cli import main as board_main
    from fpganet.qdq_export import run_onnx, to_onnx
    from fpganet.qnet import quantize_input

    path = tmp_path / "residual.tflite"
    path.write_bytes(residual_model())
    rng = np.random.default_rng(30)
    np.savez(tmp_path / "calib.npz", x=rng.standard_normal((50, 12, 12, 3)).astype(np.float32))
    out = tmp_path / "OUT"
    assert main(["compile", str(path), "--calib", str(tmp_path / "calib.npz"), "-o", str(out)]) == 0
    assert "input: [N, 12, 12, 3] (NHWC, the model's own layout); scale" in capfd.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["shape"] == [12, 12, 3] and manifest["input"]["layout"] == "nhwc"
    assert manifest["input"]["chw"] == [3, 12, 12]
    net = load_compiled(out)
    assert net.input_layout == "nhwc"
    x = rng.standard_normal((10, 12, 12, 3)).astype(np.float32)
    q_in = net.quantize_input(x)
    np.testing.assert_array_equal(q_in, quantize_input(x.transpose(0, 3, 1, 2), net.input_scale,
                                                       net.input_zp))
    golden = run_golden(net, q_in)
    onnx_q, _ = run_onnx(to_onnx(net), {net.input_name: x})
    # onnxruntime rounds some ties otherwise (what `check` tolerates); a wrong order would not
    # come within 1 LSB.
    assert np.abs(onnx_q.astype(int) - golden).max() <= 1 and np.mean(onnx_q == golden) > 0.9
    np.savez(tmp_path / "nchw.npz", x=x.transpose(0, 3, 1, 2))
    capfd.readouterr()
    assert main(["run", str(out), "--inputs", str(tmp_path / "nchw.npz")]) == 2
    assert "expects [N, 12, 12, 3] (NHWC, the model's own layout)" in capfd.readouterr().err
    # The host link's driver reads and quantizes inputs the same way.
    job = load_compiled_job(out)
    assert job.input_shape == (12, 12, 3)
    np.testing.assert_array_equal(job.quantize(x), q_in)
    assert board_main(["run", str(out), "--inputs", str(tmp_path / "nchw.npz"),
                       "--port", "/dev/fpganet-no-such-port"]) == 2
    assert "expects [N, 12, 12, 3] (NHWC, the model's own layout)" in capfd.readouterr().err
