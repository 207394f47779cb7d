# amaranth: UnusedElaboratable=no
# (the device is built here only for its timing model)
"""The estimate of a network compiled for the binary or low-bit engine (``fpganet compile
--engine binary`` or ``lowbit``): images/s, watts and images/s/W on the board, beside the GPUs.

What differs from the int8 array's estimate (:func:`fpganet.estimate.comparison.estimate`):

- **Cycles** are the device's timing model (:meth:`~fpganet.hdl.binary_device.BinaryDevice.stamp_cycles`,
  which its RTL equals by test): a vector's input bytes, the layers, its counts out; one
  vector a START.
- **The link** carries the input packed at its width (``ceil(K * input_bits / 8)`` bytes; a
  map as the engine's words, whole) and the totals at two bytes each; the weights are in the bitstream and never cross it.
- **Resources** are those of the routed build (``--report`` of ``fpganet synth OUT``): the
  engine's logic has no model here, so an estimate without one is refused.
- **Power** is the same chip model (:func:`fpganet.estimate.power.fpga_power`) with no
  multiplier: logic cells at the stated switching activity or at the one measured on the
  engine's Verilog (``activity="rtl"``, :func:`fpganet.estimate.activity.resolve_engine_activity`),
  and the memory blocks the engine reads each cycle (weights, thresholds, activations).
- **No ASIC projection**: :mod:`fpganet.estimate.asic` projects int8 multipliers.
"""

import math
from dataclasses import dataclass, fields

from ..codegen.binary import ENGINE_NAMES
from ..errors import FpganetError
from ..hdl.binary_device import BinaryDevice
from ..hdl.binary_engine import BinaryNetworkEngine
from .activity import resolve_engine_activity
from .comparison import Estimate, fpga_rows_of, measured_rows, network_summary
from .gpu import DEFAULT_GPUS, gpu_rows
from .power import canonical_resources, fpga_power
from .quantity import Quantity
from .throughput import (BOARDS, HostLink, clock_quantity, device_family, fpga_performance,
                         load_board_report)
from .workload import Workload

__all__ = ["binary_estimate", "binary_performance", "BinaryWorkload"]

#: Bits of one block RAM read port the engine's words are spread over, per family (iCE40
#: SB_RAM40_4K at 256 x 16; ECP5 DP16KD at 1024 x 18).
_RAM_PORT_BITS = {"ice40": 16, "ecp5": 18}


@dataclass
class BinaryWorkload(Workload):
    """A :class:`~fpganet.estimate.workload.Workload` whose weights are fields of a few bits in
    the bitstream: on chip whatever the configuration's weight buffer, and never sent over the
    link; its streams are the engine's (:meth:`of`)."""

    binary_weight_bits: int = 0
    weight_text: str = "binary weights (one bit each, in the bitstream)"
    #: Bytes the host loads once (the weight words, where it loads them).
    setup_bytes: int = 0

    @classmethod
    def of(cls, net, images):
        """The work of ``net`` on the engine of ``images`` (a
        :class:`~fpganet.codegen.binary_images.BinaryImages`): the input at its width, the
        totals out, a weight field's bits a weight."""
        base = Workload.from_network(net)
        return cls(**{**{field.name: getattr(base, field.name) for field in fields(base)},
                      "input_bytes": images.input_bytes, "output_bytes": images.output_bytes,
                      "binary_weight_bits": sum(layer.k * layer.m * layer.field_bits
                                                for layer in images.layers),
                      "setup_bytes": sum(len(words) * _word_bytes(images)
                                         for words in images.memories.values()),
                      "weight_text": _weight_text(images)})

    @property
    def weight_bytes(self):
        return math.ceil(self.binary_weight_bits / 8)

    @property
    def weights_fit_on_chip(self):
        return True


def _word_bytes(images):
    """Bytes of one weight word of ``images`` on the link."""
    return -(-images.folded.word_bits[0] // 8)


def _weight_text(images):
    where = "loaded over the link" if images.host_weights else "in the bitstream"
    if images.folded.unit == "binary":
        return f"binary weights (one bit each, {where})"
    return f"{images.folded.weight_bits}-bit weights ({where})"


def binary_estimate(net, images, *, board, board_report, clock_hz=None, link=None,
                    gpus=DEFAULT_GPUS, batch=None, measure=True, measure_options=None,
                    activity="default", cache_dir=None, progress=None):
    """Estimate ``net`` on the binary engine of ``images``
    (:class:`~fpganet.codegen.binary_images.BinaryImages`), built for ``board`` as
    ``board_report`` (a routed build's ``report.json``, required) says; ``activity``, ``cache_dir``
    and ``progress`` as :func:`~fpganet.estimate.activity.resolve_engine_activity` takes them.

    Returns
    -------
    fpganet.estimate.comparison.Estimate
        With no ASIC rows and no per-layer table; ``design`` names the engine.
    """
    folded, config = images.folded, net.config
    if board_report is None:
        raise FpganetError(f"the {ENGINE_NAMES[folded.unit]}'s logic has no model: give "
                           f"--report REPORT.json of its routed build (fpganet synth OUT writes "
                           f"it)")
    report = board_report if hasattr(board_report, "fmax_mhz") else load_board_report(board_report)
    design = folded.description
    if report.macs_per_cycle != folded.pe * folded.simd:
        raise FpganetError(f"the board report '{report.path}' is of a design with "
                           f"{report.macs_per_cycle} MACs a cycle, not the {design} "
                           f"({folded.pe * folded.simd}): give the report of this folder's build")
    board_info = dict(BOARDS[board], key=board, device=report.device,
                      family=device_family(report.device), report=report.path)
    notes = []
    if report.board.lower() != board:
        notes.append(f"the board report is for '{report.board}', not '{board}'")
    clock = clock_quantity(config, report, clock_hz)
    link = link or HostLink()
    workload, cycles, performance = binary_performance(net, images, clock, link)
    layer_cycles = [BinaryNetworkEngine.layer_cycles(layer, folded) for layer in folded.layers]
    resources = canonical_resources(report.used())
    activity = resolve_engine_activity(activity, net, images, cache_dir=cache_dir,
                                       progress=progress)
    power, rows = fpga_rows_of(
        f"FPGA {report.device} ({board}), {design} @ {clock.value / 1e6:g} MHz", board, cycles,
        performance, link,
        lambda performance: _power(board_info, folded, resources, clock,
                                   performance["duty"].value, report.path, activity))
    notes += ["no ASIC projection: the projection models int8 multipliers", *power.notes]
    return Estimate(workload=workload, board=board_info, clock=clock, cycles=cycles,
                    layer_cycles=layer_cycles, layer_cycles_source="modelled (the engine's "
                    "BinaryNetworkEngine.layer_cycles)", performance=performance, power=power,
                    fpga_row=rows[0], fpga_extra_rows=rows[1:], asic_rows=[],
                    gpu_rows=gpu_rows(workload, gpus, batch=batch),
                    measured=measured_rows(net, measure, measure_options),
                    network=network_summary(workload, net), notes=notes, activity=power.activity,
                    design=design)


def binary_performance(net, images, clock, link=None):
    """What the engine of ``images`` does at ``clock`` (a :class:`Quantity` in Hz), without a
    routed build: ``(workload, cycles, performance)``, the cycles from the device's timing model,
    images/s over ``link`` as :func:`~fpganet.estimate.throughput.fpga_performance` gives them.
    Power needs the routed build (:func:`binary_estimate`)."""
    workload = BinaryWorkload.of(net, images)
    stamp = BinaryDevice(images.folded, net.config).stamp_cycles()
    cycles = Quantity(stamp, "cycles", "estimated",
                      "the binary device's timing model (BinaryDevice.stamp_cycles, equal to its "
                      "RTL's stamp by test): the input bytes, the layers, the counts out",
                      extra={"io_cycles": images.input_bytes + images.output_bytes})
    return workload, cycles, fpga_performance(workload, cycles, clock, link or HostLink())


def _power(board_info, folded, resources, clock, duty, where, activity):
    """Chip power of the engine busy ``duty`` of the time: its logic cells at ``activity``
    (an :class:`~fpganet.estimate.activity.Activity`), and the block RAM ports it reads every
    compute cycle (a weight word, a threshold word, an activation word)."""
    family = board_info["family"]
    port = _RAM_PORT_BITS[family]
    ebr_active = sum(math.ceil(bits / port) for bits in folded.word_bits)
    pll = abs(clock.value - board_info["oscillator_hz"]) > 1.0
    power = fpga_power(family, clock.value, lcs=resources["lc"], ffs=resources.get("ff") or None,
                       ebr_active=ebr_active, memory_rate=1.0, duty=duty, pll=pll,
                       reference="external", logic_activity=activity.logic,
                       data_activity=activity.data)
    power.activity = activity
    power.notes.append(f"resources: routed design, {where}")
    weights, thresholds, activations = folded.word_bits
    power.notes.append(f"no multipliers; {ebr_active} block RAM reads a compute cycle (weights "
                       f"{weights} bits, thresholds {thresholds}, activations {activations}); "
                       f"engine busy {duty:.2f} of the time; {'PLL' if pll else 'no PLL'}")
    power.resources = {"counts": dict(resources), "basis": f"routed design, {where}"}
    return power

