"""A serial port whose other end is the HostLink gateware, simulated with amaranth.sim.

:class:`SimulatedPort` has the part of pyserial's ``Serial`` that
:class:`~fpganet.link.BoardLink` uses (``read``, ``write``, ``in_waiting``,
``reset_input_buffer``, ``close``) plus ``idle(seconds)``. Bytes written go into the
frame engine's receive stream (one per cycle when it is ready: the byte-stream level,
without the UART's bit times); ``read`` advances the simulation until the bytes
asked for have come out of the reply stream, or until the design has been quiet for
``quiet_cycles``. It is the real gateware (:class:`~fpganet.hdl.hostlink.HostLinkCore`
and a device), not a model of it.
"""

from amaranth import Module
from amaranth.sim import Simulator

from fpganet.config import AcceleratorConfig

__all__ = ["SimulatedPort"]


class SimulatedPort:
    """A port into a simulated :class:`~fpganet.hdl.hostlink.HostLinkCore` and device.

    Parameters
    ----------
    config : AcceleratorConfig, optional
        Default: ``AcceleratorConfig()``.
    device : callable
        ``device(config, addr_width)`` returns the device (default
        :class:`~fpganet.sim.standin_device.StandInDevice`).
    clock_hz, baud
        Reported by PING; ``clock_hz`` also sets the simulated clock, which turns the
        driver's waits (:meth:`idle`) into cycles: the default 1 MHz keeps them short.
    quiet_cycles : int
        A ``read`` gives up after this many cycles without a reply byte (the equivalent
        of pyserial's read timeout).
    tamper : callable, optional
        ``tamper(reply_bytes) -> reply_bytes``, applied to every byte string ``read``
        returns (a damaged line, for tests).
    **options
        Passed to :class:`~fpganet.hdl.hostlink.HostLinkCore` (``timeout_cycles`` defaults
        to 2,000 so that timeouts are quick to simulate).
    """

    def __init__(self, config=None, *, device=None, clock_hz=1e6, baud=3_000_000,
                 quiet_cycles=5000, tamper=None, **options):
        # Imported here, not at the top: the gateware (amaranth) only when the stand-in device runs.
        from fpganet.hdl.hostlink import HostLinkCore, connect_device
        from fpganet.sim.standin_device import StandInDevice

        config = config or AcceleratorConfig()
        options.setdefault("timeout_cycles", 2000)
        self.core = HostLinkCore(config, clock_hz, baud, **options)
        device = device or (lambda config, addr_width: StandInDevice(config, addr_width))
        self.device = device(config, self.core.addr_width)
        m = Module()
        m.submodules.core = self.core
        m.submodules.device = self.device
        connect_device(m, self.core, self.device)
        self.name = "simulated HostLink"
        self.clock_hz = clock_hz
        self.quiet_cycles = quiet_cycles
        self.tamper = tamper
        self.cycles = 0
        self._time = 0.0
        self._to_device = bytearray()
        self._from_device = bytearray()
        self._sim = Simulator(m)
        self._sim.add_clock(1 / clock_hz)
        self._sim.add_testbench(self._feeder, background=True)
        self._sim.add_process(self._collector)

    # The simulation side ----------------------------------------------------------------------

    async def _feeder(self, ctx):
        rx = self.core.rx
        ctx.set(self.core.tx.ready, 1)
        while True:
            if self._to_device:
                ctx.set(rx.payload, self._to_device[0])
                ctx.set(rx.valid, 1)
                await ctx.tick().until(rx.ready)
                del self._to_device[0]
            else:
                ctx.set(rx.valid, 0)
                await ctx.tick()

    async def _collector(self, ctx):
        tx = self.core.tx
        async for _, _, valid, ready, byte in ctx.tick().sample(tx.valid, tx.ready, tx.payload):
            self.cycles += 1
            if valid and ready:
                self._from_device.append(byte)

    def _step(self, cycles):
        self._time += cycles / self.clock_hz
        self._sim.run_until(self._time)

    # pyserial's interface ----------------------------------------------------------------------

    def write(self, data):
        self._to_device += bytes(data)
        return len(data)

    def read(self, count=1):
        quiet = 0
        while len(self._from_device) < count and quiet < self.quiet_cycles:
            before = len(self._from_device)
            self._step(64)
            quiet = 0 if len(self._from_device) > before or self._to_device else quiet + 64
        data = bytes(self._from_device[:count])
        del self._from_device[:count]
        return self.tamper(data) if self.tamper else data

    @property
    def in_waiting(self):
        return len(self._from_device)

    def reset_input_buffer(self):
        self._from_device.clear()

    def idle(self, seconds):
        """Let ``seconds`` of device time pass."""
        self._step(max(1, round(seconds * self.clock_hz)))

    def flush(self):
        pass

    def close(self):
        pass


class SimulatedSPIBus:
    """An SPI bus whose target is the SPI host link's gateware, simulated with amaranth.sim.

    ``exchange(mosi)`` drives the pins bit by bit (:func:`fpganet.sim.spi_host.spi_exchange`)
    at ``sck_hz``, then lets ``gap_s`` pass (the host's time between transactions); put it
    behind :class:`fpganet.link.spi.SPIPort`. It is the real gateware
    (:class:`~fpganet.hdl.hostlink.SPIHostLink` and a device), not a model of it.

    Parameters
    ----------
    config, device, clock_hz
        As :class:`SimulatedPort`.
    sck_hz : float
        SPI clock (default twice ``clock_hz``: faster than the design's clock, as fast as the
        link allows).
    gap_s : float
        Simulated time between transactions.
    **options
        Passed to :class:`~fpganet.hdl.hostlink.SPIHostLink` (``timeout_cycles`` defaults to
        2,000).
    """

    def __init__(self, config=None, *, device=None, clock_hz=1e6, sck_hz=None, gap_s=0.0,
                 **options):
        from fpganet.hdl.hostlink import SPIHostLink, connect_device
        from fpganet.sim.standin_device import StandInDevice

        config = config or AcceleratorConfig()
        options.setdefault("timeout_cycles", 2000)
        self.sck_hz = sck_hz or 2 * clock_hz
        self.link = SPIHostLink(config, clock_hz, self.sck_hz, **options)
        device = device or (lambda config, addr_width: StandInDevice(config, addr_width))
        self.device = device(config, self.link.core.addr_width)
        m = Module()
        m.submodules.link = self.link
        m.submodules.device = self.device
        connect_device(m, self.link, self.device)
        self.clock_hz = clock_hz
        self.gap_s = gap_s
        self._time = 0.0
        self._mosi = None
        self._miso = None
        self._sim = Simulator(m)
        self._sim.add_clock(1 / clock_hz)
        self._sim.add_testbench(self._host, background=True)

    async def _host(self, ctx):
        # Imported here: the testbench helpers only with the simulation.
        from fpganet.sim.spi_host import spi_exchange
        while True:
            if self._mosi is None:
                await ctx.tick()
                continue
            self._miso = await spi_exchange(ctx, self.link, self._mosi, 1 / self.sck_hz)
            self._mosi = None

    def exchange(self, mosi):
        self._mosi = bytes(mosi)
        self._miso = None
        step = 64 / self.clock_hz
        while self._miso is None:
            self._time += step
            self._sim.run_until(self._time)
        if self.gap_s:
            self.idle(self.gap_s)
        return self._miso

    def idle(self, seconds):
        self._time += seconds
        self._sim.run_until(self._time)
