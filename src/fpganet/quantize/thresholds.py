"""A step function of the accumulator as one requantization: thresholds and their fit.

A low-bit layer's output code is a monotone step function of its integer accumulator
``a``: its epilogue (a folded BatchNorm, a scale, a ReLU) and its quantizer map ``a`` to
a few levels. FINN computes such a function with thresholds (``MultiThreshold``); the
accelerator has one requantization per channel,
``r(a) = clamp(zp + ((a + bias) * mult + 2**(shift - 1)) >> shift, lo, hi)``, whose steps
are evenly spaced ``2**shift / mult`` apart. :func:`step_thresholds` finds where the
function steps; :func:`fit_requantization` finds the ``mult``, ``shift`` and ``bias`` whose
``r`` steps at exactly those values of ``a``, checked in integers at both ends of the
range and on both sides of every step (which, both being monotone, proves them equal on
the whole range). One or two steps always fit; more fit when they are evenly spaced to
within the rounding of ``a``. Where none fits, the closest is used and the steps it misses
are counted.
"""

import numpy as np

from ..config import MULT_BITS

__all__ = ["step_thresholds", "fit_requantization", "checked_points", "Fit", "MAX_CANDIDATES"]

#: Multiplier/shift pairs tried per channel (the ones nearest the steps' mean spacing).
MAX_CANDIDATES = 2048
#: Largest shift tried: keeps ``(a + bias) * mult + 2**(shift - 1)`` exact in int64.
MAX_SHIFT = 46


def step_thresholds(function, low, high, levels):
    """Where a monotone nondecreasing step function of the accumulator steps, per channel.

    Parameters
    ----------
    function : callable
        int64 ``a`` [R, M] -> int64 codes [R, M] (column ``m`` is channel ``m``).
    low, high : numpy.ndarray
        int64 [M]: the accumulator's reachable range.
    levels : int
        Number of code steps to look for (``code_high - code_low``).

    Returns
    -------
    numpy.ndarray
        int64 [M, levels]: column ``j`` the smallest ``a`` in ``[low, high + 1]`` whose code
        is at least ``code(low) + j + 1`` (``high + 1``: never).
    """
    m = len(low)
    base = function(low.reshape(1, m))[0]
    lo = np.repeat(low.reshape(m, 1), levels, axis=1)
    hi = np.repeat((high + 1).reshape(m, 1), levels, axis=1)
    target = base.reshape(m, 1) + np.arange(1, levels + 1).reshape(1, levels)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        codes = function(np.minimum(mid, high.reshape(m, 1)).T).T
        reached = (codes >= target) & (mid <= high.reshape(m, 1))
        hi = np.where(reached, mid, hi)
        lo = np.where(reached, lo, np.minimum(mid + 1, hi))
    return lo


class Fit:
    """One channel's requantization: ``mult``, ``shift``, ``bias``; ``misses``, the number of
    checked points where ``r`` differs from the function (0: exact), and ``error``, the
    largest difference in codes there, which is the largest anywhere on the range."""

    __slots__ = ("mult", "shift", "bias", "misses", "error")

    def __init__(self, mult, shift, bias, misses, error=0):
        self.mult, self.shift, self.bias = int(mult), int(shift), int(bias)
        self.misses, self.error = int(misses), int(error)


def _requantize(a, bias, mult, shift, zp, lo, hi):
    """The fpganet requantization of ``a`` [P] for candidates ``bias, mult, shift`` [C]: [C, P]."""
    x = (a.reshape(1, -1) + bias.reshape(-1, 1)) * mult.reshape(-1, 1)
    x = (x + (np.int64(1) << (shift.reshape(-1, 1) - 1))) >> shift.reshape(-1, 1)
    return np.clip(zp + x, lo, hi)


def _candidates(spacing_low, spacing_high, bits):
    """``(mult, shift)`` pairs whose step ``2**shift / mult`` lies in the given range, nearest
    its middle first; ``mult`` a multiple of ``2**(15 - bits)`` in ``[2**14, 2**15)``."""
    unit = 1 << (MULT_BITS - bits)
    mults, shifts = [], []
    for shift in range(1, MAX_SHIFT + 1):
        first = max(1 << 14, int(np.ceil((1 << shift) / spacing_high / unit)) * unit)
        last = min((1 << 15) - 1, int(np.floor((1 << shift) / spacing_low)))
        if first > last:
            continue
        values = np.arange(first, last + 1, unit, dtype=np.int64)
        mults.append(values)
        shifts.append(np.full(len(values), shift, np.int64))
    if not mults:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    mults, shifts = np.concatenate(mults), np.concatenate(shifts)
    middle = 0.5 * (spacing_low + spacing_high)
    order = np.argsort(np.abs(np.ldexp(1.0, shifts) / mults - middle), kind="stable")
    return mults[order][:MAX_CANDIDATES], shifts[order][:MAX_CANDIDATES]


def checked_points(steps, code_at_low, low, high, stride=1):
    """``(points, codes)``: where two monotone functions of the accumulator must agree for
    them to agree on the whole range ``[low, high]`` (both ends, and both sides of every
    step inside it, ``stride`` apart), and the step function's codes there."""
    steps = np.asarray(steps, dtype=np.int64)
    inside = steps[(steps > low) & (steps <= high)]
    points = np.unique(np.concatenate([[low, high], inside - stride, inside]))
    return points, code_at_low + np.searchsorted(steps, points, side="right")


def fit_requantization(steps, code_at_low, low, high, zp, lo, hi, bits=MULT_BITS,
                       bias_range=(-(1 << 31), (1 << 31) - 1), stride=1):
    """The requantization of one channel that steps where ``steps`` says.

    Parameters
    ----------
    steps : numpy.ndarray
        int64 [J]: :func:`step_thresholds`' row of the channel, nondecreasing.
    code_at_low : int
        The code at ``low``.
    low, high : int
        The accumulator's reachable range.
    zp, lo, hi : int
        The layer's output offset and clamp.
    bits : int
        Significant bits of the multiplier (``config.requant_mult_bits``).
    bias_range : tuple of int
        What the parameter entry's bias holds.
    stride : int
        The accumulator takes only multiples of ``stride`` (weights scaled by it, so that the
        bias can place a step between two of them): each step must lie within ``stride``
        below its value, not 1.

    Returns
    -------
    Fit or None
        None when the channel is constant over the range (its weights can be zeroed and its
        bias set to the code less ``zp``).
    """
    steps = np.asarray(steps, dtype=np.int64)
    inside = steps[(steps > low) & (steps <= high)]
    if not len(inside):
        return None
    points, expected = checked_points(steps, code_at_low, low, high, stride)
    first, last, count = int(inside[0]), int(inside[-1]), len(inside)
    if count > 1:
        width = (last - first) / (count - 1)
        spacing = ((last - first - stride) / (count - 1), (last - first + stride) / (count - 1))
        spacing = (max(spacing[0], width / 2, 1e-9), spacing[1])
    else:
        # One step: every step 1 apart (the clamp keeps the others out), or wider than the range.
        spacing = None
    best = None
    wide = float(high - low + 2 * stride)
    ranges = [spacing] if spacing else [(1.0, 1.0), (wide, 2 * wide)]
    for spacing_low, spacing_high in ranges:
        mult, shift = _candidates(spacing_low, spacing_high, bits)
        middle, reach = 0.5 * (spacing_low + spacing_high), 0.5 * (spacing_high - spacing_low)
        for widen in range(1, 8):
            if len(mult):
                break
            # No multiplier of these bits steps that finely: the nearest ones, each missing.
            reach += middle * 2.0 ** (1 - bits) * widen
            mult, shift = _candidates(max(middle - reach, 1e-9), middle + reach, bits)
        if not len(mult):
            continue
        # The smallest bias that makes r step up at the first step: u(first) = u(first - 1) + 1.
        before = code_at_low + int(np.searchsorted(steps, first - 1, side="right")) - zp
        numerator = (2 * before + 1) * (np.int64(1) << (shift - 1))
        smallest = -(-numerator // mult) - first
        # Each bias that puts that step within the stride below the first step.
        mult, shift = np.tile(mult, stride), np.tile(shift, stride)
        bias = np.concatenate([smallest + extra for extra in range(stride)])
        keep = (bias >= bias_range[0]) & (bias <= bias_range[1])
        mult, shift, bias = mult[keep], shift[keep], bias[keep]
        if not len(mult):
            continue
        difference = np.abs(_requantize(points, bias, mult, shift, zp, lo, hi) - expected)
        misses = np.count_nonzero(difference, axis=1)
        # Fewest codes wrong by the most, then fewest wrong.
        pick = int(np.lexsort((misses, difference.max(axis=1)))[0])
        candidate = Fit(mult[pick], shift[pick], bias[pick], misses[pick],
                        difference[pick].max())
        if best is None or (candidate.error, candidate.misses) < (best.error, best.misses):
            best = candidate
        if best.misses == 0:
            break
    if best is None:
        best = Fit(1 << 14, 14, 0, len(points), hi - lo)
    return best
