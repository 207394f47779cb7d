"""Low-bit layers: a dense layer of the integer network as small unsigned input digits times
small signed weights, then per-channel multi-thresholds, as FINN's MVAU and MultiThreshold
compute a W2A2 or W4A4 layer in logic cells.

A dense layer whose input codes lie in ``in_lo..in_lo + 2**input_bits - 1`` and whose weight
codes need at most ``weight_bits`` bits (signed) has, with the input as digits
``c = q - in_lo``::

    acc = sum_k w_k (q_k - zp_in) + bias            (the golden model's bias has -zp_in sum w)
        = sum_k w_k c_k + offset,       offset = in_lo * sum_k w_k + bias

so each output channel's code is a function of the dot product ``s = sum_k w_k c_k`` alone.
Where the layer's output is a few levels (``hi - lo < 2**output_bits``, as the next low-bit
layer's input) that function is a staircase: output ``lo + t`` where ``t`` is how many of
the channel's ``hi - lo`` thresholds ``s`` reaches. :func:`lower_lowbit` finds them by
running the layer's own requantization (the golden model's) on every ``s`` the layer can
produce, so the form is exact by construction, and refuses a channel whose output falls as
``s`` grows. A wider output (the last layer) keeps its requantization of ``s + offset``.

FINN's TFC_2W2A is of this form in every layer: ternary weights (-1, 0, +1), ternary
activations (two input bits), three output levels (two thresholds a channel). A binary
layer (:mod:`fpganet.codegen.binary`) is the one-bit case, which the XNOR-popcount unit
computes more cheaply.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import FpganetError
from ..quantize.fixed_point import requantize_mode
from .binary import LoweredDense, check_engine_layer, lower_chain, run_lowered

__all__ = ["LowBitLayer", "lower_lowbit", "lower_lowbit_network", "run_lowbit",
           "run_lowbit_network", "input_digits", "MAX_BITS"]

#: The widest weight and input code a low-bit layer takes: wider layers are the int8
#: array's.
MAX_BITS = 4


@dataclass(frozen=True)
class LowBitLayer(LoweredDense):
    """A dense layer as dot products of input digits and weights, then per-channel thresholds
    (a few output levels) or its own requantization of ``s + offset`` (a wider output).

    Attributes
    ----------
    source : fpganet.qnet.QConv
    weights : numpy.ndarray
        int8 [M, K], the weight codes.
    weight_bits : int
        Bits of a signed weight code (two's complement; a ternary weight takes 2).
    in_lo : int
        The input code of digit 0.
    input_bits : int
        Bits of an unsigned input digit.
    offset : numpy.ndarray
        int64 [M]: the layer's accumulator is ``s + offset``.
    thresholds : numpy.ndarray or None
        int64 [M, hi - lo], each row non-decreasing: the output is ``lo`` plus how many of its
        channel's thresholds ``s`` reaches (``s_max + 1``: never). None: the output is the
        source's requantization of ``s + offset``.
    """

    weights: np.ndarray
    weight_bits: int
    in_lo: int
    input_bits: int
    offset: np.ndarray
    thresholds: np.ndarray = None

    def bounds(self):
        """``(s_min, s_max)`` [M] each: the least and greatest dot product of a channel."""
        top = (1 << self.input_bits) - 1
        w = self.weights.astype(np.int64)
        return np.where(w < 0, w, 0).sum(axis=1) * top, np.where(w > 0, w, 0).sum(axis=1) * top

    @property
    def field_bits(self):
        return self.weight_bits

    def weight_fields(self):
        return self.weights.astype(np.int64)

    def threshold_rows(self):
        return self.thresholds

    def total_range(self):
        s_min, s_max = self.bounds()
        return int(s_min.min(initial=0)), int(s_max.max(initial=0))

    def totals(self, inputs):
        return inputs.astype(np.int64) @ self.weights.astype(np.int64).T


def _signed_bits(values):
    """Bits of the narrowest two's complement that holds every value."""
    low, high = int(np.min(values, initial=0)), int(np.max(values, initial=0))
    return max((-low - 1).bit_length(), high.bit_length()) + 1


def lower_lowbit(layer, in_lo, in_hi, mode="fpganet"):
    """The low-bit form of dense or convolution ``layer`` whose input codes lie in
    ``in_lo..in_hi``.

    Parameters
    ----------
    layer : fpganet.qnet.QConv
        A dense layer, or a convolution of stride 1 without padding.
    in_lo, in_hi : int
    mode : str
        The network's requantization mode.

    Returns
    -------
    LowBitLayer
        With thresholds where the output has at most ``2**MAX_BITS`` levels.

    Raises
    ------
    FpganetError
        Naming the layer and what is not low-bit.
    """
    check_engine_layer(layer, "low-bit")
    input_bits = max(1, (in_hi - in_lo).bit_length())
    if input_bits > MAX_BITS:
        raise FpganetError(f"layer '{layer.name}': its input codes {in_lo}..{in_hi} need "
                           f"{input_bits} bits, more than {MAX_BITS}")
    weights = layer.weight_matrix.astype(np.int64)
    weight_bits = _signed_bits(weights)
    if weight_bits > MAX_BITS:
        raise FpganetError(f"layer '{layer.name}': its weight codes need {weight_bits} bits, "
                           f"more than {MAX_BITS}")
    offset = in_lo * weights.sum(axis=1) + layer.bias.astype(np.int64).reshape(-1)
    form = LowBitLayer(layer, weights.astype(np.int8), weight_bits, int(in_lo), input_bits,
                       offset)
    levels = layer.hi - layer.lo
    if levels.bit_length() > MAX_BITS:
        return form
    s_min, s_max = form.bounds()
    thresholds = np.empty((len(weights), levels), np.int64)
    for channel in range(len(weights)):
        s = np.arange(s_min[channel], s_max[channel] + 1)
        codes = _requantized(layer, channel, s + offset[channel], mode)
        if np.any(np.diff(codes) < 0):
            raise FpganetError(f"layer '{layer.name}': channel {channel}'s output falls as its "
                               f"dot product grows: no thresholds give it")
        for t in range(levels):
            reached = np.nonzero(codes >= layer.lo + t + 1)[0]
            thresholds[channel, t] = s[reached[0]] if len(reached) else s_max[channel] + 1
    return LowBitLayer(layer, form.weights, weight_bits, int(in_lo), input_bits, offset,
                       thresholds)


def _requantized(layer, channel, acc, mode):
    """Channel ``channel``'s output codes for accumulators ``acc`` [P], through the golden
    model's own requantization."""
    pick = lambda values: np.asarray(values).reshape(-1)[channel:channel + 1]   # noqa: E731
    return requantize_mode(np.asarray(acc, np.int64)[None, None, :], pick(layer.mult),
                           pick(layer.shift), layer.zp_out, layer.lo, layer.hi, mode,
                           layer.single_rounding)[0, 0].astype(np.int64)


def lower_lowbit_network(net):
    """Every dense and convolution layer of a chain (reshapes, dense layers, convolutions and
    the max pools after them) in low-bit form, each reading the previous one's output digits;
    every layer but the last must have thresholds.

    Returns
    -------
    list of LowBitLayer

    Raises
    ------
    FpganetError
        Naming the first layer that is not low-bit, and why.
    """
    return lower_chain(net, lower_lowbit, f"has more than {MAX_BITS} bits")


def input_digits(layers, q_in):
    """The first layer's input digits [N, K] (uint8) of int8 inputs ``q_in`` [N, ...]."""
    return (q_in.reshape(len(q_in), -1).astype(np.int64) - layers[0].in_lo).astype(np.uint8)


def run_lowbit(layer, digits, mode="fpganet"):
    """``layer``'s output for input digits [N, K]: output digits [N, M] (uint8, ``code -
    lo``), or with no thresholds the int8 codes [N, M] of its source's requantization."""
    return layer.run(digits, mode)


def run_lowbit_network(layers, q_in, mode="fpganet"):
    """The low-bit layers' int8 output codes [N, M] for int8 inputs ``q_in`` [N, ...], as the
    golden model gives them."""
    digits = run_lowered(layers, input_digits(layers, q_in), mode)
    last = layers[-1]
    return digits if last.thresholds is None else (digits.astype(np.int64)
                                                   + last.source.lo).astype(np.int8)
