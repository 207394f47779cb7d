"""Random binary and low-bit networks for the engine in logic cells, lowered and folded
(:mod:`fpganet.codegen.binary`), and what the engine must output for them: the data of the
engine's RTL fuzz (:mod:`fpganet.sim.fuzz_engine`) and of its tests.

A case is regenerated from its seed and index alone. Its layers are lowered from random
integer dense layers (:class:`~fpganet.qnet.QConv`) by the same functions as a compiled
network's, whose equality with the golden model is tested on their own; the engine's
expected totals are those layers' arithmetic.
"""

from dataclasses import dataclass

import numpy as np

from ..qnet import QConv
from .binary import fold_network, lower_binary, run_binary
from .lowbit import lower_lowbit, run_lowbit

__all__ = ["random_binary_dense", "random_lowbit_dense", "random_binary_network",
           "random_lowbit_network", "EngineCase", "engine_case", "expected_totals", "FOLDS"]

#: ``(unit, pe, simd)`` a case may take: the folds the benchmarks build on the boards
#: (benchmarks/binary_tfc.py), and small and degenerate ones.
FOLDS = (("binary", 4, 16), ("binary", 8, 16), ("binary", 8, 32), ("binary", 16, 64),
         ("binary", 1, 8), ("binary", 2, 24), ("lowbit", 2, 8), ("lowbit", 8, 32),
         ("lowbit", 16, 64), ("lowbit", 1, 8), ("lowbit", 4, 12), ("lowbit", 3, 6))


def _dense(rng, weight, zp_in, lo, hi, bias_range, shifts, mult_sign=1):
    m, k = weight.shape[:2]
    bias = rng.integers(-bias_range, bias_range + 1, m) - zp_in * weight.reshape(m, -1).sum(axis=1)
    return QConv(name="fc", kind="dense", in_shape=(k, 1, 1), out_shape=(m, 1, 1), kernel=(1, 1),
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
        widths = [self.folded.layers[0].k, *(layer.m for layer in self.folded.layers)]
        return (f"seed {self.seed} case {self.index}: {self.folded.description}, layers "
                f"{' -> '.join(map(str, widths))}")


def engine_case(seed, index, vectors=3):
    """Case ``index`` of ``seed``: a fold of :data:`FOLDS`, a random network of two to four
    layers whose widths pad the fold differently, ``vectors`` random inputs."""
    rng = np.random.default_rng([seed, index, 0xE9])
    unit, pe, simd = FOLDS[int(rng.integers(len(FOLDS)))]
    widths = [int(rng.integers(1, 3 * simd + 8)) for _ in range(int(rng.integers(2, 5)))]
    widths.append(int(rng.integers(1, 3 * pe + 4)))
    if unit == "binary":
        layers, input_bits = random_binary_network(rng, widths), 1
    else:
        # The device takes whole bytes a word: simd * input_bits a multiple of 8.
        choices = [bits for bits in range(1, 5) if simd * bits % 8 == 0]
        input_bits = int(rng.choice(choices))
        layers = random_lowbit_network(rng, widths, input_bits)
    folded = fold_network(layers, pe, simd)
    inputs = rng.integers(0, 1 << input_bits, (vectors, widths[0])).astype(np.uint8)
    return EngineCase(seed, index, layers, folded, inputs, expected_totals(folded, layers, inputs))


def expected_totals(folded, layers, inputs):
    """What the engine outputs for input elements [N, K]: the last layer's totals [N, groups
    * pe], a padded channel's (its weights the padding's) included."""
    run = run_binary if folded.unit == "binary" else run_lowbit
    elements = inputs
    for layer in layers[:-1]:
        elements = run(layer, elements)
    last = layers[-1]
    fields = np.full((folded.output_groups * folded.pe, last.k), last.weight_pad, np.int64)
    fields[:last.m] = last.weight_fields()
    if folded.unit == "binary":
        return (elements[:, None, :] == fields[None]).sum(axis=2)
    return elements.astype(np.int64) @ fields.T
