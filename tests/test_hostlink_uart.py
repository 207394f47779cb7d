"""amaranth.sim tests of the UART: bit timing, sampling tolerance, framing errors, glitches,
overruns, back-to-back bytes."""

import random
from fractions import Fraction

import pytest
from amaranth import Module
from amaranth.sim import Simulator

from fpganet.hdl.uart import BitTimer, UARTReceiver, UARTTransmitter, uart_divisor


def simulate(dut, testbench, *, extra=()):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    for process in extra:
        sim.add_testbench(process, background=True)
    sim.run()


def frame_bits(byte, stop=1):
    """Line levels of one 8N1 character: start, 8 data bits LSB first, stop."""
    return [0] + [(byte >> i) & 1 for i in range(8)] + [stop]


def waveform(characters, period, *, phase=0.0, idle_before=10, idle_after=40):
    """Line level at each clock cycle for characters (lists of bits) sent back to back by a
    transmitter whose bit lasts ``period`` cycles, starting ``idle_before + phase`` cycles in."""
    bits = [b for character in characters for b in character]
    origin = idle_before + phase
    levels = []
    for cycle in range(int(origin + len(bits) * period) + idle_after):
        t = cycle - origin
        k = int(t // period) if t >= 0 else -1
        levels.append(bits[k] if 0 <= k < len(bits) else 1)
    return levels


# Bit timer -----------------------------------------------------------------------------------

@pytest.mark.parametrize("divisor", [4, 13, Fraction(40, 3), Fraction(100, 3), 12])
def test_bit_timer_average_period(divisor):
    """Periods are floor/ceil of the divisor and add up to it within a cycle."""
    dut = BitTimer(divisor)
    ticks = []

    async def testbench(ctx):
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        for cycle in range(1, 40 * int(divisor) + 1):
            if ctx.get(dut.tick):
                ticks.append(cycle)
            await ctx.tick()

    simulate(dut, testbench)
    periods = [b - a for a, b in zip(ticks, ticks[1:])]
    assert set(periods) <= {int(divisor), int(divisor) + 1}
    for k, tick in enumerate(ticks):
        assert abs(tick - ticks[0] - k * divisor) < 1, f"tick {k} at {tick} drifted"


def test_divisor_checks():
    assert uart_divisor(Fraction(40, 3)) == Fraction(40, 3)
    with pytest.raises(ValueError, match="below 4 clock cycles"):
        UARTReceiver(3)
    with pytest.raises(ValueError, match="below 4"):
        UARTTransmitter(12e6 / 4e6 - 0.1)
    with pytest.raises(TypeError, match="number of clock cycles"):
        UARTTransmitter("4")


# Transmitter ---------------------------------------------------------------------------------

@pytest.mark.parametrize("divisor", [4, Fraction(40, 3), 12])
def test_transmitter_timing_back_to_back(divisor):
    """Every bit lasts floor/ceil(divisor) cycles, characters follow with no idle time, and
    the line carries start, data LSB first, stop."""
    dut = UARTTransmitter(divisor)
    data = [0x55, 0x00, 0xFF, 0xA5, 0x3C]
    line = []

    async def source(ctx):
        for byte in data:
            ctx.set(dut.data.payload, byte)
            ctx.set(dut.data.valid, 1)
            await ctx.tick().until(dut.data.ready)
        ctx.set(dut.data.valid, 0)

    async def testbench(ctx):
        for _ in range(int(len(data) * 10 * divisor) + 40):
            line.append(ctx.get(dut.tx))
            await ctx.tick()

    simulate(dut, testbench, extra=[source])
    start = line.index(0)
    assert all(level == 1 for level in line[:start])
    # Bit k of the transfer begins at start + round-ish(k * divisor).
    for k, bit in enumerate(b for byte in data for b in frame_bits(byte)):
        begin = start + k * divisor
        for cycle in range(int(begin) + 1, int(begin + divisor) - 1):
            assert line[cycle] == bit, f"bit {k}: line {line[cycle]} at cycle {cycle}"
    end = start + 10 * len(data) * divisor
    assert all(level == 1 for level in line[int(end) + 1:])


# Receiver ----------------------------------------------------------------------------------

def run_receiver(divisor, levels, *, ready=True):
    dut = UARTReceiver(divisor)
    received, framing, overruns = [], [], []

    async def testbench(ctx):
        ctx.set(dut.data.ready, int(ready))
        for cycle, level in enumerate(levels):
            ctx.set(dut.rx, level)
            await ctx.tick()
            if ctx.get(dut.data.valid) and ready:
                received.append(ctx.get(dut.data.payload))
            if ctx.get(dut.framing_error):
                framing.append(cycle)
            if ctx.get(dut.overrun):
                overruns.append(cycle)
        if not ready and ctx.get(dut.data.valid):
            received.append(ctx.get(dut.data.payload))

    simulate(dut, testbench)
    return received, framing, overruns


@pytest.mark.parametrize("divisor,mismatch", [
    (4, -0.02), (4, 0.0), (4, 0.02),
    (Fraction(40, 3), -0.035), (Fraction(40, 3), 0.0), (Fraction(40, 3), 0.035),
    (12, -0.035), (12, 0.035)])
def test_receiver_back_to_back_with_baud_mismatch(divisor, mismatch):
    """Back-to-back characters from a transmitter a few percent off, at several phases."""
    rng = random.Random(f"{divisor}{mismatch}")
    data = [0x00, 0xFF, 0x55, 0xAA] + [rng.randrange(256) for _ in range(8)]
    period = float(divisor) * (1 + mismatch)
    for phase in (0.0, 0.3, 0.7):
        levels = waveform([frame_bits(b) for b in data], period, phase=phase)
        received, framing, overruns = run_receiver(divisor, levels)
        assert received == data, f"phase {phase}"
        assert not framing and not overruns


def test_receiver_framing_error_and_break():
    """A zero stop bit drops the byte and pulses framing_error once, also when the line then
    stays low (a break); the next character is received."""
    divisor = 8
    characters = [frame_bits(0x12), frame_bits(0x34, stop=0), [0] * 30, [1, 1], frame_bits(0x56)]
    received, framing, _ = run_receiver(divisor, waveform(characters, divisor))
    assert received == [0x12, 0x56]
    assert len(framing) == 1


def test_receiver_ignores_glitches():
    """Low pulses shorter than half a bit are not start bits."""
    divisor = 13
    levels = [1] * 20 + [0] * 3 + [1] * 40 + [0] * 5 + [1] * 40
    levels += waveform([frame_bits(0x81)], divisor)
    received, framing, _ = run_receiver(divisor, levels)
    assert received == [0x81] and not framing


def test_receiver_overrun_keeps_the_first_byte():
    divisor = 6
    received, _, overruns = run_receiver(
        divisor, waveform([frame_bits(0x11), frame_bits(0x22), frame_bits(0x33)], divisor),
        ready=False)
    assert received == [0x11]
    assert len(overruns) == 2


@pytest.mark.parametrize("divisor", [4, Fraction(40, 3)])
def test_loopback(divisor):
    """Transmitter into receiver: random bytes arrive in order at one per 10 bit periods."""
    m = Module()
    m.submodules.tx = tx = UARTTransmitter(divisor)
    m.submodules.rx = rx = UARTReceiver(divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    data = [random.Random(7).randrange(256) for _ in range(12)]
    received = []

    async def source(ctx):
        for byte in data:
            ctx.set(tx.data.payload, byte)
            ctx.set(tx.data.valid, 1)
            await ctx.tick().until(tx.data.ready)
        ctx.set(tx.data.valid, 0)

    async def testbench(ctx):
        ctx.set(rx.data.ready, 1)
        arrivals = []
        for cycle in range(int(len(data) * 10 * divisor) + 60):
            await ctx.tick()
            if ctx.get(rx.data.valid):
                received.append(ctx.get(rx.data.payload))
                arrivals.append(cycle)
        gaps = {b - a for a, b in zip(arrivals, arrivals[1:])}
        assert all(abs(gap - 10 * divisor) <= 1 for gap in gaps), gaps

    simulate(m, testbench, extra=[source])
    assert received == data
