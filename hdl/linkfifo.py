"""The host link's byte FIFOs.

:class:`PacketFIFO`
    The input FIFO: writes stay invisible until committed and can be rolled back, so a
    damaged SEND_INPUT frame leaves nothing behind.
:class:`OutputFIFO`
    The output FIFO: ``SyncFIFOBuffered(width=8)``'s behaviour in fewer iCE40 cells.
"""

from amaranth import *
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .memories import NO_RW_CHECK, falling_edge_write_domain, registered_read

__all__ = ["PacketFIFO", "OutputFIFO", "MAX_BUFFER", "check_int"]

#: Largest FIFO or staging buffer (the protocol's counts are 16-bit).
MAX_BUFFER = 1 << 15


def check_int(name, value, low, high):
    """``value`` if it is an integer in ``low..high``; else a TypeError or ValueError naming
    ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be {low}..{high}, not {value}")
    return value


class PacketFIFO(wiring.Component):
    """A byte FIFO whose writes become readable only when committed.

    Bytes written since the last :attr:`commit` can be discarded with :attr:`rollback`, so
    a frame's payload goes in as it arrives and disappears if the frame turns out damaged.

    Its memory is written on the falling edge of the clock (see
    :func:`~fpganet.hdl.memories.falling_edge_write_domain`), so ``w_data`` and ``w_en`` have
    half a cycle to settle: they should come from flip-flops, ``w_en`` through one LUT at most.

    Parameters
    ----------
    depth : int
        Bytes it holds; a power of two (one block RAM of 512 bytes on iCE40 per 512).

    Members
    -------
    w_data : In(8)
    w_en : In(1)
        Write ``w_data``. The writer checks :attr:`free` first: a write to a full FIFO
        overwrites the oldest unread byte.
    commit : In(1)
        Every byte written before this cycle becomes readable next cycle.
    rollback : In(1)
        The bytes written since the last commit are forgotten (not with ``w_en``).
    drop : In(1)
        Every committed, unread byte is forgotten.
    r : Out(stream.Signature(8))
        Committed bytes, in order. ``r.valid`` and ``r.payload`` come from registers and the
        memory's read port; a committed byte is readable one cycle after the commit.
    free : Out(range(depth + 1))
        Bytes that can still be written (counting uncommitted ones as written).
    level : Out(range(depth + 1))
        Committed bytes not yet read.

    Latency: a committed byte is readable one cycle after the commit (:attr:`latency`).
    Throughput: one byte in and one out per cycle. Back-pressure: none on the write side
    (the writer checks ``free``); ``r.ready`` on the read side.
    """

    #: Cycles from ``commit`` to ``r.valid``.
    latency = 1

    def __init__(self, depth):
        check_int("PacketFIFO depth", depth, 2, MAX_BUFFER)
        if depth & (depth - 1):
            raise ValueError(f"PacketFIFO depth must be a power of two, not {depth}")
        self.depth = depth
        super().__init__({
            "w_data": In(8), "w_en": In(1), "commit": In(1), "rollback": In(1), "drop": In(1),
            "r": Out(stream.Signature(8)),
            "free": Out(range(depth + 1)), "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        bits = ceil_log2(self.depth)
        m.submodules.storage = storage = memory.Memory(shape=8, depth=self.depth, init=[])
        write = storage.write_port(domain=falling_edge_write_domain(m, "packet_fifo_write"))
        read = storage.read_port()

        w_ptr = Signal(bits + 1)        # next byte to write (tentative)
        c_ptr = Signal(bits + 1)        # end of the committed bytes
        r_ptr = Signal(bits + 1)        # next byte to read
        r_next = Signal(bits + 1)

        taken = self.r.valid & self.r.ready
        m.d.comb += [
            write.addr.eq(w_ptr[:bits]),
            write.data.eq(self.w_data),
            write.en.eq(self.w_en),
            r_next.eq(r_ptr + taken),
            # The read port reads where the pointer will be, so its data belong to r_ptr.
            read.addr.eq(r_next[:bits]),
            self.r.payload.eq(read.data),
            # depth - (w_ptr - r_ptr) with one subtraction: adding depth flips the top bit.
            self.free.eq((Cat(r_ptr[:bits], ~r_ptr[bits]) - w_ptr)[:bits + 1]),
            self.level.eq((c_ptr - r_ptr)[:bits + 1]),
        ]
        with m.If(self.rollback):
            m.d.sync += w_ptr.eq(c_ptr)
        with m.Elif(self.w_en):
            m.d.sync += w_ptr.eq(w_ptr + 1)
        with m.If(self.commit):
            m.d.sync += c_ptr.eq(w_ptr)
        with m.If(self.drop):
            m.d.sync += r_ptr.eq(c_ptr)
        with m.Else():
            m.d.sync += r_ptr.eq(r_next)
        # r.valid is r_ptr != c_ptr, kept in a flip-flop from the pointers' next values: the
        # reader's whole walk hangs on it (the region unit's INPUT), and the comparison in
        # front of it was the iCE40 build's critical path.
        m.d.sync += self.r.valid.eq(Mux(self.drop, c_ptr, r_next) != Mux(self.commit, w_ptr, c_ptr))
        return m


class OutputFIFO(wiring.Component):
    """A byte FIFO that behaves, cycle for cycle, as ``SyncFIFOBuffered(width=8, depth=depth)``
    (the same ``w_rdy``, ``r_rdy``, ``r_data`` and ``level``), in fewer iCE40 cells.

    Amaranth's version keeps the level of its memory part and adds the output register to
    it (an adder), counts it up and down with two adders, and wraps its pointers at
    ``depth - 1`` (compares). This one keeps the total level in one up/down counter, derives
    the memory part's state from it and the output register's flag, and lets its pointers
    wrap freely over a memory of the next power of two (which holds the ``depth - 1`` bytes
    of the memory part without the pointers ever meeting when it is full, so its reads and
    writes never collide).

    Parameters
    ----------
    depth : int
        Bytes it holds (2..32768).
    registered_ready : bool
        Keep ``w_rdy`` in a flip-flop loaded from the next level (the same value a cycle
        earlier): the writer's back-pressure then starts at a flip-flop, not at the level's
        comparisons (on the ULX3S at 75 MHz, the path from the level through the region
        unit's stall into the activation banks' read enables, 14.2 ns).
    registered_output : bool
        Put a flip-flop stage behind the memory's read port: ``r_data`` then comes from
        fabric flip-flops, not from the block RAM's unregistered output (an ECP5 DP16KD's
        5.8 ns clock-to-output began the 128-MAC ULX3S build's longest path, into the UART
        transmitter). It then behaves as ``SyncFIFOBuffered(width=8, depth=depth - 1)``
        followed by a one-byte stream register: ``depth`` bytes in all, one cycle more of
        latency (:attr:`latency` 3). ``depth`` must be at least 3.

    Members
    -------
    w_data : In(8)
    w_en : In(1)
        Write ``w_data`` when ``w_rdy``.
    w_rdy : Out(1)
        Not full: the back-pressure on the writer.
    r_data : Out(8)
    r_rdy : Out(1)
        The oldest byte, from the output register (valid while ``r_rdy``).
    r_en : In(1)
        Take ``r_data`` (ignored unless ``r_rdy``).
    level : Out(range(depth + 1))
        Bytes held, the output register's included.

    Latency: a byte written into an empty FIFO is readable two cycles later (one for the
    memory, one for the output register; :attr:`latency`), as ``SyncFIFOBuffered``'s; three
    with ``registered_output``. Throughput: one byte in and one out per cycle.
    """

    def __init__(self, depth, *, registered_ready=False, registered_output=False):
        check_int("OutputFIFO depth", depth, 3 if registered_output else 2, MAX_BUFFER)
        self.depth = depth
        self.registered_ready = bool(registered_ready)
        self.registered_output = bool(registered_output)
        super().__init__({
            "w_data": In(8), "w_en": In(1), "w_rdy": Out(1, init=1 if registered_ready else 0),
            "r_data": Out(8), "r_en": In(1), "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })

    @property
    def latency(self):
        """Cycles from ``w_en`` (into an empty FIFO) to ``r_rdy``."""
        return 3 if self.registered_output else 2

    @staticmethod
    def _memory(m, stored, *, fetch=None):
        """The memory part, for ``stored`` bytes at most: its write port, its read port and
        free-running pointers over the next power of two (they never meet when it is full).
        The read port is synchronous and transparent, or with ``fetch`` (an enable) a
        :func:`~fpganet.hdl.memories.registered_read`, whose register it returns too."""
        bits = max(1, ceil_log2(stored))
        m.submodules.storage = storage = memory.Memory(
            shape=8, depth=1 << bits, init=[], attrs=None if fetch is None else NO_RW_CHECK)
        write = storage.write_port()
        fetched = None
        if fetch is None:
            read = storage.read_port(transparent_for=(write,))
        else:
            read = storage.read_port(domain="comb")
            fetched = registered_read(m, read, enable=fetch, name="fetched")
        return write, read, fetched, Signal(bits, name="produce"), Signal(bits, name="consume")

    def _count_level(self, m, do_write, do_read):
        """``level``: +1, -1 or 0 in one adder (a write adds 1, a read adds all ones)."""
        step = Signal(len(self.level))
        m.d.comb += step.eq(Mux(do_write, do_write ^ do_read,
                                Mux(do_read, (1 << len(step)) - 1, 0)))
        m.d.sync += self.level.eq(self.level + step)

    @staticmethod
    def _moves(do_write, do_read):
        """Whether the level goes up, down or stays."""
        return do_write & ~do_read, do_read & ~do_write, ~(do_write ^ do_read)

    def elaborate(self, platform):
        if self.registered_output:
            return self._elaborate_registered_output()
        m = Module()
        # A fetch never reads the slot written in its cycle (the byte written is not yet
        # counted as stored, and the pointers never meet while a byte is), so the output
        # register is a registered_read (on the iCE40 the FIFO took 71 logic cells with a
        # synchronous port, 56 without).
        do_fetch = Signal()                     # into the output register
        write, read, fetched, produce, consume = self._memory(m, self.depth - 1, fetch=do_fetch)

        # The memory part holds level - r_rdy bytes (at most depth - 1).
        stored_any = (self.level[1:] != 0) | (self.level[0] & ~self.r_rdy)
        at = {k: self.level == self.depth - k for k in range(3)}     # level == depth - k
        stored_full = at[0] | (at[1] & ~self.r_rdy)
        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy
        m.d.comb += [
            do_fetch.eq(stored_any & (~self.r_rdy | self.r_en)),
            *([] if self.registered_ready else [self.w_rdy.eq(~stored_full)]),
            write.addr.eq(produce), write.data.eq(self.w_data), write.en.eq(do_write),
            read.addr.eq(consume), self.r_data.eq(fetched),
        ]
        m.d.sync += [produce.eq(produce + do_write), consume.eq(consume + do_fetch)]
        with m.If(do_fetch):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        self._count_level(m, do_write, do_read)
        if self.registered_ready:
            # stored_full of the next cycle. The next level is level + 1, level - 1 or level:
            # compared through the present level's compares, not behind the adder; the next
            # r_rdy is the one the If/Elif above loads.
            next_r_rdy = do_fetch | (self.r_rdy & ~self.r_en)
            up, down, same = self._moves(do_write, do_read)
            next_at_full = (at[0] & same) | (at[1] & up)
            next_at_below = (at[1] & same) | (at[0] & down) | (at[2] & up)
            m.d.sync += self.w_rdy.eq(~(next_at_full | (next_at_below & ~next_r_rdy)))
        return m

    def _elaborate_registered_output(self):
        m = Module()
        # The memory part holds level - r_rdy - fetched bytes, at most depth - 2.
        write, read, _, produce, consume = self._memory(m, self.depth - 2)
        fetched = Signal()      # the read port's data are a byte not yet in r_data

        held = Signal(2)        # bytes in the two registers
        m.d.comb += held.eq(self.r_rdy + fetched)
        at = {k: self.level == self.depth - k for k in range(4)}     # level == depth - k

        def memory_full(at_, held_):
            return Cat(*(at_[2 - n] & (held_ == n) for n in range(3))).any()

        stored_any = self.level > held
        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy
        do_load = fetched & (~self.r_rdy | self.r_en)       # into r_data
        do_fetch = stored_any & (~fetched | do_load)        # into the read port
        m.d.comb += [
            *([] if self.registered_ready else [self.w_rdy.eq(~memory_full(at, held))]),
            write.addr.eq(produce), write.data.eq(self.w_data), write.en.eq(do_write),
            read.addr.eq(consume), read.en.eq(do_fetch),
        ]
        m.d.sync += [produce.eq(produce + do_write), consume.eq(consume + do_fetch)]
        with m.If(do_load):
            m.d.sync += [self.r_data.eq(read.data), self.r_rdy.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        with m.If(do_fetch):
            m.d.sync += fetched.eq(1)
        with m.Elif(do_load):
            m.d.sync += fetched.eq(0)
        self._count_level(m, do_write, do_read)
        if self.registered_ready:
            # memory_full of the next cycle, from the present level's compares.
            up, down, same = self._moves(do_write, do_read)
            next_at = {k: (at[k] & same) | (at[k + 1] & up) | ((at[k - 1] & down) if k else 0)
                       for k in range(3)}
            next_held = Signal(2)
            m.d.comb += next_held.eq((do_load | (self.r_rdy & ~self.r_en)) +
                                     (do_fetch | (fetched & ~do_load)))
            m.d.sync += self.w_rdy.eq(~memory_full(next_at, next_held))
        return m
