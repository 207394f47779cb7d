"""The region unit: ``FILL``, ``INPUT`` and ``OUTPUT``, one byte per cycle (with the pipeline
registers a ``FILL`` writes a run of banks per cycle).

The three instructions walk the same 3-D pattern of the activation buffer, in
channel, row, byte order::

    IO_BASE + c*IO_CSTRIDE + r*IO_PITCH + x    for c < IO_CHANNELS, r < IO_ROWS, x < IO_LEN

with running sums for the address. ``FILL`` writes ``FILL_VALUE``, ``INPUT`` the
bytes of the input stream, ``OUTPUT`` sends the bytes to the output stream.
"""

import enum

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .memories import bank_select
from .registers import count_down, register_layout

__all__ = ["RegionMode", "RegionUnit"]


class RegionMode(enum.IntEnum):
    FILL = 0
    INPUT = 1
    OUTPUT = 2


class RegionUnit(wiring.Component):
    """Walks an ``IO_*`` region and fills, loads or sends it.

    Parameters
    ----------
    config : AcceleratorConfig

    Members
    -------
    start : In(1)
        Pulse: begin; ``regs`` hold until ``done``. The region must not be empty
        (the controller does not start an empty one).
    mode : In(RegionMode)
        Taken with ``start`` (without ``config.region_start_latency``, held until ``done``).
    regs : In(register_layout(config))
    input : In(stream.Signature(8))
        ``INPUT``: one byte per transfer, ``ready`` high while bytes are wanted.
    output : Out(stream.Signature(8))
        ``OUTPUT``: one byte per transfer; back-pressure holds the walk.
    wr_addr : Out(config.act_addr_width)
    wr_data : Out(8)
    wr_en : Out(1)
        One byte write per cycle (``FILL``, ``INPUT``).
    wr_banks : Out(act_banks)
        With ``config.registered_writes`` only: the banks written this cycle, all at
        ``wr_addr``'s word. ``INPUT`` writes ``wr_addr``'s bank; ``FILL`` writes a run of a
        row's bytes up to the next multiple of ``act_banks`` (wide ``FILL``), every bank
        from ``wr_addr``'s on that the run reaches.
    rd_addr : Out(config.act_addr_width)
    rd_en : Out(1)
    bank_data : In(ArrayLayout(8, act_banks))
        ``OUTPUT`` reads: ``rd_addr``'s word in every bank, ``config.act_read_latency``
        cycles with ``rd_en`` later, held while ``rd_en`` is low; the unit picks the byte
        of ``rd_addr``'s bank. With the pipeline registers ``rd_en`` is high in every
        ``OUTPUT`` cycle in which the offered byte does not wait, so the reads advance.
    done : Out(1)
        High in the instruction's final cycle, the one after the last byte is
        written or taken. It comes from a flip-flop: the controller's next fetch
        hangs on it, and the compares that find the last byte would otherwise sit
        in front of that fetch (the iCE40 build's longest path).

    Timing, with the streams never stalling: ``FILL`` and ``INPUT`` take ``N + 2 + RS``
    cycles for ``N`` bytes (the ``start`` cycle, ``RS = config.region_start_latency`` cycles,
    one byte per cycle, the ``done`` cycle); with ``config.registered_writes`` ``FILL`` writes
    a run of banks a cycle (:func:`fpganet.perf.fill_runs`); ``OUTPUT`` takes
    ``N + 2 + RS + config.output_latency``: the read, and with
    ``config.registered_bram_outputs`` the banks' registers and a register behind the banks'
    multiplexer, so that a block RAM's output runs neither through the multiplexer nor
    into the consumer of ``output`` in its cycle (each was once the ULX3S build's longest
    path).
    """

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.config = config
        aw = config.act_addr_width
        super().__init__({
            "start": In(1),
            "mode": In(RegionMode),
            "regs": In(register_layout(config)),
            "input": In(stream.Signature(8)),
            "output": Out(stream.Signature(8)),
            "wr_addr": Out(aw),
            "wr_data": Out(8),
            "wr_en": Out(1),
            **({"wr_banks": Out(config.act_banks)} if config.registered_writes else {}),
            "rd_addr": Out(aw),
            "rd_en": Out(1),
            "bank_data": In(data.ArrayLayout(8, config.act_banks)),
            "done": Out(1),
        })

    def _row_runs(self, m, mode, x, room, advance, *, restart):
        """With the pipeline registers, the row's bytes left in ``x``: a ``FILL`` steps a run
        at a time (to the next multiple of ``act_banks``, or the row's end), ``INPUT`` and
        ``OUTPUT`` a byte (``mode``). ``room`` holds the bytes from the address to the next
        multiple of ``act_banks``. Returns ``(row_end, run)``: the step ends the row; the run's bytes."""
        config, regs = self.config, self.regs
        run = Signal.like(room)
        row_end = Signal()
        fill = mode == RegionMode.FILL
        bb = config.bank_bits
        m.d.comb += [
            run.eq(Mux(fill, room, 1)),
            # x <= room compared on room's bits, the rest of x zero: no carry chain along x
            row_end.eq(Mux(fill, (x[bb + 1:] == 0) & (x[:bb + 1] <= room), x == 1)),
        ]
        with m.If(restart | (advance & row_end)):
            m.d.sync += x.eq(regs.io_len)
        with m.Elif(advance):
            m.d.sync += x.eq(x - run)
        return row_end, run

    def _run_banks(self, addr, x):
        """The banks a ``FILL``'s run from ``addr`` writes, ``x`` bytes left in the row: bank
        ``b`` from ``addr``'s on while ``b - addr % act_banks < x``."""
        bb = self.config.bank_bits
        if not bb:
            return C(1, 1)
        first = addr[:bb]
        return Cat((first <= b) & (C(b, bb) - first < x) for b in range(self.config.act_banks))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        regs = self.regs
        aw, bb, cw = config.act_addr_width, config.bank_bits, config.count_width
        walking = Signal()        # elements left to visit
        # ``start`` is decoded from the instruction word on the program memory's output, far
        # from here. With ``config.region_start_latency`` it reaches two flip-flops and nothing
        # else (in front of the walk's loads and enables it was the iCE40 build's longest path
        # at 30 MHz): the walk begins in the cycle after ``begin``, its registered copy, and
        # until then, idle, its registers load their starts from ``regs`` in every cycle.
        # Without it the start loads them and begins the walk.
        restart, begin, mode = self.start, self.start, self.mode
        if config.region_start_latency:
            begin, mode = Signal(name="started"), Signal(RegionMode, name="mode")
            m.d.sync += begin.eq(self.start)
            with m.If(self.start):
                m.d.sync += mode.eq(self.mode)
            restart = ~walking
        x = Signal(cw)            # bytes, rows and channels left
        r = Signal(cw)
        c = Signal(cw)
        addr = Signal(aw)
        rowbase = Signal(aw)
        chanbase = Signal(aw)
        is_last = Signal()
        advance = Signal()
        wide = config.registered_writes           # FILL writes a run of banks a cycle
        if wide:
            # act_banks - addr % act_banks, kept beside the address in a flip-flop: from the
            # address's bits it ran through the row's end into the walk's enables (the
            # 128-MAC ULX3S build at seed 3).
            room = Signal(bb + 1, name="room")

            def room_at(address):
                return config.act_banks - address[:bb]

            x_wrap, run = self._row_runs(m, mode, x, room, advance, restart=restart)
        else:
            x_wrap = count_down(m, x, regs.io_len, restart=restart, step=advance)
        # With the pipeline registers the wraps are flip-flops (the compares were behind the
        # row's end, in front of the walk's enables: the 128-MAC ULX3S build).
        r_wrap = count_down(m, r, regs.io_rows, restart=restart, step=advance & x_wrap,
                            registered=wide)
        c_wrap = count_down(m, c, regs.io_channels, restart=restart,
                            step=advance & x_wrap & r_wrap, registered=wide)
        m.d.comb += is_last.eq(x_wrap & r_wrap & c_wrap)
        next_chan = chanbase + regs.io_cstride
        next_row = Mux(r_wrap, next_chan, rowbase + regs.io_pitch)
        next_addr = Mux(x_wrap, next_row, addr + (run if wide else 1))
        with m.If(restart):
            m.d.sync += [addr.eq(regs.io_base), rowbase.eq(regs.io_base), chanbase.eq(regs.io_base)]
            if wide:
                m.d.sync += room.eq(room_at(regs.io_base))
        with m.Elif(advance):
            m.d.sync += addr.eq(next_addr)
            if wide:
                m.d.sync += room.eq(room_at(next_addr))
            with m.If(x_wrap):
                m.d.sync += rowbase.eq(next_row)
            with m.If(x_wrap & r_wrap):
                m.d.sync += chanbase.eq(next_chan)
        with m.If(begin):
            m.d.sync += walking.eq(1)
        with m.Elif(advance & is_last):
            m.d.sync += walking.eq(0)

        m.d.comb += [self.wr_addr.eq(addr), self.rd_addr.eq(addr)]

        # OUTPUT: the byte read last is on the banks' outputs until taken. With the pipeline
        # registers the reads are a pipeline that advances unless the offered byte waits
        # (``rd_en``: the banks' registers advance with it): the read, the banks' registers,
        # out_byte behind the banks' multiplexer.
        out_valid = Signal()
        issue = Signal()
        registered = config.registered_bram_outputs
        if registered:
            stall = Signal()
            read_valid = [Signal(name=f"read_valid{i}") for i in range(config.act_read_latency)]
            read_sel = [Signal(max(1, bb), name=f"read_sel{i}") for i in range(config.act_read_latency)]
            out_byte = Signal(8)
            m.d.comb += stall.eq(out_valid & ~self.output.ready)
            room = ~stall
            drained = ~walking
            for valid in read_valid:
                drained &= ~valid
        else:
            load = issue
            room = ~out_valid | self.output.ready
            drained = ~walking

        with m.Switch(mode):
            with m.Case(RegionMode.FILL):
                m.d.comb += [advance.eq(walking), self.wr_en.eq(walking),
                             self.wr_data.eq(regs.fill_value)]
                if wide:
                    m.d.comb += self.wr_banks.eq(Mux(walking, self._run_banks(addr, x), 0))
                m.d.sync += self.done.eq(walking & is_last)
            with m.Case(RegionMode.INPUT):
                m.d.comb += [self.input.ready.eq(walking), advance.eq(walking & self.input.valid),
                             self.wr_en.eq(advance), self.wr_data.eq(self.input.payload)]
                if wide:
                    m.d.comb += self.wr_banks.eq(Mux(advance, bank_select(config, addr), 0))
                m.d.sync += self.done.eq(advance & is_last)
            with m.Case(RegionMode.OUTPUT):
                m.d.comb += [issue.eq(walking & room), advance.eq(issue),
                             self.rd_en.eq(~stall if registered else issue)]
                m.d.sync += self.done.eq(drained & out_valid & self.output.ready)

        if registered:
            with m.If(self.start):
                m.d.sync += [valid.eq(0) for valid in read_valid]
            with m.Elif(~stall):
                m.d.sync += [after.eq(before) for before, after in zip([issue, *read_valid], read_valid)]
                m.d.sync += [after.eq(before) for before, after in zip([addr[:bb], *read_sel], read_sel)]
            read_byte = self.bank_data[read_sel[-1]] if bb else self.bank_data[0]
            with m.If(~stall):
                m.d.sync += [out_valid.eq(read_valid[-1]), out_byte.eq(read_byte)]
            m.d.comb += [self.output.valid.eq(out_valid), self.output.payload.eq(out_byte)]
            return m
        bank_sel = Signal(max(1, bb))
        if bb:
            with m.If(issue):
                m.d.sync += bank_sel.eq(addr[:bb])
        read_byte = self.bank_data[bank_sel] if bb else self.bank_data[0]
        m.d.comb += [self.output.valid.eq(out_valid), self.output.payload.eq(read_byte)]
        with m.If(load):
            m.d.sync += out_valid.eq(1)
        with m.Elif(self.output.ready):
            m.d.sync += out_valid.eq(0)
        return m
