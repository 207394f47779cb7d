"""A QONNX network's integer layers, from its own quantizers (no calibration).

Each feature map holds the codes of a :class:`~fpganet.model.qonnx.Levels`; each linear
layer's weights are the model's integer levels. For every output channel the code the
model computes (the layer's float output, its epilogue, its quantizer, as qonnx's executor
does) is a monotone step function of the layer's integer accumulator;
:func:`~fpganet.quantize.thresholds.step_thresholds` finds its steps and
:func:`~fpganet.quantize.thresholds.fit_requantization` the requantization that takes them
(``docs/reference/numerics.md``, "QONNX models"). A channel whose function falls is
computed with its weights negated; one that is constant over the reachable range with
zero weights and its code as bias. The logits (the last layer, which no quantizer follows)
become int8 codes at one step of the accumulator where its range allows, so that their
arg-max is the model's.
"""

import warnings

import numpy as np

from ..errors import FpganetError, FpganetWarning
from ..isa import param_ranges
from ..model.ir import Conv, Dense, MaxPool, Reshape, layer_inputs
from ..model.qonnx import Levels
from ..qnet import INT8_MAX, INT8_MIN, QConv, QMaxPool, QNetwork, QReshape
from .fixed_point import requantize_mode
from .thresholds import checked_points, fit_requantization, step_thresholds

__all__ = ["quantize_qonnx", "input_quantization", "logit_levels"]


def quantize_qonnx(graph, config, source=None, calibration=None):
    """The integer network of an imported QONNX graph (``graph.quantization["arithmetic"]``
    ``"qonnx"``), validated.

    Raises
    ------
    fpganet.errors.FpganetError
        A layer or setting the QONNX path does not take, named.
    """
    if config.requant_mode != "fpganet":
        raise FpganetError(f"a QONNX model compiles in the fpganet requantization mode, not "
                           f"'{config.requant_mode}'")
    given = graph.quantization
    levels_in = given["levels"][-1]
    input_scale, input_zp, input_lo, input_hi = input_quantization(levels_in,
                                                                   given["input_affine"])
    consumers_pad = _padded_readers(graph)
    # Per layer output (-1: the input): (Levels, hardware zero point).
    act = {-1: (levels_in, input_zp)}
    layers, misses, inexact, logit_error = [], [], {}, 0
    for index, layer in enumerate(graph.layers):
        sources = layer_inputs(graph.layers, index)
        if len(sources) != 1:
            raise FpganetError(f"layer '{layer.name}' ({type(layer).__name__}): residual adds "
                               f"of a QONNX model are not supported yet")
        levels, zp = act[sources[0]]
        if isinstance(layer, (Conv, Dense)):
            out = given["levels"].get(index)
            logits = out is None
            qlayer, (missed, error), out = _linear(layer, given["weight_scales"][index],
                                                   given["epilogues"][index], levels, zp, out,
                                                   index in consumers_pad, config)
            if logits:
                logit_error = error
            elif missed:
                misses.extend(f"layer '{layer.name}' channel {c}" for c in missed)
                inexact[layer.name] = error
            act[index] = (out, qlayer.zp_out)
        elif isinstance(layer, MaxPool):
            qlayer = QMaxPool(name=layer.name, in_shape=layer.in_shape, out_shape=layer.out_shape,
                              kernel=tuple(layer.kernel), stride=tuple(layer.stride),
                              pads=tuple(layer.pads), zp=zp, s=levels.code_scale)
            act[index] = act[sources[0]]
        elif isinstance(layer, Reshape):
            qlayer = QReshape(name=layer.name, in_shape=layer.in_shape, out_shape=layer.out_shape,
                              zp=zp, s=levels.code_scale)
            act[index] = act[sources[0]]
        else:
            raise FpganetError(f"layer '{layer.name}' ({type(layer).__name__}) is not supported "
                               f"in a QONNX model yet")
        qlayer.inputs = None if sources == (index - 1,) else tuple(sources)
        layers.append(qlayer)
    out_levels, out_zp = act[len(layers) - 1]
    if misses:
        warnings.warn(f"{len(misses)} output channel(s) step at accumulator values the "
                      f"requantizer's multipliers cannot all take (first: {misses[0]}); their "
                      f"codes differ from the model's by up to {max(inexact.values())} level(s) "
                      f"near those values",
                      FpganetWarning, stacklevel=2)
    net = QNetwork(layers=layers, input_name=graph.input_name, input_shape=tuple(graph.input_shape),
                   input_scale=input_scale, input_zp=input_zp, output_name=graph.output_name,
                   output_shape=tuple(graph.output_shape), output_scale=out_levels.code_scale,
                   output_zp=out_zp, config=config, source=dict(source or {}),
                   calibration={**(calibration or {}), "method": "qonnx", "samples": 0,
                                "inexact_channels": len(misses),
                                "inexact_layers": inexact,
                                "logits_error_codes": int(logit_error)},
                   input_layout=graph.input_layout, input_lo=input_lo, input_hi=input_hi)
    net.validate()
    return net


def input_quantization(levels, affine):
    """``(scale, zero_point, lo, hi)`` of the host's quantization of the raw input for a
    quantizer after the preprocessing ``a * x + b``: the same codes as the model's, but
    where ``x`` falls exactly on a rounding tie (see docs/reference/numerics.md)."""
    a, b = affine
    if levels.bipolar:
        # 1 where a x + b >= 0: x >= theta, as clamp(rint(x / s) + zp, 0, 1) takes it (a tie
        # at theta must round up: 1.5 rounds to 2 and -0.5 to 0).
        theta = -b / a
        if theta > 0:
            return float(np.float32(theta / 1.5)), -1, 0, 1
        if theta < 0:
            return float(np.float32(-2 * theta)), 1, 0, 1
        return float(np.finfo(np.float32).tiny), 1, 0, 1
    if levels.rounding not in ("ROUND", "HALF_EVEN"):
        raise FpganetError(f"{levels.node} quantizes the input with rounding "
                           f"'{levels.rounding}'; the host rounds half to even (ROUND)")
    scale = float(levels.scale) / a
    zero_point = b / float(levels.scale) + levels.zero_point + levels.offset
    if abs(zero_point - round(zero_point)) > 1e-6 or not INT8_MIN <= round(zero_point) <= INT8_MAX:
        raise FpganetError(f"{levels.node}: the input's preprocessing shifts it by "
                           f"{zero_point:.6g} levels, not a whole number in -128..127; the "
                           f"host's quantization cannot take it")
    return float(np.float32(scale)), int(round(zero_point)), levels.code_low, levels.code_high


def _padded_readers(graph):
    """Layer indices (-1: the input) whose output a padded Conv reads: their zero code must
    be the real zero."""
    readers = set()
    for index, layer in enumerate(graph.layers):
        if isinstance(layer, Conv) and any(layer.pads):
            readers.update(layer_inputs(graph.layers, index))
    return readers


def _linear(layer, s_w, epilogue, levels_in, zp_in, levels_out, padded, config):
    """The QConv of a Conv or Dense: ``(qlayer, (channels that missed, largest error in
    codes), output Levels)``."""
    dense = isinstance(layer, Dense)
    weight = layer.weight.reshape(*layer.weight.shape, 1, 1) if dense else layer.weight
    m = weight.shape[0]
    s_w = np.asarray(s_w, np.float32)
    q_w = np.rint(weight.astype(np.float64) / s_w.astype(np.float64).reshape(-1, 1, 1, 1))
    q_w = q_w.astype(np.int64)
    if any(layer.pads if not dense else ()) and levels_in.code_zero != zp_in:
        raise FpganetError(f"layer '{layer.name}' pads its input, whose codes hold no zero "
                           f"({levels_in.node}); a padded Conv needs an integer zero point")
    rows = q_w.reshape(m, -1)
    low, high = _accumulator_range(rows, levels_in, zp_in, any(layer.pads) if not dense else False)
    scale = np.float64(levels_in.code_scale) * s_w.astype(np.float64)
    offset = (zp_in - levels_in.code_zero) * rows.sum(axis=1)
    bias_f = layer.bias.astype(np.float64)
    spatial = (1, 1) if not dense else ()

    def output(a):
        y = (scale * (a + offset) + bias_f).astype(np.float32)
        return epilogue.evaluate(y.reshape(*y.shape, *spatial)).reshape(y.shape)

    if levels_out is None:
        levels_out = logit_levels(output, low, high, layer.name)
        zp_choices = [int(levels_out.code_zero)]
    else:
        zp_choices = _zero_point_choices(levels_out, padded, layer.name)

    def codes(a):
        return levels_out.code(levels_out.of(output(a)))

    # Channels whose code falls with the accumulator run negated.
    sign = np.where(codes(low.reshape(1, m))[0] > codes(high.reshape(1, m))[0], -1, 1)
    low_s, high_s = np.where(sign > 0, low, -high), np.where(sign > 0, high, -low)

    def rising(a):
        return codes(a * sign.reshape(1, m))

    code_low = rising(low_s.reshape(1, m))[0]
    lo, hi = levels_out.code_low, levels_out.code_high
    steps = step_thresholds(rising, low_s, high_s, hi - lo)
    rows = q_w.reshape(m, -1)
    # Unscaled weights at any offset first (they keep the model's width), then strides.
    best = None
    for max_stride in (1, MAX_STRIDE):
        for zp in zp_choices:
            fits = [_fit_channel(steps[c], int(code_low[c]), int(low_s[c]), int(high_s[c]),
                                 rows[c], zp, zp_in, lo, hi, config, max_stride)
                    for c in range(m)]
            errors = [fit.error for _, fit in fits if fit is not None and fit.misses]
            missed = (max(errors, default=0), len(errors))
            if best is None or missed < best[0]:
                best = (missed, zp, fits)
            if not errors:
                break
        if best[0] == (0, 0):
            break
    (error, _), zp_out, fits = best
    q_w = q_w * sign.reshape(-1, 1, 1, 1) * np.array([g for g, _ in fits]).reshape(-1, 1, 1, 1)
    mult = np.full(m, 1 << 14, np.int32)
    shift = np.full(m, 14, np.int32)
    bias = np.zeros(m, np.int64)
    missed = []
    for c, (_, fit) in enumerate(fits):
        if fit is None:     # constant over the range: its code as the bias of zero weights
            q_w[c] = 0
            bias[c] = int(code_low[c]) - zp_out
            continue
        mult[c], shift[c], bias[c] = fit.mult, fit.shift, fit.bias
        if fit.misses:
            missed.append(c)
    # QConv's bias holds the input zero point's share: acc = sum w (q - zp_in) + fitted bias.
    bias = bias - zp_in * q_w.reshape(m, -1).sum(axis=1)
    if np.any(np.abs(bias) >= 1 << 31):
        raise FpganetError(f"layer '{layer.name}': a bias does not fit 32 bits")
    qlayer = QConv(name=layer.name, kind="dense" if dense else "conv",
                   in_shape=tuple(layer.in_shape), out_shape=tuple(layer.out_shape),
                   kernel=tuple(weight.shape[2:]), stride=(1, 1) if dense else tuple(layer.stride),
                   pads=(0, 0, 0, 0) if dense else tuple(layer.pads), zp_in=int(zp_in),
                   zp_out=int(zp_out), lo=lo, hi=hi, relu=False, weight=q_w.astype(np.int8),
                   bias=bias.astype(np.int32), mult=mult, shift=shift,
                   s_in=float(levels_in.code_scale), s_out=float(levels_out.code_scale),
                   s_w=s_w.astype(np.float32), groups=int(getattr(layer, "groups", 1)),
                   weight_bits=_stored_bits(q_w))
    qlayer.validate(config.acc_width, config.requant_mode)
    _check_fit(qlayer, low_s, high_s, steps, code_low, fits)
    return qlayer, (missed, error), levels_out


def _fit_channel(steps, code_low, low, high, row, zp, zp_in, lo, hi, config,
                 max_stride=None):
    """``(stride, Fit or None)`` of one channel: its weights scaled by the smallest stride (up
    to ``max_stride``, the weights staying in -127..127) whose requantization fits
    exactly, else by the one that misses least. A stride ``g`` lets the bias place a step
    between two accumulator values, and the multiplier's step ``2**shift / mult`` fall within
    ``g`` of the steps' spacing: what a multiplier of few bits needs."""
    peak = int(np.abs(row).max(initial=0))
    best = (1, None)
    for stride in range(1, min(max_stride or MAX_STRIDE, 127 // max(peak, 1)) + 1):
        fit = fit_requantization(stride * steps, code_low, stride * low, stride * high, zp, lo, hi,
                                 config.requant_mult_bits,
                                 _bias_limit(row * stride, zp_in, config.acc_width), stride)
        if fit is None:
            return 1, None
        if best[1] is None or (fit.error, fit.misses) < (best[1].error, best[1].misses):
            best = (stride, fit)
        if fit.misses == 0:
            break
    return best


def _bias_limit(row, zp_in, acc_width):
    """The range of a channel's fitted bias (before the input zero point's share is folded
    in) that keeps the parameter entry's bias and the accumulator in range."""
    row = row.astype(np.int64)
    share = int(zp_in * row.sum())
    room = (1 << (acc_width - 1)) - 1 - 128 * int(np.abs(row).sum()) - abs(share)
    entry_lo, entry_hi = param_ranges("fpganet")["bias"]
    return max(-room, entry_lo + share), min(room, entry_hi + share)


#: Largest weight scaling a channel's fit tries.
MAX_STRIDE = 32


def _stored_bits(q_w):
    """The fewest bits (2..8) of symmetric codes that hold the stored weights: the model's
    width, or more where a channel's weights were scaled by a stride (a +-1 weight takes 2)."""
    peak = int(np.abs(q_w).max(initial=0))
    return next(bits for bits in range(2, 9) if peak <= (1 << (bits - 1)) - 1)


def _accumulator_range(rows, levels_in, zp_in, padded):
    """int64 [M] ``(low, high)`` of ``sum_k w (q - zp_in)`` over the input codes (and the
    padding's ``zp_in``)."""
    lowest, highest = levels_in.code_low - zp_in, levels_in.code_high - zp_in
    if padded:
        lowest, highest = min(lowest, 0), max(highest, 0)
    low = np.minimum(rows * lowest, rows * highest).sum(axis=1)
    high = np.maximum(rows * lowest, rows * highest).sum(axis=1)
    return low.astype(np.int64), high.astype(np.int64)


def _zero_point_choices(levels, padded, name):
    """The output offsets to try: the code of real zero first (what a padded reader needs,
    and then the only one), then offsets that give the fit the most freedom."""
    zero = levels.code_zero
    if padded:
        if zero != round(zero) or not INT8_MIN <= zero <= INT8_MAX:
            raise FpganetError(f"layer '{name}': a padded Conv reads its output, whose codes "
                               f"({levels.node}) hold no zero")
        return [int(zero)]
    first = int(round(zero)) if zero == round(zero) and INT8_MIN <= zero <= INT8_MAX else 0
    return [first] + [zp for zp in (INT8_MIN, INT8_MAX, -64, 64) if zp != first]


def logit_levels(output, low, high, name):
    """An int8 quantizer for the logits: one code per step of the steepest channel's
    accumulator, or their whole range over 255 codes where that is coarser."""
    m = len(low)
    at_low, at_high = (output(v.reshape(1, m))[0].astype(np.float64) for v in (low, high))
    span = np.maximum(high - low, 1)
    slopes = np.abs(at_high - at_low) / span
    smallest, largest = float(np.min([at_low, at_high])), float(np.max([at_low, at_high]))
    if not np.isfinite([smallest, largest]).all():
        raise FpganetError(f"layer '{name}': its logits reach Inf or NaN")
    # Never finer than the steepest channel's accumulator step: a code per accumulator value
    # at most, so that the bias (whole accumulator units) places each step within one code.
    step = max(float(np.max(slopes, initial=0)), (largest - smallest) / 254,
               float(np.finfo(np.float32).tiny))
    step = float(np.float32(step))
    zero = int(np.clip(round(-128 - smallest / step), INT8_MIN, INT8_MAX))
    return Levels(np.float32(step), float(zero), INT8_MIN, INT8_MAX, False, "ROUND", 8, "the logits")


def _check_fit(qlayer, low, high, steps, code_low, fits):
    """The golden model's requantization equals the fitted function at every checked point of
    every exact channel (the contract, not the fit's own arithmetic)."""
    for c, (stride, fit) in enumerate(fits):
        if fit is None or fit.misses:
            continue
        points, expected = checked_points(steps[c], code_low[c], low[c], high[c])
        expected = np.clip(expected, qlayer.lo, qlayer.hi)
        acc = (stride * points + fit.bias).reshape(1, 1, -1)
        got = requantize_mode(acc, qlayer.mult[c:c + 1], qlayer.shift[c:c + 1], qlayer.zp_out,
                              qlayer.lo, qlayer.hi, "fpganet").ravel()
        if not np.array_equal(got.astype(np.int64), expected):
            raise AssertionError(f"layer '{qlayer.name}' channel {c}: fitted requantization "
                                 f"disagrees with the golden model's")
