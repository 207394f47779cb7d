"""cocotb testbench of the whole system on its SPI pins: a network on the accelerator behind
the SPI host link, driven bit by bit by the real host driver through a model of the FTDI
MPSSE's timing.

The design under test is :class:`fpganet.hdl.hostlink.HostLinkSystem` (``link="spi"``)
with the real :class:`~fpganet.hdl.accelerator.Accelerator`, in the free-running harness
(the simulator makes ``clk`` and ``rst``; the testbench touches only ``sck``, ``cs_n``,
``mosi`` and reads ``miso``).

The host is :class:`fpganet.link.BoardLink` and :func:`~fpganet.link.run_images` over
:class:`fpganet.link.spi.SPIPort`, in a ``cocotb.task.bridge`` thread, exactly as
``fpganet board run --link spi`` runs them. Its transactions reach the pins through
:class:`MpsseHost`: chip select low, every bit at the SCK period (MOSI set with SCK's
falling edge, MISO sampled at the rising one, as the MPSSE's mode 0 does), chip select
high, and then the host's turnaround (``gap_ps``: the USB round trip between one
transaction and the next, which the simulation cannot measure and takes as given).

Tests (in this order; the second uses the network the first loaded):

``network_over_the_spi_pins``
    Load the network, run images, check every int8 output against the golden model and
    every cycle stamp against the performance model, and measure the images' period.
``noise_cuts_then_a_good_image``
    A transaction with a wrong command byte, one cut off inside a byte, and a SEND_INPUT
    whose transaction ends inside its frame (TRUNCATED once the inter-byte timeout passes);
    then one more image, answered as the golden model answers it.

Parameters (``FPGANET_TB``, JSON, written by ``tests/test_system_spi.py``): ``config``,
``clock_hz``, ``timeout_cycles``, ``compiled``, ``images`` as for ``sim/tb_system.py``;
``sck_ps`` (SCK's period), ``phase_ps`` (its first edge's offset from the clock's),
``gap_ps``, ``read_ahead`` (the SPIPort's), ``report``.
"""

import json
import time

import cocotb
from cocotb.task import bridge, resume
from cocotb.triggers import Timer

import numpy as np

from fpganet import perf
from fpganet.compiler import load_compiled
from fpganet.datasets import mnist
from fpganet.golden import run_golden
from fpganet.isa import HostSpace
from fpganet.link import BoardLink, load_compiled_job, protocol, run_images, spi_wire
from fpganet.link.protocol import Command, ErrorCode, encode_frame
from fpganet.link.spi import SPIPort
from fpganet.sim.tb_hostlink import SimulatedTime, now_ps, parameters
from fpganet.sim.tb_system import HARNESS_RESET_PS, HOST_TIMEOUT_S

SESSION = {}


def prepare(params):
    """The compiled job, ``images`` MNIST eval images and one START's more (for the second
    test) as input bytes, their golden answers, and the performance model of one START."""
    job = load_compiled_job(params["compiled"])
    net = load_compiled(params["compiled"])
    count = params["images"] + job.batch
    x, _labels = mnist("eval", limit=count)
    q_in = job.quantize(x)
    images = [np.ascontiguousarray(q_in[i]).tobytes() for i in range(count)]
    golden = run_golden(net, q_in).reshape(count, -1)
    model = perf.program_cycles(job.memories[HostSpace.PROGRAM], job.config)
    assert len(model.stamps) == job.batch, (f"the program of one START has {len(model.stamps)} "
                                            f"STAMPs for {job.batch} images")
    return job, images, golden, model


def check_answer(index, output, cycles, golden, model, batch):
    """One image's output against the golden model (bit for bit) and its stamp against the
    performance model (the stamp of its place in its START)."""
    got = np.frombuffer(output, dtype=np.int8)
    assert np.array_equal(got, golden[index]), (
        f"MNIST eval image {index}: the board's int8 outputs {got.tolist()} differ from the "
        f"golden model's {golden[index].tolist()}")
    expected = model.stamps[index % batch]
    assert cycles == expected, (f"MNIST eval image {index}: cycle stamp {cycles:,}, but the "
                                f"performance model gives {expected:,}")


class MpsseHost:
    """An SPI mode-0 host on the design's pins with the MPSSE's timing: SCK runs without
    pause through a transaction; ``gap_ps`` passes after each."""

    def __init__(self, dut, sck_ps, gap_ps):
        self.dut = dut
        self.half = Timer(sck_ps // 2, unit="ps")
        self.gap = Timer(gap_ps, unit="ps") if gap_ps else None
        self.transactions = 0
        self.bits = 0

    async def exchange(self, mosi, cut_bits=None):
        dut, half = self.dut, self.half
        sck, pin, miso_pin = dut.sck, dut.mosi, dut.miso
        bits = len(mosi) * 8 if cut_bits is None else cut_bits
        dut.cs_n.value = 0
        await half
        miso = bytearray(-(-bits // 8))
        for index in range(bits):
            byte, position = divmod(index, 8)
            pin.value = (mosi[byte] >> (7 - position)) & 1
            sck.value = 0
            await half
            if miso_pin.value:
                miso[byte] |= 0x80 >> position
            sck.value = 1
            await half
        sck.value = 0
        await half
        dut.cs_n.value = 1
        self.transactions += 1
        self.bits += bits
        if self.gap is not None:
            await self.gap
        return bytes(miso)


class CocotbBus(SimulatedTime):
    """:class:`MpsseHost` as the bus of an SPIPort in a bridge thread."""

    def __init__(self, host):
        self.host = host

    def exchange(self, mosi):
        return resume(self.host.exchange)(bytes(mosi))


async def start(dut, params):
    dut.cs_n.value = 1
    dut.sck.value = 0
    dut.mosi.value = 0
    await Timer(HARNESS_RESET_PS + params["phase_ps"], unit="ps")
    host = MpsseHost(dut, params["sck_ps"], params["gap_ps"])
    return host, CocotbBus(host)


async def watch_busy(dut, edges):
    """Record ``(time_ps, busy)`` at each change of the status port's busy bit."""
    busy = 0
    while True:
        await dut.status.value_change
        now = int(dut.status.value) & 1
        if now != busy:
            busy = now
            edges.append((float(now_ps()), now))


@cocotb.test()
async def network_over_the_spi_pins(dut):
    """Load the network over the SPI pins with the real driver, run images, check the outputs
    against the golden model and the stamps against the performance model."""
    params = parameters()
    host, bus = await start(dut, params)
    job, images, golden, model = prepare(params)
    count = params["images"]
    edges = []
    cocotb.start_soon(watch_busy(dut, edges))

    def run():
        link = BoardLink(SPIPort(bus, timeout=HOST_TIMEOUT_S, read_ahead=params["read_ahead"]),
                         timeout=HOST_TIMEOUT_S)
        began = bus.now_ps
        result = run_images(link, job.memories, images[:count], output_bytes=job.output_bytes,
                            config=job.config, timeout=HOST_TIMEOUT_S,
                            images_per_start=job.batch)
        return link, result, began, link.status()

    wall = time.monotonic()
    link, result, began_ps, status = await bridge(run)()
    wall = time.monotonic() - wall
    for index in range(count):
        check_answer(index, result.outputs[index], result.cycles[index], golden, model, job.batch)
    # NO_SPACE is the input FIFO's flow control (a START's input sent while the one before
    # still holds part of the FIFO), not an error.
    errors = {code: n for code, n in status.errors.items() if n and code != ErrorCode.NO_SPACE}
    assert not errors, f"STATUS counted errors: {status}"
    assert (status.overruns, status.garbage) == (0, 0), f"STATUS counted line errors: {status}"
    assert link.stats.resent == 0, f"the driver resent {link.stats.resent} requests"
    assert result.info.link_names == ["spi"], f"PING names the links {result.info.link_names}"
    # The accelerator's runs, measured on its busy flag: one per START. From the second on,
    # each START was queued on the board while the one before computed.
    rises = [t for t, level in edges if level]
    falls = [t for t, level in edges if not level]
    starts = count // job.batch
    assert len(rises) == len(falls) == starts, f"{len(rises)} runs for {starts} STARTs: {edges}"
    idle_ps = [b - a for a, b in zip(falls, rises[1:])]
    SESSION.update(job=job, images=images, golden=golden, model=model)
    SESSION["report"] = {
        "clock_hz": params["clock_hz"], "sck_ps": params["sck_ps"], "gap_ps": params["gap_ps"],
        "read_ahead": params["read_ahead"], "images": count, "images_per_start": job.batch,
        "run_ps": [b - a for a, b in zip(rises, falls)],
        "idle_ps": idle_ps,
        # From the second run's start to the last run's end: the steady state.
        "steady_ps": falls[-1] - rises[1] if starts > 1 else None,
        "steady_images": (starts - 1) * job.batch,
        "load_ps": rises[0] - float(began_ps),
        "transactions": host.transactions, "bits": host.bits,
        "no_space": status.no_space, "requests": link.stats.requests,
        "stamp_cycles": result.cycles, "model_stamp_cycles": model.stamps[0],
        "model_total_cycles": model.total,
        "wall_s": wall,
    }
    dut._log.info("over the SPI pins: %s", json.dumps(SESSION["report"]))


@cocotb.test()
async def noise_cuts_then_a_good_image(dut):
    """Noise, cut transactions and a truncated frame leave the link working: the next image
    is answered as the golden model answers it."""
    assert "job" in SESSION, "needs the network loaded by network_over_the_spi_pins"
    params = parameters()
    host, bus = await start(dut, dict(params, phase_ps=0))
    job, images, golden, model = (SESSION[key] for key in ("job", "images", "golden", "model"))
    port = SPIPort(bus, timeout=HOST_TIMEOUT_S, read_ahead=params["read_ahead"])
    link = BoardLink(port, timeout=HOST_TIMEOUT_S)
    await bridge(link.ping)()
    before = await bridge(link.status)()

    # A wrong command byte: its bytes reach nothing, whatever they hold.
    miso = await host.exchange(bytes([0x00, 0x10, 0x00]) + encode_frame(Command.PING) * 2)
    assert miso[0] == spi_wire.MAGIC and set(miso[1:]) == {spi_wire.IDLE}, miso.hex()
    # Transactions cut inside a byte: of the header, and of a frame's bytes (its partial byte
    # never reaches the parser, which times the frame out).
    await host.exchange(spi_wire.transaction(b""), cut_bits=13)
    frame = encode_frame(Command.SEND_INPUT, images[0])
    await host.exchange(spi_wire.transaction(frame), cut_bits=8 * (3 + 300) + 5)
    await Timer(round(2 * params["timeout_cycles"] * 1e12 / params["clock_hz"]), unit="ps")
    reply = await bridge(port.read)(8)
    assert protocol.split_frame(reply)[:2] == (protocol.ERROR_TYPE,
                                               bytes([ErrorCode.TRUNCATED, Command.SEND_INPUT]))
    status = await bridge(link.status)()
    assert status.input_free == link.info.input_depth, "the cut frame left input bytes behind"
    assert status.truncated - before.truncated == 1 and status.garbage == before.garbage, status

    first = params["images"]

    def good_images():
        link.send_input(b"".join(images[first:first + job.batch]))
        link.start()
        return link.read_output((job.output_bytes + 4) * job.batch), link.status()

    out, after = await bridge(good_images)()
    record = job.output_bytes + 4
    for place in range(job.batch):
        chunk = out[place * record:(place + 1) * record]
        check_answer(first + place, chunk[:job.output_bytes],
                     int.from_bytes(chunk[job.output_bytes:], "little"), golden, model, job.batch)
    assert after.errors == status.errors and link.stats.resent == 0, after
    if params.get("report"):
        with open(params["report"], "w") as handle:
            json.dump(SESSION["report"], handle, indent=1)
