"""SPI target: the host link's byte streams over SPI mode 0, in the host's clock.

The wire format is :mod:`fpganet.link.spi_wire`'s. The shift registers run on the SPI
clock itself (SCK as a clock, not oversampled), so SCK may be as fast as the pins and the
clock network allow whatever the ``sync`` clock is; two asynchronous FIFOs cross into
``sync``. Chip select high resets the bit and byte counters asynchronously; the FIFOs keep
their bytes.
"""

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import PulseSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from fpganet.link import spi_wire

from .linkfifo import check_int

__all__ = ["SPITarget"]


class SPITarget(wiring.Component):
    """An SPI mode-0 target carrying two byte streams (:mod:`fpganet.link.spi_wire`).

    Parameters
    ----------
    rx_depth : int
        Bytes the queue to ``rx`` holds (a power of two, at least 4): what the host may send
        ahead of a request that blocks the frame parser (a READ_OUTPUT waiting for the
        accelerator); more is dropped and counted in :attr:`overrun`.
    tx_depth : int
        Bytes the queue from ``tx`` holds (a power of two, at least 4).

    Members
    -------
    sck, cs_n, mosi : In(1)
        The SPI pins, asynchronous to ``sync``. ``sck`` clocks the target; ``cs_n`` resets it
        while high, so the first rising edge of SCK must come at least a few nanoseconds after
        ``cs_n`` falls (the FTDI MPSSE leaves one command's time).
    miso : Out(1)
        Changes on the falling edge of SCK; the first bit is valid when ``cs_n`` falls.
    miso_oe : Out(1)
        Drive ``miso``: while ``cs_n`` is low (a flash chip may share the line).
    rx : Out(stream.Signature(8))
        Link bytes from the host, in ``sync``.
    tx : In(stream.Signature(8))
        Reply bytes to the host, in ``sync``; ``tx.ready`` falls while the queue is full.
    overrun : Out(1)
        One ``sync`` cycle for each byte from the host dropped because the queue was full.

    Latency: a host byte reaches ``rx`` about three ``sync`` cycles after its last bit; a
    reply byte can leave in the first byte of MISO that starts two SCK cycles after it was
    taken (the queue's pointer crosses into SCK's domain on SCK's own edges). Throughput:
    one byte each way per 8 SCK cycles, less escapes on MISO.
    """

    def __init__(self, *, rx_depth=16, tx_depth=16):
        for name, depth in (("rx_depth", rx_depth), ("tx_depth", tx_depth)):
            check_int(name, depth, 4, 1 << 15)
            if depth & (depth - 1):
                raise ValueError(f"{name} must be a power of two, not {depth}")
        self.rx_depth = rx_depth
        self.tx_depth = tx_depth
        super().__init__({
            "sck": In(1),
            "cs_n": In(1, init=1),
            "mosi": In(1),
            "miso": Out(1),
            "miso_oe": Out(1),
            "rx": Out(stream.Signature(8)),
            "tx": In(stream.Signature(8)),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        # Three domains on SCK: the counters (reset while chip select is high), MISO on the
        # falling edge (the same reset), and the queues' SCK side, which keeps its state.
        m.domains.spi = spi = ClockDomain("spi", async_reset=True, local=True)
        m.domains.spi_neg = spi_neg = ClockDomain("spi_neg", clk_edge="neg", async_reset=True,
                                                  local=True)
        m.domains.spi_queue = queue = ClockDomain("spi_queue", reset_less=True, local=True)
        m.d.comb += [
            spi.clk.eq(self.sck), spi_neg.clk.eq(self.sck), queue.clk.eq(self.sck),
            spi.rst.eq(self.cs_n), spi_neg.rst.eq(self.cs_n),
            self.miso_oe.eq(~self.cs_n),
        ]
        m.submodules.rx_queue = rx_queue = AsyncFIFO(width=8, depth=self.rx_depth,
                                                     w_domain="spi_queue", r_domain="sync")
        m.submodules.tx_queue = tx_queue = AsyncFIFO(width=8, depth=self.tx_depth,
                                                     w_domain="sync", r_domain="spi_queue")
        m.submodules.dropped = dropped = PulseSynchronizer("spi_queue", "sync")
        m.d.comb += [
            self.rx.payload.eq(rx_queue.r_data),
            self.rx.valid.eq(rx_queue.r_rdy),
            rx_queue.r_en.eq(self.rx.ready),
            tx_queue.w_data.eq(self.tx.payload),
            tx_queue.w_en.eq(self.tx.valid),
            self.tx.ready.eq(tx_queue.w_rdy),
            self.overrun.eq(dropped.o),
        ]

        # Rising edges: the MOSI byte, the header, the link bytes into the rx queue.
        bit = Signal(3)                 # bits of the current byte taken so far
        shift = Signal(7)               # its bits so far, the latest in bit 0
        header = Signal(range(spi_wire.HEADER_BYTES + 1))   # header bytes taken (saturates)
        accepted = Signal()             # the first byte was COMMAND
        count_low = Signal(8)
        remaining = Signal(16)          # link bytes still to come in this transaction
        byte = Cat(self.mosi, shift)    # the whole byte, at its last rising edge
        last_bit = bit == 7
        m.d.spi += [bit.eq(bit + 1), shift.eq(byte[:7])]
        with m.If(last_bit):
            with m.Switch(header):
                with m.Case(0):
                    m.d.spi += accepted.eq(byte == spi_wire.COMMAND)
                with m.Case(1):
                    m.d.spi += count_low.eq(byte)
                with m.Case(2):
                    m.d.spi += remaining.eq(Mux(accepted, Cat(count_low, byte), 0))
                with m.Default():
                    with m.If(remaining != 0):
                        m.d.spi += remaining.eq(remaining - 1)
                        m.d.comb += [rx_queue.w_data.eq(byte), rx_queue.w_en.eq(1),
                                     dropped.i.eq(~rx_queue.w_rdy)]
            with m.If(header != spi_wire.HEADER_BYTES):
                m.d.spi += header.eq(header + 1)

        # Falling edges: MISO. A byte is loaded at the falling edge after the previous byte's
        # last rising edge; a reply byte (or an escape's second half) leaves the tx queue at
        # its own last rising edge, so one cut off by chip select is sent again.
        out = Signal(8, init=spi_wire.MAGIC)
        carries = Signal()              # ``out`` is a reply byte: take it from the queue
        escaping = Signal()             # ``out`` is ESCAPE; its byte follows
        head = tx_queue.r_data
        special = (head == spi_wire.IDLE) | (head == spi_wire.ESCAPE)
        m.d.comb += [
            self.miso.eq(out[7]),
            tx_queue.r_en.eq(last_bit & carries & accepted),
        ]
        with m.If(bit == 0):
            # Rising edge 8 of a byte has just wrapped the bit count: the next byte starts.
            m.d.spi_neg += [carries.eq(0), escaping.eq(0)]
            with m.If(~accepted | ~tx_queue.r_rdy):
                m.d.spi_neg += out.eq(spi_wire.IDLE)
            with m.Elif(escaping):
                m.d.spi_neg += [out.eq(head ^ spi_wire.ESCAPE_XOR), carries.eq(1)]
            with m.Elif(special):
                m.d.spi_neg += [out.eq(spi_wire.ESCAPE), escaping.eq(1)]
            with m.Else():
                m.d.spi_neg += [out.eq(head), carries.eq(1)]
        with m.Else():
            m.d.spi_neg += out.eq(out << 1)
        return m
