"""Random QONNX networks of mixed precision, for the fuzz and the tests.

Each network is what Brevitas exports: an input quantizer after a scalar preprocessing,
then Conv or MatMul layers whose weights pass a ``Quant`` (1 to 8 bits, per tensor or per
output channel) or a ``BipolarQuant``, sometimes with a bias through a 16- or 32-bit ``Quant``, each followed by a
BatchNormalization (a negative
scale now and then), sometimes a ReLU, and an activation quantizer of its own width
(``BipolarQuant`` included), a max pool here and there, and a last MatMul whose logits no
quantizer follows. Scales are powers of two, so that qonnx's executor computes every dot
product exactly in float32 and the integer network must give the very levels it does
(:func:`check_qonnx_case`).
"""

import numpy as np

__all__ = ["random_qonnx_model", "QONNX_DOMAIN", "check_qonnx_case"]

QONNX_DOMAIN = "qonnx.custom_op.general"
OPSET = 13
#: Networks drawn for a configuration before giving up (a configuration none can fit).
MAX_DRAWS = 50


class _Builder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.initializers = [], []
        self.count = 0

    def name(self, stem):
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, value, stem="c"):
        from onnx import numpy_helper

        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, domain="", **attrs):
        from onnx import helper

        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], domain=domain, **attrs))
        return out

    def quant(self, x, bits, signed, narrow, scale, rounding="ROUND"):
        """A Quant node (or a BipolarQuant for a signed 1-bit one, as Brevitas writes it)."""
        if bits == 1 and signed:
            return self.node("BipolarQuant", [x, self.const(np.float32(scale))], QONNX_DOMAIN)
        return self.node("Quant", [x, self.const(np.float32(scale)), self.const(np.float32(0)),
                                   self.const(np.float32(bits))], QONNX_DOMAIN,
                         signed=int(signed), narrow=int(narrow), rounding_mode=rounding)


def _activation_kind(rng, relu_allowed=True):
    """``(bits, signed, narrow, relu)`` of an activation quantizer."""
    bits = int(rng.choice([1, 1, 2, 2, 3, 4, 8]))
    signed = bool(rng.random() < 0.5) or bits == 1 and rng.random() < 0.7
    relu = relu_allowed and not signed and rng.random() < 0.6
    return bits, signed, bool(rng.random() < 0.5) and bits > 1, relu


def _weights(b, rng, shape):
    """A quantized weight: a float initializer through a Quant of 1..8 bits (per tensor or per
    output channel, powers of two)."""
    bits = int(rng.choice([1, 2, 3, 4, 8]))
    m = shape[0]
    per_channel = rng.random() < 0.5
    scale = np.float32(2.0) ** rng.integers(-6, -1, (m,) + (1,) * (len(shape) - 1) if per_channel
                                            else ())
    w = (rng.normal(0, 1, shape) * scale * (1 << (bits - 1))).astype(np.float32)
    name = b.const(w, "w")
    if bits == 1:
        return b.node("BipolarQuant", [name, b.const(scale.astype(np.float32))], QONNX_DOMAIN)
    return b.node("Quant", [name, b.const(scale.astype(np.float32)), b.const(np.float32(0)),
                            b.const(np.float32(bits))], QONNX_DOMAIN, signed=1, narrow=1,
                  rounding_mode="ROUND")


def _bias(b, rng, m):
    """A bias now and then, through a 16- or 32-bit Quant as Brevitas quantizes it: ``[name]``
    or ``[]``."""
    if rng.random() < 0.6:
        return []
    scale = np.float32(2.0 ** rng.integers(-8, -2))
    value = b.const((rng.normal(0, 4, m) * scale).astype(np.float32), "bias")
    return [b.node("Quant", [value, b.const(scale), b.const(np.float32(0)),
                             b.const(np.float32(int(rng.choice([16, 32]))))], QONNX_DOMAIN,
                   signed=1, narrow=0, rounding_mode="ROUND")]


def _batchnorm(b, rng, x, m, acc_scale):
    """A BatchNormalization whose output spans a few quantizer steps."""
    gamma = rng.normal(1.0, 0.5, m).astype(np.float32)
    gamma[rng.random(m) < 0.15] *= -1
    mean = rng.normal(0, 4 * acc_scale, m).astype(np.float32)
    var = (rng.uniform(1, 9, m) * acc_scale ** 2).astype(np.float32)
    beta = rng.normal(0, 0.5, m).astype(np.float32)
    return b.node("BatchNormalization", [x, b.const(gamma), b.const(beta), b.const(mean),
                                         b.const(var)], epsilon=1e-5)


def random_qonnx_model(rng):
    """A random QONNX model and its per-sample input shape (NCHW, or ``(K,)`` for an MLP)."""
    from onnx import TensorProto, helper

    b = _Builder(rng)
    conv = rng.random() < 0.5
    shape = ((int(rng.integers(1, 4)), int(rng.integers(4, 9)), int(rng.integers(4, 9))) if conv
             else (int(rng.integers(4, 48)),))
    x = "x"
    # Preprocessing a x + b before the input quantizer: a a power of two, b whole steps.
    bits, signed, narrow, _ = _activation_kind(rng, relu_allowed=False)
    scale = float(2.0 ** rng.integers(-4, 0))
    if rng.random() < 0.5 and bits < 8:
        x = b.node("Mul", [x, b.const(np.float32(2.0 ** rng.integers(-1, 3)))])
        x = b.node("Sub", [x, b.const(np.float32(scale * rng.integers(-2, 3)))])
    x = b.quant(x, bits, signed, narrow, scale)
    levels = bits
    bipolar = bits == 1 and signed
    channels = shape[0]
    spatial = shape[1:]
    for _ in range(int(rng.integers(1, 4))):
        if conv and min(spatial) >= 2:
            m = int(rng.integers(2, 9))
            k = int(rng.integers(1, min(3, min(spatial)) + 1))
            pad = int(not bipolar and k == 3 and rng.random() < 0.5)
            stride = int(rng.integers(1, 3)) if min(spatial) > 4 else 1
            w = _weights(b, rng, (m, channels, k, k))
            x = b.node("Conv", [x, w] + _bias(b, rng, m), kernel_shape=[k, k], pads=[pad] * 4,
                       strides=[stride] * 2)
            spatial = tuple((s + 2 * pad - k) // stride + 1 for s in spatial)
            fan_in = channels * k * k
        else:
            if conv:
                x = b.node("Flatten", [x], axis=1)
                channels, spatial, conv = channels * int(np.prod(spatial)), (), False
            m = int(rng.integers(2, 33))
            w = _weights(b, rng, (m, channels))
            x = b.node("MatMul", [x, b.node("Transpose", [w], perm=[1, 0])])
            for bias in _bias(b, rng, m):
                x = b.node("Add", [x, bias])
            fan_in = channels
        x = _batchnorm(b, rng, x, m, np.sqrt(fan_in) * (1 << max(levels - 1, 0)))
        bits, signed, narrow, relu = _activation_kind(rng)
        if relu:
            x = b.node("Relu", [x])
        x = b.quant(x, bits, signed, narrow, 1.0)
        levels, bipolar, channels = bits, bits == 1 and signed, m
        if conv and min(spatial) >= 4 and rng.random() < 0.4:
            x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            spatial = tuple(s // 2 for s in spatial)
    if conv:
        x = b.node("Flatten", [x], axis=1)
        channels = channels * int(np.prod(spatial))
    classes = int(rng.integers(2, 11))
    w = _weights(b, rng, (classes, channels))
    x = b.node("MatMul", [x, b.node("Transpose", [w], perm=[1, 0])])
    if rng.random() < 0.5:
        x = b.node("Mul", [x, b.const(np.float32(rng.uniform(0.05, 2.0)))])
        x = b.node("Add", [x, b.const(np.float32(rng.normal()))])
    b.nodes[-1].output[0] = "y"
    graph = helper.make_graph(b.nodes, "random_qonnx",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])],
                              b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid(QONNX_DOMAIN, 1)])
    model.ir_version = 8
    return model, shape


def check_qonnx_case(model, x, config=None):
    """Compile ``model`` (a QONNX ``onnx.ModelProto``) and compare the golden model's levels,
    layer by layer, and its logits with qonnx's executor on inputs ``x``
    (:func:`~fpganet.model.qonnx_reference.compare_with_qonnx`); AssertionError on a
    difference beyond the contract. Returns the network."""
    import os
    import tempfile

    import onnx

    from ..config import AcceleratorConfig
    from ..model.onnx_import import import_model
    from ..model.qonnx_reference import compare_with_qonnx
    from ..quantize.quantizer import quantize_graph

    graph = import_model(model)
    net = quantize_graph(graph, None, config=config or AcceleratorConfig())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        comparison = compare_with_qonnx(net, graph, path, x)
    failures = comparison.failures()
    if failures:
        raise AssertionError("; ".join(failures))
    return net


def random_qonnx_network(rng, config):
    """A random QONNX network compiled for ``config`` and checked against qonnx's executor
    (:func:`check_qonnx_case`, 16 inputs), with int8 inputs for a run: ``(net, q_in)``.
    Networks the compiler refuses (a buffer too small) are drawn again."""
    from ..errors import FpganetError
    from .images import build_images

    for _ in range(MAX_DRAWS):
        model, shape = random_qonnx_model(rng)
        x = rng.uniform(-2, 2, (16, *shape)).astype(np.float32)
        try:
            net = check_qonnx_case(model, x, config)
            build_images(net, 1, config)
        except FpganetError as error:
            refusal = error
            continue
        return net, net.quantize_input(x[:int(rng.integers(1, 4))])
    raise FpganetError(f"no random QONNX network of {MAX_DRAWS} fits the {config.name} "
                       f"configuration (the last: {refusal})")


def fuzz_qonnx_isa(cases, seed=0, arrays=("2x8", "3x5", "4x4", "1x1"), out=None):
    """``cases`` random QONNX networks: each against qonnx's executor, then on the ISA simulator
    against the golden model; returns the failures (each printed)."""
    import sys
    import time
    import warnings

    from ..config import AcceleratorConfig
    from ..errors import FpganetWarning
    from ..golden import run_golden
    from .images import build_images
    from .run import run_isa

    out = out or sys.stdout
    start, failures, inexact = time.time(), 0, 0
    for index in range(cases):
        rng = np.random.default_rng([seed, index, 0x9077])
        # Every other network for a requantizer of 1-bit multipliers (shifts: the iCEBreaker's).
        config = AcceleratorConfig.parse_array(arrays[index % len(arrays)], requant_lanes=1,
                                               requant_mult_bits=1 if index % 2 else 15)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FpganetWarning)   # counted below
                net, q_in = random_qonnx_network(rng, config)
            inexact += net.calibration["inexact_channels"] > 0
            images = build_images(net, len(q_in), config)
            q, _ = run_isa(net, q_in, images=images)
            if not np.array_equal(q, run_golden(net, q_in)):
                raise AssertionError(f"{int(np.sum(q != run_golden(net, q_in)))} output bytes "
                                     f"differ from the golden model")
        except AssertionError as error:
            failures += 1
            print(f"FAIL qonnx seed={seed} index={index}: {error}", file=out, flush=True)
    print(f"qonnx: {cases - failures} of {cases} random QONNX networks (1-8 bits per layer; every "
          f"other one for 1-bit multipliers) equal to qonnx's executor and bit-exact on the ISA "
          f"simulator; {inexact} of them with channels the multipliers cannot fit exactly, "
          f"within the levels compile reports up to that layer (seed {seed}, "
          f"{time.time() - start:.1f} s)", file=out, flush=True)
    return failures
