"""What the board top-levels share: the clock/reset shell and the board description."""

from dataclasses import dataclass, field

from amaranth import *
from amaranth.lib import io
from amaranth.lib.cdc import FFSynchronizer

from fpganet.errors import FpganetError

__all__ = ["Board", "BoardTop", "linked_accelerator", "on_link", "LINKS"]

#: The host links a core can sit behind (``fpganet synth --link``).
LINKS = ("uart", "spi")


def linked_accelerator(config, baud, *, link="uart", sck_hz=None, **accelerator_options):
    """The accelerator behind the host link: a :class:`~fpganet.hdl.hostlink.HostLinkSystem`
    whose device is ``Accelerator(config, **accelerator_options)`` (the board's PE and
    weight-buffer factories), on the UART at ``baud`` or on the SPI pins (``link="spi"``,
    timed for ``sck_hz``)."""
    # Imported here, not at the top: the gateware (amaranth) only when a board top is built.
    from fpganet.hdl.accelerator import Accelerator
    from fpganet.hdl.hostlink import HostLinkSystem

    def device(config):
        return Accelerator(config, **accelerator_options)
    return HostLinkSystem(config, config.clock_hz, sck_hz if link == "spi" else baud,
                          device=device, link=link)


def on_link(core, link, sck_hz):
    """The core factory ``core`` (which takes ``link`` and ``sck_hz``) behind ``link``, with
    the attributes the build reports (``macs_per_cycle``, ``mac_kind``, ``description``)."""
    def linked(config):
        return core(config, link=link, sck_hz=sck_hz)
    for name in ("macs_per_cycle", "mac_kind", "description", "__qualname__"):
        if hasattr(core, name):
            setattr(linked, name, getattr(core, name))
    linked.link = link
    linked.unlinked = core
    return linked


class BoardTop(Elaboratable):
    """Board top-level: a PLL clock for domain ``sync``, a power-on reset, a core, LEDs.

    Subclasses implement :meth:`clock` (the PLL instance) and :attr:`led_count`.

    Parameters
    ----------
    config : AcceleratorConfig
        The accelerator configuration; ``config.clock_hz`` is the target clock.
    core : callable
        ``core(config)`` returns the design to carry: an Elaboratable in domain
        ``sync`` with a ``status`` output whose low bits drive the LEDs, and
        optionally ``rx`` (in) and ``tx`` (out), wired to the board's UART, or ``sck``,
        ``cs_n``, ``mosi`` (in), ``miso`` and ``miso_oe`` (out), wired to the board's SPI
        link (:meth:`spi_link_pins`).
        The ``config`` it gets has ``clock_hz`` set to the clock the board
        really makes (:attr:`clock_hz`, the PLL's closest setting).
    pll : bool
        Clock the core from a PLL at ``config.clock_hz`` (closest setting the
        PLL makes, :attr:`clock_hz`); without it, from the board oscillator.
    """

    #: Power-on reset length after PLL lock. iCE40 block RAMs read as zero for
    #: about 3 us after configuration: 15 us leaves a margin (as Amaranth's own
    #: iCE40 reset does).
    reset_seconds = 15e-6
    led_count = 0

    def __init__(self, config, core, *, pll=True):
        self.config = config
        self.core_factory = core
        self.pll = pll
        self.clock_hz = self.pll_settings().f_out if pll else self.oscillator_hz
        self.core = None

    # Board-specific ----------------------------------------------------------------------

    oscillator_hz = None

    def pll_settings(self):
        raise NotImplementedError

    def clock(self, m, platform):
        """Add the clock source to ``m``; return ``(clock, locked)`` signals."""
        raise NotImplementedError

    #: The fastest SCK of the board's SPI link (its timing constraint); None: no SPI link.
    sck_hz = None

    def spi_link_pins(self, m, platform):
        """Buffers of the SPI link's pins, ``{"sck", "cs_n", "mosi": input buffers, "miso":
        an output buffer with its enable}``, and the LEDs whose pins they take."""
        raise NotImplementedError

    def leds(self, m, platform, taken=()):
        """The LED output signals, LED 0 first (None where another use takes the pin)."""
        leds = []
        for i in range(self.led_count):
            if i in taken:
                leds.append(None)
                continue
            m.submodules[f"led_{i}"] = buffer = io.Buffer("o", platform.request("led", i, dir="-"))
            leds.append(buffer.o)
        return leds

    # Shared ------------------------------------------------------------------------------

    @property
    def reset_cycles(self):
        """Cycles of :attr:`reset_seconds` at :attr:`clock_hz`: the core's reset lasts as long
        after the PLL's lock reaches its clock domain (two flip-flops)."""
        return max(2, int(self.reset_seconds * self.clock_hz))

    @property
    def core_config(self):
        """The configuration the core is built for: :attr:`config` at the clock the board
        really makes."""
        return self.config.replace(clock_hz=float(self.clock_hz))

    def elaborate(self, platform):
        m = Module()
        clock, locked = self.clock(m, platform)

        m.domains.sync = cd_sync = ClockDomain("sync")
        m.d.comb += cd_sync.clk.eq(clock)
        platform.add_clock_constraint(clock, self.clock_hz)

        # Reset until the PLL has locked and then for `reset_seconds` (reset-less
        # flip-flops in `sync` itself count the time).
        locked_sync = Signal()
        m.submodules.lock_sync = FFSynchronizer(locked, locked_sync, o_domain="sync")
        delay = self.reset_cycles
        timer = Signal(range(delay + 1), reset_less=True)
        reset = Signal(init=1, reset_less=True)
        with m.If(~locked_sync):
            m.d.sync += timer.eq(0)
        with m.Elif(timer != delay):
            m.d.sync += timer.eq(timer + 1)
        m.d.sync += reset.eq(timer != delay)
        m.d.comb += cd_sync.rst.eq(reset)

        m.submodules.core = self.core = core = self.core_factory(self.core_config)
        taken = ()
        if hasattr(core, "sck"):
            pins, taken = self.spi_link_pins(m, platform)
            # SCK clocks the link's shift registers itself (fpganet.hdl.spi_target). The net
            # keeps this name through synthesis, so that nextpnr finds its constraint.
            sck = Signal(name="spi_sck", attrs={"keep": 1})
            platform.add_clock_constraint(sck, self.sck_hz)
            m.d.comb += [sck.eq(pins["sck"].i), core.sck.eq(sck), core.cs_n.eq(pins["cs_n"].i),
                         core.mosi.eq(pins["mosi"].i), pins["miso"].o.eq(core.miso),
                         pins["miso"].oe.eq(core.miso_oe)]
        status = core.status
        for i, led in enumerate(self.leds(m, platform, taken)):
            if led is not None:
                m.d.comb += led.eq(status[i] if i < len(status) else 0)
        if hasattr(core, "rx") and hasattr(core, "tx"):
            uart = platform.request("uart", 0, dir="-")
            m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
            m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
            m.d.comb += [core.rx.eq(rx.i), tx.o.eq(core.tx)]
        return m


@dataclass(frozen=True)
class Board:
    """One supported board and how to build for it."""
    name: str
    description: str
    platform: type                 # amaranth-boards platform class
    top: type                      # BoardTop subclass
    default_config: object         # AcceleratorConfig sized for the device
    default_core: object           # core(config) factory used when none is given
    family: str                    # "ice40" or "ecp5"
    bitstream: str                 # bitstream file suffix: "bin" or "bit"
    synth_opts: tuple = ()
    nextpnr_opts: tuple = ()
    #: nextpnr placement seed ``fpganet synth`` uses unless ``--seed`` is given: the best
    #: one a ``fpganet dse --synth --seeds N`` sweep of the default configuration found.
    seed: int = 1
    #: Seconds ``fpganet synth`` lets the tools run before it stops them (``--timeout``): a
    #: router that oscillates (nextpnr's router2 on some seeds) never finishes by itself.
    build_timeout_s: int = 1800
    #: Named core factories ``fpganet synth --core NAME`` picks from.
    cores: dict = field(default_factory=dict)
    #: nextpnr cell type -> report name, in report order.
    resources: dict = field(default_factory=dict)
    #: ``refuse(config, core)``: why the board cannot hold ``core`` built for ``config``, in
    #: one line (a measured fact, said before minutes of synthesis), or None.
    refuse: object = None
    #: The requantization modes (:data:`fpganet.isa.REQUANT_MODES`) its accelerator core
    #: builds; ``fpganet estimate`` refuses a network compiled for another.
    requant_modes: tuple = ("fpganet", "tflite")
    #: Resource name (:attr:`resources`'s) -> how many the device has, for the checks before
    #: a build (:mod:`fpganet.boards.resources`).
    capacity: dict = field(default_factory=dict)
    #: The name of :attr:`capacity`'s logic resource (iCE40 LC, ECP5 LUT4): an estimate.
    logic_resource: str = "LC"
    #: Logic cells of the routed default accelerator (:attr:`logic_resource`), from which
    #: :func:`~fpganet.boards.resources.logic_estimate` estimates other configurations.
    routed_logic: int = None
    #: Other configurations the board's file names, ``{name: AcceleratorConfig}``, that
    #: ``fpganet fit`` tries beside the default and ``--variant NAME`` starts from.
    variants: dict = field(default_factory=dict)
    #: The weight buffer's factory (``factory(config)``) of its designs whose weights the host
    #: loads; None: :class:`fpganet.hdl.memories.WeightBuffer` (block RAM).
    weight_buffer: object = None
    #: The host links its top wires (:data:`LINKS`; ``fpganet synth --link``).
    links: tuple = ("uart",)
    #: How a link other than the UART is built, from its own seed sweep: ``{link: (seed,
    #: nextpnr options)}``, the seed in place of :attr:`seed`, the options added to
    #: :attr:`nextpnr_opts`.
    link_builds: dict = field(default_factory=dict)
    #: The seed of an engine build (``fpganet compile --engine``), from its own sweep:
    #: ``{unit: seed}`` in place of :attr:`seed`, which is the accelerator's.
    engine_seeds: dict = field(default_factory=dict)

    def engine_seed(self, unit):
        """The placement seed of an engine build of ``unit`` (``binary``, ``lowbit``)."""
        return self.engine_seeds.get(unit, self.seed)

    def configuration(self, variant=None):
        """The default configuration, or :attr:`variants`' ``variant``."""
        if variant is None:
            return self.default_config
        if variant not in self.variants:
            known = (f"its variants are {', '.join(self.variants)}" if self.variants
                     else "it has none")
            raise FpganetError(f"the {self.name} has no configuration variant '{variant}': {known}")
        return self.variants[variant]

    @property
    def device(self):
        return self.platform.device
