"""cocotb testbench of the generated systolic-array Verilog.

Parameters come from the environment variable ``FPGANET_TB`` (JSON), written by
the pytest runner (``tests/test_systolic_cocotb.py``) or by ``make sim``:

``config``
    :meth:`AcceleratorConfig.to_dict` of the design under test.
``seed``
    Seed of the operands, shapes, valid gaps and ready stalls.
``products``
    How many random matrix products to check.
``max_dim``
    Largest M, K or N of a random product.
``valid_gaps``, ``ready_stalls``
    Probability that the source idles before a beat, and that the sink
    refuses a result in a cycle.
"""

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from fpganet.config import AcceleratorConfig
from fpganet.hdl.systolic import SystolicArray
from fpganet.sim.matmul import PayloadCodec, assemble, pair_tiles, plan_tiles, reference_matmul


def parameters():
    return json.loads(os.environ.get("FPGANET_TB", "{}"))


class SystolicArrayTB:
    """Drives ``operands`` and takes ``results`` of the Verilog array, one cycle at a time."""

    def __init__(self, dut, config, *, rng, valid_gaps=0.0, ready_stalls=0.0):
        self.dut = dut
        self.config = config
        self.codec = PayloadCodec(config)
        self.rng = rng
        self.valid_gaps = valid_gaps
        self.ready_stalls = ready_stalls
        self.cycle = 0
        self.last_accepted = []
        self.first_row_cycles = []

    async def start(self):
        dut = self.dut
        # Icarus leaves Amaranth's combinational logic at X until an input changes:
        # give every input a value at time 0.
        dut.rst.value = 1
        dut.operands__valid.value = 0
        dut.operands__payload.value = 0
        dut.results__ready.value = 0
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    async def stream(self, tiles):
        """Send every beat of ``tiles``; return the sums of each tile as ``rows x cols`` lists."""
        dut, rows = self.dut, self.config.rows
        beats = [(self.codec.pack_operands(tile.a[k], tile.b[k], k == tile.beats - 1),
                  k == tile.beats - 1)
                 for tile in tiles for k in range(tile.beats)]
        expected_rows = len(tiles) * rows
        received = []
        sent, holding = 0, False
        limit = self.cycle + 50 * (len(beats) + expected_rows) + 1000
        while len(received) < expected_rows:
            if not holding and sent < len(beats) and self.rng.random() >= self.valid_gaps:
                dut.operands__payload.value = beats[sent][0]
                holding = True
            dut.operands__valid.value = int(holding)
            taking = int(self.rng.random() >= self.ready_stalls)
            dut.results__ready.value = taking
            await ReadOnly()
            if holding and dut.operands__ready.value:
                if beats[sent][1]:
                    self.last_accepted.append(self.cycle)
                sent += 1
                holding = False
            if taking and dut.results__valid.value:
                sums, row, last = self.codec.unpack_results(int(dut.results__payload.value))
                expected_row = len(received) % rows
                assert row == expected_row, f"result row {row} arrived where row {expected_row} was due"
                assert last == (row == rows - 1), f"row {row} has last={last}"
                if row == 0:
                    self.first_row_cycles.append(self.cycle)
                received.append(sums)
            await RisingEdge(dut.clk)
            self.cycle += 1
            assert self.cycle < limit, (f"stalled: {sent}/{len(beats)} beats sent, "
                                        f"{len(received)}/{expected_rows} rows received")
        assert sent == len(beats), "results arrived before all beats were sent"
        dut.operands__valid.value = 0
        return [received[t * rows:(t + 1) * rows] for t in range(len(tiles))]

    async def check_product(self, A, B, k_tile=None):
        tiles = array_tiles(self.config, A, B, k_tile)
        sums = await self.stream(tiles)
        got = assemble(tiles, sums, (A.shape[0], B.shape[1]), self.config.acc_width)
        want = reference_matmul(A, B, self.config.acc_width)
        mismatches = np.argwhere(got != want)
        assert len(mismatches) == 0, (
            f"{len(mismatches)} of {want.size} outputs wrong for M,K,N={A.shape[0]},{A.shape[1]},"
            f"{B.shape[1]} k_tile={k_tile}; first at {tuple(mismatches[0])}: "
            f"got {got[tuple(mismatches[0])]}, want {want[tuple(mismatches[0])]}")


async def make_tb(dut, **overrides):
    params = parameters()
    config = AcceleratorConfig.from_dict(params["config"])
    rng = np.random.default_rng(params.get("seed", 0))
    tb = SystolicArrayTB(dut, config, rng=rng,
                         valid_gaps=overrides.get("valid_gaps", params.get("valid_gaps", 0.0)),
                         ready_stalls=overrides.get("ready_stalls", params.get("ready_stalls", 0.0)))
    await tb.start()
    return tb, params


@cocotb.test()
async def random_products(dut):
    """Random shapes (K, M, N not multiples of the array), random gaps and back-pressure."""
    tb, params = await make_tb(dut)
    rng, config = tb.rng, tb.config
    max_dim = params.get("max_dim", 20)
    for _ in range(params.get("products", 6)):
        M, K, N = (int(rng.integers(1, max_dim + 1)) for _ in range(3))
        A = weights(rng, config, (M, K))
        B = rng.integers(config.operand_min, config.operand_max + 1, size=(K, N))
        k_tile = int(rng.integers(1, K + 1)) if rng.random() < 0.5 else None
        await tb.check_product(A, B, k_tile)


def array_tiles(config, A, B, k_tile=None):
    """The tiles of ``A @ B`` for ``config``'s array: with pair PEs two steps of K a beat, each
    operand a pair (``k_tile`` rounded up to even there)."""
    if config.pair_products:
        return pair_tiles(A, B, config.rows, config.cols, k_tile and 2 * -(-k_tile // 2))
    return plan_tiles(A, B, config.rows, config.cols, k_tile)


def weights(rng, config, shape):
    """Random ``a`` operands (the weights): any, or -1, 0 and +1 with ``ternary_pairs``."""
    if config.ternary_pairs:
        return rng.integers(-1, 2, size=shape)
    return rng.integers(config.operand_min, config.operand_max + 1, size=shape)


@cocotb.test()
async def extreme_operands(dut):
    """All -128, all 127 and mixed extremes: the largest products, exact in int32."""
    tb, _ = await make_tb(dut)
    config = tb.config
    lo, hi = config.operand_min, config.operand_max
    M, K, N = config.rows + 1, 3 * config.cols + 5, config.cols + 1
    a_lo, a_hi = (-1, 1) if config.ternary_pairs else (lo, hi)
    for value_a, value_b in [(a_lo, lo), (a_hi, hi), (a_lo, hi), (a_hi, lo)]:
        await tb.check_product(np.full((M, K), value_a), np.full((K, N), value_b))
    # A checkerboard of extremes so that neighbours differ in every bit.
    A = np.where(np.indices((M, K)).sum(axis=0) % 2, a_lo, a_hi)
    B = np.where(np.indices((K, N)).sum(axis=0) % 3, hi, lo)
    await tb.check_product(A, B)


@cocotb.test()
async def latency_and_tile_rate(dut):
    """First result row `latency` cycles after the last beat; short tiles one per `min_tile_cycles`."""
    tb, _ = await make_tb(dut, valid_gaps=0.0, ready_stalls=0.0)
    config = tb.config
    array = SystolicArray(config)
    A = weights(tb.rng, config, (config.rows, 1))
    B = tb.rng.integers(-128, 128, size=(1, config.cols))
    tiles = array_tiles(config, A, B) * 5
    sums = await tb.stream(tiles)
    want = reference_matmul(A, B).tolist()
    assert all(tile == want for tile in sums)
    latencies = [f - l for f, l in zip(tb.first_row_cycles, tb.last_accepted)]
    assert latencies == [array.latency] * 5, f"latencies {latencies}, documented {array.latency}"
    gaps = np.diff(tb.last_accepted).tolist()
    assert gaps == [array.min_tile_cycles] * 4, f"tile gaps {gaps}, documented {array.min_tile_cycles}"
