"""Random binary and low-bit networks for the engine in logic cells, lowered and folded
(:mod:`fpganet.codegen.binary`), and what the engine must output for them: the data of the
engine's RTL fuzz (:mod:`fpganet.sim.fuzz_engine`) and of its tests.

A case is regenerated from its seed and index alone (the cases of a seed changed when CNNs
joined them, at 5ba5f41). Its layers are lowered from random integer dense layers and CNNs (:class:`~fpganet.qnet.QConv`) by the same functions as a compiled
network's, whose equality with the golden model is tested on their own; the engine's
expected totals are those layers' arithmetic.
"""

from dataclasses import dataclass

import numpy as np

from ..qnet import QConv, QMaxPool, QNetwork, QReshape
from .binary import fold_network, lower_binary, lower_binary_network, run_lowered
from .lowbit import lower_lowbit, lower_lowbit_network

__all__ = ["random_binary_dense", "random_lowbit_dense", "random_binary_network",
           "random_lowbit_network", "random_map_network", "random_cnn_plan", "EngineCase",
           "engine_case", "expected_totals", "FOLDS"]

#: ``(unit, pe, simd)`` a case may take: the folds the benchmarks build on the boards
#: (benchmarks/binary_tfc.py), small and degenerate ones, and one wide enough for the binary
#: unit's registered partial popcounts (``BinaryNetworkEngine.partial_macs``).
FOLDS = (("binary", 4, 16), ("binary", 8, 16), ("binary", 8, 32), ("binary", 16, 64),
         ("binary", 1, 8), ("binary", 2, 24), ("lowbit", 2, 8), ("lowbit", 8, 32),
         ("lowbit", 16, 64), ("lowbit", 1, 8), ("lowbit", 4, 12), ("lowbit", 3, 6),
         ("binary", 32, 64))


def _dense(rng, weight, zp_in, lo, hi, bias_range, shifts, mult_sign=1, in_shape=None,
           name="fc"):
    """A dense layer of ``weight`` [M, K, 1, 1], or with ``in_shape`` a convolution of
    ``weight`` [M, C, kh, kw] (stride 1, no padding)."""
    m, k = weight.shape[:2]
    bias = rng.integers(-bias_range, bias_range + 1, m) - zp_in * weight.reshape(m, -1).sum(axis=1)
    in_shape = in_shape or (k, 1, 1)
    kernel = weight.shape[2:]
    out_shape = (m, in_shape[1] - kernel[0] + 1, in_shape[2] - kernel[1] + 1)
    return QConv(name=name, kind="dense" if in_shape[1:] == (1, 1) else "conv",
                 in_shape=tuple(in_shape), out_shape=out_shape, kernel=tuple(kernel),
                 stride=(1, 1), pads=(0, 0, 0, 0), groups=1, weight=weight,
                 bias=bias.astype(np.int32), mult=mult_sign * rng.integers(1 << 14, 1 << 15, m),
                 shift=rng.integers(*shifts, m), zp_in=zp_in, zp_out=int(rng.integers(-3, 3)),
                 lo=lo, hi=hi, relu=False, s_in=1.0, s_w=np.ones(m), s_out=1.0)


def random_binary_dense(rng, k, m, *, zp_in, lo, hi):
    """A dense layer with weights +-1, a random bias and requantization, outputs lo..hi."""
    weight = rng.choice([-1, 1], (m, k, 1, 1)).astype(np.int8)
    return _dense(rng, weight, zp_in, lo, hi, k, (14, 20))


def random_lowbit_dense(rng, k, m, *, weight_bits, zp_in, lo, hi, mult_sign=1):
    """A dense layer with ``weight_bits``-bit weight codes, a random bias and requantization
    (its multipliers of sign ``mult_sign``), outputs ``lo..hi``."""
    top = (1 << (weight_bits - 1)) - 1
    weight = rng.integers(-top - 1, top + 1, (m, k, 1, 1)).astype(np.int8)
    return _dense(rng, weight, zp_in, lo, hi, 4 * k, (12, 18), mult_sign)


def random_binary_network(rng, widths):
    """Binary layers of widths ``widths[0] -> ... -> widths[-1]``, one-bit outputs but the
    last (int8), each lowered against the one before."""
    layers, in_lo = [], 0
    for index, (k, m) in enumerate(zip(widths, widths[1:])):
        last = index == len(widths) - 2
        lo, hi = (-128, 127) if last else (0, 1)
        layer = random_binary_dense(rng, k, m, zp_in=int(rng.integers(-2, 2)), lo=lo, hi=hi)
        layers.append(lower_binary(layer, in_lo))
        in_lo = lo
    return layers


def random_lowbit_network(rng, widths, input_bits):
    """Low-bit layers of widths ``widths[0] -> ... -> widths[-1]`` with weights of 2 to 4 bits
    and outputs of 1 to 4 bits (1 to 15 levels) but the last (int8), each lowered against the
    one before; the first layer's inputs ``input_bits`` wide."""
    layers, in_lo = [], int(rng.integers(-3, 1))
    in_hi = in_lo + (1 << input_bits) - 1
    for index, (k, m) in enumerate(zip(widths, widths[1:])):
        last = index == len(widths) - 2
        lo = -128 if last else int(rng.integers(-2, 1))
        hi = 127 if last else lo + int(rng.integers(1, 16))
        layer = random_lowbit_dense(rng, k, m, weight_bits=int(rng.integers(2, 5)),
                                    zp_in=int(rng.integers(-2, 2)), lo=lo, hi=hi)
        layers.append(lower_lowbit(layer, in_lo, in_hi))
        in_lo, in_hi = lo, hi
    return layers


def random_map_network(rng, unit, in_shape, plan, input_bits=1):
    """A chain of random integer layers on maps, as a :class:`~fpganet.qnet.QNetwork`, with
    weights and activations an engine's ``unit`` takes (+-1 and one bit; or 2-4-bit weights,
    outputs of 1 to 4 bits, inputs ``input_bits`` wide), and the last layer int8 out.

    ``plan`` lists the layers: ``("conv", m, k)`` a ``k x k`` (or, ``k`` a pair, ``kh x kw``)
    convolution to ``m`` channels, ``("pool", p)`` a max pool, ``("flatten",)``,
    ``("dense", m)``."""
    binary = unit == "binary"
    in_lo = 0 if binary else int(rng.integers(-3, 1))
    lo, hi, shape, layers = in_lo, in_lo + (1 << input_bits) - 1, tuple(in_shape), []
    outputs = sum(step[0] in ("conv", "dense") for step in plan)
    for step in plan:
        if step[0] == "pool":
            p = step[1]
            out = (shape[0], shape[1] // p, shape[2] // p)
            layers.append(QMaxPool(name=f"pool{len(layers)}", in_shape=shape, out_shape=out,
                                   kernel=(p, p), stride=(p, p), pads=(0, 0, 0, 0), zp=lo, s=1.0))
            shape = out
            continue
        if step[0] == "flatten":
            out = (int(np.prod(shape)), 1, 1)
            layers.append(QReshape(name=f"flatten{len(layers)}", in_shape=shape, out_shape=out,
                                   zp=lo, s=1.0))
            shape = out
            continue
        outputs -= 1
        m = step[1]
        kernel = tuple(np.broadcast_to(step[2], 2)) if step[0] == "conv" else (1, 1)
        if binary:
            weight = rng.choice([-1, 1], (m, shape[0], *kernel)).astype(np.int8)
        else:
            top = (1 << (int(rng.integers(2, 5)) - 1)) - 1
            weight = rng.integers(-top - 1, top + 1, (m, shape[0], *kernel)).astype(np.int8)
        k = int(np.prod(weight.shape[1:]))
        out_lo = -128 if outputs == 0 else (0 if binary else int(rng.integers(-2, 1)))
        out_hi = 127 if outputs == 0 else out_lo + (1 if binary else int(rng.integers(1, 16)))
        layer = _dense(rng, weight, int(rng.integers(-2, 2)), out_lo, out_hi,
                       k if binary else 4 * k, (14, 20) if binary else (12, 18),
                       in_shape=shape, name=f"{step[0]}{len(layers)}")
        layers.append(layer)
        lo, hi, shape = out_lo, out_hi, layer.out_shape
    return QNetwork(layers, "x", tuple(in_shape), 1.0, 0, "y", (shape[0],), 1.0, 0,
                    input_lo=in_lo, input_hi=in_lo + (1 << input_bits) - 1)


def random_cnn_plan(rng, simd):
    """A small CNN's plan for :func:`random_map_network`, and its input map (not always
    square): one or two convolutions (kernels not always square), each pooled or not, then
    a flatten and one or two dense layers, or a last convolution whose kernel is the whole
    map."""
    channels = int(rng.integers(1, 2 * simd + 3))
    h, w = (int(size) for size in rng.integers(4, 9, 2))
    plan, shape = [], (channels, h, w)
    for _ in range(int(rng.integers(1, 3))):
        kh, kw = int(rng.integers(1, min(3, h) + 1)), int(rng.integers(1, min(3, w) + 1))
        plan.append(("conv", int(rng.integers(1, 2 * simd + 3)), (kh, kw)))
        h, w = h - kh + 1, w - kw + 1
        if min(h, w) >= 2 and rng.random() < 0.5:
            p = int(rng.integers(2, min(3, h, w) + 1))
            plan.append(("pool", p))
            h, w = h // p, w // p
    if rng.random() < 0.25:
        plan.append(("conv", int(rng.integers(1, 20)), (h, w)))
        return plan, shape
    plan.append(("flatten",))
    if rng.random() < 0.5:
        plan.append(("dense", int(rng.integers(1, 2 * simd + 3))))
    plan.append(("dense", int(rng.integers(1, 20))))
    return plan, shape


@dataclass
class EngineCase:
    """One random network folded for the engine, its input vectors and their expected
    last-layer totals."""

    seed: int
    index: int
    layers: list
    folded: object
    inputs: np.ndarray
    totals: np.ndarray

    def describe(self):
        first = self.folded.layers[0]
        widths = [f"{first.k // (first.kernel_h * first.kernel_w)}x{first.in_h}x{first.in_w}"
                  if first.in_h * first.in_w > 1 else str(first.k)]
        widths += [f"{layer.m}({layer.kernel_h}x{layer.kernel_w}"
                   f"{f' pool {layer.pool}' if layer.pool > 1 else ''})"
                   if layer.in_h * layer.in_w > 1 else str(layer.m)
                   for layer in self.folded.layers]
        return (f"seed {self.seed} case {self.index}: {self.folded.description}, layers "
                f"{' -> '.join(widths)}")


def engine_case(seed, index, vectors=3):
    """Case ``index`` of ``seed``: a fold of :data:`FOLDS`; every other case a random chain of
    two to four dense layers whose widths pad the fold differently, the others a small CNN
    (:func:`random_map_network`: convolutions, a pool, dense layers); ``vectors`` random
    inputs."""
    rng = np.random.default_rng([seed, index, 0xE9])
    unit, pe, simd = FOLDS[int(rng.integers(len(FOLDS)))]
    # The device takes whole bytes a word: simd * input_bits a multiple of 8.
    input_bits = 1 if unit == "binary" else int(rng.choice(
        [bits for bits in range(1, 5) if simd * bits % 8 == 0]))
    if index % 2:
        plan, shape = random_cnn_plan(rng, simd)
        net = random_map_network(rng, unit, shape, plan, input_bits)
        layers = (lower_binary_network if unit == "binary" else lower_lowbit_network)(net)
    else:
        widths = [int(rng.integers(1, 3 * simd + 8)) for _ in range(int(rng.integers(2, 5)))]
        widths.append(int(rng.integers(1, 3 * pe + 4)))
        shape = (widths[0],)
        layers = (random_binary_network(rng, widths) if unit == "binary"
                  else random_lowbit_network(rng, widths, input_bits))
    folded = fold_network(layers, pe, simd)
    inputs = rng.integers(0, 1 << input_bits, (vectors, *shape)).astype(np.uint8)
    return EngineCase(seed, index, layers, folded, inputs, expected_totals(folded, layers, inputs))


def expected_totals(folded, layers, inputs):
    """What the engine outputs for input elements [N, ...] (vectors or maps): the last layer's
    totals [N, groups * pe], a padded channel's (its weights the padding's) included; the last
    layer's window is its whole input, flattened as its weights are."""
    elements = run_lowered(layers, inputs, count=len(layers) - 1)
    last = layers[-1]
    fields = np.full((folded.output_groups * folded.pe, last.k), last.weight_pad, np.int64)
    fields[:last.m] = last.weight_fields()
    if folded.unit == "binary":
        return (elements[:, None, :] == fields[None]).sum(axis=2)
    return elements.astype(np.int64) @ fields.T
