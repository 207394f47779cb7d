"""The result writer whose walk runs ahead of the writes and follows bank schedules."""

from types import SimpleNamespace

from amaranth import *
from amaranth.lib import data

from .memories import check_bank_access
from .registers import next_value, update
from .scatter_base import ResultWriter

__all__ = ["ScheduledResultWriter"]


class ScheduledResultWriter(ResultWriter):
    """The result writer whose walk runs ahead (``config.bank_access``
    ``"scheduled"``).

    The walk runs up to two lane groups ahead of the group being written. It leaves each
    group's addresses, write mask, flags, channel and bank schedule in a two-entry queue
    whose head is the group being written. Lane ``l`` of the head writes in the group's
    cycle ``slot[l]`` (:meth:`_write_schedule`: what the lowest-lane-first arbitration does,
    so the same cycles), so the end of a group is a flip-flop and no bank arbitration sits
    in the writer's control paths; the walk steps whenever the queue had room in the
    previous cycle, so neither does the result stream's ``valid``. It starts in the cycle
    after the registered start, long before the first row: no cycle changes. Its lanes keep
    a position each, moved ``requant_lanes`` pixels (or a row's last group's lanes) on in
    closed form: one compare with a threshold and a choice of two precomputed sums, not a
    chain of column steps.

    Latency: the first row may come :attr:`start_latency` (4) cycles after ``start``; the
    bytes are written :attr:`latency` cycles (``config.write_latency``: the requantizer's and
    with ``config.registered_results`` the register in front of it) after their group's cycle.

    Throughput: a lane group takes ``max(1, most written lanes in one bank)`` cycles.

    Back-pressure: ``results.ready`` comes from flip-flops alone (the head's last group in
    its last cycle) and may be high without ``valid``.
    """

    def __init__(self, config, **requantizer):
        super().__init__(config, **requantizer)
        check_bank_access(config, "scheduled", "result writer")

    @property
    def start_latency(self):
        """4: the walk is reset by the start registered twice (the step constants take two
        stages from the registers) and pushes its first group after."""
        return 4

    def elaborate(self, platform):
        m = Module()
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

    def _end_flags(self, m, group_done, last_group, last_row, tile_wrap, last_grp):
        """The issue group's ends, from its registered flags (look-ahead walk)."""
        take, row_end, group_end, final = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [take.eq(group_done & last_group), row_end.eq(take & last_row),
                     group_end.eq(row_end & tile_wrap), final.eq(group_end & last_grp)]
        return SimpleNamespace(take=take, row_end=row_end, group_end=group_end, final=final)
