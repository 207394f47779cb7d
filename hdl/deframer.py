"""The host link's request deframer: bytes from the UART in, frame fields and payload bytes out.

A request frame is ``sync, type, length (2, little-endian), payload, CRC-16 (2, most
significant first)`` (docs/reference/hostlink.md). The deframer finds the sync byte, keeps the type
and the length, passes each payload byte on with its index, checks the CRC
(:data:`amaranth.lib.crc.catalog.CRC16_CCITT_FALSE`) and the inter-byte timeout, and then
holds the line until the reply has gone out. What a frame means is the executor's business
(:class:`~fpganet.hdl.executor.CommandExecutor`).
"""

import enum

from amaranth import *
from amaranth.lib import crc, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from fpganet.link import protocol

from .linkfifo import check_int

__all__ = ["Deframer", "at_most"]


def at_most(value, limit):
    """``value <= limit`` for a constant ``limit``, as plain logic.

    Yosys turns ``<=`` into a subtraction, which on iCE40 is a carry chain of one logic cell
    per bit even when one side is a constant; this bit-by-bit form (from the least
    significant bit: at most the limit's low bits so far) lets the LUT mapper fold it into
    a few LUTs.
    """
    if limit < 0:
        return C(0, 1)
    if limit >= (1 << len(value)) - 1:
        return C(1, 1)
    result = C(1, 1)
    for i in range(len(value)):
        if (limit >> i) & 1:
            result = ~value[i] | result
        else:
            result = ~value[i] & result
    return result


class _State(enum.IntEnum):
    IDLE = 0
    TYPE = 1
    LENGTH_LOW = 2
    LENGTH_HIGH = 3
    PAYLOAD = 4
    CRC_HIGH = 5
    CRC_LOW = 6
    DRAIN = 7
    HELD = 8


class Deframer(wiring.Component):
    """Request frames from a byte stream.

    Parameters
    ----------
    max_payload : int
        Longest payload read (1..65535). A longer frame is not read: the deframer ignores
        the line until it has been quiet for the timeout, then reports ``abort`` (the
        request's BAD_LENGTH).
    timeout_cycles : int
        Inter-byte timeout inside a frame, in cycles (16..2**32 - 1).

    Members
    -------
    rx : In(stream.Signature(8))
        Bytes from the host. ``ready`` (a decode of the state) is high while a frame is
        awaited or received, and low from a frame's end (``end`` or ``abort``) until
        ``resume``: the host waits for the reply, and a byte sent meanwhile is the UART's
        overrun. A received byte is never refused otherwise: there is no back-pressure
        inside a frame.
    resume : In(1)
        The reply has gone out: wait for the next sync byte (from the next cycle).
    frame_type : Out(8)
        The request's type byte, from the cycle after it arrives until the deframer is
        back at waiting for a sync byte (0 before it arrives).
    header : Out(1)
        The length's second byte arrives: ``header_length`` is valid (this cycle only).
    header_length : Out(16)
        The payload's length, with ``header``.
    payload_valid : Out(1)
        A payload byte, ``rx.payload``, arrives this cycle (from a flip-flop and
        ``rx.valid`` through one LUT: fit for a write on the falling clock edge).
    index : Out(range(max_payload + 1))
        1 + the payload bytes before this one (1 for the first), a register: the first
        byte goes with ``index == 1``, and the payload's last with ``index == length``.
    end : Out(1)
        The frame's last CRC byte arrives (this cycle only); ``crc_ok`` says whether the
        CRC over ``type .. CRC`` checks.
    crc_ok : Out(1)
        With ``end``.
    abort : Out(1)
        The frame ended badly (one cycle): ``truncated`` (the line went quiet inside it for
        ``timeout_cycles``) or, if not, its length exceeded ``max_payload``.
    truncated : Out(1)
        With ``abort``.
    timed_out : Out(1)
        No byte for ``timeout_cycles - 1`` cycles or more (also while held, counted from
        the frame's last byte).
    idle : Out(1)
        Waiting for a sync byte (the input FIFO drops its tentative bytes then).
    garbage : Out(1)
        A byte other than the sync byte arrived between frames (one cycle).

    Latency: ``end``, ``abort``, ``header``, ``payload_valid`` come in the cycle of the byte
    that causes them (combinationally from ``rx``; :attr:`latency` 0); the fields are
    registered. Throughput: one byte per cycle.
    """

    #: Cycles from a frame's last byte to ``end``.
    latency = 0

    def __init__(self, *, max_payload, timeout_cycles):
        check_int("Deframer max_payload", max_payload, 1, (1 << 16) - 1)
        check_int("Deframer timeout_cycles", timeout_cycles, 16, (1 << 32) - 1)
        self.max_payload = max_payload
        self.timeout_cycles = timeout_cycles
        super().__init__({
            "rx": In(stream.Signature(8)),
            "resume": In(1),
            "frame_type": Out(8),
            "header": Out(1),
            "header_length": Out(16),
            "payload_valid": Out(1),
            "index": Out(range(max_payload + 1)),
            "end": Out(1),
            "crc_ok": Out(1),
            "abort": Out(1),
            "truncated": Out(1),
            "timed_out": Out(1),
            "idle": Out(1),
            "garbage": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = self.rx
        state = Signal(_State)
        length = Signal(max(8, ceil_log2(self.max_payload + 1)))
        # A flip-flop equal to `state == PAYLOAD`: payload_valid then takes one LUT.
        in_payload = Signal()
        taken = rx.valid & rx.ready
        in_frame = (state >= _State.TYPE) & (state <= _State.CRC_LOW)

        m.d.comb += [
            rx.ready.eq(state != _State.HELD),
            self.idle.eq(state == _State.IDLE),
            self.header_length.eq(Cat(length[:8], rx.payload)),
            self.payload_valid.eq(in_payload & rx.valid),
        ]

        # Inter-byte timeout: cycles since the last byte taken. It counts from
        # 2 ** n - (timeout_cycles - 1) so that its top bit rises after timeout_cycles - 1
        # cycles: a flip-flop instead of a wide comparison. (Starting at idle_start, not 0,
        # after reset costs a few LUTs but keeps its carry chain whole on iCE40: from 0 it
        # was the link's longest path.)
        idle_bits = max(1, (self.timeout_cycles - 1).bit_length())
        idle_start = (1 << idle_bits) - (self.timeout_cycles - 1)
        idle = Signal(idle_bits + 1, init=idle_start)
        m.d.comb += self.timed_out.eq(idle[idle_bits])
        with m.If(taken):
            m.d.sync += idle.eq(idle_start)
        with m.Elif(~self.timed_out):
            m.d.sync += idle.eq(idle + 1)

        # The CRC covers type .. CRC; with the CRC sent most significant byte first, the
        # register is 0 after it exactly when it checks. Judged at the last byte itself: the
        # register's low byte is 0 and the byte equals its high byte (CRC-16/CCITT's table
        # has a zero low byte for 0 only), which keeps the update logic out of the verdict.
        m.submodules.crc = check = crc.catalog.CRC16_CCITT_FALSE(data_width=8).create()
        m.d.comb += [
            check.start.eq(state == _State.IDLE),
            check.valid.eq(rx.valid & in_frame),
            check.data.eq(rx.payload),
            self.crc_ok.eq((check.crc[:8] == 0) & (rx.payload == check.crc[8:])),
        ]

        with m.If(state == _State.IDLE):
            m.d.sync += self.frame_type.eq(0)
        # A frame cut short: the line went quiet inside it.
        with m.If(in_frame & self.timed_out & ~rx.valid):
            m.d.comb += [self.abort.eq(1), self.truncated.eq(1)]
            m.d.sync += [state.eq(_State.HELD), in_payload.eq(0)]

        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(rx.valid):
                    with m.If(rx.payload == protocol.SYNC):
                        m.d.sync += state.eq(_State.TYPE)
                    with m.Else():
                        m.d.comb += self.garbage.eq(1)
            with m.Case(_State.TYPE):
                with m.If(rx.valid):
                    m.d.sync += [self.frame_type.eq(rx.payload), state.eq(_State.LENGTH_LOW)]
            with m.Case(_State.LENGTH_LOW):
                with m.If(rx.valid):
                    m.d.sync += [length[:8].eq(rx.payload), state.eq(_State.LENGTH_HIGH)]
            with m.Case(_State.LENGTH_HIGH):
                with m.If(rx.valid):
                    m.d.comb += self.header.eq(1)
                    if len(length) > 8:
                        m.d.sync += length[8:].eq(rx.payload)
                    m.d.sync += self.index.eq(1)
                    new_length = self.header_length
                    with m.If(~at_most(new_length, self.max_payload)):
                        m.d.sync += state.eq(_State.DRAIN)
                    with m.Elif(new_length == 0):
                        m.d.sync += state.eq(_State.CRC_HIGH)
                    with m.Else():
                        m.d.sync += [state.eq(_State.PAYLOAD), in_payload.eq(1)]
            with m.Case(_State.PAYLOAD):
                with m.If(rx.valid):
                    m.d.sync += self.index.eq(self.index + 1)
                    with m.If(self.index == length):
                        m.d.sync += [state.eq(_State.CRC_HIGH), in_payload.eq(0)]
            with m.Case(_State.CRC_HIGH):
                with m.If(rx.valid):
                    m.d.sync += state.eq(_State.CRC_LOW)
            with m.Case(_State.CRC_LOW):
                with m.If(rx.valid):
                    m.d.comb += self.end.eq(1)
                    m.d.sync += state.eq(_State.HELD)
            with m.Case(_State.DRAIN):
                # A length beyond every limit: skip whatever follows until the line is quiet.
                with m.If(self.timed_out & ~rx.valid):
                    m.d.comb += self.abort.eq(1)
                    m.d.sync += state.eq(_State.HELD)
            with m.Case(_State.HELD):
                with m.If(self.resume):
                    m.d.sync += state.eq(_State.IDLE)
        return m
