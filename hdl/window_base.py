"""The window generator's stages that both its variants share (:mod:`fpganet.hdl.window`):
the signature, the lane walker, the beat sequencer and the output stage.

A variant supplies the gather stage's reads (:meth:`WindowGenerator._gather`,
:meth:`WindowGenerator._gather_reads_load`) and the offer (:meth:`WindowGenerator._offer`):
:class:`~fpganet.hdl.window_arbitrated.ArbitratedWindowGenerator` arbitrates the banks each
cycle, :class:`~fpganet.hdl.window_scheduled.ScheduledWindowGenerator` follows a bank
schedule the lane walker computes ahead.
"""

from typing import NamedTuple

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import BINARY_WEIGHT_BEATS, PACKED_WEIGHT_BITS

from .memories import one_hot_select
from .registers import count_down, next_value, register_layout, registered_wrap, update
from .systolic import operand_layout

__all__ = ["WindowGenerator"]


class _Tile(NamedTuple):
    """The tile the lane walker has walked, for its first beat to load."""
    addr: list         # lane j: IN_BASE + g*IN_GSTEP + in_off[j]
    valid: Value       # bit j: pixel t*LANES + j < NPIX
    group_end: Value   # the tile is its group's last
    final: Value       # ...and the instruction's last
    slot: list         # scheduled: the gather cycle in which lane j reads
    cycles: Value      # ...and the gather cycles of each of the tile's beats


class _Beat(NamedTuple):
    """The beat the sequencer offers to the gather stage."""
    koff: Value        # c*IN_CSTRIDE + ky*IN_PITCH + kx
    waddr: Value       # its weight word
    last: Value        # it closes its tile
    channel: Value     # diagonal_weights: bit i set when c == i
    odd: Value         # pair_products, arbitrated: c + 1 < K_C, its lanes read
    koff_odd: Value    # pair_products, scheduled: the odd channel's offset, koff + IN_CSTRIDE
    nibble: Value = None   # packed_weights, binary_weights: its place in the weight word


class _Gather(NamedTuple):
    """The gather stage's beat and what its lanes read this cycle."""
    base: list         # lane j's address at kernel offset 0 (the tile's)
    tvalid: Value      # the tile's valid lanes
    koff: Value        # the beat's kernel offset
    pend: Value        # lanes still to read
    waddr: Value       # the beat's weight word
    last: Value        # the beat closes its tile
    channel: Value     # diagonal_weights: its channel, one-hot
    hits: list         # hits[bank][lane]: lane reads bank this cycle
    done: Value        # every lane of the held beat is read by the end of this cycle
    addr: list         # lane j's address, base + koff
    served: Value      # the lanes read this cycle
    remaining: Value = None   # arbitrated: lanes left after this cycle
    koff_odd: Value = None    # ...with pair_products: koff + IN_CSTRIDE
    banks: list = ()          # ...each read's bank, a flip-flop loaded with the beat
    same: Value = None        # ...and which two reads share a bank (BankArbiter.same)
    alone: Value = None       # ...and the pending reads' banks are all different: the beat is done
    slot: list = ()           # scheduled: the tile's bank schedule (_Tile.slot, .cycles)
    cycles: Value = None
    count: Value = None       # ...the beat's gather cycle
    final_cycle: Value = None # ...which is its last (a flip-flop, loaded from the next state)
    phase: Value = None       # ...with pair_products: the second pass (the lanes' second channels)
    rows: tuple = ()          # ...lane j's word address in the lower and in the upper half of the banks
    nibble: Value = None      # packed_weights, binary_weights: the beat's place in its word


class WindowGenerator(wiring.Component):
    """Engine address generation and gather: the stages both variants share. Build one with
    :func:`fpganet.hdl.window.window_generator`.

    Parameters
    ----------
    config : AcceleratorConfig

    Members
    -------
    start : In(1)
        Pulse: begin the walk of the registers in ``regs`` (held stable until the
        instruction ends). ``GROUPS``, ``TILES``, ``LANES``, ``K_C``, ``K_H``,
        ``K_W`` must be non-zero (the controller does not start an empty walk). With
        ``config.window_start_latency`` 1 it is registered on entry: the window acts on it
        a cycle late.
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
        weight buffer: in the scheduled variant each a flip-flop of its own (the stall's
        copies), so that no one net reaches every block RAM.
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
    packed : In(1)
        With ``config.packed_weights`` only: the walk is a ``CONV packed`` (held from the cycle
        after ``start``): the weight address steps every other beat, going back to the block's
        start where it would without packing, and each weight byte is its low nibble in the
        block's even beats, its high nibble in the odd ones, sign-extended. No cycle changes:
        the nibble's multiplexer is behind the weight buffer, in front of the offer.
    binary : In(1)
        With ``config.binary_weights`` only: the walk is a ``CONV binary`` (held from the cycle
        after ``start``): the weight address steps every eighth beat, going back to the block's
        start where it would without packing, and each weight byte is its bit ``k % 8`` in the
        block's beat ``k``, 1 as +1 and 0 as -1. No cycle changes.
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
            **({"packed": In(1)} if config.packed_weights else {}),
            **({"binary": In(1)} if config.binary_weights else {}),
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
        self._instruction_flags(m)

        # Between the stages. The helpers are called, and emit their logic, in pipeline order.
        stall = Signal()       # the offered beat is not taken: every stage holds
        # ...as the lane walker sees it (_walker_stall_signal).
        walker_stall = self._walker_stall = self._walker_stall_signal()
        running = Signal()     # between start and the final beat leaving
        s_finished = Signal()  # every beat has entered the gather stage
        s1_full = Signal()     # the gather stage holds a beat
        o_valid = Signal()     # the output stage offers a beat
        o_read = Signal()      # act_read_latency 2: a beat's bytes on the block RAMs' outputs
        load = Signal()        # a beat enters the gather stage...
        first = Signal()       # ...the first of its tile
        start_walk = Signal()  # ...and a tile follows it: walk that one now
        w_ready = Signal()     # the walked tile waits for its first beat to load

        start = self._start
        with m.If(start):
            m.d.sync += running.eq(1)
        with m.Elif(self._drained(s_finished & ~s1_full & ~o_valid, o_read)):
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
        self._output(m, stall=stall, o_valid=o_valid, o_read=o_read, gather=gather)
        return m

    def _instruction_flags(self, m):
        """Flags of the instruction a variant loads at its start (none here)."""
        self._odd_reads = self._superbank = None

    def _walker_stall_signal(self):
        """The stall as the lane walker sees it: none. The walker fills registers that only
        the next tile's first load reads, which the stall holds anyway, so it may run on."""
        return C(0, 1)

    def _drained(self, drained, o_read):
        """Every beat has left, given ``drained``: none is in the gather or the output stage;
        with ``config.act_read_latency`` 2 none on the banks' registers (``o_read``) either."""
        return drained & ~o_read if self.config.act_read_latency == 2 else drained

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
        lane_wrap = self._lane_wrap(m, lane=lane, w_lane=w_lane, restart=start | walker_first, step=walk)
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
        slots, cycles = self._tile_schedule(
            m, walk=walk, lane=lane, valid=w_n < regs.npix, idle=~w_busy,
            gbase=Mux(start, regs.in_base, next_value(w_gbase, next_gbase, enable=group_end)),
            inoff=next_value(w_inoff, next_inoff, enable=walk, reset=restart))
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

    def _lane_wrap(self, m, *, lane, w_lane, restart, step):
        """The walked lane ``lane`` (the counter ``w_lane``, which ``restart`` clears and
        ``step`` advances) is the tile's last."""
        return lane + 1 == self.regs.lanes

    def _tile_schedule(self, m, *, walk, lane, valid, idle, gbase, inoff):
        """The gather's bank schedule of the tile being walked, ``(slots, cycles)``: none
        here, ``([], None)``. ``gbase`` and ``inoff`` are the next values of the walker's group
        base and lane offset registers, whose sum is the next walked lane's address."""
        return [], None

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
        registered = self._rewind_at_tile_end
        kx_wrap = count_down(m, kx, regs.k_w, restart=start, step=load, registered=True)
        ky_wrap = count_down(m, ky, regs.k_h, restart=start, step=load & kx_wrap, registered=True)
        # Channels left, two a beat with pair products: the last beat has one or two.
        kc_wrap = count_down(m, kc, regs.k_c, restart=start, step=load & kx_wrap & ky_wrap,
                             by=config.products_per_pe, registered=True)
        m.d.comb += [
            beat_last.eq(kx_wrap & ky_wrap & kc_wrap),
            tile_done.eq(load & beat_last),
            group_done.eq(Mux(first, tile.group_end, s_group_end)),
        ]
        update(m, s_group_end, tile.group_end, enable=load & first)
        update(m, s_final, tile.final, enable=load & first)
        restart = start if registered else start | tile_done
        walk = dict(load=load, restart=restart, rewind=beat_last if registered else None,
                    kx_wrap=kx_wrap, ky_wrap=ky_wrap)
        koff = self._kernel_offset(m, **walk)
        odd, koff_odd = self._odd_channel(m, kc, walk)
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
        following, nibble = waddr + 1, None
        if config.binary_weights:
            # Binary: beat k of a block reads bit k % 8 of word k // 8 (and packed, as below).
            nibble = Signal(self._slot_width, name="s0_nibble")
            stay = self.binary & (nibble != BINARY_WEIGHT_BEATS - 1)
            if config.packed_weights:
                stay |= self.packed & ~nibble[0]
            following = Mux(stay, waddr, following)
            update(m, nibble, Mux(~rewind & stay, nibble + 1, 0), enable=load, reset=start)
        elif config.packed_weights:
            # Packed: the even beat of a block reads the word's low nibbles and the odd beat,
            # the high ones, of the same word.
            nibble = Signal(name="s0_nibble")
            stay = self.packed & ~nibble
            following = Mux(stay, waddr, following)
            update(m, nibble, ~rewind & stay, enable=load, reset=start)
        with m.If(start):
            m.d.sync += [waddr.eq(regs.w_base), wbase.eq(regs.w_base)]
        with m.Elif(load):
            m.d.sync += waddr.eq(Mux(rewind, Mux(onward, next_wbase, wbase), following))
            with m.If(beat_last & group_done):
                m.d.sync += wbase.eq(next_wbase)
        with m.If(start):
            m.d.sync += [mid.eq(0), finished.eq(0)]
        with m.Elif(load):
            m.d.sync += mid.eq(~beat_last)
            with m.If(beat_last & Mux(first, tile.final, s_final)):
                m.d.sync += finished.eq(1)
        return _Beat(koff, waddr, beat_last, channel, odd, koff_odd, nibble)

    #: A tile's last beat loads the kernel walk's origin instead of resetting to it (the reset
    #: waits for ``load``, its compares; the multiplexer only for the registered wraps).
    _rewind_at_tile_end = False

    def _odd_channel(self, m, kc, walk):
        """With pair products, the beat's odd channel: ``(odd, koff_odd)`` of :class:`_Beat`,
        from ``kc``, the channels left, and ``walk``, :meth:`_kernel_offset`'s arguments."""
        return None, None

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
        """The gather stage (S1), its reads: while the stage holds a beat (``s1_full``), the
        variant serves one lane per bank a cycle (:meth:`_serve`), and the beat's weight word
        is read. Returns a :class:`_Gather` (:meth:`_gather_load` loads its registers).
        """
        config = self.config
        aw, ww, cols = config.act_addr_width, config.weight_addr_width, config.cols

        s1_base = [Signal(aw, name=f"s1_base{j}") for j in range(cols)]
        s1_tvalid = Signal(cols)
        s1_koff = Signal(aw)
        s1_pend = Signal(cols * config.products_per_pe, name="s1_pend")
        s1_waddr = Signal(ww)
        s1_last = Signal()
        s1_channel = Signal(config.rows, name="s1_channel") if config.diagonal_weights else None
        s1_nibble = Signal(self._slot_width, name="s1_nibble") if self._slot_width else None

        # The reads of a beat: each lane's, and with pair products each lane's odd channel's
        # after them (lanes cols + j).
        reads = cols * config.products_per_pe
        addresses = [Signal(aw, name=f"lane_addr{j}") for j in range(reads)]
        return self._serve(m, stall=stall, s1_full=s1_full, stage=dict(
            base=s1_base, tvalid=s1_tvalid, koff=s1_koff, pend=s1_pend, waddr=s1_waddr,
            last=s1_last, channel=s1_channel, addr=addresses, nibble=s1_nibble))

    def _serve(self, m, *, stall, s1_full, stage):
        """The variant's reads of the gather stage's beat, whose registers ``stage`` holds
        (:class:`_Gather`'s first fields): it drives the read ports (:meth:`_read_ports`) and
        returns the :class:`_Gather`."""
        raise NotImplementedError

    def _read_ports(self, m, words, waddr):
        """Each activation bank's word address ``words[bank]``, and the weight word ``waddr``."""
        for b in range(self.config.act_banks):
            m.d.comb += self.bank_addr[b].eq(words[b])
        m.d.comb += self.w_addr.eq(waddr)

    def _gather_load(self, m, gather, *, stall, s1_full, load, first, tile, beat):
        """The gather stage (S1), its registers: a beat enters on ``load`` (with its tile's lanes
        on ``first``), and leaves when its lanes are all read (``gather.done``)."""
        config = self.config
        with m.If(self._start):
            m.d.sync += s1_full.eq(0)
        with m.Elif(~stall):
            m.d.sync += s1_full.eq(load | (s1_full & ~gather.done))
        self._load_reads(m, gather, stall=stall, s1_full=s1_full, load=load, first=first,
                         tile=tile, beat=beat)
        update(m, gather.tvalid, tile.valid, enable=load & first)
        for j in range(config.cols):
            update(m, gather.base[j], tile.addr[j], enable=load & first)
        self._load_offsets(m, gather, beat, load=load)
        update(m, gather.waddr, beat.waddr, enable=load)
        update(m, gather.last, beat.last, enable=load)
        if config.diagonal_weights:
            update(m, gather.channel, beat.channel, enable=load)
        if self._slot_width:
            update(m, gather.nibble, beat.nibble, enable=load)

    def _load_reads(self, m, gather, *, stall, s1_full, load, first, tile, beat):
        """The variant's registers of the gather stage's reads, loaded with a beat."""
        raise NotImplementedError

    def _load_offsets(self, m, gather, beat, *, load):
        """The beat's kernel offsets, loaded with it (none here)."""

    def _output_stage(self, m, stall, valid, valid_in, *loads):
        """A register stage of the output path: ``valid`` (cleared at start) and the
        statements ``loads`` advance unless the offered beat waits."""
        update(m, valid, valid_in, enable=~stall, reset=self._start)
        with m.If(~stall):
            for statements in loads:
                m.d.sync += statements

    def _output(self, m, *, stall, o_valid, o_read, gather):
        """The output stage (S2): the bytes read in the beat's gather cycles, offered on
        ``operands`` (``o_valid``, :meth:`_offer`), which drives ``stall``. With
        ``config.act_read_latency`` 2 the bytes come a cycle later (``o_read`` is the stage
        between: the banks' registers), the weight word beside them through the weight
        buffer's register."""
        config = self.config
        cols = config.cols
        reads = cols * config.products_per_pe
        done, last, channel, nibble = gather.done, gather.last, gather.channel, gather.nibble
        diagonal, slot = config.diagonal_weights, self._slot_width
        taken = self._taken(gather)
        if config.act_read_latency == 2:
            hit_r = [Signal(len(took), name=f"hit_r{j}") for j, took in enumerate(taken)]
            o_last_r = Signal()
            o_channel_r = Signal(config.rows, name="o_channel_r") if diagonal else None
            o_nibble_r = Signal(slot, name="o_nibble_r") if slot else None
            self._output_stage(m, stall, o_read, done, [o_last_r.eq(last)],
                               [o_channel_r.eq(channel)] if diagonal else [],
                               [o_nibble_r.eq(nibble)] if slot else [],
                               [register.eq(took) for register, took in zip(hit_r, taken)])
            taken = hit_r
            done, last, channel, nibble = o_read, o_last_r, o_channel_r, o_nibble_r

        o_last = Signal()
        o_channel = Signal(config.rows, name="o_channel") if diagonal else None
        o_nibble = Signal(slot, name="o_nibble") if slot else None
        hit_d = [Signal(len(took), name=f"hit_d{j}") for j, took in enumerate(taken)]  # read j hit bank b
        b_hold = [Signal(8, name=f"b_hold{j}") for j in range(reads)]

        b_cur = [Signal(8, name=f"b_cur{j}") for j in range(reads)]
        self._arrived_bytes(m, hit_d, b_hold, b_cur)
        self._output_stage(m, stall, o_valid, done, [o_last.eq(last)],
                           [o_channel.eq(channel)] if diagonal else [],
                           [o_nibble.eq(nibble)] if slot else [],
                           [b_hold[j].eq(b_cur[j]) for j in range(reads)],
                           [register.eq(took) for register, took in zip(hit_d, taken)])
        if config.pair_products:
            b_cur = [Cat(b_cur[j], b_cur[cols + j]) for j in range(cols)]
        # Row i's weight bytes: byte i, or bytes 2i and 2i + 1 with pair products.
        halves = config.products_per_pe
        row_bytes = [[self.w_data[8 * (halves * i + h):8 * (halves * i + h) + 8] for h in range(halves)]
                     for i in range(config.rows)]
        if slot:
            row_bytes = [[self._unpacked(byte, o_nibble) for byte in row] for row in row_bytes]
        if diagonal:
            # Row i's byte h is the weight of channel c + h: kept where that is channel i.
            keep = [o_channel] + ([Cat(C(0, 1), o_channel)] if halves == 2 else [])
            row_bytes = [[Mux(~self.diagonal | keep[h][i], byte, 0) for h, byte in enumerate(row)]
                         for i, row in enumerate(row_bytes)]
        a_cur = [row[0] if halves == 1 else Cat(*row) for row in row_bytes]
        self._offer(m, stall, o_valid, o_last, b_cur, a_cur)

    @property
    def _slot_width(self):
        """Bits of a beat's place in its weight word: 3 with ``config.binary_weights`` (eight
        beats), 1 with ``config.packed_weights`` alone, else none."""
        config = self.config
        if config.binary_weights:
            return (BINARY_WEIGHT_BEATS - 1).bit_length()
        return 1 if config.packed_weights else 0

    def _unpacked(self, byte, slot):
        """A weight byte as the array takes it: in a ``CONV packed`` its high nibble where
        ``slot`` is odd, else its low one, sign-extended (isa.PACKED_WEIGHT_BITS); in a ``CONV
        binary`` its bit ``slot`` as -1 or +1 (isa.BINARY_WEIGHT_BEATS); else the byte."""
        weight = byte
        if self.config.packed_weights:
            bits = PACKED_WEIGHT_BITS
            high = slot if len(slot) == 1 else slot[0]
            nibble = Mux(high, byte[bits:2 * bits], byte[:bits])
            weight = Mux(self.packed, Cat(nibble, nibble[bits - 1].replicate(8 - bits)), weight)
        if self.config.binary_weights:
            weight = Mux(self.binary, Mux(byte.bit_select(slot, 1), C(1, 8), C(0xFF, 8)), weight)
        return weight

    def _taken(self, gather):
        """What each read took from the banks in a gather cycle, carried to the cycle its
        bytes arrive: the banks it hit (one-hot)."""
        reads = self.config.cols * self.config.products_per_pe
        return [Cat(gather.hits[b][j] for b in range(self.config.act_banks)) for j in range(reads)]

    def _arrived_bytes(self, m, taken, held, current):
        """Each read's byte ``current[j]``: one-hot AND-OR selection of the byte it got last
        cycle (``taken[j]``, the banks it hit), or its ``held`` byte."""
        banks = self.config.act_banks
        for j, hit in enumerate(taken):
            m.d.comb += current[j].eq(one_hot_select(hit, [self.bank_data[b] for b in range(banks)],
                                                     start=Mux(hit.any(), 0, held[j])))

    def _offer(self, m, stall, o_valid, o_last, b_cur, a_cur):
        """The variant's offer of the output stage's beat (``o_valid``, ``o_last``, the
        bytes ``b_cur``, the weight words ``a_cur``) on ``operands``; drives ``stall``."""
        raise NotImplementedError
