"""Weights below int8: their bit widths per layer, and GPTQ rounding from calibration inputs.

A ``W``-bit weight is an int8 code in ``-(2**(W-1) - 1)..2**(W-1) - 1`` (symmetric, narrow,
one scale per output channel ``max |w[m]| / (2**(W-1) - 1)``, zero point 0): the
accelerator's arithmetic is unchanged, only the codes are fewer. Rounding each weight to
its nearest code leaves a layer error that grows fast below 6 bits; GPTQ rounds the
weights of one output channel one input column after the other and spreads each rounding
error over the columns not yet rounded, weighted by the inverse Hessian of the layer's
squared output error on the calibration inputs:

    E. Frantar, S. Ashkboos, T. Hoefler, D. Alistarh, "GPTQ: Accurate Post-Training
    Quantization for Generative Pre-trained Transformers", ICLR 2023, arXiv:2210.17323
    (Algorithm 1: the Cholesky form of the inverse Hessian, lazy batch updates of
    :data:`GPTQ_BLOCK` columns, the columns in descending Hessian diagonal ("act-order"),
    dampening :data:`GPTQ_DAMP` of the mean diagonal), which builds on Optimal Brain
    Quantization (Frantar and Alistarh, NeurIPS 2022, arXiv:2208.11580).

Here the Hessian ``H = X X^T`` comes from the layer's float inputs ``X`` (its im2col
columns) on the calibration set, so each layer is rounded on its own, independent of the
rounding of the layers before it; the scales stay those of round-to-nearest, so that the
two differ only in the rounding. A grouped convolution (a depthwise one) gets one Hessian
per group.
"""

import re

import numpy as np

from ..errors import FpganetError
from ..model.ir import Conv, Dense
from ..ops import im2col

__all__ = ["WEIGHT_BITS", "ROUNDINGS", "DEFAULT_WEIGHT_BITS", "default_rounding",
           "parse_layer_weight_bits", "layer_weight_bits", "check_float_only", "weight_limit",
           "gptq_codes", "layer_hessians", "gptq_rounding"]

#: Weight widths the quantizer takes (1 bit has no symmetric narrow code besides 0).
WEIGHT_BITS = range(2, 9)
DEFAULT_WEIGHT_BITS = 8
#: Rounding name -> one-line description.
ROUNDINGS = {
    "nearest": "each weight to its nearest code",
    "gptq": "GPTQ (Frantar et al. 2023): column by column, each rounding error spread over the "
            "columns left, by the inverse Hessian of the layer's calibration inputs",
}
#: Dampening of the Hessian's diagonal, a fraction of its mean (GPTQ's default).
GPTQ_DAMP = 0.01
#: Columns per lazy batch update (GPTQ's default).
GPTQ_BLOCK = 128
#: At most this many input columns (output positions of the calibration images) estimate a
#: layer's Hessian: a fixed-seed random subset beyond it, to bound the time.
HESSIAN_COLUMNS = 1 << 16


def weight_limit(bits):
    """The largest code of a ``bits``-bit symmetric narrow weight: ``2**(bits-1) - 1``."""
    return (1 << (bits - 1)) - 1


def default_rounding(bits_by_layer):
    """The rounding when none is named: ``nearest`` when every layer keeps 8 bits (the int8
    compile as it always was), ``gptq`` when one has fewer (docs/reference/numerics.md,
    "Weights below 8 bits": it is the better at every width measured)."""
    return "gptq" if any(bits != DEFAULT_WEIGHT_BITS for bits in bits_by_layer.values()) \
        else "nearest"


def _check_bits(bits, what):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) \
            or int(bits) not in WEIGHT_BITS:
        raise FpganetError(f"{what} must be an integer from {WEIGHT_BITS.start} to "
                           f"{WEIGHT_BITS.stop - 1}, not {bits!r}")
    return int(bits)


def parse_layer_weight_bits(text):
    """``"conv1=4,fc=6"`` -> ``{"conv1": 4, "fc": 6}`` (``--layer-weight-bits``); the names
    are checked against the model later (:func:`layer_weight_bits`)."""
    result = {}
    for item in str(text).split(","):
        name, equals, value = item.strip().rpartition("=")
        if not equals or not name or not re.fullmatch(r"[0-9]+", value.strip()):
            raise FpganetError(f"expected LAYER=BITS[,LAYER=BITS...], "
                               f"not '{text}'")
        if name in result:
            raise FpganetError(f"--layer-weight-bits names layer '{name}' twice")
        result[name] = _check_bits(int(value), f"the weight bits of layer '{name}'")
    return result


def layer_weight_bits(graph, bits=DEFAULT_WEIGHT_BITS, overrides=None):
    """``{layer name: weight bits}`` of every Conv and Dense of ``graph``: ``bits``, or the
    layer's entry in ``overrides`` (a mapping, or the ``--layer-weight-bits`` text). An entry
    names a layer, or gives its index in the model's layers as ``fpganet compile`` numbers
    them (``"0=8"``; digits that also name another layer are refused).

    Raises
    ------
    fpganet.errors.FpganetError
        A width outside 2..8, or an override naming no Conv or Dense of the model.
    """
    bits = _check_bits(bits, "the weight bits")
    if isinstance(overrides, str):
        overrides = parse_layer_weight_bits(overrides)
    layers = {layer.name: layer for layer in graph.layers}
    linear = [layer.name for layer in graph.layers if isinstance(layer, (Conv, Dense))]
    resolved = {}
    for key, value in dict(overrides or {}).items():
        name, what = _named_layer(graph, layers, key)
        if name not in linear:
            kind = (f"is a {type(layers[name]).__name__}, which has no weights" if name in layers
                    else "is no layer of the model")
            raise FpganetError(f"--layer-weight-bits: {what} {kind}; the layers with weights "
                               f"are {', '.join(linear)}")
        if name in resolved:
            raise FpganetError(f"--layer-weight-bits names layer '{name}' twice")
        resolved[name] = _check_bits(value, f"the weight bits of layer '{key}'")
    return {name: int(resolved.get(name, bits)) for name in linear}


def _named_layer(graph, layers, key):
    """``(name, how the message names it)`` of an override's ``key``: a layer's name, or digits
    numbering a layer as ``fpganet compile`` prints them (refused where they do both, for two
    layers, or number none)."""
    if not re.fullmatch(r"[0-9]+", str(key)):
        return key, f"'{key}'"
    index = int(key)
    numbered = graph.layers[index].name if index < len(graph.layers) else None
    if key in layers:
        if numbered not in (None, key):
            raise FpganetError(f"--layer-weight-bits: '{key}' names layer {key} ('{numbered}') "
                               f"and a layer of that name; give the name of the one meant")
        return key, f"'{key}'"
    if numbered is None:
        raise FpganetError(f"--layer-weight-bits: layer {key} is past the model's "
                           f"{len(graph.layers)} layers (0..{len(graph.layers) - 1})")
    return numbered, f"layer {key} ('{numbered}')"


def check_float_only(kind, bits=DEFAULT_WEIGHT_BITS, overrides=None, rounding=None):
    """Refuse weight widths or a rounding for a pre-quantized model (``kind``: QDQ, QONNX,
    int8 TFLite), whose integer weights are its own."""
    if bits != DEFAULT_WEIGHT_BITS or overrides or rounding not in (None, "nearest"):
        raise FpganetError(f"--weight-bits, --layer-weight-bits and --weight-rounding quantize a "
                           f"float model's weights; this model is pre-quantized ({kind}) and "
                           f"keeps its own")


def gptq_codes(weight, scale, limit, hessian, damp=GPTQ_DAMP, block=GPTQ_BLOCK):
    """GPTQ's codes of one weight matrix (Frantar et al. 2023, Algorithm 1, with act-order).

    Parameters
    ----------
    weight : numpy.ndarray
        float [M, K].
    scale : numpy.ndarray
        float [M], each row's step.
    limit : int
        Codes lie in ``-limit..limit``.
    hessian : numpy.ndarray
        float [K, K], ``X X^T`` of the layer's inputs (any positive factor).

    Returns
    -------
    numpy.ndarray
        float64 [M, K] integer codes.
    """
    weight = np.array(weight, dtype=np.float64)
    hessian = np.array(hessian, dtype=np.float64)
    step = np.asarray(scale, np.float64)
    columns = weight.shape[1]
    dead = np.diag(hessian) == 0          # an input that is always 0: its weights do nothing
    hessian[dead, dead] = 1.0
    weight[:, dead] = 0.0
    order = np.argsort(-np.diag(hessian), kind="stable")
    weight, hessian = weight[:, order], hessian[np.ix_(order, order)]
    hessian[np.diag_indices(columns)] += damp * np.mean(np.diag(hessian))
    # The upper Cholesky factor of H^-1: row i holds the updates that column i's error makes.
    inverse = np.linalg.inv(np.linalg.cholesky(hessian))
    upper = np.linalg.cholesky(inverse.T @ inverse).T
    codes = np.zeros_like(weight)
    for start in range(0, columns, block):
        stop = min(start + block, columns)
        part = weight[:, start:stop].copy()
        errors = np.zeros_like(part)
        tail = upper[start:stop, start:stop]
        for i in range(stop - start):
            code = np.clip(np.rint(part[:, i] / step), -limit, limit)
            codes[:, start + i] = code
            error = (part[:, i] - code * step) / tail[i, i]
            part[:, i:] -= np.outer(error, tail[i, i:])
            errors[:, i] = error
        weight[:, stop:] -= errors @ upper[start:stop, stop:]
    restored = np.empty_like(codes)
    restored[:, order] = codes
    return restored


def layer_hessians(layer, x, columns=HESSIAN_COLUMNS, seed=0):
    """``X X^T / n`` of a Conv's or Dense's float input columns on the calibration set, one
    per channel group.

    Parameters
    ----------
    layer : fpganet.model.Conv or fpganet.model.Dense
    x : numpy.ndarray
        float [N, C, H, W], the layer's input over the calibration set.
    columns : int
        At most this many columns (a fixed-seed random subset of the output positions).

    Returns
    -------
    numpy.ndarray
        float64 [groups, K, K], K the length of one dot product.
    """
    if isinstance(layer, Dense):
        cols = np.asarray(x, np.float64).reshape(len(x), -1)
        groups = 1
    else:
        cols = None
        groups = int(layer.groups)
    rng = np.random.default_rng(seed)
    if cols is None:
        # Patches a few images at a time: all of them at once would not fit in memory.
        per_image = None
        chunks = []
        for begin in range(0, len(x), 16):
            patches, _ = im2col(x[begin:begin + 16], layer.kernel, layer.stride, layer.pads, 0.0)
            per_image = per_image or patches.shape[1]
            patches = patches.reshape(-1, patches.shape[-1])
            keep = min(len(patches), -(-columns * len(patches) // (len(x) * per_image)))
            if keep < len(patches):
                patches = patches[np.sort(rng.choice(len(patches), keep, replace=False))]
            chunks.append(patches.astype(np.float64))
        cols = np.concatenate(chunks)
    elif len(cols) > columns:
        cols = cols[np.sort(rng.choice(len(cols), columns, replace=False))]
    width = cols.shape[1] // groups
    grouped = cols.reshape(len(cols), groups, width).transpose(1, 2, 0)   # [G, K, n]
    return grouped @ grouped.transpose(0, 2, 1) / len(cols)


def gptq_rounding(layer, x):
    """The ``rounding`` callable of :func:`~fpganet.quantize.fixed_point.weight_qparams` that
    rounds ``layer``'s weights by GPTQ on its calibration inputs ``x`` [N, C, H, W]."""
    hessians = layer_hessians(layer, x)

    def rounding(weight, scale, limit):
        m = weight.shape[0]
        matrix = weight.reshape(m, -1)
        groups = len(hessians)
        per_group = m // groups
        codes = np.empty_like(matrix, dtype=np.float64)
        for group, hessian in enumerate(hessians):
            rows = slice(group * per_group, (group + 1) * per_group)
            codes[rows] = gptq_codes(matrix[rows], scale[rows], limit, hessian)
        return codes.reshape(weight.shape)
    return rounding
