"""The result writer: output addresses, post-processing and the scatter into the activation banks.

It takes the result rows of the systolic array (``CONV``: ``rows`` rows per tile)
or of the max-pool unit (``POOL``: one row per tile), in tile order, and for
each row walks its lanes ``requant_lanes`` at a time (a *lane group*)::

    CONV: act[OUT_BASE + g*OUT_GSTEP + i*OUT_CSTRIDE + out_off[j]] = requantize(sum[i][j])
          for rows i with g*rows + i < M and valid lanes j
    POOL: act[OUT_BASE + g*OUT_GSTEP + out_off[j]] = max[j]           for valid lanes j

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

The parameter entry of the next row's channel is read when a row is taken, so
it is ready when the next row starts (and in the cycle after ``start`` for the
first). ``start`` is registered on entry: the first row can come no earlier than
the window generator's set-up plus one tile of beats after it.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .memories import BankArbiter, param_layout, route_to_banks
from .postproc import MULTIPLIERS, requantizer
from .registers import register_layout, registered_wrap, update
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
        ``"generic"``, ``"booth"`` (logic cells, for an iCE40 whose DSPs are the array's)
        or ``"ice40_dsp"`` (two SB_MAC16 per lane).
    requant_dsp_model : bool
        The requantizer's ``dsp_model`` (SB_MAC16 described in Amaranth, for simulation).

    Members
    -------
    start : In(1)
        Pulse at the start of a ``CONV``/``POOL``; ``regs`` hold until ``done``.
    pool : In(1)
        ``POOL`` mode (held): one row per tile, no requantization, all rows live.
    regs : In(register_layout(config))
    results : In(stream.Signature(result_layout(config)))
        Rows in tile order. ``ready`` rises in the cycle of a row's final lane
        group (it never depends on ``valid`` of a later row).
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
            "regs": In(register_layout(config)),
            "results": In(stream.Signature(result_layout(config))),
            "param_addr": Out(config.param_addr_width),
            "param_en": Out(1),
            "param_data": In(param_layout()),
            "wr_addr": Out(data.ArrayLayout(config.bank_word_width, banks)),
            "wr_data": Out(data.ArrayLayout(8, banks)),
            "wr_en": Out(banks),
            "done": Out(1),
        })

    @property
    def latency(self):
        """Cycles from a lane group's cycle to the write of its bytes."""
        return self.config.requant_latency

    def elaborate(self, platform):
        m = Module()
        config = self.config
        regs = self.regs
        aw, cols, R = config.act_addr_width, config.cols, config.requant_lanes
        rows, cw = config.rows, config.count_width
        groups_per_row = cols // R

        def count_up(value, amount):
            """``value + amount`` in ``cw + 1`` bits, the top one sticky: past ``2**cw`` a pixel
            or channel index is beyond every ``NPIX`` and ``M``, so it only has to stay there;
            its low bits then no longer matter (nothing of that pixel or channel is written,
            and the parameters read for such a channel are not used)."""
            total = value + amount
            return Cat(total[:cw], total[cw:].any())

        # A position in the output map: pixel index n, column ox, offset of its row, offset.
        position = data.StructLayout({"n": cw + 1, "ox": cw, "rowoff": aw, "off": aw})

        def step(pos):
            """The position of the next pixel."""
            nxt = Signal(position)
            wrap = pos.ox + 1 == regs.out_w
            m.d.comb += [
                nxt.n.eq(count_up(pos.n, 1)),
                nxt.ox.eq(Mux(wrap, 0, pos.ox + 1)),
                nxt.rowoff.eq(Mux(wrap, pos.rowoff + regs.out_pitch, pos.rowoff)),
                nxt.off.eq(Mux(wrap, pos.rowoff + regs.out_pitch, pos.off + 1)),
            ]
            return nxt

        cursor = Signal(position)     # pixel of the group's first lane
        tile_start = Signal(position)
        group = Signal(groups_per_row, init=1)      # lane group within the row, one-hot
        group_lane = Signal(range(cols + R + 1))    # its first lane, group * R
        group_started = Signal()
        group_pend = Signal(R)
        row = Signal(range(rows + 1))
        tile = Signal(cw)
        grp = Signal(cw)                            # engine group g
        first_chan = Signal(cw + 1)                 # g*rows (count_up)
        chan = Signal(cw + 1)                       # g*rows + row
        gbase = Signal(aw)                          # OUT_BASE + g*OUT_GSTEP
        rowbase = Signal(aw)                        # gbase + row*OUT_CSTRIDE

        chain = [cursor]
        for _ in range(R):
            chain.append(step(chain[-1]))

        # Lanes of this group: address, validity, pending mask.
        live = Signal()
        m.d.comb += live.eq(self.pool | (chan < regs.m))
        addresses = [Signal(aw, name=f"out_addr{l}") for l in range(R)]
        writable = Signal(R)
        for l in range(R):
            m.d.comb += [
                addresses[l].eq(rowbase + chain[l].off),
                writable[l].eq(live & (group_lane + l < regs.lanes) & (chain[l].n < regs.npix)),
            ]
        m.submodules.arbiter = arbiter = BankArbiter(R, config.act_banks)
        bb = config.bank_bits
        for l in range(R):
            if bb:
                m.d.comb += arbiter.bank[l].eq(addresses[l][:bb])
        m.d.comb += arbiter.pending.eq(Mux(group_started, group_pend, writable))

        active = Signal()
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
            group_done.eq(active & (arbiter.remaining == 0)),
            last_group.eq(group_lane + R >= regs.lanes),
            take.eq(group_done & last_group),
            self.results.ready.eq(take),
            last_row.eq(self.pool | (row + 1 == rows)),
            row_end.eq(take & last_row),
            group_end.eq(row_end & tile_wrap),
            final.eq(group_end & (grp + 1 == regs.groups)),
        ]

        # The position after the tile's last lane: chain[LANES - group_lane] in the last group.
        if R == 1:
            tile_end = chain[1]
        else:
            tile_end = Signal(position)
            with m.Switch(regs.lanes - group_lane):
                for count in range(1, R + 1):
                    with m.Case(count):
                        m.d.comb += tile_end.eq(chain[count])

        # The writer's first row arrives many cycles after the instruction starts (the
        # window's set-up and a whole tile of beats come first), so it takes its start a
        # cycle late: the start pulse is decoded from the instruction word straight out of
        # the program memory, and this register keeps that path out of the writer's logic.
        start = Signal()
        m.d.sync += start.eq(self.start)
        next_first_chan = count_up(first_chan, rows)
        next_chan = Signal(cw + 1)
        m.d.comb += next_chan.eq(Mux(~last_row, count_up(chan, 1),
                                     Mux(tile_wrap, next_first_chan, first_chan)))
        update(m, group_started, ~group_done, enable=active, reset=start)
        update(m, group_pend, arbiter.remaining, enable=active & ~group_done)
        with m.If(start | take):
            m.d.sync += group.eq(1)
        with m.Elif(group_done):
            m.d.sync += group.eq(group << 1)
        update(m, group_lane, group_lane + R, enable=group_done, reset=start | take)
        update(m, cursor, Mux(last_group, Mux(last_row, tile_end.as_value(), tile_start.as_value()),
                           chain[R].as_value()),
               enable=group_done, reset=start | group_end)
        update(m, tile_start, tile_end, enable=row_end, reset=start | group_end)
        update(m, row, row + 1, enable=take, reset=start | row_end)
        update(m, tile, tile + 1, enable=row_end, reset=start | group_end)
        # In a flip-flop: the parameter memory's read address hangs on it, and the comparison
        # was in front of its adder.
        registered_wrap(m, tile_wrap, tile, regs.tiles, restart=start, step=row_end)
        update(m, grp, grp + 1, enable=group_end, reset=start)
        update(m, first_chan, next_first_chan, enable=group_end, reset=start)
        update(m, chan, next_chan, enable=take, reset=start)
        next_gbase = gbase + regs.out_gstep
        with m.If(start):
            m.d.sync += [gbase.eq(regs.out_base), rowbase.eq(regs.out_base)]
        with m.Elif(take):
            m.d.sync += rowbase.eq(Mux(~last_row, rowbase + regs.out_cstride,
                                       Mux(tile_wrap, next_gbase, gbase)))
            with m.If(group_end):
                m.d.sync += gbase.eq(next_gbase)

        # Parameters of the next row, read as this one is taken (and at start for the first).
        m.d.comb += [
            self.param_en.eq(start | take),
            self.param_addr.eq(Mux(start, regs.p_base, regs.p_base + next_chan)),
        ]

        # Post-processing pipeline, with the lane addresses alongside.
        m.submodules.requant = requant = requantizer(config, R, multiplier=self.requant_multiplier,
                                                     dsp_model=self.requant_dsp_model)
        group_sums = Signal(config.acc_width * R)
        selected = 0
        for g in range(groups_per_row):
            sums = Cat(self.results.payload.sums[g * R + l] for l in range(R))
            selected = selected | Mux(group[g], sums, 0)
        m.d.comb += group_sums.eq(selected)
        for l in range(R):
            m.d.comb += requant.acc[l].eq(group_sums[l * config.acc_width:(l + 1) * config.acc_width])
        quant = regs.quant
        m.d.comb += [
            requant.i_valid.eq(active),
            requant.bias.eq(self.param_data.bias),
            requant.mult.eq(self.param_data.mult),
            requant.shift.eq(self.param_data.shift),
            requant.zp.eq(quant[0:8]), requant.lo.eq(quant[8:16]), requant.hi.eq(quant[16:24]),
            requant.bypass.eq(self.pool),
        ]
        served = arbiter.served
        addr_d, served_d, final_d = addresses, Mux(active, served, 0), final
        for stage in range(requant.latency):
            addr_q = [Signal(aw, name=f"addr{l}_d{stage}") for l in range(R)]
            served_q = Signal(R, name=f"served_d{stage}")
            final_q = Signal(name=f"final_d{stage}")
            m.d.sync += [a.eq(b) for a, b in zip(addr_q, addr_d)]
            m.d.sync += [served_q.eq(served_d), final_q.eq(final_d)]
            addr_d, served_d, final_d = addr_q, served_q, final_q
        words, enables, values = route_to_banks(m, config, addr_d, served_d,
                                                [requant.y[l] for l in range(R)])
        for b in range(config.act_banks):
            m.d.comb += [self.wr_addr[b].eq(words[b]), self.wr_data[b].eq(values[b]),
                         self.wr_en[b].eq(enables[b])]
        m.d.comb += self.done.eq(final_d)
        return m
