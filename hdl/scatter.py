"""The result writer: output addresses, post-processing and the scatter into the activation banks.

It takes the result rows of the systolic array (``CONV``: ``rows`` rows per tile)
or of the max-pool unit (``POOL``: one row per tile), in tile order, and for
each row walks its lanes ``requant_lanes`` at a time (a *lane group*)::

    CONV: act[OUT_BASE + g*OUT_GSTEP + i*OUT_CSTRIDE + out_off[j]] = requantize(sum[i][j])
          for rows i with g*rows + i < M and valid lanes j
    POOL: act[OUT_BASE + g*OUT_GSTEP + out_off[j]] = max[j]           for valid lanes j

and, with ``config.fused_max_pool``, the pooled ``CONV``: rows ``i < M`` of every group read
the parameters at ``P_BASE + i``, and each pair of rows ``2p, 2p + 1`` writes one byte, the
maximum of both rows' requantized bytes over the tile's valid lanes, at row ``2p + 1``'s address
of the tile's last lane (a running maximum beside the write; no cycle changes).

with ``out_off[j] = oy*OUT_PITCH + ox`` of pixel ``n = t*LANES + j`` kept as running
sums (no division, no multiplier).

Timing, all of it fixed by the registers:

* A lane group takes ``max(1, most written lanes in one bank)`` cycles: written
  lanes (valid pixel, live channel) that share a bank are sent down the
  pipeline in successive cycles, each with the lanes it serves, so nothing
  downstream ever stalls. With ``requant_lanes == 1`` every group takes 1 cycle.
* A row takes the sum of its groups' cycles, ``ceil(LANES / requant_lanes)``
  groups; it is taken from the result stream (``ready``) in the cycle of its
  final group, and the next row is processed from the next cycle.
* The bytes are written :attr:`latency` cycles after their group's cycle, and
  ``done`` pulses in the cycle of the final write.

With ``config.pipeline_registers`` the walk runs up to two lane groups ahead of the
group being written, into a queue that carries each group's addresses, flags and bank
schedule (the lowest-lane-first order: the same cycles), so that the first row may come
no earlier than three cycles after ``start``. Its lanes keep a position each, moved
``requant_lanes`` pixels (or a row's last group's lanes) on in closed form: one compare
with a threshold and a choice of two precomputed sums, not a chain of column steps.

The parameter entry of the next row's channel is read when a row is taken, so
it is ready when the next row starts (and in the cycle after ``start`` for the
first). ``start`` is registered on entry: the first row can come no earlier than
the window generator's set-up plus one tile of beats after it.
"""

from types import SimpleNamespace

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import QUANT_LAYOUT

from .memories import BankArbiter, one_hot_select, param_layout, route_to_banks
from .postproc import MULTIPLIERS, requantizer
from .registers import count_down, next_value, register_layout, registered_wrap, update
from .systolic import result_layout

__all__ = ["ResultWriter"]


class ResultWriter(wiring.Component):
    """Post-processes result rows and writes them to the activation buffer.

    Parameters
    ----------
    config : AcceleratorConfig
        ``rows``, ``cols``, ``requant_lanes``, the activation buffer's banks.
    requant_multiplier : str
        The requantizer's ``multiplier`` (:func:`~fpganet.hdl.postproc.requantizer`):
        ``"generic"``, ``"booth"`` (logic cells, for an iCE40 whose DSPs are the array's),
        ``"ice40_dsp"`` (two SB_MAC16 per lane) or ``"shift_add"`` (a shifted copy per
        multiplier bit, for few ``requant_mult_bits``).
    requant_dsp_model : bool
        The requantizer's ``dsp_model`` (SB_MAC16 described in Amaranth, for simulation).

    Members
    -------
    start : In(1)
        Pulse at the start of a ``CONV``/``POOL``; ``regs`` hold until ``done``, from at
        least the cycle before. The first row may be offered :attr:`start_latency` cycles
        after it, not sooner (in the accelerator it comes a whole tile of beats later).
    pool : In(1)
        ``POOL`` mode (held): one row per tile, no requantization, all rows live.
    pooled : In(1)
        With ``config.fused_max_pool`` only: a ``CONV pool`` (held).
    regs : In(register_layout(config))
    results : In(stream.Signature(result_layout(config)))
        Rows in tile order. ``ready`` rises in the cycle of a row's final lane
        group (it never depends on ``valid`` of a later row; with
        ``config.pipeline_registers`` it comes from flip-flops and may be high without
        ``valid``).
    param_addr : Out(param_addr_width)
    param_en : Out(1)
    param_data : In(param_layout())
        The parameter memory's read port.
    wr_addr : Out(ArrayLayout(bank_word_width, act_banks))
    wr_data : Out(ArrayLayout(8, act_banks))
    wr_en : Out(act_banks)
        Writes into the activation banks, at most one per bank per cycle.
    done : Out(1)
        Pulses in the cycle of the instruction's final write.
    """

    def __init__(self, config, *, requant_multiplier="generic", requant_dsp_model=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if requant_multiplier not in MULTIPLIERS:
            raise ValueError(f"requant_multiplier must be one of {MULTIPLIERS}, not {requant_multiplier!r}")
        self.config = config
        self.requant_multiplier = requant_multiplier
        self.requant_dsp_model = requant_dsp_model
        banks = config.act_banks
        super().__init__({
            "start": In(1),
            "pool": In(1),
            **({"pooled": In(1)} if config.fused_max_pool else {}),
            "regs": In(register_layout(config)),
            "results": In(stream.Signature(result_layout(config))),
            "param_addr": Out(config.param_addr_width),
            "param_en": Out(1),
            "param_data": In(param_layout(config.requant_mode)),
            "wr_addr": Out(data.ArrayLayout(config.bank_word_width, banks)),
            "wr_data": Out(data.ArrayLayout(8, banks)),
            "wr_en": Out(banks),
            "done": Out(1),
        })

    @property
    def start_latency(self):
        """Cycles from ``start`` to the first cycle a row may be offered: the walk is reset
        by the start registered once (twice with ``config.pipeline_registers``, whose step
        constants take two stages from the registers) and pushes its first group after."""
        return 4 if self.config.pipeline_registers else 3

    @property
    def latency(self):
        """Cycles from a lane group's cycle to the write of its bytes
        (``config.write_latency``: the requantizer's, and with the pipeline registers the
        register in front of it)."""
        return self.config.write_latency

    def elaborate(self, platform):
        m = Module()
        if self.config.pipeline_registers:
            return self._elaborate_ahead(m)
        # The helpers emit their logic in pipeline order, which is also the statement order
        # of the single elaborate() they came from: the same RTLIL, the same Yosys mapping.
        walk = self._walk_state()
        chain, addresses, writable = self._lane_positions(m, walk)
        arbiter = self._arbiter(m, addresses, Mux(walk.group_started, walk.group_pend, writable))
        flags = self._group_flags(m, walk, arbiter)
        tile_end = self._tile_end(m, walk, chain)
        start, next_chan = self._bookkeeping(m, walk, flags, chain, tile_end, arbiter)
        self._parameter_read(m, start, flags.take, self.regs.p_base + next_chan)
        requant = self._postprocess(m, walk.group, flags.active)
        self._write(m, requant, addresses, arbiter.served, flags.active, flags.final,
                    self._pool_flags(m, walk, flags) if self.config.fused_max_pool else None)
        return m

    def _pool_flags(self, m, walk, flags):
        """``CONV pool``'s flags of the walk's lane group (one lane: ``requant_lanes`` 1): it
        opens a row pair (an even row's first lane), and whether its lane may write (in the
        pooled mode only an odd row's last lane)."""
        opens, writes = Signal(name="pool_opens"), Signal(name="pool_writes")
        m.d.comb += [opens.eq(self.pooled & flags.active & ~walk.row[0] & walk.group[0]),
                     writes.eq(~self.pooled | (walk.row[0] & flags.last_group))]
        return SimpleNamespace(opens=opens, writes=writes)

    def _elaborate_ahead(self, m):
        """With ``config.pipeline_registers``: the walk runs up to two lane groups ahead of the
        group being written. It leaves each group's addresses, write mask, flags, channel and
        bank schedule in a two-entry queue whose head is the group being written. Lane ``l``
        of the head writes in the group's cycle ``slot[l]`` (:meth:`_write_schedule`: what the
        lowest-lane-first arbitration does), so the end of a group is a flip-flop and no bank
        arbitration sits in the writer's control paths; the walk steps whenever the queue had
        room in the previous cycle, so neither does the result stream's ``valid``. It starts in
        the cycle after the registered start, long before the first row: no cycle changes.
        """
        config = self.config
        R, cols, aw, cw = config.requant_lanes, config.cols, config.act_addr_width, config.count_width
        walk = self._walk_state()
        advances = self._advance_constants(m)
        lanes = self._lane_registers()
        addresses, writable = self._lane_addresses(m, walk, lanes.position)
        slots, cycles = self._write_schedule(m, addresses, writable)
        entry = data.StructLayout({
            "addr": data.ArrayLayout(aw, R), "writable": R, "group": cols // R,
            "last_group": 1, "last_row": 1, "tile_wrap": 1, "last_grp": 1,
            "slot": data.ArrayLayout(len(slots[0]), R), "cycles": len(cycles),
            "param_addr": config.param_addr_width})
        queue = [Signal(entry, name=f"queue{i}") for i in range(2)]
        read_ptr, write_ptr = Signal(), Signal()
        held = Signal(range(3))          # groups in the queue
        head = Signal(entry)
        count = Signal.like(cycles)      # the head's write cycle
        final_cycle = Signal()           # ...its last
        step = Signal()                  # the walk pushes its group
        active = Signal()
        group_done = Signal()            # the head is written: pop
        served = Signal(R)
        m.d.comb += [
            head.eq(Mux(read_ptr, queue[1], queue[0])),
            active.eq(self.results.valid),
            group_done.eq(active & final_cycle),
            *[served[l].eq(active & head.writable[l] & (head.slot[l] == count)) for l in range(R)],
        ]
        flags = self._group_flags(m, walk, None, group_done=step)           # the walk's
        done = self._end_flags(m, group_done, head.last_group, head.last_row,
                               head.tile_wrap, head.last_grp)                # the head's
        # Ready from flip-flops alone (the head's last group in its last cycle), not gated by
        # ``valid``: the result queue's take no longer runs from its output flag through the
        # writer and back into its level (the 128-MAC ULX3S build's longest path). A row moves
        # on valid & ready.
        m.d.comb += self.results.ready.eq(final_cycle & head.last_group)
        # The start registered twice: the step constants take two stages from the registers.
        early_start = Signal()
        m.d.sync += early_start.eq(self.start)
        start, next_chan = self._bookkeeping(m, walk, flags, None, None, None,
                                             early_start=early_start)
        # The walk's row's parameter address, p_base + chan, in a register: the sum was in
        # front of the parameter memory's read address (the ULX3S build's longest path).
        param_addr = Signal(config.param_addr_width)
        with m.If(start):
            m.d.sync += param_addr.eq(self.regs.p_base)
        with m.Elif(flags.take):
            m.d.sync += param_addr.eq(self.regs.p_base + next_chan)
        self._advance_lanes(m, lanes, advances, flags, start)
        # The walk is reset in the start's cycle and steps while the queue has room:
        # ~start & (held != 2), loaded a cycle ahead (start follows early_start) so that the
        # walk's resets and enables begin at a flip-flop.
        held_step = dict(value=held + step - group_done, enable=step | group_done, reset=start)
        m.d.sync += step.eq(~early_start & (next_value(held, **held_step) != 2))

        pushed = Signal(entry)
        m.d.comb += [
            *[pushed.addr[l].eq(addresses[l]) for l in range(R)],
            *[pushed.slot[l].eq(slots[l]) for l in range(R)],
            pushed.writable.eq(writable), pushed.group.eq(walk.group),
            pushed.last_group.eq(flags.last_group), pushed.last_row.eq(flags.last_row),
            pushed.tile_wrap.eq(flags.tile_wrap), pushed.last_grp.eq(walk.last_grp),
            pushed.cycles.eq(cycles), pushed.param_addr.eq(param_addr),
        ]
        for i in range(2):
            update(m, queue[i], pushed, enable=step & (write_ptr == i))
        update(m, write_ptr, ~write_ptr, enable=step, reset=start)
        update(m, read_ptr, ~read_ptr, enable=group_done, reset=start)
        update(m, held, **held_step)
        # The group after the head: the queue's other entry, or the one the walk pushes now.
        following = data.View(entry, Mux(held == 2, Mux(read_ptr, queue[0], queue[1]), pushed))
        new_head = group_done | ((held == 0) & step)
        update(m, count, count + 1, enable=active, reset=new_head)
        with m.If(new_head):      # with held != 2, following is the group pushed now
            m.d.sync += final_cycle.eq(following.cycles == 1)
        with m.Elif(active):
            m.d.sync += final_cycle.eq(count + 2 == head.cycles)
        self._parameter_read(m, start, done.take, following.param_addr)
        requant = self._postprocess(m, head.group, active)
        self._write(m, requant, head.addr, served, active, done.final)
        return m

    def _write_schedule(self, m, addresses, writable):
        """The walk's group's bank schedule: lane ``l`` writes in the group's cycle
        ``slots[l]``, the number of written lanes before it in its bank (when the
        lowest-lane-first arbitration would send it), and the group takes ``cycles``."""
        config = self.config
        R, bb = config.requant_lanes, config.bank_bits
        slots = [Signal(range(R), name=f"write_slot{l}") for l in range(R)]
        cycles = Signal(range(R + 1))
        longest = Const(1, range(R + 1))
        for l in range(R):
            before = [writable[i] & ((addresses[i][:bb] == addresses[l][:bb]) if bb else 1)
                      for i in range(l)]
            m.d.comb += slots[l].eq(sum(before) if before else 0)
            longest = Mux(writable[l] & (slots[l] + 1 > longest), slots[l] + 1, longest)
        m.d.comb += cycles.eq(longest)
        return slots, cycles

    def _advance_layout(self):
        """How a lane's position moves ``pixels`` pixels on: its column wraps when it is at least
        ``threshold``, and then adds ``ox_wrap_add`` and ``off_wrap_add`` instead of ``ox_add``
        and ``off_add`` (all modulo their widths)."""
        aw, cw, R = self.config.act_addr_width, self.config.count_width, self.config.requant_lanes
        return data.StructLayout({"pixels": range(R + 1), "threshold": cw, "ox_add": cw,
                                  "ox_wrap_add": cw, "off_add": aw, "off_wrap_add": aw})

    def _advance(self, m, amount):
        """The :meth:`_advance_layout` of ``amount`` pixels (``1..requant_lanes``) for this
        instruction's ``OUT_W`` and ``OUT_PITCH``, registered in two stages: ``amount`` pixels
        on from column ``ox`` is ``q`` rows and ``r`` columns on (``q, r = divmod(amount,
        OUT_W)``), one row more when ``ox + r >= OUT_W``. ``OUT_W`` only matters up to
        ``amount``: a wider row holds the whole step (``q = 0``). The first stage holds
        ``r``, ``q * OUT_PITCH`` and copies of the two registers, the second the sums (in one
        stage they were the ULX3S build's longest path, from the register file)."""
        regs, R, cw = self.regs, self.config.requant_lanes, self.config.count_width
        aw = self.config.act_addr_width
        q, r = Signal(range(R + 1)), Signal(cw)
        m.d.comb += [q.eq(0), r.eq(amount)]
        with m.Switch(regs.out_w):
            for w in range(1, amount + 1):
                with m.Case(w):
                    m.d.comb += [q.eq(amount // w), r.eq(amount % w)]
        # The first stage.
        cols_on, rows_on, out_w, pitch = (
            Signal(shape, name=f"advance{amount}_{name}")
            for name, shape in (("r", cw), ("rows_on", aw), ("out_w", cw), ("pitch", aw)))
        m.d.sync += [
            cols_on.eq(r), out_w.eq(regs.out_w), pitch.eq(regs.out_pitch),
            rows_on.eq(sum(Mux(q[i], regs.out_pitch << i, 0) for i in range(len(q)))),  # q * OUT_PITCH
        ]
        advance = Signal(self._advance_layout())
        m.d.comb += [
            advance.pixels.eq(amount), advance.threshold.eq(out_w - cols_on),
            advance.ox_add.eq(cols_on), advance.ox_wrap_add.eq(cols_on - out_w),
            advance.off_add.eq(cols_on + rows_on),
            advance.off_wrap_add.eq(cols_on - out_w + rows_on + pitch),
        ]
        return advance

    def _advance_constants(self, m):
        """The look-ahead walk's steps, in flip-flops loaded from the registers in every cycle
        through two stages (:meth:`_advance`; the registers hold from the engine's start,
        and the walk first reads these two cycles after, when the writer's start, registered
        twice, resets it): ``group``,
        ``requant_lanes`` pixels (the next lane group of a row); ``first[l]``, pixel ``l``
        (lane ``l``'s first position) for ``l = 1..requant_lanes-1``; and ``tile``, from a
        row's last group to the next tile's first, ``((LANES - 1) % requant_lanes) + 1``
        pixels, chosen from the other registers a cycle later (the choice behind the adders
        was the ULX3S build's longest path, 12.6 ns): the walk steps from the cycle after its
        reset, when ``tile`` holds this instruction's."""
        regs, R, cols = self.regs, self.config.requant_lanes, self.config.cols
        computed = {"group": self._advance(m, R), **{f"first{l}": self._advance(m, l) for l in range(1, R)}}
        registered = {}
        for name, value in computed.items():
            registered[name] = Signal(self._advance_layout(), name=f"advance_{name}")
            m.d.sync += registered[name].eq(value)
        # The last group's lanes are 1..R: the advance of that many pixels is one of the above.
        chosen = Signal(self._advance_layout(), name="advance_tile_next")
        m.d.comb += chosen.eq(registered["group"])
        with m.Switch(regs.lanes):
            for lanes in range(1, cols + 1):
                if (lanes - 1) % R + 1 < R:
                    with m.Case(lanes):
                        m.d.comb += chosen.eq(registered[f"first{(lanes - 1) % R + 1}"])
        tile = Signal(self._advance_layout(), name="advance_tile")
        m.d.sync += tile.eq(chosen)
        return SimpleNamespace(group=registered["group"], tile=tile,
                               first=[None] + [registered[f"first{l}"] for l in range(1, R)])

    def _lane_registers(self):
        """The look-ahead walk's lanes: each lane's position in the group being walked, and
        in the tile's first group (where the tile's next row starts)."""
        R = self.config.requant_lanes
        layout = self._lane_layout()
        return SimpleNamespace(position=[Signal(layout, name=f"lane{l}") for l in range(R)],
                               tile_start=[Signal(layout, name=f"lane{l}_tile_start") for l in range(R)])

    def _lane_layout(self):
        """A lane's position in the output map: pixel index n, column ox, offset."""
        aw, cw = self.config.act_addr_width, self.config.count_width
        return data.StructLayout({"n": cw + 1, "ox": cw, "off": aw})

    def _stepped(self, m, position, advance):
        """``position`` moved ``advance.pixels`` on: one compare and a choice of two sums each
        (no chain of column steps)."""
        cw, aw = self.config.count_width, self.config.act_addr_width
        wrap = position.ox >= advance.threshold
        moved = Signal(self._lane_layout())
        m.d.comb += [
            moved.n.eq(self._count_up(position.n, advance.pixels)),
            moved.ox.eq(Mux(wrap, position.ox + advance.ox_wrap_add, position.ox + advance.ox_add)[:cw]),
            moved.off.eq(Mux(wrap, position.off + advance.off_wrap_add, position.off + advance.off_add)[:aw]),
        ]
        return moved

    def _lane_addresses(self, m, walk, positions):
        """The walk's group: each lane's address and whether it is written, from the lanes'
        ``positions`` (anything with an offset ``off`` and a pixel index ``n``)."""
        config, regs = self.config, self.regs
        aw, R = config.act_addr_width, config.requant_lanes
        live = Signal()
        m.d.comb += live.eq(self.pool | (walk.chan < regs.m))
        addresses = [Signal(aw, name=f"out_addr{l}") for l in range(R)]
        writable = Signal(R)
        for l, position in enumerate(positions):
            m.d.comb += [
                addresses[l].eq(walk.rowbase + position.off),
                writable[l].eq(live & (walk.group_lane + l < regs.lanes) & (position.n < regs.npix)),
            ]
        return addresses, writable

    def _advance_lanes(self, m, lanes, advances, flags, start):
        """Each lane of the look-ahead walk to its place in the next group: ``requant_lanes``
        pixels on within a row; from a row's last group to the tile's first (a next row) or
        the next tile's first (the tile's last row); pixel ``l`` at the start and at each
        engine group's. The positions past a tile's ``LANES`` or the map's ``NPIX`` are not
        written, so they only have to follow the same rule."""
        f = flags
        for l, (position, tile_start) in enumerate(zip(lanes.position, lanes.tile_start)):
            first = Signal(self._lane_layout(), name=f"lane{l}_first")
            if l:
                m.d.comb += [first.n.eq(l), first.ox.eq(advances.first[l].ox_add),
                             first.off.eq(advances.first[l].off_add)]
            tile_end = self._stepped(m, position, advances.tile)
            following = Mux(f.last_group, Mux(f.last_row, tile_end.as_value(), tile_start.as_value()),
                            self._stepped(m, position, advances.group).as_value())
            with m.If(start | f.group_end):
                m.d.sync += [position.eq(first), tile_start.eq(first)]
            with m.Else():
                with m.If(f.group_done):
                    m.d.sync += position.eq(following)
                with m.If(f.row_end):
                    m.d.sync += tile_start.eq(tile_end)

    def _count_up(self, value, amount):
        """``value + amount`` in ``count_width + 1`` bits, the top one sticky: past
        ``2**count_width`` a pixel or channel index is beyond every ``NPIX`` and ``M``, so it
        only has to stay there; its low bits then no longer matter (nothing of that pixel or
        channel is written, and the parameters read for such a channel are not used)."""
        cw = self.config.count_width
        total = value + amount
        return Cat(total[:cw], total[cw:].any())

    def _position_layout(self):
        """A position in the output map: pixel index n, column ox, offset of its row, offset."""
        aw, cw = self.config.act_addr_width, self.config.count_width
        return data.StructLayout({"n": cw + 1, "ox": cw, "rowoff": aw, "off": aw})

    def _last_column(self, pos):
        """``pos`` is in the output map's last column."""
        return pos.ox + 1 == self.regs.out_w

    def _step(self, m, pos, wrap=None):
        """The position of the next pixel (``wrap``: :meth:`_last_column` of ``pos``, if known)."""
        regs = self.regs
        nxt = Signal(self._position_layout())
        wrap = self._last_column(pos) if wrap is None else wrap
        m.d.comb += [
            nxt.n.eq(self._count_up(pos.n, 1)),
            nxt.ox.eq(Mux(wrap, 0, pos.ox + 1)),
            nxt.rowoff.eq(Mux(wrap, pos.rowoff + regs.out_pitch, pos.rowoff)),
            nxt.off.eq(Mux(wrap, pos.rowoff + regs.out_pitch, pos.off + 1)),
        ]
        return nxt

    def _walk_state(self):
        """The walk's registers: where the current lane group, row, tile and engine group are."""
        config = self.config
        aw, cols, R = config.act_addr_width, config.cols, config.requant_lanes
        rows, cw = config.rows, config.count_width
        position = self._position_layout()
        cursor = Signal(position)     # pixel of the group's first lane
        tile_start = Signal(position)
        # ...each in the last column (the arbitrated walk keeps these beside them: the
        # compare was in front of the next positions' multiplexers)
        cursor_wrap, tile_start_wrap = Signal(), Signal()
        group = Signal(cols // R, init=1)           # lane group within the row, one-hot
        group_lane = Signal(range(cols + R + 1))    # its first lane, group * R
        group_started = Signal()
        group_pend = Signal(R)
        row = Signal(range(rows + 1))
        row_last = Signal()                         # row == rows - 1 (look-ahead walk)
        tile = Signal(cw)
        grp = Signal(cw)                            # engine groups left (count_down)
        last_grp = Signal()                         # ...this is the last
        first_chan = Signal(cw + 1)                 # g*rows (count_up)
        chan = Signal(cw + 1)                       # g*rows + row
        gbase = Signal(aw)                          # OUT_BASE + g*OUT_GSTEP
        rowbase = Signal(aw)                        # gbase + row*OUT_CSTRIDE
        return SimpleNamespace(cursor=cursor, tile_start=tile_start, cursor_wrap=cursor_wrap,
                               tile_start_wrap=tile_start_wrap, group=group,
                               group_lane=group_lane, group_started=group_started,
                               group_pend=group_pend, row=row, row_last=row_last, tile=tile, grp=grp, last_grp=last_grp,
                               first_chan=first_chan, chan=chan, gbase=gbase, rowbase=rowbase)

    def _lane_positions(self, m, walk):
        """The lanes of the walk's group: positions (``chain``), addresses, which are written."""
        R = self.config.requant_lanes
        chain = [walk.cursor, self._step(m, walk.cursor, walk.cursor_wrap)]
        for _ in range(R - 1):
            chain.append(self._step(m, chain[-1]))
        addresses, writable = self._lane_addresses(m, walk, chain[:R])
        return chain, addresses, writable

    def _arbiter(self, m, addresses, pending):
        """The bank arbiter: sends the ``pending`` lanes that share a bank in successive cycles."""
        config = self.config
        m.submodules.arbiter = arbiter = BankArbiter(config.requant_lanes, config.act_banks)
        bb = config.bank_bits
        for l in range(config.requant_lanes):
            if bb:
                m.d.comb += arbiter.bank[l].eq(addresses[l][:bb])
        m.d.comb += arbiter.pending.eq(pending)
        return arbiter

    def _group_flags(self, m, walk, arbiter, *, group_done=None):
        """When the walk's group, row, tile, engine group and instruction end: as the arbiter
        finishes the group, or on ``group_done`` (the look-ahead walk's step; no arbiter)."""
        regs, R, rows = self.regs, self.config.requant_lanes, self.config.rows
        ahead = group_done is not None
        active = Signal()
        if not ahead:
            group_done = Signal()
        last_group = Signal()
        take = Signal()
        last_row = Signal()
        tile_wrap = Signal()
        row_end = Signal()       # the tile's last row is taken
        group_end = Signal()     # ...and it was the group's last tile
        final = Signal()
        m.d.comb += [
            active.eq(self.results.valid),
            *([] if ahead else [group_done.eq(active & (arbiter.remaining == 0)),
                                last_group.eq(walk.group_lane + R >= regs.lanes)]),
            take.eq(group_done & last_group),
            *([] if ahead else [self.results.ready.eq(take)]),
            # no adder in front; the look-ahead walk's row compare is a flip-flop
            last_row.eq(self.pool | (walk.row_last if ahead else walk.row == rows - 1)),
            row_end.eq(take & last_row),
            group_end.eq(row_end & tile_wrap),
            final.eq(group_end & walk.last_grp),
        ]
        return SimpleNamespace(active=active, group_done=group_done, last_group=last_group,
                               take=take, last_row=last_row, tile_wrap=tile_wrap,
                               row_end=row_end, group_end=group_end, final=final)

    def _end_flags(self, m, group_done, last_group, last_row, tile_wrap, last_grp):
        """The issue group's ends, from its registered flags (look-ahead walk)."""
        take, row_end, group_end, final = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [take.eq(group_done & last_group), row_end.eq(take & last_row),
                     group_end.eq(row_end & tile_wrap), final.eq(group_end & last_grp)]
        return SimpleNamespace(take=take, row_end=row_end, group_end=group_end, final=final)

    def _tile_end(self, m, walk, chain):
        """The position after the tile's last lane: chain[LANES - group_lane] in the last group."""
        R = self.config.requant_lanes
        if R == 1:
            return chain[1]
        tile_end = Signal(self._position_layout())
        with m.Switch(self.regs.lanes - walk.group_lane):
            for count in range(1, R + 1):
                with m.Case(count):
                    m.d.comb += tile_end.eq(chain[count])
        return tile_end

    def _bookkeeping(self, m, walk, flags, chain, tile_end, arbiter, *, early_start=None):
        """The walk's registers from group to group, row to row, tile to tile, and the
        arbiter's progress through the group (none without an ``arbiter``: the look-ahead
        walk's groups follow their schedule).

        Returns ``(start, next_chan)``: the registered start (``early_start`` registered, if
        given) and the next row's channel.
        """
        config, regs, w, f = self.config, self.regs, walk, flags
        R, rows, cw = config.requant_lanes, config.rows, config.count_width
        # The writer's first row arrives many cycles after the instruction starts (the
        # window's set-up and a whole tile of beats come first), so it takes its start a
        # cycle late: the start pulse is decoded from the instruction word (straight out of
        # the program memory without the pipeline registers), and this register keeps that
        # path out of the writer's logic.
        start = Signal()
        m.d.sync += start.eq(self.start if early_start is None else early_start)
        next_first_chan = self._count_up(w.first_chan, rows)
        next_chan = Signal(cw + 1)
        # CONV pool: every engine group has rows 0..rows-1's parameters.
        m.d.comb += next_chan.eq(Mux(~f.last_row, self._count_up(w.chan, 1),
                                     Mux(self._unless_pooled(f.tile_wrap), next_first_chan,
                                         w.first_chan)))
        if arbiter is not None:
            update(m, w.group_started, ~f.group_done, enable=f.active, reset=start)
            update(m, w.group_pend, arbiter.remaining, enable=f.active & ~f.group_done)
        with m.If(start | f.take):
            m.d.sync += w.group.eq(1)
        with m.Elif(f.group_done):
            m.d.sync += w.group.eq(w.group << 1)
        lane_step = dict(value=w.group_lane + R, enable=f.group_done, reset=start | f.take)
        update(m, w.group_lane, **lane_step)
        if arbiter is None:
            # The look-ahead walk keeps the last-group compare in a flip-flop, loaded from the
            # next group_lane: the compare was in front of the walk's resets and enables. Its
            # lanes move in _advance_lanes.
            m.d.sync += f.last_group.eq(next_value(w.group_lane, **lane_step) + R >= regs.lanes)
        else:
            # The last-column flags follow the positions, from their next values (with one
            # requantizer lane the tile's end is the next lane's position: one compare).
            next_wrap, at_first = self._last_column(chain[R]), regs.out_w == 1
            tile_end_wrap = next_wrap if tile_end is chain[R] else self._last_column(tile_end)
            update(m, w.cursor, Mux(f.last_group, Mux(f.last_row, tile_end.as_value(),
                                                      w.tile_start.as_value()),
                                    chain[R].as_value()),
                   enable=f.group_done, reset=start | f.group_end)
            with m.If(start | f.group_end):
                m.d.sync += w.cursor_wrap.eq(at_first)
            with m.Elif(f.group_done):
                m.d.sync += w.cursor_wrap.eq(Mux(f.last_group, Mux(f.last_row, tile_end_wrap,
                                                                   w.tile_start_wrap),
                                                 next_wrap))
            update(m, w.tile_start, tile_end, enable=f.row_end, reset=start | f.group_end)
            with m.If(start | f.group_end):
                m.d.sync += w.tile_start_wrap.eq(at_first)
            with m.Elif(f.row_end):
                m.d.sync += w.tile_start_wrap.eq(tile_end_wrap)
        update(m, w.row, w.row + 1, enable=f.take, reset=start | f.row_end)
        if arbiter is None:
            # The row compare of the next row (the reset's 0 or row + 1), in a flip-flop: it was
            # in front of the lanes' resets (the 128-MAC ULX3S build).
            with m.If(start | f.row_end):
                m.d.sync += w.row_last.eq(rows == 1)
            with m.Elif(f.take):
                m.d.sync += w.row_last.eq(w.row == rows - 2)
        update(m, w.tile, w.tile + 1, enable=f.row_end, reset=start | f.group_end)
        # In a flip-flop: the parameter memory's read address hangs on it, and the comparison
        # was in front of its adder.
        registered_wrap(m, f.tile_wrap, w.tile, regs.tiles, restart=start, step=f.row_end)
        m.d.comb += w.last_grp.eq(count_down(m, w.grp, regs.groups, restart=start, step=f.group_end))
        update(m, w.first_chan, next_first_chan, enable=self._unless_pooled(f.group_end), reset=start)
        update(m, w.chan, next_chan, enable=f.take, reset=start)
        next_gbase = w.gbase + regs.out_gstep
        with m.If(start):
            m.d.sync += [w.gbase.eq(regs.out_base), w.rowbase.eq(regs.out_base)]
        with m.Elif(f.take):
            m.d.sync += w.rowbase.eq(Mux(~f.last_row, w.rowbase + regs.out_cstride,
                                         Mux(f.tile_wrap, next_gbase, w.gbase)))
            with m.If(f.group_end):
                m.d.sync += w.gbase.eq(next_gbase)
        return start, next_chan

    def _unless_pooled(self, value):
        """``value``, and not in a ``CONV pool`` (with ``config.fused_max_pool``; without it
        ``value`` itself, no gate)."""
        return value & ~self.pooled if self.config.fused_max_pool else value

    def _parameter_read(self, m, start, take, address):
        """Parameters of the next row, at ``address``, read as this one is taken (and at
        start, those of the first row, at ``P_BASE``)."""
        m.d.comb += [
            self.param_en.eq(start | take),
            self.param_addr.eq(Mux(start, self.regs.p_base, address)),
        ]

    def _postprocess(self, m, group, active):
        """The requantizer, fed the lane group's sums and the channel's parameters."""
        config, regs, R = self.config, self.regs, self.config.requant_lanes
        m.submodules.requant = requant = requantizer(config, R, multiplier=self.requant_multiplier,
                                                     dsp_model=self.requant_dsp_model)
        group_sums = Signal(config.acc_width * R)
        sums = self.results.payload.sums
        m.d.comb += group_sums.eq(one_hot_select(
            group, [Cat(sums[g * R + l] for l in range(R)) for g in range(config.cols // R)]))
        inputs = SimpleNamespace(sums=group_sums, valid=active, param=self.param_data)
        if config.pipeline_registers:
            inputs = self._input_stage(m, inputs)
        for l in range(R):
            m.d.comb += requant.acc[l].eq(inputs.sums[l * config.acc_width:(l + 1) * config.acc_width])
        quant = {name: regs.quant[field.offset:field.offset + field.width]
                 for name, field in QUANT_LAYOUT if field.offset < len(regs.quant)}
        m.d.comb += [
            requant.i_valid.eq(inputs.valid),
            requant.bias.eq(inputs.param.bias),
            requant.mult.eq(inputs.param.mult),
            requant.shift.eq(inputs.param.shift),
            requant.zp.eq(quant["zp_out"]), requant.lo.eq(quant["lo"]), requant.hi.eq(quant["hi"]),
            requant.bypass.eq(self.pool),
        ]
        if "single" in quant:           # kept in the tflite mode only (isa.quant_bits)
            m.d.comb += requant.single.eq(quant["single"])
        return requant

    def _input_stage(self, m, inputs):
        """With ``config.pipeline_registers``: the lane group's sums, its valid and the
        channel's parameters registered in front of the requantizer. The array's result
        row, through the lane-group multiplexer into the bias adder, was the ULX3S's
        critical path (15.5 ns, most of it routing). The parameters are registered beside
        the sums: the next row's arrive in the cycle after a row's last group."""
        sums = Signal.like(inputs.sums, name="group_sums_r")
        valid = Signal(name="group_valid_r")
        param = Signal.like(inputs.param, name="param_r")
        m.d.sync += [sums.eq(inputs.sums), valid.eq(inputs.valid), param.eq(inputs.param)]
        return SimpleNamespace(sums=sums, valid=valid, param=param)

    def _write(self, m, requant, addresses, served, active, final, pool=None):
        """The lane addresses delayed beside the requantizer (:attr:`latency`), and the
        bytes routed to their banks; ``done`` with the final write. ``pool``
        (:meth:`_pool_flags`): the pooled writes' running maximum."""
        config = self.config
        aw, R = config.act_addr_width, config.requant_lanes
        addr_d, served_d, final_d = addresses, Mux(active, served, 0), final
        pool_d = pool
        for stage in range(self.latency):
            addr_q = [Signal(aw, name=f"addr{l}_d{stage}") for l in range(R)]
            served_q = Signal(R, name=f"served_d{stage}")
            final_q = Signal(name=f"final_d{stage}")
            m.d.sync += [a.eq(b) for a, b in zip(addr_q, addr_d)]
            m.d.sync += [served_q.eq(served_d), final_q.eq(final_d)]
            addr_d, served_d, final_d = addr_q, served_q, final_q
            if pool is not None:
                pool_q = SimpleNamespace(opens=Signal(name=f"pool_opens_d{stage}"),
                                         writes=Signal(name=f"pool_writes_d{stage}"))
                m.d.sync += [pool_q.opens.eq(pool_d.opens), pool_q.writes.eq(pool_d.writes)]
                pool_d = pool_q
        results = [requant.y[l] for l in range(R)]
        if pool is not None:
            results, served_d = self._running_max(m, results[0], served_d, pool_d)
        words, enables, values = route_to_banks(m, config, addr_d, served_d, results)
        for b in range(config.act_banks):
            m.d.comb += [self.wr_addr[b].eq(words[b]), self.wr_data[b].eq(values[b]),
                         self.wr_en[b].eq(enables[b])]
        m.d.comb += self.done.eq(final_d)

    def _running_max(self, m, y, served, pool):
        """The pooled writes at the requantizer's output: the row pair's maximum so far,
        restarted (from -128, the int8 minimum) where the pair opens, taking each served byte;
        in the pooled mode the byte written is that maximum and only a pair's last lane writes.
        Returns the values and the served lanes to write."""
        best = Signal(signed(8), name="pool_max")
        so_far = Mux(pool.opens, -128, best)
        larger = Signal(signed(8), name="pool_max_next")
        m.d.comb += larger.eq(Mux(served[0] & (y > so_far), y, so_far))
        m.d.sync += best.eq(larger)
        return [Mux(self.pooled, larger, y)], served & pool.writes
