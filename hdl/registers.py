"""The engine registers as the hardware holds them, and the register idioms the blocks share
(:func:`update`, :func:`registered_wrap`).

``SET`` writes a 32-bit value; the hardware keeps only the bits it uses:

* activation addresses, pitches and strides: :func:`act_addr_width` bits. Every
  activation address is computed modulo the buffer size, and ``a*b mod 2^n``
  depends only on ``a`` and ``b`` mod ``2^n``, so keeping the low bits is exact
  (the ISA's "addresses modulo the buffer sizes") when the buffer size is a power
  of two;
* weight words and parameter entries likewise, in :func:`weight_addr_width` and
  :func:`param_addr_width` bits;
* counts (``K_C, K_H, K_W, OUT_W, NPIX, TILES, GROUPS, M``; the region counts
  ``IO_CHANNELS, IO_ROWS, IO_LEN`` are three of them): :attr:`~fpganet.config.AcceleratorConfig.count_width` bits, ``act_addr_width + 1`` but at
  most :data:`COUNT_WIDTH` (16): every count walks data held in the activation buffer, so
  none exceeds its size (14 bits for 8 KiB). The units' counters that walk them have as many
  bits (a pixel or channel index one more, to hold it past ``NPIX`` or ``M``); on an iCE40
  each bit is a logic cell;
* ``LANES``: enough bits for ``cols``;
* ``QUANT`` 24 bits (25 in the ``tflite`` requantization mode), ``FILL_VALUE`` 8 bits, ``LOOP_COUNT`` :data:`LOOP_COUNT_WIDTH` (16).

A program whose values do not fit (a count of ``2**count_width`` or more, a ``LOOP`` with
``LOOP_COUNT`` of 65,536 or more, ``LANES`` outside ``1..cols``) is outside what the hardware
runs; :func:`fpganet.perf.check_registers` reports it (the ISA simulator too, but for ``LANES``).
"""

from amaranth.hdl import Mux, Signal, Value
from amaranth.lib import data

from fpganet.isa import COUNT_WIDTH, LOOP_COUNT_WIDTH, Reg, quant_bits

__all__ = ["COUNT_WIDTH", "LOOP_COUNT_WIDTH", "register_widths", "register_layout",
           "registered_wrap", "count_down", "update"]


def update(m, register, value, *, enable, reset=None, reset_value=0):
    """``register <= reset_value`` (0 unless given) on ``reset``, else ``value`` when ``enable``.

    Written this way, a register maps onto flip-flops with synchronous reset and enable
    instead of a chain of multiplexers. ``register`` and ``value`` may be views.
    """
    register, value = Value.cast(register), Value.cast(value)
    if reset is not None:
        with m.If(reset):
            m.d.sync += register.eq(reset_value)
        with m.Elif(enable):
            m.d.sync += register.eq(value)
    else:
        with m.If(enable):
            m.d.sync += register.eq(value)


def next_value(register, value, *, enable, reset=None):
    """What :func:`update` loads into ``register`` at the next clock edge, as an expression:
    for a register kept beside it that is loaded from its next value (a flag, a few bits of a
    sum) instead of being computed from it a cycle later."""
    following = Mux(enable, value, register)
    return following if reset is None else Mux(reset, 0, following)


def registered_wrap(m, wrap, count, limit, *, restart, step):
    """Keep ``wrap`` equal to ``count + 1 == limit`` in a flip-flop.

    ``count`` is a counter that ``restart`` and ``step & wrap`` set to 0 and ``step``
    otherwise increments; ``limit`` (a count register) holds while it counts. The flag is
    loaded from the next count (``limit == 1`` after a reset, ``count + 2 == limit`` after
    an increment), so it is exact in every cycle, and the comparison stays out of whatever
    the wrap decides (the counters' resets, a memory address).
    """
    with m.If(restart | (step & wrap)):
        m.d.sync += wrap.eq(limit == 1)
    with m.Elif(step):
        m.d.sync += wrap.eq(count + 2 == limit)


def count_down(m, counter, limit, *, restart, step, by=1, registered=False):
    """A wrapping counter over ``limit`` items (a count register, at least 1, holding while it
    counts), ``by`` (1 or 2) a step; returns its wrap, true in the last step.

    ``counter`` holds the items left: ``restart`` and a wrapping ``step`` load ``limit``, another
    ``step`` takes ``by`` off. Counting up, ``count + 1`` would feed both the flip-flops and the
    comparison with ``limit``, and on an iCE40 each flip-flop would take a logic cell of its own;
    counting down, the decrement feeds only the flip-flops and the wrap is ``counter == 1`` (or
    2 when ``by`` is 2).

    ``registered``: the wrap is a flip-flop loaded from the next count (the comparisons of
    ``limit`` after a load, of ``counter`` with ``by + 1`` (and ``by + 2``) after a step), so
    the counter's compare stays out of what the wrap decides. Exact in every cycle.
    """
    if by not in (1, 2):
        raise ValueError(f"by must be 1 or 2, not {by!r}")

    def last(value, after=0):       # value - after is the last step's count
        return value == after + 1 if by == 1 else (value == after + 1) | (value == after + 2)

    if registered:
        wrap = Signal(name=f"{counter.name}_wrap")
        with m.If(restart | (step & wrap)):
            m.d.sync += [counter.eq(limit), wrap.eq(last(limit))]
        with m.Elif(step):
            m.d.sync += [counter.eq(counter - by), wrap.eq(last(counter, by))]
        return wrap
    wrap = last(counter)
    with m.If(restart | (step & wrap)):
        m.d.sync += counter.eq(limit)
    with m.Elif(step):
        m.d.sync += counter.eq(counter - by)
    return wrap


def register_widths(config):
    """``{Reg: bits}``: how many low bits of each register the hardware keeps."""
    aw, ww, pw = config.act_addr_width, config.weight_addr_width, config.param_addr_width
    cw = config.count_width
    widths = {
        Reg.IN_BASE: aw, Reg.IN_PITCH: aw, Reg.IN_CSTRIDE: aw, Reg.IN_GSTEP: aw,
        Reg.K_C: cw, Reg.K_H: cw, Reg.K_W: cw,
        Reg.IN_ROWSTEP: aw, Reg.STRIDE_X: aw,
        Reg.OUT_W: cw, Reg.NPIX: cw, Reg.LANES: config.lanes_width,
        Reg.TILES: cw, Reg.GROUPS: cw, Reg.M: cw,
        Reg.OUT_BASE: aw, Reg.OUT_PITCH: aw, Reg.OUT_CSTRIDE: aw, Reg.OUT_GSTEP: aw,
        Reg.W_BASE: ww, Reg.W_GSTEP: ww, Reg.P_BASE: pw,
        Reg.QUANT: quant_bits(config.requant_mode),
        Reg.FILL_VALUE: 8, Reg.LOOP_COUNT: LOOP_COUNT_WIDTH,
    }
    assert set(widths) == set(Reg)
    return widths


def register_layout(config):
    """``data.FlexibleLayout`` of the register file, one field per :class:`~fpganet.isa.Reg`
    name in lower case (``in_base``, ``k_c``...); an alias's field (``io_len``) is its register's
    bits (``k_w``)."""
    registers = data.StructLayout({reg.name.lower(): width for reg, width in register_widths(config).items()})
    return data.FlexibleLayout(registers.size, {name.lower(): registers[reg.name.lower()]
                                                for name, reg in Reg.__members__.items()})
