"""TFLite models: fully-int8 ones straight into the integer network, float32 ones into the
float IR.

A TFLite model converted with full-integer quantization (int8 activations with one scale
and zero point per tensor, int8 weights with one scale per output channel and zero point
0, int32 biases) already holds every integer fpganet's accelerator needs.
:func:`load_tflite` reads the flatbuffer with the ``tflite`` schema package (no
TensorFlow) and builds a :class:`~fpganet.qnet.QNetwork` directly, layer by layer, with
fpganet's documented arithmetic (``docs/numerics.md``): the model's scales, zero points,
int8 weights and int32 biases as they are; the requantization multipliers from the float
scales ``s_in * s_w[m] / s_out`` in fpganet's 15-bit form (not TFLite's 31-bit one), the
residual add and the average pool as fpganet's :class:`~fpganet.qnet.QAdd` and
:class:`~fpganet.qnet.QAvgPool` (:func:`~fpganet.quantize.quantizer.quantize_add`,
:func:`~fpganet.quantize.quantizer.quantize_avgpool`). How each op maps and how closely
the result follows LiteRT's reference kernels: ``docs/tflite.md``.

TFLite stores feature maps NHWC; fpganet's are NCHW. Weights are transposed to OIHW, the
network takes NCHW inputs (as the float ONNX models do), and a FULLY_CONNECTED layer after
a flatten of an ``H x W x C`` map has its weight columns permuted from TFLite's
``(h, w, c)`` order to fpganet's ``(c, h, w)``.

A float32 model (float32 weights and activations, no quantization) is read by
:func:`load_tflite_float` into the float IR (:class:`~fpganet.model.ir.Graph`, NCHW) with
the same layouts, windows and op rules, and quantized as a float ONNX model is, with
calibration data (:func:`~fpganet.quantize.quantizer.quantize_graph`). :func:`tflite_kind`
says which reader takes a file; a model that is neither (float16 weights, dynamic-range or
partial quantization) is refused in one line saying which it is.

What the integer network cannot represent (another op, a float or int16 tensor, a
per-channel activation scale, a -128 weight code, ...) is refused in one line naming the
op or tensor; a file that is not a readable TFLite flatbuffer in one line naming the file.
"""

import dataclasses
import os
from collections import namedtuple
from pathlib import Path

import numpy as np

from ..errors import FpganetError, one_line
from ..files import existing_file
from ..quantize.fixed_point import average_multiplier
from .ir import Add, AvgPool, Conv, Dense, Graph, MaxPool, Relu, Reshape, fuse_relu

__all__ = ["load_tflite", "load_tflite_float", "load_tflite_any", "tflite_kind", "is_tflite",
           "TFLITE_OPS", "FLOAT_OPS"]

#: The flatbuffer file identifier of a TFLite model (bytes 4..8).
IDENTIFIER = b"TFL3"
#: Ops the importer maps (QUANTIZE/DEQUANTIZE only at the network's input/output, SOFTMAX
#: only at its end, where it is dropped).
TFLITE_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D",
              "MAX_POOL_2D", "RESHAPE", "SOFTMAX", "QUANTIZE", "DEQUANTIZE")
#: Ops the float reader maps (SOFTMAX only at the end, where it is dropped; RELU and RELU6
#: folded into the layer before them; MEAN only over H and W).
FLOAT_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D",
             "MAX_POOL_2D", "MEAN", "RESHAPE", "RELU", "RELU6", "SOFTMAX")
_LINEAR_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_ACTIVATIONS = {0: None, 1: "RELU", 3: "RELU6"}


def is_tflite(path):
    """Whether ``path`` is to be read as TFLite: its suffix is ``.tflite`` or its content
    carries the TFLite flatbuffer identifier."""
    path = os.fspath(path)
    if Path(path).suffix.lower() == ".tflite":
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == IDENTIFIER


# Reading the flatbuffer into plain data ------------------------------------------------------

class _Tensor:
    def __init__(self, index, name, dtype, shape, scale, zero_point, axis, data, sparse):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zero_point, self.axis = scale, zero_point, axis
        self.data, self.sparse = data, sparse

    def __str__(self):
        return f"tensor '{self.name}'"


class _Op:
    def __init__(self, index, code, custom, inputs, outputs, options):
        self.index, self.code, self.custom = index, code, custom
        self.inputs, self.outputs, self.options = inputs, outputs, options


_DTYPES = {}


def _dtype_names():
    if not _DTYPES:
        from tflite.TensorType import TensorType

        for key, value in vars(TensorType).items():
            if not key.startswith("_"):
                _DTYPES[value] = key.lower()
    return _DTYPES


_NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64, "float32": np.float32, "float16": np.float16}


def _options(op, kind):
    table = op.BuiltinOptions()
    if table is None:
        return None
    options = kind()
    options.Init(table.Bytes, table.Pos)
    return options


def _read(buf):
    """Every tensor and operator of the only subgraph, as plain Python data."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    op_names = {value: key for key, value in vars(BuiltinOperator).items() if not key.startswith("_")}
    types = _dtype_names()
    model = tflite.Model.GetRootAs(buf, 0)
    if model.SubgraphsLength() != 1:
        raise FpganetError(f"the model has {model.SubgraphsLength()} subgraphs; fpganet imports "
                           f"models with one (no control flow)")
    graph = model.Subgraphs(0)
    buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
    tensors = []
    for index in range(graph.TensorsLength()):
        tensor = graph.Tensors(index)
        name = (tensor.Name() or b"").decode("utf-8", "replace") or f"tensor_{index}"
        dtype = types.get(tensor.Type(), f"type {tensor.Type()}")
        shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
        quant = tensor.Quantization()
        scale = zero_point = None
        axis = 0
        if quant is not None:
            if quant.ScaleLength():
                scale = np.asarray(quant.ScaleAsNumpy(), np.float32)
            if quant.ZeroPointLength():
                zero_point = np.asarray(quant.ZeroPointAsNumpy(), np.int64)
            axis = int(quant.QuantizedDimension())
        data = None
        buffer_index = tensor.Buffer()
        if 0 < buffer_index < len(buffers):
            buffer = buffers[buffer_index]
            if buffer.DataLength():
                raw = buffer.DataAsNumpy().tobytes()
                data = raw
            elif buffer.Offset() > 1:
                offset, size = int(buffer.Offset()), int(buffer.Size())
                if offset + size > len(buf):
                    raise FpganetError(f"tensor '{name}': its data lie beyond the end of the file "
                                       f"(truncated?)")
                data = bytes(buf[offset:offset + size])
        tensors.append(_Tensor(index, name, dtype, shape, scale, zero_point, axis, data,
                               tensor.Sparsity() is not None))
    codes = []
    for index in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(index)
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        custom = (code.CustomCode() or b"").decode("utf-8", "replace")
        codes.append((op_names.get(builtin, f"builtin op {builtin}"), custom))
    ops = []
    for index in range(graph.OperatorsLength()):
        op = graph.Operators(index)
        opcode = op.OpcodeIndex()
        if not 0 <= opcode < len(codes):
            raise FpganetError(f"operator #{index} names operator code {opcode}; the model has "
                               f"{len(codes)}")
        name, custom = codes[opcode]
        inputs = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        outputs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
        for position in inputs + outputs:
            if not -1 <= position < len(tensors):
                raise FpganetError(f"{name} #{index} names tensor {position}; the model has "
                                   f"{len(tensors)}")
        options = _op_options(op, name)
        ops.append(_Op(index, name, custom, inputs, outputs, options))
    graph_inputs = [int(i) for i in graph.InputsAsNumpy()] if graph.InputsLength() else []
    graph_outputs = [int(i) for i in graph.OutputsAsNumpy()] if graph.OutputsLength() else []
    for position in graph_inputs + graph_outputs:
        if not 0 <= position < len(tensors):
            raise FpganetError(f"the subgraph names tensor {position} as an input or output; the "
                               f"model has {len(tensors)}")
    description = (model.Description() or b"").decode("utf-8", "replace")
    return tensors, ops, graph_inputs, graph_outputs, int(model.Version()), description


def _op_options(op, name):
    """The options the importer reads, as a dict."""
    import tflite

    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        kind = tflite.Conv2DOptions if name == "CONV_2D" else tflite.DepthwiseConv2DOptions
        o = _options(op, kind)
        if o is None:
            return None
        result = dict(padding=o.Padding(), stride=(o.StrideH(), o.StrideW()),
                      dilation=(o.DilationHFactor(), o.DilationWFactor()),
                      activation=o.FusedActivationFunction())
        if name == "DEPTHWISE_CONV_2D":
            result["multiplier"] = o.DepthMultiplier()
        return result
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = _options(op, tflite.Pool2DOptions)
        return None if o is None else dict(padding=o.Padding(), stride=(o.StrideH(), o.StrideW()),
                                           kernel=(o.FilterHeight(), o.FilterWidth()),
                                           activation=o.FusedActivationFunction())
    if name == "FULLY_CONNECTED":
        o = _options(op, tflite.FullyConnectedOptions)
        return dict(activation=0, format=0, keep_dims=False) if o is None else dict(
            activation=o.FusedActivationFunction(), format=o.WeightsFormat(),
            keep_dims=bool(o.KeepNumDims()))
    if name == "ADD":
        o = _options(op, tflite.AddOptions)
        return dict(activation=0 if o is None else o.FusedActivationFunction())
    if name == "MEAN":
        o = _options(op, tflite.ReducerOptions)
        return dict(keep_dims=o is not None and bool(o.KeepDims()))
    return {}


# Walking the operators: what the int8 and the float reader share -----------------------------

class _Value:
    """A feature map as fpganet holds it: the layer that computes it (-1: the network input),
    its ``(C, H, W)``, scale and zero point (None in a float model); ``flat_from``: the
    ``(C, H, W)`` of the map a RESHAPE flattened (TFLite's data order (h, w, c), fpganet's
    stays (c, h, w))."""

    def __init__(self, layer, chw, scale, zero_point, flat_from=None):
        self.layer, self.chw, self.scale, self.zp, self.flat_from = (layer, chw, scale,
                                                                    zero_point, flat_from)


class _Walk:
    """The walk over the operators that the int8 and the float reader share.

    Labels, shapes, constants, fused activations, SAME/VALID windows, the NHWC -> NCHW
    weight layouts, the flatten before FULLY_CONNECTED, RESHAPE and the final SOFTMAX. A
    subclass maps each op it takes with a method ``_op_<CODE>(op, output_index)``, names
    them in ``OPS`` and provides ``output(op)``: ``(tensor, (C, H, W), scale, zero point)``.
    """

    OPS = ()

    def __init__(self, tensors, ops, graph_inputs, graph_outputs):
        self.tensors, self.ops = tensors, ops
        self.graph_inputs, self.graph_outputs = graph_inputs, graph_outputs
        self.values = {}        # tensor index -> _Value
        self.layers = []
        self.notes = []
        self.dropped = None
        self.consumers = {}
        for op in ops:
            for position in op.inputs:
                self.consumers.setdefault(position, []).append(op)

    # Helpers -----------------------------------------------------------------------------

    def label(self, op):
        output = self.tensors[op.outputs[0]].name if op.outputs and op.outputs[0] >= 0 else "?"
        return f"{op.code} #{op.index} ('{output}')"

    def chw(self, tensor, what):
        shape = tensor.shape
        if tensor.sparse:
            raise FpganetError(f"{tensor} ({what}) is sparse; fpganet reads dense tensors")
        if len(shape) not in (2, 4) or shape[0] not in (1, -1) or any(d < 1 for d in shape[1:]):
            raise FpganetError(f"{tensor} ({what}) has shape {list(shape)}; fpganet takes one "
                               f"image [1, H, W, C] or a vector [1, K]")
        return (shape[3], shape[1], shape[2]) if len(shape) == 4 else (shape[1], 1, 1)

    def value(self, op, position, what="input"):
        index = op.inputs[position] if position < len(op.inputs) else -1
        if index < 0 or index not in self.values:
            self.missing(op, index, what)
        value = self.values[index]
        if value.flat_from is not None and op.code != "FULLY_CONNECTED":
            raise FpganetError(f"{self.label(op)} reads {self.tensors[index]}, a flattened "
                               f"H x W x C map; fpganet takes a flatten only before "
                               f"FULLY_CONNECTED")
        return value

    def missing(self, op, index, what):
        """Refuse an op's input that no earlier op computes."""
        if index >= 0 and self.tensors[index].data is not None:
            raise FpganetError(f"{self.label(op)}: its {what} is the constant "
                               f"{self.tensors[index]}; fpganet takes feature maps there")
        raise FpganetError(f"{self.label(op)}: its {what} "
                           f"{'is missing' if index < 0 else self.tensors[index]} is not "
                           f"computed by an earlier op the importer took")

    def constant(self, op, position, what, dtype):
        index = op.inputs[position] if position < len(op.inputs) else -1
        if index < 0:
            return None
        tensor = self.tensors[index]
        if tensor.data is None:
            raise FpganetError(f"{self.label(op)}: its {what} {tensor} is not a constant")
        if tensor.dtype != dtype:
            raise FpganetError(f"{self.label(op)}: its {what} {tensor} is {tensor.dtype}; "
                               f"expected {dtype}"
                               + ("" if "float32" not in (dtype, tensor.dtype) else
                                  " (a partially quantized model)"))
        if tensor.sparse:
            raise FpganetError(f"{self.label(op)}: its {what} {tensor} is sparse")
        count = int(np.prod(tensor.shape)) if tensor.shape else 1
        itemsize = np.dtype(_NUMPY[dtype]).itemsize
        if len(tensor.data) != count * itemsize:
            raise FpganetError(f"{self.label(op)}: its {what} {tensor} holds {len(tensor.data)} "
                               f"bytes for shape {list(tensor.shape)} ({count * itemsize} "
                               f"expected)")
        return np.frombuffer(tensor.data, dtype=np.dtype(_NUMPY[dtype]).newbyteorder("<")) \
            .astype(_NUMPY[dtype]).reshape(tensor.shape)

    def output_tensor(self, op):
        """The op's one output tensor and its label, or a one-line refusal."""
        if len(op.outputs) != 1 or op.outputs[0] < 0:
            raise FpganetError(f"{op.code} #{op.index} has {len(op.outputs)} outputs; expected one")
        return self.tensors[op.outputs[0]], f"output of {op.code} #{op.index}"

    def emit(self, layer, op, sources, out_index, flat_from=None):
        layer.inputs = tuple(sources)
        self.layers.append(layer)
        # An integer layer carries its output's (scale, zero point); a float IR layer none.
        scale, zero_point = getattr(layer, "scale", (None, None))
        self.values[out_index] = _Value(len(self.layers) - 1, tuple(layer.out_shape), scale,
                                        zero_point, flat_from)

    def activation(self, op):
        code = op.options.get("activation", 0)
        if code not in _ACTIVATIONS:
            raise FpganetError(f"{self.label(op)}: fused activation {code} is not supported "
                               f"(NONE, RELU and RELU6 are)")
        return _ACTIVATIONS[code]

    def relu(self, op):
        """``(relu, clip_max)`` of the op's fused activation, as the IR's layers hold them."""
        activation = self.activation(op)
        return activation is not None, 6.0 if activation == "RELU6" else None

    def window(self, op, in_chw, kernel, out_chw):
        """``pads`` of a SAME or VALID window; the output size checked against the model's."""
        padding, stride = op.options["padding"], op.options["stride"]
        if any(s < 1 for s in stride) or any(k < 1 for k in kernel):
            raise FpganetError(f"{self.label(op)}: stride {list(stride)} and kernel "
                               f"{list(kernel)} must be positive")
        pads, sizes = [0, 0, 0, 0], []
        for axis in range(2):
            size, k, s = in_chw[1 + axis], kernel[axis], stride[axis]
            if padding == 0:            # SAME: TFLite puts the odd extra at the end
                out = -(-size // s)
                total = max((out - 1) * s + k - size, 0)
                pads[axis], pads[axis + 2] = total // 2, total - total // 2
            elif padding == 1:          # VALID
                out = (size - k) // s + 1 if size >= k else 0
            else:
                raise FpganetError(f"{self.label(op)}: padding {padding} is neither SAME nor VALID")
            sizes.append(out)
        if tuple(sizes) != tuple(out_chw[1:]):
            raise FpganetError(f"{self.label(op)}: its output is {list(out_chw[1:])} (H, W), the "
                               f"window gives {sizes}")
        return tuple(pads), tuple(stride)

    # The walk ----------------------------------------------------------------------------

    def one_input_output(self):
        """The network input tensor; one input and one output, or a refusal."""
        if len(self.graph_inputs) != 1 or len(self.graph_outputs) != 1:
            raise FpganetError(f"the model has {len(self.graph_inputs)} inputs and "
                               f"{len(self.graph_outputs)} outputs; fpganet takes one of each")
        return self.tensors[self.graph_inputs[0]]

    def walk(self, output_index):
        for op in self.ops:
            handler = getattr(self, f"_op_{op.code}", None)
            if handler is None or op.code == "CUSTOM":
                what = f"custom op '{op.custom}'" if op.code == "CUSTOM" else f"op {op.code}"
                raise FpganetError(f"unsupported {what} (#{op.index}, output "
                                   f"'{self.tensors[op.outputs[0]].name if op.outputs else '?'}'); "
                                   f"supported: {', '.join(self.OPS)}")
            if op.options is None:
                raise FpganetError(f"{self.label(op)} has no options")
            handler(op, output_index)

    def result(self, output_index):
        """The network output's value, which the last layer must compute."""
        if output_index not in self.values or not self.layers:
            raise FpganetError(f"the network output '{self.tensors[output_index].name}' is not "
                               f"computed by the ops the importer took")
        result = self.values[output_index]
        if result.layer != len(self.layers) - 1:
            raise FpganetError(f"the network output '{self.tensors[output_index].name}' is not "
                               f"computed by the last layer")
        return result

    def logits_name_shape(self):
        """The network output's name (the logits' where a final SOFTMAX was dropped) and its
        per-sample shape (a vector ``(K,)`` for a ``(K, 1, 1)`` map)."""
        out_shape = tuple(self.layers[-1].out_shape)
        name = getattr(self, "logits", self.tensors[self.graph_outputs[0]].name)
        return name, (out_shape[0],) if out_shape[1:] == (1, 1) else out_shape

    # Ops and layouts both readers share --------------------------------------------------

    def _op_SOFTMAX(self, op, output_index):
        readers = self.consumers.get(op.outputs[0] if op.outputs else -1, [])
        last = op.outputs == [output_index] or (
            len(readers) == 1 and readers[0].code == "DEQUANTIZE"
            and readers[0].outputs == [output_index])
        if not last:
            raise FpganetError(f"{self.label(op)}: SOFTMAX is taken only at the end of the "
                               f"network, where it is dropped")
        value = self.value(op, 0)
        self.values[op.outputs[0]] = value
        self.dropped = "SOFTMAX"
        self.logits = self.tensors[op.inputs[0]].name
        self.notes.append(f"dropped the final {self.label(op)} (outputs are the logits before "
                          f"it; the arg-max is unchanged)")

    def _op_RESHAPE(self, op, output_index):
        value = self.value(op, 0)
        tensor, chw, scale, zero_point = self.output(op)
        if (scale, zero_point) != (value.scale, value.zp):
            raise FpganetError(f"{self.label(op)} changes the scale or zero point")
        c, h, w = value.chw
        flat = len(tensor.shape) == 2 and chw == (c * h * w, 1, 1)
        if flat:
            flat_from = value.chw if h * w > 1 else None
        elif h == w == 1 and chw == value.chw:
            flat_from = None
        else:
            raise FpganetError(f"{self.label(op)} reshapes {list(value.chw)} (C, H, W) to "
                               f"{list(tensor.shape)}; fpganet takes a RESHAPE only as the "
                               f"flatten before FULLY_CONNECTED")
        self.values[tensor.index] = _Value(value.layer, value.chw, value.scale, value.zp,
                                           flat_from)

    def _op_DEPTHWISE_CONV_2D(self, op, output_index):
        self._op_CONV_2D(op, output_index, depthwise=True)

    def conv_weight(self, op, value, out_chw, depthwise, dtype):
        """A CONV_2D's or DEPTHWISE_CONV_2D's weight in OIHW, its groups, and the axis of
        TFLite's per-channel weight scales."""
        weight = self.constant(op, 1, "weight", dtype)
        c = value.chw[0]
        if weight.ndim != 4:
            raise FpganetError(f"{self.label(op)}: weight shape {list(weight.shape)} is not 4-D")
        if any(d != 1 for d in op.options["dilation"]):
            raise FpganetError(f"{self.label(op)}: dilation {list(op.options['dilation'])} is "
                               f"not supported")
        if depthwise:
            # [1, kh, kw, C * multiplier] -> [M, 1, kh, kw], output channel c * mult + j.
            m = weight.shape[3]
            if weight.shape[0] != 1 or m % c or m != out_chw[0]:
                raise FpganetError(f"{self.label(op)}: depthwise weight {list(weight.shape)} does "
                                   f"not match {c} input and {out_chw[0]} output channels")
            oihw, groups, axis = weight.transpose(3, 0, 1, 2), c, 3
        else:
            # [M, kh, kw, C] -> [M, C, kh, kw]
            m = weight.shape[0]
            if weight.shape[3] != c or m != out_chw[0]:
                raise FpganetError(f"{self.label(op)}: weight {list(weight.shape)} does not "
                                   f"match {c} input and {out_chw[0]} output channels")
            oihw, groups, axis = weight.transpose(0, 3, 1, 2), 1, 0
        return np.ascontiguousarray(oihw), groups, axis

    def dense_weight(self, op, value, tensor, out_chw, dtype):
        """A FULLY_CONNECTED's weight ``[M, K]``, its columns in fpganet's ``(c, h, w)`` order,
        and the ``(C, H, W)`` map it flattens (None: it reads a vector)."""
        if op.options["format"] != 0:
            raise FpganetError(f"{self.label(op)}: weights format {op.options['format']} is not "
                               f"supported (only DEFAULT)")
        weight = self.constant(op, 1, "weight", dtype)
        c, h, w = value.flat_from or value.chw
        k = c * h * w
        if weight.ndim != 2 or weight.shape[1] != k or weight.shape[0] != out_chw[0] \
                or out_chw[1:] != (1, 1):
            raise FpganetError(f"{self.label(op)}: weight {list(weight.shape)} does not take "
                               f"{k} inputs to {list(self.tensors[tensor.index].shape)}")
        if h * w == 1:
            if value.chw != (k, 1, 1):
                raise FpganetError(f"{self.label(op)} reads a {list(value.chw)} map without a "
                                   f"flatten")
            return weight, None
        # TFLite flattens (h, w, c); the accelerator's map lies (c, h, w).
        weight = weight.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(-1, k)
        self.notes.append(f"permuted the weight columns of {self.label(op)} from the (h, w, c) "
                          f"flatten order to (c, h, w)")
        return np.ascontiguousarray(weight), (c, h, w)

    def add_operands(self, op, out_chw):
        """The two same-shape inputs of an ADD."""
        if len(op.inputs) != 2:
            raise FpganetError(f"{self.label(op)} has {len(op.inputs)} inputs; expected two")
        a, b = self.value(op, 0, "first input"), self.value(op, 1, "second input")
        if not a.chw == b.chw == out_chw:
            raise FpganetError(f"{self.label(op)} adds {list(a.chw)} and {list(b.chw)} into "
                               f"{list(out_chw)} (C, H, W); fpganet adds maps of one shape (no "
                               f"broadcast)")
        return a, b

    def average_pool(self, op, value, tensor, out_chw):
        """The float IR's :class:`~fpganet.model.ir.AvgPool` of an AVERAGE_POOL_2D."""
        kernel = op.options["kernel"]
        pads, stride = self.window(op, value.chw, kernel, out_chw)
        if any(pads):
            raise FpganetError(f"{self.label(op)}: SAME padding adds {list(pads)}; TFLite leaves "
                               f"the padding out of the average, fpganet counts it: only windows "
                               f"without padding are supported")
        relu, clip_max = self.relu(op)
        return AvgPool(name=tensor.name, kernel=tuple(kernel), stride=stride, pads=pads,
                       in_shape=value.chw, out_shape=out_chw, relu=relu, clip_max=clip_max)

    def max_pool_window(self, op, value, out_chw):
        """``(kernel, stride, pads)`` of a MAX_POOL_2D (no fused activation)."""
        if self.activation(op) is not None:
            raise FpganetError(f"{self.label(op)}: a fused activation on MAX_POOL_2D is not "
                               f"supported")
        kernel = op.options["kernel"]
        pads, stride = self.window(op, value.chw, kernel, out_chw)
        return tuple(kernel), stride, pads


# Building the integer network ----------------------------------------------------------------

_MIXED = "a mixed model; fpganet takes fully-int8 TFLite models, or float32 ones with --calib"


class _Importer(_Walk):
    OPS = TFLITE_OPS

    def __init__(self, tensors, ops, graph_inputs, graph_outputs, config):
        super().__init__(tensors, ops, graph_inputs, graph_outputs)
        self.config = config

    def activation_qparams(self, tensor, what):
        """(scale, zero point) of an int8 activation tensor, or a one-line refusal."""
        if tensor.dtype == "float32":
            raise FpganetError(f"{tensor} ({what}) is float32: the model is not fully int8 "
                               f"quantized ({_MIXED})")
        if tensor.dtype != "int8":
            raise FpganetError(f"{tensor} ({what}) is {tensor.dtype}; the accelerator's "
                               f"activations are int8")
        if tensor.scale is None or tensor.zero_point is None:
            raise FpganetError(f"{tensor} ({what}) is int8 without a scale and zero point")
        if tensor.scale.size != 1 or tensor.zero_point.size != 1:
            raise FpganetError(f"{tensor} ({what}) has {tensor.scale.size} scales (per-axis); "
                               f"the accelerator has one scale per activation tensor")
        scale, zero_point = float(tensor.scale[0]), int(tensor.zero_point[0])
        if not np.isfinite(scale) or scale <= 0:
            raise FpganetError(f"{tensor} ({what}): its scale {scale!r} is not a finite positive "
                               f"number")
        if not -128 <= zero_point <= 127:
            raise FpganetError(f"{tensor} ({what}): its zero point {zero_point} is outside "
                               f"-128..127")
        return scale, zero_point

    def missing(self, op, index, what):
        if index >= 0 and self.tensors[index].dtype == "float32":
            raise FpganetError(f"{self.tensors[index]} ({what} of {self.label(op)}) is "
                               f"float32: the model is not fully int8 quantized ({_MIXED})")
        super().missing(op, index, what)

    def output(self, op):
        tensor, what = self.output_tensor(op)
        scale, zero_point = self.activation_qparams(tensor, what)
        return tensor, self.chw(tensor, what), scale, zero_point

    # Ops ---------------------------------------------------------------------------------

    def run(self):
        source = self.one_input_output()
        self.input_name = source.name
        self.input_chw = self.chw(source, "the network input")
        if source.dtype == "float32":
            # A float input is quantized by the op that reads it (a QUANTIZE, checked there).
            self.input_q = None
        else:
            self.input_q = self.activation_qparams(source, "the network input")
            self.values[source.index] = _Value(-1, self.input_chw, *self.input_q)
        output_index = self.graph_outputs[0]
        self.walk(output_index)
        if self.input_q is None:
            raise FpganetError(f"the network input {source} is float32 and no QUANTIZE reads it: "
                               f"the model is not fully int8 quantized")
        return self.result(output_index)

    def _op_QUANTIZE(self, op, output_index):
        source = op.inputs[0] if op.inputs else -1
        if source != self.graph_inputs[0] or self.tensors[source].dtype != "float32" \
                or self.input_q is not None:
            raise FpganetError(f"{self.label(op)}: QUANTIZE is taken only on the float network "
                               f"input (a requantization inside the network is not supported)")
        tensor, chw, scale, zero_point = self.output(op)
        if chw != self.input_chw:
            raise FpganetError(f"{self.label(op)} changes the shape of the input")
        self.input_q = (scale, zero_point)
        self.values[tensor.index] = _Value(-1, chw, scale, zero_point)

    def _op_DEQUANTIZE(self, op, output_index):
        if op.outputs != [output_index]:
            raise FpganetError(f"{self.label(op)}: DEQUANTIZE is taken only as the network's last "
                               f"op (a float tensor inside the network is not supported)")
        value = self.value(op, 0)
        self.values[output_index] = value

    def _op_CONV_2D(self, op, output_index, depthwise=False):
        value = self.value(op, 0)
        tensor, out_chw, s_out, zp_out = self.output(op)
        oihw, groups, axis = self.conv_weight(op, value, out_chw, depthwise, "int8")
        pads, stride = self.window(op, value.chw, oihw.shape[2:], out_chw)
        self.linear(op, value, tensor, out_chw, s_out, zp_out, oihw, axis, "conv", stride, pads,
                    groups)

    def _op_FULLY_CONNECTED(self, op, output_index):
        value = self.value(op, 0)
        tensor, out_chw, s_out, zp_out = self.output(op)
        weight, flat = self.dense_weight(op, value, tensor, out_chw, "int8")
        k = weight.shape[1]
        sources = value.layer
        if flat is not None:
            from ..qnet import QReshape

            name = f"{tensor.name}/flatten"
            self.emit(QReshape(name=name, in_shape=flat, out_shape=(k, 1, 1), zp=value.zp,
                               s=value.scale), op, (value.layer,), ("flatten", op.index))
            sources = len(self.layers) - 1
        value = _Value(sources, (k, 1, 1), value.scale, value.zp)
        self.linear(op, value, tensor, out_chw, s_out, zp_out,
                    np.ascontiguousarray(weight.reshape(*weight.shape, 1, 1)), 0, "dense",
                    (1, 1), (0, 0, 0, 0), 1)

    def linear(self, op, value, tensor, out_chw, s_out, zp_out, weight, axis, kind, stride, pads,
               groups):
        from ..qnet import QConv
        from ..quantize.quantizer import channel_multipliers, clamp_codes

        name = tensor.name
        m = weight.shape[0]
        w_tensor = self.tensors[op.inputs[1]]
        s_w = w_tensor.scale
        if s_w is None or w_tensor.zero_point is None:
            raise FpganetError(f"{self.label(op)}: its weight {w_tensor} has no quantization "
                               f"parameters")
        if s_w.size == 1:
            s_w = np.full(m, s_w[0], np.float32)
        elif s_w.size != m or w_tensor.axis != axis:
            raise FpganetError(f"{self.label(op)}: {s_w.size} weight scales along axis "
                               f"{w_tensor.axis} of {w_tensor}; per-channel scales must run "
                               f"along the output channels")
        if np.any(w_tensor.zero_point != 0):
            raise FpganetError(f"{self.label(op)}: {w_tensor} has a nonzero zero point; the "
                               f"accelerator's weights are symmetric (zero point 0)")
        if not np.all(np.isfinite(s_w)) or not np.all(s_w > 0):
            raise FpganetError(f"{self.label(op)}: the scales of {w_tensor} must be finite and "
                               f"positive")
        if weight.size and weight.min() < -127:
            raise FpganetError(f"{self.label(op)}: {w_tensor} holds the code -128; the "
                               f"accelerator's weights are symmetric, -127..127")
        bias = self.constant(op, 2, "bias", "int32")
        if bias is None:
            bias = np.zeros(m, np.int32)
        if bias.shape != (m,):
            raise FpganetError(f"{self.label(op)}: bias {self.tensors[op.inputs[2]]} has shape "
                               f"{list(bias.shape)}, expected [{m}]")
        row_sums = weight.reshape(m, -1).astype(np.int64).sum(axis=1)
        bias64 = bias.astype(np.int64) - value.zp * row_sums
        mode = self.config.requant_mode
        # LiteRT's reference FULLY_CONNECTED rounds once, its convolutions twice.
        single = kind == "dense" and mode == "tflite"
        # With fewer multiplier bits than 15, the model's own scales are kept and its
        # multipliers rounded (docs/numerics.md section 9).
        mult, shift = channel_multipliers(value.scale, s_w, s_out, name, mode,
                                          self.config.requant_mult_bits)
        if mode == "tflite":
            weight, bias64, mult, shift = constant_channels(weight, bias64, mult, shift, single)
        if np.any(np.abs(bias64) >= 1 << 31):
            channel = int(np.argmax(np.abs(bias64)))
            raise FpganetError(f"{self.label(op)}: the bias of output channel {channel} with the "
                               f"input zero point folded in, {int(bias64[channel])}, is not int32")
        # The fused activation folds into the clamp as the quantizer folds a ReLU / ReLU6.
        relu, clip_max = self.relu(op)
        lo, hi = clamp_codes(relu, clip_max, s_out, zp_out)
        layer = QConv(name=name, kind=kind, in_shape=tuple(value.chw), out_shape=tuple(out_chw),
                      kernel=tuple(weight.shape[2:]), stride=tuple(stride), pads=tuple(pads),
                      zp_in=int(value.zp), zp_out=int(zp_out), lo=lo, hi=hi,
                      relu=relu, weight=weight.astype(np.int8),
                      bias=bias64.astype(np.int32), mult=mult, shift=shift, s_in=value.scale,
                      s_out=s_out, s_w=s_w.astype(np.float32), groups=int(groups),
                      single_rounding=single)
        layer.validate(self.config.acc_width, self.config.requant_mode)   # naming the layer
        self.emit(layer, op, (value.layer,), tensor.index)


    def _op_ADD(self, op, output_index):
        from ..quantize.quantizer import quantize_add

        tensor, out_chw, s_out, zp_out = self.output(op)
        a, b = self.add_operands(op, out_chw)
        relu, clip_max = self.relu(op)
        layer = quantize_add(Add(name=tensor.name, in_shape=out_chw, relu=relu, clip_max=clip_max),
                             (a.scale, a.zp), (b.scale, b.zp), (s_out, zp_out),
                             self.config.requant_mode, self.config.requant_mult_bits)
        self.emit(layer, op, (a.layer, b.layer), tensor.index)

    def _op_AVERAGE_POOL_2D(self, op, output_index):
        from ..quantize.quantizer import quantize_avgpool

        value = self.value(op, 0)
        tensor, out_chw, s_out, zp_out = self.output(op)
        pool = self.average_pool(op, value, tensor, out_chw)
        mode = self.config.requant_mode
        layer = quantize_avgpool(pool, value.scale, value.zp, s_out, zp_out, mode,
                                 self.config.requant_mult_bits)
        if mode == "tflite" and (value.scale, value.zp) == (s_out, zp_out):
            # LiteRT's own arithmetic: the codes' sum divided by the count, rounded half away
            # from zero, which one rounding by a multiplier just above 1 / count gives.
            mult, shift = average_multiplier(layer.count)
            layer = dataclasses.replace(layer, sum_codes=True, mult=mult, shift=shift)
        self.emit(layer, op, (value.layer,), tensor.index)

    def _op_MAX_POOL_2D(self, op, output_index):
        from ..qnet import QMaxPool

        value = self.value(op, 0)
        tensor, out_chw, s_out, zp_out = self.output(op)
        if (s_out, zp_out) != (value.scale, value.zp):
            raise FpganetError(f"{self.label(op)} changes the scale or zero point; fpganet's max "
                               f"pooling passes them through")
        kernel, stride, pads = self.max_pool_window(op, value, out_chw)
        self.emit(QMaxPool(name=tensor.name, in_shape=value.chw, out_shape=out_chw,
                           kernel=kernel, stride=stride, pads=pads, zp=value.zp,
                           s=value.scale), op, (value.layer,), tensor.index)


# Building the float graph --------------------------------------------------------------------

class _FloatImporter(_Walk):
    """A float32 model into the float IR (NCHW), for post-training quantization."""

    OPS = FLOAT_OPS

    def float_tensor(self, tensor, what):
        if tensor.dtype != "float32" or tensor.scale is not None:
            kind = "quantized float32" if tensor.dtype == "float32" else tensor.dtype
            raise FpganetError(f"{tensor} ({what}) is {kind} in a model with float32 weights: "
                               f"{_MIXED}")

    def output(self, op):
        tensor, what = self.output_tensor(op)
        self.float_tensor(tensor, what)
        return tensor, self.chw(tensor, what), None, None

    def bias(self, op, m):
        bias = self.constant(op, 2, "bias", "float32")
        if bias is None:
            return np.zeros(m, np.float32)
        if bias.shape != (m,):
            raise FpganetError(f"{self.label(op)}: bias {self.tensors[op.inputs[2]]} has shape "
                               f"{list(bias.shape)}, expected [{m}]")
        return bias.astype(np.float32)

    def run(self):
        source = self.one_input_output()
        self.float_tensor(source, "the network input")
        self.input_name = source.name
        self.input_chw = self.chw(source, "the network input")
        self.values[source.index] = _Value(-1, self.input_chw, None, None)
        output_index = self.graph_outputs[0]
        self.walk(output_index)
        return self.result(output_index)

    def _op_CONV_2D(self, op, output_index, depthwise=False):
        value = self.value(op, 0)
        tensor, out_chw, _, _ = self.output(op)
        weight, groups, _ = self.conv_weight(op, value, out_chw, depthwise, "float32")
        pads, stride = self.window(op, value.chw, weight.shape[2:], out_chw)
        relu, clip_max = self.relu(op)
        self.emit(Conv(name=tensor.name, weight=weight, bias=self.bias(op, len(weight)),
                       stride=stride, pads=pads, in_shape=value.chw, out_shape=out_chw,
                       relu=relu, groups=int(groups), clip_max=clip_max),
                  op, (value.layer,), tensor.index)

    def _op_FULLY_CONNECTED(self, op, output_index):
        value = self.value(op, 0)
        tensor, out_chw, _, _ = self.output(op)
        weight, flat = self.dense_weight(op, value, tensor, out_chw, "float32")
        m, k = weight.shape
        source = value.layer
        if flat is not None:
            self.emit(Reshape(name=f"{tensor.name}/flatten", in_shape=flat, out_shape=(k, 1, 1)),
                      op, (value.layer,), ("flatten", op.index))
            source = len(self.layers) - 1
        relu, clip_max = self.relu(op)
        self.emit(Dense(name=tensor.name, weight=weight, bias=self.bias(op, m), in_shape=(k, 1, 1),
                        out_shape=(m, 1, 1), relu=relu, clip_max=clip_max),
                  op, (source,), tensor.index)

    def _op_ADD(self, op, output_index):
        tensor, out_chw, _, _ = self.output(op)
        a, b = self.add_operands(op, out_chw)
        relu, clip_max = self.relu(op)
        self.emit(Add(name=tensor.name, in_shape=out_chw, relu=relu, clip_max=clip_max), op,
                  (a.layer, b.layer), tensor.index)

    def _op_AVERAGE_POOL_2D(self, op, output_index):
        value = self.value(op, 0)
        tensor, out_chw, _, _ = self.output(op)
        self.emit(self.average_pool(op, value, tensor, out_chw), op, (value.layer,), tensor.index)

    def _op_MEAN(self, op, output_index):
        # Keras' GlobalAveragePooling2D converts to MEAN over H and W: an average pool whose
        # window is the map.
        value = self.value(op, 0)
        tensor, out_chw, _, _ = self.output(op)
        axes = self.constant(op, 1, "axes", "int32")
        axes = [] if axes is None else [int(a) for a in np.ravel(axes)]
        c, h, w = value.chw
        if len(self.tensors[op.inputs[0]].shape) != 4 or sorted(a % 4 for a in axes) != [1, 2] \
                or out_chw != (c, 1, 1):
            raise FpganetError(f"{self.label(op)}: MEAN over axes {axes} of "
                               f"{list(self.tensors[op.inputs[0]].shape)}; fpganet takes a mean "
                               f"over H and W of a [1, H, W, C] map (a global average pool)")
        self.emit(AvgPool(name=tensor.name, kernel=(h, w), stride=(1, 1), pads=(0, 0, 0, 0),
                          in_shape=value.chw, out_shape=out_chw), op, (value.layer,), tensor.index)

    def _op_MAX_POOL_2D(self, op, output_index):
        value = self.value(op, 0)
        tensor, out_chw, _, _ = self.output(op)
        kernel, stride, pads = self.max_pool_window(op, value, out_chw)
        self.emit(MaxPool(name=tensor.name, kernel=kernel, stride=stride, pads=pads,
                          in_shape=value.chw, out_shape=out_chw), op, (value.layer,), tensor.index)

    def _op_RELU(self, op, output_index, clip_max=None):
        # A standalone ReLU: fuse_relu folds it into the layer before it, as for ONNX.
        value = self.value(op, 0)
        tensor, chw, _, _ = self.output(op)
        if chw != value.chw:
            raise FpganetError(f"{self.label(op)} changes the shape of its input")
        self.emit(Relu(name=tensor.name, in_shape=value.chw, clip_max=clip_max), op,
                  (value.layer,), tensor.index)

    def _op_RELU6(self, op, output_index):
        self._op_RELU(op, output_index, clip_max=6.0)

    def _op_QUANTIZE(self, op, output_index):
        raise FpganetError(f"{self.label(op)} in a model with float32 weights: {_MIXED}")

    _op_DEQUANTIZE = _op_QUANTIZE


def constant_channels(weight, bias, mult, shift, single):
    """A layer's channels whose output does not depend on its input, in the ``tflite``
    requantization mode's parameter entry, with the same outputs.

    A channel TFLite gives the multiplier 0 (its real multiplier is below 2**-32) outputs its
    zero point: weights and bias become 0, the multiplier 2**30. A channel whose weights are all
    zero outputs the constant ``multiply_tflite(bias, M, shift)`` (converters leave such
    channels, a folded batch norm's, with biases near 2**30): the bias becomes that constant
    (bounded to +-1024, where the clamp decides alike) and ``M = 2**31 - 1``, ``shift`` 0,
    which return it unchanged with either rounding. Neither fits the entry as it came (``M``
    in [2**30, 2**31), a 28-bit bias).
    """
    from ..quantize.fixed_point import multiply_tflite

    weight, bias = weight.copy(), bias.copy()
    mult, shift = mult.copy(), shift.copy()
    silent = mult == 0
    weight[silent], bias[silent], mult[silent], shift[silent] = 0, 0, 1 << 30, 0
    flat = ~weight.reshape(len(weight), -1).any(axis=1) & ~silent
    value = multiply_tflite(bias[flat], mult[flat], shift[flat], single)
    bias[flat] = np.clip(value, -1024, 1024)
    mult[flat], shift[flat] = (1 << 31) - 1, 0
    return weight, bias, mult, shift


def _kind(tensors, ops, graph_inputs):
    """``"int8"`` or ``"float"``: which reader takes the model, or a one-line refusal of a
    model that is neither (float16 weights, dynamic-range or partial quantization)."""
    weights = [(op, tensors[op.inputs[1]]) for op in ops
               if op.code in _LINEAR_OPS and len(op.inputs) > 1 and op.inputs[1] >= 0]
    half = next((t for t in tensors if t.dtype == "float16"), None)
    if half is not None:
        raise FpganetError(f"{half} is float16: a float16-quantized model (weights stored as "
                           f"float16); fpganet takes fully-int8 TFLite models, or float32 ones "
                           f"with --calib")
    floats = [t for _, t in weights if t.dtype == "float32"]
    others = [t for _, t in weights if t.dtype != "float32"]
    if floats and others:
        raise FpganetError(f"a partially quantized model: weight {floats[0]} is float32, weight "
                           f"{others[0]} {others[0].dtype}; fpganet takes fully-int8 TFLite "
                           f"models, or float32 ones with --calib")
    if others:
        for op, weight in weights:
            out = tensors[op.outputs[0]] if op.outputs and op.outputs[0] >= 0 else None
            if out is not None and out.dtype == "float32":
                # Dynamic-range quantization: int8 weights, float activations quantized at run
                # time by the kernel itself.
                raise FpganetError(f"a dynamic-range quantized model: {op.code} #{op.index} has "
                                   f"{weight.dtype} weights ({weight}) and a float32 output; "
                                   f"fpganet takes fully-int8 TFLite models, or float32 ones "
                                   f"with --calib")
        return "int8"
    if floats:
        return "float"
    # No weights at all: a float input that no QUANTIZE reads makes a float model.
    source = tensors[graph_inputs[0]] if len(graph_inputs) == 1 else None
    plain = not any(op.code in ("QUANTIZE", "DEQUANTIZE") for op in ops)
    return "float" if source is not None and source.dtype == "float32" and plain else "int8"


#: A read TFLite file: its only subgraph, schema version, description and kind (:func:`_kind`).
_Parsed = namedtuple("_Parsed", "tensors ops graph_inputs graph_outputs version description kind")


def _parse(path):
    """A TFLite file as :class:`_Parsed`, or a one-line refusal naming the file."""
    path = existing_file(path, "model file")
    try:
        with open(path, "rb") as handle:
            buf = handle.read()
    except OSError as error:
        raise FpganetError(f"cannot read model file '{path}': {error.strerror}") from None
    if len(buf) < 8 or buf[4:8] != IDENTIFIER:
        raise FpganetError(f"'{path}' is not a TFLite model (no 'TFL3' flatbuffer identifier)")
    try:
        parsed = _read(buf)
    except FpganetError as error:
        raise FpganetError(f"'{path}': {error}") from None
    except Exception as error:   # flatbuffers reads past the end: struct.error, IndexError, ...
        raise FpganetError(f"'{path}' is not a readable TFLite model ({type(error).__name__}: "
                           f"{one_line(error)[:200]}; truncated or damaged?)") from None
    tensors, ops, graph_inputs, graph_outputs, version, description = parsed
    if version != 3:
        raise FpganetError(f"'{path}' is TFLite schema version {version}; fpganet reads version 3")
    return _Parsed(*parsed, _kind(tensors, ops, graph_inputs))


def tflite_kind(path):
    """Which reader takes a TFLite model.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        ``"int8"`` (fully-int8: :func:`load_tflite`) or ``"float"`` (float32 weights and
        activations: :func:`load_tflite_float`, then post-training quantization).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is not a readable TFLite model, or it is neither (float16 weights,
        dynamic-range or partial quantization): one line saying which.
    """
    return _parse(path).kind


def load_tflite_float(path):
    """Read a float32 TFLite model into the float IR, for post-training quantization.

    TFLite's NHWC becomes the IR's NCHW: weights OHWI -> OIHW, depthwise
    ``[1, kh, kw, C*mult]`` -> ``[C*mult, 1, kh, kw]`` with ``groups = C``, a
    FULLY_CONNECTED after a flatten of an ``H x W x C`` map gets its weight columns
    permuted from ``(h, w, c)`` to ``(c, h, w)`` behind a :class:`~fpganet.model.ir.Reshape`,
    SAME/VALID padding becomes explicit pads, fused RELU/RELU6 a ``relu`` (with
    ``clip_max`` 6), as in the int8 reader.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    fpganet.model.ir.Graph
        ReLUs fused; ``input_shape`` is ``(C, H, W)`` (NCHW inputs, as the float ONNX
        models take), ``output_shape`` that of the logits (a final SOFTMAX dropped:
        ``dropped_output_op`` ``"SOFTMAX"``).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is not a readable TFLite model, not a float32 one, or holds something
        the IR cannot represent (one line naming the op or tensor).
    """
    parsed = _parse(path)
    if parsed.kind != "float":
        raise FpganetError(f"'{os.fspath(path)}' is a fully-int8 TFLite model, not a float one: "
                           f"it compiles with its own quantization (load_tflite)")
    return _float_graph(path, parsed)


def _float_graph(path, parsed):
    importer = _FloatImporter(parsed.tensors, parsed.ops, parsed.graph_inputs,
                              parsed.graph_outputs)
    importer.run()
    output_name, output_shape = importer.logits_name_shape()
    graph = Graph(name=Path(path).stem, input_name=importer.input_name,
                  input_shape=tuple(importer.input_chw), output_name=output_name,
                  output_shape=output_shape, layers=importer.layers, notes=importer.notes,
                  dropped_output_op=importer.dropped)
    return fuse_relu(graph)


def load_tflite(path, config=None, source=None):
    """Read a fully-int8 TFLite model into a validated integer network.

    Parameters
    ----------
    path : str or os.PathLike
    config : fpganet.config.AcceleratorConfig, optional
    source : dict, optional
        More provenance for the manifest's ``source``.

    Returns
    -------
    fpganet.qnet.QNetwork
        Its ``input_shape`` is ``(C, H, W)``: it takes NCHW inputs, as the float ONNX
        models do; its ``output_shape`` is that of the logits (before a final SOFTMAX).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is missing or not a readable TFLite flatbuffer, or the model holds
        something the integer network cannot represent (one line naming the op or tensor).
    """
    parsed = _parse(path)
    if parsed.kind != "int8":
        raise FpganetError(f"'{os.fspath(path)}' is a float32 TFLite model, not a fully-int8 "
                           f"one: it needs post-training quantization with calibration data "
                           f"(--calib)")
    return _int8_network(parsed, config, source)


def load_tflite_any(path, config=None, source=None):
    """A TFLite model read once: :func:`load_tflite`'s network if it is fully int8,
    :func:`load_tflite_float`'s float graph if it is float32 (``config`` and ``source`` then
    unused)."""
    parsed = _parse(path)
    if parsed.kind == "float":
        return _float_graph(path, parsed)
    return _int8_network(parsed, config, source)


def _int8_network(parsed, config, source):
    from ..config import DEFAULT_CONFIG
    from ..qnet import QNetwork

    config = config or DEFAULT_CONFIG
    if config.operand_width != 8:
        raise FpganetError(f"a TFLite int8 model needs operand_width 8, not {config.operand_width}")
    importer = _Importer(parsed.tensors, parsed.ops, parsed.graph_inputs, parsed.graph_outputs,
                         config)
    result = importer.run()
    output_name, output_shape = importer.logits_name_shape()
    layers = importer.layers
    for index, layer in enumerate(layers):
        # A chain stays without explicit inputs, as the ONNX path writes it.
        if tuple(layer.inputs) == (index - 1,):
            layer.inputs = None
    info = {"format": "tflite", "schema_version": parsed.version,
            "description": parsed.description, "dropped_output_op": importer.dropped,
            "notes": list(importer.notes), "ops": len(parsed.ops), **(source or {})}
    net = QNetwork(layers=layers, input_name=importer.input_name, input_shape=importer.input_chw,
                   input_scale=importer.input_q[0], input_zp=importer.input_q[1],
                   output_name=output_name, output_shape=output_shape,
                   output_scale=result.scale, output_zp=result.zp, config=config, source=info,
                   calibration={"data": "scales and zero points of the TFLite model's int8 "
                                        "tensors", "method": "tflite", "samples": 0})
    net.validate()
    return net
