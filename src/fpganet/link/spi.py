"""The SPI link's host side: a port with pyserial's ``read``/``write`` over SPI transactions.

:class:`SPIPort` turns the link's byte streams into the transactions of
:mod:`fpganet.link.spi_wire`, so :class:`~fpganet.link.client.BoardLink` and
:func:`~fpganet.link.runner.run_images` run over it unchanged. A transaction goes to a
*bus*: any object whose ``exchange(mosi) -> miso`` clocks one transaction (chip select
low, the bytes, chip select high) and returns what came back, of the same length. The
real bus is the iCEBreaker's FT2232H channel A in MPSSE mode through pyftdi
(:func:`open_spi`); the simulated ones drive the gateware's pins
(:class:`fpganet.link.simport.SimulatedSPIBus`, and the cocotb testbench's).
"""

import time
from dataclasses import dataclass

from . import spi_wire
from .transport import LinkError

__all__ = ["SPIPort", "SPIStats", "open_spi", "DEFAULT_SCK_HZ", "FTDI_VENDOR"]

#: The FT2232H's fastest MPSSE clock (60 MHz / 2), the iCEBreaker link's timing target.
DEFAULT_SCK_HZ = 30_000_000
#: USB vendor id of FTDI.
FTDI_VENDOR = 0x0403


@dataclass
class SPIStats:
    """Transactions an :class:`SPIPort` made, and the bytes it clocked in them."""
    transactions: int = 0
    bytes_clocked: int = 0


class SPIPort:
    """A pyserial-like port whose bytes travel in SPI transactions.

    Parameters
    ----------
    bus : object
        ``exchange(mosi) -> miso`` (one transaction); optionally ``idle(seconds)`` (let time
        pass, for a simulated bus) and ``close()``.
    timeout : float
        Seconds ``read`` keeps polling before it returns fewer bytes than asked (pyserial's
        read timeout).
    read_ahead : int
        Link bytes each transaction clocks beyond what it sends, at least: the reply to a
        request usually arrives in the transaction that carries the request.
    name : str
        For messages.
    """

    def __init__(self, bus, *, timeout=1.0, read_ahead=64, name="SPI"):
        if not callable(getattr(bus, "exchange", None)):
            raise TypeError(f"bus must have exchange(mosi), not {bus!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if isinstance(read_ahead, bool) or not isinstance(read_ahead, int) or read_ahead < 1:
            raise ValueError(f"read_ahead must be a positive integer, not {read_ahead!r}")
        self.bus = bus
        self.timeout = timeout
        self.read_ahead = read_ahead
        self.name = name
        self.stats = SPIStats()
        self._pending = bytearray()
        self._received = bytearray()
        self._decoder = spi_wire.MisoDecoder()

    def transact(self, read=0):
        """One transaction: every pending byte (up to :data:`~spi_wire.MAX_WRITE`) out, and at
        least ``read`` link bytes' worth of clocks in; returns how many reply bytes came."""
        data = bytes(self._pending[:spi_wire.MAX_WRITE])
        del self._pending[:len(data)]
        mosi = spi_wire.transaction(data, len(data) + max(read, 0))
        try:
            miso = self.bus.exchange(mosi)
        except LinkError:
            raise
        except Exception as error:          # pyftdi raises its own errors and USBError
            raise LinkError(f"SPI transaction on {self.name} failed: {error}") from None
        self.stats.transactions += 1
        self.stats.bytes_clocked += len(mosi)
        try:
            reply = self._decoder.decode(miso)
        except ValueError as error:
            raise LinkError(f"{error} on {self.name}: is the board programmed with an fpganet "
                            f"bitstream that has the SPI link?") from None
        self._received += reply
        return len(reply)

    # pyserial's interface ----------------------------------------------------------------------

    def write(self, data):
        self._pending += bytes(data)
        return len(data)

    def flush(self):
        """Nothing: written bytes go in the next ``read``'s transaction, which also clocks
        their reply's bytes back (a transaction of their own would need a second for it)."""

    def read(self, count=1):
        deadline = time.monotonic() + self.timeout
        while len(self._received) < count:
            wanted = count - len(self._received)
            self.transact(max(wanted, self.read_ahead))
            if len(self._received) < count and not self._pending and time.monotonic() > deadline:
                break
        data = bytes(self._received[:count])
        del self._received[:count]
        return data

    @property
    def in_waiting(self):
        return len(self._received)

    def reset_input_buffer(self):
        """Drop the reply bytes received and those still on the board: clock until a
        transaction brings none."""
        for _ in range(64):
            if not self.transact(self.read_ahead):
                break
        self._received.clear()

    def idle(self, seconds):
        idle = getattr(self.bus, "idle", None)
        if callable(idle):
            idle(seconds)
        else:
            time.sleep(seconds)

    def close(self):
        close = getattr(self.bus, "close", None)
        if callable(close):
            close()


class _FtdiBus:
    """pyftdi's SpiPort as a bus."""

    def __init__(self, controller, port):
        self.controller = controller
        self.port = port

    def exchange(self, mosi):
        return bytes(self.port.exchange(mosi, duplex=True))

    def close(self):
        _terminate(self.controller)


def _terminate(controller):
    """Close ``controller``'s FTDI device; a device already gone (unplugged, or never opened)
    leaves nothing to close."""
    try:
        controller.terminate()
    except Exception:
        pass


def open_spi(url, sck_hz=DEFAULT_SCK_HZ, *, timeout=1.0):
    """An :class:`SPIPort` on an FTDI MPSSE channel through pyftdi.

    ``url`` is pyftdi's (``ftdi://ftdi:2232h/1``: the iCEBreaker's channel A). The FPGA's
    chip select is LEDR_N on ADBUS3, pyftdi's first chip select; the second, ADBUS4, is the
    flash's, driven high so that the flash stays off the bus. Problems come back as
    :class:`~fpganet.link.transport.LinkError` in one line.
    """
    try:
        # Imported here, not at the top: pyftdi only when a real board is opened.
        from pyftdi.spi import SpiController
    except ImportError:
        raise LinkError("the SPI link needs pyftdi (pip install pyftdi)") from None
    controller = SpiController(cs_count=2)
    try:
        controller.configure(url, frequency=sck_hz)
        port = controller.get_port(cs=0, freq=sck_hz, mode=0)
    except Exception as error:
        reason = str(error) or type(error).__name__
        if "No backend available" in reason:
            reason = "pyusb finds no libusb (install libusb-1.0)"
        _terminate(controller)
        raise LinkError(f"cannot open the SPI link at {url}: {reason}") from None
    return SPIPort(_FtdiBus(controller, port), timeout=timeout, name=url)
