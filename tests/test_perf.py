"""The performance model: conflict costs against a brute-force count, instruction cycles,
STAMP values, register checks and the LeNet-5 conv layers' closed form."""

import numpy as np
import pytest

from fpganet import perf
from fpganet.config import AcceleratorConfig
from fpganet.isa import (ENGINE_COUNTS, REGION_COUNTS, Instruction, Opcode, Reg, count_width, encode,
                         region_name)
from fpganet.isasim import engine_lanes, engine_read_addresses

from accel_programs import ProgramBuilder, lenet_program


def brute_force_costs(regs, config, pool):
    """B and W from every address of every beat and every write."""
    act_bytes, banks, R = config.act_buffer_bytes, config.act_banks, config.requant_lanes
    groups, tiles, lanes = regs[Reg.GROUPS], regs[Reg.TILES], regs[Reg.LANES]
    rows = 1 if pool else config.rows
    B = np.zeros((groups, tiles), int)
    W = np.zeros((groups, tiles), int)
    for g in range(groups):
        addresses, valid = engine_read_addresses(regs, g, act_bytes)
        for t in range(tiles):
            for k, second in _beats(regs, config):
                reads = addresses[t, k][valid[t]]
                seconds = (reads + regs[Reg.IN_CSTRIDE]) % act_bytes
                if second and config.bank_access == "scheduled":
                    B[g, t] += _pipelined_pair_cycles(reads % banks, seconds % banks, banks,
                                                      regs[Reg.IN_CSTRIDE] % banks == banks // 2)
                    continue
                if second:
                    reads = np.concatenate([reads, seconds])
                B[g, t] += max(1, np.bincount(reads % banks, minlength=1).max())
            _, _, out_off = engine_lanes(regs, t)
            for i in range(rows):
                live = pool or g * rows + i < regs[Reg.M]
                base = regs[Reg.OUT_BASE] + g * regs[Reg.OUT_GSTEP] + i * regs[Reg.OUT_CSTRIDE]
                for start in range(0, lanes, R):
                    lanes_here = [j for j in range(start, min(start + R, lanes)) if valid[t, j] and live]
                    targets = [(base + out_off[j]) % act_bytes % banks for j in lanes_here]
                    W[g, t] += max(1, np.bincount(targets, minlength=1).max())
    return B, W


def _pipelined_pair_cycles(first, second, banks, superbank):
    """Cycles of a beat whose lanes read banks ``first`` and ``second`` through the pipelined
    window: in a ``superbank`` instruction each lane's two banks are a pair
    ``{b, b + banks / 2}``, read in one cycle, a lane a cycle in each pair; else the first
    reads, then the second ones."""
    if banks >= 2 and superbank:
        assert np.all(second == first ^ (banks // 2))
        return max(1, np.bincount(np.minimum(first, second), minlength=1).max())
    return 2 * max(1, np.bincount(first, minlength=1).max())


def _beats(regs, config):
    """``(k, second)`` for each beat of a tile: its kernel step ``k`` (channel-major) and whether
    it reads each lane's byte ``IN_CSTRIDE`` on too: with pair products, channel ``c + 1`` of
    the pair, and with the pipeline registers also past the last channel of an odd ``K_C > 1``."""
    k_c, positions = regs[Reg.K_C], regs[Reg.K_H] * regs[Reg.K_W]
    if not config.pair_products:
        return [(k, False) for k in range(k_c * positions)]
    return [(c * positions + p, c + 1 < k_c or (config.bank_access == "scheduled" and k_c > 1))
            for c in range(0, k_c, 2) for p in range(positions)]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pairs", ["single", "pairs", "pipelined pairs"])
def test_tile_costs_equal_a_brute_force_count(seed, pairs):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 5)), int(rng.choice([2, 4, 5, 8]))
    R = int(rng.choice([d for d in range(1, cols + 1) if cols % d == 0]))
    config = AcceleratorConfig(rows=rows, cols=cols, requant_lanes=R, act_buffer_bytes=2048,
                               pair_products=pairs != "single", pipeline_registers=pairs == "pipelined pairs")
    regs = {reg: 0 for reg in Reg}
    lanes = int(rng.integers(1, cols + 1))
    npix = int(rng.integers(1, 30))
    regs.update({
        Reg.IN_BASE: int(rng.integers(0, 4096)), Reg.IN_PITCH: int(rng.integers(1, 40)),
        Reg.IN_CSTRIDE: int(rng.integers(0, 500)), Reg.IN_GSTEP: int(rng.integers(0, 300)),
        Reg.K_C: int(rng.integers(1, 4)), Reg.K_H: int(rng.integers(1, 4)), Reg.K_W: int(rng.integers(1, 4)),
        Reg.IN_ROWSTEP: int(rng.integers(1, 120)), Reg.STRIDE_X: int(rng.integers(1, 4)),
        Reg.OUT_W: int(rng.integers(1, 9)), Reg.NPIX: npix, Reg.LANES: lanes,
        Reg.TILES: -(-npix // lanes) + int(rng.integers(0, 2)), Reg.GROUPS: int(rng.integers(1, 4)),
        Reg.M: int(rng.integers(1, 10)), Reg.OUT_BASE: int(rng.integers(0, 4096)),
        Reg.OUT_PITCH: int(rng.integers(1, 20)), Reg.OUT_CSTRIDE: int(rng.integers(0, 300)),
        Reg.OUT_GSTEP: int(rng.integers(0, 300)),
    })
    for pool in (False, True):
        B, W = perf.engine_tile_costs(regs, config, pool)
        want_B, want_W = brute_force_costs(regs, config, pool)
        np.testing.assert_array_equal(B, want_B)
        np.testing.assert_array_equal(W, want_W)


def test_instruction_cycles_and_stamps():
    config = AcceleratorConfig()
    b = ProgramBuilder(config)
    b.region(Opcode.FILL, 0, 2, 100, 3, 10, 4, value=1)        # 7 SETs, 24 bytes
    b.op(Opcode.STAMP)
    b.set(Reg.LOOP_COUNT, 1)
    b.region(Opcode.OUTPUT, 0, 1, 0, 1, 0, 5)                  # 6 SETs, 5 bytes
    b.op(Opcode.STAMP)
    b.op(Opcode.LOOP, target=10)
    b.op(Opcode.END)
    result = perf.program_cycles(b.words(), config, max_steps=1000)
    # FILL: bytes + 3; OUTPUT: bytes + 4; STAMP 5; SET, LOOP, END 1.
    assert result.stamps == [7 + 27, 7 + 27 + 5 + 1 + 6 + 9, 7 + 27 + 5 + 1 + 6 + 9 + 5 + 1 + 6 + 9]
    assert result.stamp_offsets == [0, 9, 18] and result.output_bytes == 22
    assert result.total == result.stamps[-1] + 5 + 1 + 1
    assert result.by_opcode()["OUTPUT"] == 2 * 9 and result.by_opcode()["LOOP"] == 2


def test_register_limits_are_reported():
    config = AcceleratorConfig()
    program = [encode(Instruction(Opcode.SET, reg, 1)) for reg in
               (Reg.GROUPS, Reg.TILES, Reg.K_C, Reg.K_H, Reg.K_W, Reg.NPIX, Reg.OUT_W)]
    for value, message in [(9, "LANES = 9 outside 1..8"), (0, None)]:
        words = program + [encode(Instruction(Opcode.SET, Reg.LANES, value)),
                           encode(Instruction(Opcode.CONV)), encode(Instruction(Opcode.END))]
        if message:
            with pytest.raises(perf.ProgramError, match=message):
                perf.program_cycles(words, config)
        else:
            assert perf.program_cycles(words, config).by_opcode()["CONV"] == 1     # empty walk
    with pytest.raises(perf.ProgramError, match="END"):
        perf.program_cycles([encode(Instruction(Opcode.SET, Reg.LOOP_COUNT, 5)),
                             encode(Instruction(Opcode.LOOP, target=0))], config, max_steps=100)


@pytest.mark.parametrize("act_bytes,width", [(8192, 14), (6000, 14), (1 << 15, 16), (1 << 20, 16)])
def test_counts_beyond_their_registers_are_reported(act_bytes, width):
    """Counts have act_addr_width + 1 bits (16 at most): the largest fits, one more is refused."""
    config = AcceleratorConfig(act_buffer_bytes=act_bytes)
    assert count_width(config) == width
    end = encode(Instruction(Opcode.END))
    engine = [encode(Instruction(Opcode.SET, reg, 1)) for reg in
              (Reg.GROUPS, Reg.TILES, Reg.LANES, Reg.K_C, Reg.K_H, Reg.K_W, Reg.NPIX, Reg.OUT_W, Reg.M)]
    region = [encode(Instruction(Opcode.SET, reg, 1)) for reg in (Reg.IO_CHANNELS, Reg.IO_ROWS, Reg.IO_LEN)]
    for opcode, program, regs in [(Opcode.CONV, engine, ENGINE_COUNTS),
                                  (Opcode.POOL, engine, ENGINE_COUNTS),
                                  (Opcode.FILL, region, REGION_COUNTS),
                                  (Opcode.OUTPUT, region, REGION_COUNTS)]:
        for reg in regs:
            words = program + [encode(Instruction(Opcode.SET, reg, (1 << width) - 1)),
                               encode(Instruction(opcode)), end]
            perf.program_cycles(words, config)
            words[-3] = encode(Instruction(Opcode.SET, reg, 1 << width))
            name = region_name(reg) if regs is REGION_COUNTS else reg.name
            message = (f"^{opcode.name}: {name} = {1 << width:,} is beyond the hardware's "
                       f"{width}-bit counts \\(at most {(1 << width) - 1:,} with {act_bytes:,} bytes "
                       f"of activation buffer\\)$")
            with pytest.raises(perf.ProgramError, match=message):
                perf.program_cycles(words, config)
    # An empty walk reads no count: the hardware skips it, whatever the others hold.
    words = engine + [encode(Instruction(Opcode.SET, Reg.K_C, 1 << width)),
                      encode(Instruction(Opcode.SET, Reg.TILES, 0)), encode(Instruction(Opcode.CONV)), end]
    assert perf.program_cycles(words, config).by_opcode()["CONV"] == 1


def test_loop_count_beyond_its_register_is_reported():
    config = AcceleratorConfig()
    for count in [(1 << 16) - 1, 1 << 16]:
        words = [encode(Instruction(Opcode.SET, Reg.LOOP_COUNT, count)),
                 encode(Instruction(Opcode.LOOP, target=1)), encode(Instruction(Opcode.END))]
        if count < 1 << 16:
            assert perf.program_cycles(words, config).by_opcode()["LOOP"] == count + 1
            continue
        with pytest.raises(perf.ProgramError, match=r"^LOOP: LOOP_COUNT = 65,536 is beyond the "
                                                    r"hardware's 16-bit loop counter \(at most 65,535\)$"):
            perf.program_cycles(words, config)
        # Set but never looped on: the hardware drops the bit nobody reads.
        assert perf.program_cycles(words[:1] + words[2:], config).total == 2


def test_lenet_conv_layers_closed_form():
    """Conflict-free conv on 2x8: a tile every max(K, LANES, cols + 2 + rows * LANES) cycles."""
    config = AcceleratorConfig()
    builder, _ = lenet_program(config, images=1)
    layers = perf.layer_summaries(perf.program_cycles(builder.words(), config), config)
    conv1, conv2 = layers[0], layers[2]
    for layer, K, tiles in [(conv1, 25, 3 * 98), (conv2, 150, 8 * 13)]:
        period = max(K, 8, 10 + 2 * 8)
        first_accept = 8 + 3 + K
        assert layer["cycles"] == first_accept + period * (tiles - 1) + 10 + 16 - 1 + 5
    assert conv1["macs"] == 6 * 784 * 25 and conv2["macs"] == 16 * 100 * 150


def test_result_queue_hides_the_array_latency():
    """With a queue of a tile's rows, a writer-bound conv tile takes its write cycles, not the
    array's latency besides: LeNet-5's conv1 on 2x8 (K = 25 beats, 16 write cycles, latency 10)
    goes from max(25, 10 + 16) = 26 cycles a tile to 25 (3 * 98 tiles), less the queue's own
    latency at the instruction's end (a row is readable two cycles after it is written), which
    is all any other instruction gains."""
    plain = AcceleratorConfig()
    queued = plain.replace(result_queue_rows=2)
    builder, _ = lenet_program(plain, images=1)
    before, after = (perf.program_cycles(builder.words(), config) for config in (plain, queued))
    for one, other in zip(before.instructions, after.instructions):
        assert other.cycles <= one.cycles + 3
    conv1 = [perf.layer_summaries(run, config)[0] for run, config in ((before, plain), (after, queued))]
    assert conv1[0]["cycles"] - conv1[1]["cycles"] == (3 * 98 - 1) - 2
