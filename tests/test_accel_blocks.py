"""amaranth.sim tests of the accelerator's blocks against numpy: bank arbiter, requantizer,
max-pool unit, window generator (addresses, gather, conflict cycles, timing) and result
writer (addresses, values, write conflicts, timing)."""

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from fpganet import perf
from fpganet.config import WEIGHT_BLOCK_WORDS, AcceleratorConfig
from fpganet.hdl.controller import Controller
from fpganet.hdl.memories import ActivationBuffer, BankArbiter, param_from_word, param_layout
from fpganet.hdl.pool import MaxPool
from fpganet.hdl.postproc import requantizer
from fpganet.hdl.registers import COUNT_WIDTH, register_layout, register_widths
from fpganet.hdl.scatter import ArbitratedResultWriter, ScheduledResultWriter, result_writer
from fpganet.hdl.window import ArbitratedWindowGenerator, ScheduledWindowGenerator, window_generator
from fpganet.isa import (ENGINE_COUNTS, INSTRUCTION_BITS, Instruction, Opcode, REGION_COUNTS, Reg,
                         encode, pack_param, unpack_param)
from fpganet.isasim import engine_lanes, engine_read_addresses
from fpganet.quantize.fixed_point import requantize
from fpganet.sim.rtl_images import weight_word

from accel_programs import FMap, ProgramBuilder, random_weights


def simulate(dut, *testbenches, background=()):
    sim = Simulator(dut)
    sim.add_clock(1e-8, if_exists=True)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    for testbench in background:
        sim.add_testbench(testbench, background=True)
    sim.run()


def hw_regs(config, regs):
    """Register values as the hardware keeps them (low bits)."""
    widths = register_widths(config)
    return {reg.name.lower(): int(regs.get(reg, 0)) & ((1 << widths[reg]) - 1) for reg in Reg}


@pytest.mark.parametrize("act_bytes,width", [(64, 7), (6000, 14), (8192, 14), (1 << 15, 16), (1 << 17, 16)])
def test_count_registers_are_as_wide_as_the_activation_buffer_needs(act_bytes, width):
    config = AcceleratorConfig(act_buffer_bytes=act_bytes)
    widths = register_widths(config)
    assert config.count_width == min(COUNT_WIDTH, config.act_addr_width + 1) == width
    assert {widths[reg] for reg in ENGINE_COUNTS + REGION_COUNTS} == {width}
    assert widths[Reg.LOOP_COUNT] == 16


def test_region_registers_are_the_engine_input_walk_registers():
    """The ``IO_*`` names alias the input walk's registers: one set of flip-flops serves both,
    and the register file keeps each register once."""
    config = AcceleratorConfig()
    layout = register_layout(config)
    assert len(list(Reg)) == 25 and layout.size == sum(register_widths(config).values())
    for alias, reg in [("IO_BASE", Reg.IN_BASE), ("IO_CHANNELS", Reg.K_C), ("IO_CSTRIDE", Reg.IN_CSTRIDE),
                       ("IO_ROWS", Reg.K_H), ("IO_PITCH", Reg.IN_PITCH), ("IO_LEN", Reg.K_W)]:
        assert Reg[alias] is reg
        field, own = layout[alias.lower()], layout[reg.name.lower()]
        assert (field.offset, field.shape) == (own.offset, own.shape)
    offsets = sorted((layout[reg.name.lower()].offset, layout[reg.name.lower()].width) for reg in Reg)
    assert all(a + w == b for (a, w), (b, _) in zip(offsets, offsets[1:]))


def test_parameter_entry_from_the_host_word():
    """The parameter memory keeps the fields of the host's word (wider than 64 bits on a wide
    weight port), by name."""
    m = Module()
    host_data = Signal(96)
    entry = Signal(param_layout())
    m.d.comb += entry.eq(param_from_word(host_data))
    assert param_layout().size == 53
    tflite = Signal(param_layout("tflite"))
    m.d.comb += tflite.eq(param_from_word(host_data, "tflite"))
    assert param_layout("tflite").size == 64

    async def testbench(ctx):
        for bias, mult, shift in [(-5, 1 << 14, 62), (2**31 - 1, 2**15 - 1, 1), (-2**31, 20000, 31)]:
            ctx.set(host_data, pack_param(bias, mult, shift) | (0xABCDEF << 64))
            assert (ctx.get(entry.bias), ctx.get(entry.mult), ctx.get(entry.shift)) == (bias, mult, shift)
        for bias, mult, shift in [(-5, (1 << 30) + 7, -31), (2**27 - 1, 2**31 - 1, 30)]:
            ctx.set(host_data, pack_param(bias, mult, shift, "tflite") | (0xABCDEF << 64))
            assert (ctx.get(tflite.bias), ctx.get(tflite.mult) + (1 << 30), ctx.get(tflite.shift)) \
                == (bias, mult, shift)

    simulate(m, testbench)


# Bank arbiter ------------------------------------------------------------------------------

@pytest.mark.parametrize("same_banks", [False, True])
@pytest.mark.parametrize("lanes,banks", [(8, 8), (5, 8), (4, 4), (3, 1)])
def test_bank_arbiter_serves_one_lane_per_bank_lowest_first(lanes, banks, same_banks):
    dut = BankArbiter(lanes, banks, same_banks=same_banks)
    rng = np.random.default_rng(lanes * 10 + banks)

    async def testbench(ctx):
        for _ in range(60):
            pending = int(rng.integers(0, 1 << lanes))
            bank = rng.integers(0, banks, lanes)
            if same_banks:
                ctx.set(dut.same, sum(int(bank[i] == bank[j]) << BankArbiter.pair(i, j)
                                      for j in range(lanes) for i in range(j)))
            else:
                ctx.set(dut.bank, [int(b) for b in bank])
            counts = np.bincount(bank[[j for j in range(lanes) if pending >> j & 1]], minlength=banks)
            cycles = 0
            while pending:
                ctx.set(dut.pending, pending)
                served, remaining = ctx.get(dut.served), ctx.get(dut.remaining)
                assert served & ~pending == 0 and remaining == pending & ~served
                for b in range(banks):
                    wanting = [j for j in range(lanes) if pending >> j & 1 and bank[j] == b]
                    got = [j for j in range(lanes) if served >> j & 1 and bank[j] == b]
                    assert got == wanting[:1]
                pending, cycles = remaining, cycles + 1
            assert cycles == counts.max(initial=0)

    simulate(dut, testbench)


def test_bank_arbiter_rejects_bad_parameters():
    with pytest.raises(ValueError, match="power of two"):
        BankArbiter(4, 6)
    with pytest.raises(ValueError, match="lanes"):
        BankArbiter(0, 8)


# Requantizer ---------------------------------------------------------------------------------

def contract(acc, bias, mult, shift, zp, lo, hi):
    return int(requantize(np.array([[[acc + bias]]]), [mult], [shift], zp, lo, hi)[0, 0, 0])


REQUANT_CASES = [
    # acc, bias, mult, shift, zp, lo, hi
    (1, 0, 1 << 14, 15, 0, -128, 127),            # +0.5 -> 1 (tie rounds up)
    (-1, 0, 1 << 14, 15, 0, -128, 127),           # -0.5 -> 0
    (3, 0, 1 << 14, 15, 0, -128, 127),            # +1.5 -> 2
    (-3, 0, 1 << 14, 15, 0, -128, 127),           # -1.5 -> -1
    (-5, 0, 1 << 14, 16, 0, -128, 127),           # -1.25 -> -1
    ((1 << 31) - 1, 0, (1 << 15) - 1, 62, 0, -128, 127),
    (-(1 << 31), 0, (1 << 15) - 1, 62, 0, -128, 127),
    (-(1 << 31), 0, (1 << 15) - 1, 1, 5, -128, 127),   # saturates low
    ((1 << 31) - 1, 0, (1 << 15) - 1, 1, 5, -128, 127),
    ((1 << 31) - 1, 0, (1 << 15) - 1, 46, -128, -128, 127),
    (-(1 << 31) + 5000, -4000, 1 << 14, 40, 3, -128, 127),
    (1000, -2000, 20000, 10, -128, -128, 127),        # ReLU floor (lo = zp)
    (123456, 789, 30000, 24, 7, 0, 100),
    (50, 0, 1 << 14, 1, 0, 10, -10),                  # lo > hi gives hi
    (-50, 0, 1 << 14, 1, 0, 10, -10),
] + [
    # Around the 11-bit saturation of (acc * mult) >> (shift - 1): with mult = 2^14 and
    # shift = 15 that value is acc itself.
    (q, 0, 1 << 14, 15, zp, lo, hi)
    for q in (1022, 1023, 1024, 1025, 2047, 2048, 4096, -1023, -1024, -1025, -1026, -2049, -4096)
    for zp, lo, hi in ((-128, -128, 127), (127, -128, 127), (0, 100, -100))
]


@pytest.mark.parametrize("multiplier", ["generic", "booth"])
@pytest.mark.parametrize("lanes,latency", [(1, 4), (3, 4), (2, 5), (1, 5)])
def test_requantizer_matches_the_contract(lanes, latency, multiplier):
    config = AcceleratorConfig(requant_latency=latency)
    dut = requantizer(config, lanes, multiplier=multiplier)
    assert dut.latency == latency
    rng = np.random.default_rng(lanes)
    cases = list(REQUANT_CASES)
    for _ in range(60):
        bias = int(rng.integers(-(1 << 20), 1 << 20))
        cases.append((int(rng.integers(-(1 << 30), 1 << 30)), bias, int(rng.integers(1 << 14, 1 << 15)),
                      int(rng.integers(1, 63)), int(rng.integers(-128, 128)), -128, 127))
    # Each cycle carries `lanes` accumulators sharing one parameter set.
    vectors = []
    for acc, bias, mult, shift, zp, lo, hi in cases:
        accs = [acc] + [int(rng.integers(-(1 << 24), 1 << 24)) for _ in range(lanes - 1)]
        vectors.append((accs, bias, mult, shift, zp, lo, hi))
    results = []

    async def driver(ctx):
        for accs, bias, mult, shift, zp, lo, hi in vectors:
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.acc, accs)
            ctx.set(dut.bias, bias)
            ctx.set(dut.mult, mult)
            ctx.set(dut.shift, shift)
            # zp/lo/hi are held for an instruction: let each case drain before changing them.
            ctx.set(dut.zp, zp)
            ctx.set(dut.lo, lo)
            ctx.set(dut.hi, hi)
            await ctx.tick()
            ctx.set(dut.i_valid, 0)
            await ctx.tick().repeat(dut.latency - 1)
            assert ctx.get(dut.o_valid) == 1
            results.append([ctx.get(dut.y[l]) for l in range(lanes)])

    simulate(dut, driver)
    for (accs, bias, mult, shift, zp, lo, hi), got in zip(vectors, results):
        want = [contract(acc, bias, mult, shift, zp, lo, hi) for acc in accs]
        assert got == want, (accs, bias, mult, shift, zp, lo, hi)


@pytest.mark.parametrize("multiplier", ["generic", "booth"])
@pytest.mark.parametrize("latency", [4, 5])
def test_requantizer_latency_throughput_and_bypass(latency, multiplier):
    config = AcceleratorConfig(requant_latency=latency)
    dut = requantizer(config, 2, multiplier=multiplier)
    assert dut.latency == latency
    rng = np.random.default_rng(7)
    inputs = [[int(v) for v in rng.integers(-(1 << 22), 1 << 22, 2)] for _ in range(20)]
    params = [(int(rng.integers(-999, 999)), int(rng.integers(1 << 14, 1 << 15)), int(rng.integers(12, 30)))
              for _ in range(20)]
    seen = []

    async def driver(ctx):
        ctx.set(dut.zp, -3)
        ctx.set(dut.lo, -128)
        ctx.set(dut.hi, 127)
        for cycle, (accs, (bias, mult, shift)) in enumerate(zip(inputs, params)):
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.acc, accs)
            ctx.set(dut.bias, bias)
            ctx.set(dut.mult, mult)
            ctx.set(dut.shift, shift)
            await ctx.tick()
        ctx.set(dut.i_valid, 0)
        await ctx.tick().repeat(dut.latency + 2)
        # Bypass: the low byte of acc, whatever the parameters.
        ctx.set(dut.bypass, 1)
        ctx.set(dut.acc, [-77 & 0xFF | 0x1200, 45])
        ctx.set(dut.i_valid, 1)
        await ctx.tick()
        ctx.set(dut.i_valid, 0)
        await ctx.tick().repeat(dut.latency - 1)
        assert ctx.get(dut.o_valid) == 1
        assert [ctx.get(dut.y[0]), ctx.get(dut.y[1])] == [-77, 45]

    async def monitor(ctx):
        cycle = 0
        async for _, _, valid, y in ctx.tick().sample(dut.o_valid, dut.y):
            if valid and len(seen) < len(inputs):
                seen.append((cycle, [y[0], y[1]]))
            cycle += 1

    simulate(dut, driver, background=[monitor])
    # One result per cycle, `latency` cycles after its inputs (inputs in cycles 0..19).
    assert [cycle for cycle, _ in seen] == [c + latency for c in range(len(inputs))]
    for (accs, (bias, mult, shift)), (_, got) in zip(zip(inputs, params), seen):
        assert got == [contract(acc, bias, mult, shift, -3, -128, 127) for acc in accs]


# Max-pool unit -------------------------------------------------------------------------------

@pytest.mark.parametrize("pipelined", [False, True])
def test_max_pool_unit_maxima_and_hold(pipelined):
    """Maxima per lane; a last beat waits while the previous row has not been taken (or,
    with the input register, is still being compared); the row comes ``latency`` cycles
    after its last beat."""
    config = AcceleratorConfig(rows=2, cols=4, pipeline_registers=pipelined)
    dut = MaxPool(config)
    assert dut.latency == (1 if pipelined else 2)
    rng = np.random.default_rng(3)
    tiles = [rng.integers(-128, 128, (int(rng.integers(1, 6)), config.cols)) for _ in range(12)]
    rows, last_taken, row_offered = [], [], []

    async def producer(ctx):
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycle = 1
        for tile in tiles:
            for k, beat in enumerate(tile):
                ctx.set(dut.operands.payload, {"a": [0] * config.rows, "b": [int(v) for v in beat],
                                               "last": k == len(tile) - 1})
                ctx.set(dut.operands.valid, 1)
                while True:
                    _, _, ready, pending = await ctx.tick().sample(dut.operands.ready, dut.results.valid)
                    if k == len(tile) - 1:
                        assert not (ready and pending)    # a last beat waits for the previous row
                        if pipelined:
                            assert ready == (not pending)
                        if ready:
                            last_taken.append(cycle)
                    cycle += 1
                    if ready:
                        break
        ctx.set(dut.operands.valid, 0)

    async def consumer(ctx):
        cycle, was_valid = 0, False
        while len(rows) < len(tiles):
            ready = int(rng.random() < 0.4)
            ctx.set(dut.results.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.results.valid, dut.results.payload)
            if valid and not was_valid:
                row_offered.append(cycle)
            was_valid = valid and not ready
            if valid and ready:
                assert payload.row == 0 and payload.last == 1
                rows.append([payload.sums[j] for j in range(config.cols)])
            cycle += 1

    simulate(dut, producer, consumer)
    assert rows == [tile.max(axis=0).tolist() for tile in tiles]
    assert [o - t for o, t in zip(row_offered, last_taken)] == [dut.latency] * len(tiles)


# Window generator ------------------------------------------------------------------------------

class WindowBench(wiring.Component):
    """The window generator on an initialized activation buffer and weight memory."""

    def __init__(self, config, act, weights):
        self.window = window_generator(config)
        self.act = ActivationBuffer(config, init=[int(v) & 0xFF for v in act])
        self.weights = Memory(shape=8 * config.weight_word_bytes, depth=len(weights),
                              init=[weight_word(row) for row in weights])
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = self.window
        m.submodules.act = act = self.act
        m.submodules.weights = weights = self.weights
        rd = weights.read_port()
        m.d.comb += [act.rd_addr.eq(window.bank_addr), act.rd_en.eq(window.bank_en),
                     window.bank_data.eq(act.rd_data),
                     rd.addr.eq(window.w_addr), rd.en.eq(window.w_en[0])]
        if self.window.config.weight_read_latency == 2:      # the weight buffer's register
            with m.If(window.w_en[0]):
                m.d.sync += window.w_data.eq(rd.data)
        else:
            m.d.comb += window.w_data.eq(rd.data)
        return m


def engine_regs(config, kind, seed=0, **shape):
    """Registers of one CONV or POOL from the program builder."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(config, rng)
    if kind == "conv":
        C, H, W, M, k, pad, stride = (shape[key] for key in ("C", "H", "W", "M", "k", "pad", "stride"))
        inp = FMap(shape.get("in_base", 3), C, H, W, pitch=shape.get("pitch"), pad=(pad,) * 4)
        out = FMap(inp.end + 5, M, (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1,
                   pitch=shape.get("out_pitch"))
        b.weight_words = shape.get("w_base", 0)
        b.conv(inp, out, random_weights(rng, M, C, k, k), stride=(stride, stride), lanes=shape.get("lanes"),
               zp_out=int(rng.integers(-20, 20)))
    else:
        C, H, W, k, stride = (shape[key] for key in ("C", "H", "W", "k", "stride"))
        inp = FMap(7, C, H, W, pitch=shape.get("pitch"))
        out = FMap(inp.end + 3, C, (H - k) // stride + 1, (W - k) // stride + 1, pitch=shape.get("out_pitch"))
        b.pool(inp, out, k, stride, lanes=shape.get("lanes"))
    regs = {reg: 0 for reg in Reg}
    regs.update(b.regs)
    weights = np.concatenate(b.weights) if b.weights else np.zeros((1, config.rows), np.int8)
    return regs, weights, b.params


def _most_in_one_bank(banks):
    return max(1, np.bincount(banks, minlength=1).max(initial=0))


def _pair_beat_cycles(config, regs, first, second):
    """Gather cycles of a beat whose valid lanes read ``first`` and ``second`` (None: one read):
    without the pipeline registers the most reads in one bank; with them, a lane's two reads in
    a superbank's two banks (``b``, ``b + banks / 2``) the most lanes in one superbank, else
    two passes of the most lanes in one bank."""
    banks = config.act_banks
    if second is None:
        return _most_in_one_bank(first % banks)
    if config.bank_access == "arbitrated":
        return _most_in_one_bank(np.concatenate([first, second]) % banks)
    if banks >= 2 and regs[Reg.IN_CSTRIDE] % banks == banks // 2:
        assert np.all(second % banks == first % banks ^ banks // 2)
        return _most_in_one_bank(first % (banks // 2))
    return 2 * _most_in_one_bank(first % banks)


def window_model(config, regs):
    """Expected beats ``(g, t, k, addresses, valid, when)``, the cycle each is offered with ready
    high: one a ``(c, ky, kx)``, or with pair products one a ``(c, ky, kx)`` of even ``c``;
    ``addresses`` holds the lanes' addresses of ``c`` and of ``c + 1`` (None past ``K_C``)."""
    act_bytes, lanes = config.act_buffer_bytes, regs[Reg.LANES]
    k_c, positions = regs[Reg.K_C], regs[Reg.K_H] * regs[Reg.K_W]
    pairs = config.pair_products
    beats = []
    E = config.first_beat_cycle(lanes)
    for g in range(regs[Reg.GROUPS]):
        addresses, valid = engine_read_addresses(regs, g, act_bytes)
        for t in range(regs[Reg.TILES]):
            when = E
            for c in range(0, k_c, 2 if pairs else 1):
                for p in range(positions):
                    first = addresses[t, c * positions + p]
                    second = None
                    if pairs and (c + 1 < k_c or (config.bank_access == "scheduled" and k_c > 1)):
                        second = (first + regs[Reg.IN_CSTRIDE]) % act_bytes
                    when += _pair_beat_cycles(config, regs, first[valid[t]],
                                              None if second is None else second[valid[t]])
                    k = (c // 2 if pairs else c) * positions + p
                    channels = (first, second if c + 1 < k_c else None)
                    beats.append((g, t, k, channels, valid[t], when + config.operand_latency - 1))
            E += max(when - E, lanes + 1)      # perf: a tile follows LANES + 1 cycles after at the earliest
    return beats


WINDOW_CASES = [
    # config, kind, shape
    (dict(rows=2, cols=8), "conv", dict(C=2, H=5, W=6, M=3, k=3, pad=1, stride=1, pitch=9)),     # conflicts
    (dict(rows=2, cols=8), "conv", dict(C=1, H=7, W=7, M=2, k=3, pad=0, stride=2, lanes=5)),
    (dict(rows=3, cols=5), "conv", dict(C=3, H=4, W=3, M=4, k=2, pad=1, stride=1, w_base=9)),
    (dict(rows=2, cols=8), "pool", dict(C=3, H=6, W=4, k=2, stride=2)),                          # LANES > OUT_W
    (dict(rows=2, cols=4), "conv", dict(C=1, H=3, W=3, M=2, k=3, pad=0, stride=1, lanes=1)),     # dense-like
    (dict(rows=2, cols=8, pipeline_registers=True), "conv",
     dict(C=2, H=5, W=6, M=3, k=3, pad=1, stride=1, pitch=9)),
    (dict(rows=2, cols=8, pipeline_registers=True), "pool", dict(C=3, H=6, W=4, k=2, stride=2)),
    # Each channel a group 25 bytes on (1 mod the 8 banks): the bank schedule follows the
    # group's base from the walk's first lane on.
    (dict(rows=2, cols=8, pipeline_registers=True), "pool", dict(C=3, H=5, W=5, k=1, stride=1)),
    # Every lane in one bank: each beat takes LANES gather cycles, in both settings.
    (dict(rows=2, cols=4), "pool", dict(C=1, H=8, W=16, k=1, stride=4)),
    (dict(rows=2, cols=4, pipeline_registers=True), "pool", dict(C=1, H=8, W=16, k=1, stride=4)),
    # Three weight blocks: three copies of the weight read enable besides the banks'.
    (dict(rows=2, cols=8, pipeline_registers=True, weight_buffer_bytes=2 * 3 * WEIGHT_BLOCK_WORDS),
     "conv", dict(C=2, H=5, W=6, M=3, k=3, pad=1, stride=1, pitch=9)),
    # Pair products: two channels a beat. With the pipeline registers a channel stride of
    # 8 (mod the 16 banks) puts a lane's two reads in one superbank (a stride-2 walk: 2-way
    # conflicts); others take two passes (an odd K_C's last beat reads past it; 2-way
    # conflicts in each pass); K_C 1 reads
    # one byte by bank; one bank, every pair in two passes.
    (dict(rows=2, cols=8, act_bank_factor=2, pipeline_registers=True, pair_products=True), "conv",
     dict(C=3, H=5, W=9, M=3, k=2, pad=0, stride=2, cstride=8 + 16 * 3)),
    (dict(rows=2, cols=8, act_bank_factor=2, pipeline_registers=True, pair_products=True), "conv",
     dict(C=3, H=5, W=6, M=3, k=3, pad=1, stride=1, pitch=9, cstride=73)),
    (dict(rows=2, cols=8, act_bank_factor=2, pipeline_registers=True, pair_products=True), "conv",
     dict(C=2, H=5, W=9, M=3, k=2, pad=0, stride=2, cstride=51)),
    (dict(rows=2, cols=8, act_bank_factor=2, pipeline_registers=True, pair_products=True), "conv",
     dict(C=4, H=4, W=6, M=2, k=1, pad=0, stride=1, cstride=24)),
    (dict(rows=2, cols=4, pipeline_registers=True, pair_products=True), "pool",
     dict(C=2, H=6, W=4, k=2, stride=2)),
    (dict(rows=2, cols=1, pipeline_registers=True, pair_products=True), "conv",
     dict(C=3, H=3, W=3, M=2, k=2, pad=0, stride=1, cstride=11)),
    (dict(rows=2, cols=4, pair_products=True), "conv", dict(C=3, H=4, W=5, M=2, k=2, pad=1, stride=1)),
]


@pytest.mark.parametrize("case", range(len(WINDOW_CASES)))
@pytest.mark.parametrize("stalls", [False, True])
def test_window_generator_gathers_the_engine_walk(case, stalls):
    overrides, kind, shape = WINDOW_CASES[case]
    config = AcceleratorConfig(**{"act_buffer_bytes": 1024, "weight_buffer_bytes": 256 * overrides["rows"],
                                  **overrides})
    cstride = shape.pop("cstride", None)
    rng = np.random.default_rng(case)
    if config.pair_products:
        # The walk's addresses alone: random weight words, and any channel stride.
        regs, _, _ = engine_regs(config.replace(pair_products=False), kind, seed=case, **shape)
        weights = rng.integers(-128, 128, (64, config.weight_word_bytes))
        if cstride is not None:
            regs[Reg.IN_CSTRIDE] = cstride
    else:
        regs, weights, _ = engine_regs(config, kind, seed=case, **shape)
    act = rng.integers(-128, 128, config.act_buffer_bytes)
    every_copy = (1 << config.weight_blocks) - 1
    words = np.zeros((config.weight_buffer_words, config.weight_word_bytes), np.int8)
    words[:len(weights)] = weights
    bench = WindowBench(config, act, words)
    dut = bench.window
    expected = window_model(config, regs)
    seen = []

    async def testbench(ctx):
        ctx.set(dut.regs, hw_regs(config, regs))
        ctx.set(dut.start, 1)
        ctx.set(dut.operands.ready, 1)
        cycle = 0
        while len(seen) < len(expected):
            ready = 1
            if stalls and ctx.get(dut.operands.payload.last):
                ready = int(rng.random() < 0.3)
            ctx.set(dut.operands.ready, ready)
            _, _, valid, payload, w_en, bank_en = await ctx.tick().sample(
                dut.operands.valid, dut.operands.payload, dut.w_en, dut.bank_en)
            ctx.set(dut.start, 0)
            # The read enable's copies (one per weight block, one for the banks) are equal.
            assert w_en == every_copy * bank_en, (cycle, w_en, bank_en)
            if valid and ready:
                seen.append((cycle, [payload.a[i] for i in range(config.rows)],
                             [payload.b[j] for j in range(config.cols)], payload.last))
            cycle += 1
            assert cycle < 20_000
        await ctx.tick().repeat(5)
        assert not ctx.get(dut.busy)

    simulate(bench, testbench)
    assert len(seen) == len(expected)
    K = perf.engine_beats(regs, config)
    for (g, t, k, (first, second), valid, when), (cycle, a, b, last) in zip(expected, seen):
        word = (regs[Reg.W_BASE] + g * regs[Reg.W_GSTEP] + k) % config.weight_buffer_words
        if config.pair_products:         # two bytes a row and a lane, the first channel low
            a = [byte for value in a for byte in (value & 0xFF, (value >> 8) & 0xFF)]
            assert a == words[word].astype(np.uint8).tolist(), (g, t, k)
            for j in range(regs[Reg.LANES]):
                if valid[j]:
                    assert b[j] & 0xFF == act[first[j]] & 0xFF, (g, t, k, j)
                    if second is not None:
                        assert (b[j] >> 8) & 0xFF == act[second[j]] & 0xFF, (g, t, k, j)
        else:
            assert a == words[word].tolist(), (g, t, k)
            for j in range(regs[Reg.LANES]):
                if valid[j]:
                    assert b[j] == act[first[j]], (g, t, k, j)
        assert last == (k == K - 1)
        if not stalls:
            assert cycle == when, (g, t, k)


# Result writer -------------------------------------------------------------------------------

WRITER_CASES = [
    (dict(rows=2, cols=8), "conv", dict(C=1, H=5, W=6, M=3, k=3, pad=1, stride=1)),
    (dict(rows=2, cols=8, requant_lanes=4), "conv", dict(C=2, H=4, W=3, M=3, k=1, pad=0, stride=1,
                                                         out_pitch=8)),          # write conflicts
    (dict(rows=3, cols=6, requant_lanes=3), "conv", dict(C=1, H=4, W=5, M=5, k=2, pad=0, stride=1, lanes=5)),
    (dict(rows=2, cols=8, requant_lanes=2), "pool", dict(C=2, H=6, W=6, k=2, stride=2, out_pitch=10)),
    # The look-ahead walk of the pipeline registers: the same bytes, cycles and takes.
    (dict(rows=2, cols=8, requant_lanes=4, pipeline_registers=True), "conv",
     dict(C=2, H=4, W=3, M=3, k=1, pad=0, stride=1, out_pitch=8)),
    (dict(rows=3, cols=6, requant_lanes=3, pipeline_registers=True), "conv",
     dict(C=1, H=4, W=5, M=5, k=2, pad=0, stride=1, lanes=5)),
    (dict(rows=2, cols=8, pipeline_registers=True), "pool", dict(C=2, H=6, W=6, k=2, stride=2, out_pitch=10)),
    # Its lanes step in closed form: rows narrower than a lane group (one, two or three
    # rows' wraps per step), and tiles whose LANES a lane group does not divide.
    (dict(rows=2, cols=8, requant_lanes=2, pipeline_registers=True), "conv",
     dict(C=1, H=12, W=1, M=3, k=1, pad=0, stride=1, out_pitch=3)),
    (dict(rows=2, cols=8, requant_lanes=4, pipeline_registers=True), "conv",
     dict(C=1, H=7, W=2, M=3, k=1, pad=0, stride=1, lanes=6, out_pitch=5)),
    (dict(rows=3, cols=6, requant_lanes=3, pipeline_registers=True), "conv",
     dict(C=1, H=5, W=2, M=4, k=1, pad=0, stride=1, lanes=4)),
    (dict(rows=2, cols=8, requant_lanes=8, pipeline_registers=True), "conv",
     dict(C=1, H=9, W=3, M=3, k=1, pad=0, stride=1, lanes=7, out_pitch=4)),
]


@pytest.mark.parametrize("factory, arbitrated, scheduled, name", [
    (window_generator, ArbitratedWindowGenerator, ScheduledWindowGenerator, "window generator"),
    (result_writer, ArbitratedResultWriter, ScheduledResultWriter, "result writer"),
])
def test_factory_picks_the_variant_of_the_bank_access(factory, arbitrated, scheduled, name):
    plain, pipelined = AcceleratorConfig(), AcceleratorConfig(pipeline_registers=True)
    assert type(factory(plain)) is arbitrated
    assert type(factory(pipelined)) is scheduled
    with pytest.raises(ValueError, match=rf"^the scheduled {name} needs bank_access 'scheduled', "
                                         r"not 'arbitrated'$"):
        scheduled(plain)
    with pytest.raises(ValueError, match=rf"^the arbitrated {name} needs bank_access 'arbitrated', "
                                         r"not 'scheduled'$"):
        arbitrated(pipelined)
    with pytest.raises(TypeError, match=r"^config must be an AcceleratorConfig, not 4$"):
        factory(4)

@pytest.mark.parametrize("case", range(len(WRITER_CASES)))
def test_result_writer_addresses_values_and_timing(case):
    check_result_writer(*WRITER_CASES[case], seed=case)


def random_writer_case(rng, pipelined):
    """A random shape for the result writer: lane groups of 1-8 lanes, rows narrower and wider
    than a group, LANES that a group does not divide, padded output rows."""
    rows, cols, lanes_per_group = [(2, 8, 1), (2, 8, 2), (2, 8, 4), (2, 8, 8), (3, 6, 3),
                                   (3, 6, 2), (2, 4, 4)][rng.integers(7)]
    overrides = dict(rows=rows, cols=cols, requant_lanes=lanes_per_group, pipeline_registers=pipelined)
    H, W = (int(v) for v in rng.integers(1, 9, 2))
    k = int(rng.integers(1, min(H, W, 3) + 1))
    shape = dict(C=int(rng.integers(1, 3)), H=H, W=W, k=k, stride=int(rng.integers(1, 3)))
    out_w = (W - k) // shape["stride"] + 1
    if rng.random() < 0.5:
        shape["out_pitch"] = out_w + int(rng.integers(0, 4))
    if rng.random() < 0.5:
        shape["lanes"] = int(rng.integers(1, cols + 1))
    if rng.random() < 0.3:
        return overrides, "pool", shape
    shape.update(M=int(rng.integers(1, 7)), pad=0)
    return overrides, "conv", shape


@pytest.mark.parametrize("pipelined", [False, True])
def test_result_writer_random_shapes(pipelined):
    rng = np.random.default_rng(17 + pipelined)
    for case in range(24):
        overrides, kind, shape = random_writer_case(rng, pipelined)
        check_result_writer(overrides, kind, shape, seed=case)


def check_result_writer(overrides, kind, shape, seed):
    """The writer's bytes against the ISA's address formula and the requantizer's contract, its
    row takes against fpganet.perf's lane-group costs, ``done`` after the final write."""
    config = AcceleratorConfig(act_buffer_bytes=1024, **overrides)
    regs, _, params = engine_regs(config, kind, seed=seed, **shape)
    pool = kind == "pool"
    dut = result_writer(config)
    rng = np.random.default_rng(seed)
    rows = 1 if pool else config.rows
    groups, tiles, lanes = regs[Reg.GROUPS], regs[Reg.TILES], regs[Reg.LANES]
    K = regs[Reg.K_C] * regs[Reg.K_H] * regs[Reg.K_W]
    bound = 128 if pool else int(np.sqrt(K) * 64 * 64 * 3)
    sums = rng.integers(-bound, bound, (groups, tiles, rows, config.cols))
    params = np.array(params + [0] * 8, dtype=np.uint64)
    writes = {}
    takes = []
    done_cycles = []

    async def param_memory(ctx):
        async for _, _, en, addr in ctx.tick().sample(dut.param_en, dut.param_addr):
            if en:
                bias, mult, shift = unpack_param(params[addr % len(params)])
                ctx.set(dut.param_data, {"bias": bias, "mult": mult, "shift": shift})

    async def testbench(ctx):
        ctx.set(dut.regs, hw_regs(config, regs))
        ctx.set(dut.pool, pool)
        ctx.set(dut.start, 1)
        queue = [(sums[g, t, i], i) for g in range(groups) for t in range(tiles) for i in range(rows)]
        cycle = 0
        while not done_cycles:
            if queue and cycle >= dut.start_latency:
                row_sums, i = queue[0]
                ctx.set(dut.results.payload, {"sums": [int(v) for v in row_sums], "row": i,
                                              "last": i == rows - 1})
                ctx.set(dut.results.valid, 1)
            else:
                ctx.set(dut.results.valid, 0)
            _, _, valid, ready, en, addr, data, done = await ctx.tick().sample(
                dut.results.valid, dut.results.ready, dut.wr_en, dut.wr_addr, dut.wr_data, dut.done)
            ctx.set(dut.start, 0)
            if valid and ready:
                queue.pop(0)
                takes.append(cycle)
            for b in range(config.act_banks):
                if en >> b & 1:
                    address = addr[b] * config.act_banks + b
                    assert address not in writes, f"byte {address} written twice"
                    writes[address] = (data[b] ^ 0x80) - 0x80
            if done:
                done_cycles.append(cycle)
            cycle += 1
            assert cycle < 20_000

    simulate(dut, testbench, background=[param_memory])

    # Expected bytes, from the ISA's address formula.
    expected = {}
    zp, lo, hi = (np.int8(np.uint8((regs[Reg.QUANT] >> s) & 0xFF)) for s in (0, 8, 16))
    for g in range(groups):
        for t in range(tiles):
            valid, _, out_off = engine_lanes(regs, t)
            for i in range(rows):
                m = g * rows + i
                if not pool and m >= regs[Reg.M]:
                    continue
                for j in range(lanes):
                    if not valid[j]:
                        continue
                    address = (regs[Reg.OUT_BASE] + g * regs[Reg.OUT_GSTEP] + i * regs[Reg.OUT_CSTRIDE]
                               + out_off[j]) % config.act_buffer_bytes
                    if pool:
                        expected[address] = int(sums[g, t, 0, j])
                    else:
                        bias, mult, shift = unpack_param(params[regs[Reg.P_BASE] + m])
                        expected[address] = contract(int(sums[g, t, i, j]), bias, mult, shift, int(zp), int(lo),
                                                     int(hi))
    assert writes == expected
    assert len(set(expected.values())) > len(expected) // 4      # not all saturated

    # Timing: rows offered back to back are taken after their lane groups' cycles.
    _, W = perf.engine_tile_costs(regs, config, pool)
    per_tile = W.reshape(-1)
    tile_done = [takes[(n + 1) * rows - 1] for n in range(len(per_tile))]
    assert tile_done[0] == dut.start_latency + per_tile[0] - 1
    assert np.diff(tile_done).tolist() == per_tile[1:].tolist()
    assert done_cycles == [takes[-1] + dut.latency]


# Controller ----------------------------------------------------------------------------------

@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("delay", [0, 1])
def test_controller_restarts_from_instruction_zero(pipelined, delay):
    """A second run started in the cycle ``done`` rises (or the next) runs instruction 0 again:
    with the pipeline registers the word is read ahead while idle, and END reads it already."""
    program = [Instruction(Opcode.SET, Reg.FILL_VALUE, 5), Instruction(Opcode.END),
               Instruction(Opcode.SET, Reg.FILL_VALUE, 9), Instruction(Opcode.END)]
    config = AcceleratorConfig(pipeline_registers=pipelined)
    m = Module()
    m.submodules.ctrl = ctrl = Controller(config)
    m.submodules.memory = memory = Memory(shape=INSTRUCTION_BITS, depth=config.program_words,
                                          init=[encode(i) for i in program])
    rd = memory.read_port()
    m.d.comb += [rd.addr.eq(ctrl.prog_addr), rd.en.eq(ctrl.prog_en), ctrl.prog_data.eq(rd.data)]
    runs = []

    async def testbench(ctx):
        await ctx.tick().repeat(3)
        for run in range(2):
            ctx.set(ctrl.start, 1)
            await ctx.tick()
            ctx.set(ctrl.start, 0)
            await ctx.tick()
            while not ctx.get(ctrl.done):
                await ctx.tick()
            runs.append((ctx.get(ctrl.regs.fill_value), ctx.get(ctrl.cycles)))
            for _ in range(delay):
                await ctx.tick()

    simulator = Simulator(m)
    simulator.add_clock(1e-8)
    simulator.add_testbench(testbench)
    simulator.run()
    assert runs == [(5, 2), (5, 2)]
