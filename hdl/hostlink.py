"""The host link: the accelerator's ports driven over a UART by a small frame protocol.

:class:`HostLink` sits between the UART pins and the accelerator. The host
(:mod:`fpganet.board.driver`) sends request frames; every request gets exactly
one reply frame, an ACK (with data) or an ERROR with a code, and an ERROR
means the request had no effect. The protocol (frame format, CRC, commands,
error codes) is defined in :mod:`fpganet.board.protocol` and described in
docs/hostlink.md.

Blocks
------
:class:`HostLinkCore`
    The frame engine between byte streams and the device ports: parser, inter-byte
    timeout, CRC check, the staging buffer of WRITE, the input FIFO (commit on a good
    CRC, so a damaged SEND_INPUT leaves nothing behind), the output FIFO, the reply
    sender.
:class:`HostLink`
    :class:`HostLinkCore` with a :class:`~fpganet.hdl.uart.UARTReceiver` and a
    :class:`~fpganet.hdl.uart.UARTTransmitter`: UART pins on one side, the device
    ports on the other.
:class:`PacketFIFO`
    A byte FIFO whose writes stay invisible until committed and can be rolled back.
:class:`StandInDevice`
    A device with the accelerator's ports, made of memories, for testing the link (in
    simulation and on a board) before the accelerator exists.
:class:`HostLinkSystem`
    A host link and its device: the UART pins are its only ports. ``device=`` picks the
    device; ``device=Accelerator`` is the one-line change to the real one.

The device ports are :func:`~fpganet.hdl.hostport.device_signature` (seen from the device),
the signature of ``fpganet.hdl.accelerator.Accelerator``.
"""

import enum

from amaranth import *
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from fpganet.board import protocol
from fpganet.board.protocol import Command, DeviceInfo, ErrorCode, Status
from fpganet.config import AcceleratorConfig
from fpganet.hdl.hostport import connect_device, device_signature, host_addr_width, host_write_layout
from fpganet.hdl.memories import falling_edge_write_domain
from fpganet.hdl.uart import UARTReceiver, UARTTransmitter, uart_divisor
from fpganet.isa import HostSpace

__all__ = ["host_addr_width", "host_write_layout", "device_signature", "connect_device",
           "PacketFIFO", "HostLinkCore", "HostLink", "StandInDevice", "HostLinkSystem",
           "crc16_next", "DEFAULT_TIMEOUT_S", "MIN_TIMEOUT_CYCLES"]

#: Default inter-byte timeout of the frame parser.
DEFAULT_TIMEOUT_S = 0.010
#: Shortest inter-byte timeout: a reply is counted a few cycles after it starts (see the
#: counter ring in :class:`HostLinkCore`), and a frame cut short right after it must not
#: come sooner.
MIN_TIMEOUT_CYCLES = 16
#: Largest FIFO or staging buffer (the protocol's counts are 16-bit).
MAX_BUFFER = 1 << 15


def crc16_next(crc, byte):
    """CRC-16/CCITT-FALSE register after ``byte`` (8 bits, most significant first)."""
    for i in reversed(range(8)):
        feedback = crc[15] ^ byte[i]
        crc = Cat(C(0, 1), crc[:15]) ^ Mux(feedback, 0x1021, 0)
    return crc[:16]


def _at_most(value, limit):
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


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be {low}..{high}, not {value}")
    return value


# Packet FIFO -------------------------------------------------------------------------------

class PacketFIFO(wiring.Component):
    """A byte FIFO whose writes become readable only when committed.

    Bytes written since the last :attr:`commit` can be discarded with :attr:`rollback`, so
    a frame's payload goes in as it arrives and disappears if the frame turns out damaged.

    Its memory is written on the falling edge of the clock (see :func:`~fpganet.hdl.memories.falling_edge_write_domain`), so
    ``w_data`` and ``w_en`` have half a cycle to settle: they should come from flip-flops,
    ``w_en`` through one LUT at most.

    Parameters
    ----------
    depth : int
        Bytes it holds; a power of two (one block RAM of 512 bytes on iCE40 per 512).

    Members
    -------
    w_data : In(8)
    w_en : In(1)
        Write ``w_data``. The writer checks :attr:`free` first: a write to a full FIFO
        overwrites the oldest unread byte.
    commit : In(1)
        Every byte written before this cycle becomes readable next cycle.
    rollback : In(1)
        The bytes written since the last commit are forgotten (not with ``w_en``).
    drop : In(1)
        Every committed, unread byte is forgotten.
    r : Out(stream.Signature(8))
        Committed bytes, in order. ``r.valid`` and ``r.payload`` come from registers and the
        memory's read port; a committed byte is readable one cycle after the commit.
    free : Out(range(depth + 1))
        Bytes that can still be written (counting uncommitted ones as written).
    level : Out(range(depth + 1))
        Committed bytes not yet read.
    """

    def __init__(self, depth):
        _check_int("PacketFIFO depth", depth, 2, MAX_BUFFER)
        if depth & (depth - 1):
            raise ValueError(f"PacketFIFO depth must be a power of two, not {depth}")
        self.depth = depth
        super().__init__({
            "w_data": In(8), "w_en": In(1), "commit": In(1), "rollback": In(1), "drop": In(1),
            "r": Out(stream.Signature(8)),
            "free": Out(range(depth + 1)), "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        bits = ceil_log2(self.depth)
        m.submodules.storage = storage = memory.Memory(shape=8, depth=self.depth, init=[])
        write = storage.write_port(domain=falling_edge_write_domain(m, "packet_fifo_write"))
        read = storage.read_port()

        w_ptr = Signal(bits + 1)        # next byte to write (tentative)
        c_ptr = Signal(bits + 1)        # end of the committed bytes
        r_ptr = Signal(bits + 1)        # next byte to read
        r_next = Signal(bits + 1)

        taken = self.r.valid & self.r.ready
        m.d.comb += [
            write.addr.eq(w_ptr[:bits]),
            write.data.eq(self.w_data),
            write.en.eq(self.w_en),
            r_next.eq(r_ptr + taken),
            # The read port reads where the pointer will be, so its data belong to r_ptr.
            read.addr.eq(r_next[:bits]),
            self.r.payload.eq(read.data),
            # depth - (w_ptr - r_ptr) with one subtraction: adding depth flips the top bit.
            self.free.eq((Cat(r_ptr[:bits], ~r_ptr[bits]) - w_ptr)[:bits + 1]),
            self.level.eq((c_ptr - r_ptr)[:bits + 1]),
        ]
        with m.If(self.rollback):
            m.d.sync += w_ptr.eq(c_ptr)
        with m.Elif(self.w_en):
            m.d.sync += w_ptr.eq(w_ptr + 1)
        with m.If(self.commit):
            m.d.sync += c_ptr.eq(w_ptr)
        with m.If(self.drop):
            m.d.sync += r_ptr.eq(c_ptr)
        with m.Else():
            m.d.sync += r_ptr.eq(r_next)
        # r.valid is r_ptr != c_ptr, kept in a flip-flop from the pointers' next values: the
        # reader's whole walk hangs on it (the region unit's INPUT), and the comparison in
        # front of it was the iCE40 build's critical path.
        m.d.sync += self.r.valid.eq(Mux(self.drop, c_ptr, r_next) != Mux(self.commit, w_ptr, c_ptr))
        return m


class _OutputFIFO(wiring.Component):
    """A byte FIFO that behaves, cycle for cycle, as ``SyncFIFOBuffered(width=8, depth=depth)``
    (the same ``w_rdy``, ``r_rdy``, ``r_data`` and ``level``), in fewer iCE40 cells.

    Amaranth's version keeps the level of its memory part and adds the output register to
    it (an adder), counts it up and down with two adders, and wraps its pointers at
    ``depth - 1`` (compares). This one keeps the total level in one up/down counter, derives
    the memory part's state from it and the output register's flag, and lets its pointers
    wrap freely over a memory of the next power of two (which holds the ``depth - 1`` bytes
    of the memory part without the pointers ever meeting when it is full, so its reads and
    writes never collide).
    """

    def __init__(self, depth):
        _check_int("output FIFO depth", depth, 2, MAX_BUFFER)
        self.depth = depth
        super().__init__({
            "w_data": In(8), "w_en": In(1), "w_rdy": Out(1),
            "r_data": Out(8), "r_en": In(1), "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        bits = max(1, ceil_log2(self.depth - 1))
        m.submodules.storage = storage = memory.Memory(shape=8, depth=1 << bits, init=[])
        write = storage.write_port()
        read = storage.read_port(transparent_for=(write,))
        produce = Signal(bits)
        consume = Signal(bits)

        # The memory part holds level - r_rdy bytes (at most depth - 1).
        stored_any = (self.level[1:] != 0) | (self.level[0] & ~self.r_rdy)
        stored_full = ((self.level == self.depth) |
                       ((self.level == self.depth - 1) & ~self.r_rdy))
        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy
        do_fetch = stored_any & (~self.r_rdy | self.r_en)   # into the output register
        m.d.comb += [
            self.w_rdy.eq(~stored_full),
            write.addr.eq(produce), write.data.eq(self.w_data), write.en.eq(do_write),
            read.addr.eq(consume), read.en.eq(do_fetch), self.r_data.eq(read.data),
        ]
        m.d.sync += [produce.eq(produce + do_write), consume.eq(consume + do_fetch)]
        with m.If(do_fetch):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        # +1, -1 or 0 in one adder: a write adds 1, a read adds all ones.
        step = Signal(len(self.level))
        m.d.comb += step.eq(Mux(do_write, do_write ^ do_read,
                                Mux(do_read, (1 << len(step)) - 1, 0)))
        m.d.sync += self.level.eq(self.level + step)
        return m


# Frame engine ------------------------------------------------------------------------------

class _State(enum.IntEnum):
    """States of :class:`HostLinkCore`'s frame engine, encoded so that the common decodes
    take few bits: bits 4 and 3 clear while a request comes in, bit 3 set while it executes,
    bit 4 alone while the reply goes out (its byte chosen by bits 2..0)."""
    IDLE = 0
    TYPE = 1
    LENGTH_LOW = 2
    LENGTH_HIGH = 3
    PAYLOAD = 4
    CRC_HIGH = 5
    CRC_LOW = 6
    DRAIN = 7
    REPLY_SYNC = 16
    REPLY_TYPE = 17
    REPLY_LENGTH_LOW = 18
    REPLY_LENGTH_HIGH = 19
    REPLY_PAYLOAD = 20
    REPLY_CRC_HIGH = 21
    REPLY_CRC_LOW = 22
    EXECUTE = 24
    WRITE_READ = 25
    WRITE_BYTE = 26
    WRITE_WORD = 27
    WAIT_OUTPUT = 28
    FLUSH = 29


class HostLinkCore(wiring.Component):
    """The frame protocol between byte streams and the device ports.

    Parameters
    ----------
    config : AcceleratorConfig
        The device's configuration: the host port's data width, the memory depths that
        bound WRITE, and the PING reply.
    clock_hz : int or float
        The clock of domain ``sync`` (for the default timeout and the PING reply).
    baud : int
        The line rate (reported by PING).
    addr_width : int, optional
        Bits of the host port's address (default :func:`host_addr_width`; at most 24).
    input_depth : int
        Bytes of the input FIFO (a power of two): the largest SEND_INPUT.
    output_depth : int
        Bytes of the output FIFO: the largest READ_OUTPUT reply.
    max_write_bytes : int
        Data bytes one WRITE may carry (the staging buffer).
    timeout_cycles : int, optional
        Inter-byte timeout inside a frame (default :data:`DEFAULT_TIMEOUT_S` of the clock;
        at least :data:`MIN_TIMEOUT_CYCLES`).

    Members
    -------
    rx : In(stream.Signature(8))
        Bytes from the host. Ready every cycle while a frame is being received; not ready
        while a request executes and its reply is sent (the host waits for the reply).
    tx : Out(stream.Signature(8))
        Reply bytes.
    framing_error, overrun : In(1)
        Line errors of the UART receiver (counted in STATUS).
    device : In(device_signature(config, addr_width))
        The device's ports (the link drives ``host``, ``start``, ``input``).
    status : Out(StructLayout: busy, done_seen, error)
        For LEDs: the device runs; it raised ``done`` since the last START; the last request
        was refused (from its last byte on: its reply is an ERROR).

    Timing: a request executes when its last CRC byte arrives. WRITE then moves its words
    to the host port at two cycles per byte (plus the port's back-pressure) and then
    replies; the other commands reply within two cycles, except READ_OUTPUT with a
    ``wait_for`` count, which waits for the output bytes, the device to stop, or the
    timeout. A frame whose length exceeds every limit is not read: the parser ignores
    bytes until the line is quiet for the timeout, then replies BAD_LENGTH.
    """

    def __init__(self, config, clock_hz, baud, *, addr_width=None, input_depth=2048,
                 output_depth=512, max_write_bytes=512, timeout_cycles=None):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float)) or clock_hz <= 0:
            raise ValueError(f"clock_hz must be a positive number, not {clock_hz!r}")
        if isinstance(baud, bool) or not isinstance(baud, (int, float)) or baud <= 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        required = host_addr_width(config)
        addr_width = required if addr_width is None else addr_width
        _check_int("addr_width", addr_width, required, 24)
        _check_int("input_depth", input_depth, 16, MAX_BUFFER)
        if input_depth & (input_depth - 1):
            raise ValueError(f"input_depth must be a power of two, not {input_depth}")
        _check_int("output_depth", output_depth, 2, MAX_BUFFER)
        self.word_bytes = {space: protocol.word_bytes(space, config.weight_word_bytes)
                           for space in HostSpace}
        _check_int("max_write_bytes", max_write_bytes, max(self.word_bytes.values()), MAX_BUFFER)
        if timeout_cycles is None:
            timeout_cycles = max(MIN_TIMEOUT_CYCLES, round(clock_hz * DEFAULT_TIMEOUT_S))
        _check_int("timeout_cycles", timeout_cycles, MIN_TIMEOUT_CYCLES, (1 << 32) - 1)

        self.config = config
        self.clock_hz = clock_hz
        self.baud = baud
        self.addr_width = addr_width
        self.input_depth = input_depth
        self.output_depth = output_depth
        self.max_write_bytes = max_write_bytes
        self.timeout_cycles = timeout_cycles
        #: Longest payload read; a longer frame is drained and answered BAD_LENGTH.
        self.max_payload = max(4 + max_write_bytes, input_depth, 4)
        self.memory_words = {
            HostSpace.PROGRAM: config.program_words,
            HostSpace.WEIGHTS: config.weight_buffer_words,
            HostSpace.PARAMS: config.bias_buffer_words,
            HostSpace.ACTIVATIONS: config.act_buffer_bytes,
        }
        self.info = DeviceInfo(
            version=protocol.PROTOCOL_VERSION, rows=config.rows, cols=config.cols,
            operand_width=config.operand_width, acc_width=config.acc_width,
            requant_lanes=config.requant_lanes, requant_latency=config.requant_latency,
            broadcast_operands=int(config.broadcast_operands),
            weight_buffer_bytes=config.weight_buffer_bytes,
            act_buffer_bytes=config.act_buffer_bytes, bias_buffer_words=config.bias_buffer_words,
            program_words=config.program_words, host_data_width=config.host_data_width,
            addr_width=addr_width, input_depth=input_depth, output_depth=output_depth,
            max_write_bytes=max_write_bytes, clock_hz=round(clock_hz), baud=round(baud),
            timeout_cycles=timeout_cycles)
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "framing_error": In(1),
            "overrun": In(1),
            "device": In(device_signature(config, addr_width)),
            "status": Out(data.StructLayout({"busy": 1, "done_seen": 1, "error": 1})),
        })

    def elaborate(self, platform):
        m = Module()
        config, dev = self.config, self.device
        rx, tx = self.rx, self.tx

        # Input FIFO (tentative writes) and output FIFO.
        m.submodules.input_fifo = in_fifo = PacketFIFO(self.input_depth)
        wiring.connect(m, in_fifo.r, wiring.flipped(dev.input))
        m.submodules.output_fifo = out_fifo = _OutputFIFO(self.output_depth)
        m.d.comb += [
            out_fifo.w_data.eq(dev.output.payload),
            out_fifo.w_en.eq(dev.output.valid),
            dev.output.ready.eq(out_fifo.w_rdy),
        ]

        # WRITE staging buffer: words reach the device only after the CRC is checked.
        # Its address is the payload index (see `index`) modulo a power of two: the data
        # bytes wrap round, and need no counter of their own. Every payload byte is written
        # (a WRITE's header and other commands' payloads too): only a WRITE reads it back,
        # after its own bytes went in.
        stage_bits = ceil_log2(self.max_write_bytes)
        m.submodules.staging = staging = memory.Memory(shape=8, depth=1 << stage_bits, init=[])
        stage_w = staging.write_port(domain=falling_edge_write_domain(m, "staging_write"))
        stage_r = staging.read_port()

        # Device state the link keeps.
        start_pulse = Signal()
        done_seen = Signal()
        done_before = Signal()
        m.d.comb += dev.start.eq(start_pulse)
        m.d.sync += [start_pulse.eq(0), done_before.eq(dev.done)]
        with m.If(dev.done & ~done_before):
            m.d.sync += done_seen.eq(1)

        # Line counters (8-bit; they wrap).
        framing_errors, overruns, garbage = Signal(8), Signal(8), Signal(8)
        with m.If(self.framing_error):
            m.d.sync += framing_errors.eq(framing_errors + 1)
        with m.If(self.overrun):
            m.d.sync += overruns.eq(overruns + 1)

        # Frame state.
        frame_type = Signal(8)
        # The payload's length; its low byte is kept here when it arrives.
        length = Signal(max(8, ceil_log2(self.max_payload + 1)))
        # One counter serves the request and the reply, which never overlap.
        # As `index`: 1 + the payload bytes read (1 for the first one), so that the payload
        # ends where it equals `length` with no subtraction; then the staging buffer's
        # address while WRITE moves its words.
        # As `reply_length`: the reply's length, set while its SYNC byte waits; once sent,
        # the payload bytes still to send.
        longest_reply = max(self.output_depth, DeviceInfo.size(), Status.size(), 2)
        index = Signal(range(max(self.max_payload, longest_reply) + 1))
        reply_length = index
        count_step = Signal()       # index up by one (reply_length down by one)
        crc = Signal(16)        # set to 0xFFFF as each frame starts
        length_ok = Signal()    # the length suits the command
        no_space = Signal()     # a SEND_INPUT larger than the input FIFO's free space
        # The memories' write enables are these flip-flops and rx.valid (see falling_edge_write_domain).
        in_payload = Signal()       # state is PAYLOAD
        input_payload = Signal()    # ... of a SEND_INPUT whose bytes go into the input FIFO
        # WRITE's space and address, kept as wide as the device needs: every memory has at
        # most 2 ** addr_width words, so a space byte above 3 or an address bit at or above
        # addr_width only needs remembering as a flag (either one means BAD_ADDRESS). This
        # keeps the range check and its adder to addr_width + 1 bits instead of 26.
        assert max(self.memory_words.values()) <= 1 << self.addr_width
        space = Signal(2)
        space_bad = Signal()        # the space byte was above 3
        address = Signal(self.addr_width)
        address_high = Signal()     # a bit of the 24-bit address at or above addr_width was set
        word_byte = Signal(range(config.host_data_width // 8))
        words = Signal(range(self.max_write_bytes + 1))
        final = Signal()            # the word being assembled is the WRITE's last
        # READ_OUTPUT's counts, kept as wide as the output FIFO's level: a count above that
        # only needs remembering as a flag (the wait can never be met by level; the reply
        # is never cut short by max).
        count_width = len(out_fifo.level)
        if self.addr_width >= count_width:
            # READ_OUTPUT's max goes where WRITE's address would: they never meet, and both
            # arrive from the payload byte by byte.
            max_count, max_high = address, address_high
        else:
            max_count, max_high = Signal(count_width), Signal()
        wait_for = Signal(count_width)
        wait_high = Signal()
        # The output FIFO holds at least wait_for bytes.
        enough = ~wait_high & (out_fifo.level >= wait_for)

        state = Signal(_State)
        state_next = Signal(_State)
        m.d.comb += state_next.eq(state)
        m.d.sync += state.eq(state_next)

        # Reply state.
        # The request's verdict: the ErrorCode of its ERROR reply, 0 for an ACK. It is taken
        # as the frame ends and stays put until the next one, like frame_type; the reply's
        # kind and type byte follow from the two, with no registers of their own.
        error_code = Signal(range(len(ErrorCode) + 1))
        KIND_EMPTY, KIND_ERROR, KIND_INFO, KIND_STATUS, KIND_OUTPUT = range(5)
        reply_kind = Signal(range(5))
        with m.If(error_code != 0):
            m.d.comb += reply_kind.eq(KIND_ERROR)
        with m.Else():
            with m.Switch(frame_type[:3]):     # a known type when there is no error
                for command, kind in ((Command.PING, KIND_INFO), (Command.STATUS, KIND_STATUS),
                                      (Command.READ_OUTPUT, KIND_OUTPUT)):
                    with m.Case(int(command)):
                        m.d.comb += reply_kind.eq(kind)
        reply_type = Mux(error_code != 0, protocol.ERROR_TYPE, frame_type | protocol.ACK_FLAG)

        # One byte shift register serves WRITE and STATUS, which never overlap; sharing it
        # saves the 72 flip-flops of a separate STATUS snapshot, and shifting (every byte
        # takes the next one's place) costs one LUT per bit, packed with its flip-flop, where
        # a byte-addressed register or a 9-byte read multiplexer would cost LUTs of their own.
        # WRITE: each byte from the staging buffer enters at byte ``bytes_per_word - 1`` and
        #   the ones before move down, so after a word's bytes byte 0 holds its first byte;
        #   the bytes above the word stay 0 (cleared when the WRITE starts, and only zeros
        #   move down into them), which zero-extends the word to ``host_data_width``.
        # STATUS: loaded with the snapshot (flags, cycles, input_free, output_level: the
        #   reply's first 9 bytes, taken in the EXECUTE cycle so that they agree) and
        #   shifted by a byte for each payload byte sent; byte 0 is the next byte to send.
        snapshot_layout = data.StructLayout({"flags": 8, "cycles": 32, "input_free": 16,
                                             "output_level": 16})
        snapshot_bytes = snapshot_layout.size // 8
        shift_bytes = max(config.host_data_width // 8, snapshot_bytes)
        shifter = Signal(8 * shift_bytes)
        shift_byte = [shifter[8 * k:8 * k + 8] for k in range(shift_bytes)]
        shift_clear = Signal()      # all bytes 0
        shift_load = Signal()       # load the STATUS snapshot
        shift_step = Signal()       # every byte moves down one place (the top one gets 0)
        shift_insert = Signal()     # with shift_step: byte bytes_per_word - 1 gets shift_in
        shift_in = Signal(8)
        m.d.comb += [
            self.status.busy.eq(dev.busy),
            self.status.done_seen.eq(done_seen),
            self.status.error.eq(error_code != 0),
        ]

        # Inter-byte timeout: cycles since the last byte taken.
        # It counts from 2 ** n - (timeout_cycles - 1) so that its top bit rises after
        # timeout_cycles - 1 cycles: a flip-flop instead of a wide comparison. (Starting at
        # idle_start, not 0, after reset costs a few LUTs but keeps its carry chain whole on
        # iCE40: from 0 it was the link's longest path.)
        idle_bits = max(1, (self.timeout_cycles - 1).bit_length())
        idle_start = (1 << idle_bits) - (self.timeout_cycles - 1)
        idle = Signal(idle_bits + 1, init=idle_start)
        timed_out = Signal()
        m.d.comb += timed_out.eq(idle[idle_bits])
        with m.If(rx.valid & rx.ready):
            m.d.sync += idle.eq(idle_start)
        with m.Elif(~timed_out):
            m.d.sync += idle.eq(idle + 1)

        # One CRC register: over the request's bytes, then over the reply's.
        crc_byte = Signal(8)
        crc_after = Signal(16)
        m.d.comb += crc_after.eq(crc16_next(crc, crc_byte))

        # Bytes per word of the WRITE's space, and whether its words fit the memory (each
        # space's size is a constant: no carry chain for the comparison).
        bytes_per_word = Signal(range(config.host_data_width // 8 + 1))
        write_end = Signal(range((1 << self.addr_width) + self.max_write_bytes))
        within = Signal()
        m.d.comb += write_end.eq(address + words)
        with m.Switch(space):
            for s in HostSpace:
                with m.Case(int(s)):
                    m.d.comb += [bytes_per_word.eq(self.word_bytes[s]),
                                 within.eq(_at_most(write_end, self.memory_words[s]))]
        with m.If(space_bad):
            m.d.comb += bytes_per_word.eq(1)
        # Registered: the adder and the comparison stay out of EXECUTE's decision (the address
        # and the word count are final a cycle before it, after the payload's last byte).
        address_ok = Signal()
        m.d.sync += address_ok.eq(~space_bad & ~address_high & within)

        # frame_type is a Command (1..7).
        known = (frame_type[3:] == 0) & (frame_type[:3] != 0)
        assert {int(c) for c in Command} == set(range(1, 8))

        # The rules on the length, decided when its second byte arrives.
        new_length = Signal(16)
        m.d.comb += new_length.eq(Cat(length[:8], rx.payload))
        type_length_ok = Signal()
        with m.Switch(frame_type):
            for command in (Command.PING, Command.STATUS, Command.START, Command.FLUSH):
                with m.Case(int(command)):
                    m.d.comb += type_length_ok.eq(new_length == 0)
            with m.Case(int(Command.WRITE)):
                m.d.comb += type_length_ok.eq(~_at_most(new_length, 4) &
                                              _at_most(new_length, 4 + self.max_write_bytes))
            with m.Case(int(Command.SEND_INPUT)):
                m.d.comb += type_length_ok.eq((new_length != 0) &
                                              _at_most(new_length, self.input_depth))
            with m.Case(int(Command.READ_OUTPUT)):
                m.d.comb += type_length_ok.eq((new_length == 2) | (new_length == 4))

        snapshot = Signal(snapshot_layout)
        m.d.comb += [
            snapshot.flags.eq(Cat(dev.busy, dev.done, done_seen)),
            snapshot.cycles.eq(dev.cycles),
            snapshot.input_free.eq(in_fifo.free),
            snapshot.output_level.eq(out_fifo.level),
        ]
        with m.If(shift_clear):
            m.d.sync += shifter.eq(0)
        with m.Elif(shift_load):
            m.d.sync += shifter.eq(snapshot)
        with m.Elif(shift_step):
            for k in range(shift_bytes):
                above = shift_byte[k + 1] if k + 1 < shift_bytes else C(0, 8)
                if k + 1 in self.word_bytes.values():
                    m.d.sync += shift_byte[k].eq(
                        Mux(shift_insert & (bytes_per_word == k + 1), shift_in, above))
                else:
                    m.d.sync += shift_byte[k].eq(above)

        # Replies are decided in many states; they are counted once, as their SYNC byte goes.
        counted = (state == _State.REPLY_SYNC) & tx.ready
        refused = reply_kind == KIND_ERROR

        # The reply counters (frames, 16-bit, and one byte per error code, in STATUS order)
        # form a ring of bytes that rotates by one every cycle, with one incrementer at its
        # head: a reply is counted (a pending flag set) as its SYNC byte goes, and its
        # counter counts when it next passes the head, within ring_bytes cycles. STATUS reads
        # each counter as it passes the head: nine counters with an adder each would need a
        # 9-way read multiplexer as well (about 40 LUTs). One pending flag for ACKs and one for
        # ERRORs (whose counter error_code names) never miss a count: replies are at least a
        # dozen cycles apart (the reply's bytes, then a new frame's). And a STATUS reply
        # finds its own count done: its first counter goes out after 3 header and 9 snapshot
        # bytes, while the ring turns freely.
        # `pos` names the head by the reply_length at which STATUS sends it.
        status_fields = [(f.name, {"B": 1, "H": 2, "I": 4}[f.metadata["fmt"]])
                         for f in Status.__dataclass_fields__.values()]
        assert [name for name, _ in status_fields[:4]] == list(snapshot_layout.members)
        ring_names = ["frames", *protocol.ERROR_COUNTERS]
        ring_fields = status_fields[4:4 + len(ring_names)]
        assert [name for name, _ in ring_fields] == ring_names and ring_fields[0][1] == 2
        ring_bytes = sum(size for _, size in ring_fields)
        assert ring_bytes + 1 <= 3 + snapshot_bytes     # +1: the carry into frames' high byte
        first_pos = Status.size() - snapshot_bytes     # frames, low byte
        last_pos = first_pos - ring_bytes + 1
        ring = [Signal(8, name=f"ring_{k}") for k in range(ring_bytes)]
        # Kept as pos ^ first_pos: its flip-flops start at 0 (as iCE40 flip-flops power up,
        # with no inverters) with the head on frames' low byte.
        pos_bits = Signal(range(first_pos + 1))
        pos = pos_bits ^ first_pos
        error_pos = Signal.like(pos_bits)
        with m.Switch(error_code):
            for k, code in enumerate(ErrorCode):
                with m.Case(int(code)):
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
        with m.If(counted & ~refused):
            m.d.sync += pending_ack.eq(1)
        with m.If(counted & refused):
            m.d.sync += pending_error.eq(1)

        # Reply payload bytes. While the payload goes out, reply_length counts the bytes
        # still to send: it indexes the fixed-size payloads from their end, with no counter
        # of its own.
        info_bytes = self.info.pack()
        to_send = reply_length[:max(1, ceil_log2(max(len(info_bytes), Status.size()) + 1))]
        ring_turn = Signal()        # STATUS sends a ring counter...
        ring_here = Signal()        # ...which is at the head
        m.d.comb += [
            ring_turn.eq((reply_kind == KIND_STATUS) & ~_at_most(to_send, last_pos - 1) &
                         _at_most(to_send, first_pos)),
            ring_here.eq(pos == to_send),
        ]
        line_counters = {"framing_errors": framing_errors, "overruns": overruns,
                         "garbage": garbage}
        assert [name for name, _ in status_fields[4 + len(ring_names):]] == list(line_counters)
        reply_byte = Signal(8)
        with m.Switch(reply_kind):
            with m.Case(KIND_ERROR):
                m.d.comb += reply_byte.eq(Mux(reply_length[0], frame_type, error_code))
            with m.Case(KIND_INFO):
                with m.Switch(to_send):
                    for i, byte in enumerate(info_bytes):
                        with m.Case(len(info_bytes) - i):
                            m.d.comb += reply_byte.eq(byte)
            with m.Case(KIND_STATUS):
                with m.If(~_at_most(to_send, first_pos)):
                    m.d.comb += reply_byte.eq(shift_byte[0])    # shifted out, see `shifter`
                with m.Elif(~_at_most(to_send, last_pos - 1)):
                    m.d.comb += reply_byte.eq(ring[0])
                with m.Else():
                    with m.Switch(to_send):
                        for k, counter in enumerate(line_counters.values()):
                            with m.Case(len(line_counters) - k):
                                m.d.comb += reply_byte.eq(counter)
            with m.Case(KIND_OUTPUT):
                m.d.comb += reply_byte.eq(out_fifo.r_data)

        def reply():
            # Its kind follows from error_code and frame_type; its length is set while the
            # SYNC byte waits (see REPLY_SYNC).
            m.d.comb += state_next.eq(_State.REPLY_SYNC)

        def error(code):
            m.d.sync += error_code.eq(code)
            reply()

        # The host port's payload is only looked at with its valid: driving it from the
        # registers in every state saves an AND gate per bit.
        m.d.comb += [
            dev.host.payload.space.eq(space),
            dev.host.payload.addr.eq(address),
            dev.host.payload.data.eq(shifter[:config.host_data_width]),
        ]
        m.d.comb += [stage_r.addr.eq(index[:stage_bits]), stage_w.addr.eq(index[:stage_bits]),
                     stage_w.data.eq(rx.payload),
                     stage_w.en.eq(in_payload & rx.valid),
                     in_fifo.w_data.eq(rx.payload),
                     in_fifo.w_en.eq(input_payload & rx.valid)]

        def store_byte(target, high, i, byte):
            """Byte ``i`` of a little-endian number into ``target``, which keeps its low
            bits; set ``high`` when the byte has a bit above them."""
            low = 8 * i
            kept = min(max(len(target) - low, 0), 8)
            if kept:
                m.d.sync += target[low:low + kept].eq(byte[:kept])
            if kept < 8:
                with m.If(byte[kept:] != 0):
                    m.d.sync += high.eq(1)

        # Decodes that several states share (see _State's encoding).
        code = Value.cast(state)
        step = code[:3]
        replying = code[4] & ~code[3]
        with m.If(count_step):
            m.d.sync += index.eq(index + Mux(replying, -1, 1))
        receiving = ~code[4] & ~code[3]                     # IDLE .. DRAIN
        in_frame = receiving & (step != 0) & (step != 7)    # TYPE .. CRC_LOW
        from_fifo = reply_kind == KIND_OUTPUT
        payload_left = reply_length != 0
        m.d.comb += [
            rx.ready.eq(receiving),
            # tx.payload is only looked at with tx.valid: the step alone picks it.
            tx.payload.eq(Array([C(protocol.SYNC, 8), reply_type, reply_length[:8],
                                 reply_length >> 8, reply_byte, crc[8:], crc[8:],
                                 C(0, 8)])[step]),
            tx.valid.eq(replying & ((step != _State.REPLY_PAYLOAD & 7) |
                                    (payload_left &
                                     Mux(from_fifo, out_fifo.r_rdy, ~ring_turn | ring_here)))),
            crc_byte.eq(Mux(replying, tx.payload, rx.payload)),
        ]
        # The CRC covers the request from its type to its CRC and the reply from its type to
        # its payload. The reply's CRC goes out high byte first, each time from the top of the
        # register: taking in its own high byte leaves the register shifted left by 8 bits
        # (the table's entry for 0 is 0), the low byte on top.
        with m.If(Mux(replying, tx.valid & tx.ready & (step != 0) & (step < 6),
                      rx.valid & in_frame)):
            m.d.sync += crc.eq(crc_after)
        # Both frames start with the CRC's initial value, and a request with type 0 (for an
        # ERROR reply to a frame cut short before its type).
        with m.If(step == 0):   # IDLE or REPLY_SYNC
            m.d.sync += crc.eq(0xFFFF)
        with m.If(code == _State.IDLE):
            m.d.sync += frame_type.eq(0)
        # Between frames no SEND_INPUT bytes are tentative but those of a frame that failed
        # (a good one committed them): forget them.
        m.d.comb += in_fifo.rollback.eq(code == _State.IDLE)
        # A frame cut short: the line went quiet inside it.
        with m.If(in_frame & timed_out & ~rx.valid):
            error(ErrorCode.TRUNCATED)
            m.d.sync += [in_payload.eq(0), input_payload.eq(0)]

        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(rx.valid):
                    with m.If(rx.payload == protocol.SYNC):
                        m.d.comb += state_next.eq(_State.TYPE)
                    with m.Else():
                        m.d.sync += garbage.eq(garbage + 1)

            with m.Case(_State.TYPE):
                with m.If(rx.valid):
                    m.d.sync += frame_type.eq(rx.payload)
                    m.d.comb += state_next.eq(_State.LENGTH_LOW)

            with m.Case(_State.LENGTH_LOW):
                with m.If(rx.valid):
                    m.d.sync += length[:8].eq(rx.payload)
                    m.d.comb += state_next.eq(_State.LENGTH_HIGH)

            with m.Case(_State.LENGTH_HIGH):
                with m.If(rx.valid):
                    if len(length) > 8:
                        m.d.sync += length[8:].eq(rx.payload)
                    # Only used when the length suits SEND_INPUT, and so fits the FIFO's width.
                    fits = new_length[:len(in_fifo.free)] <= in_fifo.free
                    is_input = frame_type == Command.SEND_INPUT
                    m.d.sync += [
                        index.eq(1),
                        length_ok.eq(type_length_ok),
                        no_space.eq(is_input & type_length_ok & ~fits),
                        # (A SEND_INPUT of a suitable length has a payload.)
                        input_payload.eq(is_input & type_length_ok & fits),
                        address_high.eq(0), word_byte.eq(0), words.eq(0),
                        max_high.eq(0), wait_for.eq(0), wait_high.eq(0),
                    ]
                    with m.If(~_at_most(new_length, self.max_payload)):
                        m.d.comb += state_next.eq(_State.DRAIN)
                    with m.Elif(new_length == 0):
                        m.d.comb += state_next.eq(_State.CRC_HIGH)
                    with m.Else():
                        m.d.comb += state_next.eq(_State.PAYLOAD)
                        m.d.sync += in_payload.eq(1)

            with m.Case(_State.PAYLOAD):
                with m.If(rx.valid):
                    m.d.comb += count_step.eq(1)
                    with m.If(index == length):
                        m.d.comb += state_next.eq(_State.CRC_HIGH)
                        m.d.sync += [in_payload.eq(0), input_payload.eq(0)]
                    with m.If(length_ok):
                        with m.Switch(frame_type):
                            with m.Case(int(Command.WRITE)):
                                header = (index[3:] == 0) & (index[:3] != 0) & (index[:3] <= 4)
                                with m.If(header):
                                    with m.Switch(index[:3]):
                                        with m.Case(1):
                                            m.d.sync += [space.eq(rx.payload[:2]),
                                                         space_bad.eq(rx.payload[2:] != 0)]
                                        for i in (2, 3, 4):
                                            with m.Case(i):
                                                store_byte(address, address_high, i - 2,
                                                           rx.payload)
                                with m.Else():
                                    with m.If(word_byte == bytes_per_word - 1):
                                        m.d.sync += [word_byte.eq(0), words.eq(words + 1)]
                                    with m.Else():
                                        m.d.sync += word_byte.eq(word_byte + 1)
                            with m.Case(int(Command.READ_OUTPUT)):
                                with m.Switch(index[:3]):
                                    counts = [(max_count, max_high)] * 2
                                    counts += [(wait_for, wait_high)] * 2
                                    for i, (target, high) in enumerate(counts):
                                        with m.Case(i + 1):
                                            store_byte(target, high, i % 2, rx.payload)

            with m.Case(_State.CRC_HIGH):
                with m.If(rx.valid):
                    m.d.comb += state_next.eq(_State.CRC_LOW)

            with m.Case(_State.CRC_LOW):
                # The request's verdict is taken here (from the CRC with this last byte) and
                # kept in error_code (0: none), so that EXECUTE only acts on it.
                command = frame_type[:3]    # a known type is 1..7
                is_write = command == Command.WRITE
                verdict = Signal.like(error_code)
                # The CRC over the frame is 0 with this byte exactly when the register's low
                # byte is 0 and this byte equals its high byte (CRC-16/CCITT's table has a
                # zero low byte for 0 only), which leaves the CRC logic out of the verdict.
                with m.If((crc[:8] != 0) | (rx.payload != crc[8:])):
                    m.d.comb += verdict.eq(ErrorCode.BAD_CRC)
                with m.Elif(~known):
                    m.d.comb += verdict.eq(ErrorCode.UNKNOWN_TYPE)
                with m.Elif(~length_ok | (is_write & (word_byte != 0))):
                    m.d.comb += verdict.eq(ErrorCode.BAD_LENGTH)
                with m.Elif(is_write & ~address_ok):
                    m.d.comb += verdict.eq(ErrorCode.BAD_ADDRESS)
                with m.Elif(dev.busy & (is_write | (command == Command.START) |
                                        (command == Command.FLUSH))):
                    m.d.comb += verdict.eq(ErrorCode.BUSY)
                with m.Elif((command == Command.SEND_INPUT) & no_space):
                    m.d.comb += verdict.eq(ErrorCode.NO_SPACE)
                with m.If(rx.valid):
                    m.d.sync += error_code.eq(verdict)
                    m.d.comb += state_next.eq(_State.EXECUTE)

            with m.Case(_State.DRAIN):
                # A length beyond every limit: skip whatever follows until the line is quiet.
                with m.If(timed_out & ~rx.valid):
                    error(ErrorCode.BAD_LENGTH)

            with m.Case(_State.EXECUTE):
                with m.If(error_code != 0):
                    reply()
                with m.Else():
                    with m.Switch(frame_type[:3]):
                        with m.Case(int(Command.PING)):
                            reply()
                        with m.Case(int(Command.STATUS)):
                            m.d.comb += shift_load.eq(1)
                            reply()
                        with m.Case(int(Command.WRITE)):
                            m.d.sync += index.eq(5)     # the first data byte
                            m.d.comb += shift_clear.eq(1)
                            m.d.comb += state_next.eq(_State.WRITE_READ)
                        with m.Case(int(Command.START)):
                            m.d.sync += [start_pulse.eq(1), done_seen.eq(0)]
                            reply()
                        with m.Case(int(Command.SEND_INPUT)):
                            m.d.comb += in_fifo.commit.eq(1)
                            reply()
                        with m.Case(int(Command.READ_OUTPUT)):
                            m.d.comb += state_next.eq(_State.WAIT_OUTPUT)
                        with m.Case(int(Command.FLUSH)):
                            m.d.comb += in_fifo.drop.eq(1)
                            m.d.comb += state_next.eq(_State.FLUSH)

            with m.Case(_State.WRITE_READ):
                # The staging buffer's read port gives byte `index` next cycle.
                m.d.comb += state_next.eq(_State.WRITE_BYTE)

            with m.Case(_State.WRITE_BYTE):
                m.d.comb += [shift_step.eq(1), shift_insert.eq(1), shift_in.eq(stage_r.data)]
                m.d.comb += count_step.eq(1)
                m.d.sync += final.eq(index == length)
                with m.If(word_byte == bytes_per_word - 1):
                    m.d.sync += word_byte.eq(0)
                    m.d.comb += state_next.eq(_State.WRITE_WORD)
                with m.Else():
                    m.d.sync += word_byte.eq(word_byte + 1)
                    m.d.comb += state_next.eq(_State.WRITE_READ)

            with m.Case(_State.WRITE_WORD):
                m.d.comb += dev.host.valid.eq(1)
                with m.If(dev.host.ready):
                    m.d.sync += address.eq(address + 1)
                    with m.If(final):
                        reply()
                    with m.Else():
                        m.d.comb += state_next.eq(_State.WRITE_READ)

            with m.Case(_State.WAIT_OUTPUT):
                with m.If(enough | ~dev.busy | timed_out):
                    # The reply's length is the smaller of level and max: max takes wait_for's
                    # place, and the same comparison decides it (see REPLY_SYNC).
                    m.d.sync += [wait_for.eq(max_count[:count_width]),
                                 wait_high.eq(max_high | (max_count[count_width:] != 0))]
                    reply()

            with m.Case(_State.FLUSH):
                m.d.comb += out_fifo.r_en.eq(1)
                with m.If(out_fifo.level == 0):
                    reply()

            with m.Case(_State.REPLY_SYNC):
                # OUTPUT: the bytes there, up to max (now in wait_for); more may arrive, but
                # none leave until the payload goes out.
                lengths = {KIND_EMPTY: 0, KIND_ERROR: 2, KIND_INFO: len(info_bytes),
                           KIND_STATUS: Status.size(),
                           KIND_OUTPUT: Mux(enough, wait_for, out_fifo.level)}
                with m.Switch(reply_kind):
                    for kind, value in lengths.items():
                        with m.Case(kind):
                            m.d.sync += reply_length.eq(value)
                with m.If(tx.ready):
                    m.d.comb += state_next.eq(_State.REPLY_TYPE)

            with m.Case(_State.REPLY_TYPE, _State.REPLY_LENGTH_LOW, _State.REPLY_LENGTH_HIGH,
                        _State.REPLY_CRC_HIGH):
                with m.If(tx.ready):
                    m.d.comb += state_next.eq(state + 1)

            with m.Case(_State.REPLY_PAYLOAD):
                # reply_length has been sent: it now counts the bytes still to send.
                m.d.comb += ring_hold.eq(ring_turn & ring_here & ~tx.ready)
                with m.If(~payload_left):
                    m.d.comb += state_next.eq(_State.REPLY_CRC_HIGH)
                with m.If(tx.valid & tx.ready):
                    m.d.comb += count_step.eq(1)
                    # STATUS: the next snapshot byte moves to byte 0 (harmless otherwise).
                    m.d.comb += [out_fifo.r_en.eq(from_fifo), shift_step.eq(1)]

            with m.Case(_State.REPLY_CRC_LOW):
                with m.If(tx.ready):
                    m.d.comb += state_next.eq(_State.IDLE)

        return m


class HostLink(wiring.Component):
    """The host link on UART pins: :class:`HostLinkCore` with a UART receiver and transmitter.

    Parameters
    ----------
    config : AcceleratorConfig
    clock_hz : int or float
        Clock of domain ``sync``.
    baud : int
        Line rate; ``clock_hz / baud`` (fractions kept) must be at least 4 cycles per bit.
        The FT2232H of iCEBreaker and ULX3S makes 3,000,000 and 1,000,000 exactly.
    **options
        ``addr_width``, ``input_depth``, ``output_depth``, ``max_write_bytes``,
        ``timeout_cycles`` of :class:`HostLinkCore` (the timeout must exceed two byte times).

    Members
    -------
    rx : In(1)
        UART line from the host (idle high, asynchronous: synchronized inside).
    tx : Out(1)
        UART line to the host (idle high, from a flip-flop).
    device : In(device_signature(config, addr_width))
        Connects 1:1 to the accelerator: ``wiring.connect(m, link.device, accelerator)``, or
        :func:`connect_device` when the accelerator has more ports.
    status : Out(StructLayout: busy, done_seen, error)
        As :class:`HostLinkCore`.
    """

    def __init__(self, config, clock_hz, baud, **options):
        if isinstance(baud, bool) or not isinstance(baud, (int, float)) or baud <= 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        try:
            self.divisor = uart_divisor(clock_hz / baud)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{baud:,} baud from a {clock_hz / 1e6:g} MHz clock: {error}") from None
        self.core = HostLinkCore(config, clock_hz, baud, **options)
        if self.core.timeout_cycles < 20 * self.divisor:
            raise ValueError(f"timeout_cycles {self.core.timeout_cycles} is shorter than two "
                             f"byte times ({int(20 * self.divisor)} cycles at {baud:,} baud)")
        self.config = config
        self.clock_hz = clock_hz
        self.baud = baud
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "device": In(device_signature(config, self.core.addr_width)),
            "status": Out(data.StructLayout({"busy": 1, "done_seen": 1, "error": 1})),
        })

    @property
    def info(self):
        """The :class:`~fpganet.board.protocol.DeviceInfo` this link answers PING with."""
        return self.core.info

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.receiver = receiver = UARTReceiver(self.divisor)
        m.submodules.transmitter = transmitter = UARTTransmitter(self.divisor)
        wiring.connect(m, receiver.data, core.rx)
        wiring.connect(m, core.tx, transmitter.data)
        wiring.connect(m, wiring.flipped(self.device), core.device)
        m.d.comb += [
            receiver.rx.eq(self.rx),
            self.tx.eq(transmitter.tx),
            core.framing_error.eq(receiver.framing_error),
            core.overrun.eq(receiver.overrun),
            self.status.eq(core.status),
        ]
        return m


# Device stand-in -----------------------------------------------------------------------------

class StandInDevice(wiring.Component):
    """A device with the accelerator's ports, built from memories, to test the link.

    It keeps what the host writes in one memory per :class:`~fpganet.isa.HostSpace` (``depth``
    words each, the address taken modulo ``depth``) and, on ``start``, runs a fixed job
    described by program word 0 (``[15:0]`` inputs, ``[31:16]`` echoes, ``[47:32]`` weight
    words, ``[63:48]`` parameter words):

    1. it reads ``inputs`` bytes from ``input``; for each of the first ``echoes`` of them,
       ``x``, it sends ``activations[x]`` (the activation memory is a lookup table);
    2. it sends weight words ``0..`` and parameter words ``0..`` (``weight_word_bytes`` and 8
       bytes each, little-endian);
    3. it sends ``cycles`` (4 bytes, little-endian, as STAMP does), lowers ``busy`` and raises
       ``done`` (a level, until the next ``start``).

    ``host.ready`` is low while busy and every other cycle when idle (back-pressure for the
    link to cope with). ``cycles`` counts the cycles since ``start`` while busy.

    Parameters
    ----------
    config : AcceleratorConfig
    addr_width : int, optional
    depth : int
        Words of each memory.
    """

    def __init__(self, config, addr_width=None, *, depth=256):
        _check_int("StandInDevice depth", depth, 1, 1 << 16)
        self.config = config
        self.depth = depth
        self.addr_width = host_addr_width(config) if addr_width is None else addr_width
        super().__init__(device_signature(config, self.addr_width))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        widths = {HostSpace.PROGRAM: 64, HostSpace.WEIGHTS: 8 * config.weight_word_bytes,
                  HostSpace.PARAMS: 64, HostSpace.ACTIVATIONS: 8}
        reads = {}
        bits = max(1, ceil_log2(self.depth))
        gap = Signal()
        m.d.sync += gap.eq(~gap)
        m.d.comb += self.host.ready.eq(~self.busy & gap)
        for space, width in widths.items():
            mem = memory.Memory(shape=width, depth=self.depth, init=[])
            m.submodules[f"{space.name.lower()}_memory"] = mem
            write = mem.write_port()
            reads[space] = mem.read_port()
            m.d.comb += [
                write.addr.eq(self.host.payload.addr % self.depth if self.depth & (self.depth - 1)
                              else self.host.payload.addr[:bits]),
                write.data.eq(self.host.payload.data[:width]),
                write.en.eq(self.host.valid & self.host.ready & (self.host.payload.space == space)),
            ]

        control = Signal(64)
        inputs, echoes, weight_words, param_words = (control[16 * i:16 * i + 16] for i in range(4))
        count = Signal(16)
        byte = Signal(range(8))
        stamp = Signal(32)
        m.d.comb += [reads[HostSpace.PROGRAM].addr.eq(0), reads[HostSpace.ACTIVATIONS].en.eq(0)]
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)

        with m.FSM(name="standin_fsm"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(1),
                                 count.eq(0)]
                    m.next = "CONTROL"
            with m.State("CONTROL"):
                m.d.sync += control.eq(reads[HostSpace.PROGRAM].data)
                m.next = "INPUT"
            with m.State("INPUT"):
                m.d.comb += self.input.ready.eq(count < inputs)
                lut = reads[HostSpace.ACTIVATIONS]
                m.d.comb += lut.addr.eq(self.input.payload)
                m.d.comb += lut.en.eq(self.input.valid & self.input.ready)
                with m.If(count == inputs):
                    m.d.sync += [count.eq(0), byte.eq(0)]
                    m.next = "WEIGHT_READ"
                with m.Elif(self.input.valid):
                    with m.If(count < echoes):
                        m.next = "ECHO"
                    with m.Else():
                        m.d.sync += count.eq(count + 1)
            with m.State("ECHO"):
                m.d.comb += [self.output.valid.eq(1),
                             self.output.payload.eq(reads[HostSpace.ACTIVATIONS].data)]
                with m.If(self.output.ready):
                    m.d.sync += count.eq(count + 1)
                    m.next = "INPUT"
            for space, words, next_state in ((HostSpace.WEIGHTS, weight_words, "PARAM_READ"),
                                             (HostSpace.PARAMS, param_words, "STAMP")):
                name = "WEIGHT" if space is HostSpace.WEIGHTS else "PARAM"
                port = reads[space]
                size = widths[space] // 8
                m.d.comb += port.addr.eq(count)
                with m.State(f"{name}_READ"):
                    with m.If(count == words):
                        m.d.sync += [count.eq(0), byte.eq(0)]
                        m.d.sync += stamp.eq(self.cycles)
                        m.next = next_state
                    with m.Else():
                        m.next = f"{name}_SEND"
                with m.State(f"{name}_SEND"):
                    m.d.comb += [self.output.valid.eq(1),
                                 self.output.payload.eq(port.data.word_select(byte, 8))]
                    m.d.comb += port.en.eq(0)
                    with m.If(self.output.ready):
                        with m.If(byte == size - 1):
                            m.d.sync += [byte.eq(0), count.eq(count + 1)]
                            m.next = f"{name}_READ"
                        with m.Else():
                            m.d.sync += byte.eq(byte + 1)
            with m.State("STAMP"):
                m.d.comb += [self.output.valid.eq(1),
                             self.output.payload.eq(stamp.word_select(byte[:2], 8))]
                with m.If(self.output.ready):
                    m.d.sync += byte.eq(byte + 1)
                    with m.If(byte == 3):
                        m.d.sync += [self.busy.eq(0), self.done.eq(1)]
                        m.next = "IDLE"
        return m


class HostLinkSystem(wiring.Component):
    """A :class:`HostLink` and its device: a complete design with UART pins only.

    Parameters
    ----------
    config : AcceleratorConfig
    clock_hz, baud
        As :class:`HostLink`.
    device : callable
        ``device(config)`` returns the device: :class:`StandInDevice` (default) or the
        accelerator (``device=Accelerator``). The link takes its address width from the
        device's ``host`` port.
    **options
        Passed to :class:`HostLink`.

    Members
    -------
    rx : In(1)
    tx : Out(1)
    status : Out(8)
        For LEDs: bit 0 busy, bit 1 done since the last START, bit 2 the last reply was an
        ERROR.
    """

    def __init__(self, config, clock_hz, baud, *, device=StandInDevice, **options):
        self.device = device(config)
        addr_width = len(self.device.host.payload.addr)
        self.link = HostLink(config, clock_hz, baud, addr_width=addr_width, **options)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "status": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = link = self.link
        m.submodules.device = device = self.device
        connect_device(m, link, device)
        m.d.comb += [
            link.rx.eq(self.rx),
            self.tx.eq(link.tx),
            self.status.eq(link.status.as_value()),
        ]
        return m
