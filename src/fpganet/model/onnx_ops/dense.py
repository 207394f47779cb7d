"""ONNX ops that make a dense layer: Gemm, and MatMul (an Add after it folds into its bias)."""

import numpy as np

from ..ir import Dense
from ..onnx_common import layer_name, shape_text
from .folding import note_forward, per_channel
from .registry import onnx_handler


def dense(ctx, node, index, view, weight, bias):
    """Emit a Dense layer ``W [M, K]`` on the current (K,) view."""
    m, k = weight.shape
    name = layer_name(node, index)
    ctx.ensure_canonical((k, 1, 1), name)
    weight = np.asarray(weight, np.float64)
    bias = np.asarray(bias, np.float64)
    if ctx.order is not None:
        # The data are stored in NCHW order; logical feature j lies at stored order[j].
        stored = np.empty_like(weight)
        stored[:, ctx.order] = weight
        weight = stored
        ctx.notes.append(f"folded the transpose '{layer_name(*ctx.order_node)}' "
                         f"into the columns of '{name}'")
        ctx.order = ctx.order_node = None
    if ctx.affine is not None:
        scale, shift = ctx.affine
        bias = bias + weight @ shift
        weight = weight * scale[None, :]
        note_forward(ctx, name)
    ctx.emit(Dense(name=name, weight=weight.astype(np.float32),
                   bias=bias.astype(np.float32), in_shape=(k, 1, 1),
                   out_shape=(m, 1, 1)))
    ctx.canon = (m, 1, 1)


@onnx_handler("Gemm", "one constant operand", takes_affine=True, takes_order=True)
def gemm(ctx, node, index, data):
    """A dense layer; the data tensor may be either operand (its orientation says which
    way the batch lies)."""
    position = ctx.data_index(node, index, data.name, (0, 1))
    attrs = ctx.attrs(node)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = attrs.get("transA", 0), attrs.get("transB", 0)
    ctx.require(len(data.view) == 1, node, index, f"needs a 2-D input, got "
                f"{shape_text(['N', *data.view])}")
    other = ctx.const(node.input[1 - position], node, index, "B" if position == 0 else "A")
    ctx.require(other.ndim == 2, node, index, f"constant operand has shape "
                f"{shape_text(other.shape)}, expected 2-D")
    other = other.astype(np.float64)
    if position == 0:
        # Y[N, M] = op(A)[N, K] op(B)[K, M]: the data must read as [N, K].
        ctx.require(data.orientation == trans_a, node, index,
                    "transA does not match the data layout (the batch must end up on axis 0 of op(A))")
        op_b = other.T if trans_b else other
        weight, out_orientation = op_b.T, 0
    else:
        # Y[M, N] = op(A)[M, K] op(B)[K, N]: the data must read as [K, N].
        ctx.require(data.orientation != trans_b, node, index,
                    "transB does not match the data layout (the batch must end up on axis 1 of op(B))")
        weight, out_orientation = (other.T if trans_a else other), 1
    m, k = weight.shape
    ctx.require(k == data.view[0], node, index, f"constant operand {shape_text(other.shape)} does "
                f"not match the {data.view[0]} input features")
    bias = np.zeros(m)
    if len(node.input) > 2 and node.input[2]:
        c = ctx.const(node.input[2], node, index, "C").astype(np.float64)
        bias = beta * per_channel(ctx, node, index, c, (m,), out_orientation, m)
    dense(ctx, node, index, data.view, alpha * weight, bias)
    return (m,), out_orientation


@onnx_handler("MatMul", "one constant 2-D operand, followed by Add as dense",
              takes_affine=True, takes_order=True)
def mat_mul(ctx, node, index, data):
    """A dense layer without bias (an Add after it folds into the bias)."""
    position = ctx.data_index(node, index, data.name, (0, 1))
    ctx.require(len(data.view) == 1, node, index, f"needs a 2-D input, got "
                f"{shape_text(['N', *data.view])}")
    other = ctx.const(node.input[1 - position], node, index, "weight").astype(np.float64)
    ctx.require(other.ndim == 2, node, index, f"constant operand has shape "
                f"{shape_text(other.shape)}, expected 2-D")
    if position == 0:
        ctx.require(data.orientation == 0, node, index, "the data operand must be [N, K]")
        weight, out_orientation = other.T, 0
    else:
        ctx.require(data.orientation == 1, node, index, "the data operand must be [K, N]")
        weight, out_orientation = other, 1
    ctx.require(weight.shape[1] == data.view[0], node, index, f"constant operand "
                f"{shape_text(other.shape)} does not match the {data.view[0]} input features")
    dense(ctx, node, index, data.view, weight, np.zeros(weight.shape[0]))
    return (weight.shape[0],), out_orientation
