# amaranth: UnusedElaboratable=no
# (the device is built here only for its timing model)
"""``fpganet run --backend rtl`` of a directory compiled with ``--engine binary``.

The binary engine's device (:class:`~fpganet.hdl.binary_device.BinaryDevice`, its weights and
thresholds in its memories' initial contents) takes the accelerator's place in the generated
harness of :mod:`fpganet.sim.rtl_backend`: no host writes, one START a vector, the input
stream carrying the vectors' bytes one after another and the output stream their counts and
cycle stamps (:class:`~fpganet.codegen.binary_images.BinaryImages`). One build per folded
network (the memories are part of the design), cached as the accelerator's are.
"""

import hashlib
import json

import numpy as np

from fpganet.hdl.binary_device import BinaryDevice
from fpganet.hdl.memories import WeightBuffer
from fpganet.sim.rtl_backend import build_harness

__all__ = ["binary_device", "build_binary_harness", "run_binary_rtl", "model_stamp", "harness_memories"]


def binary_device(images, config):
    """``(device, device_key)``: the device of ``images``
    (:class:`~fpganet.codegen.binary_images.BinaryImages`) in the accelerator's place, and the
    key naming what it is built from; ``config`` gives the host port's widths."""
    key = hashlib.sha256(json.dumps([images.layout, images.files()]).encode()).hexdigest()
    device = BinaryDevice(images.folded, config,
                          weights=WeightBuffer if images.host_weights else None)
    return device, f"binary-{key}"


def build_binary_harness(images, config, *, sim=None, driver="cocotb"):
    """The harness around the device of ``images``; ``config`` gives the host port's widths."""
    device, device_key = binary_device(images, config)
    return build_harness(config, sim=sim, driver=driver, device=device, device_key=device_key)


def run_binary_rtl(images, config, q_in, *, sim=None, driver="cocotb", chunk=2000, progress=None):
    """Run int8 inputs ``q_in`` [N, ...] through the binary engine's Verilog, ``chunk`` vectors a
    simulation. Returns ``(q, stamps)``: the network's output codes [N, *output_shape] and each
    vector's cycle stamp (START to its last count byte) from the device's own counter."""
    build = build_binary_harness(images, config, sim=sim, driver=driver)
    outputs, stamps = [], []
    for first in range(0, len(q_in), chunk):
        part = q_in[first:first + chunk]
        result = build.run(harness_memories(images, config), images.pack_inputs(part),
                           starts=len(part))
        q, stamp = images.unpack_outputs(result.output, len(part))
        outputs.append(q)
        stamps.append(stamp)
        if progress:
            progress(first + len(part), len(q_in))
    return np.concatenate(outputs), np.concatenate(stamps)


def harness_memories(images, config):
    """What the harness loads before the first START: the weight words as the host write
    port's bytes (``weight_word_bytes`` a word), where the host loads them."""
    size = config.weight_word_bytes
    return {space: np.array([list(word.to_bytes(size, "little")) for word in words], np.uint8)
            for space, words in images.memories.items()}


def model_stamp(images, config):
    """Each vector's stamp as the device's timing model gives it
    (:meth:`~fpganet.hdl.binary_device.BinaryDevice.stamp_cycles`)."""
    return BinaryDevice(images.folded, config).stamp_cycles()
