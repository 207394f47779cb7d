"""Binary layers (fpganet.codegen.binary): a dense layer with weights +-1 and one-bit inputs as
XNOR popcounts and thresholds, equal to the golden model; FINN's TFC_1W1A whole; and the
binary matrix-vector unit's RTL running its layers."""

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from fpganet.codegen.fuzz_engine import random_binary_dense
from fpganet.codegen.binary import (codes_of_counts, fold_network, input_bits, layer_beats,
                                    lower_binary, lower_binary_network, run_binary,
                                    run_binary_network)
from fpganet.compiler import compile_model
from fpganet.datasets import mnist, qonnx_model
from fpganet.errors import FpganetError
from fpganet.golden import run_golden, run_layer
from fpganet.hdl.binary_mvu import BinaryMatrixVectorUnit
from fpganet.qnet import QConv

try:
    TFC_W1A1 = qonnx_model("tfc-w1a1")
except FpganetError:        # no ../shared beside the checkout
    TFC_W1A1 = None
needs_tfc = pytest.mark.skipif(TFC_W1A1 is None, reason="../shared/models/qonnx not found")


def tfc_w1a1(images):
    """TFC_1W1A compiled, its binary layers, the int8 inputs of the first ``images`` MNIST
    test images and their bits."""
    net = compile_model(TFC_W1A1)
    layers = lower_binary_network(net)
    x, _ = mnist("all", unit=True)
    q = net.quantize_input(x[:images])
    return net, layers, q, input_bits(layers, q)


@pytest.mark.parametrize("seed", range(6))
def test_a_binary_dense_layer_equals_the_golden_model(seed):
    """Random weights +-1, input codes in_lo or in_lo + 1 with any zero point, random
    multipliers: the thresholds on the count give the golden model's codes on every input
    drawn, both for a one-bit output and for an int8 one."""
    rng = np.random.default_rng(seed)
    k, m = int(rng.integers(1, 80)), int(rng.integers(1, 12))
    in_lo, zp_in = int(rng.integers(-2, 2)), int(rng.integers(-3, 3))
    bits = rng.integers(0, 2, (300, k)).astype(np.uint8)
    q = (bits.astype(np.int8) + in_lo).reshape(300, k, 1, 1)
    for lo, hi in ((-1, 0), (0, 1), (-128, 127)):
        layer = random_binary_dense(rng, k, m, zp_in=zp_in, lo=lo, hi=hi)
        binary = lower_binary(layer, in_lo)
        expected = run_layer(layer, q).reshape(300, m)
        out = run_binary(binary, bits)
        assert np.array_equal(out if binary.thresholds is None else out.astype(np.int64) + lo,
                              expected)


def test_what_is_not_binary_is_refused_in_one_line():
    rng = np.random.default_rng(0)
    layer = random_binary_dense(rng, 8, 3, zp_in=0, lo=0, hi=1)
    ternary = dataclasses.replace(layer, weight=np.where(layer.weight > 0, 0, -1).astype(np.int8))
    with pytest.raises(FpganetError, match=r"^layer 'fc': weights other than -1 and \+1 \(0\)$"):
        lower_binary(ternary, 0)
    falling = dataclasses.replace(layer, zp_out=0, mult=-np.asarray(layer.mult))
    with pytest.raises(FpganetError, match=r"^layer 'fc': channel \d+'s output falls as its "
                                           r"count grows: no threshold gives it$"):
        lower_binary(falling, 0)


@needs_tfc
def test_tfc_w1a1_runs_as_xnor_popcounts_equal_to_the_golden_model():
    """FINN's TFC_1W1A: its three hidden layers as thresholds on XNOR popcounts and its last
    layer's requantization of the count give the golden model's logits (which equal qonnx's
    executor, tests/test_qonnx_import.py) on all 10,000 MNIST test images."""
    net, layers, q, _ = tfc_w1a1(10_000)
    assert [layer.thresholds is None for layer in layers] == [False, False, False, True]
    assert np.array_equal(run_binary_network(layers, q), run_golden(net, q).reshape(len(q), -1))


@needs_tfc
def test_a_network_with_wider_codes_is_refused_saying_where():
    """TFC_2W2A: 2-bit inputs and ternary weights; with a one-bit input, its first layer's
    weights are named."""
    net = compile_model(qonnx_model("tfc-w2a2"))
    with pytest.raises(FpganetError, match=r"^the network's input codes -1\.\.1 are not one bit$"):
        lower_binary_network(net)
    one_bit_input = dataclasses.replace(net, input_lo=0, input_hi=1)
    with pytest.raises(FpganetError, match=r"^layer '\w+': weights other than -1 and \+1 \(0\)$"):
        lower_binary_network(one_bit_input)


def _unit_outputs(layers, index, bits, pe, simd):
    """The unit's RTL (amaranth.sim) on layer ``index``'s beats (:func:`layer_beats`) for each
    input vector: each channel's count and output bit, [N, M] each."""
    folded = fold_network(layers, pe, simd)
    dut = BinaryMatrixVectorUnit(pe, simd, folded.count_width)
    beats = [beat for vector in bits for beat in layer_beats(folded, index, vector)]
    results = []

    async def testbench(ctx):
        ctx.set(dut.results.ready, 1)
        for x, w, last, thresholds in beats:
            ctx.set(dut.beats.valid, 1)
            ctx.set(dut.beats.payload.x, x)
            ctx.set(dut.beats.payload.w.as_value(), w)
            ctx.set(dut.beats.payload.thresholds.as_value(), thresholds)
            ctx.set(dut.beats.payload.last, bool(last))
            await _tick_and_collect(ctx, dut, results)
        ctx.set(dut.beats.valid, 0)
        for _ in range(dut.latency):
            await _tick_and_collect(ctx, dut, results)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    m = layers[index].m
    counts = np.array([c for c, _ in results]).reshape(len(bits), -1)[:, :m]
    y = np.array([[(v >> j) & 1 for j in range(pe)] for _, v in results])
    return counts, y.reshape(len(bits), -1)[:, :m]


async def _tick_and_collect(ctx, dut, results):
    if ctx.get(dut.results.valid):
        results.append((list(ctx.get(dut.results.payload.counts)), ctx.get(dut.results.payload.y)))
    await ctx.tick()


@needs_tfc
@pytest.mark.parametrize("index, pe, simd", [(0, 16, 32), (1, 8, 16), (3, 4, 8)])
def test_the_unit_runs_tfc_w1a1_layers_bit_exact(index, pe, simd):
    """The binary matrix-vector unit's RTL on three TFC_1W1A layers, folded pe x simd (784
    input bits in beats of 32 pads the last beat): its outputs equal the binary form's (so
    the golden model's) on 3 MNIST images; the last layer's counts give its logits."""
    net, layers, q, bits = tfc_w1a1(3)
    for layer in layers[:index]:
        bits = run_binary(layer, bits)
    layer = layers[index]
    counts, y = _unit_outputs(layers, index, bits, pe, simd)
    assert np.array_equal(counts, np.asarray(
        [[int(np.sum(b == v)) for b in layer.weight_bits] for v in bits]))
    if layer.thresholds is not None:
        assert np.array_equal(y, run_binary(layer, bits))
    else:
        logits = codes_of_counts(layer, counts)
        assert np.array_equal(logits, run_golden(net, q).reshape(3, -1))
