"""ONNX ops folded into a Conv or dense layer (BatchNormalization, Add of a constant), the
residual Add of two feature maps, and the forward fold of a per-channel affine."""

import numpy as np

from ...errors import FpganetError
from ..ir import LINEAR_LAYERS, Add, canonical_shape
from ..onnx_common import TensorState, describe, layer_name, shape_text
from .registry import onnx_handler


def last_linear(ctx, node, index, view):
    """The Conv/Dense whose output the current tensor is (through shape-only ops)."""
    layer = ctx.src
    fits = (isinstance(layer, LINEAR_LAYERS) and ctx.canon == layer.out_shape
            and ctx.exclusive and ctx.affine is None and ctx.order is None)
    if not fits:
        return None
    m = layer.out_shape[0]
    ctx.require(view and view[0] in (m, 1) and int(np.prod(view)) == int(np.prod(layer.out_shape)),
                node, index, f"its channel axis (size {view[0] if view else '?'}) is not the "
                f"{m} output channels of '{layer.name}'")
    return layer


def per_channel(ctx, node, index, const, view, orientation, m):
    """A constant broadcast over [N, *view] as one value per channel (axis 1), or an error."""
    full = (1, *view) if orientation == 0 else (*view, 1)
    try:
        if const.ndim > len(full):
            raise ValueError
        values = np.broadcast_to(const, full)
    except ValueError:
        raise FpganetError(f"{describe(node, index)}: constant of shape "
                           f"{shape_text(const.shape)} does not broadcast over "
                           f"{shape_text(['N', *view] if orientation == 0 else [*view, 'N'])} "
                           f"without depending on the batch") from None
    values = values.reshape(view)
    rows = values.reshape(view[0], -1)
    ctx.require(np.all(rows == rows[:, :1]), node, index,
                f"constant of shape {shape_text(const.shape)} varies within a channel; only "
                f"per-channel values can be folded")
    return np.broadcast_to(rows[:, 0], (m,)).astype(np.float64)


def residual_add(ctx, node, index, names):
    """An Add of two data tensors: a residual :class:`~fpganet.model.ir.Add`."""
    values = [ctx.values[name] for name in names]
    for name, value in zip(names, values):
        ctx.refuse_pending(value, describe(node, index))
        ctx.require(value.orientation == 0, node, index, f"input '{name}' has the batch on "
                    f"axis 1 (a transposed 2-D tensor)")
    view = values[0].view
    ctx.require(values[1].view == view, node, index,
                f"adds {shape_text(['N', *values[0].view])} and "
                f"{shape_text(['N', *values[1].view])}; only two tensors of one shape "
                f"(no broadcasting) are supported")
    shape = canonical_shape(view)
    sources = []
    for value in values:
        ctx.enter(value)
        ctx.ensure_canonical(shape, layer_name(node, index))
        sources.append(ctx.src)
    ctx.emit(Add(name=layer_name(node, index), in_shape=shape), sources=sources)
    ctx.canon = shape
    return TensorState(view, 0, ctx.src, shape)


@onnx_handler("Add", "two feature maps of one shape (residual), or a per-channel constant, folded",
              takes_affine=True, join=residual_add)
def add(ctx, node, index, data):
    """A per-channel constant: folded into the bias of the Conv/Gemm before it, or pending
    forward into the one after it. (An Add of two feature maps is :func:`residual_add`.)"""
    position = ctx.data_index(node, index, data.name, (0, 1))
    layer = last_linear(ctx, node, index, data.view)
    const = ctx.const(node.input[1 - position], node, index, "addend").astype(np.float64)
    if layer is None:
        ctx.require(data.orientation == 0 and data.view, node, index, "needs the batch on axis 0")
        shift = per_channel(ctx, node, index, const, data.view, data.orientation, data.view[0])
        pend_affine(ctx, node, index, data.view, np.ones_like(shift), shift)
        return data.view, data.orientation
    m = layer.out_shape[0]
    shift = per_channel(ctx, node, index, const, data.view, data.orientation, m)
    layer.bias = (layer.bias.astype(np.float64) + shift).astype(np.float32)
    ctx.notes.append(f"folded Add '{layer_name(node, index)}' into the bias of '{layer.name}'")
    return data.view, data.orientation


@onnx_handler("BatchNormalization", "folded into the Conv/Gemm before or after it",
              takes_affine=True)
def batch_normalization(ctx, node, index, data):
    """Folded into the weights and bias of the Conv/Gemm before it, or, after anything
    else (a ReLU), pending forward into the one after it."""
    ctx.data_index(node, index, data.name, (0,))
    attrs = ctx.attrs(node)
    ctx.require(not attrs.get("training_mode", 0), node, index, "training_mode 1 is not supported")
    ctx.require(attrs.get("spatial", 1) == 1, node, index, "spatial 0 is not supported")
    for extra in node.output[1:]:
        ctx.require(not (extra and ctx.consumers.get(extra)), node, index,
                    "its training outputs are used; only inference BatchNorm is supported")
    ctx.require(data.orientation == 0, node, index, "needs the batch on axis 0")
    layer = last_linear(ctx, node, index, data.view)
    gamma, beta, mean, var = (ctx.const(node.input[i], node, index, role).astype(np.float64).ravel()
                              for i, role in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")))
    channels = data.view[0]
    for values, role in ((gamma, "scale"), (beta, "B"), (mean, "mean"), (var, "var")):
        ctx.require(values.shape == (channels,), node, index, f"{role} has "
                    f"{values.size} values for {channels} channels")
    epsilon = float(attrs.get("epsilon", 1e-5))
    ctx.require(np.all(var + epsilon > 0), node, index, "var + epsilon is not positive")
    if layer is None:
        scale = gamma / np.sqrt(var + epsilon)
        pend_affine(ctx, node, index, data.view, scale, beta - mean * scale)
        return data.view, data.orientation
    m = layer.out_shape[0]
    scale = np.broadcast_to(gamma / np.sqrt(var + epsilon), (m,))
    shift = np.broadcast_to(beta - mean * gamma / np.sqrt(var + epsilon), (m,))
    weight = layer.weight.astype(np.float64)
    layer.weight = (weight * scale.reshape((m,) + (1,) * (weight.ndim - 1))).astype(np.float32)
    layer.bias = (layer.bias.astype(np.float64) * scale + shift).astype(np.float32)
    ctx.touched.append(layer)
    ctx.notes.append(f"folded BatchNormalization '{layer_name(node, index)}' into '{layer.name}'")
    return data.view, data.orientation


def pend_affine(ctx, node, index, view, scale, shift):
    """Record ``x -> scale[c] * x + shift[c]`` (per channel, axis 1) on the current tensor, to
    fold into the Conv/Gemm that reads it."""
    size = int(np.prod(view))
    per = size // view[0]
    scale = np.repeat(np.asarray(scale, np.float64), per)
    shift = np.repeat(np.asarray(shift, np.float64), per)
    if ctx.order is not None:   # stored position order[j] holds logical element j
        stored_scale, stored_shift = np.empty(size), np.empty(size)
        stored_scale[ctx.order], stored_shift[ctx.order] = scale, shift
        scale, shift = stored_scale, stored_shift
    if ctx.affine is not None:
        scale, shift = scale * ctx.affine[0], scale * ctx.affine[1] + shift
    ctx.affine = (scale, shift)
    ctx.affine_node = (node, index)


def note_forward(ctx, name):
    node, index = ctx.affine_node
    ctx.notes.append(f"folded {node.op_type} '{layer_name(node, index)}' forward into '{name}'")
    ctx.affine = ctx.affine_node = None


def fold_forward_conv(ctx, node, index, weight, bias, groups, pads, view):
    """Fold the pending per-channel affine of the input into a Conv's weight and bias."""
    scale, shift = (a.reshape(view[0], -1) for a in ctx.affine)
    bn_node, bn_index = ctx.affine_node
    if not (np.all(scale == scale[:, :1]) and np.all(shift == shift[:, :1])):
        raise FpganetError(f"{describe(bn_node, bn_index)} is not per channel where "
                           f"{describe(node, index)} reads it; it cannot be folded")
    scale, shift = scale[:, 0], shift[:, 0]
    if any(pads) and np.any(shift != 0):
        raise FpganetError(f"{describe(bn_node, bn_index)} cannot be folded forward into the "
                           f"padded {describe(node, index)}: its offset would reach the "
                           f"padding")
    m, cg = weight.shape[:2]
    group_of = np.arange(m) // (m // groups)
    channels = group_of[:, None] * cg + np.arange(cg)[None, :]   # [M, C/g] input channel
    w = weight.astype(np.float64)
    bias = bias.astype(np.float64) + np.einsum("mcij,mc->m", w, shift[channels])
    weight = w * scale[channels][:, :, None, None]
    note_forward(ctx, layer_name(node, index))
    return weight.astype(np.float32), bias.astype(np.float32)
