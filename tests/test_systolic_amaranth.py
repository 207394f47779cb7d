"""amaranth.sim tests of the processing element and the systolic array against numpy."""

import functools

import numpy as np
import pytest
from amaranth.sim import Simulator
from faults import MiswiredPE

from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.hdl.ecp5_dsp import ECP5PairProcessingElement, ECP5TernaryPairProcessingElement
from fpganet.hdl.ice40_dsp import Ice40PairProcessingElement
from fpganet.hdl.systolic import (PairProcessingElement, ProcessingElement, SystolicArray,
                                  TernaryPairProcessingElement)
from fpganet.sim.matmul import assemble, pair_tiles, plan_tiles, reference_matmul


def run_testbenches(dut, *testbenches):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


# Processing element ------------------------------------------------------------------------

@pytest.mark.parametrize("separate_result_adder", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_pe_accumulates_tiles_with_bubbles(seed, separate_result_adder):
    config = AcceleratorConfig()
    pe = ProcessingElement(config, separate_result_adder=separate_result_adder)
    rng = np.random.default_rng(seed)
    # Beats: (a, b, valid, last); bubbles carry garbage operands that must be ignored.
    tiles = [rng.integers(-128, 128, size=(int(rng.integers(1, 9)), 2)) for _ in range(6)]
    beats = []
    for tile in tiles:
        for k, (a, b) in enumerate(tile):
            while rng.random() < 0.3:
                beats.append((int(rng.integers(-128, 128)), int(rng.integers(-128, 128)), 0, 0))
            beats.append((int(a), int(b), 1, int(k == len(tile) - 1)))
    expected = [int(tile[:, 0] @ tile[:, 1]) for tile in tiles]
    results = []

    async def testbench(ctx):
        last_cycles = []
        for cycle, (a, b, valid, last) in enumerate(beats + [(0, 0, 0, 0)] * 4):
            ctx.set(pe.a_in, a)
            ctx.set(pe.b_in, b)
            ctx.set(pe.valid_in, valid)
            ctx.set(pe.last_in, last)
            if valid and last:
                last_cycles.append(cycle)
            await ctx.tick()
            # Operands are forwarded after exactly one cycle.
            assert ctx.get(pe.a_out) == a and ctx.get(pe.b_out) == b
            assert ctx.get(pe.valid_out) == valid and ctx.get(pe.last_out) == last
            if ctx.get(pe.done):
                results.append((cycle + 1, ctx.get(pe.result)))
        # `done` comes `latency` cycles after the last beat was presented.
        assert [cycle for cycle, _ in results] == [c + pe.latency for c in last_cycles]

    run_testbenches(pe, testbench)
    assert [value for _, value in results] == expected


def test_pe_extremes_are_exact():
    config = AcceleratorConfig()
    pe = ProcessingElement(config)
    cases = [(-128, -128, 300), (-128, 127, 300), (127, 127, 300), (0, -128, 5)]
    results = []

    async def testbench(ctx):
        ctx.set(pe.valid_in, 1)
        for a, b, k in cases:
            ctx.set(pe.a_in, a)
            ctx.set(pe.b_in, b)
            for i in range(k):
                ctx.set(pe.last_in, i == k - 1)
                await ctx.tick()
        ctx.set(pe.valid_in, 0)
        await ctx.tick().repeat(pe.latency)

    async def monitor(ctx):
        async for _, _, done, result in ctx.tick().sample(pe.done, pe.result):
            if done:
                results.append(result)

    sim = Simulator(pe)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.add_process(monitor)
    sim.run_until(1e-8 * (sum(k for _, _, k in cases) + 10))
    assert results == [a * b * k for a, b, k in cases]


def test_pe_rejects_wrong_config():
    with pytest.raises(TypeError, match="AcceleratorConfig"):
        ProcessingElement({"rows": 2})


# Systolic array ----------------------------------------------------------------------------

class ArrayHarness:
    """Streams a tile plan through the array, with optional valid gaps and ready back-pressure."""

    def __init__(self, dut, tiles, *, rng=None, valid_gaps=0.0, ready_stalls=0.0):
        self.dut = dut
        self.tiles = tiles
        self.rng = rng or np.random.default_rng(0)
        self.valid_gaps = valid_gaps
        self.ready_stalls = ready_stalls
        self.rows_out = []        # (cycle, row, last, sums)
        self.last_accepted = []   # cycle of each tile's last-beat transfer
        self.cycle = 0

    async def producer(self, ctx):
        dut = self.dut
        for tile in self.tiles:
            for k in range(tile.beats):
                while self.rng.random() < self.valid_gaps:
                    ctx.set(dut.operands.valid, 0)
                    await ctx.tick()
                ctx.set(dut.operands.payload, {
                    "a": [int(v) for v in tile.a[k]],
                    "b": [int(v) for v in tile.b[k]],
                    "last": k == tile.beats - 1,
                })
                ctx.set(dut.operands.valid, 1)
                # Wait for the transfer: ready high at a clock edge while valid.
                while True:
                    _, _, ready = await ctx.tick().sample(dut.operands.ready)
                    if ready:
                        break
                if k == tile.beats - 1:
                    self.last_accepted.append(self.cycle - 1)
        ctx.set(dut.operands.valid, 0)

    async def consumer(self, ctx):
        dut = self.dut
        expected_rows = len(self.tiles) * dut.config.rows
        while len(self.rows_out) < expected_rows:
            ready = int(self.rng.random() >= self.ready_stalls)
            ctx.set(dut.results.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.results.valid, dut.results.payload)
            if valid and ready:
                self.rows_out.append((self.cycle - 1, payload.row, payload.last,
                                      [payload.sums[j] for j in range(dut.config.cols)]))
            if self.cycle > 100_000:
                raise AssertionError("array stopped producing results")

    async def clock_counter(self, ctx):
        async for _ in ctx.tick():
            self.cycle += 1

    def run(self):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        sim.add_process(self.clock_counter)
        sim.add_testbench(self.producer)
        sim.add_testbench(self.consumer)
        sim.run()
        return self

    def tile_sums(self):
        rows = self.dut.config.rows
        assert [row for _, row, _, _ in self.rows_out] == list(range(rows)) * len(self.tiles)
        assert [last for _, _, last, _ in self.rows_out] == \
            ([False] * (rows - 1) + [True]) * len(self.tiles)
        sums = [sums for _, _, _, sums in self.rows_out]
        return [sums[t * rows:(t + 1) * rows] for t in range(len(self.tiles))]


ARRAY_CASES = [
    # rows, cols, M, K, N, k_tile, valid_gaps, ready_stalls
    (2, 8, 6, 25, 20, None, 0.0, 0.0),
    (3, 4, 7, 5, 9, None, 0.3, 0.3),
    (4, 4, 9, 13, 6, 4, 0.2, 0.5),
    (1, 1, 3, 4, 2, None, 0.5, 0.5),
    (5, 2, 11, 1, 3, None, 0.0, 0.7),
]


@pytest.mark.parametrize("broadcast,registered", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("rows,cols,M,K,N,k_tile,valid_gaps,ready_stalls", ARRAY_CASES)
def test_array_matches_numpy(rows, cols, M, K, N, k_tile, valid_gaps, ready_stalls, broadcast,
                             registered):
    """``registered``: ``registered_results``, the result row in an output register."""
    config = AcceleratorConfig(rows=rows, cols=cols, broadcast_operands=broadcast,
                               registered_results=registered)
    rng = np.random.default_rng(rows * 100 + cols)
    A = rng.integers(-128, 128, size=(M, K))
    B = rng.integers(-128, 128, size=(K, N))
    tiles = plan_tiles(A, B, rows, cols, k_tile)
    harness = ArrayHarness(SystolicArray(config), tiles, rng=rng,
                           valid_gaps=valid_gaps, ready_stalls=ready_stalls).run()
    C = assemble(tiles, harness.tile_sums(), (M, N))
    np.testing.assert_array_equal(C, reference_matmul(A, B))


def test_array_extreme_operands():
    config = AcceleratorConfig(rows=3, cols=3)
    for value_a, value_b in [(-128, -128), (127, 127), (-128, 127)]:
        A = np.full((3, 40), value_a)
        B = np.full((40, 3), value_b)
        tiles = plan_tiles(A, B, 3, 3)
        harness = ArrayHarness(SystolicArray(config), tiles).run()
        np.testing.assert_array_equal(assemble(tiles, harness.tile_sums(), (3, 3)), A @ B)


@pytest.mark.parametrize("broadcast,registered", [(False, False), (True, False), (False, True)])
def test_array_latency_and_throughput_properties(broadcast, registered):
    """The documented latency and minimum tile time are what the hardware does."""
    config = AcceleratorConfig(rows=3, cols=5, broadcast_operands=broadcast,
                               registered_results=registered)
    dut = SystolicArray(config)
    assert dut.latency == config.array_latency == (3 if broadcast else 7) + registered
    rng = np.random.default_rng(7)

    # Short tiles (K=1) back to back: one tile per `min_tile_cycles`.
    A = rng.integers(-128, 128, size=(3, 1))
    B = rng.integers(-128, 128, size=(1, 5))
    tiles = plan_tiles(A, B, 3, 5) * 6
    harness = ArrayHarness(dut, tiles).run()
    first_rows = [cycle for cycle, row, _, _ in harness.rows_out if row == 0]
    assert [f - l for f, l in zip(first_rows, harness.last_accepted)] == [dut.latency] * 6
    assert np.diff(harness.last_accepted).tolist() == [dut.min_tile_cycles] * 5

    # Long tiles stream at one beat per cycle with no gap between tiles.
    K = dut.min_tile_cycles + 3
    A = rng.integers(-128, 128, size=(3, K))
    B = rng.integers(-128, 128, size=(K, 5))
    tiles = plan_tiles(A, B, 3, 5) * 4
    harness = ArrayHarness(SystolicArray(config), tiles).run()
    assert np.diff(harness.last_accepted).tolist() == [K] * 3


def test_array_rejects_bad_parameters():
    with pytest.raises(TypeError, match="AcceleratorConfig"):
        SystolicArray("2x8")
    with pytest.raises(TypeError, match="callable"):
        SystolicArray(AcceleratorConfig(), pe=3)


def test_miswired_array_is_caught():
    """The checks above fail on an array whose PEs pass `a` south instead of `b`."""
    config = AcceleratorConfig(rows=3, cols=4)
    rng = np.random.default_rng(3)
    A = rng.integers(-128, 128, size=(5, 7))
    B = rng.integers(-128, 128, size=(7, 6))
    tiles = plan_tiles(A, B, 3, 4)
    harness = ArrayHarness(SystolicArray(config, pe=MiswiredPE), tiles).run()
    assert not np.array_equal(assemble(tiles, harness.tile_sums(), (5, 6)), reference_matmul(A, B))


PAIR_PES = [ECP5PairProcessingElement, Ice40PairProcessingElement]


@pytest.mark.parametrize("pe", PAIR_PES)
def test_pair_pe_model_matches_numpy(pe):
    """Two products a cycle into one accumulator: a 3x4 array of pair PEs (24 MACs a cycle),
    K odd, the extreme products (-128 x -128 twice in one pair), gaps and back-pressure."""
    config = AcceleratorConfig(rows=3, cols=4, pair_products=True)
    rng = np.random.default_rng(12)
    A = rng.integers(-128, 128, size=(5, 13))
    B = rng.integers(-128, 128, size=(13, 9))
    A[0, :2] = -128
    B[:2, 0] = -128
    tiles = pair_tiles(A, B, 3, 4)
    dut = SystolicArray(config, pe=functools.partial(pe, model=True))
    harness = ArrayHarness(dut, tiles, rng=rng, valid_gaps=0.2, ready_stalls=0.3).run()
    np.testing.assert_array_equal(assemble(tiles, harness.tile_sums(), (5, 9)),
                                  reference_matmul(A, B))


@pytest.mark.parametrize("pe", PAIR_PES)
@pytest.mark.parametrize("broadcast", [False, True])
def test_pair_array_latency_and_tile_rate_are_the_documented_ones(pe, broadcast):
    """With the pair PEs' latency 3, the array's latency and shortest tile are what the
    hardware does (one pair a tile, back to back)."""
    config = AcceleratorConfig(rows=3, cols=4, pair_products=True, broadcast_operands=broadcast)
    dut = SystolicArray(config, pe=functools.partial(pe, model=True))
    assert dut.latency == config.array_latency == config.replace(pair_products=False).array_latency + 1
    rng = np.random.default_rng(13)
    A = rng.integers(-128, 128, size=(3, 2))
    B = rng.integers(-128, 128, size=(2, 4))
    harness = ArrayHarness(dut, pair_tiles(A, B, 3, 4) * 5).run()
    first_rows = [cycle for cycle, row, _, _ in harness.rows_out if row == 0]
    assert [f - l for f, l in zip(first_rows, harness.last_accepted)] == [dut.latency] * 5
    assert np.diff(harness.last_accepted).tolist() == [dut.min_tile_cycles] * 4


@pytest.mark.parametrize("pe", PAIR_PES)
def test_pe_and_configuration_agree_on_pair_products(pe):
    """A pair PE refuses a configuration without pair products and a single PE one with them."""
    with pytest.raises(ConfigError, match="makes 2 product.*pair_products=False"):
        pe(AcceleratorConfig())
    with pytest.raises(ConfigError, match="makes 1 product.*pair_products=True"):
        ProcessingElement(AcceleratorConfig(pair_products=True))


TERNARY_PES = [TernaryPairProcessingElement,
               functools.partial(ECP5TernaryPairProcessingElement, model=True)]


@pytest.mark.parametrize("pe", TERNARY_PES)
def test_ternary_pair_pe_matches_numpy(pe):
    """A pair's two products from one multiplier (weights -1, 0, +1): every activation corner
    (-128, 127, -1, 0) against every weight pair, K odd, gaps and back-pressure."""
    config = AcceleratorConfig(rows=3, cols=4, pair_products=True, ternary_pairs=True)
    rng = np.random.default_rng(14)
    corners = np.array([-128, -127, -1, 0, 1, 126, 127])
    A = rng.integers(-1, 2, size=(5, 49))                   # weights, one array row each
    B = rng.integers(-128, 128, size=(49, 9))               # activations, one column each
    B[:, 0] = np.repeat(corners, 7)
    B[:, 1] = np.tile(corners, 7)
    A[0] = np.resize([-1, -1, 1, 1, 0, -1, 1, 0, 0], 49)
    tiles = pair_tiles(A, B, 3, 4)
    dut = SystolicArray(config, pe=pe)
    harness = ArrayHarness(dut, tiles, rng=rng, valid_gaps=0.2, ready_stalls=0.3).run()
    np.testing.assert_array_equal(assemble(tiles, harness.tile_sums(), (5, 9)),
                                  reference_matmul(A, B))
    # The pair PEs' latency, measured: first rows the documented cycles after each last beat.
    dut = SystolicArray(config, pe=pe)
    harness = ArrayHarness(dut, pair_tiles(A[:3, :2], B[:2, :4], 3, 4) * 4).run()
    first_rows = [cycle for cycle, row, _, _ in harness.rows_out if row == 0]
    assert [f - l for f, l in zip(first_rows, harness.last_accepted)] == [
        config.replace(ternary_pairs=False).array_latency] * 4


def test_a_weight_outside_the_ternary_range_is_a_wrong_sum():
    """What the compiler's refusal protects: a weight of 2 does not give 2x."""
    config = AcceleratorConfig(rows=1, cols=1, pair_products=True, ternary_pairs=True)
    A, B = np.array([[2, 0]]), np.array([[100], [0]])
    tiles = pair_tiles(A, B, 1, 1)
    harness = ArrayHarness(SystolicArray(config), tiles).run()
    assert assemble(tiles, harness.tile_sums(), (1, 1))[0, 0] != 200


def test_ternary_pairs_need_pair_products_and_the_pes_agree():
    with pytest.raises(ConfigError, match="ternary_pairs .* needs pair_products"):
        AcceleratorConfig(ternary_pairs=True)
    config = AcceleratorConfig(pair_products=True, ternary_pairs=True)
    with pytest.raises(ConfigError, match="ternary_pairs=True"):
        PairProcessingElement(config)
    with pytest.raises(ConfigError, match="ternary_pairs=True"):
        Ice40PairProcessingElement(config)
    with pytest.raises(ConfigError, match="ternary_pairs=False"):
        TernaryPairProcessingElement(config.replace(ternary_pairs=False))
