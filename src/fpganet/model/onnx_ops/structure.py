"""ONNX ops that move, relabel or drop data: no layer of their own (a Reshape is emitted
only when a later layer needs another canonical shape)."""

import numpy as np

from ...errors import FpganetError
from ..onnx_common import BATCH, describe, layer_name, shape_text
from .registry import onnx_handler


@onnx_handler("Identity", "removed", takes_affine=True, takes_order=True)
def identity(ctx, node, index, data):
    return data.view, data.orientation


@onnx_handler("Dropout", "removed", takes_affine=True, takes_order=True)
def dropout(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    if len(node.output) > 1 and node.output[1] and ctx.consumers.get(node.output[1]):
        raise FpganetError(f"{describe(node, index)}: its mask output is used; only "
                           f"inference-mode Dropout (removed) is supported")
    ctx.notes.append(f"removed Dropout '{layer_name(node, index)}'")
    return data.view, data.orientation


@onnx_handler("Softmax", "final node, dropped")
@onnx_handler("LogSoftmax", "final node, dropped")
def final_normalization(ctx, node, index, data):
    """A final Softmax/LogSoftmax: dropped, the graph then outputs the logits before it
    (the arg-max is unchanged)."""
    ctx.data_index(node, index, data.name, (0,))
    if node.output[0] != ctx.graph.output[0].name:
        raise FpganetError(f"{describe(node, index)} is not the last node; {node.op_type} is "
                           f"only supported as the final node, where it is dropped")
    ctx.require(data.orientation == 0 and len(data.view) == 1, node, index,
                f"{node.op_type} is only supported on a [N, classes] tensor")
    axis = ctx.attrs(node).get("axis", 1 if ctx.opset < 13 else -1)
    ctx.require(axis in (1, -1), node, index, f"{node.op_type} over axis {axis} is not "
                f"supported (only the class axis 1)")
    ctx.dropped = node.op_type
    ctx.logits_name = data.name
    ctx.notes.append(f"dropped the final {node.op_type} '{layer_name(node, index)}' "
                     f"(outputs are the logits before it; the arg-max is unchanged)")
    return data.view, data.orientation


def axes_of(ctx, node, index, rank):
    """The ``axes`` of Unsqueeze/Squeeze (attribute before opset 13, input after), made
    non-negative against ``rank``; None when absent."""
    attrs = ctx.attrs(node)
    if "axes" in attrs:
        axes = list(attrs["axes"])
    elif len(node.input) > 1 and node.input[1]:
        axes = [int(a) for a in np.asarray(ctx.const(node.input[1], node, index, "axes")).ravel()]
    else:
        return None
    return sorted(a + rank if a < 0 else a for a in axes)


@onnx_handler("Unsqueeze", takes_affine=True, takes_order=True)
def unsqueeze(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    ctx.require(data.orientation == 0, node, index, "unsqueezing a transposed tensor is not supported")
    count = len(axes_of(ctx, node, index, 0) or [])
    axes = axes_of(ctx, node, index, len(data.view) + 1 + count) or []
    ctx.require(axes and 0 not in axes, node, index, "inserting an axis before the batch "
                "axis is not supported")
    full = [None, *data.view]
    for axis in axes:
        full.insert(axis, 1)
    return tuple(full[1:]), data.orientation


@onnx_handler("Squeeze", takes_affine=True, takes_order=True)
def squeeze(ctx, node, index, data):
    ctx.data_index(node, index, data.name, (0,))
    ctx.require(data.orientation == 0, node, index, "squeezing a transposed tensor is not supported")
    axes = axes_of(ctx, node, index, len(data.view) + 1)
    if axes is None:
        axes = [axis + 1 for axis, dim in enumerate(data.view) if dim == 1]
    ctx.require(0 not in axes, node, index, "squeezing the batch axis is not supported")
    for axis in axes:
        ctx.require(0 < axis <= len(data.view) and data.view[axis - 1] == 1, node, index,
                    f"axis {axis} of {shape_text(['N', *data.view])} cannot be squeezed")
    return tuple(d for axis, d in enumerate(data.view, start=1) if axis not in axes), data.orientation


@onnx_handler("Flatten", "axis 1 (or 0 where the model declares batch 1)", takes_affine=True,
              takes_order=True)
def flatten(ctx, node, index, data):
    """Axis 0 gives ``[1, n]`` where the model's input declares batch 1, as axis 1 does."""
    ctx.data_index(node, index, data.name, (0,))
    axis = ctx.attrs(node).get("axis", 1)
    if axis < 0:
        axis += len(data.view) + 1
    ctx.require(axis == 1 or (axis == 0 and ctx.export_batch == 1), node, index,
                f"Flatten with axis {axis} is not supported; only axis 1 (keep the batch axis), "
                f"or axis 0 where the model's input declares batch 1")
    ctx.require(data.orientation == 0, node, index, "flattening a transposed tensor is not supported")
    return (int(np.prod(data.view)),), data.orientation


@onnx_handler("Reshape", "batch stays axis 0", takes_affine=True, takes_order=True)
def reshape(ctx, node, index, data):
    """The target shape folded from a constant or a shape expression (``x.view(x.size(0),
    -1)``), else ONNX's inferred shape; the batch stays axis 0."""
    ctx.data_index(node, index, data.name, (0,))
    ctx.require(data.orientation == 0, node, index, "reshaping a transposed tensor is not supported")
    allow_zero = ctx.attrs(node).get("allowzero", 0)
    target = ctx.fold_shape(node.input[1]) if len(node.input) > 1 else None
    size = int(np.prod(data.view))
    if target is not None and target.ndim == 1 and len(target) >= 1:
        return reshape_to(ctx, node, index, list(target), data.view, size, allow_zero), \
            data.orientation
    inferred = ctx.inferred_view(node.output[0])
    if inferred is None or len(inferred) < 2 or any(d is None for d in inferred[1:]):
        raise FpganetError(f"cannot infer the shape of tensor '{node.output[0]}' (output of "
                           f"{describe(node, index)}): its shape input '{node.input[1]}' is "
                           f"neither a constant nor a foldable shape expression")
    new_view = tuple(inferred[1:])
    ctx.require(int(np.prod(new_view)) == size, node, index,
                f"inferred shape {shape_text(inferred)} does not hold {size} elements per sample")
    return new_view, data.orientation


def reshape_to(ctx, node, index, target, view, size, allow_zero):
    first, rest = target[0], target[1:]
    shown = shape_text(target)
    if first is BATCH or first == 0 and not allow_zero:
        pass
    elif first == -1:
        ctx.require(-1 not in rest and BATCH not in rest, node, index,
                    f"target shape {shown} leaves the batch ambiguous")
    elif isinstance(first, int) and first > 0 and (ctx.export_batch in (None, first)):
        pass  # the export's batch size, baked in by a tracing exporter
    else:
        raise FpganetError(f"{describe(node, index)}: target shape {shown} does not keep the "
                           f"batch (size {ctx.export_batch or 'N'}) as axis 0")
    dims = []
    for axis, dim in enumerate(rest, start=1):
        if dim is BATCH:
            raise FpganetError(f"{describe(node, index)}: target shape {shown} moves the batch "
                               f"off axis 0")
        if dim == 0 and not allow_zero:
            ctx.require(axis <= len(view), node, index, f"target shape {shown} copies a "
                        f"dimension the input does not have")
            dim = view[axis - 1]
        dims.append(int(dim))
    if -1 in dims:
        ctx.require(dims.count(-1) == 1, node, index, f"target shape {shown} has two -1")
        known = int(np.prod([d for d in dims if d != -1]))
        ctx.require(known > 0 and size % known == 0, node, index,
                    f"target shape {shown} does not fit {size} elements per sample")
        dims[dims.index(-1)] = size // known
    ctx.require(all(d > 0 for d in dims) and int(np.prod(dims)) == size, node, index,
                f"target shape {shown} does not hold the {size} elements per sample of "
                f"{shape_text(['N', *view])}")
    return tuple(dims)


@onnx_handler("Transpose", "perm [1, 0] on 2-D around Gemm/MatMul; batch-first perms before a Gemm",
              takes_affine=True, takes_order=True)
def transpose(ctx, node, index, data):
    """``[1, 0]`` on a 2-D tensor flips the orientation (around Gemm/MatMul); a batch-first
    permutation is tracked as a data order until a Gemm/MatMul permutes its weight columns."""
    ctx.data_index(node, index, data.name, (0,))
    rank = len(data.view) + 1
    perm = list(ctx.attrs(node).get("perm", reversed(range(rank))))
    if perm == list(range(rank)):
        return data.view, data.orientation
    if len(data.view) >= 2 and data.orientation == 0 and sorted(perm) == list(range(rank)) \
            and perm[0] == 0:
        # The batch stays first: the data are reordered, which only a Gemm/MatMul after a
        # flatten can absorb (its weight columns are permuted); tracked until then.
        axes = [p - 1 for p in perm[1:]]
        base = np.arange(int(np.prod(data.view))) if ctx.order is None else ctx.order
        order = base.reshape(data.view).transpose(axes).ravel()
        identity = np.array_equal(order, np.arange(order.size))
        ctx.order = None if identity else order
        ctx.order_node = None if identity else (node, index)
        return tuple(data.view[a] for a in axes), data.orientation
    ctx.require(len(data.view) == 1 and perm == [1, 0], node, index,
                f"Transpose with perm {perm} is not supported; only [1, 0] on a 2-D tensor, "
                f"or one that keeps the batch first")
    return data.view, 1 - data.orientation
