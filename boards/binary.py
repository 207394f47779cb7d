"""The binary or low-bit network engine as a board core: the host link and the
:class:`~fpganet.hdl.binary_device.BinaryDevice` of one folded network, whose thresholds are
in the bitstream and its weights too, or in the weight buffer the host loads (``fpganet synth
OUT`` of a directory compiled with ``--engine binary`` or ``lowbit``)."""

from fpganet.hdl.binary_device import BinaryDevice
from fpganet.hdl.hostlink import HostLinkSystem

# Both boards' UART links run at 3 Mbaud (boards/icebreaker.py, boards/ulx3s.py).
from .icebreaker import BAUD

__all__ = ["binary_core"]


def binary_core(folded, weights=None):
    """A core factory (``core(config)``, as :data:`fpganet.boards.common.Board.cores` holds)
    for ``folded`` (:class:`~fpganet.codegen.binary.FoldedNetwork`); ``config`` gives the clock
    and the host link's widths. ``weights``: the weight buffer's factory where the host loads
    the weights (:class:`~fpganet.hdl.binary_device.BinaryDevice`), else they are in the
    bitstream. Its ``macs_per_cycle`` is the engine's MACs a cycle; ``link`` and ``sck_hz``
    put it behind the SPI link (:func:`fpganet.boards.common.on_link`)."""
    def core(config, *, link="uart", sck_hz=None):
        return HostLinkSystem(config, config.clock_hz, sck_hz if link == "spi" else BAUD,
                              device=lambda c: BinaryDevice(folded, c, weights=weights),
                              link=link)
    core.__qualname__ = f"binary_core({folded.pe}x{folded.simd})"
    core.macs_per_cycle = folded.pe * folded.simd
    core.mac_kind = ("binary" if folded.unit == "binary"
                     else f"W{folded.weight_bits}A{folded.input_bits}")
    core.description = folded.description + ("" if weights is None else ", weights loaded")
    return core
