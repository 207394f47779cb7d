"""The accelerator's instruction set: encoding, decoding and the engine registers.

This module is the contract between the compiler back end, the controller
gateware (``fpganet.hdl``) and the performance model. docs/reference/architecture.md
("Instruction set") gives the semantics; the encodings live only here, as
``amaranth.lib.data`` layouts that the gateware reads by field name and from which
:func:`encode`, :func:`decode`, :func:`pack_param` and :func:`unpack_param` take
every field's offset and width.

An instruction is one 64-bit word (:data:`INSTRUCTION_LAYOUT`)::

    [63:60] opcode
    SET     [59:54] register index, [31:0] value
    LOOP    [47:32] target instruction address (taken while LOOP_COUNT != 0, which it decrements)
    CONV    [0] diagonal: array row i weights only channel i of the walk, one weight word per
            kernel position (depthwise layers and average pools; AcceleratorConfig.diagonal_weights)
            [1] pool: each engine group uses the parameters of rows 0..rows-1 (P_BASE + i), and
            the result writer writes, per tile, one byte per pair of rows 2p, 2p+1: the maximum
            over both rows and the tile's lanes (a fused 2x2 max-pool;
            AcceleratorConfig.fused_max_pool)
            [2] packed: the weights are 4-bit, two beats to a weight word: beat k of a walk's
            weight block (a tile; in the diagonal mode a channel) reads nibble k % 2 of each byte
            of word k // 2, sign-extended (AcceleratorConfig.packed_weights)
            [3] binary: the weights are +-1, eight beats to a weight word: beat k reads bit k % 8
            of each byte of word k // 8, 1 for +1 and 0 for -1 (AcceleratorConfig.binary_weights);
            not with packed
    others  no fields: they read the engine registers

Registers take 32-bit values and keep them until set again; the hardware keeps
only the bits it uses (:func:`count_width` for the counts, :data:`LOOP_COUNT_WIDTH`
for ``LOOP_COUNT``, ``fpganet.hdl.registers.register_widths`` for all).
"""

import enum
from dataclasses import dataclass

import numpy as np

from amaranth.hdl import Shape, signed, unsigned
from amaranth.lib import data

__all__ = ["Opcode", "Reg", "Instruction", "encode", "decode", "INSTRUCTION_BITS", "INSTRUCTION_LAYOUT",
           "SET_LAYOUT", "LOOP_LAYOUT", "CONV_LAYOUT", "PACKED_WEIGHT_BITS", "pack_nibbles", "unpack_nibbles", "BINARY_WEIGHT_BEATS", "pack_signs", "unpack_signs", "EMPTY_WALK_COUNTS", "empty_walk", "ENGINE_COUNTS", "REGION_COUNTS", "region_name", "COUNT_WIDTH", "LOOP_COUNT_WIDTH",
           "count_width", "register_overflow", "HostSpace", "STAMP_BYTES", "host_word_bytes",
           "host_memory_words", "PARAM_BITS", "PARAM_LAYOUTS", "REQUANT_MODES", "TFLITE_MULT_TOP",
           "param_ranges", "pack_param", "unpack_param", "QUANT_LAYOUT", "quant_bits", "pack_quant",
           "unpack_quant"]

#: Bits below the opcode: the operand fields of the instructions that have any.
OPERAND_BITS = 60

#: ``SET``: ``value`` goes to the register numbered ``reg``.
SET_LAYOUT = data.FlexibleLayout(OPERAND_BITS, {
    "value": data.Field(unsigned(32), 0),
    "reg": data.Field(unsigned(6), 54),
})

#: ``LOOP``: the instruction address it jumps to.
LOOP_LAYOUT = data.FlexibleLayout(OPERAND_BITS, {
    "target": data.Field(unsigned(16), 32),
})

#: ``CONV``: the diagonal weight mode and the pooled writes (docs/reference/architecture.md,
#: "Instruction set").
CONV_LAYOUT = data.FlexibleLayout(OPERAND_BITS, {
    "diagonal": data.Field(unsigned(1), 0),
    "pool": data.Field(unsigned(1), 1),
    "packed": data.Field(unsigned(1), 2),
    "binary": data.Field(unsigned(1), 3),
})

#: Bits of one weight of a ``CONV packed``: two to a byte, the even beat's in the low nibble.
PACKED_WEIGHT_BITS = 4
#: Beats of one weight word of a ``CONV binary``: a bit of each byte a beat, the first beat's
#: in bit 0.
BINARY_WEIGHT_BEATS = 8

#: One instruction word: the operand fields as the opcode reads them, the opcode on top.
INSTRUCTION_LAYOUT = data.StructLayout({
    "operand": data.UnionLayout({"set": SET_LAYOUT, "loop": LOOP_LAYOUT, "conv": CONV_LAYOUT}),
    "opcode": unsigned(4),
})

INSTRUCTION_BITS = INSTRUCTION_LAYOUT.size


class _Bits:
    """Where one field of a layout lies in the word, for encoders and decoders in plain Python
    (a :class:`amaranth.lib.data.Const` per word would be a hundred times slower, and the
    performance model decodes every instruction it steps through).

    Parameters
    ----------
    layout : amaranth.lib.data.Layout
    *path : str
        Field names from ``layout`` down to the field.
    """

    def __init__(self, layout, *path):
        offset, shape = 0, layout
        for name in path:
            field = data.Layout.cast(shape)[name]
            offset, shape = offset + field.offset, field.shape
        shape = Shape.cast(shape)
        self.offset, self.width, self.signed = offset, shape.width, shape.signed
        self.mask = (1 << shape.width) - 1

    def get(self, word):
        """The field's value in ``word`` (negative for a signed field with its top bit set)."""
        value = (word >> self.offset) & self.mask
        return value - (self.mask + 1) if self.signed and value >> (self.width - 1) else value

    def put(self, value):
        """``value`` (its low ``width`` bits) at the field's place, the other bits zero."""
        return (value & self.mask) << self.offset


_OPCODE = _Bits(INSTRUCTION_LAYOUT, "opcode")
_SET_REG = _Bits(INSTRUCTION_LAYOUT, "operand", "set", "reg")
_SET_VALUE = _Bits(INSTRUCTION_LAYOUT, "operand", "set", "value")
_LOOP_TARGET = _Bits(INSTRUCTION_LAYOUT, "operand", "loop", "target")
_CONV_DIAGONAL = _Bits(INSTRUCTION_LAYOUT, "operand", "conv", "diagonal")
_CONV_POOL = _Bits(INSTRUCTION_LAYOUT, "operand", "conv", "pool")
_CONV_PACKED = _Bits(INSTRUCTION_LAYOUT, "operand", "conv", "packed")
_CONV_BINARY = _Bits(INSTRUCTION_LAYOUT, "operand", "conv", "binary")
#: ``CONV``'s modes, in the order the printout names them.
_CONV_MODES = (("diagonal", _CONV_DIAGONAL), ("pool", _CONV_POOL), ("packed", _CONV_PACKED),
               ("binary", _CONV_BINARY))


class Opcode(enum.IntEnum):
    END = 0x0      # stop; the accelerator raises `done`
    SET = 0x1      # register <- value
    CONV = 0x2     # engine, multiply-accumulate mode (conv and dense layers)
    POOL = 0x3     # engine, max mode (max pooling)
    FILL = 0x4     # write FILL_VALUE over a 3-D region of the activation buffer
    INPUT = 0x5    # bytes from the host input stream into a 3-D region
    OUTPUT = 0x6   # bytes of a 3-D region to the host output stream
    STAMP = 0x7    # the 32-bit cycle counter to the output stream, little-endian
    LOOP = 0x8     # if LOOP_COUNT != 0: LOOP_COUNT -= 1 and jump to target


class Reg(enum.IntEnum):
    """Engine registers, set by SET. Addresses are in bytes (activations), words
    (weights: one word per beat) or entries (parameters). ``IO_*`` name the registers a
    region instruction reads, aliases of engine registers (``Reg.IO_LEN is Reg.K_W``):
    iterating ``Reg`` yields each register once."""
    # Engine: input feature map walk.
    IN_BASE = 0        # activation address of input element (c=0, y=0, x=0) of the padded map
    IN_PITCH = 1       # bytes between rows
    IN_CSTRIDE = 2     # bytes between channels
    IN_GSTEP = 3       # added to IN_BASE per group (pool: one channel per group)
    K_C = 4            # channels in the reduction walk (conv: C_in; pool: 1)
    K_H = 5            # kernel rows
    K_W = 6            # kernel columns
    IN_ROWSTEP = 7     # bytes between the input rows of consecutive output rows: stride_y * IN_PITCH
    STRIDE_X = 8
    # Engine: output pixels and where the results go.
    OUT_W = 9          # output pixels per row
    NPIX = 10          # output pixels per channel (OUT_H * OUT_W)
    LANES = 11         # output pixels per tile, 1..cols
    TILES = 12         # pixel tiles per group: ceil(NPIX / LANES)
    GROUPS = 13        # conv: output-channel tiles ceil(M / rows); pool: channels
    M = 14             # conv: output channels (rows of the last group beyond M are dropped)
    OUT_BASE = 15      # activation address of output element (c=0, y=0, x=0)
    OUT_PITCH = 16
    OUT_CSTRIDE = 17
    OUT_GSTEP = 18     # added to OUT_BASE per group (conv: rows * OUT_CSTRIDE)
    W_BASE = 19        # weight word of beat 0 of group 0
    W_GSTEP = 20       # weight words per group (conv: K)
    P_BASE = 21        # parameter entry of output channel 0
    QUANT = 22         # requantizer output: zp_out, lo, hi, single (QUANT_LAYOUT)
    FILL_VALUE = 23    # [7:0]
    LOOP_COUNT = 24
    # Region instructions (FILL, INPUT, OUTPUT) walk a 3-D pattern held in the registers of the
    # engine's input walk, which no region instruction runs beside: these names are aliases.
    IO_BASE = IN_BASE
    IO_CHANNELS = K_C
    IO_CSTRIDE = IN_CSTRIDE
    IO_ROWS = K_H
    IO_PITCH = IN_PITCH
    IO_LEN = K_W       # bytes per row


#: The engine counts a zero among which makes a ``CONV`` or ``POOL`` an empty walk: it reads no
#: other register and takes one cycle.
EMPTY_WALK_COUNTS = (Reg.GROUPS, Reg.TILES, Reg.LANES, Reg.K_C, Reg.K_H, Reg.K_W)


def empty_walk(regs):
    """Whether a ``CONV`` or ``POOL`` with these registers (``{Reg: value}``) is an empty walk."""
    return 0 in [regs[reg] for reg in EMPTY_WALK_COUNTS]


#: Count registers of the engine walk (``CONV``, ``POOL``) and of the region instructions.
ENGINE_COUNTS = (Reg.K_C, Reg.K_H, Reg.K_W, Reg.OUT_W, Reg.NPIX, Reg.TILES, Reg.GROUPS, Reg.M)
REGION_COUNTS = (Reg.IO_CHANNELS, Reg.IO_ROWS, Reg.IO_LEN)

#: Most bits a count register has (all of them with an activation buffer above 16 KiB).
COUNT_WIDTH = 16

#: Bits of ``LOOP_COUNT``: up to 65,536 passes of the image loop per start. The board driver
#: starts the program once per image (``LOOP_COUNT = 0``); longer runs are simulations.
LOOP_COUNT_WIDTH = 16


def region_name(reg):
    """The ``IO_*`` name of ``reg`` (``"IO_LEN"`` for ``Reg.K_W``)."""
    return next(name for name, member in Reg.__members__.items() if member is reg and name.startswith("IO_"))


def count_width(config):
    """Bits of every count register (:data:`ENGINE_COUNTS`, :data:`REGION_COUNTS`) on ``config``:
    :attr:`fpganet.config.AcceleratorConfig.count_width`, :data:`COUNT_WIDTH` at most."""
    return config.count_width


def register_overflow(regs, config, opcode):
    """Why the hardware cannot run ``opcode`` with the registers ``regs`` (``{Reg: value}``):
    a message naming the first count that does not fit its register, or None.

    An empty engine walk (:func:`empty_walk`) reads no other count, so it is not checked.
    """
    opcode = Opcode(opcode)
    if opcode in (Opcode.CONV, Opcode.POOL):
        if empty_walk(regs):
            return None
        counts = ENGINE_COUNTS
    elif opcode in (Opcode.FILL, Opcode.INPUT, Opcode.OUTPUT):
        counts = REGION_COUNTS
    elif opcode is Opcode.LOOP:
        if regs[Reg.LOOP_COUNT] >> LOOP_COUNT_WIDTH:
            return (f"LOOP: LOOP_COUNT = {regs[Reg.LOOP_COUNT]:,} is beyond the hardware's "
                    f"{LOOP_COUNT_WIDTH}-bit loop counter (at most {(1 << LOOP_COUNT_WIDTH) - 1:,})")
        return None
    else:
        return None
    width = count_width(config)
    for reg in counts:
        if regs[reg] >> width:
            name = region_name(reg) if counts is REGION_COUNTS else reg.name
            return (f"{opcode.name}: {name} = {regs[reg]:,} is beyond the hardware's {width}-bit "
                    f"counts (at most {(1 << width) - 1:,} with {config.act_buffer_bytes:,} bytes of "
                    f"activation buffer)")
    return None


@dataclass(frozen=True)
class Instruction:
    opcode: Opcode
    reg: Reg = None
    value: int = 0
    target: int = 0
    diagonal: bool = False     # CONV only
    pool: bool = False         # CONV only
    packed: bool = False       # CONV only
    binary: bool = False       # CONV only

    def __str__(self):
        if self.opcode is Opcode.SET:
            return f"SET {self.reg.name} {self.value}"
        if self.opcode is Opcode.LOOP:
            return f"LOOP {self.target}"
        modes = [name for name, _ in _CONV_MODES if getattr(self, name)]
        return " ".join([self.opcode.name, *modes])


def encode(instruction):
    """The 64-bit word of an :class:`Instruction` (:data:`INSTRUCTION_LAYOUT`)."""
    word = _OPCODE.put(int(instruction.opcode))
    if instruction.opcode is Opcode.SET:
        width = _SET_VALUE.width
        if not 0 <= instruction.value < 1 << width and not -(1 << (width - 1)) <= instruction.value < 0:
            raise ValueError(f"SET {instruction.reg.name}: value {instruction.value} does not fit {width} bits")
        word |= _SET_REG.put(int(instruction.reg)) | _SET_VALUE.put(instruction.value)
    elif instruction.opcode is Opcode.LOOP:
        if not 0 <= instruction.target < 1 << _LOOP_TARGET.width:
            raise ValueError(f"LOOP target {instruction.target} does not fit {_LOOP_TARGET.width} bits")
        word |= _LOOP_TARGET.put(instruction.target)
    else:
        for name, bits in _CONV_MODES:
            if getattr(instruction, name):
                if instruction.opcode is not Opcode.CONV:
                    raise ValueError(f"{instruction.opcode.name} has no {name} mode (CONV only)")
                word |= bits.put(1)
    return word


def decode(word):
    """The :class:`Instruction` of a 64-bit word (register values come back unsigned)."""
    word = int(word)
    opcode = Opcode(word >> _OPCODE.offset)
    if opcode is Opcode.SET:
        return Instruction(opcode, Reg(_SET_REG.get(word)), _SET_VALUE.get(word))
    if opcode is Opcode.LOOP:
        return Instruction(opcode, target=_LOOP_TARGET.get(word))
    if opcode is Opcode.CONV:
        return Instruction(opcode, **{name: bool(bits.get(word)) for name, bits in _CONV_MODES})
    return Instruction(opcode)


class HostSpace(enum.IntEnum):
    """Memories the host write port (and the simulation boot loader) can write."""
    PROGRAM = 0     # 64-bit instruction words
    WEIGHTS = 1     # words of `rows` signed bytes, byte i = array row i
    PARAMS = 2      # 64-bit parameter entries (below)
    ACTIVATIONS = 3  # bytes


#: Bytes STAMP sends: the 32-bit cycle counter, little-endian.
STAMP_BYTES = 4


def host_word_bytes(space, weight_word_bytes):
    """Bytes of one word the host writes into memory ``space``: an instruction, a
    parameter entry, a weight word (``weight_word_bytes``: one byte per array row at int8)
    or an activation byte. The host write port takes it zero-extended."""
    return {HostSpace.PROGRAM: INSTRUCTION_BITS // 8, HostSpace.WEIGHTS: weight_word_bytes,
            HostSpace.PARAMS: PARAM_BITS // 8, HostSpace.ACTIVATIONS: 1}[HostSpace(space)]


def host_memory_words(space, hardware):
    """Words in memory ``space`` of ``hardware``: an :class:`~fpganet.config.AcceleratorConfig`
    or a board's :class:`~fpganet.link.protocol.DeviceInfo` (both have ``program_words``,
    ``weight_buffer_bytes``, ``weight_word_bytes``, ``bias_buffer_words`` and
    ``act_buffer_bytes``)."""
    return {HostSpace.PROGRAM: hardware.program_words,
            HostSpace.WEIGHTS: hardware.weight_buffer_bytes // hardware.weight_word_bytes,
            HostSpace.PARAMS: hardware.bias_buffer_words,
            HostSpace.ACTIVATIONS: hardware.act_buffer_bytes}[HostSpace(space)]


#: The ``QUANT`` register: the requantizer's output zero point and clamp bounds (signed
#: bytes) and, in the ``tflite`` requantization mode, TFLite's single rounding.
QUANT_LAYOUT = data.StructLayout({
    "zp_out": signed(8),
    "lo": signed(8),
    "hi": signed(8),
    "single": unsigned(1),
})

_QUANT = {name: _Bits(QUANT_LAYOUT, name) for name, _ in QUANT_LAYOUT}


def quant_bits(mode):
    """Bits of ``QUANT`` the hardware keeps in requantization mode ``mode``: ``single`` only
    in the ``tflite`` mode."""
    return QUANT_LAYOUT.size if mode == "tflite" else QUANT_LAYOUT["single"].offset


def pack_quant(zp_out, lo, hi, single=False):
    """The ``QUANT`` value (:data:`QUANT_LAYOUT`)."""
    fields = {"zp_out": zp_out, "lo": lo, "hi": hi, "single": int(single)}
    return sum(_QUANT[name].put(value) for name, value in fields.items())


def unpack_quant(value):
    """``(zp_out, lo, hi, single)`` of a ``QUANT`` value."""
    zp_out, lo, hi, single = (_QUANT[name].get(value) for name in ("zp_out", "lo", "hi", "single"))
    return zp_out, lo, hi, bool(single)


#: Bits of one parameter entry as the host writes it.
PARAM_BITS = 64

#: Requantization arithmetics (``AcceleratorConfig.requant_mode``, docs/reference/numerics.md), each
#: with its parameter entry of one output channel (:data:`PARAM_LAYOUTS`).
REQUANT_MODES = ("fpganet", "tflite")

#: The parameter entry of one output channel for each requantization mode; the hardware
#: keeps only the fields.
#:
#: ``fpganet``: ``mult`` in [2**14, 2**15) and ``shift`` (a right shift) in 1..62.
#: ``tflite``: TFLite's multiplier ``M`` in [2**30, 2**31) stored as ``mult = M - 2**30``
#: (its top bit is always set), ``shift`` TFLite's exponent in -31..30 (left when
#: positive), and ``bias`` in 28 bits so that the entry stays one 64-bit word.
PARAM_LAYOUTS = {
    "fpganet": data.FlexibleLayout(PARAM_BITS, {
        "bias": data.Field(signed(32), 0),
        "mult": data.Field(unsigned(15), 32),
        "shift": data.Field(unsigned(6), 48),
    }),
    "tflite": data.FlexibleLayout(PARAM_BITS, {
        "bias": data.Field(signed(28), 0),
        "mult": data.Field(unsigned(30), 28),
        "shift": data.Field(signed(6), 58),
    }),
}

_PARAM = {mode: {name: _Bits(layout, name) for name, _ in layout}
          for mode, layout in PARAM_LAYOUTS.items()}

#: TFLite's multipliers have their top bit, 2**30, set; the entry stores the bits below.
TFLITE_MULT_TOP = 1 << 30


def param_ranges(mode):
    """``{field: (lo, hi)}``: what :func:`pack_param` takes in requantization mode ``mode``
    (``mult`` the whole multiplier)."""
    bias_bits = PARAM_LAYOUTS[mode]["bias"].shape.width
    bias = (-(1 << (bias_bits - 1)), (1 << (bias_bits - 1)) - 1)
    if mode == "fpganet":
        return {"bias": bias, "mult": (1 << 14, (1 << 15) - 1), "shift": (1, 62)}
    return {"bias": bias, "mult": (TFLITE_MULT_TOP, 2 * TFLITE_MULT_TOP - 1), "shift": (-31, 30)}


def pack_param(bias, mult, shift, mode="fpganet"):
    """The 64-bit parameter entry of one output channel (:data:`PARAM_LAYOUTS`)."""
    ranges = param_ranges(mode)
    for name, value in (("bias", bias), ("mult", mult), ("shift", shift)):
        lo, hi = ranges[name]
        if not lo <= value <= hi:
            raise ValueError(f"{name} {value} outside the {mode} parameter entry's {lo}..{hi}")
    if mode == "tflite":
        mult -= TFLITE_MULT_TOP
    fields = _PARAM[mode]
    return fields["bias"].put(bias) | fields["mult"].put(mult) | fields["shift"].put(shift)


def unpack_param(word, mode="fpganet"):
    """``(bias, mult, shift)`` of a 64-bit parameter entry (``mult`` the whole multiplier)."""
    word = int(word)
    bias, mult, shift = (_PARAM[mode][name].get(word) for name in ("bias", "mult", "shift"))
    return bias, mult + (TFLITE_MULT_TOP if mode == "tflite" else 0), shift


def pack_nibbles(words):
    """int8 ``[words, bytes]`` of one packed weight block (its beats in order) as ``CONV packed``
    reads it: ``[ceil(words / 2), bytes]``, word ``w // 2`` holding beat ``w``'s weights in
    nibble ``w % 2`` of each byte (an odd block's last high nibbles 0). Every weight must lie
    in the signed range of :data:`PACKED_WEIGHT_BITS` bits."""
    words = np.asarray(words, dtype=np.int8)
    low, bits = -(1 << (PACKED_WEIGHT_BITS - 1)), PACKED_WEIGHT_BITS
    if words.size and not (low <= words.min() and words.max() < -low):
        raise ValueError(f"packed weights must lie in {low}..{-low - 1}, not "
                         f"{int(words.min())}..{int(words.max())}")
    nibbles = np.zeros((len(words) + 1) // 2 * 2 * words.shape[1], dtype=np.uint8)
    nibbles[:words.size] = words.reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    nibbles = nibbles.reshape(-1, 2, words.shape[1])
    return (nibbles[:, 0] | nibbles[:, 1] << bits).view(np.int8)


def unpack_nibbles(words):
    """The inverse of :func:`pack_nibbles`: int8 ``[2 * len(words), bytes]``, each nibble
    sign-extended."""
    bits = PACKED_WEIGHT_BITS
    raw = np.asarray(words, dtype=np.int8).view(np.uint8)
    both = np.stack([raw & ((1 << bits) - 1), raw >> bits], axis=1).reshape(-1, raw.shape[1])
    # The nibble in the top of a byte, then an arithmetic shift back down: its sign extended.
    return (both << (8 - bits)).view(np.int8) >> (8 - bits)


def pack_signs(words):
    """int8 ``[words, bytes]`` of one binary weight block (its beats in order, every weight
    -1 or +1) as ``CONV binary`` reads it: ``[ceil(words / 8), bytes]``, word ``w // 8`` holding
    beat ``w``'s weights in bit ``w % 8`` of each byte, 1 for +1 (a short block's last bits 0)."""
    words = np.asarray(words, dtype=np.int8)
    if words.size and not np.all(np.abs(words.astype(np.int16)) == 1):
        others = sorted({int(w) for w in words.flat} - {-1, 1})
        raise ValueError(f"binary weights must be -1 or +1, not {others[:3]}")
    beats = BINARY_WEIGHT_BEATS
    bits = np.zeros(((len(words) + beats - 1) // beats * beats, words.shape[1]), dtype=np.uint8)
    bits[:len(words)] = words > 0
    bits = bits.reshape(-1, beats, words.shape[1]) << np.arange(beats, dtype=np.uint8)[:, None]
    return np.bitwise_or.reduce(bits, axis=1).view(np.int8)


def unpack_signs(words):
    """The inverse of :func:`pack_signs`: int8 ``[8 * len(words), bytes]`` of -1 and +1."""
    raw = np.asarray(words, dtype=np.int8).view(np.uint8)
    bits = (raw[:, None, :] >> np.arange(BINARY_WEIGHT_BEATS, dtype=np.uint8)[:, None]) & 1
    return (2 * bits.reshape(-1, raw.shape[1]).astype(np.int8) - 1).astype(np.int8)
