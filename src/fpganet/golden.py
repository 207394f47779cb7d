"""The golden model: a vectorized numpy executor of the integer network.

This module *is* the definition of the accelerator's numerics (see
``docs/reference/numerics.md``); the RTL must match it bit for bit, layer by layer.

For each :class:`~fpganet.qnet.QConv`::

    acc[m, n] = bias[m] + sum_k weight[m, k] * x[k, n]        (exact, |acc| < 2**31)
    y[m, n]   = clamp(zp_out + ((acc * mult[m] + (1 << (shift[m] - 1))) >> shift[m]), lo, hi)

in the ``fpganet`` requantization mode; in the ``tflite`` mode the rescale is TFLite's
``MultiplyByQuantizedMultiplier`` (:func:`~fpganet.quantize.fixed_point.multiply_tflite`),
the network's ``config.requant_mode`` says which.

where ``x`` is the im2col matrix of the input padded with ``zp_in`` (grouped
and depthwise convolutions: each output channel's own group of input channels).
Max pooling works on int8 (padding never wins); reshapes keep NCHW order. A
residual add (:class:`~fpganet.qnet.QAdd`) brings each input to a common
fixed-point scale and requantizes the sum; an average pool
(:class:`~fpganet.qnet.QAvgPool`) sums each window's offset codes and
requantizes. Layers read the outputs their ``inputs`` name (a DAG in
topological order).

The dot products run through a floating-point BLAS matrix product, which is
*exact* here: every operand is an integer, every product has magnitude at most
2**14 and every partial sum is bounded by ``128 * sum_k |w[m, k]|``, which the
compiler keeps below 2**31 (the layer is refused otherwise). float64 represents
all integers below 2**53 exactly, so no partial sum is ever rounded, whatever
order BLAS adds in; float32 (integers below 2**24) is used for a layer only
when its bound is below 2**24. The bias is then added in int64.
"""

import numpy as np

from .ops import avgpool, grouped_matmul, im2col, maxpool
from .qnet import NETWORK_INPUT, QAdd, QAvgPool, QConv, QMaxPool, QReshape
from .quantize.fixed_point import requantize_mode, rescale_mode

__all__ = ["run_golden", "run_layer", "accumulate", "layer_macs", "backend", "DEFAULT_CHUNK"]

#: Images per chunk: bounds the im2col buffer (LeNet conv1: 512 * 784 * 25 floats).
DEFAULT_CHUNK = 512
_FLOAT32_EXACT = 1 << 24


def _matmul_dtype(layer):
    bound = 128 * int(np.abs(layer.weight_matrix.astype(np.int64)).sum(axis=1).max(initial=0))
    return np.float32 if bound < _FLOAT32_EXACT else np.float64


def accumulate(layer, q):
    """Exact int32 accumulators of a conv/dense layer, bias included.

    Parameters
    ----------
    layer : fpganet.qnet.QConv
    q : numpy.ndarray
        int8 input [N, C, H, W].

    Returns
    -------
    numpy.ndarray
        int64 [N, M, Ho, Wo] (values fit int32).
    """
    dtype = _matmul_dtype(layer)
    n = q.shape[0]
    m = layer.out_shape[0]
    cols, (ho, wo) = im2col(q, layer.kernel, layer.stride, layer.pads, layer.zp_in)
    products = grouped_matmul(cols.astype(dtype), layer.weight_matrix.astype(dtype),
                              layer.groups)  # [N, Ho*Wo, M]
    acc = products.astype(np.int64) + layer.bias.astype(np.int64)
    return acc.transpose(0, 2, 1).reshape(n, m, ho, wo)


def run_layer(layer, q, *others, mode="fpganet"):
    """One integer layer on an int8 batch [N, C, H, W] (a QAdd: two); returns int8 [N, *out_shape].
    ``mode``: the requantization mode (the network's ``config.requant_mode``)."""
    if isinstance(layer, QConv):
        acc = accumulate(layer, q)
        n, m = acc.shape[:2]
        y = requantize_mode(acc.reshape(n, m, -1), layer.mult, layer.shift, layer.zp_out,
                            layer.lo, layer.hi, mode, layer.single_rounding)
        return y.reshape(n, *layer.out_shape)
    if isinstance(layer, QMaxPool):
        # int8 minimum as padding equals -inf: every window holds a real element (pads < kernel).
        return maxpool(q, layer.kernel, layer.stride, layer.pads, np.int8(-128))
    if isinstance(layer, QReshape):
        return q.reshape(q.shape[0], *layer.out_shape)
    if isinstance(layer, QAdd):
        acc = (layer.w_a * (q.astype(np.int64) - layer.zp_a)
               + layer.w_b * (others[0].astype(np.int64) - layer.zp_b))
        y = layer.zp_out + rescale_mode(acc, layer.mult, layer.shift, mode, layer.single_rounding)
        return np.clip(y, layer.lo, layer.hi).astype(np.int8)
    if isinstance(layer, QAvgPool):
        # Padding holds zp_in: it adds nothing to the sum of offset codes and counts in the divisor.
        acc = avgpool(q.astype(np.int64) - layer.zp_in, layer.kernel, layer.stride, layer.pads)
        acc = acc + (layer.zp_in * layer.count + layer.bias)      # the sum of q with sum_codes
        y = layer.requant_zp + rescale_mode(acc, layer.mult, layer.shift, mode, layer.sum_codes)
        return np.clip(y, layer.lo, layer.hi).astype(np.int8)
    raise TypeError(f"unknown layer {layer!r}")


def run_golden(net, q_in, layer_outputs=False, chunk=DEFAULT_CHUNK):
    """Run the integer network on int8 inputs.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    q_in : numpy.ndarray
        int8 [N, C, H, W] (``net.input_chw``), as :meth:`QNetwork.quantize_input` gives it
        from inputs in the model's own layout.
    layer_outputs : bool
        Also return each layer's int8 output [N, *layer.out_shape].
    chunk : int
        Images processed at a time.

    Returns
    -------
    numpy.ndarray
        int8 [N, *net.output_shape].
    list of numpy.ndarray
        Only with ``layer_outputs``.
    """
    q_in = np.asarray(q_in)
    if q_in.dtype != np.int8:
        raise TypeError(f"golden model inputs must be int8, not {q_in.dtype}")
    n = q_in.shape[0]
    q_in = q_in.reshape(n, *net.input_chw)
    outputs = [[] for _ in net.layers] if layer_outputs else None
    results = []
    sources = [net.layer_inputs(index) for index in range(len(net.layers))]
    last_use = {}
    for index, reads in enumerate(sources):
        for source in reads:
            last_use[source] = index
    for start in range(0, max(n, 1), chunk):
        y = q_in[start:start + chunk]
        values = {NETWORK_INPUT: y}
        for index, layer in enumerate(net.layers):
            y = run_layer(layer, *(values[source] for source in sources[index]),
                          mode=net.config.requant_mode)
            values[index] = y
            for source in set(sources[index]):   # free what no later layer reads
                if last_use.get(source) == index:
                    del values[source]
            if layer_outputs:
                outputs[index].append(y)
        results.append(y.reshape(y.shape[0], *net.output_shape))
    result = np.concatenate(results) if results else np.zeros((0, *net.output_shape), np.int8)
    if layer_outputs:
        return result, [np.concatenate(parts) for parts in outputs]
    return result


def layer_macs(net):
    """Multiply-accumulates per image of each layer (0 for pooling, adds and reshapes)."""
    return [layer.macs for layer in net.layers]


def backend(net, q_in, **options):
    """The ``golden`` entry of :data:`fpganet.backends.BACKENDS`: int8 in, int8 out."""
    return run_golden(net, q_in, chunk=options.get("chunk", DEFAULT_CHUNK))
