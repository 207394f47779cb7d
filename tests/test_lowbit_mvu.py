"""amaranth.sim tests of the low-bit matrix-vector unit: random dot products of small signed
weights and unsigned digits, with bubbles and back-pressure, against numpy; and FINN's
TFC_2W2A's layers through it against their low-bit form (so the golden model)."""

import numpy as np
import pytest
from test_binary_mvu import stream_beats
from test_lowbit_layers import TFC_W2A2

from fpganet.codegen.lowbit import input_digits, lower_lowbit_network, run_lowbit
from fpganet.compiler import compile_model
from fpganet.datasets import mnist
from fpganet.hdl.lowbit_mvu import LowBitMatrixVectorUnit


def _run(dut, groups, rng, valid_rate=1.0, ready_rate=1.0):
    """The low-bit unit on groups ``(x [beats, simd], w [pe, beats, simd], thresholds [pe,
    levels])``: results ``(cycle, sums, y)`` (:func:`test_binary_mvu.stream_beats`)."""
    def put(ctx, x, w, thresholds, garbage):
        if garbage:
            x = rng.integers(0, 1 << dut.input_bits, x.shape)
        for i in range(dut.simd):
            ctx.set(dut.beats.payload.x[i], int(x[i]))
            for j in range(dut.pe):
                ctx.set(dut.beats.payload.w[j][i], int(w[j, i]))
        for j in range(dut.pe):
            for t in range(dut.levels):
                ctx.set(dut.beats.payload.thresholds[j][t], int(thresholds[j, t]))

    def take(ctx):
        payload = ctx.get(dut.results.payload)
        return [int(v) for v in payload.sums], [int(v) for v in payload.y]
    return stream_beats(dut, groups, rng, valid_rate, ready_rate, put, take)


@pytest.mark.parametrize("weight_bits, input_bits, rates", [
    (2, 2, (1.0, 1.0)), (4, 1, (0.6, 0.5)), (3, 4, (1.0, 0.4)), (2, 3, (0.5, 1.0))])
def test_the_unit_computes_sums_and_digits(weight_bits, input_bits, rates):
    rng = np.random.default_rng(weight_bits * 10 + input_bits)
    pe, simd, levels, acc_width = 3, 5, 3, 14
    dut = LowBitMatrixVectorUnit(pe, simd, weight_bits, input_bits, acc_width, levels)
    top = 1 << (weight_bits - 1)
    groups = []
    for _ in range(10):
        beats = int(rng.integers(1, 6))
        x = rng.integers(0, 1 << input_bits, (beats, simd))
        w = rng.integers(-top, top, (pe, beats, simd))
        thresholds = np.sort(rng.integers(-60, 60, (pe, levels)), axis=1)
        groups.append((x, w, thresholds))
    closing, results = _run(dut, groups, rng, *rates)
    assert len(results) == len(groups)
    for (x, w, thresholds), (_, sums, y) in zip(groups, results):
        expected = w.reshape(pe, -1) @ x.reshape(-1)
        assert sums == expected.tolist()
        assert y == (expected[:, None] >= thresholds).sum(axis=1).tolist()
    if rates == (1.0, 1.0):
        assert [first for first, _, _ in results] == [c + dut.latency for c in closing]


@pytest.mark.skipif(TFC_W2A2 is None, reason="../shared/models/qonnx not found")
def test_tfc_w2a2_layers_through_the_unit_equal_their_lowbit_form():
    """Layers 2 and 3 (64 -> 64) and the last (64 -> 10, its sums), 4 channels x 16 inputs a
    beat, on three MNIST images."""
    net = compile_model(TFC_W2A2)
    layers = lower_lowbit_network(net)
    x, _ = mnist("all", unit=True)
    digits = input_digits(layers, net.quantize_input(x[:3]))
    digits = run_lowbit(layers[0], digits)
    pe, simd = 4, 16
    for layer in layers[1:]:
        levels = 1 if layer.thresholds is None else layer.thresholds.shape[1]
        dut = LowBitMatrixVectorUnit(pe, simd, layer.weight_bits, layer.input_bits, 16, levels)
        thresholds = (np.zeros((len(layer.weights), levels), np.int64)
                      if layer.thresholds is None else layer.thresholds)
        groups = [(image.reshape(-1, simd), layer.weights[g:g + pe].reshape(pe, -1, simd),
                   thresholds[g:g + pe])
                  for image in digits for g in range(0, len(layer.weights) - pe + 1, pe)]
        _, results = _run(dut, groups, np.random.default_rng(0))
        sums = np.array([r[1] for r in results]).reshape(len(digits), -1)
        m = sums.shape[1]
        assert np.array_equal(sums, digits.astype(np.int64) @ layer.weights[:m].T.astype(np.int64))
        if layer.thresholds is not None:
            out = np.array([r[2] for r in results]).reshape(len(digits), -1)
            assert np.array_equal(out, run_lowbit(layer, digits))
            digits = out.astype(np.uint8)
