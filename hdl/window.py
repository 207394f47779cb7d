"""The engine's window generator: im2col address generation and the banked gather.

It walks the engine loops of docs/reference/architecture.md ("Instruction set") exactly::

    for g in range(GROUPS):
        for t in range(TILES):
            lanes j: n = t*LANES + j, valid_j = n < NPIX, in_off[j] = oy*IN_ROWSTEP + ox*STRIDE_X
            for c, ky, kx (kx fastest): beat k
                b[j] = act[IN_BASE + g*IN_GSTEP + c*IN_CSTRIDE + ky*IN_PITCH + kx + in_off[j]]
                a    = weights[W_BASE + g*W_GSTEP + k]

and sends one operand beat per ``(g, t, k)`` to the systolic array (``CONV``) or the
max-pool unit (``POOL``), ``last`` on the final beat of a tile. No
multiplier is used per beat: every address is a running sum.

Stages (each a register boundary):

* **lane walker**: computes the lane addresses ``IN_BASE + g*IN_GSTEP + in_off[j]``
  and validity of the *next* tile, one lane per cycle. It starts in the cycle
  after a tile's first beat enters the gather stage, so a tile can follow the
  previous one ``LANES + 1`` cycles after it started at the earliest.
* **gather** (``S1``): holds one beat; a :class:`~fpganet.hdl.memories.BankArbiter`
  serves, each cycle, one pending lane per bank, lowest lane first; lanes sharing a bank
  are read in successive cycles; invalid lanes do not read. Which lanes share a bank,
  and whether the beat's last gather cycle is this one, are flip-flops loaded with the
  beat and from the next state. With
  ``config.pipeline_registers`` the lane addresses are summed as the beat loads and the
  lanes read in the cycles of the tile's bank schedule, which the lane walker computes
  (the same order, so the same cycles; :meth:`WindowGenerator._bank_schedule`). A beat
  occupies the stage for ``max(1, most valid lanes in one bank)`` cycles. The weight word
  is read in the same cycles. With ``config.pair_products`` each lane also reads its odd
  channel's byte, ``IN_CSTRIDE`` on, and a beat occupies the stage for the most reads in one
  bank. With the pipeline registers every beat of a tile reads both when ``K_C > 1``, the
  last of an odd ``K_C`` too, so that one schedule serves the tile (``c + 1 == K_C`` meets
  weights of 0), and the banks pair up into superbanks, ``b`` and ``b + act_banks / 2``:
  where ``IN_CSTRIDE % act_banks == act_banks / 2`` a lane's two bytes are one superbank's,
  read in one cycle, and the tile is scheduled by superbank; otherwise a beat takes two passes
  of the bank schedule, the lanes' first channels, then their second ones. Either way each
  bank's read address has one source a lane and each lane's bytes one superbank's word a
  cycle, the crossbar of the window without pairs.
* **output** (``S2``): the bytes arrive (synchronous reads) and the beat is offered
  on ``operands`` the cycle after its last gather cycle; with
  ``config.pipeline_registers`` the bytes arrive a cycle later, through the activation
  banks' registers (the weight word through the weight buffer's, beside them), and the
  gathered bytes and the weight word are registered before their offer
  (``config.operand_latency``, 3, after the last gather cycle), so that a block RAM's
  output shares a cycle with neither the gather nor the consumer's logic.

Back-pressure: while an offered beat is not taken (the array holds a tile's
``last`` beat until the previous tile's results are out), every stage freezes
and the memory read ports hold their data; the lane walker runs on (it fills
registers that only the next tile's first load reads). With
``config.pipeline_registers`` a skid register behind the offer lets the stages run
on until a beat leaves the output stage behind the waiting one, and they freeze
from the next cycle, on a flip-flop, the lane walker too. Timing is therefore a pure
function of the registers: see :mod:`fpganet.perf`.
"""

import functools
from typing import NamedTuple

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .memories import BankArbiter, bank_hits, one_hot_select, route_to_banks
from .registers import count_down, next_value, register_layout, registered_wrap, update
from .systolic import operand_layout

__all__ = ["WindowGenerator"]


class _Tile(NamedTuple):
    """The tile the lane walker has walked, for its first beat to load."""
    addr: list         # lane j: IN_BASE + g*IN_GSTEP + in_off[j]
    valid: Value       # bit j: pixel t*LANES + j < NPIX
    group_end: Value   # the tile is its group's last
    final: Value       # ...and the instruction's last
    slot: list         # pipeline_registers: the gather cycle in which lane j reads
    cycles: Value      # ...and the gather cycles of each of the tile's beats


class _Beat(NamedTuple):
    """The beat the sequencer offers to the gather stage."""
    koff: Value        # c*IN_CSTRIDE + ky*IN_PITCH + kx
    waddr: Value       # its weight word
    last: Value        # it closes its tile
    channel: Value     # diagonal_weights: bit i set when c == i
    odd: Value         # pair_products without the pipeline registers: c + 1 < K_C, its lanes read
    koff_odd: Value    # pair_products with them: the odd channel's offset, koff + IN_CSTRIDE


def _reads_in(valid, slots, cycle):
    """The lanes that read in a beat's gather cycle ``cycle`` of a tile's bank schedule."""
    return valid & Cat(slot == cycle for slot in slots)


class _Gather(NamedTuple):
    """The gather stage's beat and what its lanes read this cycle."""
    base: list         # lane j's address at kernel offset 0 (the tile's)
    tvalid: Value      # the tile's valid lanes
    koff: Value        # the beat's kernel offset
    pend: Value        # lanes still to read
    waddr: Value       # the beat's weight word
    last: Value        # the beat closes its tile
    channel: Value     # diagonal_weights: its channel, one-hot
    remaining: Value   # lanes left after this cycle
    hits: list         # hits[bank][lane]: lane reads bank this cycle
    done: Value        # every lane of the held beat is read by the end of this cycle
    addr: list         # lane j's address, base + koff
    slot: list         # pipeline_registers: the tile's bank schedule (_Tile.slot, .cycles)
    cycles: Value
    count: Value       # ...the beat's gather cycle
    final_cycle: Value # ...which is its last
    served: Value      # ...the lanes it reads (a flip-flop, loaded from the next state)
    koff_odd: Value    # pair_products without the pipeline registers: koff + IN_CSTRIDE
    phase: Value       # pair_products with them: the second pass (the lanes' second channels)
    rows: tuple        # ...lane j's word address in the lower and in the upper half of the banks
    banks: list        # without them: each read's bank, a flip-flop loaded with the beat
    same: Value        # ...and which two reads share a bank (BankArbiter.same)
    alone: Value       # ...and the pending reads' banks are all different: the beat is done


class WindowGenerator(wiring.Component):
    """Engine address generation and gather.

    Parameters
    ----------
    config : AcceleratorConfig

    Members
    -------
    start : In(1)
        Pulse: begin the walk of the registers in ``regs`` (held stable until the
        instruction ends). ``GROUPS``, ``TILES``, ``LANES``, ``K_C``, ``K_H``,
        ``K_W`` must be non-zero (the controller does not start an empty walk). With
        ``config.pipeline_registers`` it is registered on entry
        (``config.window_start_latency``): the window acts on it a cycle late.
    regs : In(register_layout(config))
    operands : Out(stream.Signature(operand_layout(config)))
        One beat per ``(g, t, k)`` in loop order; ``a`` is the weight word,
        ``b[j]`` the activation byte of lane ``j`` (stale for invalid lanes),
        ``last`` closes a tile. ``valid`` never depends on ``ready``. With
        ``config.pair_products`` a beat is a pair of channels ``(c, c + 1)`` at one kernel
        position (``c`` even): ``b[j]`` holds lane ``j``'s two bytes, channel ``c`` low and
        ``c + 1`` (``IN_CSTRIDE`` further on) high, arbitrary where ``c + 1 == K_C``, and ``a[i]``
        row ``i``'s two weight bytes.
    bank_addr : Out(ArrayLayout(bank_word_width, act_banks))
    bank_en : Out(1)
    bank_data : In(ArrayLayout(8, act_banks))
        The activation buffer's read ports (``config.act_read_latency`` cycles with ``bank_en``).
    w_addr : Out(weight_addr_width)
    w_en : Out(weight_blocks)
        Equal copies of the read enable (``config.weight_blocks``), one per block of the
        weight buffer: with the pipeline registers each a flip-flop of its own (the
        stall's copies, :meth:`_stall_copies`), so that no one net reaches every block RAM.
    w_data : In(8 * rows)
        The weight memory's read port (``config.weight_read_latency`` cycles with ``w_en``,
        the activation buffer's); byte ``i`` feeds array row ``i`` (bytes ``2i`` and
        ``2i + 1`` with ``config.pair_products``).
    diagonal : In(1)
        With ``config.diagonal_weights`` only: the walk is a ``CONV`` in the diagonal mode
        (held from the cycle after ``start``): beat ``(c, ky, kx)`` reads weight word
        ``W_BASE + g*W_GSTEP + ky*K_W + kx``, and byte ``i`` goes to array row ``i`` only when
        ``c == i`` (0 otherwise; with ``config.pair_products`` row ``i``'s low byte when
        ``c == i``, its high byte when ``c + 1 == i``).
    busy : Out(1)
        High from ``start`` until the last beat has been taken.
    """

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.config = config
        banks = config.act_banks
        super().__init__({
            "start": In(1),
            "regs": In(register_layout(config)),
            "operands": Out(stream.Signature(operand_layout(config))),
            "bank_addr": Out(data.ArrayLayout(config.bank_word_width, banks)),
            "bank_en": Out(1),
            "bank_data": In(data.ArrayLayout(8, banks)),
            "w_addr": Out(config.weight_addr_width),
            "w_en": Out(config.weight_blocks),
            "w_data": In(8 * config.weight_word_bytes),
            **({"diagonal": In(1)} if config.diagonal_weights else {}),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        regs = self.regs
        # The start the stages act on (the helpers read it here).
        self._start = self.start
        if self.config.window_start_latency:
            self._start = Signal(name="start_r")
            m.d.sync += self._start.eq(self.start)
        self._odd_reads = self._superbank = None
        if self.config.pair_products and self.config.pipeline_registers:
            self._pair_read_flags(m)

        # Between the stages. The helpers are called, and emit their logic, in pipeline order.
        stall = Signal()       # the offered beat is not taken: every stage holds
        # ...as the lane walker sees it: with the pipeline registers a copy of its own
        # (_stall_copies); without them none. The walker fills registers that only the next
        # tile's first load reads, which the stall holds anyway, so it may run on: the
        # consumer's ready then no longer reaches the walker's counters (the iCE40 build's
        # longest path).
        walker_stall = Signal(name="walker_stall") if self.config.pipeline_registers else C(0, 1)
        running = Signal()     # between start and the final beat leaving
        s_finished = Signal()  # every beat has entered the gather stage
        s1_full = Signal()     # the gather stage holds a beat
        o_valid = Signal()     # the output stage offers a beat
        o_read = Signal()      # pipeline registers: a beat's bytes on the block RAMs' outputs
        load = Signal()        # a beat enters the gather stage...
        first = Signal()       # ...the first of its tile
        start_walk = Signal()  # ...and a tile follows it: walk that one now
        w_ready = Signal()     # the walked tile waits for its first beat to load

        start = self._start
        with m.If(start):
            m.d.sync += running.eq(1)
        drained = s_finished & ~s1_full & ~o_valid
        if self.config.pipeline_registers:
            drained &= ~o_read & ~self.operands.valid
        with m.Elif(drained):
            m.d.sync += running.eq(0)
        m.d.comb += self.busy.eq(running)

        tile, lane_end, groups_left = self._lane_walker(m, stall=walker_stall, running=running,
                                                        start_walk=start_walk)
        gather = self._gather(m, stall=stall, s1_full=s1_full)

        # A beat loads when the gather stage is free (or frees now) and the sequencer has one:
        # the next of the tile, or the first of a tile the walker has finished.
        has_beat = Signal()
        s_mid = Signal()       # the next beat is not the first of its tile
        m.d.comb += [
            has_beat.eq(running & ~s_finished & (s_mid | w_ready)),
            load.eq(~stall & (~s1_full | gather.done) & has_beat),
            first.eq(~s_mid),
            start_walk.eq(load & first & (groups_left != 0)),
        ]
        with m.If(start):
            m.d.sync += w_ready.eq(0)
        with m.Elif(lane_end):
            m.d.sync += w_ready.eq(1)
        with m.Elif(load & first):
            m.d.sync += w_ready.eq(0)

        beat = self._beat_sequencer(m, load=load, first=first, tile=tile, mid=s_mid,
                                    finished=s_finished)
        self._gather_load(m, gather, stall=stall, s1_full=s1_full, load=load, first=first, tile=tile,
                          beat=beat)
        free = self._output(m, stall=stall, o_valid=o_valid, o_read=o_read, gather=gather)
        if self.config.pipeline_registers:
            self._stall_copies(m, o_valid, free, walker_stall)
        return m

    def _pair_read_flags(self, m):
        """With pair products and the pipeline registers, two flags of the instruction, loaded
        at its start: ``_odd_reads``, every beat reads each lane's odd channel too (``K_C > 1``;
        a last channel ``K_C - 1`` of an odd ``K_C`` reads the byte ``IN_CSTRIDE`` on, which
        meets weights of 0), so that one bank schedule serves every beat of a tile; and
        ``_superbank``, a lane's two reads fall in the two banks of one superbank, ``b`` and
        ``b + act_banks / 2`` (``IN_CSTRIDE % act_banks == act_banks / 2``,
        :func:`fpganet.perf.superbank_pairs`), and are read in the same cycle. With
        ``_odd_reads`` and not ``_superbank`` a beat's gather takes two passes of its tile's
        schedule, the lanes' first channels, then their second ones."""
        regs, bb = self.regs, self.config.bank_bits
        self._odd_reads, self._superbank = Signal(), Signal()
        odd_reads = regs.k_c != 1
        superbank = odd_reads & (regs.in_cstride[:bb] == 1 << (bb - 1)) if bb else C(0, 1)
        with m.If(self._start):
            m.d.sync += [self._odd_reads.eq(odd_reads), self._superbank.eq(superbank)]

    def _split_pass(self):
        """With pair products and the pipeline registers: a beat's gather takes two passes."""
        return self._odd_reads & ~self._superbank

    def _lane_walker(self, m, *, stall, running, start_walk):
        """The lane walker: the lane addresses and validity of the next tile, one lane a cycle.

        It walks the first tile in the cycle after ``start`` and each further one on ``start_walk``.
        Every register is written as "reset, else load when enabled" so that it maps onto
        flip-flops with synchronous reset and enable instead of multiplexer chains.

        Returns ``(tile, lane_end, groups_left)``: the walked :class:`_Tile`, the pulse of its
        last lane, and the groups left from the one of the tile the walker is at.
        """
        config, regs = self.config, self.regs
        aw, cols, cw = config.act_addr_width, config.cols, config.count_width
        start = self._start
        rowstep = regs.in_rowstep
        started = Signal()           # the cycle after start
        m.d.sync += started.eq(start)

        lane_next_addr = [Signal(aw, name=f"lane_next_addr{j}") for j in range(cols)]
        lane_next_valid = Signal(cols)
        next_group_end = Signal()    # the walked tile is its group's last
        next_final = Signal()        # ...and the instruction's last
        w_busy = Signal()
        w_lane = Signal(range(cols + 1))
        w_n = Signal(cw + 1)     # pixel n; it stops at 2**cw, beyond any NPIX, so valid stays exact
        w_ox = Signal(cw)
        w_inrow = Signal(aw)
        w_inoff = Signal(aw)
        w_gbase = Signal(aw)
        w_tile = Signal(cw)
        w_groups_left = Signal(cw)

        walk = Signal()
        lane = Signal(range(cols + 1))
        lane_end = Signal()
        ox_wrap = Signal()
        tile_wrap = Signal()
        group_end = Signal()
        walker_first = Signal()
        if config.pipeline_registers:
            # The last-lane compare in a flip-flop: it sat between the consumer's back-pressure
            # and the resets of the walker's counters.
            lane_wrap = Signal()
            registered_wrap(m, lane_wrap, w_lane, regs.lanes, restart=start | walker_first, step=walk)
        else:
            lane_wrap = lane + 1 == regs.lanes
        m.d.comb += [
            walk.eq(w_busy & ~stall),
            lane.eq(w_lane),
            lane_end.eq(walk & lane_wrap),
            group_end.eq(lane_end & tile_wrap),
            walker_first.eq(running & started),
        ]
        restart = start | group_end
        walked_addr = w_gbase + w_inoff
        for j in range(cols):
            update(m, lane_next_addr[j], walked_addr, enable=walk & (lane == j))
            update(m, lane_next_valid[j], w_n < regs.npix, enable=walk & (lane == j), reset=start)
        next_inoff = Mux(ox_wrap, w_inrow + rowstep, w_inoff + regs.stride_x)
        next_gbase = w_gbase + regs.in_gstep
        update(m, next_group_end, tile_wrap, enable=lane_end)
        update(m, next_final, tile_wrap & (w_groups_left == 1), enable=lane_end)
        update(m, w_n, w_n + 1, enable=walk & ~w_n[cw], reset=restart)
        update(m, w_ox, w_ox + 1, enable=walk, reset=restart | (walk & ox_wrap))
        update(m, w_inrow, w_inrow + rowstep, enable=walk & ox_wrap, reset=restart)
        update(m, w_inoff, next_inoff, enable=walk, reset=restart)
        with m.If(start):
            m.d.sync += w_gbase.eq(regs.in_base)
        with m.Elif(group_end):
            m.d.sync += w_gbase.eq(next_gbase)
        if config.pipeline_registers:
            bank = self._walked_bank(
                m, Mux(start, regs.in_base, next_value(w_gbase, next_gbase, enable=group_end)),
                next_value(w_inoff, next_inoff, enable=walk, reset=restart))
        else:
            bank = walked_addr[:config.bank_bits]
        slots, cycles = self._bank_schedule(m, walk=walk, lane=lane, valid=w_n < regs.npix,
                                            bank=bank, idle=~w_busy)
        update(m, w_tile, w_tile + 1, enable=lane_end, reset=restart)
        # In flip-flops: the comparisons were in front of the walker's resets and enables.
        registered_wrap(m, ox_wrap, w_ox, regs.out_w, restart=restart, step=walk)
        registered_wrap(m, tile_wrap, w_tile, regs.tiles, restart=restart, step=lane_end)
        # Counting down, the decrement feeds only the flip-flops (registers.count_down).
        with m.If(start):
            m.d.sync += w_groups_left.eq(regs.groups)
        with m.Elif(group_end):
            m.d.sync += w_groups_left.eq(w_groups_left - 1)
        update(m, w_lane, lane + 1, enable=walk, reset=start | walker_first | lane_end)
        # A walk starts in the cycle after the load that needs it, from a flip-flop: started by
        # the load itself, the bank arbitration, the load and the walker's counters and resets
        # made one path, the longest of the iCE40 build.
        with m.If(start):
            m.d.sync += w_busy.eq(0)
        with m.Elif(walker_first | start_walk):
            m.d.sync += w_busy.eq(1)
        with m.Elif(lane_end):
            m.d.sync += w_busy.eq(0)
        return (_Tile(lane_next_addr, lane_next_valid, next_group_end, next_final, slots, cycles),
                lane_end, w_groups_left)

    def _walked_bank(self, m, gbase, inoff):
        """The bank of the walked lane's address ``w_gbase + w_inoff``, in a register loaded
        from the two registers' next values ``gbase`` and ``inoff``: the address adder no
        longer sits in front of the bank schedule's multiplexer (the ULX3S build's longest
        path with it). With pair products in superbanks (``_superbank``) its top bit is
        cleared: the lanes are scheduled by superbank, ``b`` and ``b + act_banks / 2`` one."""
        bb = self.config.bank_bits
        if not bb:
            return C(0, 0)
        bank = Signal(bb, name="walked_bank")
        walked = gbase[:bb] + inoff[:bb]
        if self._superbank is not None:
            walked = Cat(walked[:bb - 1], walked[bb - 1] & ~self._superbank)
        m.d.sync += bank.eq(walked)
        return bank

    def _bank_schedule(self, m, *, walk, lane, valid, bank, idle):
        """With ``config.pipeline_registers``: the gather's bank schedule of the tile being
        walked, one lane a cycle. Lane ``j`` reads in gather cycle ``slots[j]``, the number of
        valid lanes before it in its bank, which is when the lowest-lane-first arbitration
        would serve it; every beat of the tile takes ``cycles`` (at least 1). All beats of a
        tile shift the lanes' addresses alike, so one schedule serves them all, and no
        arbitration sits between the gather stage's registers and the load of the next beat.

        With pair products ``bank`` is the lane's superbank where its two reads share a
        cycle (:meth:`_walked_bank`); in two passes each pass follows the schedule.

        Returns ``(slots, cycles)``, or ``([], None)`` without the pipeline registers.
        """
        config = self.config
        if not config.pipeline_registers:
            return [], None
        cols, banks = config.cols, config.act_banks
        in_bank = [Signal(range(cols + 1), name=f"in_bank{b}") for b in range(banks)]
        slots = [Signal(range(cols), name=f"lane_next_slot{j}") for j in range(cols)]
        cycles = Signal(range(cols + 1), init=1)
        slot = Signal(range(cols + 1))
        m.d.comb += slot.eq(Array(in_bank)[bank] if banks > 1 else in_bank[0])
        # The counts start from zero at every walk: they are cleared while the walker is idle (a
        # walk always starts from idle), and ``cycles`` restarts at a walk's first lane (it is
        # read by the load that starts the next walk, before that lane). Both from flip-flops:
        # cleared by the walk's start, which the load decides, they were the end of the ULX3S
        # builds' longest path.
        for b in range(banks):
            hit = walk & valid & ((bank == b) if banks > 1 else 1)
            update(m, in_bank[b], in_bank[b] + 1, enable=hit, reset=idle)
        for j in range(cols):
            update(m, slots[j], slot, enable=walk & (lane == j))
        # A lane's slot is at most ``cycles`` (the most lanes in a bank so far, at least 1), so
        # ``max(cycles, slot + 1)`` is one more exactly when they are equal: no magnitude compare.
        # Each bank's count is compared with ``cycles`` before the bank's multiplexer, which then
        # picks one bit (the multiplexer and the compare in series were a ULX3S build's longest
        # path).
        at_max = [in_bank[b] == cycles for b in range(banks)]
        with m.If(walk & (lane == 0)):
            m.d.sync += cycles.eq(1)
        with m.Elif(walk & valid & (Array(at_max)[bank] if banks > 1 else at_max[0])):
            m.d.sync += cycles.eq(cycles + 1)
        return slots, cycles

    def _beat_sequencer(self, m, *, load, first, tile, mid, finished):
        """The beat sequencer (S0): the kernel walk ``(c, ky, kx)`` of the next beat to enter the
        gather stage, its offset and weight address, as running sums.

        Drives ``mid`` (the next beat is not the first of its tile) and ``finished`` (every
        beat has entered the gather stage). Returns a :class:`_Beat`.
        """
        config, regs = self.config, self.regs
        ww, cw = config.weight_addr_width, config.count_width
        start = self._start

        kx = Signal(cw)         # kernel columns, rows and channels left
        ky = Signal(cw)
        kc = Signal(cw)
        waddr = Signal(ww)
        wbase = Signal(ww)
        s_group_end = Signal()  # flags of the tile being sequenced
        s_final = Signal()

        beat_last = Signal()
        tile_done = Signal()
        group_done = Signal()
        # The wraps are flip-flops: the counters' compares were in front of the kernel offsets'
        # and the channel mask's resets (ULX3S, 128 MACs), and of the loads' enables (iCE40).
        registered = config.pipeline_registers
        kx_wrap = count_down(m, kx, regs.k_w, restart=start, step=load, registered=True)
        ky_wrap = count_down(m, ky, regs.k_h, restart=start, step=load & kx_wrap, registered=True)
        # Channels left, two a beat with pair products: the last beat has one or two; without the
        # pipeline registers its odd one is read only if two.
        pairs = config.pair_products
        kc_wrap = count_down(m, kc, regs.k_c, restart=start, step=load & kx_wrap & ky_wrap,
                             by=config.products_per_pe, registered=True)
        odd = kc != 1 if pairs and not config.pipeline_registers else None
        m.d.comb += [
            beat_last.eq(kx_wrap & ky_wrap & kc_wrap),
            tile_done.eq(load & beat_last),
            group_done.eq(Mux(first, tile.group_end, s_group_end)),
        ]
        update(m, s_group_end, tile.group_end, enable=load & first)
        update(m, s_final, tile.final, enable=load & first)
        # With the pipeline registers a tile's last beat loads the origin instead of resetting
        # to it: the reset waited for ``load`` (its compares), the multiplexer only for the
        # registered wraps, and ``load`` reaches the offsets' enables alone.
        restart = start if registered else start | tile_done
        walk = dict(load=load, restart=restart, rewind=beat_last if registered else None,
                    kx_wrap=kx_wrap, ky_wrap=ky_wrap)
        koff = self._kernel_offset(m, **walk)
        # With the pipeline registers the odd channel's offset in registers of its own, so that
        # the gather stage sums each lane's two addresses with one adder each.
        koff_odd = (self._kernel_offset(m, **walk, origin=regs.in_cstride, suffix="_odd")
                    if self._odd_reads is not None else None)
        next_wbase = wbase + regs.w_gstep
        # At a tile's last beat the weight address goes back to the group's first word, or on
        # to the next group's.
        rewind, onward = beat_last, group_done
        channel = None
        if config.diagonal_weights:
            # Diagonal: every channel reads the group's K_H*K_W words again, the weight word
            # masked to the channel's row.
            rewind, onward = Mux(self.diagonal, kx_wrap & ky_wrap, beat_last), beat_last & group_done
            channel = Signal(config.rows, init=1, name="s0_channel")
            following = channel << config.products_per_pe
            with m.If(restart):
                m.d.sync += channel.eq(1)
            with m.Elif(load & kx_wrap & ky_wrap):
                m.d.sync += channel.eq(Mux(kc_wrap, 1, following) if registered else following)
        with m.If(start):
            m.d.sync += [waddr.eq(regs.w_base), wbase.eq(regs.w_base)]
        with m.Elif(load):
            m.d.sync += waddr.eq(Mux(rewind, Mux(onward, next_wbase, wbase), waddr + 1))
            with m.If(beat_last & group_done):
                m.d.sync += wbase.eq(next_wbase)
        with m.If(start):
            m.d.sync += [mid.eq(0), finished.eq(0)]
        with m.Elif(load):
            m.d.sync += mid.eq(~beat_last)
            with m.If(beat_last & Mux(first, tile.final, s_final)):
                m.d.sync += finished.eq(1)
        return _Beat(koff, waddr, beat_last, channel, odd, koff_odd)

    def _kernel_offset(self, m, *, load, restart, kx_wrap, ky_wrap, rewind=None, origin=0,
                       suffix=""):
        """``origin + c*IN_CSTRIDE + ky*IN_PITCH + kx`` of the next beat as running sums (the
        channel, row and offset registers, named with ``suffix``; ``restart`` sets them to
        ``origin``, and so does a ``load`` with ``rewind``), ``c`` stepping two channels a
        beat with pair products."""
        regs, aw = self.regs, self.config.act_addr_width
        koff = Signal(aw, name=f"koff{suffix}")
        krow = Signal(aw, name=f"krow{suffix}")
        kchan = Signal(aw, name=f"kchan{suffix}")
        next_chan = kchan + (regs.in_cstride << 1 if self.config.pair_products else regs.in_cstride)
        next_row = Mux(ky_wrap, next_chan, krow + regs.in_pitch)
        for register, value, enable in ((koff, Mux(kx_wrap, next_row, koff + 1), load),
                                        (krow, next_row, load & kx_wrap),
                                        (kchan, next_chan, load & kx_wrap & ky_wrap)):
            if rewind is not None:      # every enable here includes the last beat's load
                value = Mux(rewind, origin, value)
            update(m, register, value, enable=enable, reset=restart, reset_value=origin)
        return koff

    def _gather(self, m, *, stall, s1_full):
        """The gather stage (S1), its reads: while the stage holds a beat (``s1_full``), a
        :class:`BankArbiter` (or, with the pipeline registers, the tile's bank schedule)
        serves one lane per bank a cycle, and the beat's weight word is read. Returns a
        :class:`_Gather` (:meth:`_gather_load` loads its registers).
        """
        config = self.config
        aw, ww, cols, bb = config.act_addr_width, config.weight_addr_width, config.cols, config.bank_bits

        s1_base = [Signal(aw, name=f"s1_base{j}") for j in range(cols)]
        s1_tvalid = Signal(cols)
        s1_koff = Signal(aw)
        s1_pend = Signal(cols * config.products_per_pe, name="s1_pend")
        s1_waddr = Signal(ww)
        s1_last = Signal()
        s1_channel = Signal(config.rows, name="s1_channel") if config.diagonal_weights else None

        # The reads of a beat: each lane's, and with pair products each lane's odd channel's
        # after them (lanes cols + j).
        reads = cols * config.products_per_pe
        addresses = [Signal(aw, name=f"lane_addr{j}") for j in range(reads)]
        s1_koff_odd = (Signal(aw, name="s1_koff_odd") if config.pair_products and not config.pipeline_registers
                       else None)
        phase, rows, banks, same, alone = None, (), [], None, None
        if config.pipeline_registers:
            # The addresses are loaded with the beat, the lanes read in the tile's schedule (with
            # pair products both their reads in a slot, or in two passes of it).
            s1_slot = [Signal(range(cols), name=f"s1_slot{j}") for j in range(cols)]
            s1_cycles = Signal(range(cols + 1))
            s1_count = Signal(range(cols))
            s1_final_cycle = Signal()  # the last cycle of the pass
            served = Signal(cols)      # s1_full & lane j valid & (s1_slot[j] == s1_count)
            remaining = None
            # hits[bank][lane] in flip-flops, loaded with the served lanes and the addresses: the
            # banks' compares no longer sit between the lane addresses and the banks' read
            # addresses (the ULX3S build's longest path with them).
            hit_bits = [Signal(cols, name=f"bank_hits{b}") for b in range(config.act_banks)]
            hits = [[hit_bits[b][j] for j in range(cols)] for b in range(config.act_banks)]
            if config.pair_products:
                phase = Signal(name="s1_phase")
                rows = tuple([Signal(aw - bb, name=f"lane_{half}_row{j}") for j in range(cols)]
                             for half in ("low", "high"))
        else:
            m.submodules.arbiter = arbiter = BankArbiter(reads, config.act_banks, same_banks=True)
            # The reads' banks, and which of them are the same, in flip-flops (_gather_load):
            # the address adders' carries and the banks' compares no longer sit in front of
            # the arbitration, whose end loads the next beat.
            banks = [Signal(bb, name=f"s1_bank{j}") for j in range(reads)]
            same = Signal.like(arbiter.same, name="s1_same_bank")
            m.d.comb += arbiter.same.eq(same)
            # Whether this is the beat's last gather cycle, in a flip-flop loaded from the next
            # state: the arbitration no longer sits in front of the load of the next beat.
            alone = Signal(name="s1_alone")
            for j in range(reads):
                koff = s1_koff if j < cols else s1_koff_odd
                m.d.comb += addresses[j].eq(s1_base[j % cols] + koff)
            m.d.comb += arbiter.pending.eq(Mux(s1_full, s1_pend, 0))
            served, remaining = arbiter.served, arbiter.remaining
            s1_slot, s1_cycles, s1_count, s1_final_cycle = [], None, None, None
            hits = bank_hits(config, banks, served)      # hits[bank][lane]
        if rows:
            words = self._route_pairs(hits, rows)
        else:
            words, _, _ = route_to_banks(m, config, addresses, served, hits=hits)
        for b in range(config.act_banks):
            m.d.comb += self.bank_addr[b].eq(words[b])
        m.d.comb += self.w_addr.eq(s1_waddr)
        if not config.pipeline_registers:       # else from the stall's copies (_stall_copies)
            m.d.comb += [self.bank_en.eq(~stall), self.w_en.eq(~stall)]

        beat_done = Signal()
        if rows:
            m.d.comb += beat_done.eq(s1_full & s1_final_cycle & (~self._split_pass() | phase))
        elif config.pipeline_registers:
            m.d.comb += beat_done.eq(s1_full & s1_final_cycle)
        else:
            m.d.comb += beat_done.eq(s1_full & alone)
        return _Gather(s1_base, s1_tvalid, s1_koff, s1_pend, s1_waddr, s1_last, s1_channel, remaining, hits,
                       beat_done, addresses, s1_slot, s1_cycles, s1_count, s1_final_cycle, served,
                       s1_koff_odd, phase, rows, banks, same, alone)

    def _route_pairs(self, hits, rows):
        """With pair products and the pipeline registers: each bank's word address, the row
        of the lane that reads it, from the lower half of the banks or the upper
        (``_Gather.rows``): a bank's multiplexer has one input a lane, as without pairs."""
        config = self.config
        banks, half = config.act_banks, max(1, config.act_banks // 2)
        return [one_hot_select(hits[b], rows[0] if b < half else rows[1]) for b in range(banks)]

    def _gather_load(self, m, gather, *, stall, s1_full, load, first, tile, beat):
        """The gather stage (S1), its registers: a beat enters on ``load`` (with its tile's lanes
        on ``first``), and leaves when its lanes are all read (``gather.done``)."""
        config = self.config
        koff_odd = beat.koff + self.regs.in_cstride     # without the pipeline registers
        with m.If(self._start):
            m.d.sync += s1_full.eq(0)
        with m.Elif(~stall):
            m.d.sync += s1_full.eq(load | (s1_full & ~gather.done))
        if config.pipeline_registers:
            pairs = config.pair_products
            cycles = Mux(first, tile.cycles, gather.cycles)
            # With pairs in two passes: the first pass ends, the second begins (``load`` and
            # ``switch`` imply ``~stall``).
            switch = ~stall & s1_full & gather.final_cycle & ~gather.done if pairs else None
            update(m, gather.count, gather.count + 1, enable=~stall & s1_full,
                   reset=~stall & (load | switch) if pairs else ~stall & load)
            with m.If(~stall & load):
                m.d.sync += gather.final_cycle.eq(cycles == 1)
            with m.Elif(~stall & s1_full):
                following_final = gather.count + 2 == gather.cycles
                if pairs:
                    following_final = Mux(gather.final_cycle, gather.cycles == 1, following_final)
                m.d.sync += gather.final_cycle.eq(following_final)
            # The lanes read in the next cycle, from the next state of the stage, the count
            # and the schedule (``load`` implies ``~stall``): the schedule's compare is no
            # longer in front of the banks' read-address multiplexers.
            next_count = Mux(gather.final_cycle, 0, gather.count + 1) if pairs else gather.count + 1
            following_load = Mux(first, _reads_in(tile.valid, tile.slot, 0),
                                 _reads_in(gather.tvalid, gather.slot, 0))
            following_stay = Mux(s1_full & ~gather.done,
                                 _reads_in(gather.tvalid, gather.slot, next_count), 0)
            update(m, gather.served, Mux(load, following_load, following_stay),
                   enable=~stall, reset=self._start)
            update(m, gather.cycles, tile.cycles, enable=load & first)
            bb = config.bank_bits
            # Each lane's bank after this cycle, if a beat loads and if not.
            banks_load, banks_stay = [], []
            offsets = [beat.koff] if beat.koff_odd is None else [beat.koff, beat.koff_odd]
            sums = []
            for j in range(len(gather.addr)):
                lane = j % config.cols
                if j < config.cols:
                    update(m, gather.slot[j], tile.slot[j], enable=load & first)
                # The lane addresses in flip-flops, summed as the beat loads: the adders no
                # longer sit in front of the bank schedule and the banks' read addresses.
                summed = Signal(config.act_addr_width, name=f"lane_sum{j}")
                m.d.comb += summed.eq(Mux(first, tile.addr[lane], gather.base[lane])
                                      + offsets[j // config.cols])
                update(m, gather.addr[j], summed, enable=load)
                sums.append(summed)
                if not pairs:
                    banks_load.append(summed[:bb])
                    banks_stay.append(gather.addr[j][:bb])
            if pairs:
                update(m, gather.phase, 1, enable=switch, reset=load)
                banks_load, banks_stay = self._pair_lanes(m, gather, sums, load=load, switch=switch)
                hits_of = self._pair_hits
            else:
                hits_of = functools.partial(bank_hits, config)
            # The hits the next cycle's served lanes make, loaded as those lanes are; both
            # outcomes side by side, ``load`` choosing between them last (it was in front of
            # the banks' compares).
            for row, if_load, if_stay in zip(gather.hits, hits_of(banks_load, following_load),
                                             hits_of(banks_stay, following_stay)):
                update(m, Cat(row), Mux(load, Cat(if_load), Cat(if_stay)), enable=~stall,
                       reset=self._start)
        else:
            lanes = Mux(first, tile.valid, gather.tvalid)
            if config.pair_products:        # then each lane's odd channel's (reads cols + j)
                lanes = Cat(lanes, Mux(beat.odd, lanes, 0))
            update(m, gather.pend, Mux(load, lanes, gather.remaining), enable=~stall & (load | s1_full))
            bb = config.bank_bits
            banks = []
            for j, bank in enumerate(gather.banks):
                lane = j % config.cols
                base = Mux(first, tile.addr[lane], gather.base[lane])
                koff = beat.koff if j < config.cols else koff_odd
                banks.append(Signal(bb, name=f"s1_bank_next{j}"))
                m.d.comb += banks[-1].eq(base[:bb] + koff[:bb])
                update(m, bank, banks[-1], enable=load)
            same = BankArbiter.same_of(banks)
            update(m, gather.same, same, enable=load)
            update(m, gather.alone, Mux(load, BankArbiter.all_served(lanes, same),
                                        BankArbiter.all_served(gather.remaining, gather.same)),
                   enable=~stall & (load | s1_full))
        update(m, gather.tvalid, tile.valid, enable=load & first)
        for j in range(config.cols):
            update(m, gather.base[j], tile.addr[j], enable=load & first)
        if not config.pipeline_registers:      # else summed into the addresses at load
            update(m, gather.koff, beat.koff, enable=load)
        if config.pair_products and not config.pipeline_registers:
            update(m, gather.koff_odd, koff_odd, enable=load)
        update(m, gather.waddr, beat.waddr, enable=load)
        update(m, gather.last, beat.last, enable=load)
        if config.diagonal_weights:
            update(m, gather.channel, beat.channel, enable=load)

    def _pair_lanes(self, m, gather, sums, *, load, switch):
        """With pair products and the pipeline registers: each lane's word addresses in the
        lower and the upper half of the banks (``gather.rows``), loaded with the beat from its
        summed addresses ``sums`` (channel ``c``'s, then ``c + 1``'s), and in two passes the
        second channel's at the ``switch``. Returns each lane's bank after this cycle, the
        first channel's, or in the second pass the second's: if a beat loads, and if not."""
        config = self.config
        cols, bb = config.cols, config.bank_bits
        superbank = self._superbank
        banks_load, banks_stay = [], []
        for j in range(cols):
            even, odd = sums[j], sums[cols + j]
            upper = even[bb - 1] if bb else C(0, 1)   # the first read's bank is in the upper half
            low, high = gather.rows[0][j], gather.rows[1][j]
            with m.If(load):
                m.d.sync += [low.eq(Mux(superbank & upper, odd[bb:], even[bb:])),
                             high.eq(Mux(superbank & ~upper, odd[bb:], even[bb:]))]
            with m.Elif(switch):
                m.d.sync += [low.eq(gather.addr[cols + j][bb:]), high.eq(gather.addr[cols + j][bb:])]
            second = gather.phase | switch
            banks_load.append(even[:bb])
            banks_stay.append(Mux(second, gather.addr[cols + j][:bb], gather.addr[j][:bb]))
        return banks_load, banks_stay

    def _pair_hits(self, banks, served):
        """``hits[bank][lane]`` of pair reads: lane ``j`` (if ``served``) reads its bank,
        ``banks[j]``, and in a superbank the other bank of it too."""
        config = self.config
        bb, half = config.bank_bits, max(1, config.act_banks // 2)
        hits = []
        for b in range(config.act_banks):
            row = []
            for j, bank in enumerate(banks):
                same_low = bank[:bb - 1] == b % half if bb > 1 else C(1, 1)
                same_top = (bank[bb - 1] == b // half) | self._superbank if bb else C(1, 1)
                row.append(served[j] & same_low & same_top)
            hits.append(row)
        return hits

    def _output_stage(self, m, stall, valid, valid_in, *loads):
        """A register stage of the output path: ``valid`` (cleared at start) and the
        statements ``loads`` advance unless the offered beat waits."""
        update(m, valid, valid_in, enable=~stall, reset=self._start)
        with m.If(~stall):
            for statements in loads:
                m.d.sync += statements

    def _output(self, m, *, stall, o_valid, o_read, gather):
        """The output stage (S2): the bytes read in the beat's gather cycles, offered on
        ``operands`` (``o_valid``); drives ``stall``. With the pipeline registers the bytes
        come a cycle later (``o_read`` is the stage between: the banks' registers,
        ``config.act_read_latency``), the weight word beside them through the weight
        buffer's register, and it returns the offer's ``free`` (:meth:`_offer`)."""
        config = self.config
        cols, banks = config.cols, config.act_banks
        reads = cols * config.products_per_pe
        done, last, channel = gather.done, gather.last, gather.channel
        diagonal = config.diagonal_weights
        # What each read (with pairs in superbanks, each lane) took from the banks in a gather
        # cycle, carried to the cycle its bytes arrive: the banks it hit.
        pair_lanes = bool(gather.rows)
        taken = (self._pair_reads(gather) if pair_lanes
                 else [Cat(gather.hits[b][j] for b in range(banks)) for j in range(reads)])
        if config.act_read_latency == 2:
            hit_r = [Signal(len(took), name=f"hit_r{j}") for j, took in enumerate(taken)]
            o_last_r = Signal()
            o_channel_r = Signal(config.rows, name="o_channel_r") if diagonal else None
            self._output_stage(m, stall, o_read, done, [o_last_r.eq(last)],
                               [o_channel_r.eq(channel)] if diagonal else [],
                               [register.eq(took) for register, took in zip(hit_r, taken)])
            taken = hit_r
            done, last, channel = o_read, o_last_r, o_channel_r

        o_last = Signal()
        o_channel = Signal(config.rows, name="o_channel") if diagonal else None
        hit_d = [Signal(len(took), name=f"hit_d{j}") for j, took in enumerate(taken)]  # read j hit bank b
        b_hold = [Signal(8, name=f"b_hold{j}") for j in range(reads)]

        b_cur = [Signal(8, name=f"b_cur{j}") for j in range(reads)]
        if pair_lanes:
            self._pair_bytes(m, hit_d, b_hold, b_cur)
        else:
            # One-hot AND-OR selection of the byte each read got last cycle (or its held byte).
            for j in range(reads):
                m.d.comb += b_cur[j].eq(one_hot_select(hit_d[j], [self.bank_data[b] for b in range(banks)],
                                                       start=Mux(hit_d[j].any(), 0, b_hold[j])))
        self._output_stage(m, stall, o_valid, done, [o_last.eq(last)],
                           [o_channel.eq(channel)] if diagonal else [],
                           [b_hold[j].eq(b_cur[j]) for j in range(reads)],
                           [register.eq(took) for register, took in zip(hit_d, taken)])
        if config.pair_products:
            b_cur = [Cat(b_cur[j], b_cur[cols + j]) for j in range(cols)]
        # Row i's weight bytes: byte i, or bytes 2i and 2i + 1 with pair products.
        halves = config.products_per_pe
        row_bytes = [[self.w_data[8 * (halves * i + h):8 * (halves * i + h) + 8] for h in range(halves)]
                     for i in range(config.rows)]
        if diagonal:
            # Row i's byte h is the weight of channel c + h: kept where that is channel i.
            keep = [o_channel] + ([Cat(C(0, 1), o_channel)] if halves == 2 else [])
            row_bytes = [[Mux(~self.diagonal | keep[h][i], byte, 0) for h, byte in enumerate(row)]
                         for i, row in enumerate(row_bytes)]
        a_cur = [row[0] if halves == 1 else Cat(*row) for row in row_bytes]
        payload = self.operands.payload
        if config.pipeline_registers:
            return self._offer(m, stall, o_valid, o_last, b_cur, a_cur)
        else:
            m.d.comb += [self.operands.valid.eq(o_valid), payload.last.eq(o_last)]
            m.d.comb += [payload.b[j].eq(b_cur[j]) for j in range(cols)]
            m.d.comb += [payload.a[i].eq(a_cur[i]) for i in range(config.rows)]
            m.d.comb += stall.eq(self.operands.valid & ~self.operands.ready)

    def _pair_reads(self, gather):
        """With pair products and the pipeline registers: what each lane reads in a gather
        cycle, ``Cat(superbanks, first, second, first_upper, second_upper)``: the superbank it
        reads (one-hot, ``act_banks / 2`` bits), whether that brings its first channel, its
        second, and from which half of the superbank (the upper bank, ``b + act_banks / 2``)."""
        config = self.config
        banks, bb, half = config.act_banks, config.bank_bits, max(1, config.act_banks // 2)
        hits, cols = gather.hits, config.cols
        taken = []
        for j in range(cols):
            superbanks = Cat((hits[s][j] | hits[s + half][j]) if banks > 1 else hits[s][j]
                             for s in range(half))
            reads = superbanks.any()
            first_upper = gather.addr[j][bb - 1] if bb else C(0, 1)
            second_upper = (Mux(self._superbank, ~first_upper, gather.addr[cols + j][bb - 1]) if bb
                            else C(0, 1))
            taken.append(Cat(superbanks, reads & ~gather.phase, reads & (gather.phase | self._superbank),
                             first_upper, second_upper))
        return taken

    def _pair_bytes(self, m, taken, held, current):
        """With pair products and the pipeline registers: lane ``j``'s two bytes ``current[j]``
        and ``current[cols + j]``, the superbank's word its reads ``taken[j]`` hit last cycle
        (:meth:`_pair_reads`), each half where it was read, or the byte ``held``."""
        config = self.config
        banks, cols, half = config.act_banks, config.cols, max(1, config.act_banks // 2)
        upper = half if banks > 1 else 0
        words = [Cat(self.bank_data[s], self.bank_data[s + upper]) for s in range(half)]
        for j in range(cols):
            superbanks, took = taken[j][:half], taken[j][half:]
            word = one_hot_select(superbanks, words)
            for channel in range(2):
                byte = Mux(took[2 + channel], word[8:], word[:8])
                m.d.comb += current[channel * cols + j].eq(
                    Mux(took[channel], byte, held[channel * cols + j]))

    def _offer(self, m, stall, o_valid, o_last, b_cur, a_cur):
        """With the pipeline registers: the offer register and a skid register behind it.
        Returns ``free``: the offer register takes a beat this cycle.

        The stages freeze (``stall``) while the skid holds a beat, a flip-flop: the consumer's
        ``ready`` reaches only these two registers, not the stages' enables and the block
        RAMs' (the stall's fan-out to the weight buffer's 144 block RAMs and their registers
        was the ULX3S build's longest path). The stages then freeze a cycle late, one beat
        further on, that beat in the skid, and move on again a cycle late. Until a beat
        reaches the skid they keep moving through bubbles, so a beat behind a waiting one can
        be offered earlier than with the stall taken straight from ``ready``, never later
        (:mod:`fpganet.perf` counts it).
        """
        config = self.config
        layout = operand_layout(config)
        beat = Signal(layout, name="beat")        # the beat the output stage has
        skid = Signal(layout, name="skid")
        skid_valid = Signal()
        m.d.comb += [beat.last.eq(o_last),
                     *[beat.b[j].eq(b_cur[j]) for j in range(config.cols)],
                     *[beat.a[i].eq(a_cur[i]) for i in range(config.rows)]]
        leaves = o_valid & ~skid_valid          # the stages move on: the output stage's beat leaves
        free = ~self.operands.valid | self.operands.ready
        with m.If(self._start):
            m.d.sync += [self.operands.valid.eq(0), skid_valid.eq(0)]
        with m.Elif(free):
            m.d.sync += [self.operands.valid.eq(skid_valid | leaves), skid_valid.eq(0)]
        with m.Elif(leaves):
            m.d.sync += skid_valid.eq(1)
        with m.If(free):
            m.d.sync += self.operands.payload.eq(Mux(skid_valid, skid, beat))
        update(m, skid, beat, enable=~free & ~skid_valid)
        m.d.comb += stall.eq(skid_valid)
        return free

    def _stall_copies(self, m, o_valid, free, walker_stall):
        """With the pipeline registers: copies of ``skid_valid`` (the stall), flip-flops that
        load as it does, for the memories' read enables (one per weight block, one for the
        activation banks) and for the lane walker. The one flip-flop's net to the 144 weight
        block RAMs' enables took 12.9 ns of routing on the ULX3S, and its net to the stages,
        3.6 ns, began the walker's longest path. Each copy's load reads its own output, so
        Yosys cannot merge them (a keep attribute does not stop it)."""
        copies = Signal(self.config.weight_blocks + 2, name="stall_copies")
        for i in range(len(copies)):
            with m.If(self._start | free):
                m.d.sync += copies[i].eq(0)
            with m.Elif(o_valid & ~copies[i]):
                m.d.sync += copies[i].eq(1)
        m.d.comb += [self.w_en.eq(~copies[:-2]), self.bank_en.eq(~copies[-2]),
                     walker_stall.eq(copies[-1])]
