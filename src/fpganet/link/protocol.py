"""The host-link frame protocol: constants, CRC, frame packing and the reply payloads.

This module is the one definition of the protocol that the gateware
(:mod:`fpganet.hdl.hostlink`) and the host driver (:mod:`fpganet.link`)
both import; docs/reference/hostlink.md describes it for people. It needs nothing but
the standard library.

Frame (both directions)::

    SYNC 0xA5 | type (1) | length (2, little-endian) | payload (length bytes) | CRC-16 (2, big-endian)

The CRC is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no
reflection, no final XOR; check value ``crc16(b"123456789") == 0x29B1``) over
type, length and payload. Sent most significant byte first, it makes the CRC
of type..CRC zero, which is what the receiver checks.
"""

import binascii
import enum
import struct
from dataclasses import dataclass, field, fields

from ..config import MULT_BITS
from ..isa import host_memory_words, host_word_bytes

__all__ = ["SYNC", "PROTOCOL_VERSION", "HEADER_BYTES", "CRC_BYTES", "FRAME_OVERHEAD",
           "ERROR_TYPE", "ACK_FLAG", "Command", "ErrorCode", "crc16", "encode_frame",
           "reply_type", "DeviceInfo", "Status", "write_payload",
           "read_output_payload", "MAX_ADDRESS", "FrameError", "split_frame", "ERROR_COUNTERS"]

SYNC = 0xA5
#: 4: PING's options byte carries pipeline_registers and the tflite mode (a board built
#: before them would report an unpipelined fpganet-mode accelerator whatever it holds).
PROTOCOL_VERSION = 5
HEADER_BYTES = 4          # sync, type, length (2)
CRC_BYTES = 2
FRAME_OVERHEAD = HEADER_BYTES + CRC_BYTES
#: Reply type of an ERROR reply; an ACK has the request's type with :data:`ACK_FLAG` set.
ERROR_TYPE = 0xFF
ACK_FLAG = 0x80
#: WRITE addresses are 24-bit.
MAX_ADDRESS = (1 << 24) - 1


class Command(enum.IntEnum):
    """Request types (host to board)."""
    PING = 0x01         # no payload -> DeviceInfo
    STATUS = 0x02       # no payload -> Status
    WRITE = 0x03        # space (1), address (3), words -> empty ACK
    START = 0x04        # [wait (1)] -> empty ACK (BUSY while the accelerator runs; with the
                        # byte, where PING's links say so, the board first waits for it to stop)
    SEND_INPUT = 0x05   # bytes for the accelerator's input stream -> empty ACK
    READ_OUTPUT = 0x06  # max (2) [, wait_for (2)] -> up to max bytes of the output stream
    FLUSH = 0x07        # no payload: drop unread input and output bytes -> empty ACK


class ErrorCode(enum.IntEnum):
    """Codes of an ERROR reply (payload: code, request type). An ERROR reply means the
    request had no effect."""
    BAD_CRC = 1         # the frame's CRC is wrong
    UNKNOWN_TYPE = 2    # no such request type
    BAD_LENGTH = 3      # the length does not suit the request type (or exceeds every limit)
    TRUNCATED = 4       # the line went quiet inside a frame for the inter-byte timeout
    BUSY = 5            # WRITE, START or FLUSH while the accelerator runs
    BAD_ADDRESS = 6     # WRITE to a space other than 0..3, or past the end of the memory
    NO_SPACE = 7        # SEND_INPUT larger than the free space of the input FIFO


def reply_type(command):
    """The type byte of an ACK to ``command``."""
    return int(command) | ACK_FLAG


# CRC-16/CCITT-FALSE ------------------------------------------------------------------------

def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE of ``data`` (continuing from ``crc``).

    The standard library's ``binascii.crc_hqx`` is this CRC (polynomial 0x1021, MSB first,
    no final XOR) from the initial value it is given.
    """
    return binascii.crc_hqx(bytes(data), crc)


def encode_frame(frame_type, payload=b""):
    """The bytes of one frame."""
    payload = bytes(payload)
    if not 0 <= frame_type <= 0xFF:
        raise ValueError(f"frame type {frame_type} is not a byte")
    if len(payload) > 0xFFFF:
        raise ValueError(f"payload of {len(payload)} bytes exceeds the 16-bit length field")
    body = bytes([frame_type]) + len(payload).to_bytes(2, "little") + payload
    return bytes([SYNC]) + body + crc16(body).to_bytes(2, "big")


class FrameError(ValueError):
    """A received frame is damaged (its CRC is wrong)."""


def split_frame(data):
    """The first frame of ``data``: ``(type, payload, rest)``, or None while incomplete.

    Bytes before the first SYNC are skipped. Raises :class:`FrameError` when the CRC is wrong.
    """
    data = bytes(data)
    start = data.find(SYNC)
    if start < 0 or len(data) - start < HEADER_BYTES:
        return None
    length = int.from_bytes(data[start + 2:start + 4], "little")
    end = start + HEADER_BYTES + length + CRC_BYTES
    if len(data) < end:
        return None
    if crc16(data[start + 1:end]) != 0:
        raise FrameError(f"reply CRC mismatch (type {data[start + 1]:#04x}, "
                         f"{length} payload bytes)")
    return data[start + 1], data[start + HEADER_BYTES:end - CRC_BYTES], data[end:]


# Payloads -----------------------------------------------------------------------------------

def write_payload(space, address, words, weight_word_bytes):
    """The payload of a WRITE of ``words`` (integers) at ``address`` of ``space``."""
    size = host_word_bytes(space, weight_word_bytes)
    if not 0 <= address <= MAX_ADDRESS:
        raise ValueError(f"address {address} does not fit 24 bits")
    data = bytearray([int(space)]) + address.to_bytes(3, "little")
    for word in words:
        word = int(word)
        if not 0 <= word < 1 << (8 * size):
            raise ValueError(f"word {word:#x} does not fit the {size} bytes of space {int(space)}")
        data += word.to_bytes(size, "little")
    return bytes(data)


def read_output_payload(max_bytes, wait_for=0):
    """The payload of a READ_OUTPUT: return at most ``max_bytes``; with ``wait_for``, the board
    first waits until that many bytes are ready, the accelerator stops, or its timeout."""
    if not 0 <= max_bytes <= 0xFFFF or not 0 <= wait_for <= 0xFFFF:
        raise ValueError("READ_OUTPUT counts are 16-bit")
    payload = max_bytes.to_bytes(2, "little")
    return payload + wait_for.to_bytes(2, "little") if wait_for else payload


class _Packed:
    """A dataclass packed little-endian, one struct code per field (``metadata["fmt"]``)."""

    @classmethod
    def format(cls):
        return "<" + "".join(field.metadata["fmt"] for field in fields(cls))

    @classmethod
    def size(cls):
        return struct.calcsize(cls.format())

    @classmethod
    def unpack(cls, payload):
        if len(payload) != cls.size():
            raise ValueError(f"{cls.__name__} payload has {len(payload)} bytes, not {cls.size()}")
        return cls(*struct.unpack(cls.format(), bytes(payload)))

    def pack(self):
        return struct.pack(self.format(), *(getattr(self, field.name) for field in fields(self)))


def _f(fmt):
    return field(metadata={"fmt": fmt})


@dataclass(frozen=True)
class DeviceInfo(_Packed):
    """The PING reply: the protocol version, the accelerator's configuration and the link's
    limits, so that a host refuses a network compiled for other hardware."""
    version: int = _f("B")
    rows: int = _f("B")
    cols: int = _f("B")
    operand_width: int = _f("B")
    acc_width: int = _f("B")
    requant_lanes: int = _f("B")
    requant_latency: int = _f("B")
    options: int = _f("B")          # broadcast, 15 - requant_mult_bits, pipeline, tflite
    weight_buffer_bytes: int = _f("I")
    act_buffer_bytes: int = _f("I")
    bias_buffer_words: int = _f("I")
    program_words: int = _f("I")
    host_data_width: int = _f("H")
    addr_width: int = _f("B")
    input_depth: int = _f("H")      # bytes the input FIFO holds
    output_depth: int = _f("H")     # bytes the output FIFO holds
    max_write_bytes: int = _f("H")  # data bytes one WRITE may carry
    clock_hz: int = _f("I")
    baud: int = _f("I")
    timeout_cycles: int = _f("I")   # inter-byte timeout of the frame parser
    banking: int = _f("B")          # act_bank_factor; single_port_activations, packed_weights,
                                    # fused_max_pool, pair_products in bits 4, 5, 6, 7
    design: int = _f("I")           # sent by a fixed-function design only (see below)
    links: int = _f("B")            # LINK_* bits: the links the bitstream carries; QUEUED_START
    features: int = _f("B")         # FEATURE_* bits: configuration flags ``banking`` had no room for

    #: ``design`` of the int8 accelerator, which runs any network compiled for its
    #: configuration. Any other value identifies one network's fixed-function design, its
    #: weights in the bitstream (the binary engine: :attr:`fpganet.codegen.binary.FoldedNetwork.design_id`).
    #: The int8 accelerator does not send the field on the UART alone and without ``features``
    #: (its reply is as it always was, a board built before the field answers alike); a reply
    #: without it reads as this value.
    INT8_ACCELERATOR = 0
    #: ``links`` bits. A board that sends no ``links`` carries the UART alone (every board
    #: built before the SPI link).
    LINK_UART = 1
    LINK_SPI = 2
    LINK_NAMES = {"uart": LINK_UART, "spi": LINK_SPI}
    #: ``links`` bit 7: START takes its wait byte (a START queued behind the running one).
    QUEUED_START = 1 << 7
    #: ``features`` bit 0: ``binary_weights`` (``CONV``'s binary mode); bit 1: ``ternary_pairs``
    #: (one multiplier a pair PE: a network of other weights gives wrong sums there). A board
    #: that sends no ``features`` has none of them.
    FEATURE_BINARY = 1
    FEATURE_TERNARY = 2
    #: The configuration fields ``features`` packs, in PING's printout.
    FEATURE_FIELDS = ("binary_weights", "ternary_pairs")

    @classmethod
    def unpack(cls, payload):
        """A reply with every field, or without ``features`` (a board with none), or also
        without ``links`` (a UART-only board), or also without ``design`` (the int8
        accelerator's on a UART-only board)."""
        missing = cls.size() - len(payload)
        tail = {6: bytes(4) + bytes([cls.LINK_UART, 0]), 2: bytes([cls.LINK_UART, 0]),
                1: bytes(1)}
        return super().unpack(bytes(payload) + tail.get(missing, b""))

    def pack(self):
        """The reply's bytes: every field where ``features`` has any; otherwise the fields a
        board sent before ``features`` existed, and a UART-only board's as it sent them before
        ``links`` (without ``design`` where it is the int8 accelerator's)."""
        data = super().pack()
        if self.features:
            return data
        data = data[:-1]
        if self.links != self.LINK_UART:
            return data
        return data[:-5] if self.design == self.INT8_ACCELERATOR else data[:-1]

    @classmethod
    def features_of(cls, config):
        """The ``features`` byte of an :class:`~fpganet.config.AcceleratorConfig`."""
        return (cls.FEATURE_BINARY * bool(config.binary_weights)
                | cls.FEATURE_TERNARY * bool(config.ternary_pairs))

    @property
    def binary_weights(self):
        return bool(self.features & self.FEATURE_BINARY)

    @property
    def ternary_pairs(self):
        return bool(self.features & self.FEATURE_TERNARY)

    @property
    def queued_start(self):
        """START takes its wait byte: the next run can be queued on the board."""
        return bool(self.links & self.QUEUED_START)

    @property
    def link_names(self):
        """The links the bitstream carries, by name."""
        return [name for name, bit in self.LINK_NAMES.items() if self.links & bit]

    #: Configuration fields a compiled network must match exactly. ``result_queue_rows`` is
    #: not among them: a network's program and numerics are the same with any queue (only its
    #: cycles differ), and a board reports none.
    CONFIG_FIELDS = ("rows", "cols", "operand_width", "acc_width", "requant_lanes",
                     "requant_latency", "broadcast_operands", "requant_mult_bits",
                     "pipeline_registers", "requant_mode", "weight_buffer_bytes",
                     "act_buffer_bytes", "bias_buffer_words", "program_words", "act_bank_factor",
                     "diagonal_weights", "pair_products", "fused_max_pool", "packed_weights",
                     "single_port_activations", "binary_weights", "ternary_pairs")
    #: The configuration fields ``options`` packs (below), in PING's printout.
    OPTION_FIELDS = ("broadcast_operands", "requant_mult_bits", "pipeline_registers",
                     "requant_mode", "diagonal_weights")

    #: ``options`` bit 0: ``broadcast_operands``; bits 1-4 hold ``15 - requant_mult_bits``,
    #: so that a board with whole multipliers (and one built before the field) sends 0 there;
    #: bit 5: ``pipeline_registers``, the timing set (the cycles of ``CONV``, ``POOL``, ``FILL``,
    #: ``OUTPUT`` and a taken ``LOOP``; a knob that overrides the set is not sent); bit 6:
    #: ``requant_mode`` ``"tflite"`` (its numerics and parameter entries); bit 7:
    #: ``diagonal_weights`` (``CONV``'s diagonal mode; a board built before it sends 0).
    OPTIONS_BROADCAST = 1
    OPTIONS_PIPELINE = 1 << 5
    OPTIONS_TFLITE = 1 << 6
    OPTIONS_DIAGONAL = 1 << 7
    #: ``banking``: ``act_bank_factor`` (1 to 8) in the low bits, so that a board built before
    #: pair products sends its factor alone; bit 7: ``pair_products`` (a ``CONV``'s beats and
    #: weight words); bit 6: ``fused_max_pool`` (``CONV``'s pooled writes); bit 5:
    #: ``packed_weights`` (``CONV``'s packed mode); bit 4: ``single_port_activations`` (the
    #: cycles of ``CONV`` and ``POOL``).
    BANKING_PAIRS = 1 << 7
    BANKING_POOL = 1 << 6
    BANKING_PACKED = 1 << 5
    BANKING_SINGLE_PORT = 1 << 4
    BANKING_FLAGS = BANKING_PAIRS | BANKING_POOL | BANKING_PACKED | BANKING_SINGLE_PORT
    #: The configuration fields ``banking`` packs, in PING's printout.
    BANKING_FIELDS = ("act_bank_factor", "pair_products", "fused_max_pool", "packed_weights",
                      "single_port_activations")

    @classmethod
    def banking_of(cls, config):
        """The ``banking`` byte of an :class:`~fpganet.config.AcceleratorConfig`."""
        return (config.act_bank_factor | cls.BANKING_PAIRS * bool(config.pair_products)
                | cls.BANKING_POOL * bool(config.fused_max_pool)
                | cls.BANKING_PACKED * bool(config.packed_weights)
                | cls.BANKING_SINGLE_PORT * bool(config.single_port_activations))

    @property
    def act_bank_factor(self):
        return self.banking & ~self.BANKING_FLAGS

    @property
    def pair_products(self):
        return bool(self.banking & self.BANKING_PAIRS)

    @property
    def fused_max_pool(self):
        return bool(self.banking & self.BANKING_POOL)

    @property
    def packed_weights(self):
        return bool(self.banking & self.BANKING_PACKED)

    @property
    def single_port_activations(self):
        return bool(self.banking & self.BANKING_SINGLE_PORT)

    @classmethod
    def options_of(cls, config):
        """The ``options`` byte of an :class:`~fpganet.config.AcceleratorConfig`."""
        return (cls.OPTIONS_BROADCAST * bool(config.broadcast_operands)
                | (MULT_BITS - config.requant_mult_bits) << 1
                | cls.OPTIONS_PIPELINE * bool(config.pipeline_registers)
                | cls.OPTIONS_TFLITE * (config.requant_mode == "tflite")
                | cls.OPTIONS_DIAGONAL * bool(config.diagonal_weights))

    @property
    def broadcast_operands(self):
        return bool(self.options & self.OPTIONS_BROADCAST)

    @property
    def requant_mult_bits(self):
        return MULT_BITS - (self.options >> 1 & 0xF)

    @property
    def pipeline_registers(self):
        return bool(self.options & self.OPTIONS_PIPELINE)

    @property
    def requant_mode(self):
        return "tflite" if self.options & self.OPTIONS_TFLITE else "fpganet"

    @property
    def diagonal_weights(self):
        return bool(self.options & self.OPTIONS_DIAGONAL)

    @property
    def weight_word_bytes(self):
        return (self.rows * self.operand_width * (2 if self.pair_products else 1) + 7) // 8

    @property
    def timeout_s(self):
        return self.timeout_cycles / self.clock_hz if self.clock_hz else 0.0

    def word_bytes(self, space):
        return host_word_bytes(space, self.weight_word_bytes)

    def memory_words(self, space):
        """Words of memory ``space`` (the WRITE bound): :func:`fpganet.isa.host_memory_words`."""
        return host_memory_words(space, self)

    def mismatches(self, config):
        """``[(field, board value, config value)]`` where ``config`` (an AcceleratorConfig)
        differs from this board. A board whose multipliers keep more bits than ``config``'s
        runs its networks exactly (their multipliers' lower bits are zero): not a mismatch."""
        def differs(name):
            board, compiled = getattr(self, name), getattr(config, name)
            return board < compiled if name == "requant_mult_bits" else board != compiled
        return [(name, getattr(self, name), getattr(config, name)) for name in self.CONFIG_FIELDS
                if differs(name)]

    @property
    def name(self):
        return f"{self.rows}x{self.cols}"

    @staticmethod
    def design_text(design):
        """How a message names a ``design`` value."""
        return ("the int8 accelerator" if design == DeviceInfo.INT8_ACCELERATOR else
                f"the fixed-function design {design:08x}")


@dataclass(frozen=True)
class Status(_Packed):
    """The STATUS reply. ``frames`` is 16-bit, the other counters 8-bit; all wrap."""
    flags: int = _f("B")            # FLAG_BUSY | FLAG_DONE | FLAG_DONE_SEEN
    cycles: int = _f("I")           # the accelerator's cycle counter
    input_free: int = _f("H")       # free bytes in the input FIFO
    output_level: int = _f("H")     # bytes waiting in the output FIFO
    frames: int = _f("H")           # requests answered with an ACK (this STATUS included)
    bad_crc: int = _f("B")          # ERROR replies, one counter per ErrorCode
    unknown_type: int = _f("B")
    bad_length: int = _f("B")
    truncated: int = _f("B")
    busy_rejects: int = _f("B")
    bad_address: int = _f("B")
    no_space: int = _f("B")
    framing_errors: int = _f("B")   # UART bytes with a bad stop bit
    overruns: int = _f("B")         # UART bytes lost because the parser was not ready
    garbage: int = _f("B")          # bytes outside frames (not SYNC while idle)

    FLAG_BUSY = 1
    FLAG_DONE = 2
    FLAG_DONE_SEEN = 4   # done was raised since the last START

    @property
    def busy(self):
        return bool(self.flags & self.FLAG_BUSY)

    @property
    def done(self):
        return bool(self.flags & self.FLAG_DONE)

    @property
    def done_seen(self):
        return bool(self.flags & self.FLAG_DONE_SEEN)

    @property
    def errors(self):
        """``{ErrorCode: count}``."""
        return {code: getattr(self, name) for code, name in zip(ErrorCode, ERROR_COUNTERS)}


#: Status field of each ErrorCode's counter, in code order.
ERROR_COUNTERS = ("bad_crc", "unknown_type", "bad_length", "truncated", "busy_rejects",
                   "bad_address", "no_space")
assert len(ERROR_COUNTERS) == len(ErrorCode)
