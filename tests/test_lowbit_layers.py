"""Low-bit layers (fpganet.codegen.lowbit): a dense layer of small signed weights and small
unsigned input digits as dot products and per-channel multi-thresholds, equal to the golden
model; FINN's TFC_2W2A and TFC_1W1A whole; what is wider than the form refused."""

import dataclasses

import numpy as np
import pytest
from test_binary_layers import TFC_W1A1, needs_tfc

from fpganet.codegen.fuzz_engine import random_lowbit_dense
from fpganet.codegen.lowbit import MAX_BITS, lower_lowbit, lower_lowbit_network, run_lowbit, \
    run_lowbit_network
from fpganet.compiler import compile_model
from fpganet.datasets import mnist, qonnx_model
from fpganet.errors import FpganetError
from fpganet.golden import run_golden, run_layer
from fpganet.qnet import QConv

try:
    TFC_W2A2 = qonnx_model("tfc-w2a2")
except FpganetError:        # no ../shared beside the checkout
    TFC_W2A2 = None


@pytest.mark.parametrize("seed", range(8))
def test_a_lowbit_dense_layer_equals_the_golden_model(seed):
    """Weights of 2 to 4 bits, inputs of 1 to 4 bits with any zero point, outputs of 1 to 4
    bits or int8: the thresholds (or the requantization) of the dot product give the golden
    model's codes on every input drawn."""
    rng = np.random.default_rng(seed)
    k, m = int(rng.integers(1, 120)), int(rng.integers(1, 10))
    weight_bits, input_bits = int(rng.integers(2, MAX_BITS + 1)), int(rng.integers(1, 5))
    in_lo = int(rng.integers(-8, 1))
    in_hi = in_lo + (1 << input_bits) - 1
    q = rng.integers(in_lo, in_hi + 1, (300, k, 1, 1)).astype(np.int8)
    for lo, hi in ((-1, 0), (0, 3), (-1, 1), (-8, 7), (-128, 127)):
        layer = random_lowbit_dense(rng, k, m, weight_bits=weight_bits,
                                    zp_in=int(rng.integers(-4, 4)), lo=lo, hi=hi)
        form = lower_lowbit(layer, in_lo, in_hi)
        assert form.weight_bits <= weight_bits and form.input_bits == input_bits
        out = run_lowbit(form, (q.reshape(300, k) - in_lo).astype(np.uint8))
        expected = run_layer(layer, q).reshape(300, m)
        if form.thresholds is None:
            assert np.array_equal(out, expected)
        else:
            assert form.thresholds.shape == (m, hi - lo)
            assert np.array_equal(out.astype(np.int64) + lo, expected)


@pytest.mark.skipif(TFC_W2A2 is None, reason="../shared/models/qonnx not found")
@needs_tfc
@pytest.mark.parametrize("model", ["tfc-w2a2", "tfc-w1a1"])
def test_tfc_networks_whole_equal_the_golden_model(model):
    """TFC_2W2A: ternary weights and activations, two thresholds a channel; TFC_1W1A as the
    one-bit case. All 10,000 MNIST test images."""
    net = compile_model(qonnx_model(model))
    layers = lower_lowbit_network(net)
    assert [layer.thresholds is None for layer in layers] == [False, False, False, True]
    assert {(layer.weight_bits, layer.input_bits) for layer in layers} == (
        {(2, 2)} if model == "tfc-w2a2" else {(2, 1)})
    x, _ = mnist("all", unit=True)
    q = net.quantize_input(x)
    assert np.array_equal(run_lowbit_network(layers, q), run_golden(net, q).reshape(len(q), -1))


def test_what_is_wider_or_falls_is_refused_in_one_line():
    rng = np.random.default_rng(0)
    layer = random_lowbit_dense(rng, 8, 3, weight_bits=4, zp_in=0, lo=0, hi=3)
    wide = dataclasses.replace(layer, weight=(layer.weight * 2).astype(np.int8))
    with pytest.raises(FpganetError, match=r"^layer 'fc': its weight codes need 5 bits, more "
                                           r"than 4$"):
        lower_lowbit(wide, 0, 3)
    with pytest.raises(FpganetError, match=r"^layer 'fc': its input codes 0..16 need 5 bits, "
                                           r"more than 4$"):
        lower_lowbit(layer, 0, 16)
    falling = random_lowbit_dense(rng, 8, 3, weight_bits=2, zp_in=0, lo=0, hi=3, mult_sign=-1)
    with pytest.raises(FpganetError, match=r"^layer 'fc': channel \d+'s output falls as its dot "
                                           r"product grows: no thresholds give it$"):
        lower_lowbit(falling, 0, 3)
