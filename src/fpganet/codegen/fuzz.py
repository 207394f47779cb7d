"""Random integer networks, compiled and run on the ISA simulator against the golden model.

Each case is reproducible from ``(seed, index)``: :func:`random_case` builds a
random :class:`~fpganet.qnet.QNetwork` (kernels 1..5, strides 1..2, asymmetric
padding, odd channel counts, non-square maps, max-pools with and without
padding, reshapes that are free and reshapes that need a copy, dense layers of
odd sizes), a configuration (array shape, and sometimes an activation buffer
just large enough, so that maps share bytes and borders are re-filled per
image) and int8 inputs; :func:`check_case` compiles it
(:func:`fpganet.codegen.build_images`), runs it on :class:`fpganet.isasim.Machine`
and compares every output byte with :func:`fpganet.golden.run_golden`.

Command line (``make fuzz``): ``fpganet fuzz --cases 500 --seed 1 [--arrays 2x8,3x5,4x4,1x1]``
(:func:`fuzz_isa`).
"""

import dataclasses
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..config import AcceleratorConfig
from ..errors import FpganetError
from ..golden import run_golden
from ..quantize.fixed_point import average_multiplier
from ..qnet import (NETWORK_INPUT, QAdd, QAvgPool, QConv, QMaxPool, QNetwork, QReshape,
                    output_zero_point)
from .images import build_images
from .plan import smallest_act_bytes
from .run import run_isa

__all__ = ["random_network", "random_graph_network", "random_pooled_network", "random_case", "check_case", "FuzzCase", "ARRAYS", "main"]

ARRAYS = ("2x8", "3x5", "4x4", "1x1")
MAX_MAP = 1500      # bytes of the largest interior map the generator makes


def _out(size, kernel, stride, before, after):
    return (size + before + after - kernel) // stride + 1


def _conv(rng, name, in_shape, zp_in, kind="conv", m=None, kernel=None, stride=(1, 1),
          pads=(0, 0, 0, 0), groups=1, inputs=None):
    c, h, w = in_shape
    kh, kw = kernel or (1, 1)
    m = m or int(rng.integers(1, 10))
    out_shape = (m, _out(h, kh, stride[0], pads[0], pads[2]), _out(w, kw, stride[1], pads[1], pads[3]))
    k = c // groups * kh * kw
    spread = int(rng.choice([127, 127, 40, 3]))
    weight = rng.integers(-spread, spread + 1, (m, c // groups, kh, kw)).astype(np.int8)
    bias = rng.integers(-20000, 20000, m).astype(np.int32)
    mult = rng.integers(1 << 14, 1 << 15, m).astype(np.int32)
    # Typical |acc| ~ sqrt(k) * spread * 74: put the output around +-60 codes, give or take.
    typical = max(1.0, np.sqrt(k) * max(spread, 1) * 74.0)
    shift = _shift_for(rng, typical, m)
    zp_out = int(rng.integers(-128, 128))
    relu = bool(rng.random() < 0.5)
    return QConv(name=name, kind=kind, in_shape=tuple(in_shape), out_shape=out_shape,
                 kernel=(kh, kw), stride=tuple(stride), pads=tuple(pads), zp_in=int(zp_in),
                 zp_out=zp_out, lo=max(-128, zp_out) if relu else -128, hi=127, relu=relu,
                 weight=weight, bias=bias, mult=mult, shift=shift.astype(np.int32), s_in=0.05,
                 s_out=0.05, s_w=np.full(m, 0.01, np.float32), groups=groups, inputs=inputs,
                 weight_bits=_weight_bits(spread))


def _weight_bits(spread):
    """The width a layer of weights in ``-spread..spread`` declares: 8, or the fewest bits that
    hold them (a layer ``CONV packed`` stores at 4 bits or fewer)."""
    return 8 if spread > 7 else max(2, spread.bit_length() + 1)


def signed_weights(net, rng, share=1.0):
    """``net`` (in the ``fpganet`` requantization mode) with about ``share`` of its conv and
    dense layers' weights replaced by their signs (-1 or +1; a zero weight either), declared
    2-bit, their shifts drawn again for the smaller sums (so that a wrong weight shows in the
    output codes): ``CONV binary`` on a configuration with ``binary_weights``, where the
    layer's walk allows it."""
    layers = []
    for layer in net.layers:
        if isinstance(layer, QConv) and layer.groups == 1 and rng.random() < share:
            signs = np.where(layer.weight > 0, 1, np.where(layer.weight < 0, -1,
                                                         rng.choice([-1, 1], layer.weight.shape)))
            layer = _with_weights(layer, signs, rng)
        layers.append(layer)
    net.layers = layers
    net.validate()
    return net


def _with_weights(layer, weights, rng):
    """``layer`` with ``weights`` of -1..1, declared 2-bit, its shifts drawn again for the
    smaller sums (so that a wrong weight shows in the output codes)."""
    shift = _shift_for(rng, np.sqrt(layer.weight[0].size) * 74.0, len(layer.weight))
    return dataclasses.replace(layer, weight=weights.astype(np.int8), weight_bits=2, shift=shift)


def ternary_weights(net, rng, zeros=0.3):
    """``net`` (in the ``fpganet`` requantization mode) with every conv and dense layer's weights
    -1, 0 or +1, as a configuration with ``ternary_pairs`` needs: half the layers their signs
    (a zero weight either sign: ``CONV binary`` where the configuration stores them so), the
    others ternary with about ``zeros`` of them 0; every add's weights 1. Shifts drawn again
    for the smaller sums, as :func:`signed_weights` does."""
    layers = []
    for layer in net.layers:
        if isinstance(layer, QConv):
            signs = np.sign(layer.weight)
            if rng.random() < 0.5:
                signs = np.where(signs == 0, rng.choice([-1, 1], signs.shape), signs)
            else:
                signs = np.where(rng.random(signs.shape) < zeros, 0, signs)
            layer = _with_weights(layer, signs, rng)
        elif isinstance(layer, QAdd):
            layer = dataclasses.replace(layer, w_a=1, w_b=1,
                                        shift=_shift_for(rng, 74.0 * np.sqrt(2)))
        layers.append(layer)
    net.layers = layers
    net.validate()
    return net


def _shift_for(rng, typical, size=None):
    """A shift (``size`` of them: an int32 array) that brings ``|acc| ~ typical`` to about
    +-60 codes, give or take."""
    shift = np.clip(np.round(np.log2(max(typical, 1.0) * 2 ** 14.5 / 60)) + rng.integers(-2, 3, size),
                    1, 62)
    return int(shift) if size is None else shift.astype(np.int32)


def _add(rng, name, shape, zp_a, zp_b, inputs):
    zp_out = int(rng.integers(-128, 128))
    relu = bool(rng.random() < 0.6)
    w_a, w_b = (int(v) for v in rng.integers(1, 128, 2))
    return QAdd(name=name, in_shape=tuple(shape), zp_a=int(zp_a), zp_b=int(zp_b), w_a=w_a, w_b=w_b,
                mult=int(rng.integers(1 << 14, 1 << 15)),
                shift=_shift_for(rng, 74.0 * np.hypot(w_a, w_b)), zp_out=zp_out,
                lo=max(-128, zp_out) if relu else -128, hi=127, relu=relu, s_a=0.05, s_b=0.05,
                s_out=0.05, inputs=tuple(inputs))


def _avgpool(rng, name, shape, zp_in, inputs):
    c, h, w = shape
    kernel = (int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1)))
    if rng.random() < 0.4:
        kernel = (h, w)                                    # global average pooling
    stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    pads = tuple(int(rng.integers(0, k)) if rng.random() < 0.3 else 0
                 for k in (kernel[0], kernel[1], kernel[0], kernel[1]))
    out = (c, _out(h, kernel[0], stride[0], pads[0], pads[2]), _out(w, kernel[1], stride[1], pads[1], pads[3]))
    zp_out = int(rng.integers(-128, 128))
    relu = bool(rng.random() < 0.3)
    return QAvgPool(name=name, in_shape=tuple(shape), out_shape=out, kernel=kernel, stride=stride,
                    pads=pads, zp_in=int(zp_in), zp_out=zp_out, lo=max(-128, zp_out) if relu else -128,
                    hi=127, relu=relu, mult=int(rng.integers(1 << 14, 1 << 15)),
                    shift=_shift_for(rng, 74.0 * np.sqrt(kernel[0] * kernel[1])), s_in=0.05,
                    s_out=0.05, inputs=tuple(inputs))


def _spatial_conv(rng, name, shape, zp):
    c, h, w = shape
    for _ in range(50):
        kernel = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        stride = tuple(2 if rng.random() < 0.35 else 1 for _ in range(2))
        pads = tuple(int(rng.integers(0, k)) if rng.random() < 0.6 else 0
                     for k in (kernel[0], kernel[1], kernel[0], kernel[1]))
        m = int(rng.integers(1, 12))
        ho, wo = _out(h, kernel[0], stride[0], pads[0], pads[2]), _out(w, kernel[1], stride[1],
                                                                          pads[1], pads[3])
        if ho >= 1 and wo >= 1 and m * ho * wo <= MAX_MAP:
            return _conv(rng, name, shape, zp, m=m, kernel=kernel, stride=stride, pads=pads)
    return _conv(rng, name, shape, zp, m=int(rng.integers(1, 6)))


def _pool(rng, name, shape, zp):
    c, h, w = shape
    for _ in range(50):
        kernel = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pads = tuple(int(rng.integers(0, k)) if rng.random() < 0.4 else 0
                     for k in (kernel[0], kernel[1], kernel[0], kernel[1]))
        ho, wo = _out(h, kernel[0], stride[0], pads[0], pads[2]), _out(w, kernel[1], stride[1],
                                                                          pads[1], pads[3])
        if ho >= 1 and wo >= 1:
            return QMaxPool(name=name, in_shape=shape, out_shape=(c, ho, wo), kernel=kernel,
                            stride=stride, pads=pads, zp=zp, s=0.05)
    return None


def _in_requant_mode(rng, layers, config):
    """``layers`` (drawn with ``fpganet`` multipliers) with their multipliers in
    ``config``'s requantization mode. ``tflite``: each ``mult * 2**-shift`` becomes TFLite's
    31-bit ``M`` with 16 random bits below and the matching exponent, a left shift where the
    accumulator's bound leaves room for it (else 0), some convolutions round once, and some
    average pools take TFLite's form (the codes' sum divided by the window's size).
    ``fpganet`` draws nothing, so its networks stay as they were, each multiplier cut to
    ``config.requant_mult_bits`` significant bits."""
    if config.requant_mode != "tflite":
        step = config.mult_step
        return [dataclasses.replace(layer, mult=layer.mult // step * step)
                if step > 1 and isinstance(layer, (QConv, QAdd, QAvgPool)) else layer
                for layer in layers]
    converted = []
    for layer in layers:
        if isinstance(layer, (QConv, QAdd, QAvgPool)):
            mult = np.asarray(layer.mult, dtype=np.int64)
            low = rng.integers(0, 1 << 16, mult.shape)
            tflite_mult = (mult << 16 | low).astype(np.int32)
            bound = (layer.acc_bound if isinstance(layer, QConv) else
                     abs(layer.bias) + 128 * (layer.w_a + layer.w_b if isinstance(layer, QAdd)
                                              else layer.count))
            room = np.floor(np.log2((2**31 - 1) / np.maximum(bound, 1))).astype(np.int64)
            tflite_shift = np.minimum(15 - np.asarray(layer.shift, dtype=np.int64),
                                      np.minimum(room, 30)).astype(np.int32)
            if isinstance(layer, QConv):
                layer = dataclasses.replace(layer, mult=tflite_mult, shift=tflite_shift,
                                            single_rounding=bool(rng.random() < 0.5))
            elif isinstance(layer, QAvgPool) and rng.random() < 0.5:
                mult, shift = average_multiplier(layer.count)
                layer = dataclasses.replace(layer, mult=mult, shift=shift, sum_codes=True)
            elif isinstance(layer, QAdd):
                layer = dataclasses.replace(layer, mult=int(tflite_mult), shift=int(tflite_shift),
                                            single_rounding=bool(rng.random() < 0.5))
            else:
                layer = dataclasses.replace(layer, mult=int(tflite_mult), shift=int(tflite_shift))
        converted.append(layer)
    return converted


def _reshaped(rng, shape):
    """Another (C, H, W) with the same number of elements."""
    c, h, w = shape
    options = [(h, c, w), (c * h, w, 1), (1, c * h, w), (c, w, h), (w, h, c)]
    return tuple(int(v) for v in options[int(rng.integers(len(options)))])


def random_network(rng, config=None):
    """A random valid :class:`~fpganet.qnet.QNetwork` (validated) for ``config``."""
    config = config or AcceleratorConfig()
    c, h, w = int(rng.integers(1, 6)), int(rng.integers(3, 17)), int(rng.integers(3, 17))
    shape = input_shape = (c, h, w)
    zp = input_zp = int(rng.integers(-128, 128))
    layers = []
    if rng.random() < 0.1:
        new = _reshaped(rng, shape)
        layers.append(QReshape(name="reshape_in", in_shape=shape, out_shape=new, zp=zp, s=0.05))
        shape = new
    for index in range(int(rng.integers(1, 4))):
        if rng.random() < 0.65 or index == 0 and rng.random() < 0.5:
            layer = _spatial_conv(rng, f"conv{index}", shape, zp)
            zp = layer.zp_out
        else:
            layer = _pool(rng, f"pool{index}", shape, zp)
            if layer is None:
                continue
        layers.append(layer)
        shape = tuple(layer.out_shape)
        if rng.random() < 0.15:
            new = _reshaped(rng, shape)
            if new != shape:
                layers.append(QReshape(name=f"reshape{index}", in_shape=shape, out_shape=new,
                                       zp=zp, s=0.05))
                shape = new
    if rng.random() < 0.7:
        flat = (int(np.prod(shape)), 1, 1)
        if flat != shape:
            layers.append(QReshape(name="flatten", in_shape=shape, out_shape=flat, zp=zp, s=0.05))
            shape = flat
        for index in range(int(rng.integers(1, 4))):
            layer = _conv(rng, f"dense{index}", shape, zp, kind="dense", m=int(rng.integers(1, 22)))
            layers.append(layer)
            shape, zp = tuple(layer.out_shape), layer.zp_out
        output_shape = (shape[0],)
    else:
        output_shape = shape
        if rng.random() < 0.3:
            output_shape = (int(np.prod(shape)),)
    layers = _in_requant_mode(rng, layers, config)
    net = QNetwork(layers=layers, input_name="x", input_shape=input_shape, input_scale=0.05,
                   input_zp=input_zp, output_name="y", output_shape=output_shape, output_scale=0.05,
                   output_zp=zp, config=config)
    net.validate()
    return net


def random_pooled_network(rng, config=None):
    """A random :class:`~fpganet.qnet.QNetwork` (validated) whose first layers are a stride-1
    conv with an even output and the unpadded 2x2 max-pool of stride 2 after it, the pair a
    configuration with ``fused_max_pool`` runs as ``CONV pool`` instructions; then maybe another conv and
    pool, and maybe dense layers."""
    config = config or AcceleratorConfig()
    while True:
        c, h, w = (int(v) for v in (rng.integers(1, 5), rng.integers(3, 17), rng.integers(3, 17)))
        kernel = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        pads = tuple(int(rng.integers(0, k)) if rng.random() < 0.6 else 0
                     for k in (kernel[0], kernel[1], kernel[0], kernel[1]))
        ho, wo = _out(h, kernel[0], 1, pads[0], pads[2]), _out(w, kernel[1], 1, pads[1], pads[3])
        m = int(rng.integers(1, 10))
        if ho >= 2 and wo >= 2 and ho % 2 == 0 and wo % 2 == 0 and m * ho * wo <= MAX_MAP:
            break
    zp = input_zp = int(rng.integers(-128, 128))
    conv = _conv(rng, "conv0", (c, h, w), zp, m=m, kernel=kernel, pads=pads)
    shape = (m, ho // 2, wo // 2)
    layers = [conv, QMaxPool(name="pool0", in_shape=conv.out_shape, out_shape=shape, kernel=(2, 2),
                             stride=(2, 2), pads=(0, 0, 0, 0), zp=conv.zp_out, s=0.05)]
    zp = conv.zp_out
    if rng.random() < 0.5:
        layer = _spatial_conv(rng, "conv1", shape, zp)
        layers.append(layer)
        shape, zp = tuple(layer.out_shape), layer.zp_out
        if rng.random() < 0.5:
            layer = _pool(rng, "pool1", shape, zp)
            if layer is not None:
                layers.append(layer)
                shape = tuple(layer.out_shape)
    output_shape = shape
    if rng.random() < 0.5:
        flat = (int(np.prod(shape)), 1, 1)
        layers.append(QReshape(name="flatten", in_shape=shape, out_shape=flat, zp=zp, s=0.05))
        layer = _conv(rng, "dense0", flat, zp, kind="dense", m=int(rng.integers(1, 12)))
        layers.append(layer)
        output_shape, zp = (layer.out_shape[0],), layer.zp_out
    layers = _in_requant_mode(rng, layers, config)
    net = QNetwork(layers=layers, input_name="x", input_shape=(c, h, w), input_scale=0.05,
                   input_zp=input_zp, output_name="y", output_shape=output_shape, output_scale=0.05,
                   output_zp=zp, config=config)
    net.validate()
    return net


def random_graph_network(rng, config=None):
    """A random valid DAG :class:`~fpganet.qnet.QNetwork`: residual blocks (a conv branch added
    to the block's input or to a 1x1 projection of it, stride 1 or 2), depthwise and grouped
    convs, average pools (global ones too), max pools, and a dense head, in any order."""
    config = config or AcceleratorConfig()
    c, h, w = int(rng.integers(1, 10)), int(rng.integers(3, 13)), int(rng.integers(3, 13))
    input_shape = (c, h, w)
    layers = []
    # The value each new layer reads: (layer index or NETWORK_INPUT, shape, zero point).
    current = (NETWORK_INPUT, input_shape, int(rng.integers(-128, 128)))
    input_zp = current[2]

    def add_layer(layer):
        nonlocal current
        layers.append(layer)
        current = (len(layers) - 1, tuple(layer.out_shape), int(output_zero_point(layer)))
        return current

    for index in range(int(rng.integers(1, 5))):
        source, shape, zp = current
        c, h, w = shape
        kind = rng.choice(["residual", "residual", "depthwise", "grouped", "avgpool", "maxpool"])
        if kind == "residual":
            m = int(rng.integers(1, 12))
            stride = 2 if rng.random() < 0.3 and min(h, w) > 2 else 1
            kernel = int(rng.choice([1, 3]))
            pad = kernel // 2
            branch = add_layer(_conv(rng, f"b{index}_conv", shape, zp, m=m, kernel=(kernel, kernel),
                                     stride=(stride, stride), pads=(pad,) * 4, inputs=(source,)))
            if rng.random() < 0.5:
                branch = add_layer(_conv(rng, f"b{index}_conv2", branch[1], branch[2], m=m,
                                         kernel=(3, 3), pads=(1, 1, 1, 1), inputs=(branch[0],)))
            shortcut = (source, shape, zp)
            if m != c or stride != 1 or rng.random() < 0.2:
                shortcut = add_layer(_conv(rng, f"b{index}_proj", shape, zp, m=m,
                                           stride=(stride, stride), inputs=(source,)))
            pair = [branch, shortcut] if rng.random() < 0.5 else [shortcut, branch]
            add_layer(_add(rng, f"b{index}_add", branch[1], pair[0][2], pair[1][2],
                           [pair[0][0], pair[1][0]]))
        elif kind in ("depthwise", "grouped"):
            groups = c if kind == "depthwise" else int(rng.choice([g for g in range(1, c + 1) if c % g == 0]))
            m = groups * int(rng.integers(1, 3 if kind == "depthwise" else 4))
            kernel = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
            stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
            pads = tuple(int(rng.integers(0, k)) for k in (*kernel, *kernel))
            if _out(h, kernel[0], stride[0], pads[0], pads[2]) < 1 or \
                    _out(w, kernel[1], stride[1], pads[1], pads[3]) < 1:
                continue
            add_layer(_conv(rng, f"{kind}{index}", shape, zp, m=m, kernel=kernel, stride=stride,
                            pads=pads, groups=groups, inputs=(source,)))
        elif kind == "avgpool":
            add_layer(_avgpool(rng, f"avgpool{index}", shape, zp, (source,)))
        else:
            pool = _pool(rng, f"pool{index}", shape, zp)
            if pool is not None:
                pool.inputs = (source,)
                add_layer(pool)
    if not layers:
        add_layer(_conv(rng, "conv", current[1], current[2], inputs=(current[0],)))
    source, shape, zp = current
    if rng.random() < 0.5:
        flat = (int(np.prod(shape)), 1, 1)
        source, shape, zp = add_layer(QReshape(name="flatten", in_shape=shape, out_shape=flat, zp=zp,
                                               s=0.05, inputs=(source,)))
        add_layer(_conv(rng, "dense", shape, zp, kind="dense", m=int(rng.integers(1, 12)),
                        inputs=(source,)))
    source, shape, zp = current
    layers = _in_requant_mode(rng, layers, config)
    net = QNetwork(layers=layers, input_name="x", input_shape=input_shape, input_scale=0.05,
                   input_zp=input_zp, output_name="y", output_shape=shape, output_scale=0.05,
                   output_zp=zp, config=config)
    net.validate()
    return net


@dataclass
class FuzzCase:
    """One reproducible case: ``seed`` and ``index`` regenerate it (:func:`random_case`)."""

    seed: int
    index: int
    net: QNetwork
    config: AcceleratorConfig
    q_in: np.ndarray
    tight: bool

    def describe(self):
        layers = ", ".join(
            f"{l.type}{'(dense)' if getattr(l, 'kind', '') == 'dense' else ''} "
            f"{'x'.join(map(str, l.in_shape))}->{'x'.join(map(str, l.out_shape))}"
            + (f" k{l.kernel} s{l.stride} p{l.pads}" if hasattr(l, "kernel") and l.type != "reshape"
               else "") for l in self.net.layers)
        return (f"case seed={self.seed} index={self.index} array {self.config.name} "
                f"act_buffer {self.config.act_buffer_bytes}{' (tight)' if self.tight else ''}, "
                f"{len(self.q_in)} images: {layers}")


def random_case(seed, index, arrays=ARRAYS, graph=False, binary=True):
    """Case ``index`` of the stream ``seed``: network, configuration, inputs; ``graph``: a DAG
    (:func:`random_graph_network`) instead of a chain (:func:`random_network`). Every third
    round of the arrays (``index // len(arrays) % 3 == 2``) is in the ``tflite`` requantization
    mode, and every third from the second (``== 1``) has ``packed_weights`` (its layers of
    weights in ``-3..3``, a quarter of them, are ``CONV packed``) and ``binary_weights`` (a
    quarter of its conv and dense layers get weights of -1 and +1: ``CONV binary``, from a
    generator of their own, so that the other draws of the case are as before; not with
    ``binary`` false)."""
    rng = np.random.default_rng([seed, index])
    array = arrays[index % len(arrays)]
    config = AcceleratorConfig.parse_array(array, requant_lanes=1)
    if index // len(arrays) % 3 == 2:
        config = config.replace(requant_mode="tflite")
    elif index // len(arrays) % 3 == 1:
        config = config.replace(packed_weights=True, binary_weights=binary)
    if rng.random() < 0.3 and config.cols > 1:
        lanes = [d for d in range(1, config.cols + 1) if config.cols % d == 0]
        config = config.replace(requant_lanes=int(rng.choice(lanes)))
    net = (random_graph_network if graph else random_network)(rng, config)
    if config.binary_weights:
        net = signed_weights(net, np.random.default_rng([seed, index, 1]), share=0.25)
    tight = bool(rng.random() < 0.35)
    need = smallest_act_bytes(net, config)
    if tight:
        # The smallest activation buffer the planner can live with: maps share bytes.
        config = config.replace(act_buffer_bytes=max(need, config.act_banks))
    elif need > config.act_buffer_bytes:
        config = config.replace(act_buffer_bytes=need)
    net.config = config
    n = int(rng.integers(1, 4))
    q_in = rng.integers(-128, 128, (n, *net.input_chw)).astype(np.int8)
    return FuzzCase(seed, index, net, config, q_in, tight)


def check_case(case):
    """Compile and run ``case`` on the ISA simulator; AssertionError (with the case) on mismatch."""
    images = build_images(case.net, len(case.q_in), case.config)
    q, stamps = run_isa(case.net, case.q_in, images=images)
    expected = run_golden(case.net, case.q_in)
    if q.shape != expected.shape or not np.array_equal(q, expected):
        wrong = int(np.sum(q != expected)) if q.shape == expected.shape else "all"
        raise AssertionError(f"{case.describe()}: {wrong} output bytes differ from the golden model")
    return images


def fuzz_isa(cases, seed=0, first=0, arrays=ARRAYS, out=None):
    """Check ``cases`` random networks on the ISA simulator; returns the failures (each printed)."""
    out = out or sys.stdout
    start, failures = time.time(), 0
    for index in range(first, first + cases):
        try:
            check_case(random_case(seed, index, tuple(arrays), graph=index % 2 == 1))
        except (AssertionError, FpganetError) as error:
            failures += 1
            print(f"FAIL isa seed={seed} index={index}: {error}", file=out, flush=True)
    print(f"isa: {cases - failures} of {cases} random networks (every other one a graph) bit-exact on the ISA simulator "
          f"(seed {seed}, {time.time() - start:.1f} s)", file=out, flush=True)
    return failures
