"""amaranth.sim tests of the network engine: random binary and low-bit MLPs and CNNs and FINN's
TFC_1W1A, its outputs equal to the lowered layers' (so the golden model's) and its cycles to
its model; the lowered CNNs against the golden model; what no engine walks, refused."""

import copy
import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator
from test_binary_layers import needs_tfc, tfc_w1a1

from fpganet.codegen.binary import (codes_of_counts, fold_network, lower_binary_network,
                                    pack_input_words, run_binary, run_binary_network)
from fpganet.codegen.fuzz_engine import (random_cnn_plan, engine_case, random_binary_network,
                                         random_lowbit_network, random_map_network)
from fpganet.codegen.lowbit import lower_lowbit_network, run_lowbit, run_lowbit_network
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.hdl.binary_engine import BinaryNetworkEngine


def run_engine(folded, vectors, rng=None, ready_rate=1.0):
    """The engine's RTL on input bit vectors [N, K]: its counts [N, groups * pe] and the cycles
    between the first input word of one vector and of the next."""
    dut = BinaryNetworkEngine(folded)
    words = [pack_input_words(folded, vector) for vector in vectors]
    results, starts = [], []

    async def testbench(ctx):
        cycle, sent = 0, 0
        pending = [word for vector in words for word in vector]
        expected = len(vectors) * folded.output_groups
        while len(results) < expected:
            assert cycle < 100_000, "the engine stopped"
            ctx.set(dut.input.valid, bool(pending))
            ctx.set(dut.input.payload, pending[0] if pending else 0)
            ready = rng is None or rng.random() < ready_rate
            ctx.set(dut.output.ready, ready)
            if pending and ctx.get(dut.input.ready):
                if sent % folded.input_words == 0:
                    starts.append(cycle)
                pending.pop(0)
                sent += 1
            if ctx.get(dut.output.valid) and ready:
                results.append(list(ctx.get(dut.output.payload)))
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    counts = np.array(results).reshape(len(vectors), -1)
    return counts, np.diff(starts), dut


@pytest.mark.parametrize("widths, pe, simd", [
    ((20, 12, 7), 4, 8), ((70, 33, 33, 5), 8, 16), ((9, 3), 1, 1), ((40, 16, 10), 2, 32)])
def test_random_binary_networks_equal_their_layers_and_the_cycle_model(widths, pe, simd):
    rng = np.random.default_rng(sum(widths) + pe + simd)
    layers = random_binary_network(rng, widths)
    folded = fold_network(layers, pe, simd)
    vectors = rng.integers(0, 2, (4, widths[0])).astype(np.uint8)
    counts, gaps, dut = run_engine(folded, vectors)
    bits = vectors
    for layer in layers[:-1]:
        bits = run_binary(layer, bits)
    m = layers[-1].m
    assert np.array_equal(codes_of_counts(layers[-1], counts[:, :m]), run_binary(layers[-1], bits))
    assert list(gaps) == [dut.cycles_per_vector()] * (len(vectors) - 1)


@pytest.mark.parametrize("widths, input_bits, pe, simd", [
    ((20, 12, 7), 2, 4, 8), ((30, 16, 9, 5), 1, 2, 16), ((9, 3), 4, 1, 2), ((24, 8, 10), 3, 8, 8)])
def test_random_lowbit_networks_equal_their_layers_and_the_cycle_model(widths, input_bits, pe,
                                                                       simd):
    """Layers of different weight widths and levels share the engine's widest: narrower
    weights are sign-extended, fewer thresholds padded with ones no total reaches."""
    rng = np.random.default_rng(sum(widths) + pe + simd)
    layers = random_lowbit_network(rng, widths, input_bits)
    folded = fold_network(layers, pe, simd)
    assert folded.unit == "lowbit" and folded.signed_totals
    vectors = rng.integers(0, 1 << input_bits, (4, widths[0])).astype(np.uint8)
    totals, gaps, dut = run_engine(folded, vectors)
    digits = vectors
    for layer in layers[:-1]:
        digits = run_lowbit(layer, digits)
    m = layers[-1].m
    assert np.array_equal(layers[-1].codes(totals[:, :m]), run_lowbit(layers[-1], digits))
    assert list(gaps) == [dut.cycles_per_vector()] * (len(vectors) - 1)


@pytest.mark.parametrize("seed", range(2))
def test_back_pressure_on_the_output_loses_nothing(seed):
    rng = np.random.default_rng(seed)
    layers = random_binary_network(rng, (30, 16, 9))
    folded = fold_network(layers, 4, 8)
    vectors = rng.integers(0, 2, (3, 30)).astype(np.uint8)
    counts, _, _ = run_engine(folded, vectors, rng, ready_rate=0.4)
    hidden = run_binary(layers[0], vectors)
    assert np.array_equal(codes_of_counts(layers[1], counts[:, :9]), run_binary(layers[1], hidden))


def test_folds_the_engine_cannot_run_are_refused():
    rng = np.random.default_rng(0)
    layers = random_binary_network(rng, (16, 8, 4))
    with pytest.raises(FpganetError, match=r"^simd \(12\) must be a multiple of pe \(8\)"):
        fold_network(layers, 8, 12)
    with pytest.raises(FpganetError, match="every layer but the last must have one-bit outputs"):
        fold_network(layers[::-1], 4, 8)


@needs_tfc
def test_tfc_w1a1_runs_on_the_engine_bit_exact():
    """FINN's TFC_1W1A on the engine (8 x 32 binary MACs a cycle): the logits of 3 MNIST
    images equal the golden model's."""
    net, layers, q, bits = tfc_w1a1(3)
    folded = fold_network(layers, 8, 32)
    counts, gaps, dut = run_engine(folded, bits)
    logits = codes_of_counts(layers[-1], counts[:, :layers[-1].m])
    assert np.array_equal(logits, run_golden(net, q).reshape(3, -1))
    assert list(gaps) == [dut.cycles_per_vector()] * 2


@pytest.mark.parametrize("seed", range(8))
def test_random_cnns_lowered_equal_the_golden_model(seed):
    """Random chains of convolutions (kernels 1 to 3), max pools fused into them, a flatten
    and dense layers, binary and low-bit: the lowered layers on their maps give the golden
    model's codes."""
    rng = np.random.default_rng(seed)
    unit = ("binary", "lowbit")[seed % 2]
    input_bits = 1 if unit == "binary" else int(rng.integers(1, 5))
    plan, shape = random_cnn_plan(rng, 8)
    net = random_map_network(rng, unit, shape, plan, input_bits)
    layers = (lower_binary_network if unit == "binary" else lower_lowbit_network)(net)
    assert len(layers) == sum(step[0] in ("conv", "dense") for step in plan)
    q = (rng.integers(0, 1 << input_bits, (6, *shape)) + net.input_lo).astype(np.int8)
    run = run_binary_network if unit == "binary" else run_lowbit_network
    assert np.array_equal(run(layers, q), run_golden(net, q).reshape(6, -1))


@pytest.mark.parametrize("index", [1, 3, 5, 11, 13])
def test_random_cnns_on_the_engine_equal_their_layers_and_the_cycle_model(index):
    """Cases of the engine fuzz that are CNNs (odd indices): the map walked in place, the
    pool's greatest, the dense layer over the last map; totals and cycles an input."""
    case = engine_case(2, index)
    assert case.folded.layers[0].is_map
    counts, gaps, dut = run_engine(case.folded, case.inputs)
    assert np.array_equal(counts, case.totals), case.describe()
    assert list(gaps) == [dut.cycles_per_vector()] * (len(case.inputs) - 1)


def test_what_no_engine_walks_is_refused_in_one_line():
    rng = np.random.default_rng(5)
    net = random_map_network(rng, "binary", (3, 6, 6), [("conv", 4, 3), ("pool", 2),
                                                        ("flatten",), ("dense", 2)])
    strided = copy.deepcopy(net)
    strided.layers[0].stride = (2, 2)
    with pytest.raises(FpganetError, match=r"^layer 'conv0': the engines run convolutions of one "
                                           r"group, stride 1 and no padding, not stride \(2, 2\)$"):
        lower_binary_network(strided)
    pooled_twice = copy.deepcopy(net)
    pooled_twice.layers.insert(2, copy.deepcopy(net.layers[1]))
    with pytest.raises(FpganetError, match=r"^layer 'pool1': an engine max-pools only the "
                                           r"thresholded output of the dense layer or "
                                           r"convolution before it$"):
        lower_binary_network(pooled_twice)
    overlapping = copy.deepcopy(net)
    overlapping.layers[1].stride = (1, 1)
    with pytest.raises(FpganetError, match=r"^layer 'pool1': an engine max-pools square windows "
                                           r"as far apart as they are wide"):
        lower_binary_network(overlapping)
    layers = lower_binary_network(net)
    with pytest.raises(FpganetError, match=r"^layer 'conv0': the last layer's output must be one "
                                           r"pixel, unpooled \(its totals leave the engine\), "
                                           r"not \[4, 2, 2\] pooled 2 x 2$"):
        fold_network(layers[:1], 4, 8)
    # A reshape of a stored map other than a flatten would read it in another order.
    plain = random_map_network(rng, "binary", (3, 6, 6), [("conv", 4, 3), ("flatten",),
                                                          ("dense", 2)])
    conv, flatten, dense = plain.layers
    flatten.out_shape = (16, 2, 2)
    plain.layers[2] = dataclasses.replace(dense, kind="conv", in_shape=(16, 2, 2), kernel=(2, 2),
                                          weight=dense.weight.reshape(2, 16, 2, 2))
    with pytest.raises(FpganetError, match=r"^layer 'flatten1': an engine reshapes a map it "
                                           r"stored only by flattening it, \[4, 4, 4\] to "
                                           r"\[64, 1, 1\], not to \[16, 2, 2\]$"):
        lower_binary_network(plain)
