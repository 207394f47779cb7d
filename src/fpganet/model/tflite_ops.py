"""TFLite op handlers, one small function per op, registered per reader kind.

A handler is ``handler(ctx, op)``: ``ctx`` the walk's
:class:`~fpganet.model.tflite_context.TfliteContext` (an
:class:`~fpganet.model.tflite_context.Int8Context` for a fully-int8 model, a
:class:`~fpganet.model.tflite_context.FloatContext` for a float32 one), ``op`` the read
operator. It checks the op, reads its tensors through ``ctx`` and has ``ctx`` emit the
layer of the float IR (``conv``, ``dense``, ``lower``); an int8 model's carries the model's
quantization as annotations (:attr:`fpganet.model.ir.Graph.quantization`).
A new op is one such function under :func:`tflite_handler`; each kind's supported list and
its refusal of any other op come from the registry
(:data:`fpganet.model.tflite_registry.HANDLERS`).
"""

import numpy as np

from ..errors import FpganetError
from .ir import Add, AvgPool, MaxPool, Relu, Reshape
from .tflite_context import TensorValue
from .tflite_registry import MIXED, tflite_handler

__all__ = ["conv_2d", "depthwise_conv_2d", "fully_connected", "add", "average_pool_2d",
           "max_pool_2d", "mean", "reshape", "relu", "relu6", "softmax", "quantize",
           "dequantize", "mixed"]


@tflite_handler("CONV_2D", "int8", "float")
def conv_2d(ctx, op, depthwise=False):
    value = ctx.value(op, 0)
    out = ctx.output(op)
    weight, groups, axis = ctx.conv_weight(op, value, out.chw, depthwise)
    pads, stride = ctx.window(op, value.chw, weight.shape[2:], out.chw)
    ctx.conv(op, value, out, weight, axis, groups, stride, pads)


@tflite_handler("DEPTHWISE_CONV_2D", "int8", "float")
def depthwise_conv_2d(ctx, op):
    conv_2d(ctx, op, depthwise=True)


@tflite_handler("FULLY_CONNECTED", "int8", "float")
def fully_connected(ctx, op):
    """A dense layer; an ``H x W x C`` input is flattened first (a Reshape, the
    weight columns permuted from TFLite's (h, w, c) order to fpganet's (c, h, w))."""
    value = ctx.value(op, 0)
    out = ctx.output(op)
    weight, flat = ctx.dense_weight(op, value, out.tensor, out.chw)
    if flat is not None:
        value = ctx.flatten(op, value, flat, weight.shape[1], f"{out.tensor.name}/flatten")
    ctx.dense(op, value, out, weight)


@tflite_handler("ADD", "int8", "float")
def add(ctx, op):
    out = ctx.output(op)
    a, b = ctx.add_operands(op, out.chw)
    relu, clip_max = ctx.relu(op)
    ctx.lower(Add(name=out.tensor.name, in_shape=out.chw, relu=relu, clip_max=clip_max), (a, b),
              out)


@tflite_handler("AVERAGE_POOL_2D", "int8", "float")
def average_pool_2d(ctx, op):
    value = ctx.value(op, 0)
    out = ctx.output(op)
    ctx.lower(ctx.average_pool(op, value, out.tensor, out.chw), (value,), out)


@tflite_handler("MAX_POOL_2D", "int8", "float")
def max_pool_2d(ctx, op):
    value = ctx.value(op, 0)
    out = ctx.output(op)
    if (out.scale, out.zp) != (value.scale, value.zp):
        raise FpganetError(f"{ctx.label(op)} changes the scale or zero point; fpganet's max "
                           f"pooling passes them through")
    kernel, stride, pads = ctx.max_pool_window(op, value, out.chw)
    ctx.lower(MaxPool(name=out.tensor.name, kernel=kernel, stride=stride, pads=pads,
                      in_shape=value.chw, out_shape=out.chw), (value,), out)


@tflite_handler("MEAN", "float")
def mean(ctx, op):
    # Keras' GlobalAveragePooling2D converts to MEAN over H and W: an average pool whose
    # window is the map.
    value = ctx.value(op, 0)
    out = ctx.output(op)
    axes = ctx.constant(op, 1, "axes", "int32")
    axes = [] if axes is None else [int(a) for a in np.ravel(axes)]
    c, h, w = value.chw
    shape = list(ctx.tensors[op.inputs[0]].shape)
    if len(shape) != 4 or sorted(a % 4 for a in axes) != [1, 2] or out.chw != (c, 1, 1):
        raise FpganetError(f"{ctx.label(op)}: MEAN over axes {axes} of {shape}; fpganet takes a "
                           f"mean over H and W of a [1, H, W, C] map (a global average pool)")
    ctx.lower(AvgPool(name=out.tensor.name, kernel=(h, w), stride=(1, 1), pads=(0, 0, 0, 0),
                      in_shape=value.chw, out_shape=out.chw), (value,), out)


@tflite_handler("RESHAPE", "int8", "float")
def reshape(ctx, op):
    """The flatten before FULLY_CONNECTED (recorded on the value, emitted there), a reshape
    where H = W = 1 (no layer of its own), or the reshape of a flat network input into a
    map of one channel or of 1 x 1 (tflite-micro's micro_speech: [1, 1960] to [1, 49, 40,
    1]): a :class:`~fpganet.model.ir.Reshape`, the data order being the same in NHWC and
    NCHW there; a ``[1, H, W]`` input given its channel axis is the input itself."""
    value = ctx.value(op, 0)
    out = ctx.output(op)
    tensor, chw, scale, zero_point = out
    if (scale, zero_point) != (value.scale, value.zp):
        raise FpganetError(f"{ctx.label(op)} changes the scale or zero point")
    c, h, w = value.chw
    if value.layer == -1 and h == w == 1 and chw != value.chw and len(tensor.shape) == 4 \
            and (chw[0] == 1 or chw[1] == chw[2] == 1):
        ctx.lower(Reshape(name=tensor.name, in_shape=value.chw, out_shape=chw), (value,), out)
        return
    if value.layer == -1 and chw == value.chw:
        ctx.values[tensor.index] = value        # a [1, H, W] input given its channel axis
        return
    if len(tensor.shape) == 2 and chw == (c * h * w, 1, 1):
        flat_from = value.chw if h * w > 1 else None
    elif h == w == 1 and chw == value.chw:
        flat_from = None
    else:
        raise FpganetError(f"{ctx.label(op)} reshapes {list(value.chw)} (C, H, W) to "
                           f"{list(tensor.shape)}; fpganet takes a RESHAPE only as the "
                           f"flatten before FULLY_CONNECTED")
    ctx.values[tensor.index] = TensorValue(value.layer, value.chw, value.scale, value.zp,
                                           flat_from)


@tflite_handler("RELU", "float")
def relu(ctx, op, clip_max=None):
    # A standalone ReLU: fuse_relu folds it into the layer before it, as for ONNX.
    value = ctx.value(op, 0)
    out = ctx.output(op)
    if out.chw != value.chw:
        raise FpganetError(f"{ctx.label(op)} changes the shape of its input")
    ctx.lower(Relu(name=out.tensor.name, in_shape=value.chw, clip_max=clip_max), (value,), out)


@tflite_handler("RELU6", "float")
def relu6(ctx, op):
    relu(ctx, op, clip_max=6.0)


@tflite_handler("SOFTMAX", "int8", "float")
def softmax(ctx, op):
    """Dropped at the end of the network: the outputs are the logits before it."""
    readers = ctx.consumers.get(op.outputs[0] if op.outputs else -1, [])
    last = op.outputs == [ctx.output_index] or (
        len(readers) == 1 and readers[0].code == "DEQUANTIZE"
        and readers[0].outputs == [ctx.output_index])
    if not last:
        raise FpganetError(f"{ctx.label(op)}: SOFTMAX is taken only at the end of the "
                           f"network, where it is dropped")
    value = ctx.value(op, 0)
    ctx.values[op.outputs[0]] = value
    ctx.dropped = "SOFTMAX"
    ctx.logits = ctx.tensors[op.inputs[0]].name
    ctx.notes.append(f"dropped the final {ctx.label(op)} (outputs are the logits before "
                     f"it; the arg-max is unchanged)")


@tflite_handler("QUANTIZE", "int8")
def quantize(ctx, op):
    """Only on the float network input: its output gives the input's scale and zero point."""
    source = op.inputs[0] if op.inputs else -1
    if source != ctx.graph_inputs[0] or ctx.tensors[source].dtype != "float32" \
            or ctx.input_q is not None:
        raise FpganetError(f"{ctx.label(op)}: QUANTIZE is taken only on the float network "
                           f"input (a requantization inside the network is not supported)")
    out = ctx.output(op)
    if out.chw != ctx.input_chw:
        raise FpganetError(f"{ctx.label(op)} changes the shape of the input")
    ctx.input_q = (out.scale, out.zp)
    ctx.input_tensor = out.tensor.index
    ctx.values[out.tensor.index] = TensorValue(-1, out.chw, out.scale, out.zp)


@tflite_handler("DEQUANTIZE", "int8")
def dequantize(ctx, op):
    """Only as the last op: the network outputs the int8 tensor it reads (with its scale)."""
    if op.outputs != [ctx.output_index]:
        raise FpganetError(f"{ctx.label(op)}: DEQUANTIZE is taken only as the network's last "
                           f"op (a float tensor inside the network is not supported)")
    ctx.values[ctx.output_index] = ctx.value(op, 0)


@tflite_handler("QUANTIZE", "float", listed=False)
@tflite_handler("DEQUANTIZE", "float", listed=False)
def mixed(ctx, op):
    raise FpganetError(f"{ctx.label(op)} in a model with float32 weights: {MIXED}")
