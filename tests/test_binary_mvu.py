"""amaranth.sim tests of the binary matrix-vector unit against :func:`fpganet.ops.xnor_popcount`,
and of that function against the bipolar dot product it stands for."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fpganet.hdl.binary_mvu import BinaryMatrixVectorUnit
from fpganet.ops import xnor_popcount


def test_xnor_popcount_is_the_bipolar_dot_product():
    rng = np.random.default_rng(0)
    x, w = rng.integers(0, 2, (5, 37)), rng.integers(0, 2, (7, 37))
    bipolar = (2 * x - 1) @ (2 * w - 1).T
    assert np.array_equal(2 * xnor_popcount(x, w) - 37, bipolar)


def _pack(bits):
    """{0, 1} bits, first at bit 0, as an integer."""
    return int(sum(int(b) << i for i, b in enumerate(bits)))


def _groups(rng, pe, simd, count=12):
    """Random dot products of 1..6 beats: ``(x [beats, simd], w [pe, beats, simd], counts
    [pe], thresholds [pe])``."""
    groups = []
    for _ in range(count):
        beats = int(rng.integers(1, 7))
        x = rng.integers(0, 2, (beats, simd))
        w = rng.integers(0, 2, (pe, beats, simd))
        counts = xnor_popcount(x.reshape(1, -1), w.reshape(pe, -1))[0]
        groups.append((x, w, counts, rng.integers(0, beats * simd + 2, pe)))
    return groups


def stream_beats(dut, groups, rng, valid_rate, ready_rate, put, take):
    """Stream the groups' beats (``(x [beats, ...], w [pe, beats, ...], thresholds)`` each) into
    a matrix-vector unit, ``valid`` set at ``valid_rate`` (``put(ctx, x, w, thresholds,
    garbage)`` sets a beat's payload, ``garbage`` in the gaps, which must be ignored), and take
    results with ``ready`` set at ``ready_rate`` (``take(ctx)`` reads one); returns the closing
    beats' transfer cycles and the results ``(cycle valid first seen, *take(ctx))`` in order."""
    beats = [(x[k], w[:, k], k == len(x) - 1, thresholds)
             for x, w, thresholds in groups for k in range(len(x))]
    closing, results = [], []

    async def testbench(ctx):
        sent, first_valid = 0, None
        for cycle in range(40 * len(beats) + 20):
            if sent == len(beats) and len(results) == len(groups):
                break
            offering = sent < len(beats) and rng.random() < valid_rate
            x, w, last, thresholds = beats[min(sent, len(beats) - 1)]
            ctx.set(dut.beats.valid, offering)
            put(ctx, x, w, thresholds, not offering)
            ctx.set(dut.beats.payload.last, last)
            ready = rng.random() < ready_rate
            ctx.set(dut.results.ready, ready)
            if ctx.get(dut.results.valid):
                first_valid = cycle if first_valid is None else first_valid
                if ready:
                    results.append((first_valid, *take(ctx)))
                    first_valid = None
            if offering and ctx.get(dut.beats.ready):
                sent += 1
                if last:
                    closing.append(cycle)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return closing, results


def _run(dut, groups, rng, valid_rate, ready_rate):
    """The binary unit on ``groups`` (:func:`_groups`): results ``(cycle, counts, y)``."""
    def put(ctx, x, w, thresholds, garbage):
        if garbage:
            x, w = rng.integers(0, 2, x.shape), rng.integers(0, 2, w.shape)
        ctx.set(dut.beats.payload.x, _pack(x))
        for j in range(dut.pe):
            ctx.set(dut.beats.payload.w[j], _pack(w[j]))
            ctx.set(dut.beats.payload.thresholds[j], int(thresholds[j]))

    def take(ctx):
        return list(ctx.get(dut.results.payload.counts)), ctx.get(dut.results.payload.y)
    return stream_beats(dut, [(x, w, thresholds) for x, w, _, thresholds in groups], rng,
                        valid_rate, ready_rate, put, take)


@pytest.mark.parametrize("pe, simd, partial_bits", [
    (1, 1, None), (4, 8, None), (3, 13, None), (8, 32, None), (3, 40, 16), (2, 13, 4)])
def test_unit_equals_xnor_popcount_at_full_rate_with_its_latency(pe, simd, partial_bits):
    """Beats back to back and results always taken: each result comes :attr:`latency`
    cycles after its closing beat (one more with registered partial popcounts, the last
    chunk short of ``partial_bits``), its counts and compares equal to numpy's."""
    rng = np.random.default_rng(pe * 100 + simd)
    dut = BinaryMatrixVectorUnit(pe, simd, count_width=10, partial_bits=partial_bits)
    assert dut.latency == BinaryMatrixVectorUnit.latency_of() + (partial_bits is not None)
    groups = _groups(rng, pe, simd)
    closing, results = _run(dut, groups, rng, valid_rate=1.0, ready_rate=1.0)
    assert [cycle for cycle, _, _ in results] == [c + dut.latency for c in closing]
    for (_, counts, y), (_, _, expected, thresholds) in zip(results, groups, strict=True):
        assert counts == list(expected) and y == _pack(expected >= thresholds)


@pytest.mark.parametrize("seed", range(4))
def test_unit_equals_xnor_popcount_under_bubbles_and_back_pressure(seed):
    """Gaps in ``valid`` and ``ready`` held low at random: every result arrives, in order,
    equal to numpy's."""
    rng = np.random.default_rng(seed)
    pe, simd = int(rng.integers(1, 6)), int(rng.integers(1, 24))
    dut = BinaryMatrixVectorUnit(pe, simd, count_width=9, partial_bits=(None, 8)[seed % 2])
    groups = _groups(rng, pe, simd, count=20)
    _, results = _run(dut, groups, rng, valid_rate=0.7, ready_rate=0.5)
    for (_, counts, y), (_, _, expected, thresholds) in zip(results, groups, strict=True):
        assert counts == list(expected) and y == _pack(expected >= thresholds)


@pytest.mark.parametrize("args, error, message", [
    ((0, 8, 10), TypeError, "pe must be a positive integer, not 0"),
    ((2, 8.0, 10), TypeError, "simd must be a positive integer, not 8.0"),
    ((2, 8, 10, 0), TypeError, "partial_bits must be a positive integer, not 0"),
    ((2, 64, 6), ValueError, "count_width must be at least 7 to hold one beat's popcount of 64 "
                             "bits, not 6"),
])
def test_unit_parameters_are_checked(args, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        BinaryMatrixVectorUnit(*args)
