"""Post-processing: bias, requantization, output zero point and clamp (the numerics contract).

For each lane::

    y = clamp(zp_out + ((acc + bias) * mult + (1 << (shift - 1)) >> shift), lo, hi)

with ``>>`` an arithmetic (floor) shift, so ties round toward +infinity; exactly
``fpganet.quantize.fixed_point.requantize`` followed by the clamp of
docs/reference/architecture.md. The rounding uses ``(x >> (shift-1)) + 1 >> 1``, which equals
``(x + 2^(shift-1)) >> shift`` for every integer ``x`` and needs no wide adder.

``x >> (shift-1)`` is saturated to 11 bits before the rounding (exact: see
:data:`~fpganet.hdl.requant_base.SATURATE_BITS`). ``acc + bias`` is kept in ``acc_width``
bits: the contract's no-overflow rule (``|bias| + 128 * sum|w| < 2^(acc_width-1)``) makes it
exact. ``lo > hi`` gives ``hi`` (as numpy's ``clip``).

The requantizer comes in seven components, one per way of building the ``(acc + bias) *
mult`` product, each with its own :attr:`~Requantizer.latency`; the same ports and the same
bytes:

=====================================  ==========  =======  =========================================
component                              multiplier  latency  the product
=====================================  ==========  =======  =========================================
:class:`GenericRequantizer`            generic     4        a ``*`` left to the synthesis tool
:class:`SplitProductRequantizer`       generic     5        two ``*`` of 17-bit parts, then their sum
:class:`BoothRequantizer`              booth       4        radix-4 partial products in logic cells
:class:`PipelinedBoothRequantizer`     booth       5        the same, the adder tree over two stages
:class:`Ice40DSPRequantizer`           ice40_dsp   5        two iCE40 SB_MAC16 per lane
:class:`ShiftAddRequantizer`           shift_add   4        a shifted copy per multiplier bit, summed
:class:`PipelinedShiftAddRequantizer`  shift_add   5        the same, the sum registered
=====================================  ==========  =======  =========================================

An eighth, :class:`TfliteRequantizer` (latency 6), computes the ``tflite`` requantization mode
(``config.requant_mode``, docs/reference/numerics.md section 8): TFLite's rounding doubling high multiply
by a 31-bit multiplier and rounding divide by a power of two, with the parameter entry's
ports of that mode (:data:`fpganet.isa.PARAM_LAYOUTS`).

:func:`requantizer` picks the one for ``config.requant_mode``, ``config.requant_latency`` and
a ``multiplier`` name (:data:`MULTIPLIERS`): the only place the choice is made.

The variants live in :mod:`fpganet.hdl.requant_generic` and :mod:`fpganet.hdl.requant_fabric`
over :mod:`fpganet.hdl.requant_base`, their product arithmetic in :mod:`fpganet.hdl.fabric_arith`;
this module re-exports them.
"""

from fpganet.config import AcceleratorConfig

from .requant_base import Requantizer
from .requant_fabric import (BoothRequantizer, Ice40DSPRequantizer, PipelinedBoothRequantizer,
                             PipelinedShiftAddRequantizer, ShiftAddRequantizer)
from .requant_generic import GenericRequantizer, SplitProductRequantizer, TfliteRequantizer

__all__ = ["Requantizer", "GenericRequantizer", "SplitProductRequantizer", "BoothRequantizer",
           "PipelinedBoothRequantizer", "Ice40DSPRequantizer", "ShiftAddRequantizer",
           "PipelinedShiftAddRequantizer", "TfliteRequantizer", "requantizer", "MULTIPLIERS",
           "VARIANTS"]

#: ``multiplier`` names of :func:`requantizer`: how the ``(acc + bias) * mult`` product is built.
MULTIPLIERS = ("generic", "booth", "ice40_dsp", "shift_add")


#: The requantizer for each ``(multiplier, requant_latency)``; latency 6 is the ``tflite``
#: requantization mode's.
VARIANTS = {
    ("generic", 4): GenericRequantizer,
    ("generic", 5): SplitProductRequantizer,
    ("booth", 4): BoothRequantizer,
    ("booth", 5): PipelinedBoothRequantizer,
    ("ice40_dsp", 5): Ice40DSPRequantizer,
    ("shift_add", 4): ShiftAddRequantizer,
    ("shift_add", 5): PipelinedShiftAddRequantizer,
    ("generic", 6): TfliteRequantizer,
}


def requantizer(config, lanes=1, *, multiplier="generic", dsp_model=False):
    """The requantizer variant for ``config.requant_mode``, ``config.requant_latency`` and
    ``multiplier``.

    Parameters
    ----------
    config : AcceleratorConfig
    lanes : int
        Results per cycle.
    multiplier : str
        One of :data:`MULTIPLIERS`: ``"generic"`` (a ``*``), ``"booth"`` (logic cells),
        ``"ice40_dsp"`` (two SB_MAC16 per lane; ``requant_latency`` 5 only), ``"shift_add"``
        (``config.requant_mult_bits - 1`` adders per lane, for few bits). The ``tflite``
        requantization mode has ``"generic"`` only (:class:`TfliteRequantizer`).
    dsp_model : bool
        With ``"ice40_dsp"``: the SB_MAC16 described in Amaranth (for ``amaranth.sim``).

    Returns
    -------
    Requantizer
        One of :data:`VARIANTS`, whose :attr:`~Requantizer.latency` is
        ``config.requant_latency``.
    """
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
    if multiplier not in MULTIPLIERS:
        raise ValueError(f"multiplier must be one of {MULTIPLIERS}, not {multiplier!r}")
    if config.requant_mode == "tflite" and multiplier != "generic":
        raise ValueError(f"the tflite requantization mode has the generic multiplier only, "
                         f"not {multiplier!r}")
    variant = VARIANTS.get((multiplier, config.requant_latency))
    if variant is None:
        raise ValueError(f"multiplier {multiplier!r} needs requant_latency 5, not "
                         f"{config.requant_latency}")
    if variant is Ice40DSPRequantizer:
        return variant(config, lanes, model=dsp_model)
    return variant(config, lanes)
