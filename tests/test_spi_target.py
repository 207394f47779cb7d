"""amaranth.sim tests of the SPI target: bytes both ways across its two clocks, escapes,
transactions cut anywhere, a wrong command, a full queue."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.sim import Simulator

from fpganet.hdl.spi_target import SPITarget
from fpganet.link import spi_wire
from fpganet.sim.spi_host import spi_exchange

SYNC_PERIOD = 10e-9


class Echo(wiring.Component):
    """An SPI target whose received bytes are its replies; while ``hold`` is high, nothing
    takes them."""

    def __init__(self):
        self.target = SPITarget()
        super().__init__({})
        self.hold = Signal()
        self.overruns = Signal(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.target = target = self.target
        # A queue between them, as the frame parser takes bytes whatever the replies do.
        m.submodules.queue = queue = SyncFIFO(width=8, depth=64)
        m.d.comb += [
            queue.w_data.eq(target.rx.payload),
            queue.w_en.eq(target.rx.valid & ~self.hold),
            target.rx.ready.eq(queue.w_rdy & ~self.hold),
            target.tx.payload.eq(queue.r_data),
            target.tx.valid.eq(queue.r_rdy),
            queue.r_en.eq(target.tx.ready),
        ]
        m.d.sync += self.overruns.eq(self.overruns + target.overrun)
        return m


def run(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(SYNC_PERIOD)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("sck_period", [33.3e-9, 6.7e-9, 91e-9])
def test_bytes_echo_across_transactions(sck_period):
    """Every byte value, 0xFE and 0xFF escaped, comes back in order, whether SCK is slower or
    faster than the design's clock (up to twice it)."""
    dut = Echo()
    rng = random.Random(1)
    sent = bytes(range(256)) + bytes([0xFE, 0xFF] * 8) + bytes(rng.randrange(256) for _ in range(64))
    got = bytearray()

    async def testbench(ctx):
        decoder = spi_wire.MisoDecoder()
        position = 0
        for _ in range(400):
            if len(got) == len(sent):
                break
            chunk = sent[position:position + rng.randrange(1, 12)]
            position += len(chunk)
            miso = await spi_exchange(ctx, dut.target, spi_wire.transaction(chunk, len(chunk) + 6),
                                      sck_period)
            got.extend(decoder.decode(miso))
            assert len(got) <= len(sent)

    run(dut, testbench)
    assert bytes(got) == sent


def test_cut_transactions_lose_nothing():
    """Chip select rising at any bit, inside escapes too: the host's partial bytes are dropped
    only from the cut transaction, and every reply byte comes back once."""
    dut = Echo()
    rng = random.Random(2)
    sent = bytes([0xFE, 0xFF, 0x41, 0xFE, 0xFF, 0xFF, 0x00, 0xFE]) * 4
    got = bytearray()

    async def testbench(ctx):
        decoder = spi_wire.MisoDecoder()
        # The whole input first (no cut), then reads cut at random bits.
        got.extend(decoder.decode(await spi_exchange(ctx, dut.target,
                                                     spi_wire.transaction(sent), 33e-9)))
        for _ in range(400):
            if len(got) == len(sent):
                break
            length = rng.randrange(2, 8)
            cut = rng.randrange(9, length * 8 + 1)
            miso = await spi_exchange(ctx, dut.target, spi_wire.transaction(b"", length - 3),
                                      33e-9, cut_bits=cut)
            whole = miso[:cut // 8]
            got.extend(decoder.decode(whole) if whole else b"")

    run(dut, testbench)
    assert bytes(got) == sent


def test_wrong_command_writes_and_reads_nothing():
    dut = Echo()
    got = bytearray()

    async def testbench(ctx):
        decoder = spi_wire.MisoDecoder()
        bad = bytes([0x00]) + spi_wire.transaction(b"abc", 10)[1:]
        miso = await spi_exchange(ctx, dut.target, bad, 33e-9)
        assert miso[0] == spi_wire.MAGIC and set(miso[1:]) == {spi_wire.IDLE}
        miso = await spi_exchange(ctx, dut.target, spi_wire.transaction(b"", 10), 33e-9)
        got.extend(decoder.decode(miso))

    run(dut, testbench)
    assert got == b""


def test_a_byte_not_taken_is_dropped_and_counted():
    """With the replies held, the first host byte waits in the rx mailbox and the rest are
    dropped and counted; the held one comes back once released."""
    dut = Echo()
    sent = bytes(range(1, 21))
    got = bytearray()

    async def testbench(ctx):
        decoder = spi_wire.MisoDecoder()
        ctx.set(dut.hold, 1)
        miso = await spi_exchange(ctx, dut.target, spi_wire.transaction(sent), 33e-9)
        assert decoder.decode(miso) == b""
        await ctx.tick().repeat(10)
        assert ctx.get(dut.overruns) == len(sent) - 1
        ctx.set(dut.hold, 0)
        await ctx.tick().repeat(10)
        miso = await spi_exchange(ctx, dut.target, spi_wire.transaction(b"", 12), 33e-9)
        got.extend(decoder.decode(miso))

    run(dut, testbench)
    assert bytes(got) == sent[:1]


def test_miso_decoder_refuses_a_missing_board():
    with pytest.raises(ValueError, match="answered 0xff, not the link's 0x5a"):
        spi_wire.MisoDecoder().decode(b"\xff\xff")
