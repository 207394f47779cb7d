"""cocotb testbench of the generated HostLink Verilog, driven bit by bit on its UART pins.

The design under test is :class:`fpganet.hdl.hostlink.HostLinkSystem`: the host link and
its device (the :class:`~fpganet.sim.standin_device.StandInDevice` until the accelerator is
done). Its only ports are ``clk``, ``rst``, ``rx``, ``tx`` and ``status``.

:class:`UartSource` drives ``rx`` one bit at a time, :class:`UartSink` decodes ``tx``, and
:class:`CocotbPort` puts both behind ``read``/``write`` so that the real host driver
(:class:`fpganet.link.BoardLink`) runs in a thread against the simulated board
(``cocotb.task.bridge`` / ``resume``).

Parameters come from the environment variable ``FPGANET_TB`` (JSON), written by
``tests/test_hostlink_cocotb.py``:

``config``
    :meth:`AcceleratorConfig.to_dict` of the design.
``clock_hz``, ``baud``, ``timeout_cycles``
    As given to HostLinkSystem.
``images``, ``input_bytes``, ``load_scale``
    The driver's job: images of ``input_bytes`` (784 by default, LeNet-5's) giving 10 output
    bytes and the stamp each, after loading ``load_scale`` times 256 activation bytes, 256
    weight words and 64 parameter words.
``seed``
    Seed of the data.
``report``
    Path of a JSON file to write the measured link timings into (optional).
"""

import json
import os
import random
import time
from fractions import Fraction

import cocotb
from cocotb.clock import Clock
from cocotb.task import bridge, resume
from cocotb.triggers import FallingEdge, RisingEdge, Timer
from cocotb.utils import get_sim_time

from fpganet.link import protocol
from fpganet.link import BoardLink, run_images
from fpganet.link.protocol import Command, DeviceInfo, ErrorCode, Status, encode_frame
from fpganet.config import AcceleratorConfig
from fpganet.isa import HostSpace


def parameters():
    return json.loads(os.environ.get("FPGANET_TB", "{}"))


def now_ps():
    return Fraction(get_sim_time("ps"))


# Not cocotbext-uart (0.1.4 runs on cocotb 2.1): no bad stop bits, glitches or stop-bit check; whole-ns bits.
class UartSource:
    """Drives a UART line, 8N1, one bit at a time, at exactly ``baud`` on average."""

    def __init__(self, pin, baud):
        self.pin = pin
        self.bit_ps = Fraction(10 ** 12) / Fraction(baud)
        self.pin.value = 1

    async def levels(self, bits, bit_ps=None):
        """Put ``bits`` on the line, each for one bit time (or ``bit_ps``)."""
        bit_ps = bit_ps or self.bit_ps
        t = now_ps()
        for bit in bits:
            self.pin.value = bit
            t += bit_ps
            await Timer(max(1, round(t - now_ps())), unit="ps")

    async def send(self, data, stop=1):
        bits = []
        for byte in bytes(data):
            bits += [0] + [(byte >> i) & 1 for i in range(8)] + [stop]
        await self.levels(bits)
        self.pin.value = 1


class UartSink:
    """Decodes a UART line, 8N1: samples each bit in its middle after the start edge."""

    def __init__(self, pin, baud):
        self.pin = pin
        self.bit_ps = Fraction(10 ** 12) / Fraction(baud)
        self.buffer = bytearray()
        self.framing_errors = 0
        self.last_byte_ps = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await FallingEdge(self.pin)
            start = now_ps()
            await Timer(round(self.bit_ps / 2), unit="ps")
            if self.pin.value != 0:
                continue
            byte = 0
            for i in range(9):
                await Timer(round(start + self.bit_ps * (i + Fraction(3, 2)) - now_ps()), unit="ps")
                if i < 8:
                    byte |= int(self.pin.value) << i
                elif self.pin.value != 1:
                    self.framing_errors += 1
                    break
            else:
                self.buffer.append(byte)
                self.last_byte_ps = now_ps()

    async def read(self, count, quiet_bits=400):
        """Up to ``count`` bytes: returns when they are there or the line has been quiet for
        ``quiet_bits`` bit times."""
        waited = 0
        while len(self.buffer) < count and waited < quiet_bits:
            before = len(self.buffer)
            await Timer(round(self.bit_ps * 10), unit="ps")
            waited = 0 if len(self.buffer) > before else waited + 10
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data


class SimulatedTime:
    """``idle(seconds)`` and ``now_ps`` of a port or bus whose user runs in a bridge thread:
    the simulation's time, not the wall clock's."""

    def idle(self, seconds):
        async def wait():
            await Timer(max(1, round(seconds * 1e12)), unit="ps")
        resume(wait)()

    @property
    def now_ps(self):
        async def now():
            return now_ps()
        return resume(now)()


class CocotbPort(SimulatedTime):
    """The serial-port face of the simulated board, for BoardLink running in a bridge thread."""

    name = "simulated UART"

    def __init__(self, source, sink):
        self.source, self.sink = source, sink

    def write(self, data):
        resume(self.source.send)(bytes(data))
        return len(data)

    def read(self, count=1):
        return resume(self.sink.read)(count)

    def reset_input_buffer(self):
        self.sink.buffer.clear()


class HostLinkTB:
    def __init__(self, dut, params):
        self.dut = dut
        self.params = params
        self.config = AcceleratorConfig.from_dict(params["config"])
        self.clock_hz = params["clock_hz"]
        self.baud = params["baud"]
        self.rng = random.Random(params.get("seed", 0))
        self.source = UartSource(dut.rx, self.baud)
        self.sink = UartSink(dut.tx, self.baud)
        self.port = CocotbPort(self.source, self.sink)

    async def start(self):
        dut = self.dut
        # Icarus leaves Amaranth's combinational logic at X until an input changes.
        dut.rst.value = 1
        dut.rx.value = 1
        period_ps = round(Fraction(10 ** 12) / Fraction(self.clock_hz))
        cocotb.start_soon(Clock(dut.clk, period_ps, unit="ps").start())
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await Timer(round(self.source.bit_ps * 4), unit="ps")

    async def reply(self):
        """The next reply frame from the line: ``(type, payload)``."""
        data = bytearray()
        while True:
            frame = protocol.split_frame(data)
            if frame is not None:
                return frame[0], frame[1]
            chunk = await self.sink.read(1)
            assert chunk, f"no reply (got {bytes(data).hex()})"
            data += chunk

    async def request(self, frame):
        await self.source.send(frame)
        return await self.reply()

    async def expect_error(self, frame, code, command):
        reply_type, data = await self.request(frame)
        assert (reply_type, data) == (protocol.ERROR_TYPE, bytes([code, command])), \
            f"expected {code.name}: got type {reply_type:#x} payload {data.hex()}"


async def make_tb(dut):
    tb = HostLinkTB(dut, parameters())
    await tb.start()
    return tb


@cocotb.test()
async def corrupted_frames_and_recovery(dut):
    """Garbage, a glitch, a framing error, bad CRC, unknown type, bad length and truncated
    frames each get their reply (or are counted), and the link answers good frames after."""
    tb = await make_tb(dut)
    info_frame = encode_frame(Command.PING)
    reply_type, data = await tb.request(b"\x00\x42\xff" + info_frame)
    assert reply_type == protocol.reply_type(Command.PING)
    info = DeviceInfo.unpack(data)
    assert info.mismatches(tb.config) == [] and info.baud == tb.baud
    assert info.clock_hz == round(tb.clock_hz)

    # A low glitch shorter than half a bit, then a character with a zero stop bit.
    await tb.source.levels([0, 1], bit_ps=round(tb.source.bit_ps / 4))
    await tb.source.send(b"\x5a", stop=0)
    await tb.source.levels([1] * 4)
    # Bad CRC, unknown type, bad length.
    frame = bytearray(encode_frame(Command.SEND_INPUT, bytes(range(20))))
    frame[10] ^= 0x20
    await tb.expect_error(frame, ErrorCode.BAD_CRC, Command.SEND_INPUT)
    await tb.expect_error(encode_frame(0x33, b"abc"), ErrorCode.UNKNOWN_TYPE, 0x33)
    await tb.expect_error(encode_frame(Command.START, b"\x00"), ErrorCode.BAD_LENGTH, Command.START)
    # A frame cut short: the reply comes after the inter-byte timeout.
    await tb.source.send(encode_frame(Command.WRITE, bytes(12))[:7])
    sent = now_ps()
    reply_type, data = await tb.reply()
    assert (reply_type, data) == (protocol.ERROR_TYPE, bytes([ErrorCode.TRUNCATED, Command.WRITE]))
    timeout_ps = Fraction(info.timeout_cycles * 10 ** 12) / Fraction(info.clock_hz)
    assert now_ps() - sent > timeout_ps, "TRUNCATED before the timeout"

    reply_type, data = await tb.request(encode_frame(Command.STATUS))
    status = Status.unpack(data)
    assert status.errors[ErrorCode.BAD_CRC] == 1
    assert status.errors[ErrorCode.UNKNOWN_TYPE] == 1
    assert status.errors[ErrorCode.BAD_LENGTH] == 1
    assert status.errors[ErrorCode.TRUNCATED] == 1
    assert status.framing_errors == 1
    assert status.garbage == 3
    assert status.frames == 2 and status.input_free == info.input_depth
    assert tb.sink.framing_errors == 0
    reply_type, data = await tb.request(info_frame)
    assert DeviceInfo.unpack(data) == info


@cocotb.test()
async def driver_runs_jobs(dut):
    """BoardLink over the UART pins: load memories, run LeNet-sized images, check every
    output byte, and measure the link's timings."""
    tb = await make_tb(dut)
    params, rng = tb.params, tb.rng
    images = params.get("images", 2)
    input_bytes = params.get("input_bytes", 784)
    scale = params.get("load_scale", 1)       # fraction of the memories loaded
    lut = [rng.randrange(256) for _ in range(int(256 * scale))]
    weights = [rng.randrange(1 << 16) for _ in range(int(256 * scale))]
    params_words = [rng.randrange(1 << 64) for _ in range(int(64 * scale))]
    memories = {HostSpace.PROGRAM: [input_bytes | 10 << 16], HostSpace.WEIGHTS: weights,
                HostSpace.PARAMS: params_words, HostSpace.ACTIVATIONS: lut}
    inputs = [bytes(rng.randrange(len(lut)) for _ in range(input_bytes)) for _ in range(images)]
    expected = [bytes(lut[x] for x in image[:10]) for image in inputs]
    marks = []

    def host():
        link = BoardLink(tb.port, timeout=30)
        t0 = tb.port.now_ps
        info = link.ping()
        t1 = tb.port.now_ps
        link.write_memory(HostSpace.WEIGHTS, 0, weights)
        t2 = tb.port.now_ps
        run = run_images(link, memories, inputs, output_bytes=10, config=tb.config,
                         progress=lambda *_: marks.append(tb.port.now_ps))
        return link, run, t0, t1, t2, info

    assert images >= 2, "timings need two images"
    wall = time.monotonic()
    link, run, t0, t1, t2, info = await bridge(host)()
    wall = time.monotonic() - wall
    assert run.outputs == expected
    assert all(c > 0 for c in run.cycles)
    status = await bridge(link.status)()
    assert sum(status.errors.values()) == 0 and status.framing_errors == 0
    assert status.overruns == 0 and status.garbage == 0 and link.stats.resent == 0

    # Timings in simulated time (the line and the gateware; no USB latency).
    ping_ps = t1 - t0
    load_bytes = (len(lut) + 2 * len(weights) + 8 * len(params_words) + 8)
    image_ps = [b - a for a, b in zip(marks, marks[1:])]
    image_mean = sum(image_ps) / len(image_ps)
    # From the start of run_images to the first image's end: PING, STATUS, FLUSH, the load
    # and one image.
    setup_ps = marks[0] - t2 - image_mean
    report = {
        "clock_hz": tb.clock_hz, "baud": tb.baud,
        "ping_round_trip_us": float(ping_ps) / 1e6,
        "ping_line_bytes": len(encode_frame(Command.PING)) + protocol.FRAME_OVERHEAD
        + len(info.pack()),
        "image_us": [float(p) / 1e6 for p in image_ps],
        "load_payload_bytes": load_bytes,
        "write_payload_bytes": 2 * len(weights),
        "write_us": float(t2 - t1) / 1e6,
        "ping_status_flush_load_us": float(setup_ps) / 1e6,
        "cycles": run.cycles,
        "wall_seconds": wall,
    }
    dut._log.info("host link timings: %s", json.dumps(report))
    if params.get("report"):
        with open(params["report"], "w") as handle:
            json.dump(report, handle, indent=1)
