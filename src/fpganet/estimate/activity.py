"""Switching activity for the FPGA power model: measured in RTL simulation, given, or the stated default.

The power model (:mod:`fpganet.estimate.power`) scales two of its terms by an
activity factor, AF = transitions per bit per clock cycle: the logic (per LC)
and the multipliers (their operands). Where they come from, best first:

``"rtl"``
    measured: toggle counts of the compiled program running on the
    accelerator's generated Verilog (:mod:`fpganet.sim.activity`; Verilator
    ``--coverage-toggle``), source ``simulated``. The logic range runs from the
    lower to the higher of the flip-flops' activity and every named signal's
    (zero-delay: glitches are not simulated); the operands' activity replaces
    both the stated operand range and the multiplier utilization (an idle
    operand that does not toggle costs nothing, and the counts see that).
``"auto"``
    a stored ``"rtl"`` measurement of exactly this network, configuration and
    gateware if there is one, else the default (the command line's default).
a number or a pair
    given by the caller (``--activity AF``), source ``measured``.
``None`` / ``"default"``
    the stated default (:data:`fpganet.estimate.figures.ACTIVITY`), source
    ``published``: Lattice's 15-25 % for the logic, 25-50 % for the operands.
"""

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FpganetError
from .figures import ACTIVITY
from .quantity import Quantity

__all__ = ["Activity", "resolve_activity", "resolve_engine_activity", "default_activity", "given_activity",
           "simulated_activity", "ACTIVITY_CHOICES", "UNIT"]

#: Named choices besides a number.
ACTIVITY_CHOICES = ("rtl", "auto", "default")
UNIT = "transitions/bit/cycle"


@dataclass
class Activity:
    """The activity factors the power model uses, with where they come from.

    Attributes
    ----------
    logic : (float, float) or None
        Logic AF range while the engine computes; None: the model's default
        (low end the measured counters' own activity, high end Lattice's 25 %).
    data : (float, float) or None
        Multiplier operand AF range; None: the model's default (25-50 %).
    source : str
        ``simulated``, ``measured`` or ``published`` (the stated default).
    basis : str
    data_includes_utilization : bool
        The operand activity was counted over every busy cycle, useful or not,
        so the model must not multiply by the multiplier utilization again.
    measurement : dict or None
        :meth:`fpganet.sim.activity.ActivityMeasurement.to_dict` when simulated.
    origin : str
        How it was obtained (measured now, read from a cache file, ...).
    """

    logic: tuple = None
    data: tuple = None
    source: str = "published"
    basis: str = ""
    data_includes_utilization: bool = False
    measurement: dict = None
    origin: str = ""
    notes: list = field(default_factory=list)

    @property
    def logic_range(self):
        return self.logic or ACTIVITY["logic_range"]

    @property
    def data_range(self):
        return self.data or ACTIVITY["data"]

    def figures(self):
        """``{"logic", "operands"}`` as Quantities (unit transitions per bit per cycle)."""
        logic_lo, logic_hi = self.logic_range
        data_lo, data_hi = self.data_range
        if self.source == "published":
            logic_basis = (f"stated default: {ACTIVITY['logic_basis']}; the model's low end keeps "
                           f"the measured counters' own activity ({ACTIVITY['counter_reference']:.3f})")
            data_basis = f"stated default: {ACTIVITY['data_basis']}"
        else:
            logic_basis = data_basis = self.basis
        logic = Quantity((logic_lo + logic_hi) / 2, UNIT, self.source, logic_basis, logic_lo,
                         logic_hi)
        operands = Quantity((data_lo + data_hi) / 2, UNIT, self.source, data_basis, data_lo,
                            data_hi)
        return {"logic": logic, "operands": operands}

    def to_dict(self):
        return {**self.figures(), "source": self.source, "origin": self.origin,
                "data_includes_utilization": self.data_includes_utilization,
                "measurement": self.measurement, "notes": list(self.notes)}


def default_activity(reason=""):
    """The stated default (figures.ACTIVITY)."""
    return Activity(source="published", basis=ACTIVITY["logic_basis"],
                    origin="stated default" + (f" ({reason})" if reason else ""))


def given_activity(value):
    """A logic AF given by the caller: a number or a ``(low, high)`` pair in (0, 1]."""
    if isinstance(value, (tuple, list)):
        low, high = (float(v) for v in value)
    else:
        low = high = float(value)
    if not (0 < low <= high <= 1):
        raise ValueError(f"an activity factor lies in (0, 1], low <= high; not {value!r}")
    return Activity(logic=(low, high), source="measured",
                    basis=f"logic activity factor {low:g}" + (f"-{high:g}" if high != low else "")
                          + " given by the caller (--activity); operands: the stated default",
                    origin="given")


def simulated_activity(measurement, origin=""):
    """An :class:`Activity` from a :class:`fpganet.sim.activity.ActivityMeasurement`."""
    ff, signals, operands = measurement.flipflop, measurement.signals, measurement.operands
    logic = (min(ff, signals), max(ff, signals))
    blocks = ", ".join(f"{name} {entry['flipflop_activity']:.3f}"
                       for name, entry in measurement.blocks.items() if entry["flipflop_bits"])
    basis = (f"{measurement.basis}: flip-flops {ff:.3f} (by block: {blocks}), every named signal "
             f"{signals:.3f} (logic range), multiplier operands {operands:.3f} over "
             f"{measurement.counts['operand_bits']:,} bits (counted over every busy cycle, so "
             f"the multiplier utilization is not applied again)")
    data = (operands, operands) if measurement.counts.get("operand_bits") else None
    result = Activity(logic=logic, data=data, source="simulated", basis=basis,
                      data_includes_utilization=data is not None,
                      measurement=measurement.to_dict(), origin=origin)
    if data is None:
        result.notes.append("no multiplier operand was found in the Verilog: the operands keep "
                            "the stated default")
    return result


def _from_rtl(spec, stored, measure, *, cache_dir, progress, what):
    """``"rtl"`` or ``"auto"`` given ``stored`` (the stored measurement, or None) and
    ``measure()``, which makes one (``what`` runs, for the progress line)."""
    if stored is not None:
        return simulated_activity(stored, origin=f"stored RTL measurement, "
                                                 f"{Path(cache_dir) / stored.path_name}")
    if spec == "auto":
        return default_activity("no stored RTL measurement for this network; "
                                "--activity rtl measures one")
    if progress:
        progress(f"measuring switching activity: {what} with Verilator toggle counting (the "
                 f"first build takes a minute or two)")
    try:
        measurement = measure()
    except (RuntimeError, OSError) as error:      # RtlError, no Verilator, a full disk
        raise FpganetError(f"the RTL activity measurement failed: "
                           f"{' '.join(str(error).split())[:500]}") from None
    build = f"build {measurement.build_s:.0f} s, " if measurement.build_s else "existing build, "
    where = f"; stored in {Path(cache_dir) / measurement.path_name}" if cache_dir else ""
    return simulated_activity(measurement, origin=f"measured now ({build}run "
                                                  f"{measurement.wall_s:.1f} s){where}")


def resolve_engine_activity(spec, net, images, *, cache_dir=None, progress=None):
    """:func:`resolve_activity` for a network compiled for the binary or low-bit engine
    (``images``: its :class:`~fpganet.codegen.binary_images.BinaryImages`): ``"rtl"`` measures
    the toggles of its first vector on the engine's device
    (:func:`fpganet.sim.activity.measure_engine_activity`), ``"auto"`` reads a stored one."""
    if not isinstance(spec, str) or spec not in ("rtl", "auto"):
        return resolve_activity(spec)
    from fpganet.sim.activity import measure_engine_activity

    return _from_rtl(spec, measure_engine_activity(net, images, cache_dir=cache_dir,
                                                   stored_only=True),
                     lambda: measure_engine_activity(net, images, cache_dir=cache_dir),
                     cache_dir=cache_dir, progress=progress,
                     what="a vector on the engine's Verilog")


def resolve_activity(spec, net=None, *, cache_dir=None, progress=None):
    """Turn an ``activity`` argument of :func:`fpganet.estimate.estimate` into an :class:`Activity`.

    Parameters
    ----------
    spec : None, str, float, (float, float), Activity or ActivityMeasurement
        See the module docstring.
    net : fpganet.qnet.QNetwork, optional
        Needed for ``"rtl"`` and ``"auto"``.
    cache_dir : path, optional
        Where RTL measurements are stored (``"auto"`` finds nothing without it).
    progress : callable, optional
        ``progress(message)`` before a long step (the Verilator build).
    """
    if spec is None or spec == "default":
        return default_activity()
    if isinstance(spec, Activity):
        return spec
    if hasattr(spec, "flipflop") and hasattr(spec, "operands"):
        return simulated_activity(spec, origin="measurement given")
    if isinstance(spec, str):
        if spec not in ("rtl", "auto"):
            raise ValueError(f"activity must be a number, a pair, or one of "
                             f"{', '.join(ACTIVITY_CHOICES)}; not {spec!r}")
        # The RTL simulator (amaranth, the gateware, Verilator) only when toggles are simulated.
        from fpganet.sim.activity import cached_network_activity, measure_network_activity

        try:
            cached = cached_network_activity(net, cache_dir)
        except FpganetError as error:      # the back end refuses the network
            if spec == "auto":
                return default_activity(f"no RTL measurement possible: {error}")
            raise FpganetError(f"cannot measure the switching activity: {error}") from None
        return _from_rtl(spec, cached, lambda: measure_network_activity(net, cache_dir=cache_dir),
                         cache_dir=cache_dir, progress=progress,
                         what="the compiled program on the accelerator's Verilog")
    return given_activity(spec)
