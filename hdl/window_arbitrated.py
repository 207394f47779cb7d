"""The window generator whose gather stage arbitrates the activation banks each cycle."""

from amaranth import *

from .memories import BankArbiter, bank_hits, check_bank_access, route_to_banks
from .registers import update
from .window_base import WindowGenerator, _Gather

__all__ = ["ArbitratedWindowGenerator"]


class ArbitratedWindowGenerator(WindowGenerator):
    """The window generator with a bank arbiter in its gather stage
    (``config.bank_access`` ``"arbitrated"``).

    Gather: a :class:`~fpganet.hdl.memories.BankArbiter` serves, each cycle, one pending
    lane per bank, lowest lane first; lanes sharing a bank are read in successive cycles;
    invalid lanes do not read. Which lanes share a bank, and whether the beat's last gather
    cycle is this one, are flip-flops loaded with the beat and from the next state. A beat
    occupies the stage for ``max(1, most valid lanes in one bank)`` cycles; with
    ``config.pair_products`` each lane also reads its odd channel's byte, ``IN_CSTRIDE`` on,
    where ``c + 1 < K_C``, and a beat occupies the stage for the most reads in one bank.

    Latency: the bytes arrive (synchronous reads) and the beat is offered on ``operands``
    the cycle after its last gather cycle (``config.operand_latency``).

    Back-pressure: while an offered beat is not taken, every stage freezes, straight from
    ``ready``, and the memory read ports hold their data; the lane walker runs on (it fills
    registers that only the next tile's first load reads).
    """

    def __init__(self, config):
        super().__init__(config)
        check_bank_access(config, "arbitrated", "window generator")

    def _odd_channel(self, m, kc, walk):
        # The last beat's odd channel is read only if it has two.
        return (kc != 1 if self.config.pair_products else None), None

    def _serve(self, m, *, stall, s1_full, stage):
        config = self.config
        cols, bb = config.cols, config.bank_bits
        addresses, s1_base, s1_koff = stage["addr"], stage["base"], stage["koff"]
        reads = len(addresses)
        s1_koff_odd = Signal(config.act_addr_width, name="s1_koff_odd") if config.pair_products else None
        m.submodules.arbiter = arbiter = BankArbiter(reads, config.act_banks, same_banks=True)
        # The reads' banks, and which of them are the same, in flip-flops (_load_reads): the
        # address adders' carries and the banks' compares no longer sit in front of the
        # arbitration, whose end loads the next beat.
        banks = [Signal(bb, name=f"s1_bank{j}") for j in range(reads)]
        same = Signal.like(arbiter.same, name="s1_same_bank")
        m.d.comb += arbiter.same.eq(same)
        # Whether this is the beat's last gather cycle, in a flip-flop loaded from the next
        # state: the arbitration no longer sits in front of the load of the next beat.
        alone = Signal(name="s1_alone")
        for j in range(reads):
            koff = s1_koff if j < cols else s1_koff_odd
            m.d.comb += addresses[j].eq(s1_base[j % cols] + koff)
        m.d.comb += arbiter.pending.eq(Mux(s1_full, stage["pend"], 0))
        served = arbiter.served
        hits = bank_hits(config, banks, served)      # hits[bank][lane]
        words, _, _ = route_to_banks(m, config, addresses, served, hits=hits)
        self._read_ports(m, words, stage["waddr"])
        # One copy of the read enable for each block of the weight buffer.
        blocks = config.weight_blocks
        m.d.comb += [self.bank_en.eq(~stall),
                     self.w_en.eq(~stall if blocks == 1 else (~stall).replicate(blocks))]

        beat_done = Signal()
        m.d.comb += beat_done.eq(s1_full & alone)
        return _Gather(**stage, hits=hits, done=beat_done, served=served,
                       remaining=arbiter.remaining, koff_odd=s1_koff_odd, banks=banks, same=same,
                       alone=alone)

    def _load_reads(self, m, gather, *, stall, s1_full, load, first, tile, beat):
        config = self.config
        lanes = Mux(first, tile.valid, gather.tvalid)
        if config.pair_products:        # then each lane's odd channel's (reads cols + j)
            lanes = Cat(lanes, Mux(beat.odd, lanes, 0))
        update(m, gather.pend, Mux(load, lanes, gather.remaining), enable=~stall & (load | s1_full))
        bb = config.bank_bits
        banks = []
        for j, bank in enumerate(gather.banks):
            lane = j % config.cols
            base = Mux(first, tile.addr[lane], gather.base[lane])
            koff = beat.koff if j < config.cols else self._odd_offset(beat)
            banks.append(Signal(bb, name=f"s1_bank_next{j}"))
            m.d.comb += banks[-1].eq(base[:bb] + koff[:bb])
            update(m, bank, banks[-1], enable=load)
        same = BankArbiter.same_of(banks)
        update(m, gather.same, same, enable=load)
        update(m, gather.alone, Mux(load, BankArbiter.all_served(lanes, same),
                                    BankArbiter.all_served(gather.remaining, gather.same)),
               enable=~stall & (load | s1_full))

    def _odd_offset(self, beat):
        """The kernel offset of the beat's odd channel (pair products)."""
        return beat.koff + self.regs.in_cstride

    def _load_offsets(self, m, gather, beat, *, load):
        update(m, gather.koff, beat.koff, enable=load)
        if self.config.pair_products:
            update(m, gather.koff_odd, self._odd_offset(beat), enable=load)

    def _offer(self, m, stall, o_valid, o_last, b_cur, a_cur):
        config, payload = self.config, self.operands.payload
        m.d.comb += [self.operands.valid.eq(o_valid), payload.last.eq(o_last)]
        m.d.comb += [payload.b[j].eq(b_cur[j]) for j in range(config.cols)]
        m.d.comb += [payload.a[i].eq(a_cur[i]) for i in range(config.rows)]
        m.d.comb += stall.eq(self.operands.valid & ~self.operands.ready)
