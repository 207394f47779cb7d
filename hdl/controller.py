"""The controller: fetch, decode and execute, strictly one instruction after another.

Timing (cycles an instruction occupies, from its first execute cycle to the
cycle in which the next instruction's word is read, inclusive):

* ``SET``, ``LOOP``, ``END``: 1; ``STAMP``: 5 (the value is the ``cycles``
  counter in the instruction's first cycle, then 4 bytes, least significant
  first).
* ``FILL``, ``INPUT``, ``OUTPUT``, ``CONV``, ``POOL``: as their units say
  (:class:`~fpganet.hdl.region.RegionUnit`, :mod:`fpganet.perf`); 1 when the
  region or the engine walk is empty.

The program memory's read port is addressed with the *next* instruction in the
last cycle of the current one, so there is no fetch bubble, taken ``LOOP``
included (without ``config.registered_decode``: below). ``start`` reads
instruction 0; the ``cycles`` counter counts the cycles from the first execute
cycle to ``END`` inclusive, so it equals the sum of the instructions' cycles.

With ``config.registered_decode`` the instruction is decoded from a register, the
instruction register, instead of straight from the block RAM's output (whose
clock-to-output delay then led every decode path): the memory is read one
instruction ahead, instruction 0 while idle, and the register loads the word
read ahead as an instruction ends. A taken ``LOOP`` finds the wrong word read
ahead and takes one cycle more (2) to read its target.
"""

import contextlib

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import EMPTY_WALK_COUNTS, INSTRUCTION_LAYOUT, REGION_COUNTS, Opcode, Reg

from .region import RegionMode
from .registers import register_layout, register_widths

__all__ = ["Controller"]


class Controller(wiring.Component):
    """Instruction sequencer and register file.

    Parameters
    ----------
    config : AcceleratorConfig

    Members
    -------
    start : In(1)
        Pulse while idle: run from instruction 0. With ``config.registered_decode``, not in
        the first cycle after reset, nor in a cycle that writes instruction 0 (the word is
        read ahead while idle).
    busy : Out(1)
        From the cycle after ``start`` to the cycle after ``END``.
    done : Out(1)
        Rises with the cycle after ``END``; stays high until the next ``start``.
    cycles : Out(32)
        Cycles of the current (or last) run so far.
    prog_addr : Out(config.program_addr_width)
    prog_en : Out(1)
    prog_data : In(INSTRUCTION_LAYOUT)
        The program memory's read port: the instruction word, read by field name.
    regs : Out(register_layout(config))
        The register file (``SET``).
    engine_start, engine_pool : Out(1)
        Start pulse of ``CONV``/``POOL`` (``engine_pool`` for ``POOL``, held).
    engine_diagonal : Out(1)
        With ``config.diagonal_weights`` only: a ``CONV`` in the diagonal mode (held).
    engine_pooled : Out(1)
        With ``config.fused_max_pool`` only: a ``CONV pool`` (held).
    engine_packed : Out(1)
        With ``config.packed_weights`` only: a ``CONV packed`` (held).
    engine_binary : Out(1)
        With ``config.binary_weights`` only: a ``CONV binary`` (held).
    engine_active : Out(1)
        A ``CONV`` or ``POOL`` is executing (the engine owns the activation buffer).
    engine_done : In(1)
    region_start : Out(1)
    region_mode : Out(RegionMode)
    region_done : In(1)
    stamp : Out(stream.Signature(8))
        The bytes of ``STAMP``.
    stamp_active : Out(1)
        A ``STAMP`` is executing (its bytes own the output stream).
    """

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.config = config
        super().__init__({
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "cycles": Out(32),
            "prog_addr": Out(config.program_addr_width),
            "prog_en": Out(1),
            "prog_data": In(INSTRUCTION_LAYOUT),
            "regs": Out(register_layout(config)),
            "engine_start": Out(1),
            "engine_pool": Out(1),
            **({"engine_diagonal": Out(1)} if config.diagonal_weights else {}),
            **({"engine_pooled": Out(1)} if config.fused_max_pool else {}),
            **({"engine_packed": Out(1)} if config.packed_weights else {}),
            **({"engine_binary": Out(1)} if config.binary_weights else {}),
            "engine_active": Out(1),
            "engine_done": In(1),
            "region_start": Out(1),
            "region_mode": Out(RegionMode),
            "region_done": In(1),
            "stamp": Out(stream.Signature(8)),
            "stamp_active": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        regs = self.regs
        pipelined = self.config.registered_decode
        # The instruction executing: the read port's word, or the instruction register's.
        instruction = Signal(INSTRUCTION_LAYOUT) if pipelined else self.prog_data
        opcode = instruction.opcode
        set_op, loop_op = instruction.operand.set, instruction.operand.loop

        pc = Signal(self.config.program_addr_width)
        first = Signal()      # first cycle of the instruction in `instruction`
        advance = Signal()
        next_pc = Signal.like(pc)
        m.d.comb += next_pc.eq(pc + 1)
        refetch = Signal()    # pipelined: the read-ahead word is not the next instruction's
        taken = Signal()      # pipelined: a taken LOOP

        # Empty walks finish in their first cycle without starting a unit. Whether a count is
        # non-zero is kept in a flip-flop beside it, loaded by the same SET from one zero test
        # of the value word, rather than tested on every count register. Pipelined, LOOP_COUNT
        # too, and each taken LOOP reloads it (its compare was in front of the program
        # memory's read address, through ``taken``: the 128-MAC ULX3S build).
        widths = register_widths(self.config)
        flagged = EMPTY_WALK_COUNTS + ((Reg.LOOP_COUNT,) if pipelined else ())
        nonzero = {reg: Signal(name=f"{reg.name.lower()}_nonzero") for reg in flagged}
        loops_left = nonzero[Reg.LOOP_COUNT] if pipelined else regs.loop_count != 0
        engine_empty = Signal()
        region_empty = Signal()
        m.d.comb += [
            engine_empty.eq(~Cat(nonzero[reg] for reg in EMPTY_WALK_COUNTS).all()),
            region_empty.eq(~Cat(nonzero[reg] for reg in REGION_COUNTS).all()),
        ]

        # STAMP: the counter latched in the first cycle, then shifted out a byte at a time: each
        # bit's load-or-shift choice fits in the logic cell of its flip-flop, where picking one
        # of four bytes took a multiplexer besides.
        stamp_value = Signal(32)
        stamp_count = Signal(2)

        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(~refetch) if pipelined else contextlib.nullcontext(), m.Switch(opcode):
                with m.Case(Opcode.END):
                    m.d.sync += [self.busy.eq(0), self.done.eq(1)]
                with m.Case(Opcode.SET):
                    m.d.comb += advance.eq(1)
                    with m.Switch(set_op.reg):
                        for reg in Reg:
                            with m.Case(reg):
                                field = getattr(regs, reg.name.lower())
                                m.d.sync += field.eq(set_op.value[:widths[reg]])
                                if reg in nonzero:
                                    m.d.sync += nonzero[reg].eq(set_op.value[:widths[reg]].any())
                with m.Case(Opcode.LOOP):
                    m.d.comb += advance.eq(1)
                    with m.If(loops_left):
                        m.d.sync += regs.loop_count.eq(regs.loop_count - 1)
                        if pipelined:
                            m.d.sync += loops_left.eq(regs.loop_count != 1)
                        m.d.comb += next_pc.eq(loop_op.target)
                        if pipelined:
                            m.d.comb += taken.eq(1)
                with m.Case(Opcode.CONV, Opcode.POOL):
                    m.d.comb += [
                        self.engine_active.eq(1),
                        self.engine_start.eq(first & ~engine_empty),
                        advance.eq((first & engine_empty) | self.engine_done),
                    ]
                with m.Case(Opcode.FILL, Opcode.INPUT, Opcode.OUTPUT):
                    m.d.comb += [
                        self.region_start.eq(first & ~region_empty),
                        advance.eq((first & region_empty) | self.region_done),
                    ]
                with m.Case(Opcode.STAMP):
                    m.d.comb += [
                        self.stamp_active.eq(1),
                        self.stamp.valid.eq(~first),
                        self.stamp.payload.eq(stamp_value[:8]),
                        advance.eq(self.stamp.valid & self.stamp.ready & (stamp_count == 3)),
                    ]
                    with m.If(first):
                        m.d.sync += [stamp_value.eq(self.cycles), stamp_count.eq(0)]
                    with m.Elif(self.stamp.valid & self.stamp.ready):
                        m.d.sync += [stamp_value.eq(stamp_value >> 8), stamp_count.eq(stamp_count + 1)]
                with m.Default():
                    m.d.comb += advance.eq(1)      # not an instruction: skipped

        if self.config.diagonal_weights:
            m.d.comb += self.engine_diagonal.eq((opcode == Opcode.CONV) & instruction.operand.conv.diagonal)
        if self.config.fused_max_pool:
            m.d.comb += self.engine_pooled.eq((opcode == Opcode.CONV) & instruction.operand.conv.pool)
        if self.config.packed_weights:
            m.d.comb += self.engine_packed.eq((opcode == Opcode.CONV) & instruction.operand.conv.packed)
        if self.config.binary_weights:
            m.d.comb += self.engine_binary.eq((opcode == Opcode.CONV) & instruction.operand.conv.binary)
        m.d.comb += [
            self.engine_pool.eq(opcode == Opcode.POOL),
            self.region_mode.eq(Mux(opcode == Opcode.FILL, RegionMode.FILL,
                                    Mux(opcode == Opcode.INPUT, RegionMode.INPUT, RegionMode.OUTPUT))),
        ]

        if pipelined:
            self._fetch_ahead(m, instruction, pc=pc, next_pc=next_pc, first=first, advance=advance,
                              refetch=refetch, taken=taken, loop_target=loop_op.target)
            with m.If(~self.busy & self.start):
                m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(0), pc.eq(0)]
            return m

        with m.If(advance):
            m.d.comb += [self.prog_addr.eq(next_pc), self.prog_en.eq(1)]
            m.d.sync += [pc.eq(next_pc), first.eq(1)]
        with m.Else():
            m.d.sync += first.eq(0)

        with m.If(~self.busy & self.start):
            m.d.comb += [self.prog_addr.eq(0), self.prog_en.eq(1)]
            m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(0), pc.eq(0), first.eq(1)]
        return m

    def _fetch_ahead(self, m, instruction, *, pc, next_pc, first, advance, refetch, taken,
                     loop_target):
        """Fetch for :attr:`~AcceleratorConfig.registered_decode`: ``instruction`` is a register
        holding the word at ``pc``, and the read port holds the word at ``pc + 1``.

        Idle, the port reads instruction 0, which ``start`` loads; ``END`` reads it already, so
        that a start in the cycle after ``END`` finds it. As an instruction ends (``advance``)
        the register loads the word read ahead and the port reads the one after it; a taken
        ``LOOP`` (``taken``) reads its target instead and spends the next cycle (``refetch``)
        loading it.
        """
        # pc + 1 and pc + 2 in registers beside pc: the adder sat in front of the program
        # memory's read address (a ULX3S build's longest path).
        pc1, pc2 = Signal.like(pc, name="pc_plus1"), Signal.like(pc, name="pc_plus2")
        with m.If(~self.busy):
            m.d.comb += [self.prog_addr.eq(0), self.prog_en.eq(1)]
            with m.If(self.start):
                m.d.comb += [self.prog_addr.eq(1)]
                m.d.sync += [instruction.eq(self.prog_data), first.eq(1), refetch.eq(0),
                             pc1.eq(1), pc2.eq(2)]
        with m.Else():
            # The read address does not wait for advance (the units' done, through it, was a
            # ULX3S build's longest path): it is the word the port must hold next if the
            # instruction ends now, and the port's enable takes advance.
            is_end = instruction.opcode == Opcode.END
            m.d.comb += [
                self.prog_addr.eq(Mux(refetch, pc1, Mux(taken, loop_target, Mux(is_end, 0, pc2)))),
                self.prog_en.eq(refetch | advance | is_end),
            ]
            with m.If(refetch):
                m.d.sync += [instruction.eq(self.prog_data), first.eq(1), refetch.eq(0)]
            with m.Elif(advance & taken):
                m.d.sync += [pc.eq(next_pc), pc1.eq(next_pc + 1), pc2.eq(next_pc + 2), first.eq(0),
                             refetch.eq(1)]
            with m.Elif(advance):
                m.d.sync += [instruction.eq(self.prog_data), pc.eq(pc1), pc1.eq(pc2),
                             pc2.eq(pc2 + 1), first.eq(1)]
            with m.Else():
                m.d.sync += first.eq(0)
