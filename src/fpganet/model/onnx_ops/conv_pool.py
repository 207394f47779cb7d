"""ONNX ops on feature maps: convolution, pooling and the ReLU that is fused into them."""

import numpy as np

from ...errors import FpganetError
from ..ir import AvgPool, Conv, MaxPool, Relu, canonical_shape
from ..onnx_common import describe, layer_name, shape_text
from .folding import fold_forward_conv
from .registry import onnx_handler
from .structure import axes_of


def spatial_pads(ctx, node, index, attrs, in_hw, kernel, stride):
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("NOTSET", ""):
        pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
        ctx.require(len(pads) == 4 and min(pads) >= 0, node, index, f"pads {list(pads)} are "
                    f"not 4 non-negative values")
        return pads
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    ctx.require(auto_pad in ("SAME_UPPER", "SAME_LOWER"), node, index,
                f"auto_pad {auto_pad} is not supported")
    begin, end = [], []
    for size, k, s in zip(in_hw, kernel, stride):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return (begin[0], begin[1], end[0], end[1])


@onnx_handler("Conv", "2-D, dilation 1, any group (depthwise)", takes_affine=True)
def conv(ctx, node, index, data):
    """An IR Conv; a per-channel affine still pending from before is folded into it."""
    ctx.data_index(node, index, data.name, (0,))
    attrs = ctx.attrs(node)
    weight = ctx.const(node.input[1], node, index, "weight").astype(np.float32)
    ctx.require(weight.ndim == 4, node, index, f"only 2-D convolution is supported (weight "
                f"{shape_text(weight.shape)})")
    groups = attrs.get("group", 1)
    dilations = list(attrs.get("dilations", (1, 1)))
    ctx.require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported "
                f"(only 1)")
    m, c, kh, kw = weight.shape
    ctx.require(data.orientation == 0 and len(data.view) == 3, node, index,
                f"needs an [N, C, H, W] input, got {shape_text(['N', *data.view])}")
    ctx.require(isinstance(groups, int) and groups >= 1 and data.view[0] == c * groups
                and m % groups == 0, node, index,
                f"group {groups} with weight {shape_text(weight.shape)} does not fit the "
                f"{data.view[0]} input channels (needs input channels = group x {c}, output "
                f"channels a multiple of the group)")
    kernel = tuple(attrs.get("kernel_shape", (kh, kw)))
    ctx.require(kernel == (kh, kw), node, index, f"kernel_shape {list(kernel)} does not match "
                f"the weight {shape_text(weight.shape)}")
    stride = tuple(attrs.get("strides", (1, 1)))
    ctx.require(len(stride) == 2 and min(stride) >= 1, node, index, f"strides {list(stride)}")
    pads = spatial_pads(ctx, node, index, attrs, data.view[1:], kernel, stride)
    bias = np.zeros(m, np.float32)
    if len(node.input) > 2 and node.input[2]:
        bias = ctx.const(node.input[2], node, index, "bias").astype(np.float32).reshape(-1)
        ctx.require(bias.shape == (m,), node, index, f"bias has shape "
                    f"{shape_text(bias.shape)}, expected [{m}]")
    ho = (data.view[1] + pads[0] + pads[2] - kh) // stride[0] + 1
    wo = (data.view[2] + pads[1] + pads[3] - kw) // stride[1] + 1
    ctx.require(ho >= 1 and wo >= 1, node, index, f"the kernel {kh}x{kw} does not fit the "
                f"padded input {shape_text(data.view)}")
    ctx.ensure_canonical(tuple(data.view), layer_name(node, index))
    if ctx.affine is not None:
        weight, bias = fold_forward_conv(ctx, node, index, weight, bias, groups, pads, data.view)
    out = (m, ho, wo)
    ctx.emit(Conv(name=layer_name(node, index), weight=weight, bias=bias,
                  stride=stride, pads=pads, in_shape=tuple(data.view), out_shape=out,
                  groups=int(groups)))
    ctx.canon = out
    return out, 0


@onnx_handler("MaxPool", "2-D, dilation 1")
def max_pool(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    if len(node.output) > 1 and node.output[1] and ctx.consumers.get(node.output[1]):
        raise FpganetError(f"{describe(node, index)}: its Indices output is used; not supported")
    attrs = ctx.attrs(node)
    ctx.require(data.orientation == 0 and len(data.view) == 3, node, index,
                f"needs an [N, C, H, W] input, got {shape_text(['N', *data.view])}")
    kernel = tuple(attrs.get("kernel_shape", ()))
    ctx.require(len(kernel) == 2, node, index, f"kernel_shape {list(kernel)} is not 2-D")
    dilations = list(attrs.get("dilations", (1, 1)))
    ctx.require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported")
    stride = tuple(attrs.get("strides", (1, 1)))
    pads = list(spatial_pads(ctx, node, index, attrs, data.view[1:], kernel, stride))
    ctx.require(all(p < k for p, k in zip(pads, kernel + kernel)), node, index,
                f"pads {pads} must be smaller than the kernel {list(kernel)}")
    out_hw = []
    for axis in range(2):
        size, k, s = data.view[1 + axis], kernel[axis], stride[axis]
        begin, end = pads[axis], pads[axis + 2]
        if attrs.get("ceil_mode", 0):
            out = -(-(size + begin + end - k) // s) + 1
            if (out - 1) * s >= size + begin:  # a window must start inside the input or left pad
                out -= 1
            pads[axis + 2] = max(end, (out - 1) * s + k - size - begin)
        else:
            out = (size + begin + end - k) // s + 1
        ctx.require(out >= 1, node, index, f"the kernel {list(kernel)} does not fit the input "
                    f"{shape_text(data.view)}")
        out_hw.append(out)
    ctx.ensure_canonical(tuple(data.view), layer_name(node, index))
    out = (data.view[0], *out_hw)
    ctx.emit(MaxPool(name=layer_name(node, index), kernel=kernel, stride=stride,
                     pads=tuple(pads), in_shape=tuple(data.view), out_shape=out))
    ctx.canon = out
    return out, 0


@onnx_handler("Relu")
def relu(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    shape = canonical_shape(data.view)
    ctx.ensure_canonical(shape, layer_name(node, index))
    ctx.emit(Relu(name=layer_name(node, index), in_shape=shape))
    return data.view, data.orientation


@onnx_handler("Clip", "min 0 (ReLU, ReLU6)")
def clip(ctx, node, index, data):
    """Clip(0, max) is a ReLU with ``clip_max`` (ReLU6), fused into the layer before it."""
    ctx.data_index(node, index, data.name, (0,))
    attrs = ctx.attrs(node)
    if "min" in attrs or "max" in attrs:   # before opset 11: attributes
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low, high = (float(np.asarray(ctx.const(node.input[i], node, index, role)).reshape(-1)[0])
                     if len(node.input) > i and node.input[i] else None
                     for i, role in ((1, "min"), (2, "max")))
    ctx.require(low is not None and float(low) == 0.0, node, index,
                f"Clip with min {low} is not supported; only min 0 (ReLU, ReLU6)")
    ctx.require(high is None or (np.isfinite(high) and high > 0), node, index,
                f"Clip with max {high} is not supported; the max must be positive")
    shape = canonical_shape(data.view)
    ctx.ensure_canonical(shape, layer_name(node, index))
    ctx.emit(Relu(name=layer_name(node, index), in_shape=shape,
                  clip_max=None if high is None or np.isinf(high) else float(high)))
    return data.view, data.orientation


def pool_window(ctx, node, index, view, orientation, kernel, stride, pads):
    ctx.require(orientation == 0 and len(view) == 3, node, index, f"needs an [N, C, H, W] "
                f"input, got {shape_text(['N', *view])}")
    ctx.require(len(kernel) == 2 and min(kernel) >= 1, node, index,
                f"kernel_shape {list(kernel)} is not 2-D")
    ctx.require(len(stride) == 2 and min(stride) >= 1, node, index, f"strides {list(stride)}")
    ctx.require(all(p < k for p, k in zip(pads, kernel + kernel)), node, index,
                f"pads {list(pads)} must be smaller than the kernel {list(kernel)}")
    out_hw = tuple((view[1 + a] + pads[a] + pads[a + 2] - kernel[a]) // stride[a] + 1
                   for a in range(2))
    ctx.require(min(out_hw) >= 1, node, index, f"the kernel {list(kernel)} does not fit the "
                f"input {shape_text(view)}")
    ctx.ensure_canonical(tuple(view), layer_name(node, index))
    out = (view[0], *out_hw)
    ctx.emit(AvgPool(name=layer_name(node, index), kernel=tuple(kernel), stride=tuple(stride),
                     pads=tuple(pads), in_shape=tuple(view), out_shape=out))
    ctx.canon = out
    return out


@onnx_handler("AveragePool", "2-D, padding only with count_include_pad 1")
def average_pool(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    attrs = ctx.attrs(node)
    kernel = tuple(attrs.get("kernel_shape", ()))
    ctx.require(len(kernel) == 2, node, index, f"kernel_shape {list(kernel)} is not 2-D")
    dilations = list(attrs.get("dilations", (1, 1)))
    ctx.require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported")
    ctx.require(not attrs.get("ceil_mode", 0), node, index, "ceil_mode 1 is not supported")
    stride = tuple(attrs.get("strides", (1, 1)))
    ctx.require(len(data.view) == 3, node, index, f"needs an [N, C, H, W] input, got "
                f"{shape_text(['N', *data.view])}")
    pads = tuple(spatial_pads(ctx, node, index, attrs, data.view[1:], kernel, stride))
    ctx.require(not any(pads) or attrs.get("count_include_pad", 0), node, index,
                f"pads {list(pads)} with count_include_pad 0 are not supported (border "
                f"windows would divide by fewer elements)")
    out = pool_window(ctx, node, index, data.view, data.orientation, kernel, stride, pads)
    return out, 0


@onnx_handler("GlobalAveragePool")
def global_average_pool(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    ctx.require(len(data.view) == 3, node, index, f"needs an [N, C, H, W] input, got "
                f"{shape_text(['N', *data.view])}")
    out = pool_window(ctx, node, index, data.view, data.orientation, tuple(data.view[1:]),
                      (1, 1), (0, 0, 0, 0))
    return out, 0


@onnx_handler("ReduceMean", "over H and W")
def reduce_mean(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    attrs = ctx.attrs(node)
    axes = axes_of(ctx, node, index, len(data.view) + 1)
    ctx.require(len(data.view) == 3 and axes == [2, 3], node, index,
                f"ReduceMean over axes {axes} of {shape_text(['N', *data.view])} is not "
                f"supported; only over H and W (axes [2, 3]) of [N, C, H, W]")
    out = pool_window(ctx, node, index, data.view, data.orientation, tuple(data.view[1:]),
                      (1, 1), (0, 0, 0, 0))
    return (out if attrs.get("keepdims", 1) else (out[0],)), 0
