"""Functional simulator of the instruction set: the ISA's semantics in numpy.

It runs a program on numpy copies of the accelerator's memories, exactly as
docs/reference/architecture.md ("Instruction set") defines it, so that the compiler's
programs can be checked against the golden model without RTL, and the RTL
against the program without the compiler. Timing is not modelled here (see
``fpganet.perf``).
"""

from dataclasses import dataclass, field

import numpy as np

from fpganet.config import AcceleratorConfig
from fpganet.isa import (BINARY_WEIGHT_BEATS, STAMP_BYTES, Opcode, Reg, decode, quant_bits,
                         register_overflow, unpack_nibbles, unpack_param, unpack_quant,
                         unpack_signs)
from fpganet.quantize.fixed_point import rescale_mode

__all__ = ["Machine", "IsaError", "engine_lanes", "engine_read_addresses", "region_addresses"]

MAX_STEPS = 50_000_000



def _pooled_writes(y, targets, valid):
    """``CONV pool``: per tile, one byte per pair of live rows ``2p, 2p + 1``, the maximum of
    both rows' bytes over the tile's valid lanes, written at row ``2p + 1``'s address of the
    tile's last lane if that lane is valid. ``y`` and ``targets`` are ``[T, live rows, L]``;
    returns them ``[T, pairs, 1]`` with the write mask."""
    tiles, live, lanes = y.shape
    pairs = live // 2
    values = np.where(valid[:, None, :], y, -128)[:, :2 * pairs].reshape(tiles, pairs, 2 * lanes)
    mask = np.broadcast_to(valid[:, None, -1:], (tiles, pairs, 1))
    return (values.max(axis=2)[:, :, None].astype(np.int8),
            targets[:, 1:2 * pairs:2, -1:], mask)

class IsaError(RuntimeError):
    """A program that breaks the ISA's rules (a compiler bug, not bad user input)."""


def _signed8(value):
    value &= 0xFF
    return value - 256 if value >= 128 else value


def engine_lanes(regs, tile):
    """Per-lane ``(valid, in_off, out_off)`` arrays of pixel tile ``tile``."""
    lanes = regs[Reg.LANES]
    n = tile * lanes + np.arange(lanes)
    valid = n < regs[Reg.NPIX]
    oy, ox = np.divmod(n, regs[Reg.OUT_W])
    in_off = oy * regs[Reg.IN_ROWSTEP] + ox * regs[Reg.STRIDE_X]
    out_off = oy * regs[Reg.OUT_PITCH] + ox
    return valid, in_off, out_off


def engine_k_offsets(regs):
    """Offset of each beat k of the reduction walk, kx fastest: ``c*IN_CSTRIDE + ky*IN_PITCH + kx``."""
    c, ky, kx = np.meshgrid(np.arange(regs[Reg.K_C]), np.arange(regs[Reg.K_H]),
                            np.arange(regs[Reg.K_W]), indexing="ij")
    return (c * regs[Reg.IN_CSTRIDE] + ky * regs[Reg.IN_PITCH] + kx).reshape(-1)


def engine_read_addresses(regs, group, act_bytes):
    """Activation addresses ``[TILES, K, LANES]`` the engine reads in ``group``, and the valid mask ``[TILES, LANES]``."""
    tiles = np.arange(regs[Reg.TILES])
    lanes = regs[Reg.LANES]
    n = tiles[:, None] * lanes + np.arange(lanes)[None, :]
    valid = n < regs[Reg.NPIX]
    oy, ox = np.divmod(n, regs[Reg.OUT_W])
    in_off = oy * regs[Reg.IN_ROWSTEP] + ox * regs[Reg.STRIDE_X]
    base = regs[Reg.IN_BASE] + group * regs[Reg.IN_GSTEP]
    addresses = base + engine_k_offsets(regs)[None, :, None] + in_off[:, None, :]
    return addresses % act_bytes, valid


def region_addresses(regs, act_bytes):
    """Byte addresses of the FILL/INPUT/OUTPUT region, in channel, row, byte order."""
    c, r, x = np.meshgrid(np.arange(regs[Reg.IO_CHANNELS]), np.arange(regs[Reg.IO_ROWS]),
                          np.arange(regs[Reg.IO_LEN]), indexing="ij")
    addresses = regs[Reg.IO_BASE] + c * regs[Reg.IO_CSTRIDE] + r * regs[Reg.IO_PITCH] + x
    return addresses.reshape(-1) % act_bytes


@dataclass
class Machine:
    """The accelerator's memories and registers, and a functional interpreter of its programs.

    Memories: ``program`` (uint64 words), ``weights`` (int8 ``[words, weight_word_bytes]``:
    byte ``i`` row ``i``'s, or with ``pair_products`` bytes ``2i`` and ``2i + 1`` row ``i``'s
    for an even channel and the next), ``params`` (uint64 entries), ``act`` (int8 bytes).
    """

    config: AcceleratorConfig
    program: np.ndarray = None
    weights: np.ndarray = None
    params: np.ndarray = None
    act: np.ndarray = None
    regs: dict = field(default_factory=lambda: {reg: 0 for reg in Reg})

    def __post_init__(self):
        config = self.config
        if self.program is None:
            self.program = np.zeros(config.program_words, dtype=np.uint64)
        if self.weights is None:
            self.weights = np.zeros((config.weight_buffer_words, config.weight_word_bytes), dtype=np.int8)
        if self.params is None:
            self.params = np.zeros(config.bias_buffer_words, dtype=np.uint64)
        if self.act is None:
            self.act = np.zeros(config.act_buffer_bytes, dtype=np.int8)

    def run(self, input_bytes=b"", max_steps=MAX_STEPS):
        """Run from instruction 0 to END; return the bytes sent to the output stream.

        ``input_bytes`` feeds INPUT. STAMP sends ``STAMP_BYTES`` zero bytes (no timing here).
        """
        stream_in = np.frombuffer(bytes(input_bytes), dtype=np.int8)
        consumed = 0
        out = bytearray()
        pc = 0
        for _ in range(max_steps):
            if pc >= len(self.program):
                raise IsaError(f"program counter {pc} ran off the program memory")
            instruction = decode(int(self.program[pc]))
            pc += 1
            op = instruction.opcode
            # A count wider than its register would run modulo its width on the hardware.
            message = register_overflow(self.regs, self.config, op)
            if message:
                raise IsaError(message)
            if op is Opcode.END:
                if consumed != len(stream_in):
                    raise IsaError(f"program ended with {len(stream_in) - consumed} input bytes unread")
                return bytes(out)
            if op is Opcode.SET:
                self.regs[instruction.reg] = instruction.value
            elif op is Opcode.LOOP:
                if self.regs[Reg.LOOP_COUNT]:
                    self.regs[Reg.LOOP_COUNT] -= 1
                    pc = instruction.target
            elif op is Opcode.CONV:
                if instruction.diagonal and not self.config.diagonal_weights:
                    raise IsaError(f"CONV diagonal at {pc - 1}: the {self.config.name} configuration "
                                   f"has no diagonal weight mode (diagonal_weights)")
                if instruction.pool and not self.config.fused_max_pool:
                    raise IsaError(f"CONV pool at {pc - 1}: the {self.config.name} configuration "
                                   f"has no pooled writes (fused_max_pool)")
                if instruction.packed and not self.config.packed_weights:
                    raise IsaError(f"CONV packed at {pc - 1}: the {self.config.name} configuration "
                                   f"has no packed weights (packed_weights)")
                if instruction.binary and not self.config.binary_weights:
                    raise IsaError(f"CONV binary at {pc - 1}: the {self.config.name} configuration "
                                   f"has no binary weights (binary_weights)")
                if instruction.binary and instruction.packed:
                    raise IsaError(f"CONV at {pc - 1}: packed and binary at once")
                fields = BINARY_WEIGHT_BEATS if instruction.binary else 2 if instruction.packed else 1
                self._conv(instruction.diagonal, pc - 1, instruction.pool, fields)
            elif op is Opcode.POOL:
                self._pool()
            elif op is Opcode.FILL:
                self.act[region_addresses(self.regs, len(self.act))] = _signed8(self.regs[Reg.FILL_VALUE])
            elif op is Opcode.INPUT:
                addresses = region_addresses(self.regs, len(self.act))
                if consumed + len(addresses) > len(stream_in):
                    raise IsaError(f"INPUT wants {len(addresses)} bytes, {len(stream_in) - consumed} left")
                self.act[addresses] = stream_in[consumed:consumed + len(addresses)]
                consumed += len(addresses)
            elif op is Opcode.OUTPUT:
                out += self.act[region_addresses(self.regs, len(self.act))].tobytes()
            elif op is Opcode.STAMP:
                out += bytes(STAMP_BYTES)
        raise IsaError(f"program did not reach END in {max_steps} instructions")

    def _quant(self):
        """``(zp_out, lo, hi, single)`` of ``QUANT``, of the bits the hardware keeps."""
        return unpack_quant(self.regs[Reg.QUANT] & ((1 << quant_bits(self.config.requant_mode)) - 1))

    def _check_disjoint(self, reads, writes, what):
        if np.intersect1d(reads, writes).size:
            raise IsaError(f"{what} writes activation bytes it also reads")

    def _check_order(self, reads, read_tiles, writes, write_tiles, what):
        """Raise unless each byte the instruction writes is read, if at all, no later than in the
        tile that writes it. The engine reads a tile's bytes before it writes the tile's results,
        but reads the next tiles while it is still writing, so a byte read after its tile's write
        would hold the old or the new value depending on timing. (A byte read and written in the
        same tile is how a residual add runs in place.)"""
        common = np.intersect1d(reads, writes)
        if not common.size:
            return
        read, written = np.isin(reads, common), np.isin(writes, common)
        last_read = np.full(common.size, -1)
        np.maximum.at(last_read, np.searchsorted(common, reads[read]), read_tiles[read])
        first_write = np.full(common.size, np.iinfo(np.int64).max)
        np.minimum.at(first_write, np.searchsorted(common, writes[written]), write_tiles[written])
        if np.any(last_read > first_write):
            raise IsaError(f"{what} reads activation bytes after a tile before has written them")

    def _conv(self, diagonal=False, pc=0, pool=False, fields=1):
        regs, rows, pair = self.regs, self.config.rows, self.config.products_per_pe
        zp_out, lo, hi, single = self._quant()
        k_total = regs[Reg.K_C] * regs[Reg.K_H] * regs[Reg.K_W]
        beats = np.arange(k_total)
        # Step k of the walk is channel c at kernel position p; with pair products channels
        # 2c' and 2c' + 1 share word c' (of each position), in byte halves 0 and 1 of a row.
        positions = regs[Reg.K_H] * regs[Reg.K_W]
        channel, position = np.divmod(beats, positions)
        half = channel % pair
        if diagonal:
            # One word per kernel position for every channel c; row i keeps its byte at c == i.
            offsets, keep = position, channel[:, None] == np.arange(rows)
        else:
            offsets, keep = channel // pair * positions + position, True
        if pair == 2 and regs[Reg.K_C] % 2:
            self._check_unread_channel(diagonal, positions, pc, fields)
        # Packed (binary): word offset // 2 (// 8), its bytes' nibble offset % 2 (bit % 8).
        offsets, slot = np.divmod(offsets, fields)
        act_bytes = len(self.act)
        tiles = regs[Reg.TILES]
        reads, read_tiles, writes, write_tiles, values = [], [], [], [], []
        # Every read sees the activations as they were before the instruction (_check_order).
        for group in range(regs[Reg.GROUPS]):
            addresses, valid = engine_read_addresses(regs, group, act_bytes)
            b = self.act[addresses].astype(np.int64)                                  # [T, K, L]
            words = (regs[Reg.W_BASE] + group * regs[Reg.W_GSTEP] + offsets) % len(self.weights)
            a = self._weight_bytes(words, slot, fields).reshape(k_total, rows, pair)[beats, :, half]
            a = np.where(keep, a, 0).astype(np.int64)
            if not self.config.runs_weights(a):
                raise IsaError(f"CONV at {pc}: weight {int(a[np.abs(a) > 1][0])} outside -1..1, "
                               f"which this configuration's ternary pairs cannot multiply "
                               f"(ternary_pairs)")
            acc = np.einsum("ki,tkj->tij", a, b)                                      # [T, rows, L]
            # The pooled writes: every group has the parameters of rows 0..rows-1.
            channels = (0 if pool else group * rows) + np.arange(rows)
            live = channels < regs[Reg.M]
            if not live.any():
                continue                # a group past M: its reads and sums change nothing
            entries = self.params[(regs[Reg.P_BASE] + channels[live]) % len(self.params)]
            mode = self.config.requant_mode
            bias, mult, shift = (np.array(field, dtype=np.int64)[None, :, None] for field in
                                 zip(*(unpack_param(entry, mode) for entry in entries)))
            y = zp_out + rescale_mode(acc[:, live, :] + bias, mult, shift, mode, single)
            y = np.clip(y, lo, hi).astype(np.int8)
            out_base = regs[Reg.OUT_BASE] + group * regs[Reg.OUT_GSTEP]
            out_off = np.stack([engine_lanes(regs, t)[2] for t in range(tiles)])       # [T, L]
            targets = (out_base + np.arange(rows)[live][None, :, None] * regs[Reg.OUT_CSTRIDE]
                       + out_off[:, None, :]) % act_bytes                                 # [T, rows, L]
            mask = np.broadcast_to(valid[:, None, :], targets.shape)
            if pool:
                y, targets, mask = _pooled_writes(y, targets, valid)
            tile_of = group * tiles + np.arange(tiles)
            read_mask = np.broadcast_to(valid[:, None, :], addresses.shape)
            reads.append(addresses[read_mask])
            read_tiles.append(np.broadcast_to(tile_of[:, None, None], addresses.shape)[read_mask])
            writes.append(targets[mask])
            write_tiles.append(np.broadcast_to(tile_of[:, None, None], targets.shape)[mask])
            values.append(y[mask])
        if writes:
            self._check_order(np.concatenate(reads), np.concatenate(read_tiles),
                              np.concatenate(writes), np.concatenate(write_tiles), "CONV")
            self.act[np.concatenate(writes)] = np.concatenate(values)

    def _weight_bytes(self, words, slot, fields=1):
        """The weight bytes of ``words`` (``[beats, weight_word_bytes]``), the word of each beat
        holding ``fields`` beats' weights: packed (2), each byte's nibble ``slot[beat]``,
        sign-extended; binary (8), its bit ``slot[beat]`` as -1 or +1."""
        raw = self.weights[words]
        if fields == 1:
            return raw
        unpack = unpack_signs if fields == BINARY_WEIGHT_BEATS else unpack_nibbles
        every = unpack(raw).reshape(len(words), fields, -1)
        return every[np.arange(len(words)), slot]

    def _check_unread_channel(self, diagonal, positions, pc, fields=1):
        """With pair products and an odd ``K_C``, the last pair's odd channel is past ``K_C``: its
        lanes do not read (with scheduled bank access they read the byte ``IN_CSTRIDE`` past
        channel ``K_C - 1``), and the array multiplies that stale or unrelated byte by the weight
        bytes there, which must be zero for the result not to depend on it."""
        regs, rows = self.regs, self.config.rows
        k_c = regs[Reg.K_C]
        first = 0 if diagonal else k_c // 2 * positions
        offsets = first + np.arange(positions)
        offsets, slot = np.divmod(offsets, fields)
        for group in range(regs[Reg.GROUPS]):
            words = (regs[Reg.W_BASE] + group * regs[Reg.W_GSTEP] + offsets) % len(self.weights)
            high = self._weight_bytes(words, slot, fields).reshape(positions, rows, 2)[:, :, 1]
            # In the diagonal mode only row K_C keeps its high byte in that beat.
            high = high[:, k_c:k_c + 1] if diagonal else high
            if high.any():
                raise IsaError(f"CONV at {pc}: the weight bytes of channel K_C = {k_c} (the odd half "
                               f"of the last channel pair, past K_C) are not zero")

    def _pool(self):
        regs = self.regs
        act_bytes = len(self.act)
        for group in range(regs[Reg.GROUPS]):
            addresses, valid = engine_read_addresses(regs, group, act_bytes)
            y = self.act[addresses].max(axis=1)                                       # [T, L]
            out_base = regs[Reg.OUT_BASE] + group * regs[Reg.OUT_GSTEP]
            out_off = np.stack([engine_lanes(regs, t)[2] for t in range(regs[Reg.TILES])])
            targets = (out_base + out_off) % act_bytes
            self._check_disjoint(addresses[np.broadcast_to(valid[:, None, :], addresses.shape)],
                                 targets[valid], "POOL")
            self.act[targets[valid]] = y[valid]
