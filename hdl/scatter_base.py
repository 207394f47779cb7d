"""The result writer's parts that both its variants share (:mod:`fpganet.hdl.scatter`): the
signature, the walk's registers and their bookkeeping, the requantizer and the write.

A variant supplies the walk of the lane groups and the order of their writes:
:class:`~fpganet.hdl.scatter_arbitrated.ArbitratedResultWriter` arbitrates the banks each
cycle, :class:`~fpganet.hdl.scatter_scheduled.ScheduledResultWriter` walks ahead and follows
bank schedules.
"""

from types import SimpleNamespace

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig
from fpganet.isa import QUANT_LAYOUT

from .memories import one_hot_select, param_layout, route_to_banks
from .postproc import MULTIPLIERS, requantizer
from .registers import count_down, next_value, register_layout, registered_wrap, update
from .systolic import result_layout

__all__ = ["ResultWriter"]


class ResultWriter(wiring.Component):
    """Post-processes result rows and writes them to the activation buffer: what both variants
    share. Build one with :func:`fpganet.hdl.scatter.result_writer`.

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
        ``config.bank_access`` ``"scheduled"`` it comes from flip-flops and may be high without
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
        by the start registered (the variant's registers) and pushes its first group after."""
        raise NotImplementedError

    @property
    def latency(self):
        """Cycles from a lane group's cycle to the write of its bytes
        (``config.write_latency``: the requantizer's, and with the pipeline registers the
        register in front of it)."""
        return self.config.write_latency

    def elaborate(self, platform):
        raise NotImplementedError

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
        inputs = self._requant_inputs(m, inputs)
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

    def _requant_inputs(self, m, inputs):
        """The lane group's sums, its valid and the channel's parameters as the requantizer
        takes them: with ``config.registered_results`` registered in front of it. The array's result
        row, through the lane-group multiplexer into the bias adder, was the ULX3S's
        critical path (15.5 ns, most of it routing). The parameters are registered beside
        the sums: the next row's arrive in the cycle after a row's last group."""
        if not self.config.registered_results:
            return inputs
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
