"""The walk over a TFLite model's operators, and how each reader kind lowers a layer.

:class:`TfliteContext` holds what every op handler (:mod:`fpganet.model.tflite_ops`)
shares: labels, shapes, constants, fused activations, SAME/VALID windows, the NHWC -> NCHW
weight layouts and the flatten before FULLY_CONNECTED, and the layers it emits in the float
IR (:mod:`fpganet.model.ir`). Its two kinds differ only in the tensors they accept and in a
linear layer's parameters: :class:`FloatContext` reads a float32 model, for post-training
quantization; :class:`Int8Context` a fully-int8 one, whose own scales, zero points, int8
weights and int32 biases it records as the graph's quantization (``"activations"``,
``"weight_scales"``, ``"integers"``), which the quantizer takes as given.
"""

from collections import namedtuple

import numpy as np

from ..errors import FpganetError
from .ir import REQUANTIZING_LAYERS, AvgPool, Conv, Dense, IntegerWeights, Reshape
from .tflite_registry import HANDLERS, MIXED, supported
from .tflite_read import NUMPY_DTYPES

__all__ = ["TfliteContext", "Int8Context", "FloatContext", "TensorValue", "Output"]

_ACTIVATIONS = {0: None, 1: "RELU", 3: "RELU6"}

#: An op's output: its tensor, ``(C, H, W)``, scale and zero point (None in a float model).
Output = namedtuple("Output", "tensor chw scale zp")


class TensorValue:
    """A feature map as fpganet holds it: the layer that computes it (-1: the network input),
    its ``(C, H, W)``, scale and zero point (None in a float model); ``flat_from``: the
    ``(C, H, W)`` of the map a RESHAPE flattened (TFLite's data order (h, w, c), fpganet's
    stays (c, h, w))."""

    def __init__(self, layer, chw, scale, zero_point, flat_from=None):
        self.layer, self.chw, self.scale, self.zp, self.flat_from = (layer, chw, scale,
                                                                    zero_point, flat_from)


class TfliteContext:
    """The walk over the operators that the int8 and the float reader share.

    A kind names its handlers' registry in ``KIND`` (:data:`fpganet.model.tflite_registry.HANDLERS`)
    and the weights' dtype in ``WEIGHTS``, and provides ``output(op)`` (an :data:`Output`)
    and ``linear_parts`` (a linear layer's float weight and bias, and its fused activation).
    """

    KIND = None
    WEIGHTS = None

    def __init__(self, tensors, ops, graph_inputs, graph_outputs):
        self.tensors, self.ops = tensors, ops
        self.graph_inputs, self.graph_outputs = graph_inputs, graph_outputs
        self.values = {}        # tensor index -> TensorValue
        self.layers = []
        self.layer_tensors = []  # per layer, the tensor holding its output (see tensor_of)
        self.input_tensor = None
        self.notes = []
        self.dropped = None
        self.consumers = {}
        for op in ops:
            for position in op.inputs:
                self.consumers.setdefault(position, []).append(op)

    def label(self, op):
        output = self.tensors[op.outputs[0]].name if op.outputs and op.outputs[0] >= 0 else "?"
        return f"{op.code} #{op.index} ('{output}')"

    def chw(self, tensor, what, *, network_input=False):
        """``(C, H, W)`` of a ``[1, H, W, C]`` or ``[1, K]`` tensor; the network input may also
        be ``[1, H, W]`` (Keras' ``Input((28, 28))`` before its Reshape), one channel."""
        shape = tensor.shape
        if tensor.sparse:
            raise FpganetError(f"{tensor} ({what}) is sparse; fpganet reads dense tensors")
        ranks = (2, 3, 4) if network_input else (2, 4)
        if len(shape) not in ranks or shape[0] not in (1, -1) or any(d < 1 for d in shape[1:]):
            raise FpganetError(f"{tensor} ({what}) has shape {list(shape)}; fpganet takes one "
                               f"image [1, H, W, C] or a vector [1, K]"
                               f"{' (or [1, H, W] at the input)' if network_input else ''}")
        if len(shape) == 3:
            return (1, shape[1], shape[2])
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
        itemsize = np.dtype(NUMPY_DTYPES[dtype]).itemsize
        if len(tensor.data) != count * itemsize:
            raise FpganetError(f"{self.label(op)}: its {what} {tensor} holds {len(tensor.data)} "
                               f"bytes for shape {list(tensor.shape)} ({count * itemsize} "
                               f"expected)")
        return np.frombuffer(tensor.data, dtype=np.dtype(NUMPY_DTYPES[dtype]).newbyteorder("<")) \
            .astype(NUMPY_DTYPES[dtype]).reshape(tensor.shape)

    def output_tensor(self, op):
        """The op's one output tensor and its label, or a one-line refusal."""
        if len(op.outputs) != 1 or op.outputs[0] < 0:
            raise FpganetError(f"{op.code} #{op.index} has {len(op.outputs)} outputs; expected one")
        return self.tensors[op.outputs[0]], f"output of {op.code} #{op.index}"

    def emit(self, layer, sources, out_index, quant=(None, None), tensor=None):
        """Append an IR layer reading the layers ``sources`` (-1: the network input); it computes
        tensor ``out_index``, whose ``(scale, zero point)`` is ``quant`` (None in a float model);
        ``tensor``: the model tensor holding its output where that is not ``out_index``."""
        layer.inputs = tuple(sources)
        self.layers.append(layer)
        self.layer_tensors.append(out_index if tensor is None else tensor)
        self.values[out_index] = TensorValue(len(self.layers) - 1, tuple(layer.out_shape), *quant)

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

    def take_input(self, source):
        """Record the network input: its name, its own per-sample shape (NHWC, as LiteRT takes
        it) and the accelerator's ``(C, H, W)`` of it."""
        self.input_name = source.name
        self.input_tensor = source.index
        self.input_chw = self.chw(source, "the network input", network_input=True)
        self.input_shape = tuple(int(d) for d in source.shape[1:])

    def walk(self, output_index):
        """Hand every operator to its handler (:data:`fpganet.model.tflite_registry.HANDLERS`)."""
        self.output_index = output_index
        handlers = HANDLERS[self.KIND]
        for op in self.ops:
            entry = handlers.get(op.code)
            if entry is None or op.code == "CUSTOM":
                what = f"custom op '{op.custom}'" if op.code == "CUSTOM" else f"op {op.code}"
                raise FpganetError(f"unsupported {what} (#{op.index}, output "
                                   f"'{self.tensors[op.outputs[0]].name if op.outputs else '?'}'); "
                                   f"supported: {', '.join(supported(self.KIND))}")
            if op.options is None:
                raise FpganetError(f"{self.label(op)} has no options")
            entry.handler(self, op)

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

    def tensor_of(self, layer):
        """The index of the model tensor that holds layer ``layer``'s output (-1: the network
        input, its int8 codes after a QUANTIZE), in the model's NHWC (or [1, K]) layout; a
        flatten's is the map it flattens."""
        return self.input_tensor if layer == -1 else self.layer_tensors[layer]

    # Layouts and windows the handlers share ----------------------------------------------

    def conv_weight(self, op, value, out_chw, depthwise):
        """A CONV_2D's or DEPTHWISE_CONV_2D's weight in OIHW, its groups, and the axis of
        TFLite's per-channel weight scales."""
        weight = self.constant(op, 1, "weight", self.WEIGHTS)
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

    def dense_weight(self, op, value, tensor, out_chw):
        """A FULLY_CONNECTED's weight ``[M, K]``, its columns in fpganet's ``(c, h, w)`` order,
        and the ``(C, H, W)`` map it flattens (None: it reads a vector)."""
        if op.options["format"] != 0:
            raise FpganetError(f"{self.label(op)}: weights format {op.options['format']} is not "
                               f"supported (only DEFAULT)")
        weight = self.constant(op, 1, "weight", self.WEIGHTS)
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

    # What a layer becomes: an IR layer, the same for both kinds -------------------------

    def flatten(self, op, value, flat, k, name):
        """Emit the flatten of an ``H x W x C`` map (``flat``) before a FULLY_CONNECTED into a
        vector of ``k``; returns that vector."""
        # No tensor of the model holds the (c, h, w) vector: the map it flattens does, read in
        # that order.
        self.emit(Reshape(name=name, in_shape=flat, out_shape=(k, 1, 1)), (value.layer,),
                  ("flatten", op.index), (value.scale, value.zp), self.tensor_of(value.layer))
        return TensorValue(len(self.layers) - 1, (k, 1, 1), value.scale, value.zp)

    def conv(self, op, value, out, weight, axis, groups, stride, pads):
        weight, bias, relu, clip_max = self.linear_parts(op, value, weight, axis)
        self.lower(Conv(name=out.tensor.name, weight=weight, bias=bias, stride=stride, pads=pads,
                        in_shape=value.chw, out_shape=out.chw, relu=relu, groups=int(groups),
                        clip_max=clip_max), (value,), out)

    def dense(self, op, value, out, weight):
        m, k = weight.shape
        weight, bias, relu, clip_max = self.linear_parts(op, value, weight, 0)
        self.lower(Dense(name=out.tensor.name, weight=weight, bias=bias, in_shape=(k, 1, 1),
                         out_shape=(m, 1, 1), relu=relu, clip_max=clip_max), (value,), out)

    def lower(self, layer, inputs, out):
        """Emit the IR layer a handler describes, reading ``inputs`` (:class:`TensorValue`),
        computing ``out``."""
        self.emit(layer, [value.layer for value in inputs], out.tensor.index, (out.scale, out.zp))

    def quantization(self):
        """The model's own quantization, as :attr:`fpganet.model.ir.Graph.quantization` (None:
        a float model)."""
        return None


class Int8Context(TfliteContext):
    """A fully-int8 model into the integer network's layers."""

    KIND = "int8"
    WEIGHTS = "int8"

    def __init__(self, tensors, ops, graph_inputs, graph_outputs):
        super().__init__(tensors, ops, graph_inputs, graph_outputs)
        self.activations = {}      # layer index (-1: the input) -> (scale, zero point)
        self.weight_scales = {}    # linear layer index -> float32 [M]
        self.integers = {}         # linear layer index -> IntegerWeights

    def activation_qparams(self, tensor, what):
        """(scale, zero point) of an int8 activation tensor, or a one-line refusal."""
        if tensor.dtype == "float32":
            raise FpganetError(f"{tensor} ({what}) is float32: the model is not fully int8 "
                               f"quantized ({MIXED})")
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
                               f"float32: the model is not fully int8 quantized ({MIXED})")
        super().missing(op, index, what)

    def output(self, op):
        tensor, what = self.output_tensor(op)
        scale, zero_point = self.activation_qparams(tensor, what)
        return Output(tensor, self.chw(tensor, what), scale, zero_point)

    def run(self):
        source = self.one_input_output()
        self.take_input(source)
        if source.dtype == "float32":
            # A float input is quantized by the op that reads it (a QUANTIZE, checked there).
            self.input_q = None
        else:
            self.input_q = self.activation_qparams(source, "the network input")
            self.values[source.index] = TensorValue(-1, self.input_chw, *self.input_q)
        output_index = self.graph_outputs[0]
        self.walk(output_index)
        if self.input_q is None:
            raise FpganetError(f"the network input {source} is float32 and no QUANTIZE reads it: "
                               f"the model is not fully int8 quantized")
        self.activations[-1] = self.input_q
        return self.result(output_index)

    def linear_parts(self, op, value, weight, axis):
        """The float IR weight and bias of a linear op whose int8 ``weight`` (OIHW, or a
        dense ``[M, K]``) has its scales along ``axis``, with its fused activation; its
        integers and scales are recorded for the quantizer."""
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
        relu, clip_max = self.relu(op)
        index = len(self.layers)
        codes = weight if weight.ndim == 4 else np.ascontiguousarray(weight.reshape(m, -1, 1, 1))
        self.integers[index] = IntegerWeights(codes, bias, self.label(op))
        self.weight_scales[index] = s_w.astype(np.float32)
        # The IR's float values are the model's: codes times scales.
        scales = s_w.astype(np.float64).reshape((m,) + (1,) * (weight.ndim - 1))
        real_weight = (weight.astype(np.float64) * scales).astype(np.float32)
        real_bias = (bias.astype(np.float64) * value.scale * s_w).astype(np.float32)
        return real_weight, real_bias, relu, clip_max

    def lower(self, layer, inputs, out):
        if isinstance(layer, REQUANTIZING_LAYERS):
            self.activations[len(self.layers)] = (out.scale, out.zp)
        super().lower(layer, inputs, out)

    def quantization(self):
        return {"activations": self.activations, "weight_scales": self.weight_scales,
                "integers": self.integers, "arithmetic": "tflite"}


class FloatContext(TfliteContext):
    """A float32 model into the float IR (NCHW), for post-training quantization."""

    KIND = "float"
    WEIGHTS = "float32"

    def float_tensor(self, tensor, what):
        if tensor.dtype != "float32" or tensor.scale is not None:
            kind = "quantized float32" if tensor.dtype == "float32" else tensor.dtype
            raise FpganetError(f"{tensor} ({what}) is {kind} in a model with float32 weights: "
                               f"{MIXED}")

    def output(self, op):
        tensor, what = self.output_tensor(op)
        self.float_tensor(tensor, what)
        return Output(tensor, self.chw(tensor, what), None, None)

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
        self.take_input(source)
        self.values[source.index] = TensorValue(-1, self.input_chw, None, None)
        output_index = self.graph_outputs[0]
        self.walk(output_index)
        return self.result(output_index)

    def linear_parts(self, op, value, weight, axis):
        """The float weight and bias of a linear op, with its fused activation."""
        relu, clip_max = self.relu(op)
        return weight, self.bias(op, len(weight)), relu, clip_max
