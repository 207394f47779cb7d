"""The host side of a board's host link, on its UART or its SPI pins (docs/reference/hostlink.md).

- :mod:`fpganet.link.protocol` frames, CRC, commands, error codes, reply payloads
  (shared with the gateware, :mod:`fpganet.hdl.hostlink`);
- :mod:`fpganet.link.transport` the serial port (pyserial, 8N1) and :class:`LinkError`;
- :mod:`fpganet.link.spi_wire` and :mod:`fpganet.link.spi` the SPI link's transactions and
  its port (pyftdi MPSSE);
- :mod:`fpganet.link.client` :class:`BoardLink`, the protocol client over any port object;
- :mod:`fpganet.link.runner` :func:`run_images`: load once, then image after image;
- :mod:`fpganet.link.job` :func:`load_compiled_job`: what a run needs from a compiled directory;
- :mod:`fpganet.link.cli` ``fpganet board run | ping | status``;
- :mod:`fpganet.link.simport` a port (and an SPI bus) whose other end is the host link's
  gateware in a simulator.
"""

from .client import BoardLink, DeviceError, LinkStats
from .job import CompiledJob, load_compiled_job
from .runner import BoardRun, run_images
from .transport import DEFAULT_BAUD, LinkError, open_serial

__all__ = ["BoardLink", "DeviceError", "LinkStats", "CompiledJob", "load_compiled_job",
           "BoardRun", "run_images", "DEFAULT_BAUD", "LinkError", "open_serial"]
