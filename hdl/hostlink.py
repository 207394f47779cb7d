"""The host link: the accelerator's ports driven over a UART by a small frame protocol.

:class:`HostLink` sits between the UART pins and the accelerator. The host
(:mod:`fpganet.link`) sends request frames; every request gets exactly
one reply frame, an ACK (with data) or an ERROR with a code, and an ERROR
means the request had no effect. The protocol (frame format, CRC, commands,
error codes) is defined in :mod:`fpganet.link.protocol` and described in
docs/reference/hostlink.md.

Blocks, each a ``wiring.Component`` of its own module::

    rx bytes ─> Deframer ──fields, payload bytes──> CommandExecutor ──host, start──> device
                   ^                                   │  │ input FIFO (PacketFIFO) ──input──>
                   └── resume ── Replier <─ reply ─────┘  └ output FIFO (OutputFIFO) <─output─
                                   └──> tx bytes

:class:`~fpganet.hdl.deframer.Deframer`
    Sync, type, length, payload bytes with their index, the CRC check, the inter-byte
    timeout.
:class:`~fpganet.hdl.executor.CommandExecutor`
    The length rules, the fields of WRITE and READ_OUTPUT, the verdict, the WRITE staging
    buffer and the words it moves to the host port, START, FLUSH, the FIFOs' commit.
:class:`~fpganet.hdl.replier.Replier`
    The reply frame and the STATUS counters.
:class:`~fpganet.hdl.linkfifo.PacketFIFO`, :class:`~fpganet.hdl.linkfifo.OutputFIFO`
    The input FIFO (commit on a good CRC, so a damaged SEND_INPUT leaves nothing behind)
    and the output FIFO.
:class:`HostLinkCore`
    The five between byte streams and the device ports.
:class:`HostLink`
    :class:`HostLinkCore` with a :class:`~fpganet.hdl.uart.UARTReceiver` and a
    :class:`~fpganet.hdl.uart.UARTTransmitter`: UART pins on one side, the device
    ports on the other.
:class:`HostLinkSystem`
    A host link and its device: the UART pins are its only ports.

The device ports are :func:`~fpganet.hdl.hostport.device_signature` (those of
``fpganet.hdl.accelerator.Accelerator``); the stand-in device that tests the link without
the accelerator is ``fpganet.sim.standin_device.StandInDevice``.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fpganet.link import protocol
from fpganet.link.protocol import DeviceInfo
from fpganet.config import AcceleratorConfig

from .deframer import Deframer
from .executor import CommandExecutor
from .hostport import connect_device, device_signature, host_addr_width, host_write_layout
from .linkfifo import OutputFIFO, PacketFIFO, check_int
from .replier import Replier
from .spi_target import SPITarget, pass_spi_pins, spi_pins
from .uart import UARTReceiver, UARTTransmitter, uart_divisor

__all__ = ["host_addr_width", "host_write_layout", "device_signature", "connect_device",
           "PacketFIFO", "OutputFIFO", "HostLinkCore", "HostLink", "SPIHostLink", "HostLinkSystem",
           "DEFAULT_TIMEOUT_S", "MIN_TIMEOUT_CYCLES", "status_layout"]

#: Default inter-byte timeout of the frame parser.
DEFAULT_TIMEOUT_S = 0.010
#: Shortest inter-byte timeout: a reply is counted a few cycles after it starts (see the
#: counter ring in :class:`~fpganet.hdl.replier.Replier`), and a frame cut short right after
#: it must not come sooner.
MIN_TIMEOUT_CYCLES = 16


def status_layout():
    """The link's LED flags: the device runs; it raised ``done`` since the last START; the
    last reply was an ERROR."""
    return data.StructLayout({"busy": 1, "done_seen": 1, "error": 1})


class HostLinkCore(wiring.Component):
    """The frame protocol between byte streams and the device ports.

    Parameters
    ----------
    config : AcceleratorConfig
        The device's configuration: the host port's data width, the memory depths that
        bound WRITE, and the PING reply; with ``registered_host_output`` the replier registers
        the bytes into its CRC (:class:`~fpganet.hdl.replier.Replier`'s ``crc_stage``) and
        the output FIFO its block RAM's data (``registered_output``); the output FIFO
        always registers its ``w_rdy`` (:class:`~fpganet.hdl.linkfifo.OutputFIFO`'s
        ``registered_ready``: the iCE40's back-pressure path into the region unit).
    clock_hz : int or float
        The clock of domain ``sync`` (for the default timeout and the PING reply).
    baud : int
        The line rate (reported by PING).
    addr_width : int, optional
        Bits of the host port's address (default :func:`host_addr_width`; at most 24).
    input_depth : int
        Bytes of the input FIFO (a power of two): the largest SEND_INPUT.
    output_depth : int
        Bytes of the output FIFO: the largest READ_OUTPUT reply.
    max_write_bytes : int
        Data bytes one WRITE may carry (the staging buffer).
    timeout_cycles : int, optional
        Inter-byte timeout inside a frame (default :data:`DEFAULT_TIMEOUT_S` of the clock;
        at least :data:`MIN_TIMEOUT_CYCLES`).
    design : int
        PING's ``design`` (:attr:`~fpganet.link.protocol.DeviceInfo.design`): 0 for the int8
        accelerator, else the id of the fixed-function device behind the link.
    links : int
        PING's ``links``: the :attr:`~fpganet.link.protocol.DeviceInfo.LINK_UART` and
        ``LINK_SPI`` bits of the links in front of this core.
    queued_start : bool
        START takes its wait byte (:class:`~fpganet.hdl.executor.CommandExecutor`); PING's
        ``links`` then has :attr:`~fpganet.link.protocol.DeviceInfo.QUEUED_START`. The SPI
        link's (the UART's bitstreams are left as they were built before it).

    Members
    -------
    rx : In(stream.Signature(8))
        Bytes from the host. Ready every cycle while a frame is being received; not ready
        while a request executes and its reply is sent (the host waits for the reply).
    tx : Out(stream.Signature(8))
        Reply bytes.
    framing_error, overrun : In(1)
        Line errors of the UART receiver (counted in STATUS).
    device : In(device_signature(config, addr_width))
        The device's ports (the link drives ``host``, ``start``, ``input``).
    status : Out(status_layout())
        For LEDs: the device runs; it raised ``done`` since the last START; the last request
        was refused (from its reply on).

    Timing: a request is judged when its last CRC byte arrives and executes in the next
    cycle. WRITE then moves its words to the host port at two cycles per byte and one per
    word (plus the port's back-pressure) and then replies; the other commands offer their
    reply's first byte three cycles after the last CRC byte, except READ_OUTPUT with a
    ``wait_for`` count, which waits for the output bytes, the device to stop, or the
    timeout. A frame whose length exceeds every limit is not read: the parser ignores
    bytes until the line is quiet for the timeout, then replies BAD_LENGTH.
    """

    def __init__(self, config, clock_hz, baud, *, addr_width=None, input_depth=2048,
                 output_depth=512, max_write_bytes=512, timeout_cycles=None,
                 design=DeviceInfo.INT8_ACCELERATOR, links=DeviceInfo.LINK_UART,
                 queued_start=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float)) or clock_hz <= 0:
            raise ValueError(f"clock_hz must be a positive number, not {clock_hz!r}")
        if isinstance(baud, bool) or not isinstance(baud, (int, float)) or baud <= 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        addr_width = host_addr_width(config) if addr_width is None else addr_width
        # The executor checks the sizes (addr_width, the depths, max_write_bytes).
        self.executor = CommandExecutor(config, addr_width=addr_width, input_depth=input_depth,
                                        output_depth=output_depth,
                                        max_write_bytes=max_write_bytes,
                                        queued_start=queued_start)
        self.word_bytes = self.executor.word_bytes
        if timeout_cycles is None:
            timeout_cycles = max(MIN_TIMEOUT_CYCLES, round(clock_hz * DEFAULT_TIMEOUT_S))
        check_int("timeout_cycles", timeout_cycles, MIN_TIMEOUT_CYCLES, (1 << 32) - 1)
        check_int("design", design, 0, (1 << 32) - 1)
        check_int("links", links, 1, 0x7F)

        self.config = config
        self.clock_hz = clock_hz
        self.baud = baud
        self.addr_width = addr_width
        self.input_depth = input_depth
        self.output_depth = output_depth
        self.max_write_bytes = max_write_bytes
        self.timeout_cycles = timeout_cycles
        #: Longest payload read; a longer frame is drained and answered BAD_LENGTH.
        self.max_payload = self.executor.max_payload
        self.deframer = Deframer(max_payload=self.max_payload, timeout_cycles=timeout_cycles)
        self.info = DeviceInfo(
            version=protocol.PROTOCOL_VERSION, rows=config.rows, cols=config.cols,
            operand_width=config.operand_width, acc_width=config.acc_width,
            requant_lanes=config.requant_lanes, requant_latency=config.requant_latency,
            options=DeviceInfo.options_of(config),
            weight_buffer_bytes=config.weight_buffer_bytes,
            act_buffer_bytes=config.act_buffer_bytes, bias_buffer_words=config.bias_buffer_words,
            program_words=config.program_words, host_data_width=config.host_data_width,
            addr_width=addr_width, input_depth=input_depth, output_depth=output_depth,
            max_write_bytes=max_write_bytes, clock_hz=round(clock_hz), baud=round(baud),
            timeout_cycles=timeout_cycles, banking=DeviceInfo.banking_of(config), design=design,
            links=links | (DeviceInfo.QUEUED_START if queued_start else 0),
            features=DeviceInfo.features_of(config))
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "framing_error": In(1),
            "overrun": In(1),
            "device": In(device_signature(config, addr_width)),
            "status": Out(status_layout()),
        })
        self.replier = Replier(self.info.pack(), output_depth=output_depth,
                               crc_stage=config.registered_host_output)
        self.input_fifo = PacketFIFO(input_depth)
        self.output_fifo = OutputFIFO(output_depth, registered_ready=True,
                                      registered_output=config.registered_host_output)

    def elaborate(self, platform):
        m = Module()
        dev = self.device
        m.submodules.deframer = deframer = self.deframer
        m.submodules.executor = executor = self.executor
        m.submodules.replier = replier = self.replier
        m.submodules.input_fifo = in_fifo = self.input_fifo
        m.submodules.output_fifo = out_fifo = self.output_fifo

        wiring.connect(m, wiring.flipped(self.rx), deframer.rx)
        wiring.connect(m, replier.tx, wiring.flipped(self.tx))
        wiring.connect(m, executor.reply, replier.request)
        for name in ("frame_type", "header", "header_length", "payload_valid", "index", "end",
                     "crc_ok", "abort", "truncated", "timed_out"):
            m.d.comb += getattr(executor, name).eq(getattr(deframer, name))
        m.d.comb += [
            executor.payload.eq(self.rx.payload),
            deframer.resume.eq(replier.sent),
            replier.garbage.eq(deframer.garbage),
            replier.framing_error.eq(self.framing_error),
            replier.overrun.eq(self.overrun),
        ]

        # The device.
        wiring.connect(m, executor.host, wiring.flipped(dev.host))
        m.d.comb += [
            dev.start.eq(executor.start),
            executor.busy.eq(dev.busy),
            executor.done.eq(dev.done),
        ]

        # Input FIFO: a SEND_INPUT's bytes go in tentatively; between frames, no bytes are
        # tentative but those of a frame that failed (a good one committed them): forget them.
        wiring.connect(m, in_fifo.r, wiring.flipped(dev.input))
        m.d.comb += [
            in_fifo.w_data.eq(self.rx.payload),
            in_fifo.w_en.eq(executor.input_write),
            in_fifo.commit.eq(executor.input_commit),
            in_fifo.rollback.eq(deframer.idle),
            in_fifo.drop.eq(executor.input_drop),
            executor.input_free.eq(in_fifo.free),
        ]
        # Output FIFO: filled by the device, read by READ_OUTPUT's reply, emptied by FLUSH.
        m.d.comb += [
            out_fifo.w_data.eq(dev.output.payload),
            out_fifo.w_en.eq(dev.output.valid),
            dev.output.ready.eq(out_fifo.w_rdy),
            out_fifo.r_en.eq(replier.output_take | executor.output_take),
            replier.output_data.eq(out_fifo.r_data),
            replier.output_valid.eq(out_fifo.r_rdy),
            executor.output_level.eq(out_fifo.level),
        ]

        m.d.comb += [
            replier.snapshot.flags.eq(Cat(dev.busy, dev.done, executor.done_seen)),
            replier.snapshot.cycles.eq(dev.cycles),
            replier.snapshot.input_free.eq(in_fifo.free),
            replier.snapshot.output_level.eq(out_fifo.level),
            self.status.busy.eq(dev.busy),
            self.status.done_seen.eq(executor.done_seen),
            self.status.error.eq(replier.error),
        ]
        return m


class HostLink(wiring.Component):
    """The host link on UART pins: :class:`HostLinkCore` with a UART receiver and transmitter.

    Parameters
    ----------
    config : AcceleratorConfig
    clock_hz : int or float
        Clock of domain ``sync``.
    baud : int
        Line rate; ``clock_hz / baud`` (fractions kept) must be at least 4 cycles per bit.
        The FT2232H of iCEBreaker and ULX3S makes 3,000,000 and 1,000,000 exactly.
    **options
        ``addr_width``, ``input_depth``, ``output_depth``, ``max_write_bytes``,
        ``timeout_cycles`` of :class:`HostLinkCore` (the timeout must exceed two byte times).

    Members
    -------
    rx : In(1)
        UART line from the host (idle high, asynchronous: synchronized inside).
    tx : Out(1)
        UART line to the host (idle high, from a flip-flop).
    device : In(device_signature(config, addr_width))
        Connects 1:1 to the accelerator: ``wiring.connect(m, link.device, accelerator)``, or
        :func:`connect_device` when the accelerator has more ports.
    status : Out(status_layout())
        As :class:`HostLinkCore`.
    """

    def __init__(self, config, clock_hz, baud, **options):
        if isinstance(baud, bool) or not isinstance(baud, (int, float)) or baud <= 0:
            raise ValueError(f"baud must be a positive number, not {baud!r}")
        try:
            self.divisor = uart_divisor(clock_hz / baud)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{baud:,} baud from a {clock_hz / 1e6:g} MHz clock: {error}") from None
        self.core = HostLinkCore(config, clock_hz, baud, **options)
        if self.core.timeout_cycles < 20 * self.divisor:
            raise ValueError(f"timeout_cycles {self.core.timeout_cycles} is shorter than two "
                             f"byte times ({int(20 * self.divisor)} cycles at {baud:,} baud)")
        self.config = config
        self.clock_hz = clock_hz
        self.baud = baud
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "device": In(device_signature(config, self.core.addr_width)),
            "status": Out(status_layout()),
        })

    @property
    def info(self):
        """The :class:`~fpganet.link.protocol.DeviceInfo` this link answers PING with."""
        return self.core.info

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.receiver = receiver = UARTReceiver(self.divisor)
        # The holding register where the output FIFO's bytes do not leave through one
        # already (registered_output, with the pipeline registers).
        m.submodules.transmitter = transmitter = UARTTransmitter(
            self.divisor, holding_register=not self.config.registered_host_output)
        wiring.connect(m, receiver.data, core.rx)
        wiring.connect(m, core.tx, transmitter.data)
        wiring.connect(m, wiring.flipped(self.device), core.device)
        m.d.comb += [
            receiver.rx.eq(self.rx),
            self.tx.eq(transmitter.tx),
            core.framing_error.eq(receiver.framing_error),
            core.overrun.eq(receiver.overrun),
            self.status.eq(core.status),
        ]
        return m


class SPIHostLink(wiring.Component):
    """The host link on SPI pins: :class:`HostLinkCore` behind an
    :class:`~fpganet.hdl.spi_target.SPITarget` (the wire format of
    :mod:`fpganet.link.spi_wire`).

    Parameters
    ----------
    config : AcceleratorConfig
    clock_hz : int or float
        Clock of domain ``sync``.
    sck_hz : int or float
        The fastest SCK the build is timed for (reported by PING as the line rate); at most
        twice ``clock_hz`` (:class:`~fpganet.hdl.spi_target.SPITarget`).
    **options
        ``addr_width``, ``input_depth``, ``output_depth``, ``max_write_bytes``,
        ``timeout_cycles``, ``design`` of :class:`HostLinkCore`.

    Members
    -------
    sck, cs_n, mosi : In(1)
    miso, miso_oe : Out(1)
        The SPI pins (:class:`~fpganet.hdl.spi_target.SPITarget`).
    device : In(device_signature(config, addr_width))
    status : Out(status_layout())
        As :class:`HostLink`.
    """

    def __init__(self, config, clock_hz, sck_hz, **options):
        if isinstance(sck_hz, bool) or not isinstance(sck_hz, (int, float)) or sck_hz <= 0:
            raise ValueError(f"sck_hz must be a positive number, not {sck_hz!r}")
        if isinstance(clock_hz, (int, float)) and sck_hz > 2 * clock_hz:
            raise ValueError(f"an SCK of {sck_hz / 1e6:g} MHz is more than twice the "
                             f"{clock_hz / 1e6:g} MHz clock, the most the SPI target takes")
        self.target = SPITarget()
        self.core = HostLinkCore(config, clock_hz, sck_hz, links=DeviceInfo.LINK_SPI,
                                 queued_start=True, **options)
        self.config = config
        self.clock_hz = clock_hz
        self.sck_hz = sck_hz
        super().__init__({
            **spi_pins(),
            "device": In(device_signature(config, self.core.addr_width)),
            "status": Out(status_layout()),
        })

    @property
    def info(self):
        return self.core.info

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.target = target = self.target
        wiring.connect(m, target.rx, core.rx)
        wiring.connect(m, core.tx, target.tx)
        wiring.connect(m, wiring.flipped(self.device), core.device)
        m.d.comb += [
            *pass_spi_pins(self, target),
            core.overrun.eq(target.overrun),
            self.status.eq(core.status),
        ]
        return m


class HostLinkSystem(wiring.Component):
    """A host link and its device: a complete design whose only ports are the link's pins.

    Parameters
    ----------
    config : AcceleratorConfig
    clock_hz, baud
        As :class:`HostLink`; on the SPI link ``baud`` is its ``sck_hz``.
    device : callable
        ``device(config)`` returns the device: the accelerator (``device=Accelerator``) or
        ``fpganet.sim.standin_device.StandInDevice``. The link takes its address width from
        the device's ``host`` port, and PING's ``design`` from its ``design_id`` if it has one.
    link : str
        ``"uart"`` (:class:`HostLink`) or ``"spi"`` (:class:`SPIHostLink`).
    **options
        Passed to the link.

    Members
    -------
    rx : In(1)
    tx : Out(1)
        The UART pins (``link="uart"``).
    sck, cs_n, mosi : In(1)
    miso, miso_oe : Out(1)
        The SPI pins (``link="spi"``).
    status : Out(8)
        For LEDs: bit 0 busy, bit 1 done since the last START, bit 2 the last reply was an
        ERROR.
    """

    LINKS = {"uart": HostLink, "spi": SPIHostLink}

    def __init__(self, config, clock_hz, baud, *, device, link="uart", **options):
        if not callable(device):
            raise TypeError(f"device must be a callable taking the configuration, not {device!r}")
        if link not in self.LINKS:
            raise ValueError(f"link must be one of {', '.join(self.LINKS)}, not {link!r}")
        self.device = device(config)
        addr_width = len(self.device.host.payload.addr)
        # A fixed-function device names itself in PING (the int8 accelerator has no id).
        options.setdefault("design", getattr(self.device, "design_id",
                                             DeviceInfo.INT8_ACCELERATOR))
        self.link_name = link
        self.link = self.LINKS[link](config, clock_hz, baud, addr_width=addr_width, **options)
        pins = ({"rx": In(1, init=1), "tx": Out(1, init=1)} if link == "uart" else
                spi_pins())
        super().__init__({**pins, "status": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = link = self.link
        m.submodules.device = device = self.device
        connect_device(m, link, device)
        if self.link_name == "uart":
            m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx)]
        else:
            m.d.comb += pass_spi_pins(self, link)
        m.d.comb += self.status.eq(link.status.as_value())
        return m
