"""cocotb testbench of the whole system: LeNet-5 on the accelerator, behind the UART host link,
driven bit by bit on its pins by the real host driver.

The design under test is :class:`fpganet.hdl.hostlink.HostLinkSystem` with the real
:class:`~fpganet.hdl.accelerator.Accelerator` (generic processing elements), in the
free-running harness of :func:`fpganet.sim.runner.clock_harness` (the simulator makes the
clock and the reset; the testbench touches only ``rx``, ``tx`` and ``status``), or a whole
board's synthesized netlist under :func:`fpganet.boards.netlist.board_harness`.

The host is :class:`fpganet.link.BoardLink` and :func:`~fpganet.link.run_images`
in a ``cocotb.task.bridge`` thread, reading the compiled directory with
:func:`~fpganet.link.load_compiled_job` exactly as ``fpganet board run`` does. Its
bytes reach the ``rx`` pin through :class:`LineSource`, which puts every bit of every 8N1
character on the pin at its bit time; :class:`~fpganet.sim.tb_hostlink.UartSink` decodes
``tx``.

Tests (in this order; the second uses the network the first loaded):

``lenet_over_the_uart_pins``
    Load LeNet-5 (program, weights, parameters: the whole ~65 KB over the line), run MNIST
    images, check every int8 logit against the golden model and every cycle stamp against
    the performance model (:func:`fpganet.perf.program_cycles`), and that STATUS counted
    no error.
``damaged_frames_then_a_good_image``
    Garbage between frames, a SEND_INPUT cut short (the line then quiet past the inter-byte
    timeout), a SEND_INPUT with a bad CRC, a frame of an unknown type; each gets its
    documented reply (garbage: none, skipped and counted) and leaves the input FIFO empty.
    Then one more image, sent without FLUSH, must still be answered as the golden model
    answers it.

Parameters come from the environment variable ``FPGANET_TB`` (JSON), written by
``tests/test_system_uart.py``:

``config``
    :meth:`AcceleratorConfig.to_dict` of the design.
``clock_hz``, ``baud``, ``timeout_cycles``
    As given to HostLinkSystem (``clock_hz`` must be the harness's clock).
``compiled``
    The directory ``fpganet compile`` wrote for ``config``.
``images``
    MNIST eval images run by the first test (the second runs the next one).
``report``
    Path of a JSON file to write the measured times and cycles into (optional).
``reset_ps``
    How long the design is in reset from time 0 (default: the free-running harness's 25 ns;
    a board netlist's power-on reset lasts longer, ``tests/test_board_netlist.py``).
"""

import json
import time

import numpy as np

import cocotb
from cocotb.task import bridge
from cocotb.triggers import Timer

from fpganet import perf
from fpganet.link import protocol
from fpganet.codegen.images import STAMP_BYTES
from fpganet.link import BoardLink, load_compiled_job, run_images
from fpganet.link.protocol import Command, DeviceInfo, ErrorCode, encode_frame
from fpganet.compiler import load_compiled
from fpganet.datasets import mnist
from fpganet.golden import run_golden
from fpganet.isa import HostSpace
from fpganet.sim.tb_hostlink import HostLinkTB, UartSource, now_ps, parameters

#: Wall-clock seconds the driver waits for a reply or an image: the simulation runs far slower
#: than the board, so the driver's real-time limits must not be what ends a slow CI run.
HOST_TIMEOUT_S = 300
#: The free-running harness holds reset for its first 25 ns (runner.clock_harness).
HARNESS_RESET_PS = 25_000
#: Bytes between frames that the link must skip and count: none is the sync byte 0xA5.
GARBAGE = bytes([0x00, 0xFF, 0x5A, 0x13, 0x80, 0x7E, 0xA4])
#: Payload bytes of the SEND_INPUT that is cut short (its header promises a whole image).
TRUNCATED_AFTER = 300

#: What the first test leaves for the second: the loaded job, its data and the expectations.
SESSION = {}


class LineSource(UartSource):
    """Drives the rx pin with 8N1 characters, every bit at its bit time.

    :class:`~fpganet.sim.tb_hostlink.UartSource` wakes Python once per bit and does exact
    fraction arithmetic each time; loading LeNet-5 is ~690,000 bits, so this source, when a
    bit lasts a whole number of picoseconds, wakes Python once per *change* of level instead
    (a run of equal bits is one wait as long as the run), with the waits of every byte value
    made once. The pin carries the same waveform, bit for bit: each character's start bit,
    eight data bits and stop bit, at exact bit times. Other bit times fall back to
    :class:`UartSource`.
    """

    def __init__(self, pin, baud):
        super().__init__(pin, baud)
        self.runs = None
        if self.bit_ps.denominator == 1:
            bit_ps = int(self.bit_ps)
            timers = {}     # one Timer per run length, awaited again and again
            self.runs = []
            for byte in range(256):
                bits = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
                runs = []
                for bit in bits:
                    if runs and runs[-1][0] == bit:
                        runs[-1][1] += 1
                    else:
                        runs.append([bit, 1])
                self.runs.append(tuple(
                    (level, timers.setdefault(length, Timer(length * bit_ps, unit="ps")))
                    for level, length in runs))

    async def send(self, data, stop=1):
        if self.runs is None or stop != 1:
            await super().send(data, stop)
            return
        # The stop bit (1) and the next start bit (0) always differ, so no run spans two
        # characters and each byte's runs can be made in advance.
        pin, runs = self.pin, self.runs
        for byte in bytes(data):
            for level, timer in runs[byte]:
                pin.value = level
                await timer
        pin.value = 1


class SystemTB(HostLinkTB):
    """:class:`~fpganet.sim.tb_hostlink.HostLinkTB` on the free-running harness: no clock or
    reset to drive, :class:`LineSource` on ``rx``, and replies that may take longer than the
    inter-byte timeout."""

    def __init__(self, dut, params):
        super().__init__(dut, params)
        self.source = LineSource(dut.rx, self.baud)
        self.port.source = self.source
        self.timeout_cycles = params["timeout_cycles"]
        self.timeout_ps = self.timeout_cycles * 10 ** 12 / self.clock_hz

    async def start(self):
        # The harness makes the clock and the reset; the line stays idle (high) through both.
        reset_ps = self.params.get("reset_ps", HARNESS_RESET_PS)
        await Timer(reset_ps + round(self.source.bit_ps * 4), unit="ps")

    async def reply(self, quiet_bits=400):
        """The next reply frame: ``(type, payload)``; fails after ``quiet_bits`` bit times of
        silence."""
        data = bytearray()
        while True:
            frame = protocol.split_frame(data)
            if frame is not None:
                return frame[0], frame[1]
            chunk = await self.sink.read(1, quiet_bits)
            assert chunk, (f"no reply within {quiet_bits} bit times of silence "
                           f"(received so far: {bytes(data).hex() or 'nothing'})")
            data += chunk


def prepare(params):
    """The compiled job, ``images + 1`` MNIST eval images as input bytes (the last for the
    second test), their golden answers and the performance model of the one-image program."""
    job = load_compiled_job(params["compiled"])
    net = load_compiled(params["compiled"])
    count = params.get("images", 3) + 1
    x, _labels = mnist("eval", limit=count)
    q_in = job.quantize(x)
    images = [np.ascontiguousarray(q_in[i]).tobytes() for i in range(count)]
    golden = run_golden(net, q_in).reshape(count, -1)
    model = perf.program_cycles(job.memories[HostSpace.PROGRAM], job.config)
    assert len(model.stamps) == 1, f"the one-image program has {len(model.stamps)} STAMPs, not 1"
    return job, images, golden, model


def check_answer(index, output, cycles, golden, model):
    """One image's answer against the golden model (bit for bit) and its stamp against the
    performance model."""
    got = np.frombuffer(output, dtype=np.int8)
    assert np.array_equal(got, golden[index]), (
        f"MNIST eval image {index}: the board's int8 logits {got.tolist()} differ from the "
        f"golden model's {golden[index].tolist()}")
    assert cycles == model.stamps[0], (
        f"MNIST eval image {index}: cycle stamp {cycles:,}, but the performance model gives "
        f"{model.stamps[0]:,} cycles before the STAMP")


@cocotb.test()
async def lenet_over_the_uart_pins(dut):
    """Load LeNet-5 over the rx pin with the real driver, run MNIST images, check the logits
    against the golden model and the stamps against the performance model."""
    params = parameters()
    tb = SystemTB(dut, params)
    await tb.start()
    job, images, golden, model = prepare(params)
    assert job.config == tb.config, (f"the network was compiled for {job.config.name}, the "
                                     f"design is {tb.config.name}")
    count = len(images) - 1
    marks = []

    def host():
        link = BoardLink(tb.port, timeout=HOST_TIMEOUT_S)
        began = tb.port.now_ps
        run = run_images(link, job.memories, images[:count], output_bytes=job.output_bytes,
                         config=job.config, timeout=HOST_TIMEOUT_S,
                         progress=lambda *_: marks.append((tb.port.now_ps, time.monotonic())))
        return link, run, began, link.status()

    wall = time.monotonic()
    link, run, began_ps, status = await bridge(host)()
    wall = time.monotonic() - wall
    for index in range(count):
        check_answer(index, run.outputs[index], run.cycles[index], golden, model)
    assert sum(status.errors.values()) == 0, f"STATUS counted errors: {status}"
    assert (status.framing_errors, status.overruns, status.garbage) == (0, 0, 0), \
        f"STATUS counted line errors: {status}"
    assert link.stats.resent == 0, f"the driver resent {link.stats.resent} requests"
    assert tb.sink.framing_errors == 0, f"{tb.sink.framing_errors} framing errors on tx"
    assert not status.busy and status.done_seen, f"the accelerator did not finish: {status}"
    assert status.cycles == model.total, (f"the accelerator's counter is {status.cycles:,} "
                                          f"after the last image; the model says {model.total:,}")

    # The load's line bytes: each WRITE frame (header, space and address, words, CRC) and its
    # 6-byte ACK, which the host waits for before the next.
    load_bytes = load_line_bytes = 0
    for space, words in job.memories.items():
        word_bytes = link.info.word_bytes(space)
        frames = -(-len(words) // (link.info.max_write_bytes // word_bytes))
        load_bytes += len(words) * word_bytes
        load_line_bytes += len(words) * word_bytes + frames * (2 * protocol.FRAME_OVERHEAD + 4)
    image_ps = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
    image_mean_ps = sum(image_ps) / len(image_ps) if image_ps else 0
    # The driver sends image n+1 while image n computes: an image must take less than its
    # input's line time and its compute time one after the other.
    serial_ps = (len(images[0]) * 10 / tb.baud + model.total / tb.clock_hz) * 1e12
    assert image_ps and max(image_ps) < serial_ps, (
        f"images took {max(image_ps) / 1e6:.1f} us each at most: no shorter than sending the "
        f"input ({len(images[0]) * 10 / tb.baud * 1e6:.1f} us) and then computing "
        f"({model.total / tb.clock_hz * 1e6:.1f} us), so the input did not overlap compute")
    # From the driver's start to the first image's end: PING, STATUS, FLUSH, the load, an image.
    load_ps = marks[0][0] - began_ps - image_mean_ps
    load_wall = run.load_seconds
    SESSION.update(job=job, images=images, golden=golden, model=model)
    SESSION["report"] = {
        "clock_hz": tb.clock_hz, "baud": tb.baud, "timeout_cycles": tb.timeout_cycles,
        "images": count,
        "load_payload_bytes": load_bytes,
        "load_line_bytes": load_line_bytes,
        "load_line_ms": load_line_bytes * 10 / tb.baud * 1e3,
        "load_sim_ms": float(load_ps) / 1e9,
        "load_cycles": round(float(load_ps) * tb.clock_hz / 1e12),
        "load_wall_s": load_wall,
        "load_wall_us_per_line_bit": 1e6 * load_wall / (10 * load_line_bytes),
        "image_sim_us": [float(p) / 1e6 for p in image_ps],
        "image_wall_s": [b[1] - a[1] for a, b in zip(marks, marks[1:])],
        "stamp_cycles": run.cycles,
        "model_stamp_cycles": model.stamps[0],
        "model_total_cycles": model.total,
        "sim_ms": float(now_ps()) / 1e9,
        "wall_s": wall,
    }
    dut._log.info("LeNet-5 over the UART pins: %s", json.dumps(SESSION["report"]))


@cocotb.test()
async def damaged_frames_then_a_good_image(dut):
    """Garbage, a truncated frame, a bad CRC and an unknown type each get their documented
    reply and leave nothing behind; the next image is still answered correctly."""
    assert "job" in SESSION, ("needs LeNet-5 loaded by lenet_over_the_uart_pins, which failed "
                              "or did not run first")
    params = parameters()
    tb = SystemTB(dut, params)      # the design keeps running: no reset between the tests
    job, images, golden, model = (SESSION[key] for key in ("job", "images", "golden", "model"))
    good, decoy = len(images) - 1, 0
    link = BoardLink(tb.port, timeout=HOST_TIMEOUT_S)
    before = await bridge(link.status)()
    info = await bridge(link.ping)()
    began = time.monotonic()

    # Garbage: skipped and counted, no reply; a PING right after it is answered at once.
    await tb.source.send(GARBAGE)
    silence = await tb.sink.read(1, quiet_bits=200)
    assert silence == b"", f"the link answered garbage with {silence.hex()}"
    reply_type, data = await tb.request(GARBAGE + encode_frame(Command.PING))
    assert reply_type == protocol.reply_type(Command.PING), \
        f"PING after garbage: reply type {reply_type:#04x}"
    assert DeviceInfo.unpack(data) == info, "PING after garbage: a different device info"

    # A SEND_INPUT whose header promises a whole image, cut short: TRUNCATED once the line
    # has been quiet for the inter-byte timeout, and not before.
    frame = encode_frame(Command.SEND_INPUT, images[decoy])
    await tb.source.send(frame[:protocol.HEADER_BYTES + TRUNCATED_AFTER])
    sent = now_ps()
    timeout_bits = round(tb.timeout_ps / float(tb.source.bit_ps))
    reply_type, data = await tb.reply(quiet_bits=timeout_bits + 400)
    truncated = bytes([ErrorCode.TRUNCATED, Command.SEND_INPUT])
    assert (reply_type, data) == (protocol.ERROR_TYPE, truncated), \
        f"truncated SEND_INPUT: expected ERROR TRUNCATED, got type {reply_type:#04x} {data.hex()}"
    # The 8-byte reply follows the timeout within a few cycles; the sink looks every 10 bits.
    waited = float(now_ps() - sent)
    latest = tb.timeout_ps + 100 * float(tb.source.bit_ps)
    assert tb.timeout_ps < waited < latest, (
        f"TRUNCATED came {waited / 1e6:.2f} us after the line went quiet; the timeout is "
        f"{tb.timeout_ps / 1e6:.2f} us")

    # A whole SEND_INPUT with a damaged CRC, and a frame of no known type.
    damaged = bytearray(frame)
    damaged[-1] ^= 0x01
    await tb.expect_error(damaged, ErrorCode.BAD_CRC, Command.SEND_INPUT)
    await tb.expect_error(encode_frame(0x33, b"fpganet"), ErrorCode.UNKNOWN_TYPE, 0x33)

    status = await bridge(link.status)()
    assert status.input_free == info.input_depth and status.output_level == 0, (
        f"damaged frames left bytes behind: input FIFO {info.input_depth - status.input_free} "
        f"bytes, output FIFO {status.output_level} bytes")
    expected = {ErrorCode.BAD_CRC: 1, ErrorCode.UNKNOWN_TYPE: 1, ErrorCode.TRUNCATED: 1}
    counted = {code: status.errors[code] - before.errors[code] for code in ErrorCode}
    assert counted == {code: expected.get(code, 0) for code in ErrorCode}, \
        f"error counters moved by {({code.name: n for code, n in counted.items() if n})}"
    assert status.garbage - before.garbage == 2 * len(GARBAGE), \
        f"{status.garbage - before.garbage} garbage bytes counted, {2 * len(GARBAGE)} sent"
    assert (status.framing_errors, status.overruns) == (before.framing_errors, before.overruns), \
        f"line errors: {status}"

    # One more image, without FLUSH (anything the damaged frames left in the input FIFO would
    # shift it): the driver's per-image requests, as run_images makes them.
    def good_image():
        link.send_input(images[good])
        link.start()
        out = link.read_output(job.output_bytes + STAMP_BYTES)
        return out, link.status()

    out, after = await bridge(good_image)()
    cycles = int.from_bytes(out[job.output_bytes:], "little")
    check_answer(good, out[:job.output_bytes], cycles, golden, model)
    assert after.errors == status.errors and link.stats.resent == 0, \
        f"errors after the good image: {after}"
    assert tb.sink.framing_errors == 0, f"{tb.sink.framing_errors} framing errors on tx"
    report = dict(SESSION.get("report", {}), damaged_frames_wall_s=time.monotonic() - began,
                  sim_ms=float(now_ps()) / 1e9)
    dut._log.info("damaged frames and recovery: %s", json.dumps(report))
    if params.get("report"):
        with open(params["report"], "w") as handle:
            json.dump(report, handle, indent=1)

