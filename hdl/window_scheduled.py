"""The window generator whose gather stage follows bank schedules the lane walker computes
ahead."""

import functools

from amaranth import *

from .memories import bank_hits, check_bank_access, one_hot_select, route_to_banks
from .registers import registered_wrap, update
from .systolic import operand_layout
from .window_base import WindowGenerator, _Gather

__all__ = ["ScheduledWindowGenerator"]


def _reads_in(valid, slots, cycle):
    """The lanes that read in a beat's gather cycle ``cycle`` of a tile's bank schedule."""
    return valid & Cat(slot == cycle for slot in slots)


class ScheduledWindowGenerator(WindowGenerator):
    """The window generator whose gather stage follows each tile's bank schedule
    (``config.bank_access`` ``"scheduled"``, with ``config.registered_operands``).

    Gather: the lane addresses are summed as the beat loads and the lanes read in the cycles
    of the tile's bank schedule, which the lane walker computes (:meth:`_bank_schedule`):
    the order of a lowest-lane-first arbitration, so the same cycles. A beat occupies the
    stage for ``max(1, most valid lanes in one bank)`` cycles. The weight word is read in
    the same cycles. With ``config.pair_products`` every beat of a tile reads each lane's
    odd channel too when ``K_C > 1``, the last of an odd ``K_C`` too, so that one schedule
    serves the tile (``c + 1 == K_C`` meets weights of 0), and the banks pair up into
    superbanks, ``b`` and ``b + act_banks / 2``: where ``IN_CSTRIDE % act_banks == act_banks
    / 2`` a lane's two bytes are one superbank's, read in one cycle, and the tile is
    scheduled by superbank; otherwise a beat takes two passes of the bank schedule, the
    lanes' first channels, then their second ones. Either way each bank's read address has
    one source a lane and each lane's bytes one superbank's word a cycle.

    Latency: the bytes arrive a cycle later than the arbitrated variant's, through the
    activation banks' registers (the weight word through the weight buffer's, beside them),
    and the gathered bytes and the weight word are registered before their offer
    (``config.operand_latency``, 3, after the last gather cycle), so that a block RAM's
    output shares a cycle with neither the gather nor the consumer's logic.

    Back-pressure: a skid register behind the offer lets the stages run on until a beat
    leaves the output stage behind the waiting one, and they freeze from the next cycle, on
    a flip-flop (:meth:`_offer`), the lane walker too.
    """

    def __init__(self, config):
        super().__init__(config)
        check_bank_access(config, "scheduled", "window generator")

    # A tile's last beat loads the kernel walk's origin (WindowGenerator._rewind_at_tile_end).
    _rewind_at_tile_end = True

    def _instruction_flags(self, m):
        super()._instruction_flags(m)
        if self.config.pair_products:
            self._pair_read_flags(m)

    def _walker_stall_signal(self):
        # A copy of its own (_stall_copies): the consumer's ready no longer reaches the
        # walker's counters (the iCE40 build's longest path).
        return Signal(name="walker_stall")

    def _drained(self, drained, o_read):
        return drained & (~o_read & ~self.operands.valid)

    def _lane_wrap(self, m, *, lane, w_lane, restart, step):
        # The last-lane compare in a flip-flop: it sat between the consumer's back-pressure
        # and the resets of the walker's counters.
        lane_wrap = Signal()
        registered_wrap(m, lane_wrap, w_lane, self.regs.lanes, restart=restart, step=step)
        return lane_wrap

    def _tile_schedule(self, m, *, walk, lane, valid, idle, gbase, inoff):
        return self._bank_schedule(m, walk=walk, lane=lane, valid=valid,
                                   bank=self._walked_bank(m, gbase, inoff), idle=idle)

    def _odd_channel(self, m, kc, walk):
        # The odd channel's offset in registers of its own, so that the gather stage sums
        # each lane's two addresses with one adder each.
        if self._odd_reads is None:
            return None, None
        return None, self._kernel_offset(m, **walk, origin=self.regs.in_cstride, suffix="_odd")

    def _pair_read_flags(self, m):
        """With pair products, two flags of the instruction, loaded
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
        """With pair products: a beat's gather takes two passes."""
        return self._odd_reads & ~self._superbank

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
        """The gather's bank schedule of the tile being
        walked, one lane a cycle. Lane ``j`` reads in gather cycle ``slots[j]``, the number of
        valid lanes before it in its bank, which is when the lowest-lane-first arbitration
        would serve it; every beat of the tile takes ``cycles`` (at least 1). All beats of a
        tile shift the lanes' addresses alike, so one schedule serves them all, and no
        arbitration sits between the gather stage's registers and the load of the next beat.

        With pair products ``bank`` is the lane's superbank where its two reads share a
        cycle (:meth:`_walked_bank`); in two passes each pass follows the schedule.

        Returns ``(slots, cycles)``.
        """
        config = self.config
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

    def _serve(self, m, *, stall, s1_full, stage):
        # The addresses are loaded with the beat (_load_reads), the lanes read in the tile's
        # schedule (with pair products both their reads in a slot, or in two passes of it).
        config = self.config
        aw, cols, bb = config.act_addr_width, config.cols, config.bank_bits
        s1_slot = [Signal(range(cols), name=f"s1_slot{j}") for j in range(cols)]
        s1_cycles = Signal(range(cols + 1))
        s1_count = Signal(range(cols))
        s1_final_cycle = Signal()  # the last cycle of the pass
        served = Signal(cols)      # s1_full & lane j valid & (s1_slot[j] == s1_count)
        # hits[bank][lane] in flip-flops, loaded with the served lanes and the addresses: the
        # banks' compares no longer sit between the lane addresses and the banks' read
        # addresses (the ULX3S build's longest path with them).
        hit_bits = [Signal(cols, name=f"bank_hits{b}") for b in range(config.act_banks)]
        hits = [[hit_bits[b][j] for j in range(cols)] for b in range(config.act_banks)]
        phase, rows = None, ()
        if config.pair_products:
            phase = Signal(name="s1_phase")
            rows = tuple([Signal(aw - bb, name=f"lane_{half}_row{j}") for j in range(cols)]
                         for half in ("low", "high"))
            words = self._route_pairs(hits, rows)
        else:
            words, _, _ = route_to_banks(m, config, stage["addr"], served, hits=hits)
        # The read enables come from the stall's copies (_stall_copies).
        self._read_ports(m, words, stage["waddr"])

        beat_done = Signal()
        if rows:
            m.d.comb += beat_done.eq(s1_full & s1_final_cycle & (~self._split_pass() | phase))
        else:
            m.d.comb += beat_done.eq(s1_full & s1_final_cycle)
        return _Gather(**stage, hits=hits, done=beat_done, served=served, slot=s1_slot,
                       cycles=s1_cycles, count=s1_count, final_cycle=s1_final_cycle, phase=phase,
                       rows=rows)

    def _route_pairs(self, hits, rows):
        """With pair products: each bank's word address, the row
        of the lane that reads it, from the lower half of the banks or the upper
        (``_Gather.rows``): a bank's multiplexer has one input a lane, as without pairs."""
        config = self.config
        banks, half = config.act_banks, max(1, config.act_banks // 2)
        return [one_hot_select(hits[b], rows[0] if b < half else rows[1]) for b in range(banks)]

    def _load_reads(self, m, gather, *, stall, s1_full, load, first, tile, beat):
        config = self.config
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

    def _pair_lanes(self, m, gather, sums, *, load, switch):
        """With pair products: each lane's word addresses in the
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

    def _taken(self, gather):
        # With pairs in superbanks, each lane's reads (_pair_reads).
        return self._pair_reads(gather) if self.config.pair_products else super()._taken(gather)

    def _arrived_bytes(self, m, taken, held, current):
        if self.config.pair_products:
            self._pair_bytes(m, taken, held, current)
        else:
            super()._arrived_bytes(m, taken, held, current)

    def _pair_reads(self, gather):
        """With pair products: what each lane reads in a gather
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
        """With pair products: lane ``j``'s two bytes ``current[j]``
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
        """The offer register and a skid register behind it, and the stall's copies
        (:meth:`_stall_copies`).

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
        self._stall_copies(m, o_valid, free, self._walker_stall)

    def _stall_copies(self, m, o_valid, free, walker_stall):
        """Copies of ``skid_valid`` (the stall), flip-flops that
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
