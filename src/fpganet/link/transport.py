"""The bytes under the host link: a serial port opened with pyserial, 8N1.

:class:`fpganet.link.client.BoardLink` talks over it, or over any object with
``read(n)`` and ``write(data)`` (a simulated port: :mod:`fpganet.link.simport`).
"""

import os

from ..errors import FpganetError

__all__ = ["LinkError", "open_serial", "DEFAULT_BAUD"]

DEFAULT_BAUD = 3_000_000


class LinkError(FpganetError):
    """The board cannot be reached or did not do what was asked (one-line message)."""


def open_serial(path, baud=DEFAULT_BAUD, timeout=1.0):
    """Open a serial port 8N1 with pyserial; errors as :class:`LinkError`."""
    try:
        # Imported here, not at the top: pyserial only when a real serial port is opened.
        import serial
    except ImportError:
        raise LinkError("talking to a board needs pyserial (pip install pyserial==3.5)") from None
    try:
        port = serial.Serial(os.fspath(path), baudrate=baud, timeout=timeout,
                             write_timeout=max(timeout, 1.0))
    except (serial.SerialException, OSError, ValueError) as error:
        errno = getattr(error, "errno", None)
        reason = os.strerror(errno) if isinstance(errno, int) else str(error)
        raise LinkError(f"cannot open serial port '{os.fspath(path)}' at {baud:,} baud: "
                        f"{reason}") from None
    # Every request waits for a short reply, which an FTDI chip holds back for its latency
    # timer (16 ms by default on Linux); low-latency mode makes it 1 ms. Best effort.
    try:
        port.set_low_latency_mode(True)
    except (AttributeError, NotImplementedError, ValueError, OSError, serial.SerialException):
        pass
    return port
