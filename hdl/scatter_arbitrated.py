"""The result writer that arbitrates the activation banks for each lane group."""

from types import SimpleNamespace

from amaranth import *

from .memories import BankArbiter, check_bank_access
from .scatter_base import ResultWriter

__all__ = ["ArbitratedResultWriter"]


class ArbitratedResultWriter(ResultWriter):
    """The result writer with a bank arbiter (``config.bank_access``
    ``"arbitrated"``).

    The walk's lane group is the group being written: its lanes' positions are a chain of
    column steps from the group's first pixel, and a
    :class:`~fpganet.hdl.memories.BankArbiter` sends the written lanes that share a bank in
    successive cycles, lowest lane first.

    Latency: the first row may come :attr:`start_latency` (3) cycles after ``start``; the
    bytes are written :attr:`latency` cycles (``config.write_latency``, the requantizer's)
    after their group's cycle.

    Throughput: a lane group takes ``max(1, most written lanes in one bank)`` cycles.

    Back-pressure: ``results.ready`` rises in the cycle of a row's final lane group, from
    the arbiter (``valid`` of the row and the banks its lanes still have to write).
    """

    def __init__(self, config, **requantizer):
        super().__init__(config, **requantizer)
        check_bank_access(config, "arbitrated", "result writer")

    @property
    def start_latency(self):
        """3: the walk is reset by the start registered once and pushes its first group after."""
        return 3

    def elaborate(self, platform):
        m = Module()
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
