"""Activation range estimation from calibration data.

Each method maps the float values one tensor took over the calibration set to
a real range ``[rmin, rmax]``; :func:`~fpganet.quantize.fixed_point.activation_qparams`
turns that into a scale and zero point. The measured effect of each method on
LeNet-5 is in ``docs/reference/numerics.md``.
"""

import numpy as np

from ..errors import FpganetError
from .fixed_point import activation_qparams

__all__ = ["METHODS", "DEFAULT_METHOD", "tensor_range", "parse_method"]

#: Method name -> one-line description.
METHODS = {
    "minmax": "observed minimum and maximum",
    "percentile": "the p-th and (100-p)-th percentiles (default p = 99.99; written percentile:P)",
    "mse": "clipping range (a scaled min/max) that minimizes the quantization MSE; min/max "
           "for a tensor an average pool reads",
    "kl": "TensorRT-style entropy (KL divergence) threshold for non-negative tensors, min/max otherwise",
}
#: Chosen by top-1 accuracy of LeNet-5 on the MNIST eval split (docs/reference/numerics.md): mse 99.13 %,
#: percentile 99.11-99.12 %, minmax 99.07 %, kl 99.06 %, float 99.12 %.
DEFAULT_METHOD = "mse"
DEFAULT_PERCENTILE = 99.99
_SAMPLE = 1 << 18
_KL_EPSILON = 1e-4  # values the MSE search evaluates exactly; a fixed-seed random subset


def parse_method(text):
    """``"percentile:99.9"`` -> ``("percentile", 99.9)``; other methods -> ``(name, None)``."""
    name, _, argument = str(text).partition(":")
    if name not in METHODS:
        raise FpganetError(f"unknown calibration method '{text}'; choose from "
                           f"{', '.join(sorted(METHODS))}")
    if name != "percentile":
        if argument:
            raise FpganetError(f"calibration method '{name}' takes no argument ('{text}')")
        return name, None
    try:
        value = float(argument) if argument else DEFAULT_PERCENTILE
    except ValueError:
        value = float("nan")
    if not 50 < value <= 100:
        raise FpganetError(f"percentile in '{text}' must be a number in (50, 100]")
    return name, value


def tensor_range(values, method=DEFAULT_METHOD):
    """Real range ``(rmin, rmax)`` for one tensor's calibration values.

    Parameters
    ----------
    values : numpy.ndarray
        Any shape; all values the tensor took on the calibration set.
    method : str
        One of :data:`METHODS`, percentile optionally as ``"percentile:P"``.

    Returns
    -------
    tuple of float
        Always ``rmin <= 0 <= rmax``.
    """
    name, argument = parse_method(method)
    values = np.asarray(values, dtype=np.float32).ravel()
    if values.size == 0:
        return 0.0, 0.0
    low, high = float(values.min()), float(values.max())
    if name == "percentile":
        low, high = (float(v) for v in np.percentile(values, [100 - argument, argument]))
    elif name == "mse":
        low, high = _mse_range(values, low, high)
    elif name == "kl" and low >= 0:
        high = _kl_threshold(values, high)
    return min(low, 0.0), max(high, 0.0)


def _mse_range(values, low, high):
    """Shrink [low, high] by a common factor to minimize the round-trip squared error."""
    if values.size > _SAMPLE:
        values = np.random.default_rng(0).choice(values, _SAMPLE, replace=False)
    values = values.astype(np.float64)
    best, best_error = (low, high), np.inf
    for factor in np.linspace(0.2, 1.0, 81):
        scale, zero_point = activation_qparams(low * factor, high * factor)
        q = np.clip(np.rint(values / scale) + zero_point, -128, 127)
        error = float(np.mean((scale * (q - zero_point) - values) ** 2))
        if error < best_error:
            best, best_error = (low * factor, high * factor), error
    return best


def _kl_threshold(values, high, bins=2048, levels=256):
    """Upper threshold minimizing KL(P || Q) between the clipped and the quantized histogram."""
    # Exact zeros (ReLU's floor) are represented exactly whatever the threshold; left in,
    # their spike dominates P and drives the threshold to the smallest candidate.
    values = values[values > 0]
    if high <= 0 or values.size == 0:
        return high
    hist, edges = np.histogram(values, bins=bins, range=(0.0, high))
    hist = hist.astype(np.float64)
    best, best_kl = high, np.inf
    for stop in range(levels, bins + 1, 4):
        p = hist[:stop].copy()
        p[-1] += hist[stop:].sum()
        # Q: the unclipped bins merged into `levels` groups, each group's mass spread over its
        # non-empty bins; P has the clipped tail folded into its last bin, Q does not, which
        # is what penalizes clipping (as in TensorRT's entropy calibrator).
        group = (np.arange(stop) * levels) // stop
        nonzero = p > 0
        mass = np.bincount(group, weights=hist[:stop], minlength=levels)
        filled = np.bincount(group, weights=nonzero, minlength=levels)
        q = np.where(nonzero, mass[group] / np.maximum(filled[group], 1), 0.0)
        mask = p > 0
        pn, qn = p / p.sum(), q / q.sum()
        # Smooth Q where P has mass and Q has none (a clipped tail folded into an empty
        # group), as onnxruntime's and MXNet's calibrators do, instead of an infinite KL.
        qn = np.where(mask & (qn == 0), _KL_EPSILON, qn)
        qn /= qn.sum()
        kl = float(np.sum(pn[mask] * np.log(pn[mask] / qn[mask])))
        if kl < best_kl:
            best, best_kl = float(edges[stop]), kl
    return best
