"""The host link's command executor: what a request frame means, and doing it.

It takes the :class:`~fpganet.hdl.deframer.Deframer`'s fields and payload bytes, keeps what
each command needs (WRITE's space, address and staged data; READ_OUTPUT's counts), judges
the request when its CRC arrives (the ERROR code, or none), carries it out on the device
ports and the FIFOs, and hands the :class:`~fpganet.hdl.replier.Replier` a reply
descriptor (:func:`reply_layout`).
"""

import enum

from amaranth import *
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from fpganet.link import protocol
from fpganet.link.protocol import Command, ErrorCode
from fpganet.config import AcceleratorConfig
from fpganet.isa import HostSpace, host_word_bytes

from .deframer import at_most
from .hostport import host_addr_width, host_write_layout
from .linkfifo import MAX_BUFFER, check_int
from .memories import falling_edge_write_domain

__all__ = ["CommandExecutor", "reply_layout", "snapshot_layout"]


def reply_layout(output_depth):
    """A reply descriptor: ``code`` (the :class:`~fpganet.link.protocol.ErrorCode` of an ERROR
    reply, 0 for an ACK), ``request`` (the request's type byte, 0 when the frame ended before
    it), ``length`` (READ_OUTPUT's payload bytes, at most ``output_depth``)."""
    return data.StructLayout({"code": range(len(ErrorCode) + 1), "request": 8,
                              "length": range(output_depth + 1)})


def snapshot_layout():
    """STATUS's first fields, taken in one cycle so that they agree: ``flags`` (bit 0 busy,
    bit 1 done, bit 2 done since the last START), ``cycles``, ``input_free``,
    ``output_level``."""
    return data.StructLayout({"flags": 8, "cycles": 32, "input_free": 16, "output_level": 16})


class _State(enum.IntEnum):
    IDLE = 0
    EXECUTE = 1
    WRITE_READ = 2
    WRITE_BYTE = 3
    WRITE_WORD = 4
    WAIT_OUTPUT = 5
    FLUSH = 6
    REPLY = 7


class CommandExecutor(wiring.Component):
    """Judges each request, carries it out, and asks for its reply.

    Parameters
    ----------
    config : AcceleratorConfig
        The device's: the host port's data width and the memory depths that bound WRITE.
    addr_width : int
        Bits of the host port's address (at least :func:`~fpganet.hdl.hostport.host_addr_width`,
        at most 24).
    input_depth : int
        Bytes of the input FIFO (a power of two, 16..32768): the largest SEND_INPUT.
    output_depth : int
        Bytes of the output FIFO (2..32768).
    max_write_bytes : int
        Data bytes one WRITE may carry: the staging buffer (8..32768, and at least a word).
    queued_start : bool
        START takes a wait byte (the SPI link's): with it, the executor waits while the
        device runs and starts it the cycle it stops. Without it START has no payload, and
        none of this logic is built.

    Members
    -------
    frame_type, header, header_length, payload_valid, payload, index, end, crc_ok, abort, truncated, timed_out : In
        From the :class:`~fpganet.hdl.deframer.Deframer` (``payload`` is its ``rx.payload``).
    host : Out(stream.Signature(host_write_layout(config, addr_width)))
        Memory writes, one word per transfer: a WRITE's words after its CRC checked, at two
        cycles per byte and one per word, plus the port's back-pressure (``ready``).
    start : Out(1)
        A one-cycle pulse: START.
    busy, done : In(1)
        The device's; ``done`` may be a pulse or a level (its rising edge is latched).
    done_seen : Out(1)
        ``done`` rose since the last START.
    input_write : Out(1)
        Write ``payload`` into the input FIFO (a SEND_INPUT's bytes, tentatively; from
        flip-flops through one LUT, for a write on the falling edge).
    input_free : In(range(input_depth + 1))
        The input FIFO's free bytes.
    input_commit, input_drop : Out(1)
        Make the tentative bytes readable (a good SEND_INPUT); drop the unread ones (FLUSH).
    output_level : In(range(output_depth + 1))
        The output FIFO's bytes.
    output_take : Out(1)
        Read (drop) an output FIFO byte: FLUSH empties it.
    reply : Out(stream.Signature(reply_layout(output_depth)))
        The reply to send; the replier takes it at once (it is idle whenever a request
        executes). Its payload is steady while ``valid``.

    Latency: a request is judged in the cycle of its last CRC byte, executes in the next
    one and asks for its reply one cycle after that, except WRITE (after its words), a
    READ_OUTPUT with a ``wait_for`` count (when the output bytes are there, the device
    stops, or the timeout passes), a START with its byte (when the device stops, starting
    it, or at the timeout, BUSY) and FLUSH (after the output FIFO is empty). A frame that
    the deframer aborts is answered from the next cycle. Payload bytes are taken every
    cycle: no back-pressure towards the deframer.
    """

    #: Cycles from ``end`` to ``reply.valid`` for a request that replies at once (an ERROR,
    #: PING, STATUS, START, SEND_INPUT).
    latency = 2

    def __init__(self, config, *, addr_width, input_depth, output_depth, max_write_bytes,
                 queued_start=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        check_int("addr_width", addr_width, host_addr_width(config), 24)
        check_int("input_depth", input_depth, 16, MAX_BUFFER)
        if input_depth & (input_depth - 1):
            raise ValueError(f"input_depth must be a power of two, not {input_depth}")
        check_int("output_depth", output_depth, 2, MAX_BUFFER)
        self.word_bytes = {space: host_word_bytes(space, config.weight_word_bytes)
                           for space in HostSpace}
        check_int("max_write_bytes", max_write_bytes, max(self.word_bytes.values()), MAX_BUFFER)
        self.config = config
        self.addr_width = addr_width
        self.input_depth = input_depth
        self.output_depth = output_depth
        self.max_write_bytes = max_write_bytes
        self.queued_start = bool(queued_start)
        #: Longest payload the deframer must read.
        self.max_payload = max(4 + max_write_bytes, input_depth)
        self.memory_words = {
            HostSpace.PROGRAM: config.program_words,
            HostSpace.WEIGHTS: config.weight_buffer_words,
            HostSpace.PARAMS: config.bias_buffer_words,
            HostSpace.ACTIVATIONS: config.act_buffer_bytes,
        }
        super().__init__({
            "frame_type": In(8), "header": In(1), "header_length": In(16),
            "payload_valid": In(1), "payload": In(8), "index": In(range(self.max_payload + 1)),
            "end": In(1), "crc_ok": In(1), "abort": In(1), "truncated": In(1),
            "timed_out": In(1),
            "host": Out(stream.Signature(host_write_layout(config, addr_width))),
            "start": Out(1), "busy": In(1), "done": In(1), "done_seen": Out(1),
            "input_write": Out(1), "input_free": In(range(input_depth + 1)),
            "input_commit": Out(1), "input_drop": Out(1),
            "output_level": In(range(output_depth + 1)), "output_take": Out(1),
            "reply": Out(stream.Signature(reply_layout(output_depth))),
        })

    def elaborate(self, platform):
        m = Module()
        state = Signal(_State)
        error_code = Signal(range(len(ErrorCode) + 1))
        fields = self._fields(m)
        self._device_flags(m)
        self._payload(m, fields)
        self._judge(m, state, error_code, fields)
        self._execute(m, state, error_code, fields)
        return m

    def _fields(self, m):
        """The registers the payload fills, and the decodes over them."""
        config = self.config
        f = {}
        f["length_ok"] = Signal()       # the length suits the command
        f["no_space"] = Signal()        # a SEND_INPUT larger than the input FIFO's free space
        f["input_payload"] = Signal()   # this frame's payload goes into the input FIFO
        # WRITE's space and address, kept as wide as the device needs: every memory has at
        # most 2 ** addr_width words, so a space byte above 3 or an address bit at or above
        # addr_width only needs remembering as a flag (either one means BAD_ADDRESS). This
        # keeps the range check and its adder to addr_width + 1 bits instead of 26.
        assert max(self.memory_words.values()) <= 1 << self.addr_width
        f["space"] = Signal(2)
        f["space_bad"] = Signal()
        f["address"] = Signal(self.addr_width)
        f["address_high"] = Signal()
        f["word_byte"] = Signal(range(config.host_data_width // 8))
        f["words"] = Signal(range(self.max_write_bytes + 1))
        # READ_OUTPUT's counts, kept as wide as the output FIFO's level: a count above that
        # only needs remembering as a flag (the wait can never be met by level; the reply
        # is never cut short by max).
        # (max once shared WRITE's address register: measured, a register of its own is 12
        # cells fewer for the link alone and 57 LC fewer for the iCEBreaker build.)
        count_width = len(self.output_level)
        f["max_count"], f["max_high"] = Signal(count_width), Signal()
        f["wait_for"] = Signal(count_width)
        f["wait_high"] = Signal()
        if self.queued_start:
            f["start_wait"] = Signal()
        # The output FIFO holds at least wait_for bytes.
        f["enough"] = ~f["wait_high"] & (self.output_level >= f["wait_for"])

        # Bytes per word of the WRITE's space, and whether its words fit the memory (each
        # space's size is a constant: no carry chain for the comparison).
        f["bytes_per_word"] = bytes_per_word = Signal(range(config.host_data_width // 8 + 1))
        write_end = Signal(range((1 << self.addr_width) + self.max_write_bytes))
        within = Signal()
        m.d.comb += write_end.eq(f["address"] + f["words"])
        with m.Switch(f["space"]):
            for s in HostSpace:
                with m.Case(int(s)):
                    m.d.comb += [bytes_per_word.eq(self.word_bytes[s]),
                                 within.eq(at_most(write_end, self.memory_words[s]))]
        with m.If(f["space_bad"]):
            m.d.comb += bytes_per_word.eq(1)
        # Registered: the adder and the comparison stay out of the verdict (the address and
        # the word count are final a cycle before it, after the payload's last byte).
        f["address_ok"] = Signal()
        m.d.sync += f["address_ok"].eq(~f["space_bad"] & ~f["address_high"] & within)
        return f

    def _device_flags(self, m):
        """``start`` (registered from EXECUTE) and ``done_seen``."""
        done_before = Signal()
        m.d.sync += [self.start.eq(0), done_before.eq(self.done)]
        with m.If(self.done & ~done_before):
            m.d.sync += self.done_seen.eq(1)

    def _store_byte(self, m, target, high, i):
        """Payload byte ``i`` of a little-endian number into ``target``, which keeps its low
        bits; set ``high`` when the byte has a bit above them."""
        byte = self.payload
        low = 8 * i
        kept = min(max(len(target) - low, 0), 8)
        if kept:
            m.d.sync += target[low:low + kept].eq(byte[:kept])
        if kept < 8:
            with m.If(byte[kept:] != 0):
                m.d.sync += high.eq(1)

    def _payload(self, m, f):
        """The header's rules on the length, and each payload byte into its field."""
        frame_type, length = self.frame_type, self.header_length
        type_length_ok = Signal()
        with m.Switch(frame_type):
            idle_commands = (Command.PING, Command.STATUS, Command.START, Command.FLUSH)
            for command in idle_commands:
                if command == Command.START and self.queued_start:
                    continue
                with m.Case(int(command)):
                    m.d.comb += type_length_ok.eq(length == 0)
            if self.queued_start:
                with m.Case(int(Command.START)):
                    m.d.comb += type_length_ok.eq(at_most(length, 1))
            with m.Case(int(Command.WRITE)):
                m.d.comb += type_length_ok.eq(~at_most(length, 4) &
                                              at_most(length, 4 + self.max_write_bytes))
            with m.Case(int(Command.SEND_INPUT)):
                m.d.comb += type_length_ok.eq((length != 0) & at_most(length, self.input_depth))
            with m.Case(int(Command.READ_OUTPUT)):
                m.d.comb += type_length_ok.eq((length == 2) | (length == 4))
        with m.If(self.header):
            # Only used when the length suits SEND_INPUT, and so fits the FIFO's width.
            fits = length[:len(self.input_free)] <= self.input_free
            is_input = frame_type == Command.SEND_INPUT
            m.d.sync += [
                f["length_ok"].eq(type_length_ok),
                f["no_space"].eq(is_input & type_length_ok & ~fits),
                f["input_payload"].eq(is_input & type_length_ok & fits),
                f["address_high"].eq(0), f["word_byte"].eq(0), f["words"].eq(0),
                f["max_high"].eq(0), f["wait_for"].eq(0), f["wait_high"].eq(0),
            ]
            if self.queued_start:
                # A START with its byte waits while the device runs (READ_OUTPUT's lengths
                # are even: the flag is clear for it).
                m.d.sync += f["start_wait"].eq(length[0])
        # The deframer's payload_valid ends with the payload: input_payload may stay set.
        m.d.comb += self.input_write.eq(f["input_payload"] & self.payload_valid)

        index = self.index
        with m.If(self.payload_valid & f["length_ok"]):
            with m.Switch(frame_type):
                with m.Case(int(Command.WRITE)):
                    header = (index[3:] == 0) & (index[:3] != 0) & (index[:3] <= 4)
                    with m.If(header):
                        with m.Switch(index[:3]):
                            with m.Case(1):
                                m.d.sync += [f["space"].eq(self.payload[:2]),
                                             f["space_bad"].eq(self.payload[2:] != 0)]
                            for i in (2, 3, 4):
                                with m.Case(i):
                                    self._store_byte(m, f["address"], f["address_high"], i - 2)
                    with m.Else():
                        with m.If(f["word_byte"] == f["bytes_per_word"] - 1):
                            m.d.sync += [f["word_byte"].eq(0), f["words"].eq(f["words"] + 1)]
                        with m.Else():
                            m.d.sync += f["word_byte"].eq(f["word_byte"] + 1)
                with m.Case(int(Command.READ_OUTPUT)):
                    with m.Switch(index[:3]):
                        counts = [(f["max_count"], f["max_high"])] * 2
                        counts += [(f["wait_for"], f["wait_high"])] * 2
                        for i, (target, high) in enumerate(counts):
                            with m.Case(i + 1):
                                self._store_byte(m, target, high, i % 2)

    def _judge(self, m, state, error_code, f):
        """The request's verdict at its last CRC byte (0: none), or the deframer's abort."""
        command = self.frame_type[:3]      # a known type is 1..7
        known = (self.frame_type[3:] == 0) & (command != 0)
        assert {int(c) for c in Command} == set(range(1, 8))
        is_write = command == Command.WRITE
        verdict = Signal.like(error_code)
        with m.If(~self.crc_ok):
            m.d.comb += verdict.eq(ErrorCode.BAD_CRC)
        with m.Elif(~known):
            m.d.comb += verdict.eq(ErrorCode.UNKNOWN_TYPE)
        with m.Elif(~f["length_ok"] | (is_write & (f["word_byte"] != 0))):
            m.d.comb += verdict.eq(ErrorCode.BAD_LENGTH)
        with m.Elif(is_write & ~f["address_ok"]):
            m.d.comb += verdict.eq(ErrorCode.BAD_ADDRESS)
        start = command == Command.START
        if self.queued_start:
            start = start & ~f["start_wait"]
        with m.Elif(self.busy & (is_write | start | (command == Command.FLUSH))):
            m.d.comb += verdict.eq(ErrorCode.BUSY)
        with m.Elif((command == Command.SEND_INPUT) & f["no_space"]):
            m.d.comb += verdict.eq(ErrorCode.NO_SPACE)
        with m.If(self.end):
            m.d.sync += [error_code.eq(verdict), state.eq(_State.EXECUTE)]
        with m.If(self.abort):
            m.d.sync += [error_code.eq(Mux(self.truncated, ErrorCode.TRUNCATED,
                                           ErrorCode.BAD_LENGTH)),
                         state.eq(_State.REPLY)]

    def _execute(self, m, state, error_code, f):
        """The command, then the reply."""
        config = self.config
        # WRITE staging buffer: words reach the device only after the CRC is checked. It is
        # written at the deframer's payload index modulo a power of two (every payload byte
        # goes in; only a WRITE reads it back, from its first data byte at index 5).
        stage_bits = ceil_log2(self.max_write_bytes)
        m.submodules.staging = staging = memory.Memory(shape=8, depth=1 << stage_bits, init=[])
        stage_w = staging.write_port(domain=falling_edge_write_domain(m, "staging_write"))
        stage_r = staging.read_port()
        stage_addr = Signal(stage_bits)
        m.d.comb += [stage_w.addr.eq(self.index[:stage_bits]), stage_w.data.eq(self.payload),
                     stage_w.en.eq(self.payload_valid), stage_r.addr.eq(stage_addr)]

        # The word being assembled: each byte enters at byte bytes_per_word - 1 and the ones
        # before move down, so after a word's bytes byte 0 holds its first byte; the bytes
        # above stay 0 (cleared when the WRITE starts, and only zeros move down into them),
        # which zero-extends the word to host_data_width. (Sharing this register with the
        # replier's STATUS snapshot, as the link once did, measured more, not fewer: 1,306
        # cells for the link against 1,267, 5,013 LC for the iCEBreaker build against 4,972.)
        word_bytes = config.host_data_width // 8
        word = Signal(8 * word_bytes)
        insert = Signal()
        with m.If(insert):
            for k in range(word_bytes):
                above = word[8 * k + 8:8 * k + 16] if k + 1 < word_bytes else C(0, 8)
                if k + 1 in self.word_bytes.values():
                    above = Mux(f["bytes_per_word"] == k + 1, stage_r.data, above)
                m.d.sync += word[8 * k:8 * k + 8].eq(above)

        # The host port's payload is only looked at with its valid: driving it from the
        # registers in every state saves an AND gate per bit.
        m.d.comb += [self.host.payload.space.eq(f["space"]),
                     self.host.payload.addr.eq(f["address"]),
                     self.host.payload.data.eq(word)]
        m.d.comb += [self.reply.payload.code.eq(error_code),
                     self.reply.payload.request.eq(self.frame_type),
                     # READ_OUTPUT: the bytes there, up to max (now in wait_for).
                     self.reply.payload.length.eq(Mux(f["enough"], f["wait_for"],
                                                      self.output_level))]

        # host.valid, high in the WRITE_WORD state, from a flip-flop of its own: the device's
        # memories take it through their write enables, and the iCE40's write on the falling
        # edge, half a cycle after it (the state's decode there was an iCEBreaker build's
        # longest path). Nothing leaves WRITE_WORD but the host's ready: an abort comes only
        # before a frame's end.
        writing = Signal()
        m.d.comb += self.host.valid.eq(writing)
        with m.Switch(state):
            with m.Case(_State.EXECUTE):
                m.d.sync += state.eq(_State.REPLY)
                with m.If(error_code == 0):
                    with m.Switch(self.frame_type[:3]):
                        with m.Case(int(Command.WRITE)):
                            m.d.sync += [stage_addr.eq(5), word.eq(0),
                                         state.eq(_State.WRITE_READ)]
                        with m.Case(int(Command.START)):
                            if self.queued_start:
                                with m.If(f["start_wait"]):
                                    m.d.sync += state.eq(_State.WAIT_OUTPUT)
                                with m.Else():
                                    m.d.sync += [self.start.eq(1), self.done_seen.eq(0)]
                            else:
                                m.d.sync += [self.start.eq(1), self.done_seen.eq(0)]
                        with m.Case(int(Command.SEND_INPUT)):
                            m.d.comb += self.input_commit.eq(1)
                        with m.Case(int(Command.READ_OUTPUT)):
                            m.d.sync += state.eq(_State.WAIT_OUTPUT)
                        with m.Case(int(Command.FLUSH)):
                            m.d.comb += self.input_drop.eq(1)
                            m.d.sync += state.eq(_State.FLUSH)
            with m.Case(_State.WRITE_READ):
                # The staging buffer's read port gives byte stage_addr next cycle.
                m.d.sync += state.eq(_State.WRITE_BYTE)
            with m.Case(_State.WRITE_BYTE):
                m.d.comb += insert.eq(1)
                m.d.sync += stage_addr.eq(stage_addr + 1)
                with m.If(f["word_byte"] == f["bytes_per_word"] - 1):
                    m.d.sync += [f["word_byte"].eq(0), state.eq(_State.WRITE_WORD), writing.eq(1)]
                with m.Else():
                    m.d.sync += [f["word_byte"].eq(f["word_byte"] + 1),
                                 state.eq(_State.WRITE_READ)]
            with m.Case(_State.WRITE_WORD):
                with m.If(self.host.ready):
                    m.d.sync += writing.eq(0)
                    # The words counted in the payload, counted down.
                    m.d.sync += [f["address"].eq(f["address"] + 1),
                                 f["words"].eq(f["words"] - 1)]
                    with m.If(f["words"] == 1):
                        m.d.sync += state.eq(_State.REPLY)
                    with m.Else():
                        m.d.sync += state.eq(_State.WRITE_READ)
            with m.Case(_State.WAIT_OUTPUT):
                output_ready = f["enough"] | ~self.busy | self.timed_out
                # The reply's length is the smaller of level and max: max takes wait_for's
                # place, and the same comparison decides it (see reply.payload.length).
                reply_output = [f["wait_for"].eq(f["max_count"]),
                                f["wait_high"].eq(f["max_high"]), state.eq(_State.REPLY)]
                if self.queued_start:
                    with m.If(f["start_wait"]):
                        # START with its byte: start when the device stops; BUSY at the
                        # timeout.
                        with m.If(~self.busy):
                            m.d.sync += [self.start.eq(1), self.done_seen.eq(0),
                                         state.eq(_State.REPLY)]
                        with m.Elif(self.timed_out):
                            m.d.sync += [error_code.eq(ErrorCode.BUSY), state.eq(_State.REPLY)]
                    with m.Elif(output_ready):
                        m.d.sync += reply_output
                else:
                    with m.If(output_ready):
                        m.d.sync += reply_output
            with m.Case(_State.FLUSH):
                m.d.comb += self.output_take.eq(1)
                with m.If(self.output_level == 0):
                    m.d.sync += state.eq(_State.REPLY)
            with m.Case(_State.REPLY):
                m.d.comb += self.reply.valid.eq(1)
                with m.If(self.reply.ready):
                    m.d.sync += state.eq(_State.IDLE)
