"""Array primitives shared by the float reference and the integer golden model.

Both executors lower convolution to a matrix product over an im2col view built
with stride tricks, so the float and the integer paths share their indexing and
cannot disagree about padding or window order.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["conv_output_size", "pad_nchw", "im2col", "maxpool", "avgpool", "grouped_matmul",
           "xnor_popcount"]


def conv_output_size(size, kernel, stride, pad_begin, pad_end):
    """Output length of a sliding window along one axis (floor mode).

    Parameters
    ----------
    size, kernel, stride, pad_begin, pad_end : int

    Returns
    -------
    int
    """
    return (size + pad_begin + pad_end - kernel) // stride + 1


def pad_nchw(x, pads, value):
    """Pad the two spatial axes of ``x`` [N, C, H, W].

    Parameters
    ----------
    x : numpy.ndarray
    pads : tuple of int
        ``(top, left, bottom, right)``.
    value : scalar
        Fill value (the input zero point for a quantized convolution, minus
        infinity or the dtype minimum for max pooling).
    """
    top, left, bottom, right = pads
    if not any(pads):
        return x
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def im2col(x, kernel, stride, pads, pad_value):
    """Patches of ``x`` as the columns of the convolution's matrix product.

    Parameters
    ----------
    x : numpy.ndarray
        Feature map [N, C, H, W].
    kernel, stride : tuple of int
        ``(kh, kw)`` and ``(sh, sw)``.
    pads : tuple of int
        ``(top, left, bottom, right)``.
    pad_value : scalar
        Value read at padding positions.

    Returns
    -------
    numpy.ndarray
        [N, Ho*Wo, C*kh*kw], the K axis ordered (c, i, j) like the flattened
        ONNX weight [M, C, kh, kw], so ``cols @ weight.reshape(M, -1).T`` is
        the convolution.
    tuple of int
        ``(Ho, Wo)``.
    """
    kh, kw = kernel
    sh, sw = stride
    xp = pad_nchw(x, pads, pad_value)
    n, c = x.shape[:2]
    # windows: [N, C, Hp-kh+1, Wp-kw+1, kh, kw]; striding picks every sh-th / sw-th start.
    windows = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    ho, wo = windows.shape[2:4]
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n, ho * wo, c * kh * kw)
    return cols, (ho, wo)


def maxpool(x, kernel, stride, pads, pad_value):
    """Max pooling of ``x`` [N, C, H, W]; padding holds ``pad_value`` (never wins if minimal).

    Returns
    -------
    numpy.ndarray
        [N, C, Ho, Wo], same dtype as ``x``.
    """
    xp = pad_nchw(x, pads, pad_value)
    windows = sliding_window_view(xp, tuple(kernel), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    return windows.max(axis=(4, 5))


def grouped_matmul(cols, weight, groups=1):
    """The convolution's matrix product, group by group.

    Parameters
    ----------
    cols : numpy.ndarray
        [N, P, C*kh*kw] from :func:`im2col` (K ordered (c, i, j), so group g's
        columns are the contiguous block g).
    weight : numpy.ndarray
        [M, C/groups*kh*kw]; output channels of group g are the contiguous block g.
    groups : int

    Returns
    -------
    numpy.ndarray
        [N, P, M], in the dtype of the operands. For group 1 the float32 results are bit
        for bit those of the stacked product ``cols @ weight.T`` the float reference used
        before (checked on every conv of LeNet-5, ResNet-8 and VWW: the BLAS sums each
        output over K in the same order), so calibrated scales did not move.
    """
    n, p, k = cols.shape
    if groups == 1:
        # One [N*P, K] x [K, M] product: several times faster than the stacked one.
        return (cols.reshape(n * p, k) @ weight.T).reshape(n, p, -1)
    m = weight.shape[0]
    kg, mg = k // groups, m // groups
    # [G, N*P, Kg] @ [G, Kg, Mg] -> [G, N*P, Mg] -> [N, P, M] (m = g*Mg + j).
    a = cols.reshape(n * p, groups, kg).transpose(1, 0, 2)
    b = weight.reshape(groups, mg, kg).transpose(0, 2, 1)
    return (a @ b).transpose(1, 0, 2).reshape(n, p, m)


def avgpool(x, kernel, stride, pads):
    """Sum (not mean) of each pooling window of ``x`` [N, C, H, W]; padding holds zeros.

    Returns
    -------
    numpy.ndarray
        [N, C, Ho, Wo], same dtype as ``x`` (callers widen integers first).
    """
    xp = pad_nchw(x, pads, 0)
    windows = sliding_window_view(xp, tuple(kernel), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    return windows.sum(axis=(4, 5))


def xnor_popcount(x, w):
    """How many bits of each row of ``x`` agree with each row of ``w``: the count of a binary
    dot product, whose bipolar value (bit 0 for -1, 1 for +1) is ``2 * count - K``.

    Parameters
    ----------
    x : numpy.ndarray
        {0, 1} [N, K].
    w : numpy.ndarray
        {0, 1} [M, K].

    Returns
    -------
    numpy.ndarray
        int64 [N, M].
    """
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    # Agreeing bits: both set, or both clear.
    return x @ w.T + (1 - x) @ (1 - w).T
