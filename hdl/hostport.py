"""The device's host-facing ports: the one definition that the accelerator, the host link
and the test devices share.

The device (the accelerator, or a stand-in) has these ports, seen from the device::

    host    In(stream of host_write_layout: space 2 bits, addr, data host_data_width bits)
    start   In(1)      one-cycle pulse
    busy    Out(1)
    done    Out(1)     a pulse or a level; the link latches its rising edge
    input   In(stream of 8-bit bytes)
    output  Out(stream of 8-bit bytes)
    cycles  Out(32)

The host link's ``device`` member is ``In(device_signature(...))``: this signature flipped.
"""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out


__all__ = ["host_addr_width", "host_write_layout", "device_signature", "connect_device"]


def host_addr_width(config):
    """Bits of the host write port's address: enough for the deepest of the four memories."""
    return max(config.program_addr_width, config.weight_addr_width, config.param_addr_width,
               config.act_addr_width)


def host_write_layout(config, addr_width=None):
    """Payload of one host write: ``space`` (2 bits, :class:`~fpganet.isa.HostSpace`),
    ``addr`` (word address, ``addr_width`` bits, default :func:`host_addr_width`), ``data``
    (``config.host_data_width`` bits), in that order.

    ``data`` holds a program word (64 bits), a weight word (byte ``i`` = array row ``i`` in
    bits ``8i..8i+7``), a parameter entry (:func:`fpganet.isa.pack_param`) or an activation
    byte (bits 0..7), zero-extended.
    """
    addr_width = host_addr_width(config) if addr_width is None else addr_width
    return data.StructLayout({"space": 2, "addr": addr_width, "data": config.host_data_width})


def device_signature(config, addr_width=None):
    """The device's host-facing ports, seen from the device (see the module's docstring)."""
    return wiring.Signature({
        "host": In(stream.Signature(host_write_layout(config, addr_width))),
        "start": In(1),
        "busy": Out(1),
        "done": Out(1),
        "input": In(stream.Signature(8)),
        "output": Out(stream.Signature(8)),
        "cycles": Out(32),
    })


_DEVICE_STREAMS = ("host", "input", "output")
_DEVICE_SIGNALS = {"start": "to_device", "busy": "from_device", "done": "from_device",
                   "cycles": "from_device"}


def connect_device(m, link, device):
    """Connect ``link.device`` (a host link's ``In(device_signature(...))`` member) to the
    same-named ports of ``device``, which may have other ports too (``wiring.connect(m,
    link.device, device)`` does the same when it has only these)."""
    for name in _DEVICE_STREAMS:
        wiring.connect(m, getattr(link.device, name), getattr(device, name))
    for name, way in _DEVICE_SIGNALS.items():
        ours, theirs = getattr(link.device, name), getattr(device, name)
        m.d.comb += theirs.eq(ours) if way == "to_device" else ours.eq(theirs)
