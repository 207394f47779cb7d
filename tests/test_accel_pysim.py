"""The whole accelerator under amaranth.sim: small programs against the ISA simulator (bytes)
and the performance model (cycles, exactly); back-pressure; deliberately broken variants."""

from functools import partial

import numpy as np
import pytest

from fpganet import perf
from fpganet.codegen import build_images
from fpganet.codegen.fuzz import random_pooled_network
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.hdl.accelerator import Accelerator, host_write_layout
from fpganet.hdl.scatter import result_writer
from fpganet.isa import HostSpace, Instruction, Opcode, Reg, count_width, encode, pack_param
from fpganet.isasim import Machine
from fpganet.sim.rtl_images import host_writes, images_from_machine

from accel_programs import ProgramBuilder, conv_layer_program, pool_layer_program, scale_shift
from accel_pysim import run_pysim
from faults import LateWriter, OffByOneWindow, UnopenedPoolWriter
from test_isasim import conv_program


def small(**overrides):
    """A configuration with small memories (faster under amaranth.sim)."""
    rows = overrides.get("rows", 2)
    base = dict(act_buffer_bytes=4096, weight_buffer_bytes=256 * rows, bias_buffer_words=32, program_words=128)
    return AcceleratorConfig(**{**base, **overrides})


def expected(config, machine, input_bytes):
    """(bytes the hardware must send, perf result): the ISA simulator's output with STAMP values."""
    timing = perf.program_cycles(machine.program, config)
    reference = Machine(config, program=machine.program.copy(), weights=machine.weights.copy(),
                        params=machine.params.copy(), act=machine.act.copy())
    return timing.with_stamps(reference.run(input_bytes)), timing


def check(config, machine, input_bytes, **options):
    want, timing = expected(config, machine, input_bytes)
    got, cycles = run_pysim(config, images_from_machine(machine), input_bytes, **options)
    assert got == want
    assert cycles == timing.total
    return timing


def isasim_conv_machine(config, C, H, W, M, k, pad, lanes):
    """The program and images of tests/test_isasim.py's conv test (scaled to avoid saturation)."""
    rng = np.random.default_rng(C * 100 + k)
    x = rng.integers(-128, 128, (C, H, W)).astype(np.int8)
    w = rng.integers(-127, 128, (M, C, k, k)).astype(np.int8)
    K = C * k * k
    bias = rng.integers(-3000, 3000, M)
    mult = rng.integers(1 << 14, 1 << 15, M)
    shift = np.full(M, int(np.log2(np.sqrt(K) * 128 * 73 * 2 ** 15 / 60)))
    program, _ = conv_program(C, H, W, M, k, pad, 5, -3, config.rows, lanes)
    machine = Machine(config)
    machine.program[:len(program)] = [encode(i) for i in program]
    groups = -(-M // config.rows)
    padded = np.zeros((groups * config.rows, K), np.int8)
    padded[:M] = w.reshape(M, K)
    machine.weights[:groups * K] = padded.reshape(groups, config.rows, K).transpose(0, 2, 1).reshape(-1, config.rows)
    machine.params[:M] = [pack_param(int(b), int(m), int(s)) for b, m, s in zip(bias, mult, shift)]
    return machine, x.tobytes()


@pytest.mark.parametrize("C,H,W,M,k,pad,lanes", [(3, 6, 7, 5, 3, 1, 8), (1, 9, 5, 6, 5, 2, 3), (4, 4, 4, 2, 1, 0, 8)])
def test_isasim_conv_programs(C, H, W, M, k, pad, lanes):
    config = small()
    machine, x = isasim_conv_machine(config, C, H, W, M, k, pad, lanes)
    check(config, machine, x)


LAYERS = [
    # config overrides, program kind, shape and options
    (dict(), "conv", dict(C=2, H=6, W=6, M=3, k=3, pad=1, stride=2)),
    (dict(), "conv", dict(C=1, H=5, W=9, M=4, k=3, pad=0, lanes=6, pitch=13, relu=True)),
    (dict(requant_lanes=2), "conv", dict(C=2, H=5, W=6, M=5, k=3, pad=1)),
    (dict(rows=3, cols=5, requant_lanes=5), "conv", dict(C=2, H=5, W=6, M=7, k=3, pad=1)),
    (dict(rows=4, cols=4, requant_lanes=2), "conv", dict(C=3, H=4, W=4, M=6, k=2, pad=0, stride=1)),
    (dict(rows=1, cols=2), "conv", dict(C=2, H=4, W=3, M=2, k=3, pad=1)),
    (dict(), "pool", dict(C=3, H=6, W=6, k=2, stride=2)),
    (dict(requant_lanes=4), "pool", dict(C=2, H=7, W=7, k=3, stride=2, pad=1, pitch=11)),
    (dict(rows=3, cols=5), "pool", dict(C=2, H=4, W=9, k=2, stride=1, lanes=3)),
    # The pipeline registers (the ULX3S's): their cycles are in fpganet.perf too.
    (dict(pipeline_registers=True), "conv", dict(C=2, H=6, W=6, M=3, k=3, pad=1, stride=2)),
    (dict(rows=3, cols=5, requant_lanes=5, pipeline_registers=True), "conv",
     dict(C=2, H=5, W=6, M=7, k=3, pad=1)),
    (dict(requant_lanes=2, pipeline_registers=True), "pool", dict(C=3, H=6, W=6, k=2, stride=2)),
    # Tiles of 4 beats, shorter than the lane walk, with 16 result writes each: a stall at
    # every tile, walker-bound between the stalls.
    (dict(pipeline_registers=True), "conv", dict(C=1, H=7, W=9, M=2, k=2, pad=0)),
]


@pytest.mark.parametrize("case", range(len(LAYERS)))
def test_layer_programs(case):
    overrides, kind, shape = LAYERS[case]
    config = small(**overrides)
    shape = dict(shape)
    if kind == "conv":
        builder, x = conv_layer_program(config, shape.pop("C"), shape.pop("H"), shape.pop("W"), shape.pop("M"),
                                        shape.pop("k"), shape.pop("pad"), seed=case, **shape)
    else:
        builder, x = pool_layer_program(config, shape.pop("C"), shape.pop("H"), shape.pop("W"), shape.pop("k"),
                                        shape.pop("stride"), seed=case, **shape)
    machine = builder.machine()
    out = Machine(config, program=machine.program.copy(), weights=machine.weights.copy(),
                  params=machine.params.copy()).run(x)
    assert len(set(out)) > 4     # the outputs are not all saturated
    check(config, machine, x)


def control_program(config):
    """FILL, then three LOOP iterations of INPUT / OUTPUT / STAMP, an empty FILL, an empty CONV."""
    b = ProgramBuilder(config)
    b.region(Opcode.FILL, 0, 2, 16, 3, 5, 4, value=-9)
    b.op(Opcode.STAMP)
    b.set(Reg.LOOP_COUNT, 2)
    top = b.here
    b.region(Opcode.INPUT, 1, 1, 0, 2, 5, 3)
    b.region(Opcode.OUTPUT, 0, 2, 16, 3, 5, 4)
    b.op(Opcode.STAMP)
    b.op(Opcode.LOOP, target=top)
    b.region(Opcode.FILL, 0, 0, 16, 3, 5, 4)          # empty: one cycle, nothing written
    b.sets(groups=0)
    b.op(Opcode.CONV)                                 # empty walk
    b.region(Opcode.OUTPUT, 0, 1, 0, 1, 1, 2)
    b.op(Opcode.END)
    return b


@pytest.mark.parametrize("pipelined", [False, True])
def test_control_flow_regions_and_stamps(pipelined):
    """With the pipeline registers the instruction word comes from a register read one
    instruction ahead: the taken LOOPs (2 of the 3) take a cycle more to read their target.
    And the FILL writes runs of banks: its rows start at bank 0, 5, 2 of the 8 (pitch 5, both
    channels), one run each but the one from bank 5, which spans two bank rows."""
    config = small(pipeline_registers=pipelined)
    b = control_program(config)
    x = np.arange(18, dtype=np.uint8).tobytes()
    timing = check(config, b.machine(), x)
    fill = (2 * (1 + 2 + 1) if pipelined else 2 * 3 * 4) + 2 + config.region_start_latency
    assert len(timing.stamps) == 4 and timing.stamps[0] == 7 + fill               # 7 SETs, FILL
    assert timing.by_opcode()["CONV"] == 1 and timing.by_opcode()["LOOP"] == (5 if pipelined else 3)


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("knob", ["registered_bram_outputs", "registered_results", "registered_decode",
                                  "registered_writes"])
def test_one_timing_knob_against_the_set(registered, knob):
    """Each timing knob flipped alone against either set (bank_access and registered_operands
    go together; registered_host_output is the host link's): the bytes are the ISA
    simulator's and the cycles the cycle model's, for the control program, a CONV and a POOL."""
    config = small(pipeline_registers=registered, **{knob: not registered})
    assert config.timing_overrides() == {knob: not registered}
    check(config, control_program(config).machine(), np.arange(18, dtype=np.uint8).tobytes())
    builder, x = conv_layer_program(config, 3, 6, 7, 4, 3, 1, seed=3)
    check(config, builder.machine(), x)
    builder, x = pool_layer_program(config, 2, 6, 6, 2, 2, seed=5)
    check(config, builder.machine(), x)


@pytest.mark.parametrize("pipelined", [False, True])
def test_counts_at_the_top_of_their_registers(pipelined):
    """On a 64-byte activation buffer the counts have 7 bits: counts of 127 run, and pixel and
    channel indices walk past 2**8 (TILES beyond NPIX, GROUPS beyond M), which the units'
    counters must keep beyond NPIX and M rather than wrap into the live pixels and channels."""
    config = small(act_buffer_bytes=64, rows=4, pipeline_registers=pipelined)
    assert count_width(config) == 7
    rng = np.random.default_rng(5)
    b = ProgramBuilder(config, rng)
    b.region(Opcode.FILL, 5, 1, 0, 1, 0, 127, value=-3)            # wraps around the buffer
    b.region(Opcode.INPUT, 0, 1, 0, 1, 0, 24)
    walk = dict(in_base=0, in_pitch=0, in_cstride=0, in_gstep=0, in_rowstep=0, stride_x=1, out_w=5, npix=5,
                m=3, out_base=41, out_pitch=5, out_cstride=5, out_gstep=20, w_base=0, w_gstep=1,
                p_base=0, quant=0x7F_80_00)
    b.sets(**walk)
    for counts in [dict(k_c=127, k_h=1, k_w=1, tiles=1, groups=1, lanes=8),
                   dict(k_c=1, k_h=127, k_w=1, tiles=1, groups=1, lanes=8),
                   # pixels 0..263, their reads all in bank 0: a lane counted valid costs cycles
                   dict(k_c=16, k_h=1, k_w=1, tiles=33, groups=1, lanes=8, stride_x=8),
                   dict(k_c=1, k_h=1, k_w=1, tiles=1, groups=65, lanes=1)]:    # channels 0..259
        b.sets(**counts)
        b.op(Opcode.CONV)
    b.region(Opcode.OUTPUT, 0, 127, 1, 1, 0, 1)
    b.region(Opcode.OUTPUT, 3, 1, 0, 127, 5, 1)
    b.region(Opcode.OUTPUT, 7, 1, 0, 1, 0, 127)
    b.op(Opcode.END)
    machine = b.machine()
    machine.weights[:] = rng.integers(-127, 128, machine.weights.shape)
    machine.params[:] = [pack_param(int(rng.integers(-2000, 2000)), int(rng.integers(1 << 14, 1 << 15)),
                                    scale_shift(11)) for _ in machine.params]
    x = rng.integers(-128, 128, 24).astype(np.int8).tobytes()
    check(config, machine, x)


def test_wide_fill_writes_runs_of_banks():
    """With the pipeline registers a FILL writes a row's bytes a bank row at a time: rows from
    every bank, shorter and longer than a bank row, channels and rows that overlap, a region
    around the end of the buffer; the bytes as the ISA simulator's, the cycles fpganet.perf's."""
    config = small(pipeline_registers=True, act_buffer_bytes=512, program_words=256)
    rng = np.random.default_rng(3)
    b = ProgramBuilder(config, rng)
    b.region(Opcode.INPUT, 0, 1, 0, 1, 0, 200)
    for value in range(-12, 12):
        base = int(rng.integers(0, 512))
        channels, rows, length = (int(v) for v in rng.integers(1, [4, 5, 40]))
        b.region(Opcode.FILL, base, channels, int(rng.integers(0, 90)), rows, int(rng.integers(0, 45)),
                 length, value=value)
    b.region(Opcode.OUTPUT, 0, 1, 0, 1, 0, 512)
    b.op(Opcode.END)
    x = rng.integers(0, 256, 200).astype(np.uint8).tobytes()
    timing = check(config, b.machine(), x)
    bytewise = perf.program_cycles(b.words(), config.replace(pipeline_registers=False))
    assert timing.by_opcode()["FILL"] < bytewise.by_opcode()["FILL"] / 2


def test_lane_walker_runs_on_through_stalls():
    """Without the pipeline registers the lane walker does not hold on the front end's stalls.
    This POOL's second tiles (2 lanes of 8, 6 beats) end in a stall for the previous row while
    the walk of the next group's tile (8 lanes) is under way: the walk ends during the stall,
    and the next tile starts as it ends (fpganet.perf._walker_ready). A walker that held would
    take 2 cycles more per group after the first."""
    config = small()
    rng = np.random.default_rng(5)
    b = ProgramBuilder(config, rng)
    b.region(Opcode.INPUT, 0, 1, 0, 1, 0, 180)
    b.sets(in_base=0, in_pitch=5, in_cstride=60, in_gstep=60, k_c=1, k_h=3, k_w=2, in_rowstep=10,
           stride_x=2, out_w=2, npix=10, lanes=8, tiles=2, groups=3, out_base=180, out_pitch=2,
           out_cstride=0, out_gstep=10)
    b.op(Opcode.POOL)
    b.region(Opcode.OUTPUT, 180, 1, 0, 1, 0, 30)
    b.op(Opcode.END)
    x = rng.integers(0, 256, 180).astype(np.uint8).tobytes()
    check(config, b.machine(), x)


@pytest.mark.parametrize("pattern,pipelined", [(0b1011_0010_0111, False), (0x0F0F_00F1, False),
                                               (0b1011_0010_0111, True), (0x0F0F_00F1, True)])
def test_back_pressure_keeps_the_bytes(pattern, pipelined):
    """A slow output stream stretches OUTPUT and STAMP but changes no byte."""
    config = small(pipeline_registers=pipelined)
    b = control_program(config)
    x = np.arange(18, dtype=np.uint8).tobytes()
    timing = perf.program_cycles(b.words(), config)
    reference = b.machine().run(x)
    bits = [pattern >> i & 1 for i in range(32)]
    got, cycles = run_pysim(config, images_from_machine(b.machine()), x, ready_pattern=bits)
    assert timing.without_stamps(got) == reference
    assert cycles > timing.total


def test_host_port_layout_and_ready():
    config = AcceleratorConfig()
    layout = host_write_layout(config)
    assert layout.size == 2 + 15 + 64          # 32768 weight words are the deepest memory
    with pytest.raises(TypeError, match="AcceleratorConfig"):
        Accelerator({"rows": 2})
    with pytest.raises(ValueError, match="operand_width"):
        Accelerator(AcceleratorConfig(operand_width=4))
    assert host_writes(config, {"activations": np.array([0, 3, 0, -1], np.int8)}) == \
        [(HostSpace.ACTIVATIONS, 1, 3), (HostSpace.ACTIVATIONS, 3, 255)]
    loop = encode(Instruction(Opcode.LOOP, target=3)) | 7        # above 2^63: no float rounding
    # Whatever the dictionary's order, the writes come in the load order: the program last.
    assert host_writes(config, {"program": [loop, 0, 5], HostSpace.WEIGHTS: [[0, 0], [1, -1]]}) == \
        [(HostSpace.WEIGHTS, 1, 0xFF01), (HostSpace.PROGRAM, 0, loop), (HostSpace.PROGRAM, 2, 5)]


def test_off_by_one_window_is_caught():
    config = small()
    machine, x = isasim_conv_machine(config, 3, 6, 7, 5, 3, 1, 8)
    want, _ = expected(config, machine, x)
    got, _ = run_pysim(config, images_from_machine(machine), x, dut=Accelerator(config, window=OffByOneWindow))
    assert got != want


def test_late_writer_is_caught_by_the_cycle_count():
    config = small()
    machine, x = isasim_conv_machine(config, 4, 4, 4, 2, 1, 0, 8)
    want, timing = expected(config, machine, x)
    got, cycles = run_pysim(config, images_from_machine(machine), x, dut=Accelerator(config, writer=LateWriter))
    assert got == want               # right bytes...
    assert cycles == timing.total + 1  # ...one cycle late


def test_pooled_writes_and_a_maximum_that_never_restarts():
    """CONV pool in amaranth.sim: a conv and its 2x2 max-pool equal the golden model, in the
    cycles fpganet.perf counts; a result writer whose running maximum never restarts at a row
    pair (faults.UnopenedPoolWriter) does not."""
    config = AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True,
                               pair_products=True, act_bank_factor=2, fused_max_pool=True,
                               weight_buffer_bytes=4096, act_buffer_bytes=2048,
                               bias_buffer_words=64, program_words=64)
    rng = np.random.default_rng(12)
    while True:
        net = random_pooled_network(rng, config)
        try:
            images = build_images(net, 1, config)
        except FpganetError:
            continue
        if images.plan.steps[0].pooled and len(net.layers) == 2:
            break
    q_in = rng.integers(-128, 128, (1, *net.input_chw)).astype(np.int8)
    want = run_golden(net, q_in)
    got, cycles = run_pysim(config, images.memories, images.pack_inputs(q_in), max_cycles=50_000)
    q, _ = images.unpack_outputs(got)
    np.testing.assert_array_equal(q, want)
    assert cycles == perf.program_cycles(images.program_for(1), config).total
    got, _ = run_pysim(config, images.memories, images.pack_inputs(q_in), max_cycles=50_000,
                       dut=Accelerator(config, writer=UnopenedPoolWriter))
    assert not np.array_equal(images.unpack_outputs(got)[0], want)


@pytest.mark.parametrize("acc_width,broadcast,multiplier,bits", [
    (24, True, "booth", 15), (32, False, "booth", 15), (24, True, "ice40_dsp", 15),
    (20, False, "ice40_dsp", 15), (24, True, "shift_add", 1), (23, False, "shift_add", 3)])
def test_ice40_requantizers_in_the_accelerator(acc_width, broadcast, multiplier, bits):
    """The iCE40 writers (Booth multiplier in logic cells, two SB_MAC16 per lane, here
    their Amaranth models, or shifted copies for multipliers of few bits; five requantizer
    stages), with operands broadcast or systolic: the same bytes as the instruction-set
    simulator and the cycles fpganet.perf counts."""
    config = small(acc_width=acc_width, requant_latency=5, requant_lanes=2,
                   broadcast_operands=broadcast, requant_mult_bits=bits)
    builder, x = conv_layer_program(config, 2, 5, 6, 5, 3, 1, seed=11)
    machine = builder.machine()
    writer = partial(result_writer, requant_multiplier=multiplier, requant_dsp_model=True)
    check(config, machine, x, dut=Accelerator(config, writer=writer))
    builder, x = pool_layer_program(config, 2, 6, 6, 2, 2, seed=12)
    check(config, builder.machine(), x, dut=Accelerator(config, writer=writer))
