"""The host link's replier: one reply frame per request, and the STATUS counters.

A reply frame is ``sync, type, length (2, little-endian), payload, CRC-16 (2, most
significant first)`` (docs/reference/hostlink.md): an ACK (type = request | 0x80) with the command's
payload, or an ERROR (type 0xFF, payload ``[code, request type]``). The replier builds it
from a descriptor (:func:`~fpganet.hdl.executor.reply_layout`) and keeps the counters that
STATUS reports: replies (ACKs) and ERRORs by code, UART framing errors and overruns,
garbage bytes between frames.
"""

from amaranth import *
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from fpganet.link import protocol
from fpganet.link.protocol import Command, ErrorCode, Status

from .deframer import at_most
from .executor import reply_layout, snapshot_layout
from .linkfifo import MAX_BUFFER, check_int

__all__ = ["Replier"]


_SYNC, _TYPE, _LENGTH_LOW, _LENGTH_HIGH, _PAYLOAD, _CRC_HIGH, _CRC_LOW, _IDLE = range(8)
_EMPTY, _ERROR, _INFO, _STATUS, _OUTPUT = range(5)


class Replier(wiring.Component):
    """Reply frames from reply descriptors.

    Parameters
    ----------
    info : bytes
        PING's ACK payload (:meth:`~fpganet.link.protocol.DeviceInfo.pack`), 1..255 bytes.
    output_depth : int
        Bytes of the output FIFO (2..32768): READ_OUTPUT's longest payload.
    crc_stage : bool
        Register the bytes into the CRC: a byte read from the output FIFO's block RAM then
        reaches a flip-flop through the payload multiplexers alone, not through the CRC's
        XOR network as well (the ULX3S's critical path without it at 72 MHz, 15.9 ns). The
        CRC's two bytes each wait for the CRC to take the byte before them: one cycle more
        per reply at most, none behind a UART.

    Members
    -------
    request : In(stream.Signature(reply_layout(output_depth)))
        The reply to send. ``ready`` (a decode of the state) is high while no reply is
        going out; the descriptor is taken in one cycle, with the STATUS snapshot.
    tx : Out(stream.Signature(8))
        The reply's bytes. ``payload`` is steady while ``valid``; ``ready`` may stall it at
        any byte.
    sent : Out(1)
        The reply's last byte went (one cycle).
    snapshot : In(snapshot_layout())
        Taken with each descriptor; sent by STATUS.
    output_data : In(8)
    output_valid : In(1)
    output_take : Out(1)
        The output FIFO's read side (``r_data``, ``r_rdy``, ``r_en``): READ_OUTPUT's payload.
    framing_error, overrun, garbage : In(1)
        Events to count (one per cycle at most).
    error : Out(1)
        The last reply was an ERROR (from when its descriptor was taken).

    Latency: the sync byte is offered in the cycle after the descriptor is taken
    (:attr:`latency` 1); each byte after the one before is taken, but for a STATUS
    counter, which waits up to 11 cycles for its turn in the counter ring. Throughput: one
    byte per cycle.
    """

    #: Cycles from the descriptor taken to the sync byte offered on ``tx``.
    latency = 1

    def __init__(self, info, *, output_depth, crc_stage=False):
        if not isinstance(info, (bytes, bytearray)) or not 1 <= len(info) <= 255:
            raise TypeError(f"Replier info must be 1..255 bytes, not {info!r}")
        check_int("Replier output_depth", output_depth, 2, MAX_BUFFER)
        self.info = bytes(info)
        self.output_depth = output_depth
        self.crc_stage = bool(crc_stage)
        super().__init__({
            "request": In(stream.Signature(reply_layout(output_depth))),
            "tx": Out(stream.Signature(8)),
            "sent": Out(1),
            "snapshot": In(snapshot_layout()),
            "output_data": In(8), "output_valid": In(1), "output_take": Out(1),
            "framing_error": In(1), "overrun": In(1), "garbage": In(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        tx = self.tx
        step = Signal(3, init=_IDLE)
        kind = Signal(range(5))
        code = Signal.like(self.request.payload.code)
        request = Signal(8)
        # The reply's length, set as the descriptor is taken; once the length bytes went,
        # the payload bytes still to send (the fixed payloads are indexed from their end).
        longest = max(self.output_depth, len(self.info), Status.size(), 2)
        count = Signal(range(longest + 1))
        to_send = count[:max(1, ceil_log2(max(len(self.info), Status.size()) + 1))]
        payload_left = count != 0
        m.d.comb += self.error.eq(code != 0)

        # The snapshot is shifted out, a byte per payload byte sent: shifting costs a LUT per
        # bit, packed with its flip-flop, where a 9-byte read multiplexer would cost LUTs of
        # its own.
        snapshot_bytes = snapshot_layout().size // 8
        shifter = Signal(8 * snapshot_bytes)
        shift = Signal()
        with m.If(shift):
            m.d.sync += shifter.eq(shifter >> 8)

        ring_byte, ring_turn, ring_here, ring_hold = self._counters(m, code, kind, step, to_send)

        # The payload byte.
        info = self.info
        counters = (self.framing_error, self.overrun, self.garbage)
        line_counters = [Signal(8, name=n) for n in ("framing_errors", "overruns", "garbage")]
        for counter, event in zip(line_counters, counters):
            with m.If(event):
                m.d.sync += counter.eq(counter + 1)
        first_pos = Status.size() - snapshot_bytes
        last_pos = first_pos - self._ring_bytes + 1
        payload_byte = Signal(8)
        with m.Switch(kind):
            with m.Case(_ERROR):
                m.d.comb += payload_byte.eq(Mux(count[0], request, code))
            with m.Case(_INFO):
                with m.Switch(to_send):
                    for i, byte in enumerate(info):
                        with m.Case(len(info) - i):
                            m.d.comb += payload_byte.eq(byte)
            with m.Case(_STATUS):
                with m.If(~at_most(to_send, first_pos)):
                    m.d.comb += payload_byte.eq(shifter[:8])
                with m.Elif(~at_most(to_send, last_pos - 1)):
                    m.d.comb += payload_byte.eq(ring_byte)
                with m.Else():
                    with m.Switch(to_send):
                        for k, counter in enumerate(line_counters):
                            with m.Case(len(line_counters) - k):
                                m.d.comb += payload_byte.eq(counter)
            with m.Case(_OUTPUT):
                m.d.comb += payload_byte.eq(self.output_data)

        # The reply's CRC covers type .. payload and goes out high byte first, each time from
        # the top of the register: taking in its own high byte leaves the register shifted
        # left by 8 bits (the table's entry for 0 is 0), the low byte on top. (One processor
        # shared with the deframer saved 32 cells, but that iCEBreaker build did not route:
        # docs/journal/boards.md.)
        m.submodules.crc = reply_crc = crc.catalog.CRC16_CCITT_FALSE(data_width=8).create()
        reply_type = Mux(code != 0, protocol.ERROR_TYPE, request | protocol.ACK_FLAG)
        from_fifo = kind == _OUTPUT
        taken = tx.valid & tx.ready & (step != _SYNC) & (step < _CRC_LOW)
        crc_valid, crc_data, offer = taken, tx.payload, step != _IDLE
        if self.crc_stage:
            crc_valid, crc_data = Signal(name="crc_valid_r"), Signal(8, name="crc_data_r")
            m.d.sync += [crc_valid.eq(taken), crc_data.eq(tx.payload)]
            offer = offer & (~crc_valid | (step < _CRC_HIGH))
        m.d.comb += [
            tx.payload.eq(Array([C(protocol.SYNC, 8), reply_type, count[:8], count >> 8,
                                 payload_byte, reply_crc.crc[8:], reply_crc.crc[8:],
                                 C(0, 8)])[step]),
            tx.valid.eq(offer &
                        ((step != _PAYLOAD) |
                         (payload_left & Mux(from_fifo, self.output_valid,
                                             ~ring_turn | ring_here)))),
            reply_crc.start.eq(step == _SYNC),
            reply_crc.valid.eq(crc_valid),
            reply_crc.data.eq(crc_data),
            self.request.ready.eq(step == _IDLE),
        ]

        with m.If(self.request.valid & self.request.ready):
            new = self.request.payload
            new_kind = Signal.like(kind)
            with m.If(new.code != 0):
                m.d.comb += new_kind.eq(_ERROR)
            with m.Else():
                with m.Switch(new.request[:3]):    # a known type when there is no error
                    for command, k in ((Command.PING, _INFO), (Command.STATUS, _STATUS),
                                       (Command.READ_OUTPUT, _OUTPUT)):
                        with m.Case(int(command)):
                            m.d.comb += new_kind.eq(k)
            lengths = {_EMPTY: 0, _ERROR: 2, _INFO: len(info), _STATUS: Status.size(),
                       _OUTPUT: new.length}
            with m.Switch(new_kind):
                for k, value in lengths.items():
                    with m.Case(k):
                        m.d.sync += count.eq(value)
            m.d.sync += [kind.eq(new_kind), code.eq(new.code), request.eq(new.request),
                         shifter.eq(self.snapshot), step.eq(_SYNC)]

        # The fixed bytes are always offered, so their ready moves the step on; with the CRC
        # stage the CRC's bytes may wait, and only their transfer does.
        moved = (tx.valid & tx.ready) if self.crc_stage else tx.ready
        with m.Switch(step):
            with m.Case(_SYNC, _TYPE, _LENGTH_LOW, _LENGTH_HIGH, _CRC_HIGH):
                with m.If(moved):
                    m.d.sync += step.eq(step + 1)
            with m.Case(_PAYLOAD):
                m.d.comb += ring_hold.eq(ring_turn & ring_here & ~tx.ready)
                with m.If(~payload_left):
                    m.d.sync += step.eq(_CRC_HIGH)
                with m.If(tx.valid & tx.ready):
                    m.d.sync += count.eq(count - 1)
                    # STATUS: the next snapshot byte moves to byte 0 (harmless otherwise).
                    m.d.comb += [self.output_take.eq(from_fifo), shift.eq(1)]
            with m.Case(_CRC_LOW):
                with m.If(moved):
                    m.d.comb += self.sent.eq(1)
                    m.d.sync += step.eq(_IDLE)
        return m

    def _counters(self, m, code, kind, step, to_send):
        """The reply counters: frames (16-bit) and one byte per error code, in STATUS order.

        They form a ring of bytes that rotates by one every cycle, with one incrementer at
        its head: a reply is counted (a pending flag set) as its sync byte goes, and its
        counter counts when it next passes the head, within ring_bytes cycles. STATUS reads
        each counter as it passes the head: nine counters with an adder each would need a
        9-way read multiplexer as well (about 40 LUTs). One pending
        flag for ACKs and one for ERRORs (whose counter ``code`` names) never miss a count:
        replies are at least a dozen cycles apart. And a STATUS reply finds its own count
        done: its first counter goes out after 3 header and 9 snapshot bytes, while the ring
        turns freely. ``pos`` names the head by the ``to_send`` at which STATUS sends it.

        Returns the head byte, whether STATUS is sending a ring counter, whether that
        counter is at the head, and the signal that holds the ring still.
        """
        status_fields = [(f.name, {"B": 1, "H": 2, "I": 4}[f.metadata["fmt"]])
                         for f in Status.__dataclass_fields__.values()]
        snapshot_fields = list(snapshot_layout().members)
        assert [name for name, _ in status_fields[:4]] == snapshot_fields
        # The snapshot is shifted out, a byte per payload byte sent: shifting costs a LUT per
        # bit, packed with its flip-flop, where a 9-byte read multiplexer would cost LUTs of
        # its own.
        snapshot_bytes = snapshot_layout().size // 8
        shifter = Signal(8 * snapshot_bytes)
        shift = Signal()
        with m.If(shift):
            m.d.sync += shifter.eq(shifter >> 8)
        ring_names = ["frames", *protocol.ERROR_COUNTERS]
        ring_fields = status_fields[4:4 + len(ring_names)]
        assert [name for name, _ in ring_fields] == ring_names and ring_fields[0][1] == 2
        assert [name for name, _ in status_fields[4 + len(ring_names):]] == \
            ["framing_errors", "overruns", "garbage"]
        ring_bytes = self._ring_bytes = sum(size for _, size in ring_fields)
        assert ring_bytes + 1 <= 3 + snapshot_bytes     # +1: the carry into frames' high byte
        first_pos = Status.size() - snapshot_bytes     # frames, low byte
        last_pos = first_pos - ring_bytes + 1
        ring = [Signal(8, name=f"ring_{k}") for k in range(ring_bytes)]
        # Kept as pos ^ first_pos: its flip-flops start at 0 (as iCE40 flip-flops power up,
        # with no inverters) with the head on frames' low byte.
        pos_bits = Signal(range(first_pos + 1))
        pos = pos_bits ^ first_pos
        error_pos = Signal.like(pos_bits)
        with m.Switch(code):
            for k, error_code in enumerate(ErrorCode):
                with m.Case(int(error_code)):
                    m.d.comb += error_pos.eq(first_pos - 2 - k)
        pending_ack = Signal()
        pending_error = Signal()
        ring_carry = Signal()       # frames' low byte wrapped: count the high byte
        ack_here = pos == first_pos
        error_here = pos == error_pos
        head_sum = Signal(9)
        m.d.comb += head_sum.eq(ring[0] + (ring_carry | (pending_ack & ack_here) |
                                           (pending_error & error_here)))
        ring_hold = Signal()
        with m.If(~ring_hold):
            m.d.sync += [ring[k].eq(ring[k + 1]) for k in range(ring_bytes - 1)]
            m.d.sync += [
                ring[-1].eq(head_sum[:8]),
                ring_carry.eq(head_sum[8] & ack_here),
                pos_bits.eq(Mux(pos == last_pos, first_pos, pos - 1) ^ first_pos),
            ]
            with m.If(ack_here):
                m.d.sync += pending_ack.eq(0)
            with m.If(error_here):
                m.d.sync += pending_error.eq(0)
        # Replies are counted once, as their sync byte goes.
        counted = (step == _SYNC) & self.tx.ready
        with m.If(counted & (code == 0)):
            m.d.sync += pending_ack.eq(1)
        with m.If(counted & (code != 0)):
            m.d.sync += pending_error.eq(1)

        ring_turn = Signal()        # STATUS sends a ring counter...
        ring_here = Signal()        # ...which is at the head
        m.d.comb += [
            ring_turn.eq((kind == _STATUS) & ~at_most(to_send, last_pos - 1) &
                         at_most(to_send, first_pos)),
            ring_here.eq(pos == to_send),
        ]
        return ring[0], ring_turn, ring_here, ring_hold
