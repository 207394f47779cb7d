"""Performance model of the accelerator: the exact cycle count of every instruction.

The cycles come from the program alone (register values, ``LOOP`` iterations,
and the bank conflicts of the engine's activation reads and result writes,
which depend on addresses only), assuming the input stream is always valid
and the output stream always ready. The tests hold the RTL
(:class:`fpganet.hdl.accelerator.Accelerator`) to it exactly, instruction by
instruction (``STAMP``) and in total (the ``cycles`` port).

Cycles per instruction (``N`` bytes of a region, ``AW = act_addr_width``):

====================  =====================================================
``SET, LOOP, END``    1 (a taken ``LOOP``: 2 with ``config.registered_decode``)
``STAMP``             5
``FILL, INPUT``       ``N + 2 + RS`` (1 when the region is empty; ``RS``:
                      ``config.region_start_latency``, 1, or 0 with
                      ``config.registered_decode``); a ``FILL`` with
                      ``config.registered_writes``: :func:`fill_runs` ``+ 2``
``OUTPUT``            ``N + 2 + RS + config.output_latency`` (1 when empty)
``CONV, POOL``        :func:`engine_cycles` (1 when the walk is empty)
====================  =====================================================

The engine (``CONV``/``POOL``) is a pipeline whose timing follows from four
numbers per tile ``t`` (tiles in ``(g, t)`` order):

* ``B_t``, gather cycles: the sum over the tile's beats of
  ``max(1, most valid lanes in one bank)``; all beats of a tile shift the lane
  addresses by a common offset, so this is ``K * max(1, most valid lanes whose
  in_off are congruent modulo act_banks)``; with ``config.pair_products`` a beat's reads are
  each valid lane's two (``in_off`` and ``in_off + IN_CSTRIDE``) in the ``K_C // 2`` pairs
  of channels of each kernel position and its one in the odd ``K_C``'s last channel, or with
  ``config.bank_access`` ``"scheduled"`` two in that last channel too when ``K_C > 1`` (one
  bank schedule serves the tile): :func:`pair_beats`. Scheduled, a pair beat
  costs ``max(1, most valid lanes in one superbank)`` where :func:`superbank_pairs`, else
  two passes of ``max(1, most valid lanes in one bank)``;
* ``W_t``, write cycles: the sum over its result rows (``rows`` for ``CONV``, 1
  for ``POOL``) and over each row's ``ceil(LANES / requant_lanes)`` lane groups of
  ``max(1, most written lanes of the group in one bank)`` (written: valid pixel,
  output channel ``< M``); with ``requant_lanes == 1``, ``rows * LANES``;
* ``LAT``: the array's latency ``config.array_latency`` (``cols + 2``, or 3 with
  ``broadcast_operands``, one more with ``registered_results``; ``CONV``) or the pool
  unit's ``config.pool_latency`` (2, 1 with ``registered_operands``);
* ``LANES``: the lane walker prepares a tile in ``LANES`` cycles, starting in the
  cycle after the previous tile's first beat entered the gather stage; with
  ``bank_access`` ``"scheduled"`` it holds while the front end is stalled, arbitrated it
  runs on.

With ``E`` the cycle a tile's first beat enters the gather stage in stall-free
time, ``P`` the cycle its last beat is offered, ``A`` the cycle that beat is
taken (the array or pool unit holds it until the previous tile's last result
row has been taken), ``X`` the cycle its last row is taken, and ``D`` the
cycles the front end has been stalled so far::

    E_0 = config.first_beat_cycle(LANES)   (LANES + 3, and 1 more with registered_operands:
                                           the first walk from the cycle after start)
    P_t = E_t + B_t + D + OL - 1           (OL: config.operand_latency, 1 or 3)
    A_t = max(P_t, X_{t-1} + 1);   D += A_t - P_t
    X_t = A_t + LAT + W_t - 1
    E_{t+1} = E_t + max(B_t, LANES + 1)    (scheduled bank access; arbitrated see below)
    cycles = X_last + WL + 1                (WL: config.write_latency, 4 to 7)

With arbitrated bank access the walker does not hold on the stalls, the ``A_t - P_t``
cycles in which the front end is held at its (stall-free) time ``T_t = E_t + B_t + OL``; so
``E_{t+1} = max(E_t + B_t, R)``, with ``R`` the front end's time when the walk that began at
``E_t`` has had ``LANES + 1`` cycles: the stalls of tiles ``t - 1`` and ``t`` that fall
between count towards them (:func:`_walker_ready`).

With ``registered_operands`` the window generator has a skid register behind its offer: the
front end runs on while the last beat waits, and freezes only from the cycle after the next
tile's first beat has left the output stage, so the stall it adds is smaller::

    Q_{t+1} = E_{t+1} + B_{t+1} / K + D + OL - 1    (the cycle that beat is offered, unstalled)
    D += max(0, A_t - Q_{t+1} + 1)                 (instead of A_t - P_t)

With ``config.result_queue_rows`` the array's rows go through a queue to the writer, and
``X`` is the cycle the queue takes a tile's last row; the rows' writes follow row by row
(:class:`_ResultQueue`), and the instruction ends with the last row's write.

With ``config.single_port_activations`` every byte the writer writes takes a cycle of its
own, the whole engine held (:func:`engine_writes` cycles more).

For a conv layer whose reads and writes are conflict-free this is, per tile,
``max(K, LANES + 1, LAT + rows * LANES / requant_lanes)`` cycles: LeNet-5's conv1
on 2x8 takes ``max(25, 9, 10 + 16) = 26`` cycles per 25-beat tile (96 %).
"""

from dataclasses import dataclass, field

import numpy as np

from fpganet.config import AcceleratorConfig
from fpganet.isa import Opcode, Reg, decode, empty_walk, register_overflow

__all__ = ["ProgramError", "InstructionCycles", "ProgramCycles", "check_registers", "engine_beats",
           "engine_cycles", "engine_writes", "gather_cycles", "pair_beats", "superbank_pairs",
           "engine_tile_costs", "fill_runs", "instruction_cycles", "program_cycles", "layer_summaries",
           "STAMP_CYCLES"]

STAMP_CYCLES = 5
MAX_STEPS = 50_000_000


class ProgramError(ValueError):
    """A program outside what the hardware runs (a count too large, ``LANES`` out of range...)."""


def check_registers(regs, config, opcode):
    """Raise :class:`ProgramError` if ``opcode`` with these registers is outside the hardware's range:
    a count wider than its register (:func:`fpganet.isa.count_width`, ``LOOP_COUNT`` at a
    ``LOOP``), ``LANES`` outside ``1..cols``."""
    opcode = Opcode(opcode)
    message = register_overflow(regs, config, opcode)
    if message:
        raise ProgramError(message)
    if opcode in (Opcode.CONV, Opcode.POOL) and not empty_walk(regs):
        if not 1 <= regs[Reg.LANES] <= config.cols:
            raise ProgramError(f"{opcode.name}: LANES = {regs[Reg.LANES]} outside 1..{config.cols}")


def _max_per_bank(banks, mask, n_banks):
    """``max(1, most masked entries in one bank)`` along the last axis."""
    worst = np.zeros(banks.shape[:-1], dtype=np.int64)
    for b in range(n_banks):
        worst = np.maximum(worst, ((banks == b) & mask).sum(axis=-1))
    return np.maximum(worst, 1)


def engine_beats(regs, config):
    """Beats of one tile: ``K_C * K_H * K_W``, or with ``config.pair_products``
    ``ceil(K_C / 2) * K_H * K_W`` (two channels a beat)."""
    pairs = config.products_per_pe
    return -(-regs[Reg.K_C] // pairs) * regs[Reg.K_H] * regs[Reg.K_W]


def _tile_lanes(regs):
    """``(valid, oy, ox)`` of every tile's lanes, arrays ``[TILES, LANES]``."""
    lanes = regs[Reg.LANES]
    n = np.arange(regs[Reg.TILES])[:, None] * lanes + np.arange(lanes)[None, :]
    oy, ox = np.divmod(n, regs[Reg.OUT_W])
    return n < regs[Reg.NPIX], oy, ox


def pair_beats(regs, config):
    """``(two, one)``: the beats of a tile whose lanes read two bytes, channels ``c`` and
    ``c + 1`` (``IN_CSTRIDE`` on), and those whose lanes read one. Without pair products, or
    with ``K_C`` 1, every beat reads one; with them the ``K_C // 2`` channel pairs of each
    kernel position read two, and an odd ``K_C``'s last channel one, or with
    ``config.bank_access`` ``"scheduled"`` two as well (the window's one bank schedule a tile: the byte
    past channel ``K_C - 1`` is read and meets weights of 0)."""
    beats = engine_beats(regs, config)
    k_c = regs[Reg.K_C]
    if not config.pair_products or k_c == 1:
        return 0, beats
    if config.bank_access == "scheduled":
        return beats, 0
    positions = regs[Reg.K_H] * regs[Reg.K_W]
    return k_c // 2 * positions, k_c % 2 * positions


def gather_cycles(regs, config):
    """``B``: the window's gather cycles of each tile (``[TILES]``, the same in every group)."""
    n_banks = config.act_banks
    valid, oy, ox = _tile_lanes(regs)
    in_off = oy * regs[Reg.IN_ROWSTEP] + ox * regs[Reg.STRIDE_X]
    two, one = pair_beats(regs, config)
    single = _max_per_bank(in_off % n_banks, valid, n_banks)
    cycles = one * single
    if not two:
        return cycles
    if config.bank_access == "arbitrated":
        both = np.concatenate([in_off, in_off + regs[Reg.IN_CSTRIDE]], axis=1) % n_banks
        return cycles + two * _max_per_bank(both, np.concatenate([valid, valid], axis=1), n_banks)
    if superbank_pairs(regs, config):
        half = n_banks // 2
        return cycles + two * _max_per_bank(in_off % half, valid, half)
    return cycles + two * 2 * single


def superbank_pairs(regs, config):
    """With pair products and scheduled bank access, a lane's two reads of a beat take one
    cycle when they fall in the two banks of one superbank, ``b`` and ``b + act_banks / 2``:
    when ``IN_CSTRIDE % act_banks == act_banks / 2`` (the window's lanes are then scheduled
    by superbank, ``address % (act_banks / 2)``). Otherwise a pair beat reads the lanes'
    first channels, then, in as many cycles again, their second ones."""
    n_banks = config.act_banks
    return n_banks >= 2 and regs[Reg.IN_CSTRIDE] % n_banks == n_banks // 2


def engine_tile_costs(regs, config, pool, *, rows=False):
    """``(B, W)``: gather and write cycles of every tile, arrays ``[GROUPS, TILES]``; with
    ``rows`` (``CONV``) also the write cycles of each of a tile's result rows,
    ``[GROUPS, TILES, rows]``, whose sum ``W`` is.

    Every address of a beat is ``base + k_offset + in_off[j]``: the beats of a tile
    differ by a common shift, which only renames the banks, so all of a tile's
    beats cost the same, ``max(1, most valid lanes with in_off congruent modulo
    act_banks)``, whatever the group. Likewise every result row of a tile writes
    ``base + out_off[j]`` with a row- and group-dependent ``base``: a lane group
    costs the same in every live row (rows of channels ``>= M`` write nothing and
    take one cycle per lane group).
    """
    n_banks = config.act_banks
    groups, tiles, lanes = regs[Reg.GROUPS], regs[Reg.TILES], regs[Reg.LANES]
    R = config.requant_lanes
    valid, oy, ox = _tile_lanes(regs)                                               # [T, L]
    out_off = oy * regs[Reg.OUT_PITCH] + ox
    B = np.broadcast_to(gather_cycles(regs, config), (groups, tiles))
    n_chunks = -(-lanes // R)
    pad = n_chunks * R - lanes
    chunk_banks = np.concatenate([out_off % n_banks, np.zeros((tiles, pad), np.int64)], axis=1)
    chunk_valid = np.concatenate([valid, np.zeros((tiles, pad), bool)], axis=1)
    live_row = _max_per_bank(chunk_banks.reshape(tiles, n_chunks, R),
                             chunk_valid.reshape(tiles, n_chunks, R), n_banks).sum(axis=1)    # [T]
    if pool:
        W = np.broadcast_to(live_row, (groups, tiles))
    else:
        row_costs = _row_costs(regs, config, live_row, n_chunks)
        W = row_costs.sum(axis=2)
    B, W = np.array(B, dtype=np.int64), np.array(W, dtype=np.int64)
    return (B, W, row_costs) if rows else (B, W)


def _row_costs(regs, config, live_row, n_chunks):
    """``[GROUPS, TILES, rows]``: the writer's cycles for each result row of a ``CONV`` tile,
    ``live_row`` (``[TILES]``) for a row of an output channel ``< M``, else one cycle per
    lane group."""
    rows, live = config.rows, _live_rows(regs, config)                                  # [G]
    return np.where(np.arange(rows)[None, None, :] < live[:, None, None],
                    live_row[None, :, None], n_chunks)


def _live_rows(regs, config):
    """``[GROUPS]``: each engine group's result rows of an output channel ``< M``."""
    return np.clip(regs[Reg.M] - np.arange(regs[Reg.GROUPS]) * config.rows, 0, config.rows)


def engine_cycles(regs, config, pool=False):
    """Cycles of a ``CONV`` (``pool=False``) or ``POOL`` with these registers."""
    if empty_walk(regs):
        return 1
    check_registers(regs, config, Opcode.POOL if pool else Opcode.CONV)
    queued = not pool and config.result_queue_rows > 0
    B, W, *row_costs = engine_tile_costs(regs, config, pool, rows=queued)
    lanes = regs[Reg.LANES]
    lat = config.pool_latency if pool else config.array_latency
    K = engine_beats(regs, config)
    E = config.first_beat_cycle(lanes)
    D = 0
    X = None
    queue = _ResultQueue(config.result_queue_rows, row_costs[0]) if queued else None
    B, W = B.reshape(-1).tolist(), W.reshape(-1).tolist()
    stall = None
    for t, (b, w) in enumerate(zip(B, W)):
        P = E + b + D + config.operand_latency - 1
        A = P if X is None else max(P, X + 1)
        if config.bank_access == "arbitrated":
            # The walker runs on through the stalls after E: the previous tile's and this one's.
            this = (E + b + config.operand_latency, A - P)
            stalls = [s for s in (stall, this) if s is not None and s[0] > E]
            E_next = max(E + b, _walker_ready(E, lanes + 1, stalls))
            stall = this
        else:
            E_next = E + max(b, lanes + 1)
        if config.registered_operands and t + 1 < len(B):
            # The skid: the front end freezes only from the cycle after the next tile's first
            # beat, offered at Q without the stall, has left the output stage.
            Q = E_next + B[t + 1] // K + D + config.operand_latency - 1
            D += max(0, A - Q + 1)
        else:
            D += A - P
        X = A + lat + w - 1 if queue is None else queue.tile(t, A + lat)
        E = E_next
    cycles = (X if queue is None else queue.finished) + config.write_latency + 1
    if config.single_port_activations:
        cycles += engine_writes(regs, config, pool)
    return cycles


def engine_writes(regs, config, pool=False):
    """Byte writes of a ``CONV`` or ``POOL``: each valid lane of every tile in every result row
    of an output channel ``< M`` (``POOL``: one row a tile). With
    ``config.single_port_activations`` each takes a cycle of its own, the engine held."""
    if empty_walk(regs):
        return 0
    valid, _, _ = _tile_lanes(regs)
    rows = regs[Reg.GROUPS] if pool else _live_rows(regs, config).sum()
    return int(rows * valid.sum())


def _walker_ready(E, cycles, stalls):
    """The front end's time at which the lane walker, started at ``E`` and busy for ``cycles``
    cycles that stalls do not hold, has its tile ready; ``stalls``: ``(T, S)``, ``S`` cycles with
    the front end held at its time ``T``, in order."""
    for T, S in stalls:
        if T - E >= cycles:
            break
        cycles -= T - E + min(S, cycles - (T - E))
        E = T
        if cycles == 0:
            return E
    return E + cycles


class _ResultQueue:
    """The result queue (``config.result_queue_rows``, an ``amaranth.lib.fifo.SyncFIFOBuffered``
    of depth ``Q``) between the array and the result writer, row by row (``n`` counts the
    instruction's result rows):

    * the array offers row ``r`` of a tile ``o_n = max(first + r, p_{n-1} + 1)`` (``first``:
      the cycle its first row could go, ``A + LAT``), and the queue takes it at ``p_n`` =
      ``max(o_n, i_{n-Q+1} + 1)``: it has room while fewer than ``Q - 1`` rows are in its
      memory, which a row leaves at ``i_n`` for the output register;
    * ``i_n = max(p_n + 1, q_{n-1})``: the row moves to the output register once written,
      when the register is free or its row is being taken;
    * the writer takes the row at ``q_n = i_n + c_n`` (``c_n``: its cycles for the row, the
      row's ready coming with its last lane group).

    The array takes the next tile's last beat in the cycle after ``p`` of this tile's last
    row; the instruction's writes end at the last ``q``.
    """

    def __init__(self, depth, costs):
        self.depth = depth
        self.costs = costs.reshape(-1, costs.shape[-1]).tolist()   # [tile][row]
        self.taken = None                       # p of the last row
        self.moved = []                         # i_n
        self.finished = None                    # q of the last row

    def tile(self, t, first):
        """Rows of tile ``t`` whose first can go at ``first``; returns ``p`` of its last row."""
        p, q = self.taken, self.finished
        for r, cost in enumerate(self.costs[t]):
            n = len(self.moved)
            p = first + r if p is None else max(first + r, p + 1)
            if n >= self.depth - 1:
                p = max(p, self.moved[n - self.depth + 1] + 1)
            moved = p + 1 if q is None else max(p + 1, q)
            self.moved.append(moved)
            q = moved + cost
        self.taken, self.finished = p, q
        return p


def _region_bytes(regs):
    return regs[Reg.IO_CHANNELS] * regs[Reg.IO_ROWS] * regs[Reg.IO_LEN]


def fill_runs(regs, config):
    """A wide ``FILL``'s writes (``config.registered_writes``): each row of ``IO_LEN`` bytes
    from address ``a`` in runs that end at multiples of ``act_banks`` (one bank row, one
    cycle each), ``ceil((a % act_banks + IO_LEN) / act_banks)`` of them, summed over the
    region's rows."""
    banks, length = config.act_banks, regs[Reg.IO_LEN]
    starts = (regs[Reg.IO_BASE] + np.arange(regs[Reg.IO_CHANNELS])[:, None] * regs[Reg.IO_CSTRIDE]
              + np.arange(regs[Reg.IO_ROWS])[None, :] * regs[Reg.IO_PITCH]) % banks
    return int(((starts + length + banks - 1) // banks).sum())


def instruction_cycles(instruction, regs, config):
    """Cycles of one decoded instruction given the registers before it."""
    op = instruction.opcode
    if op is Opcode.LOOP:
        check_registers(regs, config, op)
        # Taken, it finds the wrong word read ahead in the instruction register's fetch.
        return 2 if config.registered_decode and regs[Reg.LOOP_COUNT] else 1
    if op in (Opcode.SET, Opcode.END):
        return 1
    if op is Opcode.STAMP:
        return STAMP_CYCLES
    if op in (Opcode.FILL, Opcode.INPUT, Opcode.OUTPUT):
        check_registers(regs, config, op)
        n = _region_bytes(regs)
        if n == 0:
            return 1
        overhead = 2 + config.region_start_latency
        if op is Opcode.FILL and config.registered_writes:
            return fill_runs(regs, config) + overhead
        return n + overhead + (config.output_latency if op is Opcode.OUTPUT else 0)
    if op in (Opcode.CONV, Opcode.POOL):
        return engine_cycles(regs, config, pool=op is Opcode.POOL)
    raise ProgramError(f"unknown opcode {op!r}")


@dataclass
class InstructionCycles:
    """One executed instruction: where, what, when (cycle it started) and for how long."""
    pc: int
    opcode: Opcode
    start: int
    cycles: int
    macs: int = 0          # useful multiply-accumulates (CONV)
    regs: dict = None      # engine registers (CONV/POOL), for summaries


@dataclass
class ProgramCycles:
    """Result of :func:`program_cycles`."""
    instructions: list = field(default_factory=list)
    total: int = 0
    stamps: list = field(default_factory=list)          # value each STAMP sends
    stamp_offsets: list = field(default_factory=list)   # where its 4 bytes are in the output stream
    output_bytes: int = 0                               # bytes OUTPUT and STAMP send in all

    def by_opcode(self):
        """``{opcode name: total cycles}``."""
        totals = {}
        for record in self.instructions:
            totals[record.opcode.name] = totals.get(record.opcode.name, 0) + record.cycles
        return totals

    def stamp_bytes(self):
        """The bytes the STAMPs put on the output stream, in order."""
        return b"".join(int(value).to_bytes(4, "little") for value in self.stamps)

    def with_stamps(self, output):
        """``output`` (e.g. the ISA simulator's, whose STAMPs send zeros) with the STAMP bytes
        replaced by the cycle counts the hardware sends."""
        output = bytearray(output)
        if len(output) != self.output_bytes:
            raise ValueError(f"output of {len(output)} bytes, the program sends {self.output_bytes}")
        for offset, value in zip(self.stamp_offsets, self.stamps):
            output[offset:offset + 4] = int(value).to_bytes(4, "little")
        return bytes(output)

    def without_stamps(self, output):
        """``output`` with the STAMP bytes zeroed, as the ISA simulator sends them."""
        output = bytearray(output)
        for offset in self.stamp_offsets:
            output[offset:offset + 4] = bytes(4)
        return bytes(output)


def useful_macs(regs, config, pool=False):
    """Multiply-accumulates of a ``CONV`` that produce a written output (``pool``: of a
    ``CONV pool``, whose every group has rows ``0..M-1``; those of its walk's kernel, with the
    zeros the compiler's shifted kernels hold)."""
    groups, rows = regs[Reg.GROUPS], config.rows
    live = sum(1 for g in range(groups) for i in range(rows)
               if (0 if pool else g * rows) + i < regs[Reg.M])
    pixels = min(regs[Reg.NPIX], regs[Reg.TILES] * regs[Reg.LANES])
    return live * pixels * regs[Reg.K_C] * regs[Reg.K_H] * regs[Reg.K_W]


def program_cycles(program_words, config=None, *, max_steps=MAX_STEPS):
    """Follow a program (64-bit words from instruction 0) to ``END``; return a :class:`ProgramCycles`.

    Registers start at zero, as after reset. The total equals the RTL's
    ``cycles`` port at ``done``; each STAMP's value is the sum of the cycles of the
    instructions before it.
    """
    config = config or AcceleratorConfig()
    words = [int(word) for word in program_words]
    regs = {reg: 0 for reg in Reg}
    result = ProgramCycles()
    cache = {}
    pc = 0
    now = 0
    for _ in range(max_steps):
        if not 0 <= pc < len(words):
            raise ProgramError(f"program counter {pc} ran off the program")
        try:
            instruction = decode(words[pc])
        except ValueError:
            raise ProgramError(f"instruction {pc}: unknown opcode {words[pc] >> 60:#x}") from None
        op = instruction.opcode
        macs = 0
        snapshot = None
        if op in (Opcode.CONV, Opcode.POOL):
            # The operand (CONV's diagonal layout) is not in the key: a diagonal word costs
            # the window the same cycles as the block-diagonal tile it stands for.
            key = (op, tuple(regs[reg] for reg in Reg if reg not in (Reg.FILL_VALUE, Reg.LOOP_COUNT)))
            if key not in cache:
                cache[key] = instruction_cycles(instruction, regs, config)
            cycles = cache[key]
            snapshot = dict(regs)
            if op is Opcode.CONV and not empty_walk(regs):
                macs = useful_macs(regs, config, instruction.pool)
        else:
            cycles = instruction_cycles(instruction, regs, config)
        result.instructions.append(InstructionCycles(pc, op, now, cycles, macs, snapshot))
        if op is Opcode.STAMP:
            result.stamps.append(now & 0xFFFF_FFFF)
            result.stamp_offsets.append(result.output_bytes)
            result.output_bytes += 4
        elif op is Opcode.OUTPUT:
            result.output_bytes += _region_bytes(regs)
        now += cycles
        pc += 1
        if op is Opcode.END:
            result.total = now
            return result
        if op is Opcode.SET:
            regs[instruction.reg] = instruction.value
        elif op is Opcode.LOOP and regs[Reg.LOOP_COUNT]:
            regs[Reg.LOOP_COUNT] -= 1
            pc = instruction.target
    raise ProgramError(f"program did not reach END in {max_steps} instructions")


def layer_summaries(result, config):
    """Per engine instruction: a dict with pc, opcode, cycles, useful MACs and utilization.

    ``utilization = macs / (rows * cols * cycles)`` (0 for ``POOL``).
    """
    summaries = []
    for record in result.instructions:
        if record.opcode not in (Opcode.CONV, Opcode.POOL):
            continue
        summaries.append({
            "pc": record.pc, "opcode": record.opcode.name, "start": record.start,
            "cycles": record.cycles, "macs": record.macs,
            "utilization": record.macs / (config.macs_per_cycle * record.cycles) if record.cycles else 0.0,
        })
    return summaries
