"""The integer network: what the golden model executes and the hardware back end consumes.

A :class:`QNetwork` is a list of integer layers (:class:`QConv`,
:class:`QMaxPool`, :class:`QReshape`, and for graphs that are not chains
:class:`QAdd` and :class:`QAvgPool`) in topological order, plus the host-side
quantization of the input and dequantization of the output. A layer reads the
layer before it unless its ``inputs`` name others (layer indices, ``-1`` the
network input); the last layer's output is the network output. Every field the accelerator needs is
here, as plain ints, tuples and numpy arrays; the float scales ride along only
to document the mapping and to dequantize the output. The arithmetic itself
is defined in :mod:`fpganet.golden` and in ``docs/reference/numerics.md``.

Feature maps are int8 ``(C, H, W)`` per sample in NCHW order. A dense layer is a
:class:`QConv` with ``kind == "dense"``: a 1x1 kernel on a ``(K, 1, 1)`` input.

A compiled directory holds ``manifest.json`` (everything, human readable, with
per-channel multipliers and shifts) and ``network.npz`` (the integer tensors,
authoritative): :meth:`QNetwork.save` and :func:`load_network`.
"""

import json
import os
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .config import MULT_BITS, AcceleratorConfig, ConfigError
from .errors import FpganetError, FpganetWarning
from .files import verify_directory
from .isa import param_ranges
from .model.ir import input_chw, input_text, input_to_chw

__all__ = ["QConv", "QMaxPool", "QReshape", "QAdd", "QAvgPool", "QNetwork", "load_network",
           "quantize_input", "MULT_BITS", "MULT_MIN", "MULT_MAX", "SHIFT_MIN", "SHIFT_MAX",
           "ADD_WEIGHT_MAX", "short_name", "layer_kind", "FORMAT", "NETWORK_INPUT"]

FORMAT = "fpganet-compiled/1"
MANIFEST = "manifest.json"
ARRAYS = "network.npz"

#: ``fpganet`` requantization multipliers are 15-bit unsigned with the top bit set:
#: [2**14, 2**15) (``MULT_BITS``, :data:`fpganet.config.MULT_BITS`); shifts 1..62 (the
#: parameter entry, :func:`fpganet.isa.param_ranges`).
(MULT_MIN, MULT_MAX), (SHIFT_MIN, SHIFT_MAX) = (param_ranges("fpganet")[name] for name in ("mult", "shift"))
#: Share of input values beyond the calibrated range (by more than a step) that gets a warning.
CLIPPED_INPUTS_WARNING = 0.01
#: Inputs that vary but quantize to fewer int8 levels than this get a warning.
FEW_INPUT_LEVELS = 8
INT8_MIN, INT8_MAX = -128, 127
#: ``inputs`` entry naming the network input.
NETWORK_INPUT = -1
#: QAdd: largest input weight (the weights are int8 operands of the array, 1..127).
ADD_WEIGHT_MAX = 127


@dataclass
class QConv:
    """An int8 convolution or dense layer with int32 accumulation and requantization.

    ``acc[m, n] = bias[m] + sum_k weight[m, k] * x[k, n]`` over the patch of a
    feature map padded with ``zp_in``; then
    ``y = clamp(zp_out + ((acc * mult[m] + (1 << (shift[m] - 1))) >> shift[m]), lo, hi)``.

    Attributes
    ----------
    name : str
        Name of the source layer (ONNX node).
    kind : str
        ``"conv"`` or ``"dense"`` (a 1x1 kernel on a ``(K, 1, 1)`` input).
    in_shape, out_shape : tuple of int
        ``(C, H, W)`` and ``(M, Ho, Wo)``.
    kernel, stride : tuple of int
        ``(kh, kw)``, ``(sh, sw)``.
    pads : tuple of int
        ``(top, left, bottom, right)``; padding positions hold ``zp_in``.
    zp_in, zp_out : int
        Zero points of the input and output feature maps.
    lo, hi : int
        Output clamp; ``lo = max(-128, zp_out)`` when a ReLU is folded in.
    relu : bool
        Whether a ReLU was folded into ``lo``.
    weight : numpy.ndarray
        int8 [M, C, kh, kw], zero point 0, symmetric in -127..127.
    bias : numpy.ndarray
        int32 [M] with the input zero point folded in.
    mult, shift : numpy.ndarray
        int32 [M]; ``mult`` in [2**14, 2**15), ``shift`` in [1, 62].
    s_in, s_out : float
        Scales of input and output (float32 values), for documentation.
    s_w : numpy.ndarray
        float32 [M] weight scales, for documentation.
    groups : int
        Channel groups (``groups == C == M``: depthwise): output channel ``m`` reads only
        the ``C / groups`` input channels of its group; weight [M, C / groups, kh, kw].
    inputs : tuple of int or None
        The layer it reads (None: the layer before it).
    single_rounding : bool
        ``tflite`` requantization only: TFLite's single-rounding multiply (LiteRT's
        FULLY_CONNECTED) instead of its double rounding (its convolutions).
    weight_bits : int
        The weights' width: below 8, ``weight`` holds only the codes
        ``-(2**(weight_bits-1) - 1)..2**(weight_bits-1) - 1`` (post-training quantization to
        fewer bits; the arithmetic is the same).
    """

    name: str
    kind: str
    in_shape: tuple
    out_shape: tuple
    kernel: tuple
    stride: tuple
    pads: tuple
    zp_in: int
    zp_out: int
    lo: int
    hi: int
    relu: bool
    weight: np.ndarray
    bias: np.ndarray
    mult: np.ndarray
    shift: np.ndarray
    s_in: float
    s_out: float
    s_w: np.ndarray
    groups: int = 1
    inputs: tuple = None
    single_rounding: bool = False
    weight_bits: int = 8

    type = "conv"

    @property
    def k(self):
        """Length of one dot product: ``C / groups * kh * kw``."""
        return int(np.prod(self.weight.shape[1:]))

    @property
    def macs(self):
        """Multiply-accumulates per sample."""
        return self.out_shape[0] * self.k * self.out_shape[1] * self.out_shape[2]

    @property
    def weight_matrix(self):
        """int8 [M, K] with K ordered (c, i, j), as the im2col columns are."""
        return self.weight.reshape(self.weight.shape[0], -1)

    @property
    def requant_zp(self):
        """The zero point the requantizer adds: ``zp_out``."""
        return self.zp_out

    @property
    def bias_unfolded(self):
        """int64 [M]: the bias before the input zero point was folded in (what ONNX QLinearConv takes)."""
        return self.bias.astype(np.int64) + self.zp_in * self.weight_matrix.astype(np.int64).sum(axis=1)

    @property
    def acc_bound(self):
        """int64 [M]: largest possible |accumulator| of each channel, any int8 input."""
        return np.abs(self.bias.astype(np.int64)) + 128 * np.abs(self.weight_matrix.astype(np.int64)).sum(axis=1)

    @property
    def scale(self):
        """``(s_out, zp_out)`` of the output feature map."""
        return self.s_out, self.zp_out

    def validate(self, acc_width=32, mode="fpganet"):
        """Check shapes, ranges and the no-overflow rule for requantization mode ``mode``; raise
        FpganetError naming the layer."""
        def fail(message):
            raise FpganetError(f"layer '{self.name}': {message}")

        m, c, kh, kw = self.weight.shape
        if self.weight.dtype != np.int8 or self.bias.dtype != np.int32:
            fail(f"weight must be int8 and bias int32, not {self.weight.dtype}/{self.bias.dtype}")
        groups = self.groups
        if not isinstance(groups, int) or groups < 1 or m % groups \
                or (c * groups, kh, kw) != (self.in_shape[0], *self.kernel) or m != self.out_shape[0]:
            fail(f"weight {list(self.weight.shape)} does not match in_shape {list(self.in_shape)}, "
                 f"kernel {list(self.kernel)}, out_shape {list(self.out_shape)}")
        for name in ("bias", "mult", "shift", "s_w"):
            if getattr(self, name).shape != (m,):
                fail(f"{name} has shape {list(getattr(self, name).shape)}, expected [{m}]")
        if self.weight.min(initial=0) < -127:
            fail("weights must lie in -127..127 (symmetric)")
        if not isinstance(self.weight_bits, int) or not 2 <= self.weight_bits <= 8:
            fail(f"weight_bits must be an integer from 2 to 8, not {self.weight_bits!r}")
        limit = (1 << (self.weight_bits - 1)) - 1
        if np.abs(self.weight.astype(np.int16)).max(initial=0) > limit:
            fail(f"{self.weight_bits}-bit weights must lie in -{limit}..{limit}")
        if self.single_rounding:
            _check_tflite_only(self, "single rounding", mode)
        ranges = param_ranges(mode)
        for name in ("mult", "shift", "bias"):
            lo, hi = ranges[name]
            values = getattr(self, name)
            if np.any(values < lo) or np.any(values > hi):
                fail(f"{name} must lie in [{lo}, {hi}] ({mode} requantization), not "
                     f"{int(values.min())}..{int(values.max())}")
        for name in ("zp_in", "zp_out", "lo", "hi"):
            if not INT8_MIN <= getattr(self, name) <= INT8_MAX:
                fail(f"{name} {getattr(self, name)} is outside -128..127")
        if self.lo > self.hi:
            fail(f"clamp lo {self.lo} > hi {self.hi}")
        expected_hw = tuple((size + self.pads[a] + self.pads[a + 2] - self.kernel[a]) // self.stride[a] + 1
                            for a, size in enumerate(self.in_shape[1:]))
        if expected_hw != tuple(self.out_shape[1:]):
            fail(f"out_shape {list(self.out_shape)} does not follow from in_shape, kernel, stride, pads")
        bound = int(self.acc_bound.max(initial=0))
        if bound >= 1 << (acc_width - 1):
            channel = int(self.acc_bound.argmax())
            fail(f"output channel {channel} can reach |acc| = {bound} >= 2**{acc_width - 1}; the "
                 f"{acc_width}-bit accumulator could overflow (|bias| + 128 * sum |w| too large)")
        _check_left_shift(self, self.acc_bound, self.shift, mode)


def _check_window(layer):
    """A pooling layer's output shape follows from its input, kernel, stride and pads."""
    expected_hw = tuple((size + layer.pads[a] + layer.pads[a + 2] - layer.kernel[a]) // layer.stride[a] + 1
                        for a, size in enumerate(layer.in_shape[1:]))
    if expected_hw != tuple(layer.out_shape[1:]) or layer.in_shape[0] != layer.out_shape[0]:
        raise FpganetError(f"layer '{layer.name}': out_shape {list(layer.out_shape)} does not follow "
                           f"from in_shape, kernel, stride, pads")


@dataclass
class QMaxPool:
    """Max pooling on int8; padding positions never win. Scale and zero point pass through."""

    name: str
    in_shape: tuple
    out_shape: tuple
    kernel: tuple
    stride: tuple
    pads: tuple
    zp: int
    s: float
    inputs: tuple = None

    type = "maxpool"
    macs = 0

    @property
    def scale(self):
        return self.s, self.zp

    def validate(self, acc_width=32, mode="fpganet"):
        _check_window(self)
        if any(p >= k for p, k in zip(self.pads, self.kernel + self.kernel)):
            raise FpganetError(f"layer '{self.name}': pads {list(self.pads)} must be smaller than the kernel")


@dataclass
class QReshape:
    """Change of shape; the int8 data stay in NCHW order (no data movement in CHW storage)."""

    name: str
    in_shape: tuple
    out_shape: tuple
    zp: int
    s: float
    inputs: tuple = None

    type = "reshape"
    macs = 0

    @property
    def scale(self):
        return self.s, self.zp

    def validate(self, acc_width=32, mode="fpganet"):
        if int(np.prod(self.in_shape)) != int(np.prod(self.out_shape)):
            raise FpganetError(f"layer '{self.name}': reshape {list(self.in_shape)} -> "
                               f"{list(self.out_shape)} changes the number of elements")


#: The manifest's statement of the requantization, per mode.
REQUANTIZE_TEXT = {
    "fpganet": "y = clamp(zp_out + ((acc * mult[m] + (1 << (shift[m] - 1))) >> shift[m]), lo, hi)",
    "tflite": "y = clamp(zp_out + MultiplyByQuantizedMultiplier(acc, mult[m], shift[m]), lo, hi) "
              "(TFLite: RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << max(shift, 0), "
              "mult), max(-shift, 0)); a layer with single_rounding: (acc * mult + (1 << (30 - "
              "shift))) >> (31 - shift))",
}
RESCALE_TEXT = {
    "fpganet": "rescale(x, m, s) = (x * m + (1 << (s - 1))) >> s",
    "tflite": "rescale(x, m, s) = MultiplyByQuantizedMultiplier(x, m, s) as TFLite",
}


def rescale(x, mult, shift):
    """``(x * mult + (1 << (shift - 1))) >> shift`` exactly in int64: round half toward +inf."""
    x = np.asarray(x, dtype=np.int64)
    return np.right_shift(x * np.int64(mult) + np.left_shift(np.int64(1), np.int64(shift) - 1),
                          np.int64(shift))


def _check_multiplier(layer, label, mult, shift, mode, bias=0, acc_bound=0):
    """One requantization's ``(mult, shift)`` and ``bias`` are in mode ``mode``'s parameter
    entry, and a ``tflite`` left shift keeps ``acc_bound`` in int32."""
    ranges = param_ranges(mode)
    (mult_lo, mult_hi), (shift_lo, shift_hi) = ranges["mult"], ranges["shift"]
    if not (mult_lo <= int(mult) <= mult_hi and shift_lo <= int(shift) <= shift_hi):
        raise FpganetError(f"layer '{layer.name}': {label} ({mult}, {shift}) is outside "
                           f"[{mult_lo}, {mult_hi}] x [{shift_lo}, {shift_hi}] ({mode} "
                           f"requantization)")
    lo, hi = ranges["bias"]
    if not lo <= int(bias) <= hi:
        raise FpganetError(f"layer '{layer.name}': bias {bias} is outside [{lo}, {hi}] ({mode} "
                           f"requantization)")
    _check_left_shift(layer, np.array([acc_bound]), np.array([shift]), mode)


def _check_tflite_only(layer, what, mode):
    """``what``, a form only the ``tflite`` requantization has, in a network of ``mode``."""
    if mode != "tflite":
        raise FpganetError(f"layer '{layer.name}': {what} is a tflite requantization; this "
                           f"network is {mode}")


def _check_left_shift(layer, acc_bound, shift, mode):
    """TFLite shifts the accumulator left by a positive ``shift`` in int32 (or, rounding once,
    scales it up as much): it must stay there."""
    if mode != "tflite":
        return
    shifted = acc_bound.astype(np.int64) << np.maximum(shift, 0).astype(np.int64)
    if np.any(shifted >= 1 << 31):
        channel = int(np.argmax(shifted))
        raise FpganetError(f"layer '{layer.name}': output channel {channel}'s accumulator shifted "
                           f"left by {int(shift[channel])} could leave int32")


def _check_clamp(layer, names):
    for name in names:
        if not INT8_MIN <= getattr(layer, name) <= INT8_MAX:
            raise FpganetError(f"layer '{layer.name}': {name} {getattr(layer, name)} is outside "
                               f"-128..127")
    if layer.lo > layer.hi:
        raise FpganetError(f"layer '{layer.name}': clamp lo {layer.lo} > hi {layer.hi}")


@dataclass
class QAdd:
    """Element-wise sum of two int8 feature maps of one shape, requantized.

    Each input is weighted by a small integer that brings it to a common scale, then the sum is
    requantized as a conv's accumulator is::

        acc = w_a * (q_a - zp_a) + w_b * (q_b - zp_b)            # exact; w_a, w_b in 1..127
        y   = clamp(zp_out + rescale(acc, mult, shift), lo, hi)   # mult * 2**-shift ~ s / s_out

    with ``w_a * s ~ s_a`` and ``w_b * s ~ s_b`` for one real step ``s`` (the weights are the
    best pair of int8 integers in the ratio ``s_a : s_b``). It is a two-input 1x1 convolution
    whose weights are ``w_a`` and ``w_b`` and whose bias is ``-(w_a zp_a + w_b zp_b)``, which is
    how the accelerator runs it. A following ReLU is folded into ``lo`` as for :class:`QConv`.
    ``single_rounding`` (``tflite`` requantization only) rescales with TFLite's single
    rounding, which the quantizer picks in that mode: it follows TFLite's ADD, whose
    intermediate sums carry 19 bits below the output's step, far more closely than the
    double rounding does (docs/guide/tflite.md).
    """

    name: str
    in_shape: tuple
    zp_a: int
    zp_b: int
    w_a: int
    w_b: int
    mult: int
    shift: int
    zp_out: int
    lo: int
    hi: int
    relu: bool
    s_a: float
    s_b: float
    s_out: float
    inputs: tuple = None
    single_rounding: bool = False

    type = "add"
    macs = 0        # the network's MACs are its convolutions' and dense layers', as is usual

    @property
    def out_shape(self):
        return tuple(self.in_shape)

    @property
    def bias(self):
        """The input zero points folded into one constant: ``acc = w_a q_a + w_b q_b + bias``."""
        return -(self.w_a * self.zp_a + self.w_b * self.zp_b)

    @property
    def requant_zp(self):
        """The zero point the requantizer adds: ``zp_out``."""
        return self.zp_out

    @property
    def scale(self):
        return self.s_out, self.zp_out

    def validate(self, acc_width=32, mode="fpganet"):
        if self.single_rounding:
            _check_tflite_only(self, "single rounding", mode)
        _check_clamp(self, ("zp_a", "zp_b", "zp_out", "lo", "hi"))
        for label in ("w_a", "w_b"):
            if not 1 <= getattr(self, label) <= ADD_WEIGHT_MAX:
                raise FpganetError(f"layer '{self.name}': input weight {label} "
                                   f"{getattr(self, label)} is outside 1..{ADD_WEIGHT_MAX}")
        _check_multiplier(self, "multiplier", self.mult, self.shift, mode, self.bias,
                          abs(self.bias) + 128 * (self.w_a + self.w_b))


@dataclass
class QAvgPool:
    """Average pooling on int8, requantized to its own output scale.

    ``acc = sum over the kh x kw window of (q - zp_in)`` (padding holds ``zp_in``, so it
    adds 0 and still counts in the divisor), then
    ``y = clamp(zp_out + ((acc * mult + (1 << (shift - 1))) >> shift), lo, hi)`` with
    ``mult * 2**-shift ~ s_in / (s_out * kh * kw)``.

    With ``sum_codes`` (TFLite's AVERAGE_POOL_2D, whose input and output share scale and zero
    point; ``tflite`` requantization only) the sum is of the codes themselves, no zero point is
    added back and the multiply rounds once: ``acc = sum over the window of q``,
    ``y = clamp(multiply_tflite(acc, mult, shift, single=True), lo, hi)``, with a multiplier
    a little above ``1 / (kh kw)`` that makes it TFLite's division rounding half away from
    zero (:func:`~fpganet.quantize.fixed_point.average_multiplier`).
    """

    name: str
    in_shape: tuple
    out_shape: tuple
    kernel: tuple
    stride: tuple
    pads: tuple
    zp_in: int
    zp_out: int
    lo: int
    hi: int
    relu: bool
    mult: int
    shift: int
    s_in: float
    s_out: float
    inputs: tuple = None
    sum_codes: bool = False

    type = "avgpool"
    macs = 0

    @property
    def scale(self):
        return self.s_out, self.zp_out

    @property
    def count(self):
        """Elements of one window."""
        return self.kernel[0] * self.kernel[1]

    @property
    def bias(self):
        """What the accelerator adds to its window sum of the codes: ``-zp_in * kh * kw``
        (the sum of ``q - zp_in``), or 0 with :attr:`sum_codes`."""
        return 0 if self.sum_codes else -self.zp_in * self.count

    @property
    def requant_zp(self):
        """The zero point the requantizer adds: ``zp_out``, or 0 with :attr:`sum_codes`."""
        return 0 if self.sum_codes else self.zp_out

    @property
    def single_rounding(self):
        """:attr:`sum_codes` divides with the ``tflite`` single-rounding multiply."""
        return self.sum_codes

    def validate(self, acc_width=32, mode="fpganet"):
        _check_window(self)
        _check_clamp(self, ("zp_in", "zp_out", "lo", "hi"))
        if self.sum_codes:
            _check_tflite_only(self, "the sum of the codes", mode)
        # The accelerator sums the codes (|q| <= 128) and adds the bias.
        _check_multiplier(self, "multiplier", self.mult, self.shift, mode, self.bias,
                          abs(self.bias) + 128 * self.count)
        if 255 * self.count >= 1 << (acc_width - 1):
            raise FpganetError(f"layer '{self.name}': a {self.kernel[0]}x{self.kernel[1]} window "
                               f"sum could overflow the {acc_width}-bit accumulator")


def layer_kind(layer):
    """What a layer is, for reports: conv, dwconv (depthwise), gconv (grouped), dense, maxpool,
    avgpool, add, reshape."""
    if isinstance(layer, QConv) and layer.groups != 1:
        return "dwconv" if layer.groups == layer.in_shape[0] else "gconv"
    return getattr(layer, "kind", layer.type)


def short_name(index, name, width=17):
    """``"index name"`` cut to ``width`` characters, for tables and plots: of the ``;``-joined
    names a TFLite converter gives a fused node, the first, without its ``model/`` scope."""
    name = name.split(";")[0].removeprefix("TFLITE2ONNX_FAF_").removeprefix("model/")
    label = f"{index} {name}"
    return label if len(label) <= width else label[:width - 1] + "~"


def input_zero_points(layer):
    """Zero points ``layer`` expects on its inputs, one per input."""
    if isinstance(layer, QAdd):
        return (layer.zp_a, layer.zp_b)
    if isinstance(layer, (QConv, QAvgPool)):
        return (layer.zp_in,)
    return (layer.zp,)


def output_zero_point(layer):
    """Zero point of ``layer``'s output."""
    return layer.zp_out if isinstance(layer, (QConv, QAvgPool, QAdd)) else layer.zp


_LAYER_TYPES = {cls.type: cls for cls in (QConv, QMaxPool, QReshape, QAdd, QAvgPool)}
_ARRAY_FIELDS = ("weight", "bias", "mult", "shift", "s_w")
#: Manifest fields of the layers without arrays (beside name, shapes, inputs).
_SCALAR_FIELDS = {
    "add": ("zp_a", "zp_b", "s_a", "s_b", "w_a", "w_b", "mult", "shift", "zp_out", "s_out", "lo",
            "hi", "relu"),
    "avgpool": ("kernel", "stride", "pads", "zp_in", "zp_out", "s_in", "s_out", "mult", "shift",
                "lo", "hi", "relu"),
}


def _plain(value):
    """A JSON-able copy: tuples as lists, numpy scalars as Python numbers."""
    if isinstance(value, (tuple, list)):
        return [int(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return int(value)
_ARRAY_DTYPES = {"weight": np.int8, "bias": np.int32, "mult": np.int32, "shift": np.int32,
                 "s_w": np.float32}


def quantize_input(x, scale, zero_point, lo=INT8_MIN, hi=INT8_MAX):
    """Host-side input quantization, identical to onnxruntime's QuantizeLinear to int8.

    ``q = clamp(round_half_to_even(x / scale) + zero_point, lo, hi)``, the
    division done in float32 as onnxruntime does; ``lo``, ``hi`` narrower than int8 for an
    input of fewer bits (a QONNX model's).

    Parameters
    ----------
    x : array_like
        float values.
    scale : float
        A float32-representable scale.
    zero_point : int
    lo, hi : int
        The codes' clamp.

    Returns
    -------
    numpy.ndarray
        int8, same shape as ``x``.
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = np.rint(x / np.float32(scale)).astype(np.float64) + zero_point
    return np.clip(q, lo, hi).astype(np.int8)


@dataclass
class QNetwork:
    """A compiled int8 network.

    Attributes
    ----------
    layers : list
        :class:`QConv`, :class:`QMaxPool`, :class:`QReshape`, :class:`QAdd`,
        :class:`QAvgPool` in execution order (topological); the last gives the output.
    input_name : str
    input_shape : tuple of int
        Per-sample shape of the float input as the source model declares it, in the
        model's own layout, e.g. ``(1, 28, 28)``; the first layer sees it as ``input_chw``.
    input_scale, input_zp : float, int
        Host quantization of the input (:meth:`quantize_input`).
    output_name : str
    output_shape : tuple of int
        Per-sample shape of the output, e.g. ``(10,)``.
    output_scale, output_zp : float, int
        ``logits = output_scale * (q - output_zp)``.
    config : fpganet.config.AcceleratorConfig
        The accelerator the network was compiled for.
    source : dict
        Source model: ``path``, ``sha256``, ``graph``, ``dropped_output_op``, ``notes``.
    calibration : dict
        Method and data used for the activation ranges.
    board : str or None
        The board :attr:`config` was compiled for (``compile --board``); None: no board named.
    input_layout : str
        How ``input_shape`` lays out the data (:data:`~fpganet.model.ir.INPUT_LAYOUTS`):
        ``"nchw"`` (an ONNX model's) or ``"nhwc"`` (a TFLite model's), converted to
        ``input_chw`` by :meth:`quantize_input`.
    input_lo, input_hi : int
        The input codes' clamp: -128..127, or the levels of a low-bit input (a QONNX
        model's 1- or 2-bit input quantizer).
    """

    layers: list
    input_name: str
    input_shape: tuple
    input_scale: float
    input_zp: int
    output_name: str
    output_shape: tuple
    output_scale: float
    output_zp: int
    config: AcceleratorConfig = field(default_factory=AcceleratorConfig)
    source: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)
    board: str = None
    input_layout: str = "nchw"
    input_lo: int = INT8_MIN
    input_hi: int = INT8_MAX

    @property
    def input_chw(self):
        if self.layers and self.is_chain:
            return tuple(self.layers[0].in_shape)
        return input_chw(self.input_shape, self.input_layout)

    def layer_inputs(self, index):
        """Indices of the layers layer ``index`` reads (``-1``: the network input)."""
        inputs = getattr(self.layers[index], "inputs", None)
        return (index - 1,) if inputs is None else tuple(int(i) for i in inputs)

    @property
    def is_chain(self):
        """Whether every layer reads only the layer before it (what the accelerator runs today)."""
        return all(self.layer_inputs(i) == (i - 1,) for i in range(len(self.layers)))

    @property
    def macs(self):
        """Multiply-accumulates per sample, all layers."""
        return sum(layer.macs for layer in self.layers)

    @property
    def conv_layers(self):
        return [layer for layer in self.layers if isinstance(layer, QConv)]

    def quantize_input(self, x):
        """float [N, *input_shape] in the model's layout -> int8 [N, *input_chw], checked; see
        :func:`quantize_input`. Every path that feeds the accelerator converts the layout here."""
        x = np.asarray(x)
        if x.ndim < 1 or tuple(x.shape[1:]) != tuple(self.input_shape):
            raise FpganetError(f"inputs have shape {list(x.shape)}; the network expects "
                               f"{input_text(self.input_shape, self.input_layout)}")
        if not np.all(np.isfinite(x)):
            raise FpganetError("inputs contain NaN or Inf")
        q = quantize_input(x, self.input_scale, self.input_zp, self.input_lo, self.input_hi)
        low, high = (self.input_scale * (bound - self.input_zp)
                     for bound in (self.input_lo, self.input_hi))
        outside = float(np.mean((x < low - self.input_scale) | (x > high + self.input_scale)))
        # A QONNX model's own input quantizer clips by design (a bipolar one is a threshold).
        calibrated = self.calibration.get("method") != "qonnx"
        if calibrated and outside > CLIPPED_INPUTS_WARNING:
            warnings.warn(f"{100 * outside:.1f} % of the input values lie outside the calibrated "
                          f"input range [{low:.4g}, {high:.4g}] and are clipped: were the inputs "
                          f"preprocessed like the calibration data?", FpganetWarning, stacklevel=2)
        levels = int(q.max()) - int(q.min()) + 1
        available = self.input_hi - self.input_lo + 1
        if calibrated and levels < min(FEW_INPUT_LEVELS, available) \
                and float(x.max()) > float(x.min()):
            warnings.warn(f"the inputs take only {levels} of the {available} levels of the calibrated "
                          f"input range [{low:.4g}, {high:.4g}]: were the calibration data "
                          f"preprocessed like these inputs?", FpganetWarning, stacklevel=2)
        return input_to_chw(q, self.input_shape, self.input_layout).reshape(len(q), *self.input_chw)

    def dequantize_output(self, q):
        """int8 [N, ...] -> float32 [N, *output_shape]: ``s_out * (q - zp_out)``."""
        q = np.asarray(q)
        values = np.float32(self.output_scale) * (q.astype(np.float32) - np.float32(self.output_zp))
        return values.reshape(q.shape[0], *self.output_shape)

    def validate(self):
        """Check every layer and the connection of shapes and zero points."""
        try:
            input_chw(self.input_shape, self.input_layout)
        except ValueError as error:
            raise FpganetError(f"the input: {error}") from None
        if int(np.prod(self.input_shape)) != int(np.prod(self.input_chw)):
            raise FpganetError(f"the input {list(self.input_shape)} ({self.input_layout}) does not "
                               f"hold the {list(self.input_chw)} the first layer reads")
        if not INT8_MIN <= self.input_lo <= self.input_hi <= INT8_MAX:
            raise FpganetError(f"the input's clamp {self.input_lo}..{self.input_hi} is not within "
                               f"-128..127")
        shape, zp = self.input_chw, self.input_zp
        for index, layer in enumerate(self.layers):
            sources = self.layer_inputs(index)
            expected = input_zero_points(layer)
            if len(sources) != len(expected) or any(not -1 <= s < index for s in sources):
                raise FpganetError(f"layer '{layer.name}' reads layers {list(sources)}; it takes "
                                   f"{len(expected)} input(s) from earlier layers (-1: the input)")
            for source, layer_zp in zip(sources, expected):
                if source == NETWORK_INPUT:
                    shape, zp, what = self.input_chw, self.input_zp, "the input"
                else:
                    earlier = self.layers[source]
                    shape, zp = tuple(earlier.out_shape), output_zero_point(earlier)
                    what = ("the previous layer" if source == index - 1
                            else f"layer '{earlier.name}'")
                if tuple(layer.in_shape) != tuple(shape):
                    raise FpganetError(f"layer '{layer.name}' expects input {list(layer.in_shape)}, "
                                       f"{what} gives {list(shape)}")
                if layer_zp != zp:
                    raise FpganetError(f"layer '{layer.name}' expects input zero point {layer_zp}, "
                                       f"{what} gives {zp}")
            layer.validate(self.config.acc_width, self.config.requant_mode)
            shape = tuple(layer.out_shape)
            zp = output_zero_point(layer)
        if int(np.prod(shape)) != int(np.prod(self.output_shape)) or zp != self.output_zp:
            raise FpganetError(f"the last layer gives {list(shape)} with zero point {zp}, the output "
                               f"is declared {list(self.output_shape)} with zero point {self.output_zp}")

    # Serialization -------------------------------------------------------------------------

    def manifest(self):
        """Everything about the network as JSON-able data (arrays as lists, for reading)."""
        layers = []
        for index, layer in enumerate(self.layers):
            entry = {"index": index, "type": layer.type, "name": layer.name,
                     "in_shape": list(layer.in_shape), "out_shape": list(layer.out_shape)}
            if layer.inputs is not None and tuple(layer.inputs) != (index - 1,):
                entry["inputs"] = [int(i) for i in layer.inputs]   # a chain's manifest has none
            if isinstance(layer, QConv):
                if layer.groups != 1:
                    entry["groups"] = int(layer.groups)
                entry.update(kind=layer.kind, kernel=list(layer.kernel), stride=list(layer.stride),
                             pads=list(layer.pads), zp_in=layer.zp_in, zp_out=layer.zp_out,
                             s_in=float(layer.s_in), s_out=float(layer.s_out), lo=layer.lo,
                             hi=layer.hi, relu=layer.relu, k=layer.k, macs=layer.macs,
                             max_abs_acc=int(layer.acc_bound.max(initial=0)),
                             s_w=[float(v) for v in layer.s_w], mult=layer.mult.tolist(),
                             shift=layer.shift.tolist(),
                             arrays={name: f"{index:02d}.{name}" for name in _ARRAY_FIELDS})
                if layer.single_rounding:
                    entry["single_rounding"] = True
                if layer.weight_bits != 8:    # an int8 layer's entry stays as it was
                    entry["weight_bits"] = int(layer.weight_bits)
            elif isinstance(layer, (QAdd, QAvgPool)):
                entry.update({name: _plain(getattr(layer, name)) for name in _SCALAR_FIELDS[layer.type]})
                # Only where set: the other layers' manifests stay as they were.
                for flag in ("sum_codes", "single_rounding"):
                    if getattr(layer, flag, False):
                        entry[flag] = True
            else:
                entry.update(zp=layer.zp, s=float(layer.s))
                if isinstance(layer, QMaxPool):
                    entry.update(kernel=list(layer.kernel), stride=list(layer.stride),
                                 pads=list(layer.pads))
            layers.append(entry)
        convs = self.conv_layers
        numerics = {
            "weights": "int8 symmetric per output channel, -127..127, zero point 0",
            "activations": "int8 asymmetric per tensor (scale, zero point), TFLite convention",
            "bias": "int32 = round(b / (s_in * s_w[m])) - zp_in * sum_k w[m, k]",
            "requantize": REQUANTIZE_TEXT[self.config.requant_mode],
            "input": ("q = clamp(round_half_to_even(x / input.scale) + input.zero_point, -128, 127)"
                      if (self.input_lo, self.input_hi) == (INT8_MIN, INT8_MAX) else
                      "q = clamp(round_half_to_even(x / input.scale) + input.zero_point, input.lo, "
                      "input.hi)"),
            "output": "logits = output.scale * (q - output.zero_point)",
            "document": "docs/reference/numerics.md",
        }
        # Only networks that have them say so: a chain's manifest stays as it was.
        types = {layer.type for layer in self.layers}
        rescale_text = RESCALE_TEXT[self.config.requant_mode]
        if "add" in types:
            numerics["add"] = ("y = clamp(zp_out + rescale(w_a * (q_a - zp_a) + w_b * (q_b - zp_b), "
                               f"mult, shift), lo, hi); {rescale_text}")
        if "avgpool" in types:
            numerics["avgpool"] = ("y = clamp(zp_out + rescale(sum over the window of (q - zp_in), "
                                   "mult, shift), lo, hi)")
            if any(getattr(layer, "sum_codes", False) for layer in self.layers):
                numerics["avgpool_sum_codes"] = ("y = clamp((s * mult + (1 << (30 - shift))) >> "
                                                 "(31 - shift), lo, hi), s the sum over the window "
                                                 "of q (TFLite's AVERAGE_POOL_2D, rounded once)")
        if any(getattr(layer, "groups", 1) != 1 for layer in self.layers):
            numerics["groups"] = "output channel m reads only the input channels of its group"
        if any(getattr(layer, "weight_bits", 8) != 8 for layer in self.layers):
            numerics["weight_bits"] = ("a layer's weights of weight_bits B lie in "
                                       "-(2**(B-1) - 1)..2**(B-1) - 1, int8 codes as any others")
        board = {} if self.board is None else {"board": self.board}
        return {
            "format": FORMAT,
            "fpganet_version": __version__,
            "source": self.source,
            "calibration": self.calibration,
            **board,
            "config": self.config.to_dict(),
            "numerics": numerics,
            # An NCHW input's manifest names no layout (as before layouts were recorded).
            "input": {"name": self.input_name, "shape": list(self.input_shape),
                      **({} if self.input_layout == "nchw" else {"layout": self.input_layout}),
                      "chw": list(self.input_chw), "scale": float(self.input_scale),
                      "zero_point": int(self.input_zp),
                      **({} if (self.input_lo, self.input_hi) == (INT8_MIN, INT8_MAX)
                         else {"lo": int(self.input_lo), "hi": int(self.input_hi)})},
            "output": {"name": self.output_name, "shape": list(self.output_shape),
                       "scale": float(self.output_scale), "zero_point": int(self.output_zp)},
            "layers": layers,
            "totals": {
                "macs": int(self.macs),
                "weight_bytes": int(sum(layer.weight.size for layer in convs)),
                "output_channels": int(sum(layer.out_shape[0] for layer in convs)),
                "max_feature_map_bytes": int(max([int(np.prod(self.input_chw))]
                                                 + [int(np.prod(l.out_shape)) for l in self.layers])),
            },
        }

    def arrays(self):
        """The integer tensors by ``network.npz`` key."""
        result = {}
        for index, layer in enumerate(self.layers):
            if isinstance(layer, QConv):
                for name in _ARRAY_FIELDS:
                    result[f"{index:02d}.{name}"] = getattr(layer, name)
        return result

    def save(self, directory, extra=None):
        """Write ``manifest.json`` and ``network.npz`` into an existing directory.

        ``extra``: more top-level manifest sections (the back end's ``accelerator``).
        """
        directory = os.fspath(directory)
        with open(os.path.join(directory, ARRAYS), "wb") as handle:
            np.savez(handle, **self.arrays())
        with open(os.path.join(directory, MANIFEST), "w") as handle:
            handle.write(manifest_json({**self.manifest(), **(extra or {})}))


def manifest_json(manifest):
    """JSON text of a manifest, indented, with lists of numbers kept on one line."""
    text = json.dumps(manifest, indent=1)
    return re.sub(r"\[\s*([-+0-9.eE,\s]*?)\s*\]",
                  lambda match: "[" + ", ".join(v.strip() for v in match.group(1).split(",")) + "]",
                  text) + "\n"


def load_network(directory):
    """Read a compiled directory written by :meth:`QNetwork.save`.

    Parameters
    ----------
    directory : str or os.PathLike

    Returns
    -------
    QNetwork
        Validated.

    Raises
    ------
    fpganet.errors.FpganetError
        The directory, a file or a key is missing or inconsistent, or a file differs from
        its SHA-256 in ``SHA256SUMS`` (:func:`fpganet.files.verify_directory`).
    """
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, MANIFEST)
    arrays_path = os.path.join(directory, ARRAYS)
    if not os.path.isdir(directory):
        state = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise FpganetError(f"compiled network directory '{directory}' {state}")
    for path in (manifest_path, arrays_path):
        if not os.path.isfile(path):
            raise FpganetError(f"'{directory}' is not a compiled network: '{os.path.basename(path)}' "
                               f"is missing (run fpganet compile)")
    verify_directory(directory, needed=(MANIFEST, ARRAYS))
    try:
        with open(manifest_path) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as error:
        raise FpganetError(f"cannot read '{manifest_path}': {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FpganetError(f"'{manifest_path}' is not a {FORMAT} manifest")
    try:
        with np.load(arrays_path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as error:
        raise FpganetError(f"cannot read '{arrays_path}': {type(error).__name__}: {error}") from None
    try:
        config = AcceleratorConfig.from_dict(manifest["config"])
        layers = [_layer_from_manifest(entry, arrays, arrays_path) for entry in manifest["layers"]]
        net = QNetwork(layers=layers, input_name=manifest["input"]["name"],
                       input_shape=tuple(manifest["input"]["shape"]),
                       input_scale=float(np.float32(manifest["input"]["scale"])),
                       input_zp=int(manifest["input"]["zero_point"]),
                       output_name=manifest["output"]["name"],
                       output_shape=tuple(manifest["output"]["shape"]),
                       output_scale=float(np.float32(manifest["output"]["scale"])),
                       output_zp=int(manifest["output"]["zero_point"]), config=config,
                       source=manifest.get("source", {}), calibration=manifest.get("calibration", {}),
                       board=manifest.get("board"),
                       input_layout=manifest["input"].get("layout", "nchw"),
                       input_lo=int(manifest["input"].get("lo", INT8_MIN)),
                       input_hi=int(manifest["input"].get("hi", INT8_MAX)))
    except KeyError as error:
        raise FpganetError(f"'{manifest_path}' lacks the key {error}") from None
    except (TypeError, ValueError, ConfigError) as error:
        raise FpganetError(f"'{manifest_path}' is inconsistent: {error}") from None
    net.validate()
    return net


def _layer_from_manifest(entry, arrays, arrays_path):
    kind = entry["type"]
    if kind not in _LAYER_TYPES:
        raise ValueError(f"unknown layer type {kind!r}")
    inputs = tuple(int(i) for i in entry["inputs"]) if "inputs" in entry else None
    if kind in _SCALAR_FIELDS:
        fields = {}
        for name in _SCALAR_FIELDS[kind]:
            value = entry[name]
            if name in ("kernel", "stride", "pads"):
                fields[name] = tuple(int(v) for v in value)
            elif name.startswith("s_"):
                fields[name] = float(value)
            elif name == "relu":
                fields[name] = bool(value)
            else:
                fields[name] = int(value)
        shapes = dict(in_shape=tuple(entry["in_shape"]))
        if kind == "avgpool":
            shapes["out_shape"] = tuple(entry["out_shape"])
            fields["sum_codes"] = bool(entry.get("sum_codes", False))
        else:
            fields["single_rounding"] = bool(entry.get("single_rounding", False))
        return _LAYER_TYPES[kind](name=entry["name"], inputs=inputs, **shapes, **fields)
    common = dict(name=entry["name"], in_shape=tuple(entry["in_shape"]),
                  out_shape=tuple(entry["out_shape"]), inputs=inputs)
    if kind == "reshape":
        return QReshape(zp=int(entry["zp"]), s=float(entry["s"]), **common)
    if kind == "maxpool":
        return QMaxPool(kernel=tuple(entry["kernel"]), stride=tuple(entry["stride"]),
                        pads=tuple(entry["pads"]), zp=int(entry["zp"]), s=float(entry["s"]), **common)
    values = {}
    for name, key in entry["arrays"].items():
        if key not in arrays:
            raise FpganetError(f"'{arrays_path}' lacks the array '{key}' of layer '{entry['name']}'")
        values[name] = np.asarray(arrays[key]).astype(_ARRAY_DTYPES[name], casting="same_kind")
    return QConv(kind=entry["kind"], kernel=tuple(entry["kernel"]), stride=tuple(entry["stride"]),
                 pads=tuple(entry["pads"]), zp_in=int(entry["zp_in"]), zp_out=int(entry["zp_out"]),
                 lo=int(entry["lo"]), hi=int(entry["hi"]), relu=bool(entry["relu"]),
                 s_in=float(entry["s_in"]), s_out=float(entry["s_out"]),
                 groups=int(entry.get("groups", 1)),
                 single_rounding=bool(entry.get("single_rounding", False)),
                 weight_bits=int(entry.get("weight_bits", 8)), **values, **common)
