"""SPI target: the host link's byte streams over SPI mode 0, in the host's clock.

The wire format is :mod:`fpganet.link.spi_wire`'s. The shift registers run on the SPI
clock itself (SCK as a clock, not oversampled), so SCK may be as fast as the pins and the
clock network allow, up to twice the ``sync`` clock; two byte mailboxes cross into
``sync``. Chip select high resets the bit and byte counters asynchronously; the mailboxes
keep their bytes.
"""

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from fpganet.link import spi_wire

__all__ = ["SPITarget", "spi_pins", "pass_spi_pins"]


def spi_pins():
    """The SPI pins' members as the target sees them (``sck``, ``cs_n``, ``mosi`` in; ``miso``
    and its ``miso_oe`` out), for the signatures of the target and the designs around it."""
    return {"sck": In(1), "cs_n": In(1, init=1), "mosi": In(1), "miso": Out(1),
            "miso_oe": Out(1)}


def pass_spi_pins(outer, inner):
    """Statements connecting ``outer``'s SPI pins to ``inner``'s: the inputs in, the outputs
    out (both components having the members of :func:`spi_pins`)."""
    return [getattr(inner, name).eq(getattr(outer, name)) if member.flow == In else
            getattr(outer, name).eq(getattr(inner, name))
            for name, member in spi_pins().items()]


class SPITarget(wiring.Component):
    """An SPI mode-0 target carrying two byte streams (:mod:`fpganet.link.spi_wire`).

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
        Link bytes from the host, in ``sync``: one byte is held, and ``rx`` must take it before
        the next arrives (the frame parser does, while it reads a frame).
    tx : In(stream.Signature(8))
        Reply bytes to the host, in ``sync``: one byte is held in ``sync`` and one in SCK's
        domain; ``tx.ready`` is low while the first is full.
    overrun : Out(1)
        One ``sync`` cycle for each byte from the host dropped because ``rx`` had not taken
        the one before.

    The two domains meet in two byte-wide mailboxes, each a data register and a toggle that
    crosses through two flip-flops (a FIFO of block RAM would cost two of the iCE40's 30).
    ``sync`` must run at least at half SCK's rate so that it takes each host byte in time.
    Latency: a host byte reaches ``rx`` three ``sync`` cycles after its last bit. A reply byte
    reaches SCK's domain three rising SCK edges after ``tx`` takes it (two synchronizer
    stages, then the copy) and goes out in the next byte that starts. Throughput: one byte
    each way per 8 SCK cycles, less escapes on MISO.
    """

    def __init__(self):
        super().__init__({
            **spi_pins(),
            "rx": Out(stream.Signature(8)),
            "tx": In(stream.Signature(8)),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        # Three domains on SCK: the counters (reset while chip select is high), MISO on the
        # falling edge (the same reset), and the mailboxes' SCK side, which keeps its state
        # across transactions.
        m.domains.spi = spi = ClockDomain("spi", async_reset=True, local=True)
        m.domains.spi_neg = spi_neg = ClockDomain("spi_neg", clk_edge="neg", async_reset=True,
                                                  local=True)
        m.domains.spi_keep = keep = ClockDomain("spi_keep", reset_less=True, local=True)
        m.d.comb += [
            spi.clk.eq(self.sck), spi_neg.clk.eq(self.sck), keep.clk.eq(self.sck),
            spi.rst.eq(self.cs_n), spi_neg.rst.eq(self.cs_n),
            self.miso_oe.eq(~self.cs_n),
        ]

        # Rising edges: the MOSI byte, the header, the link bytes into the rx mailbox.
        bit = Signal(3)                 # bits of the current byte taken so far
        shift = Signal(7)               # its bits so far, the latest in bit 0
        header = Signal(range(spi_wire.HEADER_BYTES + 1))   # header bytes taken (saturates)
        accepted = Signal()             # the first byte was COMMAND
        count_low = Signal(8)
        remaining = Signal(16)          # link bytes still to come in this transaction
        byte = Cat(self.mosi, shift)    # the whole byte, at its last rising edge
        last_bit = bit == 7
        rx_data = Signal(8)
        rx_toggle = Signal()
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
                        m.d.spi_keep += [rx_data.eq(byte), rx_toggle.eq(~rx_toggle)]
            with m.If(header != spi_wire.HEADER_BYTES):
                m.d.spi += header.eq(header + 1)

        # The rx mailbox's ``sync`` side: the byte is copied when its toggle has crossed (it
        # was written at least a ``sync`` cycle before, and the next comes 8 SCK cycles later).
        rx_arrived = Signal()
        # Reset-less, as their SCK-side partners are (which no reset reaches between
        # transactions): a reset of ``sync`` alone must not make a toggle look new.
        rx_seen = Signal(reset_less=True)
        m.submodules.rx_sync = FFSynchronizer(rx_toggle, rx_arrived)
        m.d.sync += [rx_seen.eq(rx_arrived), self.overrun.eq(0)]
        with m.If(self.rx.ready):
            m.d.sync += self.rx.valid.eq(0)
        with m.If(rx_arrived != rx_seen):
            with m.If(self.rx.valid & ~self.rx.ready):
                m.d.sync += self.overrun.eq(1)
            with m.Else():
                m.d.sync += [self.rx.payload.eq(rx_data), self.rx.valid.eq(1)]

        # The tx mailbox: ``sync`` fills its register and flips ``offered``; SCK's domain copies
        # the byte into ``head`` and flips ``taken`` back, which frees the register at once.
        tx_data = Signal(8)
        offered = Signal(reset_less=True)
        taken = Signal()
        offered_spi = Signal()
        taken_sync = Signal()
        m.submodules.offered_sync = FFSynchronizer(offered, offered_spi, o_domain="spi_keep")
        m.submodules.taken_sync = FFSynchronizer(taken, taken_sync)
        m.d.comb += self.tx.ready.eq(offered == taken_sync)
        with m.If(self.tx.valid & self.tx.ready):
            m.d.sync += [tx_data.eq(self.tx.payload), offered.eq(~offered)]
        head = Signal(8)
        head_full = Signal()
        pop = Signal()
        with m.If(~head_full | pop):
            # The next byte moves in at the edge that sends the last one's last bit.
            with m.If(offered_spi != taken):
                m.d.spi_keep += [head.eq(tx_data), head_full.eq(1), taken.eq(~taken)]
            with m.Else():
                m.d.spi_keep += head_full.eq(0)

        # Falling edges: MISO. A byte is loaded at the falling edge after the previous byte's
        # last rising edge; a reply byte (or an escape's second half) leaves ``head`` at its
        # own last rising edge, so one cut off by chip select is sent again.
        out = Signal(8, init=spi_wire.MAGIC)
        carries = Signal()              # ``out`` is a reply byte: take it from ``head``
        escaping = Signal()             # ``out`` is ESCAPE; its byte follows
        special = (head == spi_wire.IDLE) | (head == spi_wire.ESCAPE)
        m.d.comb += [
            self.miso.eq(out[7]),
            pop.eq(last_bit & carries),
        ]
        with m.If(bit == 0):
            # Rising edge 8 of a byte has just wrapped the bit count: the next byte starts.
            m.d.spi_neg += [carries.eq(0), escaping.eq(0)]
            with m.If(~accepted | ~head_full):
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
