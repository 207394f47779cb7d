"""Post-training quantization of the float IR into the integer network.

The scheme (fixed by the numerics contract, ``docs/reference/numerics.md``):

* weights int8 symmetric per output channel, zero point 0, -127..127;
* activations int8 asymmetric per tensor (TFLite convention), one scale and
  zero point per feature map, from calibration ranges; max pooling and
  reshapes pass them through unchanged;
* bias int32 at scale ``s_in * s_w[m]`` with ``-zp_in * sum_k w[m, k]`` folded in;
* requantization by a 15-bit multiplier and a shift; a ReLU is folded into the
  lower clamp bound (ReLU6 also into the upper one);
* a residual add and an average pool requantize to their own calibrated output
  scale (``docs/reference/numerics.md``).
"""

import dataclasses
import math
import warnings

import numpy as np

from ..config import DEFAULT_CONFIG, MULT_BITS
from ..errors import FpganetError, FpganetWarning
from ..model.ir import Add, AvgPool, Conv, Dense, MaxPool, Reshape, input_to_chw, layer_inputs
from ..model.reference import run_float
from ..qnet import ADD_WEIGHT_MAX, QAdd, QAvgPool, QConv, QMaxPool, QNetwork, QReshape
from .calibrate import DEFAULT_METHOD, parse_method, tensor_range
from .fixed_point import (activation_qparams, average_multiplier, exact_weight_scales,
                          multiplier_for, multiply_tflite, significant_bits, weight_qparams)
from .rounding import (DEFAULT_WEIGHT_BITS, ROUNDINGS, check_float_only, default_rounding,
                       gptq_rounding, layer_weight_bits)

__all__ = ["quantize_graph", "averaged_tensors", "range_method", "quantize_linear_layer",
           "quantize_given_linear", "constant_channels",
           "quantize_add", "quantize_avgpool",
           "channel_multipliers", "clamp_codes",
           "check_calibration", "warn_degenerate",
           "MIN_CALIBRATION_SAMPLES", "LARGE_INPUT"]


def quantize_graph(graph, calib_x, method=DEFAULT_METHOD, config=DEFAULT_CONFIG, source=None,
                   calibration=None, weight_bits=DEFAULT_WEIGHT_BITS, layer_bits=None,
                   weight_rounding=None):
    """Quantize a float graph with activation ranges from calibration inputs.

    Parameters
    ----------
    graph : fpganet.model.Graph
        ReLUs already fused (as :func:`fpganet.model.load_onnx` returns it).
    calib_x : numpy.ndarray or None
        float32 [N, *graph.input_shape] in the model's input domain; unused (None) for a
        pre-quantized graph (``graph.quantization``, a QDQ model), whose own activation
        scales, zero points and weight scales are used as given.
    method : str
        Calibration method, see :data:`fpganet.quantize.calibrate.METHODS`.
    config : fpganet.config.AcceleratorConfig
    source, calibration : dict, optional
        Provenance stored in the network (and the manifest).
    weight_bits : int
        2..8: the width of every Conv's and Dense's weights (:mod:`fpganet.quantize.rounding`).
    layer_bits : dict or str, optional
        ``{layer name: bits}`` (or ``"NAME=BITS,..."``) overriding ``weight_bits``.
    weight_rounding : str, optional
        One of :data:`~fpganet.quantize.rounding.ROUNDINGS`; None:
        :func:`~fpganet.quantize.rounding.default_rounding`. A pre-quantized graph takes
        none of the three.

    Returns
    -------
    fpganet.qnet.QNetwork
        Validated.

    Raises
    ------
    fpganet.errors.FpganetError
        A layer's accumulator could overflow or its multiplier is out of range
        (the message names the layer).
    """
    parse_method(method)
    if weight_rounding is not None and weight_rounding not in ROUNDINGS:
        raise FpganetError(f"unknown weight rounding '{weight_rounding}'; choose from "
                           f"{', '.join(ROUNDINGS)}")
    if config.operand_width != 8:
        raise FpganetError(f"the quantizer produces int8 networks; operand_width must be 8, "
                           f"not {config.operand_width}")
    given = graph.quantization
    if given is not None:
        check_float_only("QONNX" if given.get("arithmetic") == "qonnx" else "QDQ", weight_bits,
                         layer_bits, weight_rounding)
    else:
        bits_by_layer = layer_weight_bits(graph, weight_bits, layer_bits)
        weight_rounding = weight_rounding or default_rounding(bits_by_layer)
    if given is not None and given.get("arithmetic") == "qonnx":
        from .qonnx_layers import quantize_qonnx

        return quantize_qonnx(graph, config, source, calibration)
    if given is not None:
        # A pre-quantized model (QDQ, int8 TFLite): its scales, zero points and int8 weights
        # as they are.
        outputs = [None] * len(graph.layers)
        s_act, zp_act = given["activations"][-1]
        averaged = set()
    else:
        calib_x = np.asarray(calib_x, dtype=np.float32)
        with np.errstate(all="ignore"):   # non-finite activations are refused below, by tensor
            _, outputs = run_float(graph, calib_x, layer_outputs=True)
        check_calibration(graph, calib_x, outputs)
        averaged = averaged_tensors(graph.layers)
        input_method = range_method(method, -1 in averaged)
        s_act, zp_act = activation_qparams(*tensor_range(calib_x, input_method))
        warn_degenerate(f"the input '{graph.input_name}'", calib_x, s_act)
    input_scale, input_zp = s_act, zp_act
    # (scale, zero point) of every layer's output; -1 is the network input.
    act = {-1: (s_act, zp_act)}
    layers = []
    for index, (layer, values) in enumerate(zip(graph.layers, outputs)):
        sources = layer_inputs(graph.layers, index)
        weights = None
        if given is None and isinstance(layer, (Conv, Dense)):
            # The layer's float input on the calibration set, for a rounding that reads it.
            rounding = None if weight_rounding == "nearest" else gptq_rounding(
                layer, input_to_chw(calib_x, graph.input_shape, graph.input_layout)
                if sources[0] == -1 else outputs[sources[0]])
            weights = (bits_by_layer[layer.name], rounding)
        qlayer = _quantize_layer(layer, index, values, [act[s] for s in sources], given, config,
                                 range_method(method, index in averaged), weights)
        # A chain stays without explicit inputs (its manifest is unchanged).
        qlayer.inputs = None if sources == (index - 1,) else tuple(sources)
        act[index] = qlayer.scale
        s_act, zp_act = qlayer.scale
        layers.append(qlayer)
    net = QNetwork(layers=layers, input_name=graph.input_name, input_shape=tuple(graph.input_shape),
                   input_scale=input_scale, input_zp=input_zp, output_name=graph.output_name,
                   output_shape=tuple(graph.output_shape), output_scale=s_act, output_zp=zp_act,
                   config=config, source=dict(source or {}), calibration=dict(calibration or {}),
                   input_layout=graph.input_layout)
    net.calibration.setdefault("method", method if given is None else "qdq")
    net.calibration.setdefault("samples", int(calib_x.shape[0]) if given is None else 0)
    if given is None and (weight_rounding != "nearest" or
                          set(bits_by_layer.values()) != {DEFAULT_WEIGHT_BITS}):
        net.calibration["weight_rounding"] = weight_rounding   # an int8 manifest stays as it was
    net.validate()
    return net


def averaged_tensors(layers):
    """Indices of the layers (-1: the graph input) whose output an average pool reads,
    directly or through max pools and reshapes (which keep its scale)."""
    averaged = set()
    for index, layer in enumerate(layers):
        if not isinstance(layer, AvgPool):
            continue
        pending = list(layer_inputs(layers, index))
        while pending:
            source = pending.pop()
            if source >= 0 and isinstance(layers[source], (MaxPool, Reshape)):
                pending.extend(layer_inputs(layers, source))
            else:
                averaged.add(source)
    return averaged


def range_method(method, averaged):
    """The calibration method of one tensor: ``minmax`` instead of ``mse`` for a tensor an
    average pool reads (``averaged``).

    ``mse`` trades clipping error against rounding error element by element. An average
    pool divides the variance of the rounding errors, independent from element to element,
    by its count, but not the clipping error, which has one sign: the clipped range biases
    every average. Measured on the random networks of ``benchmarks/ptq_vs_onnxruntime.py``
    and on ResNet-8 and VWW (docs/reference/numerics.md, section 6).
    """
    return "minmax" if averaged and parse_method(method)[0] == "mse" else method


def _quantize_layer(layer, index, values, inputs, given, config, method, weights=None):
    """The integer layer of ``graph.layers[index]``: ``values`` its float calibration outputs
    (None for a pre-quantized graph), ``inputs`` its inputs' ``(scale, zero_point)``, ``given``
    the graph's own quantization (or None), ``weights`` a float Conv's or Dense's
    ``(bits, rounding)`` (:func:`quantize_linear_layer`)."""
    mode, bits = config.requant_mode, config.requant_mult_bits
    s_act, zp_act = inputs[0]
    if isinstance(layer, (Conv, Dense, Add, AvgPool)):
        if given is not None:
            s_out, zp_out = given["activations"][index]
        else:
            rmin, rmax = tensor_range(values, method)
            if isinstance(layer, AvgPool) and bits < MULT_BITS:   # fpganet mode only
                rmin, rmax = exact_avgpool_range(layer, s_act, rmin, rmax, bits)
            s_out, zp_out = activation_qparams(rmin, rmax)
            warn_degenerate(f"the output of layer '{layer.name}'", values, s_out)
    litert = given is not None and given.get("arithmetic") == "tflite" and mode == "tflite"
    if isinstance(layer, (Conv, Dense)):
        s_w = None if given is None else given["weight_scales"][index]
        integers = None if given is None else given.get("integers", {}).get(index)
        if integers is not None:
            return quantize_given_linear(layer, integers, s_w, (s_act, zp_act), (s_out, zp_out),
                                         config, litert)
        weight_bits, rounding = weights or (DEFAULT_WEIGHT_BITS, None)
        return quantize_linear_layer(layer, s_act, zp_act, s_out, zp_out, config.acc_width,
                                     s_w=s_w, mode=mode, bits=bits, weight_bits=weight_bits,
                                     rounding=rounding)
    if isinstance(layer, Add):
        return quantize_add(layer, inputs[0], inputs[1], (s_out, zp_out), mode, bits)
    if isinstance(layer, AvgPool):
        qlayer = quantize_avgpool(layer, s_act, zp_act, s_out, zp_out, mode, bits)
        if litert and (s_act, zp_act) == (s_out, zp_out):
            # LiteRT's own arithmetic: the codes' sum divided by the count, rounded half away
            # from zero, which one rounding by a multiplier just above 1 / count gives.
            mult, shift = average_multiplier(qlayer.count)
            qlayer = dataclasses.replace(qlayer, sum_codes=True, mult=mult, shift=shift)
        return qlayer
    if isinstance(layer, MaxPool):
        return QMaxPool(name=layer.name, in_shape=layer.in_shape, out_shape=layer.out_shape,
                        kernel=tuple(layer.kernel), stride=tuple(layer.stride),
                        pads=tuple(layer.pads), zp=zp_act, s=s_act)
    if isinstance(layer, Reshape):
        return QReshape(name=layer.name, in_shape=layer.in_shape, out_shape=layer.out_shape,
                        zp=zp_act, s=s_act)
    raise FpganetError(f"layer '{layer.name}' ({type(layer).__name__}) cannot be quantized "
                       f"on its own")

#: Fewer calibration samples than this get a warning: the ranges then rest on too few images
#: (TFLite's converter documentation asks for a hundred or more representative samples).
MIN_CALIBRATION_SAMPLES = 32
#: Calibration inputs beyond this magnitude get a warning: a preprocessed input domain is
#: rarely wider (images in [0, 1], [-1, 1] or standardized, audio features in tens).
LARGE_INPUT = 1e4


def check_calibration(graph, calib_x, outputs):
    """Refuse calibration data that drives the float model to Inf/NaN; warn on too few
    samples or inputs of unusual magnitude (:class:`~fpganet.errors.FpganetWarning`)."""
    for layer, values in zip(graph.layers, outputs):
        if not np.all(np.isfinite(values)):
            raise FpganetError(f"the calibration data drive the output of layer '{layer.name}' "
                               f"to Inf or NaN in float32: are they in the model's input domain?")
    count = calib_x.shape[0]
    if count < MIN_CALIBRATION_SAMPLES:
        warnings.warn(f"calibration on {count} sample(s) only; activation ranges want "
                      f"{MIN_CALIBRATION_SAMPLES} or more representative inputs",
                      FpganetWarning, stacklevel=3)
    peak = float(np.max(np.abs(calib_x)))
    if peak > LARGE_INPUT:
        warnings.warn(f"calibration inputs reach {peak:.3g} in magnitude; is the data "
                      f"preprocessed into the model's input domain?", FpganetWarning, stacklevel=3)


def warn_degenerate(what, values, scale):
    """Warn when a tensor spans fewer than two int8 steps over the calibration set."""
    values = np.asarray(values)
    spread = float(values.max() - values.min()) if values.size else 0.0
    if spread < 2 * scale:
        kind = "constant" if spread == 0 else "nearly constant"
        warnings.warn(f"{what} is {kind} over the calibration data (it spans "
                      f"{spread:.3g}, under two int8 steps of {scale:.3g}); its quantization "
                      f"rests on no real range: calibrate on representative inputs",
                      FpganetWarning, stacklevel=3)


def channel_multipliers(s_in, s_w, s_out, name, mode="fpganet", bits=MULT_BITS):
    """int32 ``(mult, shift)`` per output channel for ``s_in * s_w[m] / s_out`` in requantization
    mode ``mode`` with ``bits``-bit multipliers
    (:func:`~fpganet.quantize.fixed_point.multiplier_for`, the ratio in float64 as LiteRT
    computes it)."""
    m = len(s_w)
    mult, shift = np.zeros(m, np.int32), np.zeros(m, np.int32)
    for channel in range(m):
        real = float(np.float64(s_in) * np.float64(s_w[channel]) / np.float64(s_out))
        mult[channel], shift[channel] = multiplier_for(real, name, mode, bits)
    return mult, shift


def quantize_linear_layer(layer, s_in, zp_in, s_out, zp_out, acc_width=32, s_w=None,
                          mode="fpganet", bits=MULT_BITS, weight_bits=DEFAULT_WEIGHT_BITS,
                          rounding=None):
    """Quantize one Conv or Dense given its input and output activation parameters.

    Parameters
    ----------
    layer : fpganet.model.Conv or fpganet.model.Dense
    s_in, zp_in, s_out, zp_out : float, int, float, int
    acc_width : int
        Accumulator bits; the layer is refused if it could overflow.
    s_w : numpy.ndarray, optional
        float32 [M]: the model's own per-output-channel weight scales (a QDQ model), under
        which the float weights are exactly int8 codes; None: chosen from the weights.
    mode : str
        The requantization mode the multipliers are for (``config.requant_mode``).
    bits : int
        Significant bits of the ``fpganet`` multipliers (``config.requant_mult_bits``). Below
        15, weight scales chosen here are widened until each multiplier is exact in ``bits``
        (:func:`~fpganet.quantize.fixed_point.exact_weight_scales`); given ones stay and
        their multipliers are rounded.
    weight_bits : int
        2..8: the weights' width when their scales are chosen here.
    rounding : callable, optional
        How they are rounded (:func:`~fpganet.quantize.fixed_point.weight_qparams`).

    Returns
    -------
    fpganet.qnet.QConv
    """
    if isinstance(layer, Dense):
        weight = layer.weight.reshape(*layer.weight.shape, 1, 1)
        kind, stride, pads = "dense", (1, 1), (0, 0, 0, 0)
    else:
        weight, kind, stride, pads = layer.weight, "conv", tuple(layer.stride), tuple(layer.pads)
    if s_w is None:
        widen = None
        if mode == "fpganet" and bits < MULT_BITS:
            def widen(scales):
                return exact_weight_scales(s_in, scales, s_out, bits)
        q_w, s_w = weight_qparams(weight, widen, weight_bits, rounding)
    else:
        s_w = np.asarray(s_w, dtype=np.float32)
        shape = (-1,) + (1,) * (weight.ndim - 1)
        q_w = np.rint(weight.astype(np.float64) / s_w.astype(np.float64).reshape(shape))
        q_w = q_w.astype(np.int8)
    m = q_w.shape[0]
    bias_scale = np.float64(s_in) * s_w.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        bias_real = np.rint(layer.bias.astype(np.float64) / bias_scale)
    limit = 1 << (acc_width - 1)
    if not np.all(np.abs(bias_real) < limit):
        channel = int(np.argmax(np.abs(bias_real)))
        raise FpganetError(f"layer '{layer.name}': bias of output channel {channel} is "
                           f"{bias_real[channel]:.3g} at scale s_in*s_w; it does not fit the "
                           f"{acc_width}-bit accumulator")
    row_sums = q_w.reshape(m, -1).astype(np.int64).sum(axis=1)
    bias = bias_real.astype(np.int64) - zp_in * row_sums
    bound = np.abs(bias) + 128 * np.abs(q_w.reshape(m, -1).astype(np.int64)).sum(axis=1)
    if np.any(bound >= limit):
        channel = int(np.argmax(bound))
        raise FpganetError(f"layer '{layer.name}': output channel {channel} can reach |acc| = "
                           f"{int(bound[channel])} >= 2**{acc_width - 1}; the accumulator could "
                           f"overflow (|bias| + 128 * sum |w| too large)")
    mult, shift = channel_multipliers(s_in, s_w, s_out, layer.name, mode, bits)
    lo, hi = _clamp(layer, s_out, zp_out)
    return QConv(name=layer.name, kind=kind, in_shape=tuple(layer.in_shape),
                 out_shape=tuple(layer.out_shape), kernel=tuple(q_w.shape[2:]), stride=stride,
                 pads=pads, zp_in=int(zp_in), zp_out=int(zp_out), lo=int(lo), hi=int(hi),
                 relu=bool(layer.relu), weight=q_w, bias=bias.astype(np.int32), mult=mult,
                 shift=shift, s_in=float(s_in), s_out=float(s_out), s_w=s_w,
                 groups=int(getattr(layer, "groups", 1)), weight_bits=int(weight_bits))


def quantize_given_linear(layer, integers, s_w, act_in, act_out, config, litert=False):
    """Requantize a Conv or Dense whose int8 weights and int32 biases the model gives (a
    fully-int8 TFLite model's), as they are.

    Parameters
    ----------
    layer : fpganet.model.Conv or fpganet.model.Dense
    integers : fpganet.model.ir.IntegerWeights
    s_w : numpy.ndarray
        float32 [M], the weights' scales.
    act_in, act_out : tuple
        ``(scale, zero_point)`` of the input and the output.
    config : fpganet.config.AcceleratorConfig
    litert : bool
        LiteRT's reference kernels' roundings (the ``tflite`` requantization mode of a TFLite
        model): a dense layer rounds once, and channels that do not depend on their input
        are rewritten by :func:`constant_channels`.

    Returns
    -------
    fpganet.qnet.QConv
        Validated, the message naming the op that gave the integers.
    """
    (s_in, zp_in), (s_out, zp_out) = act_in, act_out
    weight = integers.weight
    m = weight.shape[0]
    dense = isinstance(layer, Dense)
    row_sums = weight.reshape(m, -1).astype(np.int64).sum(axis=1)
    bias64 = integers.bias.astype(np.int64) - zp_in * row_sums
    mode = config.requant_mode
    # LiteRT's reference FULLY_CONNECTED rounds once, its convolutions twice.
    single = litert and dense
    # With fewer multiplier bits than 15, the model's own scales are kept and its
    # multipliers rounded (docs/reference/numerics.md section 9).
    mult, shift = channel_multipliers(s_in, s_w, s_out, layer.name, mode,
                                      config.requant_mult_bits)
    if litert:
        weight, bias64, mult, shift = constant_channels(weight, bias64, mult, shift, single)
    if np.any(np.abs(bias64) >= 1 << 31):
        channel = int(np.argmax(np.abs(bias64)))
        raise FpganetError(f"{integers.origin}: the bias of output channel {channel} with the "
                           f"input zero point folded in, {int(bias64[channel])}, is not int32")
    # The fused activation folds into the clamp as a ReLU / ReLU6 does.
    lo, hi = clamp_codes(layer.relu, layer.clip_max, s_out, zp_out)
    qlayer = QConv(name=layer.name, kind="dense" if dense else "conv",
                   in_shape=tuple(layer.in_shape), out_shape=tuple(layer.out_shape),
                   kernel=tuple(weight.shape[2:]),
                   stride=(1, 1) if dense else tuple(layer.stride),
                   pads=(0, 0, 0, 0) if dense else tuple(layer.pads),
                   zp_in=int(zp_in), zp_out=int(zp_out), lo=lo, hi=hi, relu=layer.relu,
                   weight=weight.astype(np.int8), bias=bias64.astype(np.int32), mult=mult,
                   shift=shift, s_in=s_in, s_out=s_out, s_w=s_w.astype(np.float32),
                   groups=int(getattr(layer, "groups", 1)), single_rounding=single)
    qlayer.validate(config.acc_width, config.requant_mode)   # naming the layer
    return qlayer


def constant_channels(weight, bias, mult, shift, single):
    """A layer's channels whose output does not depend on its input, in the ``tflite``
    requantization mode's parameter entry, with the same outputs.

    A channel TFLite gives the multiplier 0 (its real multiplier is below 2**-32) outputs its
    zero point: weights and bias become 0, the multiplier 2**30. A channel whose weights are all
    zero outputs the constant ``multiply_tflite(bias, M, shift)`` (converters leave such
    channels, a folded batch norm's, with biases near 2**30): the bias becomes that constant
    (bounded to +-1024, where the clamp decides alike) and ``M = 2**31 - 1``, ``shift`` 0,
    which return it unchanged with either rounding. Neither fits the entry as it came (``M``
    in [2**30, 2**31), a 28-bit bias).
    """
    weight, bias = weight.copy(), bias.copy()
    mult, shift = mult.copy(), shift.copy()
    silent = mult == 0
    weight[silent], bias[silent], mult[silent], shift[silent] = 0, 0, 1 << 30, 0
    flat = ~weight.reshape(len(weight), -1).any(axis=1) & ~silent
    value = multiply_tflite(bias[flat], mult[flat], shift[flat], single)
    bias[flat] = np.clip(value, -1024, 1024)
    mult[flat], shift[flat] = (1 << 31) - 1, 0
    return weight, bias, mult, shift


def clamp_codes(relu, clip_max, s_out, zp_out):
    """``(lo, hi)``: a folded ReLU raises ``lo`` to the zero point, a ReLU6 (``clip_max``)
    lowers ``hi`` to the code of its maximum."""
    if not relu:
        return -128, 127
    lo, hi = max(-128, int(zp_out)), 127
    if clip_max is not None:
        hi = int(np.clip(zp_out + np.rint(np.float64(clip_max) / np.float64(s_out)), lo, 127))
    return lo, hi


def _clamp(layer, s_out, zp_out):
    """:func:`clamp_codes` of an IR layer's folded activation."""
    return clamp_codes(layer.relu, getattr(layer, "clip_max", None), s_out, zp_out)


def add_weights(s_a, s_b):
    """The int8 input weights ``(w_a, w_b)`` of a :class:`~fpganet.qnet.QAdd` and their common
    real step ``s`` (``w_a * s ~ s_a``, ``w_b * s ~ s_b``).

    Of all pairs in 1..:data:`~fpganet.qnet.ADD_WEIGHT_MAX`, the one whose best common step
    (least squares) leaves the smallest error ``|w_a s - s_a| + |w_b s - s_b|``, then the larger
    weights: a ratio of small integers (1:2, 3:4) is exact.
    """
    s_a, s_b = float(s_a), float(s_b)
    big, small, swapped = (s_a, s_b, False) if s_a >= s_b else (s_b, s_a, True)
    best = None
    for w_big in range(1, ADD_WEIGHT_MAX + 1):
        for w_small in {max(1, int(w_big * small / big)), min(w_big, int(w_big * small / big) + 1)}:
            step = (big * w_big + small * w_small) / (w_big * w_big + w_small * w_small)
            error = abs(w_big * step - big) + abs(w_small * step - small)
            if best is None or error <= best[0] * (1 + 1e-12):
                best = (error, w_big, w_small, step)
    _, w_big, w_small, step = best
    return (w_small, w_big, step) if swapped else (w_big, w_small, step)


def exact_avgpool_range(layer, s_in, rmin, rmax, bits):
    """An average pool's calibrated output range ``[rmin, rmax]``, widened so that its
    multiplier ``s_in / (s_out * count)`` is exact in ``bits`` significant bits: the largest
    such multiplier at most the calibrated one, the output scale grown by less than
    ``2**(1 - bits)`` of itself (its codes keep at least half their range at one bit)."""
    s_out, _ = activation_qparams(rmin, rmax)
    count = int(layer.kernel[0]) * int(layer.kernel[1])
    mantissa, exponent = significant_bits(float(s_in) / (s_out * count), bits, math.floor)
    widen = float(s_in) / (math.ldexp(mantissa, exponent - bits) * count) / s_out
    return rmin * widen, rmax * widen


#: Steps :func:`exact_add_weights` tries, from the smallest that keeps the weights in range.
EXACT_ADD_STEPS = 256


def exact_add_weights(s_a, s_b, s_out, bits):
    """:func:`add_weights` for a multiplier ``step / s_out`` exact in ``bits`` significant
    bits: of the first :data:`EXACT_ADD_STEPS` such steps from ``max(s_a, s_b) /``
    :data:`~fpganet.qnet.ADD_WEIGHT_MAX` up, the one whose rounded weights leave the smallest
    error ``|w_a s - s_a| + |w_b s - s_b|``. With one bit the steps are powers of two times
    ``s_out`` and the larger weight lies in 64..127: within 1/128 of its real ratio."""
    s_a, s_b, s_out = float(s_a), float(s_b), float(s_out)
    mantissa, exponent = significant_bits(max(s_a, s_b) / ADD_WEIGHT_MAX / s_out, bits, math.ceil)
    best = None
    for _ in range(EXACT_ADD_STEPS):
        step = math.ldexp(mantissa, exponent - bits) * s_out
        w_a, w_b = (min(ADD_WEIGHT_MAX, max(1, round(s / step))) for s in (s_a, s_b))
        error = abs(w_a * step - s_a) + abs(w_b * step - s_b)
        if best is None or error < best[0]:
            best = (error, w_a, w_b, step)
        mantissa += 1
        if mantissa == 1 << bits:
            mantissa, exponent = 1 << (bits - 1), exponent + 1
    return best[1:]


def quantize_add(layer, a, b, out, mode="fpganet", bits=MULT_BITS):
    """Quantize a residual :class:`~fpganet.model.ir.Add` (the arithmetic of :class:`~fpganet.qnet.QAdd`).

    Parameters
    ----------
    layer : fpganet.model.ir.Add
    a, b, out : tuple
        ``(scale, zero_point)`` of the two inputs and of the output.
    mode : str
        The requantization mode of the multiplier.
    bits : int
        Its significant bits in the ``fpganet`` mode: below 15, the weights' common step is
        one that makes the multiplier exact in them (:func:`exact_add_weights`).

    Returns
    -------
    fpganet.qnet.QAdd
    """
    (s_a, zp_a), (s_b, zp_b), (s_out, zp_out) = a, b, out
    if mode == "fpganet" and bits < MULT_BITS:
        w_a, w_b, step = exact_add_weights(s_a, s_b, s_out, bits)
    else:
        w_a, w_b, step = add_weights(s_a, s_b)
    mult, shift = multiplier_for(step / float(s_out), layer.name, mode, bits)
    lo, hi = _clamp(layer, s_out, zp_out)
    return QAdd(name=layer.name, in_shape=tuple(layer.in_shape), zp_a=int(zp_a), zp_b=int(zp_b),
                w_a=w_a, w_b=w_b, mult=mult, shift=shift, zp_out=int(zp_out), lo=int(lo),
                hi=int(hi), relu=bool(layer.relu), s_a=float(s_a), s_b=float(s_b),
                s_out=float(s_out), single_rounding=mode == "tflite")


def quantize_avgpool(layer, s_in, zp_in, s_out, zp_out, mode="fpganet", bits=MULT_BITS):
    """Quantize an :class:`~fpganet.model.ir.AvgPool` (the arithmetic of :class:`~fpganet.qnet.QAvgPool`)
    with a multiplier in requantization mode ``mode`` (``bits`` significant bits, rounded)."""
    count = int(layer.kernel[0]) * int(layer.kernel[1])
    mult, shift = multiplier_for(float(np.float64(s_in) / (np.float64(s_out) * count)),
                                 layer.name, mode, bits)
    lo, hi = _clamp(layer, s_out, zp_out)
    return QAvgPool(name=layer.name, in_shape=tuple(layer.in_shape),
                    out_shape=tuple(layer.out_shape), kernel=tuple(layer.kernel),
                    stride=tuple(layer.stride), pads=tuple(layer.pads), zp_in=int(zp_in),
                    zp_out=int(zp_out), lo=int(lo), hi=int(hi), relu=bool(layer.relu), mult=mult,
                    shift=shift, s_in=float(s_in), s_out=float(s_out))
