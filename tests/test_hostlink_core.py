"""amaranth.sim tests of the host-link frame engine (HostLinkCore) on a device stand-in, at
the byte-stream level: every command, every error reply, and recovery after each."""

import random
import re

import pytest
from amaranth import Module, Signal
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from fpganet.config import AcceleratorConfig
from fpganet.hdl.deframer import Deframer
from fpganet.hdl.executor import CommandExecutor
from fpganet.hdl.hostlink import (HostLink, HostLinkCore, HostLinkSystem, PacketFIFO,
                                  connect_device, host_addr_width)
from fpganet.hdl.linkfifo import OutputFIFO
from fpganet.hdl.replier import Replier
from fpganet.isa import HostSpace
from fpganet.link import protocol
from fpganet.link.protocol import Command, DeviceInfo, ErrorCode, Status, encode_frame
from fpganet.sim.standin_device import StandInDevice

CONFIG = AcceleratorConfig(rows=2, cols=8)
TIMEOUT = 300


def control_word(inputs, echoes=0, weights=0, params=0):
    """Program word 0 of the stand-in's job."""
    return inputs | echoes << 16 | weights << 32 | params << 48


class CoreHarness:
    """HostLinkCore on a StandInDevice; bytes in on ``rx``, reply bytes collected from ``tx``."""

    def __init__(self, config=CONFIG, *, tx_stalls=0.0, **options):
        options.setdefault("timeout_cycles", TIMEOUT)
        options.setdefault("input_depth", 64)
        options.setdefault("output_depth", 32)
        options.setdefault("max_write_bytes", 64)
        self.core = HostLinkCore(config, 12e6, 3e6, **options)
        self.device = StandInDevice(config, depth=64)
        self.m = Module()
        self.m.submodules.core = self.core
        self.m.submodules.device = self.device
        connect_device(self.m, self.core, self.device)
        self.received = bytearray()
        self.tx_stalls = tx_stalls
        self.rng = random.Random(1)

    def run(self, scenario):
        sim = Simulator(self.m)
        sim.add_clock(1e-6)

        async def collector(ctx):
            core = self.core
            while True:
                ctx.set(core.tx.ready, int(self.rng.random() >= self.tx_stalls))
                await ctx.tick()

        async def tx_monitor(ctx):
            core = self.core
            async for _, _, valid, ready, payload in ctx.tick().sample(
                    core.tx.valid, core.tx.ready, core.tx.payload):
                if valid and ready:
                    self.received.append(payload)

        async def testbench(ctx):
            await scenario(ctx, self)

        sim.add_testbench(collector, background=True)
        sim.add_process(tx_monitor)
        sim.add_testbench(testbench)
        sim.run()

    async def send(self, ctx, data, gap=0):
        rx = self.core.rx
        for byte in data:
            ctx.set(rx.payload, byte)
            ctx.set(rx.valid, 1)
            await ctx.tick().until(rx.ready)
            if gap:
                ctx.set(rx.valid, 0)
                await ctx.tick().repeat(gap)
        ctx.set(rx.valid, 0)

    async def reply(self, ctx, limit=5000):
        """The next reply frame: ``(type, payload)``."""
        for _ in range(limit):
            frame = protocol.split_frame(self.received)
            if frame is not None:
                frame_type, payload, rest = frame
                assert self.received[0] == protocol.SYNC, "bytes before the reply's SYNC"
                self.received = bytearray(rest)
                return frame_type, payload
            await ctx.tick()
        raise AssertionError(f"no reply within {limit} cycles (got {bytes(self.received)!r})")

    async def request(self, ctx, command, payload=b""):
        await self.send(ctx, encode_frame(command, payload))
        return await self.reply(ctx)

    async def ack(self, ctx, command, payload=b""):
        reply_type, data = await self.request(ctx, command, payload)
        assert reply_type == protocol.reply_type(command), \
            f"{Command(command).name}: got {reply_type:#x} {data.hex()}"
        return data

    async def expect_error(self, ctx, code, command, payload=b""):
        reply_type, data = await self.request(ctx, command, payload)
        assert (reply_type, data) == (protocol.ERROR_TYPE, bytes([code, command])), \
            f"expected {code.name}, got {reply_type:#x} {data.hex()}"

    async def status(self, ctx):
        return Status.unpack(await self.ack(ctx, Command.STATUS))

    async def write(self, ctx, space, address, words):
        payload = protocol.write_payload(space, address, words, CONFIG.weight_word_bytes)
        assert await self.ack(ctx, Command.WRITE, payload) == b""


def run(scenario, **options):
    harness = CoreHarness(**options)
    harness.run(scenario)
    return harness


def test_ping_and_status():
    async def scenario(ctx, h):
        info = DeviceInfo.unpack(await h.ack(ctx, Command.PING))
        assert info == h.core.info
        assert info.addr_width == host_addr_width(CONFIG)
        assert info.weight_word_bytes == 2
        assert info.mismatches(CONFIG) == []
        status = await h.status(ctx)
        assert not status.busy and not status.done_seen
        assert status.input_free == 64 and status.output_level == 0
        assert status.frames == 2 and sum(status.errors.values()) == 0   # PING and this STATUS
    run(scenario)


def test_ping_names_the_options():
    """PING's ``options`` byte carries ``broadcast_operands``, ``requant_mult_bits`` (0 for
    whole multipliers, as boards built before it send), ``pipeline_registers`` and the
    ``tflite`` requantization mode: a network compiled for other options is refused, naming
    the field, but for multipliers with fewer bits than the board's requantizer keeps."""
    for config in (CONFIG, CONFIG.replace(requant_mult_bits=1, broadcast_operands=True),
                   CONFIG.replace(requant_mult_bits=14, pipeline_registers=True),
                   CONFIG.replace(requant_mode="tflite", pipeline_registers=True)):
        info = DeviceInfo.unpack(HostLink(config, 12e6, 3e6).info.pack())
        assert [getattr(info, name) for name in info.OPTION_FIELDS] == \
            [getattr(config, name) for name in info.OPTION_FIELDS]
        assert info.mismatches(config) == []
    assert HostLink(CONFIG, 12e6, 3e6).info.options == int(CONFIG.broadcast_operands)
    info = HostLink(CONFIG.replace(requant_mult_bits=2), 12e6, 3e6).info
    assert info.mismatches(CONFIG) == [("requant_mult_bits", 2, 15)]
    assert info.mismatches(CONFIG.replace(requant_mult_bits=1)) == []   # more bits: exact
    info = HostLink(CONFIG.replace(pipeline_registers=True), 12e6, 3e6).info
    assert info.mismatches(CONFIG) == [("pipeline_registers", True, False)]
    info = HostLink(CONFIG.replace(requant_mode="tflite", requant_latency=6), 12e6, 3e6).info
    assert info.mismatches(CONFIG) == [("requant_latency", 6, 4), ("requant_mode", "tflite", "fpganet")]


def test_ping_names_the_banking():
    """PING's ``banking`` byte: ``act_bank_factor`` alone (what boards built before pair
    products send), ``pair_products`` in bit 7; a network compiled without them is refused."""
    for config in (CONFIG, CONFIG.replace(act_bank_factor=8), CONFIG.replace(pair_products=True)):
        info = DeviceInfo.unpack(HostLink(config, 12e6, 3e6).info.pack())
        assert (info.act_bank_factor, info.pair_products, info.weight_word_bytes) == \
            (config.act_bank_factor, config.pair_products, config.weight_word_bytes)
        assert info.mismatches(config) == []
    assert HostLink(CONFIG.replace(act_bank_factor=4), 12e6, 3e6).info.banking == 4
    info = HostLink(CONFIG.replace(pair_products=True, act_bank_factor=2), 12e6, 3e6).info
    assert info.banking == 0x82
    assert info.mismatches(CONFIG.replace(act_bank_factor=2)) == [("pair_products", True, False)]
    # packed_weights in bit 5, beside a factor of 8 (bit 3).
    packed = CONFIG.replace(packed_weights=True, act_bank_factor=8)
    info = DeviceInfo.unpack(HostLink(packed, 12e6, 3e6).info.pack())
    assert (info.banking, info.act_bank_factor, info.packed_weights) == (0x28, 8, True)
    assert info.mismatches(packed) == []
    assert info.mismatches(packed.replace(packed_weights=False)) == [("packed_weights", True, False)]
    # single_port_activations in bit 4.
    single = CONFIG.replace(single_port_activations=True)
    info = DeviceInfo.unpack(HostLink(single, 12e6, 3e6).info.pack())
    assert (info.banking, info.act_bank_factor, info.single_port_activations) == (0x11, 1, True)
    assert info.mismatches(CONFIG) == [("single_port_activations", True, False)]


def test_ping_names_binary_weights_in_a_byte_of_its_own():
    """``binary_weights`` is ``features`` bit 0, a byte after ``links`` that a board without any
    feature does not send (its reply as before); a network compiled without it is refused."""
    plain = HostLink(CONFIG, 12e6, 3e6).info
    assert plain.features == 0
    assert len(plain.pack()) == DeviceInfo.size() - 6      # no design, links or features
    binary = CONFIG.replace(binary_weights=True)
    info = HostLink(binary, 12e6, 3e6).info
    assert len(info.pack()) == DeviceInfo.size()
    info = DeviceInfo.unpack(info.pack())
    assert (info.features, info.binary_weights, info.design) == (1, True, 0)
    assert info.mismatches(binary) == []
    assert info.mismatches(CONFIG) == [("binary_weights", True, False)]
    assert DeviceInfo.unpack(plain.pack()).binary_weights is False


def test_ping_names_ternary_pairs_so_that_an_int8_network_is_refused_there():
    """``ternary_pairs`` is ``features`` bit 1: a board built with it multiplies only -1, 0 and
    +1, so a network compiled for the plain pair array (whatever its weights) is refused."""
    pairs = CONFIG.replace(pair_products=True)
    ternary = pairs.replace(ternary_pairs=True, binary_weights=True)
    info = DeviceInfo.unpack(HostLink(ternary, 12e6, 3e6).info.pack())
    assert (info.features, info.ternary_pairs, info.binary_weights) == (3, True, True)
    assert info.mismatches(ternary) == []
    assert info.mismatches(ternary.replace(ternary_pairs=False)) == [("ternary_pairs", True, False)]
    assert DeviceInfo.unpack(HostLink(pairs, 12e6, 3e6).info.pack()).ternary_pairs is False


@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("tx_stalls", [0.0, 0.7])
def test_job_through_all_commands(tx_stalls, pipelined):
    """WRITE to every space, SEND_INPUT, START, READ_OUTPUT (waiting), STATUS, FLUSH. With
    ``pipeline_registers`` the replier's CRC takes each byte a cycle late, so with ``tx``
    never stalled its two bytes must wait for it."""
    rng = random.Random(3)
    lut = [rng.randrange(256) for _ in range(64)]
    weights = [rng.randrange(1 << 16) for _ in range(5)]
    params = [rng.randrange(1 << 64) for _ in range(2)]
    inputs = bytes(rng.randrange(64) for _ in range(20))

    async def scenario(ctx, h):
        await h.write(ctx, HostSpace.ACTIVATIONS, 0, lut)
        await h.write(ctx, HostSpace.WEIGHTS, 0, weights)
        await h.write(ctx, HostSpace.PARAMS, 0, params)
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(len(inputs), 7, len(weights), 2)])
        assert await h.ack(ctx, Command.SEND_INPUT, inputs) == b""
        assert (await h.status(ctx)).input_free == 64 - len(inputs)
        assert await h.ack(ctx, Command.START) == b""
        expected = bytes(lut[x] for x in inputs[:7])
        expected += b"".join(w.to_bytes(2, "little") for w in weights)
        expected += b"".join(p.to_bytes(8, "little") for p in params)
        total = len(expected) + 4
        got = b""
        for _ in range(10):
            if len(got) >= total:
                break
            want = total - len(got)
            got += await h.ack(ctx, Command.READ_OUTPUT,
                               protocol.read_output_payload(want, min(want, 32)))
        assert got[:-4] == expected
        stamp = int.from_bytes(got[-4:], "little")
        status = await h.status(ctx)
        assert not status.busy and status.done_seen and status.done
        assert 0 < stamp <= status.cycles
        assert status.input_free == 64 and status.output_level == 0
        # FLUSH drops unread output: run again (8 output bytes) without reading, then flush.
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(len(inputs), 4)])
        assert await h.ack(ctx, Command.SEND_INPUT, inputs) == b""
        assert await h.ack(ctx, Command.START) == b""
        assert await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(0, 8)) == b""
        assert (await h.status(ctx)).output_level == 8
        for _ in range(10):
            if not (await h.status(ctx)).busy:
                break
        assert await h.ack(ctx, Command.FLUSH) == b""
        status = await h.status(ctx)
        assert status.output_level == 0 and status.input_free == 64
        assert sum(status.errors.values()) == 0
    harness = run(scenario, tx_stalls=tx_stalls, config=CONFIG.replace(pipeline_registers=pipelined))
    assert harness.core.replier.crc_stage == pipelined


def test_error_replies_and_recovery():
    """Each error gets its reply, has no effect, is counted, and the next frame works."""
    async def scenario(ctx, h):
        await h.write(ctx, HostSpace.ACTIVATIONS, 0, list(range(64)))
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(4, 4)])

        # Bad CRC on a WRITE: nothing written (checked by the job's output below).
        frame = bytearray(encode_frame(Command.WRITE, protocol.write_payload(
            HostSpace.ACTIVATIONS, 0, [0xEE] * 8, 2)))
        frame[7] ^= 0x10
        await h.send(ctx, frame)
        assert await h.reply(ctx) == (protocol.ERROR_TYPE, bytes([ErrorCode.BAD_CRC, Command.WRITE]))
        # Bad CRC on a SEND_INPUT: its bytes are rolled back.
        frame = bytearray(encode_frame(Command.SEND_INPUT, b"\x01\x02\x03"))
        frame[-1] ^= 0x01
        await h.send(ctx, frame)
        assert (await h.reply(ctx))[1][0] == ErrorCode.BAD_CRC
        assert (await h.status(ctx)).input_free == 64
        # Unknown type (with a payload, read and discarded).
        await h.expect_error(ctx, ErrorCode.UNKNOWN_TYPE, 0x42, b"hello")
        # Lengths that do not suit the command.
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.PING, b"\x00")
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.READ_OUTPUT, b"\x01\x02\x03")
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.WRITE,
                             bytes([HostSpace.PROGRAM, 0, 0, 0]) + bytes(7))
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.WRITE, bytes(4 + 65))
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.SEND_INPUT, bytes(65))
        # Bad addresses.
        await h.expect_error(ctx, ErrorCode.BAD_ADDRESS, Command.WRITE, bytes([4, 0, 0, 0, 1]))
        await h.expect_error(ctx, ErrorCode.BAD_ADDRESS, Command.WRITE, protocol.write_payload(
            HostSpace.PARAMS, CONFIG.bias_buffer_words - 1, [1, 2], 2))
        await h.expect_error(ctx, ErrorCode.BAD_ADDRESS, Command.WRITE, protocol.write_payload(
            HostSpace.PROGRAM, 0xFFFFFF, [1], 2))
        # NO_SPACE: fill most of the FIFO, then ask for more than is left.
        assert await h.ack(ctx, Command.SEND_INPUT, bytes(60)) == b""
        await h.expect_error(ctx, ErrorCode.NO_SPACE, Command.SEND_INPUT, bytes(5))
        assert (await h.status(ctx)).input_free == 4
        assert await h.ack(ctx, Command.FLUSH) == b""
        # Garbage between frames is skipped and counted.
        await h.send(ctx, b"\x00\x13\x37\xff")
        assert DeviceInfo.unpack(await h.ack(ctx, Command.PING)) == h.core.info
        # A truncated frame: the line goes quiet, the parser answers TRUNCATED.
        await h.send(ctx, encode_frame(Command.SEND_INPUT, bytes(range(10)))[:9])
        assert await h.reply(ctx, limit=2 * TIMEOUT) == \
            (protocol.ERROR_TYPE, bytes([ErrorCode.TRUNCATED, Command.SEND_INPUT]))
        await h.send(ctx, bytes([protocol.SYNC]))
        assert (await h.reply(ctx, limit=2 * TIMEOUT))[1] == bytes([ErrorCode.TRUNCATED, 0])
        # A length beyond every limit: the rest is drained, then BAD_LENGTH.
        await h.send(ctx, bytes([protocol.SYNC, Command.WRITE, 0xFF, 0xFF]) + bytes(range(40)),
                     gap=3)
        assert await h.reply(ctx, limit=3 * TIMEOUT) == \
            (protocol.ERROR_TYPE, bytes([ErrorCode.BAD_LENGTH, Command.WRITE]))

        # The link still works, and none of the above had an effect.
        status = await h.status(ctx)
        assert status.input_free == 64 and status.output_level == 0
        assert await h.ack(ctx, Command.SEND_INPUT, bytes([9, 8, 7, 6])) == b""
        assert await h.ack(ctx, Command.START) == b""
        got = await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(8, 8))
        assert got[:4] == bytes([9, 8, 7, 6])      # the identity LUT survived the bad WRITE
        status = await h.status(ctx)
        assert status.errors == {
            ErrorCode.BAD_CRC: 2, ErrorCode.UNKNOWN_TYPE: 1, ErrorCode.BAD_LENGTH: 6,
            ErrorCode.TRUNCATED: 2, ErrorCode.BUSY: 0, ErrorCode.BAD_ADDRESS: 3,
            ErrorCode.NO_SPACE: 1}
        assert status.garbage == 4
    run(scenario)


def test_busy_rejections():
    """WRITE, START and FLUSH are refused while the device runs; SEND_INPUT, READ_OUTPUT and
    STATUS are served."""
    async def scenario(ctx, h):
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(6, 6)])
        assert await h.ack(ctx, Command.START) == b""      # waits for 6 input bytes
        assert (await h.status(ctx)).busy
        await h.expect_error(ctx, ErrorCode.BUSY, Command.START)
        await h.expect_error(ctx, ErrorCode.BUSY, Command.FLUSH)
        await h.expect_error(ctx, ErrorCode.BUSY, Command.WRITE,
                             protocol.write_payload(HostSpace.PROGRAM, 0, [0], 2))
        # READ_OUTPUT with wait_for returns at the timeout with what there is.
        assert await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(10, 10)) == b""
        assert await h.ack(ctx, Command.SEND_INPUT, bytes(range(6))) == b""
        got = await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(10, 10))
        assert len(got) == 10
        status = await h.status(ctx)
        assert not status.busy and status.busy_rejects == 3
        # The refused WRITE did not happen: program word 0 still says 6 inputs.
        assert await h.ack(ctx, Command.START) == b""
        assert (await h.status(ctx)).busy
    run(scenario)


def test_start_with_its_wait_byte():
    """With ``queued_start`` (the SPI link's) START with its byte waits while the device runs:
    BUSY at the timeout if it never stops; sent while a run computes, it starts the next run
    when that one stops, and only then replies. Two bytes are BAD_LENGTH; PING says so."""
    async def scenario(ctx, h):
        assert DeviceInfo.unpack(await h.ack(ctx, Command.PING)).queued_start
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(6, 6)])
        assert await h.ack(ctx, Command.START) == b""      # waits for 6 input bytes
        await h.expect_error(ctx, ErrorCode.BUSY, Command.START, b"\x01")
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.START, b"\x01\x01")
        assert await h.ack(ctx, Command.SEND_INPUT, bytes(range(6))) == b""
        assert len(await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(10, 10))) == 10

        # A job of 12 weight words (28 output bytes with the stamp, some 30 cycles): START,
        # and right behind it START with its byte, which waits for the first run to stop.
        await h.write(ctx, HostSpace.PROGRAM, 0, [control_word(0, 0, 12)])
        await h.send(ctx, encode_frame(Command.START) + encode_frame(Command.START, b"\x01"))
        for _ in range(2):
            assert await h.reply(ctx) == (protocol.reply_type(Command.START), b"")
        assert (await h.status(ctx)).busy_rejects == 1, "the queued START was refused"
        first = await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(28, 28))
        second = await h.ack(ctx, Command.READ_OUTPUT, protocol.read_output_payload(28, 28))
        assert first[:24] == second[:24] and len(second) == 28
        status = await h.status(ctx)
        assert not status.busy and status.done_seen and status.output_level == 0
    run(scenario, queued_start=True)


def test_start_without_queued_start_takes_no_byte():
    async def scenario(ctx, h):
        assert not DeviceInfo.unpack(await h.ack(ctx, Command.PING)).queued_start
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.START, b"\x01")
    run(scenario)


def test_packet_fifo_commit_rollback_drop():
    dut = PacketFIFO(8)

    async def testbench(ctx):
        ctx.set(dut.r.ready, 0)
        for value in (1, 2, 3):
            ctx.set(dut.w_data, value)
            ctx.set(dut.w_en, 1)
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        assert ctx.get(dut.free) == 5 and not ctx.get(dut.r.valid)
        ctx.set(dut.rollback, 1)
        await ctx.tick()
        ctx.set(dut.rollback, 0)
        assert ctx.get(dut.free) == 8
        for value in (4, 5, 6, 7, 8, 9, 10, 11):
            ctx.set(dut.w_data, value)
            ctx.set(dut.w_en, 1)
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        assert ctx.get(dut.free) == 0
        ctx.set(dut.commit, 1)
        await ctx.tick()
        ctx.set(dut.commit, 0)
        assert ctx.get(dut.level) == 8
        ctx.set(dut.r.ready, 1)
        got = []
        while ctx.get(dut.r.valid):
            got.append(ctx.get(dut.r.payload))
            await ctx.tick()
        assert got == [4, 5, 6, 7, 8, 9, 10, 11]
        # Write while reading, commit, then drop what is left.
        for value in (20, 21, 22):
            ctx.set(dut.w_data, value)
            ctx.set(dut.w_en, 1)
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        ctx.set(dut.commit, 1)
        await ctx.tick()
        ctx.set(dut.commit, 0)
        assert ctx.get(dut.r.valid) and ctx.get(dut.r.payload) == 20
        await ctx.tick()
        assert ctx.get(dut.r.payload) == 21
        ctx.set(dut.r.ready, 0)
        ctx.set(dut.drop, 1)
        await ctx.tick()
        ctx.set(dut.drop, 0)
        assert not ctx.get(dut.r.valid) and ctx.get(dut.free) == 8

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def test_packet_fifo_valid_register_follows_the_pointers():
    """r.valid is a flip-flop computed from the pointers' next values: under random writes,
    commits, rollbacks, drops and reads it is high exactly when committed bytes are unread,
    ``free`` counts every byte not yet read, and the bytes come out in order."""
    dut = PacketFIFO(8)
    rng = random.Random(11)

    async def testbench(ctx):
        committed, tentative, read = [], [], []
        next_value = 0
        for _ in range(600):
            assert ctx.get(dut.r.valid) == (ctx.get(dut.level) != 0)
            assert ctx.get(dut.level) == len(committed)
            assert ctx.get(dut.free) == 8 - len(committed) - len(tentative)
            action = rng.random()
            write = action < 0.45 and ctx.get(dut.free) > 0
            commit = 0.45 <= action < 0.6
            rollback = 0.6 <= action < 0.65
            drop = 0.65 <= action < 0.68
            ready = rng.random() < 0.6
            ctx.set(dut.w_en, write)
            ctx.set(dut.w_data, next_value)
            ctx.set(dut.commit, commit)
            ctx.set(dut.rollback, rollback)
            ctx.set(dut.drop, drop)
            ctx.set(dut.r.ready, ready)
            if ctx.get(dut.r.valid) and ready:
                read.append(ctx.get(dut.r.payload))
                assert read[-1] == committed.pop(0)
            if drop:
                committed.clear()
            if commit:
                committed.extend(tentative)
                tentative = []
            if rollback:
                tentative = []
            elif write:
                tentative.append(next_value)
                next_value = (next_value + 1) % 256
            await ctx.tick()
        assert len(read) > 50

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def test_parameter_checks():
    with pytest.raises(TypeError, match="AcceleratorConfig"):
        HostLinkCore({"rows": 2}, 12e6, 3e6)
    with pytest.raises(ValueError, match="input_depth must be a power of two"):
        HostLinkCore(CONFIG, 12e6, 3e6, input_depth=1000)
    with pytest.raises(ValueError, match="addr_width must be 15..24"):
        HostLinkCore(CONFIG, 12e6, 3e6, addr_width=12)
    with pytest.raises(ValueError, match="max_write_bytes must be 8"):
        HostLinkCore(CONFIG, 12e6, 3e6, max_write_bytes=4)
    with pytest.raises(ValueError, match="3,000,000 baud from a 10 MHz clock.*below 4"):
        HostLink(CONFIG, 10e6, 3_000_000)
    with pytest.raises(ValueError, match="shorter than two byte times"):
        HostLink(CONFIG, 12e6, 3_000_000, timeout_cycles=50)
    assert HostLink(CONFIG, 40e6, 3_000_000).info.timeout_cycles == 400_000


def test_block_parameter_checks():
    """Each block checks its own parameters, with messages that name them."""
    def refused(error, message, factory):
        with pytest.raises(error, match=re.escape(message)):
            factory()

    refused(ValueError, "Deframer max_payload must be 1..65535, not 0",
            lambda: Deframer(max_payload=0, timeout_cycles=100))
    refused(ValueError, "Deframer timeout_cycles must be 16..4294967295, not 15",
            lambda: Deframer(max_payload=10, timeout_cycles=15))
    refused(TypeError, "Deframer max_payload must be an integer, not 10.0",
            lambda: Deframer(max_payload=10.0, timeout_cycles=100))
    refused(TypeError, "config must be an AcceleratorConfig, not None",
            lambda: CommandExecutor(None, addr_width=15, input_depth=64, output_depth=32,
                                    max_write_bytes=64))
    refused(ValueError, "output_depth must be 2..32768, not 1",
            lambda: CommandExecutor(CONFIG, addr_width=15, input_depth=64, output_depth=1,
                                    max_write_bytes=64))
    refused(TypeError, "Replier info must be 1..255 bytes, not b''",
            lambda: Replier(b"", output_depth=32))
    refused(ValueError, "Replier output_depth must be 2..32768, not 65536",
            lambda: Replier(b"x", output_depth=65536))
    refused(ValueError, "PacketFIFO depth must be a power of two, not 12", lambda: PacketFIFO(12))
    refused(ValueError, "OutputFIFO depth must be 2..32768, not 1", lambda: OutputFIFO(1))
    refused(ValueError, "OutputFIFO depth must be 3..32768, not 2",
            lambda: OutputFIFO(2, registered_output=True))
    refused(ValueError, "StandInDevice depth must be 1..65536, not 0",
            lambda: StandInDevice(CONFIG, depth=0))
    refused(TypeError, "device must be a callable taking the configuration, not 3",
            lambda: HostLinkSystem(CONFIG, 12e6, 3e6, device=3))


def test_lengths_with_small_buffers():
    """With 16-byte buffers the longest payload is 16: a length whose low byte looks small
    (0x0105) is still too long, and the next frame is served."""
    async def scenario(ctx, h):
        frame = bytes([protocol.SYNC, Command.SEND_INPUT, 0x05, 0x01]) + bytes(5)
        await h.send(ctx, frame)
        assert await h.reply(ctx, limit=3 * TIMEOUT) == \
            (protocol.ERROR_TYPE, bytes([ErrorCode.BAD_LENGTH, Command.SEND_INPUT]))
        assert await h.ack(ctx, Command.SEND_INPUT, bytes(16)) == b""
        await h.expect_error(ctx, ErrorCode.NO_SPACE, Command.SEND_INPUT, bytes(1))
        await h.expect_error(ctx, ErrorCode.BAD_LENGTH, Command.SEND_INPUT, bytes(17))
        assert (await h.status(ctx)).input_free == 0
    run(scenario, input_depth=16, max_write_bytes=8)


@pytest.mark.parametrize("registered_output", [False, True])
@pytest.mark.parametrize("registered_ready", [False, True])
@pytest.mark.parametrize("depth", [3, 4, 5, 8, 17, 33, 2])
def test_output_fifo_behaves_as_amaranths_buffered_fifo(depth, registered_ready,
                                                        registered_output):
    """The link's smaller output FIFO against amaranth.lib.fifo.SyncFIFOBuffered, every port
    every cycle, under random write and read rates (the link relies on the same timing);
    ``registered_ready`` gives the same ``w_rdy`` from a flip-flop. With
    ``registered_output`` the reference is ``SyncFIFOBuffered(depth - 1)`` followed by a
    one-byte stream register."""
    if registered_output and depth < 3:
        pytest.skip("registered_output needs depth >= 3 (refused, tested below)")
    rnd = random.Random(depth)
    m = Module()
    m.submodules.dut = dut = OutputFIFO(depth, registered_ready=registered_ready,
                                        registered_output=registered_output)
    w_data, w_en, r_en = Signal(8), Signal(), Signal()
    m.d.comb += [dut.w_data.eq(w_data), dut.w_en.eq(w_en), dut.r_en.eq(r_en)]
    if registered_output:
        m.submodules.inner = inner = SyncFIFOBuffered(width=8, depth=depth - 1)
        ref_data, ref_valid = Signal(8), Signal()
        load = inner.r_rdy & (~ref_valid | r_en)
        m.d.comb += [inner.w_data.eq(w_data), inner.w_en.eq(w_en), inner.r_en.eq(load)]
        with m.If(load):
            m.d.sync += [ref_data.eq(inner.r_data), ref_valid.eq(1)]
        with m.Elif(r_en):
            m.d.sync += ref_valid.eq(0)
        ref = (inner.w_rdy, ref_valid, inner.level + ref_valid, ref_data)
    else:
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=8, depth=depth)
        m.d.comb += [fifo.w_data.eq(w_data), fifo.w_en.eq(w_en), fifo.r_en.eq(r_en)]
        ref = (fifo.w_rdy, fifo.r_rdy, fifo.level, fifo.r_data)

    async def bench(ctx):
        for cycle in range(1500):
            if cycle % 250 == 0:
                p_write, p_read = rnd.random(), rnd.random()
            ctx.set(w_data, rnd.randrange(256))
            ctx.set(w_en, rnd.random() < p_write)
            ctx.set(r_en, rnd.random() < p_read)
            want = [ctx.get(s) for s in ref[:3]]
            assert [ctx.get(s) for s in (dut.w_rdy, dut.r_rdy, dut.level)] == want, cycle
            if want[1]:
                assert ctx.get(dut.r_data) == ctx.get(ref[3]), cycle
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_reply_latency_is_the_sum_of_the_blocks():
    """A PING's reply offers its sync byte deframer + executor + replier latencies after the
    last CRC byte (the "three cycles" of docs/reference/hostlink.md)."""
    harness = CoreHarness()
    core = harness.core
    expected = core.deframer.latency + core.executor.latency + core.replier.latency
    assert expected == 3
    seen = {}

    async def scenario(ctx, h):
        frame = encode_frame(Command.PING)
        await h.send(ctx, frame[:-1])
        ctx.set(core.rx.payload, frame[-1])
        ctx.set(core.rx.valid, 1)
        await ctx.tick()
        ctx.set(core.rx.valid, 0)
        for cycle in range(1, 10):
            if ctx.get(core.tx.valid):
                seen["cycles"] = cycle
                break
            await ctx.tick()
        await h.reply(ctx)

    harness.run(scenario)
    assert seen["cycles"] == expected


def test_fifo_latencies():
    """Each FIFO's ``latency`` is what it does: commit to readable, write to readable."""
    for dut, write, readable in ((PacketFIFO(8), "commit", lambda d: d.r.valid),
                                 (OutputFIFO(8), "w_en", lambda d: d.r_rdy),
                                 (OutputFIFO(8, registered_output=True), "w_en",
                                  lambda d: d.r_rdy)):
        seen = {}

        async def testbench(ctx, dut=dut, write=write, readable=readable, seen=seen):
            if write == "commit":
                ctx.set(dut.w_en, 1)
                await ctx.tick()
                ctx.set(dut.w_en, 0)
            ctx.set(getattr(dut, write), 1)
            await ctx.tick()
            ctx.set(getattr(dut, write), 0)
            for cycle in range(1, 6):
                if ctx.get(readable(dut)):
                    seen["cycles"] = cycle
                    break
                await ctx.tick()

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(testbench)
        sim.run()
        assert seen["cycles"] == dut.latency, type(dut).__name__
