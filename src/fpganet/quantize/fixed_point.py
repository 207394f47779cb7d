"""Scales, zero points and the fixed-point requantization multiplier."""

import math

import numpy as np

from ..errors import FpganetError
from ..qnet import MULT_BITS, MULT_MAX, MULT_MIN, SHIFT_MAX, SHIFT_MIN, rescale

__all__ = ["activation_qparams", "weight_qparams", "quantize_multiplier", "requantize",
           "quantize_multiplier_tflite", "multiply_tflite", "requantize_tflite", "rescale_mode",
           "requantize_mode", "multiplier_for", "average_multiplier", "exact_weight_scales",
           "significant_bits",
           "NEGLIGIBLE_WEIGHT"]

#: A weight channel whose largest magnitude is below this fraction of the layer's largest is
#: quantized as zero (float32 keeps 24 bits: such a channel adds nothing a float32 sum keeps).
NEGLIGIBLE_WEIGHT = 2.0 ** -24


def activation_qparams(rmin, rmax):
    """Asymmetric int8 scale and zero point for the real range ``[rmin, rmax]`` (TFLite convention).

    The range is widened to contain 0 so that real zero (ReLU's floor and the
    padding value) is exactly representable by the zero point.

    Parameters
    ----------
    rmin, rmax : float

    Returns
    -------
    scale : float
        A float32 value (so that the host, onnxruntime and the manifest agree exactly).
    zero_point : int
        In -128..127.
    """
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if rmax - rmin <= 0 or not math.isfinite(rmax - rmin):
        return 1.0, 0
    scale = float(np.float32((rmax - rmin) / 255.0))
    zero_point = int(np.clip(round(-128 - rmin / scale), -128, 127))
    return scale, zero_point


def weight_qparams(weight, widen=None, bits=8, rounding=None):
    """Symmetric per-output-channel quantization of a float weight [M, ...] to ``bits``-bit
    codes held in int8.

    Parameters
    ----------
    weight : numpy.ndarray
    widen : callable, optional
        float32 scales [M] -> float32 scales [M], each at least as large (for example
        :func:`exact_weight_scales`), applied before the weights are rounded to them.
    bits : int
        2..8: the codes lie in ``-(2**(bits-1) - 1)..2**(bits-1) - 1``.
    rounding : callable, optional
        ``(weight float64 [M, ...], scale float64 [M], limit) -> integer codes`` (float64,
        same shape, in ``-limit..limit``), for example
        :func:`~fpganet.quantize.rounding.gptq_rounding`'s; None: each to its nearest.

    Returns
    -------
    q : numpy.ndarray
        int8, same shape, in -127..127 at 8 bits (-128 unused, so the range is symmetric).
    scale : numpy.ndarray
        float32 [M], ``max|w[m]| / (2**(bits-1) - 1)``. An all-zero channel gets the median
        scale of the others, so that its bias keeps a useful resolution; so does a
        channel whose weights are all below 2**-24 of the layer's largest (a
        BatchNorm with gamma ~ 0 folded in leaves weights of 1e-30: at their own
        scale the bias would overflow int32), whose codes are then all 0.
    """
    weight = np.asarray(weight, dtype=np.float64)
    m = weight.shape[0]
    peak = np.abs(weight.reshape(m, -1)).max(axis=1)
    negligible = peak < peak.max(initial=0) * NEGLIGIBLE_WEIGHT
    if np.any(negligible):
        weight = np.where(negligible.reshape((m,) + (1,) * (weight.ndim - 1)), 0.0, weight)
        peak = np.where(negligible, 0.0, peak)
    limit = (1 << (bits - 1)) - 1
    scale = peak / float(limit)
    if np.any(scale == 0):
        fallback = np.median(scale[scale > 0]) if np.any(scale > 0) else 1.0 / limit
        scale = np.where(scale > 0, scale, fallback)
    scale = scale.astype(np.float32)
    if widen is not None:
        scale = widen(scale)
    if rounding is None:
        shaped = scale.astype(np.float64).reshape((m,) + (1,) * (weight.ndim - 1))
        q = np.clip(np.rint(weight / shaped), -limit, limit)
    else:
        q = rounding(weight, scale.astype(np.float64), limit)
    return q.astype(np.int8), scale


def quantize_multiplier(real, layer_name, bits=MULT_BITS):
    """Integer ``(mult, shift)`` with ``mult * 2**-shift`` closest to ``real``, ``mult`` with
    ``bits`` significant bits.

    ``mult`` is in [2**14, 2**15) (15-bit unsigned, top bit set), a multiple of
    ``2**(15 - bits)`` (``AcceleratorConfig.requant_mult_bits``), and ``shift`` in [1, 62];
    the relative error is at most ``2**-bits``.

    Parameters
    ----------
    real : float
        The real multiplier ``s_in * s_w[m] / s_out`` (positive).
    layer_name : str
        For the error message.
    bits : int
        Significant bits, 1..15.

    Raises
    ------
    fpganet.errors.FpganetError
        ``real`` is outside what the range can represent.
    """
    if not real > 0 or not math.isfinite(real):
        raise FpganetError(f"layer '{layer_name}': requantization multiplier {real!r} is not "
                           f"a positive number")
    mantissa, exponent = significant_bits(real, bits)
    mult = mantissa << (MULT_BITS - bits)
    shift = MULT_BITS - exponent
    if not (SHIFT_MIN <= shift <= SHIFT_MAX and MULT_MIN <= mult <= MULT_MAX):
        raise FpganetError(f"layer '{layer_name}': requantization multiplier {real:.3g} cannot be "
                           f"represented as mult * 2**-shift with a 15-bit mult and shift in "
                           f"[{SHIFT_MIN}, {SHIFT_MAX}]")
    return mult, shift


def significant_bits(real, bits, rounding=round):
    """``(mantissa, exponent)`` with ``mantissa * 2**(exponent - bits)`` the ``bits``-bit
    value next to the positive ``real`` in the direction ``rounding`` takes (``round``,
    ``math.ceil``, ``math.floor``), ``mantissa`` in [2**(bits-1), 2**bits)."""
    fraction, exponent = math.frexp(real)  # real = fraction * 2**exponent, fraction in [0.5, 1)
    mantissa = rounding(fraction * (1 << bits))
    if mantissa == 1 << bits:
        mantissa, exponent = 1 << (bits - 1), exponent + 1
    return mantissa, exponent


def exact_weight_scales(s_in, s_w, s_out, bits):
    """Per-channel weight scales, each the smallest at least ``s_w[m]`` that makes
    ``s_in * s_w[m] / s_out`` exact with a ``bits``-bit multiplier (float32 [M]).

    Each grows by less than ``2**(1 - bits)`` of itself, so the weights keep their int8
    range but that much of it; the multipliers :func:`quantize_multiplier` then gives are
    the real ones, not roundings of them.
    """
    scales = []
    for scale in np.asarray(s_w, dtype=np.float64):
        mantissa, exponent = significant_bits(float(np.float64(s_in) * scale / np.float64(s_out)),
                                              bits, math.ceil)
        scales.append(math.ldexp(mantissa, exponent - bits) * np.float64(s_out) / np.float64(s_in))
    return np.asarray(scales, dtype=np.float32)


def requantize(acc, mult, shift, zp_out, lo, hi):
    """The integer requantization of the numerics contract.

    ``clamp(zp_out + ((acc * mult + (1 << (shift - 1))) >> shift), lo, hi)``,
    computed exactly in int64 (``|acc| < 2**31`` and ``mult < 2**15`` keep the
    product below 2**46) with an arithmetic shift, so ties round toward +inf.

    Parameters
    ----------
    acc : numpy.ndarray
        int64 accumulators [N, M, P] (channel axis 1).
    mult, shift : numpy.ndarray
        int [M].
    zp_out, lo, hi : int

    Returns
    -------
    numpy.ndarray
        int8, shape of ``acc``.
    """
    mult = np.asarray(mult, dtype=np.int64).reshape(1, -1, 1)
    shift = np.asarray(shift, dtype=np.int64).reshape(1, -1, 1)
    rounding = np.left_shift(np.int64(1), shift - 1)
    scaled = np.right_shift(acc.astype(np.int64) * mult + rounding, shift)
    return np.clip(scaled + zp_out, lo, hi).astype(np.int8)


def quantize_multiplier_tflite(real, layer_name):
    """TFLite's ``QuantizeMultiplier``: ``(M, shift)`` with ``M * 2**(shift - 31)`` closest to
    ``real``, ``M`` in [2**30, 2**31) and ``shift`` in -31..30 (left when positive).

    The same steps as TFLite (``frexp``, the fraction times 2**31 rounded half away from zero,
    renormalized at 2**31), so that a multiplier LiteRT derives from a model's scales comes out
    equal; like TFLite, a multiplier below 2**-32 becomes ``(0, 0)``, whose products are all 0.

    Raises
    ------
    fpganet.errors.FpganetError
        ``real`` is not positive, or is 2**30 or more.
    """
    if not real > 0 or not math.isfinite(real):
        raise FpganetError(f"layer '{layer_name}': requantization multiplier {real!r} is not "
                           f"a positive number")
    fraction, shift = math.frexp(real)
    mult = math.floor(fraction * (1 << 31) + 0.5)      # exact: fraction * 2**31 < 2**31
    if mult == 1 << 31:
        mult, shift = mult // 2, shift + 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise FpganetError(f"layer '{layer_name}': requantization multiplier {real:.3g} is "
                           f"2**30 or more, beyond TFLite's range")
    return mult, shift


def multiply_tflite(x, mult, shift, single=False):
    """TFLite's ``MultiplyByQuantizedMultiplier`` on int64 arrays of int32 values.

    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, M), right)`` with
    ``left = max(shift, 0)``, ``right = max(-shift, 0)``. The high multiply's nudge rounds
    ``x * M / 2**31`` half toward +inf, which ``(x * M + 2**30) >> 31`` computes exactly (its
    one saturating case, both operands -2**31, cannot occur: ``M < 2**31``); the divide by
    ``2**right`` rounds half away from zero: ``(v + 2**(right-1) - (v < 0)) >> right``.
    ``x << left`` must fit int32, as in TFLite.

    ``single``: TFLite's single-rounding form instead, ``(x * M + 2**(30 - shift)) >> (31 -
    shift)``, one rounding half toward +inf (what LiteRT's reference FULLY_CONNECTED computes).
    """
    x = np.asarray(x, dtype=np.int64)
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if single:
        total = 31 - shift
        return np.right_shift(x * mult + np.left_shift(np.int64(1), total - 1), total)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    high = np.right_shift(np.left_shift(x, left) * mult + (1 << 30), 31)
    nudge = np.where(right > 0, np.left_shift(np.int64(1), np.maximum(right - 1, 0)) - (high < 0), 0)
    return np.right_shift(high + nudge, right)


def requantize_tflite(acc, mult, shift, zp_out, lo, hi, single=False):
    """The ``tflite`` requantization: ``clamp(zp_out + multiply_tflite(acc, M, shift, single),
    lo, hi)`` per channel (axis 1 of ``acc`` [N, M, P]), as LiteRT's reference kernels
    requantize a convolution's (``single`` a fully connected layer's) accumulator.
    """
    mult = np.asarray(mult, dtype=np.int64).reshape(1, -1, 1)
    shift = np.asarray(shift, dtype=np.int64).reshape(1, -1, 1)
    return np.clip(multiply_tflite(acc, mult, shift, single) + zp_out, lo, hi).astype(np.int8)


def average_multiplier(count):
    """``(M, shift)`` of the ``tflite`` single-rounding multiply (``multiply_tflite(...,
    single=True)``) that divides a sum of ``count`` int8 codes by ``count`` rounding half away
    from zero, as TFLite's AVERAGE_POOL_2D does.

    With ``T = 30 + ceil(log2(count))``, ``M = floor(2**T / count) + 1`` lies in [2**30, 2**31)
    and ``shift = 31 - T``. ``M / 2**T`` exceeds ``1 / count`` by at most ``2**-T``, which for
    ``|sum| <= 128 count`` is below ``2**-23``: it moves no quotient across a rounding boundary
    (those lie at least ``1 / (2 count)`` away) and pushes each exact tie ``k + 1/2`` away from
    zero, a negative one just below, a positive one just above, before the single rounding
    (half toward +inf) rounds it.
    """
    if not 1 <= count < 1 << 22:
        raise ValueError(f"average_multiplier takes 1 to 2**22 - 1 elements, not {count}")
    total = 30 + (count - 1).bit_length()
    return (1 << total) // count + 1, 31 - total


def multiplier_for(real, layer_name, mode, bits=MULT_BITS):
    """``(mult, shift)`` for the real multiplier ``real`` in requantization mode ``mode``:
    :func:`quantize_multiplier` (``bits`` significant bits) or
    :func:`quantize_multiplier_tflite`."""
    if mode == "tflite":
        return quantize_multiplier_tflite(real, layer_name)
    return quantize_multiplier(real, layer_name, bits)


def rescale_mode(x, mult, shift, mode, single=False):
    """``x`` times ``mult``, rounded, in requantization mode ``mode`` (no offset or clamp):
    :func:`fpganet.qnet.rescale` for ``fpganet``, :func:`multiply_tflite` for ``tflite``."""
    if mode == "tflite":
        return multiply_tflite(x, mult, shift, single)
    return rescale(x, mult, shift)


def requantize_mode(acc, mult, shift, zp_out, lo, hi, mode, single=False):
    """:func:`requantize` or :func:`requantize_tflite` (with ``single``), as requantization
    mode ``mode`` says."""
    if mode == "tflite":
        return requantize_tflite(acc, mult, shift, zp_out, lo, hi, single)
    return requantize(acc, mult, shift, zp_out, lo, hi)
