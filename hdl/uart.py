"""8N1 UART receiver and transmitter with byte streams.

Both take the bit period in clock cycles, ``divisor = clock_hz / baud``, which
need not be an integer: the bit timer keeps its fraction (with a denominator of
at most 256, so at least as close as 8 fractional bits) and spreads the
remainder over the bits (Bresenham), so 40 MHz at 3 Mbaud (13.33 cycles per
bit, 40/3 exactly) is as accurate as 12 MHz at 3 Mbaud (4 cycles). A bit must
last at least :data:`MIN_DIVISOR` cycles: the receiver's synchronizer and
mid-bit sampling need them. The FT2232H on iCEBreaker and ULX3S makes 3 Mbaud
and 1 Mbaud exactly (12 MHz / 4, / 12).

Cycle numbers below count clock edges of domain ``sync``.
"""

from fractions import Fraction

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UARTReceiver", "UARTTransmitter", "MIN_DIVISOR", "FRACTION_BITS", "uart_divisor",
           "BitTimer"]

#: Fewest clock cycles per bit the receiver accepts.
MIN_DIVISOR = 4
#: The bit period's fraction is kept to within ``2**-FRACTION_BITS`` cycles (as a fraction
#: with a denominator of at most ``2**FRACTION_BITS``).
FRACTION_BITS = 8
#: Most cycles per bit (a 16-bit counter: 100 MHz down to 1,526 baud).
MAX_DIVISOR = 1 << 16


def uart_divisor(divisor):
    """Check a bit period in cycles and return it as a :class:`~fractions.Fraction`.

    Raises
    ------
    ValueError
        Naming the value when it is not a number, or is below :data:`MIN_DIVISOR` or
        above ``2**16``.
    """
    if isinstance(divisor, bool) or not isinstance(divisor, (int, float, Fraction)):
        raise TypeError(f"UART divisor must be a number of clock cycles per bit, "
                        f"not {divisor!r}")
    value = Fraction(divisor)
    if value < MIN_DIVISOR:
        raise ValueError(f"UART divisor {float(value):.3g} is below {MIN_DIVISOR} clock cycles "
                         f"per bit: raise the clock or lower the baud rate")
    if value > MAX_DIVISOR:
        raise ValueError(f"UART divisor {float(value):.6g} exceeds {MAX_DIVISOR} clock cycles "
                         f"per bit")
    return value


class BitTimer(wiring.Component):
    """Ticks once per bit period of ``divisor`` (fractional) cycles.

    Members
    -------
    restart : In(1)
        Start a period now: :attr:`tick` rises ``period`` cycles later (``half`` high:
        ``floor(divisor / 2)`` cycles later), then every period while running.
    half : In(1)
        With :attr:`restart`: the first period is half a bit.
    tick : Out(1)
        High for one cycle at the end of each period.

    The average period is ``divisor`` to within ``2**-FRACTION_BITS`` cycles; single
    periods are ``floor(divisor)`` or that plus one, so an edge is never more than
    half a cycle (plus the rounding) from its ideal time.

    The period is kept as ``whole + remainder / denominator`` with the smallest denominator
    (at most ``2**FRACTION_BITS``) that comes as close as ``FRACTION_BITS`` fractional bits
    would: the phase that spreads the remainder then counts modulo ``denominator``, which
    takes 2 bits for 40/3 (40 MHz, 3 Mbaud) instead of 8, and none for a whole divisor.
    """

    def __init__(self, divisor):
        self.divisor = uart_divisor(divisor)
        period = self.divisor.limit_denominator(1 << FRACTION_BITS)
        self.denominator = period.denominator
        self.whole, self.remainder = divmod(period.numerator, period.denominator)
        self.half_cycles = max(1, int(self.divisor / 2))
        super().__init__({"restart": In(1), "half": In(1), "tick": Out(1)})

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self.whole + 1))
        long_period = Signal()      # the period that starts now lasts whole + 1 cycles
        m.d.comb += self.tick.eq(count == 0)
        if self.remainder:
            q, r = self.denominator, self.remainder
            phase = Signal(range(q))    # accumulated fraction, in 1/q cycles
            m.d.comb += long_period.eq(phase >= q - r)
            with m.If(self.restart):
                # Start at half a cycle so that the period boundaries round to nearest.
                m.d.sync += phase.eq(q // 2)
            with m.Elif(self.tick):
                m.d.sync += phase.eq(Mux(long_period, phase - (q - r), phase + r))
        with m.If(self.restart):
            with m.If(self.half):
                m.d.sync += count.eq(self.half_cycles - 1)
            with m.Else():
                m.d.sync += count.eq(self.whole - 1)
        with m.Elif(self.tick):
            m.d.sync += count.eq(self.whole - 1 + long_period)
        with m.Else():
            m.d.sync += count.eq(count - 1)
        return m


class UARTReceiver(wiring.Component):
    """8N1 UART receiver: line in, bytes out.

    Parameters
    ----------
    divisor : int, float or Fraction
        Clock cycles per bit, ``clock_hz / baud`` (at least 4; fractions kept).

    Members
    -------
    rx : In(1)
        The serial line, idle high; asynchronous (two flip-flops synchronize it).
    data : Out(stream.Signature(8))
        Received bytes. ``data.valid`` rises about 3 cycles (synchronizer, register) after
        the middle of the stop bit and stays high until the byte is taken; bytes sent back
        to back arrive 10 bit periods apart, so a consumer has a whole byte time to take
        each one.
    framing_error : Out(1)
        High for one cycle when a stop bit reads 0; the byte is dropped and the receiver
        waits for the line to go high (a break) before it looks for a start bit.
    overrun : Out(1)
        High for one cycle when a byte arrives while the previous one is still not taken;
        the new byte is dropped (``data.payload`` stays stable while ``data.valid``).

    Timing: the start bit is the first low sample; it is sampled again half a bit later and,
    if the line is high again (a glitch), ignored. The data bits and the stop bit are sampled
    one bit period apart from there, i.e. mid-bit. The receiver is ready for the next start
    bit from the middle of the stop bit on. A transmitter whose rate differs is read
    correctly (tests sweep it) from -2.5 % to +5 % at divisor 4 and within ±4.5 % at
    divisor 13.33 (40 MHz, 3 Mbaud): the sampling point may drift by nearly half a bit over
    the 9.5 bits to the stop bit.
    """

    def __init__(self, divisor):
        self.divisor = uart_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(stream.Signature(8)),
            "framing_error": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.timer = timer = BitTimer(self.divisor)
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1, stages=2)

        # The data bits enter at the top behind a marker 1, which reaches bit 1 as the eighth
        # comes: no bit counter.
        shift = Signal(9)

        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        m.d.sync += [self.framing_error.eq(0), self.overrun.eq(0)]

        with m.FSM(name="rx_fsm"):
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.comb += [timer.restart.eq(1), timer.half.eq(1)]
                    m.next = "START"
            with m.State("START"):
                with m.If(timer.tick):
                    with m.If(line):
                        m.next = "IDLE"           # a glitch, not a start bit
                    with m.Else():
                        m.d.sync += shift.eq(1 << 8)
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer.tick):
                    m.d.sync += shift.eq(Cat(shift[1:], line))
                    with m.If(shift[1]):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer.tick):
                    with m.If(line):
                        with m.If(self.data.valid & ~self.data.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.data.payload.eq(shift[1:]), self.data.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += self.framing_error.eq(1)
                        m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m


class UARTTransmitter(wiring.Component):
    """8N1 UART transmitter: bytes in, line out.

    Parameters
    ----------
    divisor : int, float or Fraction
        Clock cycles per bit, ``clock_hz / baud`` (at least 4; fractions kept).
    holding_register : bool
        Take each byte into a register first: ``data.ready`` is then that register's empty
        flag, a flip-flop, and the sender's byte multiplexer and handshake end there, not in
        the line's shift register and bit count (the host link's longest path on the iCE40
        at 30 MHz).

    Members
    -------
    data : In(stream.Signature(8))
        Bytes to send. A byte moves on to the line when the line is idle or in the last
        cycle of a stop bit, so bytes offered in time follow each other with no idle time:
        the throughput is one byte per 10 bit periods. Without the holding register
        ``data.ready`` is high in those cycles; with it, while the register is empty.
    tx : Out(1)
        The serial line, idle high, straight from a flip-flop (no glitches). The start bit
        begins the cycle after an idle transmitter takes the byte, two with the holding
        register (:attr:`latency`).
    busy : Out(1)
        A byte is being sent.
    """

    def __init__(self, divisor, *, holding_register=False):
        self.divisor = uart_divisor(divisor)
        self.holding_register = bool(holding_register)
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    @property
    def latency(self):
        """Cycles from an idle transmitter taking a byte to its start bit on the line."""
        return 2 if self.holding_register else 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.timer = timer = BitTimer(self.divisor)
        shift = Signal(10, init=0x3FF)       # stop, data[7:0], start: sent from bit 0
        remaining = Signal(range(10))        # bits after the one on the line

        # A byte goes on the line when the line is free (idle, or in a stop bit's last cycle):
        # the offered one, or with the holding register the held one.
        last_bit_ends = self.busy & timer.tick & (remaining == 0)
        m.d.comb += self.tx.eq(shift[0])
        if self.holding_register:
            held = Signal(8)
            held_valid = Signal()
            m.d.comb += self.data.ready.eq(~held_valid)
            with m.If(self.data.valid & ~held_valid):
                m.d.sync += [held.eq(self.data.payload), held_valid.eq(1)]
            send, byte, moved = held_valid & (~self.busy | last_bit_ends), held, [held_valid.eq(0)]
        else:
            m.d.comb += self.data.ready.eq(~self.busy | last_bit_ends)
            send, byte, moved = self.data.valid & self.data.ready, self.data.payload, []
        with m.If(send):
            m.d.comb += timer.restart.eq(1)
            m.d.sync += [
                *moved,
                shift.eq(Cat(C(0, 1), byte, C(1, 1))),
                remaining.eq(9),
                self.busy.eq(1),
            ]
        with m.Elif(last_bit_ends):
            m.d.sync += self.busy.eq(0)
        with m.Elif(self.busy & timer.tick):
            m.d.sync += [shift.eq(Cat(shift[1:], C(1, 1))), remaining.eq(remaining - 1)]
        return m
