"""FPGA power: static + clock tree + per-resource dynamic power, scaled by frequency and activity.

Neither yosys nor nextpnr estimates power; this model does, from measured figures.

iCE40UP5K (coefficients derived in :func:`fpganet.estimate.figures.ice40_coefficients`
from the Joulescope measurements of ``tinyvision-ai-inc/ice40_power``)::

    P = P_static(core 104 uW + I/O 20 uW)
      + P_reference       HFOSC 58 uW, or the PLL: ~0.94 mW on the core rail + 0.10-0.14 mA on its own
      + k_clock * f       52 uW/MHz (44 uW/MHz measured behind the PLL)
      + N_LC * 14.6 nW/MHz * f * s_logic
      + N_mult * 24 uW/MHz * f * u * duty * s_data
      + sum over RAM blocks read per cycle of E_access * f * busy * duty

``s_logic`` spans 1 (the measured low-toggle counters) to ``AF / AF_counter``
(the extra switching of a datapath at activity factor AF, 15-25 %, while the
engine computes); ``s_data`` spans 1 to 2 (the measurement multiplied counters,
AF ~25 %; random int8 data toggle ~50 %). ``u`` is the fraction of multipliers
doing useful work while the engine computes, ``duty`` the fraction of time it
computes. Every component is a low/high range; the headline is the midpoint.

``s_logic`` and ``s_data`` come from the activity factors of
:mod:`fpganet.estimate.activity`: simulated from RTL toggle counts when a
measurement is at hand (both ends of the range then scale with it, and the
operands' measured toggles replace ``u``), else the stated defaults above.

ECP5: static power from the data sheet's typical standby currents of the
LFE5U-85F (figures.ECP5_STATIC, cited second-hand: unverified); the dynamic terms
keep the same structure with placeholder coefficients (figures.ECP5_PLACEHOLDER):
no published ECP5 per-resource figure was found.

The boundary is the FPGA chip (core, PLL and I/O rails). Board power (regulators,
USB bridge, LEDs) is not modelled.
"""

import math
from dataclasses import dataclass, field

from ..errors import FpganetError
from ..hdl.ice40_spram import activation_sprams
from .activity import Activity, default_activity, given_activity
from .figures import (ACTIVITY, ECP5_FLIP_FLOP, ECP5_PLACEHOLDER, ECP5_STATIC, FF_PER_LUT,
                      ICE40_MEASUREMENTS, ICE40_MEMORY_ESTIMATES, MARLANN, ice40_coefficients)
from .quantity import Quantity

__all__ = ["PowerEstimate", "ice40_power", "ecp5_power", "fpga_power", "accelerator_power",
           "canonical_resources", "configured_resources", "reproduce_ice40_measurements",
           "marlann_check", "COEFFICIENTS", "BOUNDARY", "RESOURCE_ALIASES"]

#: iCE40UP5K coefficients: ``{name: (value, unit, basis)}``.
COEFFICIENTS = ice40_coefficients()

BOUNDARY = ("FPGA chip: core, PLL and I/O rails (board regulators, USB bridge and LEDs not "
            "modelled)")

_ICE40_SOURCE = "tinyvision-ai-inc/ice40_power (Joulescope measurements, iCE40UP5K)"

#: nextpnr / yosys cell names -> the model's resource kinds.
RESOURCE_ALIASES = {
    "lc": ("ICESTORM_LC", "SB_LUT4", "TRELLIS_COMB", "LUT4", "LUT", "LC", "LUTS", "LCS"),
    "lc_pairs": ("TRELLIS_SLICE",),     # one ECP5 slice = two LUT4s
    "ff": ("TRELLIS_FF", "FF", "FFS"),
    "dsp": ("ICESTORM_DSP", "SB_MAC16", "MULT18X18D", "MULT18", "DSP"),
    "ebr": ("ICESTORM_RAM", "SB_RAM40_4K", "DP16KD", "EBR", "BRAM"),
    "spram": ("ICESTORM_SPRAM", "SB_SPRAM256KA", "SPRAM"),
    "pll": ("ICESTORM_PLL", "SB_PLL40_CORE", "SB_PLL40_PAD", "SB_PLL40_2F_CORE", "EHXPLLL", "PLL"),
}


def _c(name):
    return COEFFICIENTS[name][0]


def _rng(value):
    """``(low, high)`` from a number or a pair."""
    if isinstance(value, (tuple, list)):
        return float(value[0]), float(value[1])
    return float(value), float(value)


@dataclass
class PowerEstimate:
    """Chip power as components, each a low/high range (W)."""

    device: str
    clock_hz: float
    components: dict                  # name -> (low, high) watts
    bases: dict                       # name -> basis text
    boundary: str = BOUNDARY
    notes: list = field(default_factory=list)
    unverified: bool = False

    @property
    def low(self):
        return sum(lo for lo, _ in self.components.values())

    @property
    def high(self):
        return sum(hi for _, hi in self.components.values())

    @property
    def nominal(self):
        return (self.low + self.high) / 2

    def rail(self, *names):
        """``(low, high)`` summed over the named components."""
        lo = sum(self.components[n][0] for n in names if n in self.components)
        hi = sum(self.components[n][1] for n in names if n in self.components)
        return lo, hi

    @property
    def core(self):
        """Core-rail ``(low, high)``: everything but the I/O banks and the PLL's own rail."""
        names = [n for n in self.components if n not in ("static_io", "pll_rail")]
        return self.rail(*names)

    def total(self, basis=None):
        source = "estimated"
        return Quantity((self.low + self.high) / 2, "W", source,
                        basis or f"{self.device} power model at {self.clock_hz / 1e6:g} MHz "
                                 f"(midpoint of the range); boundary: {self.boundary}",
                        self.low, self.high, self.unverified)

    def to_dict(self):
        return {"device": self.device, "clock_hz": self.clock_hz, "boundary": self.boundary,
                "total": self.total().to_dict(),
                "components": {name: Quantity((lo + hi) / 2, "W", "estimated", self.bases[name],
                                              lo, hi, self.unverified).to_dict()
                               for name, (lo, hi) in self.components.items()},
                "notes": list(self.notes)}


def _logic_factors(logic_activity, duty):
    """``(low, high)`` multipliers of the measured per-LC figure, and a description.

    The per-LC figure was measured on counters at AF_counter; while the engine computes
    (``duty``) the logic switches at the activity given, the rest of the time as the
    counters did. The counters' figure is a floor: it holds each LC's share of clocking,
    which does not fall with the activity.
    """
    af_ref = ACTIVITY["counter_reference"]

    def factor(af):
        return 1.0 + max(0.0, af / af_ref - 1.0) * duty

    if logic_activity is None:
        # The stated default: low end the measured figure as is, high end Lattice's 25 %.
        af_hi = ACTIVITY["logic_range"][1]
        return (1.0, factor(af_hi),
                f"low: the counters' figure (AF {af_ref:.3f}); high: AF {af_hi:.2f} while "
                f"computing (x{af_hi / af_ref:.1f}, duty {duty:.2f})")
    af_lo, af_hi = logic_activity
    return (factor(af_lo), factor(af_hi),
            f"AF {af_lo:.3f}-{af_hi:.3f} while computing (x{factor(af_lo):.2f}-"
            f"{factor(af_hi):.2f} of the counters' AF {af_ref:.3f} at duty {duty:.2f})")


def ice40_power(clock_hz, *, lcs=0, multipliers=0, lut_multipliers=0, dsp_utilization=1.0,
                spram_active=0,
                ebr_active=0, memory_rate=1.0, duty=1.0, pll=False, reference="external",
                logic_activity=None, data_activity=None, activity_basis=None,
                device="iCE40UP5K", ffs=None):
    """iCE40UP5K chip power at ``clock_hz``.

    Parameters
    ----------
    clock_hz : float
    lcs : int or (low, high)
        Logic cells used.
    multipliers : int
        8x8 products computed per cycle in SB_MAC16s at full occupancy (two per SB_MAC16
        in 8x8 mode).
    lut_multipliers : int
        8x8 products computed in logic cells instead (measured 36 uW/MHz each, their
        ~180 LCs included: do not count those LCs in ``lcs``).
    dsp_utilization : float
        Fraction of those products doing useful work while the engine computes.
    spram_active, ebr_active : int
        SPRAM and EBR blocks read in a cycle in which the engine streams operands.
    memory_rate : float
        Fraction of compute cycles in which they are read.
    duty : float
        Fraction of time the engine computes (the rest it waits for the host link).
    pll : bool
        The clock comes from the PLL.
    reference : str
        ``"external"`` (oscillator pin), ``"hfosc"`` (internal oscillator) or ``"none"``.
    logic_activity : (float, float), optional
        Activity factor range of the logic while computing (a measured or given toggle
        rate: both ends scale with it). Default: low end the measured counters' figure,
        high end figures.ACTIVITY's 25 %.
    data_activity : (float, float), optional
        Activity of the multiplier operands (default figures.ACTIVITY["data"]).
    activity_basis : str, optional
        Where the activities come from, for the bases (e.g. "simulated: RTL toggle counts").
    ffs : int or (low, high), optional
        Not used: the measured per-LC figure holds each cell's flip-flop.
    """
    f = clock_hz / 1e6
    lc_lo, lc_hi = _rng(lcs)
    d_lo, d_hi = data_activity or ACTIVITY["data"]
    af_ref = ACTIVITY["counter_reference"]
    data_ref = ACTIVITY["data"][0]
    logic_lo, logic_hi, logic_text = _logic_factors(logic_activity, duty)
    activity_note = f" [activity: {activity_basis}]" if activity_basis else ""
    comps, bases = {}, {}

    def add(name, lo, hi, basis):
        comps[name] = (lo, hi)
        bases[name] = basis

    add("static_core", _c("static_core_w"), _c("static_core_w"),
        f"configured blank design, core rail, measured ({_ICE40_SOURCE})")
    add("static_io", _c("static_io_w"), _c("static_io_w"),
        f"configured blank design, I/O banks, measured ({_ICE40_SOURCE})")
    if pll:
        fixed = _c("pll_fixed_w")
        lo = fixed - (_c("hfosc_fixed_w") if reference != "hfosc" else 0.0)
        add("reference", lo, fixed, "PLL on the core rail (fit to the 16/32/48 MHz PLL rows; the "
                                    "measured PLL had the HFOSC as reference: its 58 uW is the "
                                    "low end's saving with an external oscillator)")
        rail_lo, rail_hi = COEFFICIENTS["pll_rail_w"][0]
        add("pll_rail", rail_lo, rail_hi, "PLL supply rail, measured 103.6-138.9 uA x 1.219 V")
        slope = _c("pll_clock_w_per_mhz")
        add("clock", slope * f, slope * f, f"clock tree behind the PLL, "
                                           f"{slope * 1e6:.1f} uW/MHz (fit to the PLL rows)")
    else:
        fixed = _c("hfosc_fixed_w") if reference == "hfosc" else 0.0
        add("reference", fixed, fixed, "internal HFOSC fixed cost (fit)" if fixed else
            "external oscillator (its power is on the board, not the FPGA)")
        slope = _c("clock_w_per_mhz")
        add("clock", slope * f, slope * f,
            f"clock tree, {slope * 1e6:.1f} uW/MHz (fit to the HFOSC 6-48 MHz rows)")
    lc = _c("lc_w_per_mhz") * f
    add("logic", lc_lo * lc * logic_lo, lc_hi * lc * logic_hi,
        f"{_c('lc_w_per_mhz') * 1e9:.1f} nW per LC per MHz measured on counters (AF "
        f"{af_ref:.3f}) x {lc_lo:,.0f}-{lc_hi:,.0f} LCs; {logic_text}{activity_note}")
    dsp = _c("dsp_w_per_mhz") * f * multipliers * dsp_utilization * duty
    dsp += _c("lut_multiply_w_per_mhz") * f * lut_multipliers * dsp_utilization * duty
    add("dsp", dsp * d_lo / data_ref, dsp * d_hi / data_ref,
        f"{_c('dsp_w_per_mhz') * 1e6:.1f} uW/MHz per 8x8 product (SB_MAC16, measured on counters) "
        f"x {multipliers} products"
        + (f" (+ {lut_multipliers} in LUTs at {_c('lut_multiply_w_per_mhz') * 1e6:.1f} uW/MHz)"
           if lut_multipliers else "")
        + f" x utilization {dsp_utilization:.2f} x duty {duty:.2f}; operand "
        f"activity {d_lo:.2f}-{d_hi:.2f} vs the measurement's {data_ref:.2f}"
        + (activity_note if data_activity is not None else ""))
    sp_lo, sp_hi = ICE40_MEMORY_ESTIMATES["spram_j_per_access"]
    ebr_lo, ebr_hi = ICE40_MEMORY_ESTIMATES["ebr_j_per_access"]
    accesses = clock_hz * memory_rate * duty
    add("memory", accesses * (spram_active * sp_lo + ebr_active * ebr_lo),
        accesses * (spram_active * sp_hi + ebr_active * ebr_hi),
        f"{spram_active} SPRAM + {ebr_active} EBR reads per compute cycle x rate "
        f"{memory_rate:.2f} x duty {duty:.2f}; per access SPRAM {sp_lo * 1e12:g}-{sp_hi * 1e12:g} "
        f"pJ, EBR {ebr_lo * 1e12:g}-{ebr_hi * 1e12:g} pJ ({ICE40_MEMORY_ESTIMATES['basis']})")
    estimate = PowerEstimate(device, clock_hz, comps, bases)
    estimate.unverified = bool(spram_active or ebr_active)
    return estimate


def ecp5_power(clock_hz, *, lcs=0, ffs=None, multipliers=0, dsp_utilization=1.0, ebr_active=0,
               memory_rate=1.0, duty=1.0, pll=False, logic_activity=None, data_activity=None,
               activity_basis=None, device="LFE5U-85F", **_ignored):
    """ECP5 chip power: static from the data sheet's typical standby currents (cited second-hand,
    unverified); flip-flops and clock tree from a ULX3S measurement; the other dynamic terms by
    the iCE40 model's structure with PLACEHOLDER coefficients.

    See figures.ECP5_STATIC, figures.ECP5_FLIP_FLOP and figures.ECP5_PLACEHOLDER; ``ffs`` is
    the flip-flop count (a number or a range; default: ``lcs`` x figures.FF_PER_LUT); the other
    arguments are those of :func:`ice40_power`.
    """
    ph = ECP5_PLACEHOLDER
    static = ECP5_STATIC
    f = clock_hz / 1e6
    lc_lo, lc_hi = _rng(lcs)
    if ffs is None:
        ff_lo, ff_hi = lc_lo * FF_PER_LUT[0], lc_hi * FF_PER_LUT[1]
        ff_text = (f"{ff_lo:,.0f}-{ff_hi:,.0f} flip-flops ({FF_PER_LUT[0]}-{FF_PER_LUT[1]} per "
                   f"LUT, the routed builds' ratio)")
    else:
        ff_lo, ff_hi = _rng(ffs)
        ff_text = f"{ff_lo:,.0f} flip-flops" if ff_lo == ff_hi else \
            f"{ff_lo:,.0f}-{ff_hi:,.0f} flip-flops"
    af_lo = (logic_activity or ACTIVITY["logic_range"])[0]
    ff_w = ECP5_FLIP_FLOP["w_per_mhz"]
    d_lo, d_hi = data_activity or ACTIVITY["data"]
    data_ref = ACTIVITY["data"][0]
    logic_lo, logic_hi, logic_text = _logic_factors(logic_activity, duty)
    activity_note = f" [activity: {activity_basis}]" if activity_basis else ""
    tag = "PLACEHOLDER (unverified: no ECP5 figure for this term found; see docs/guide/estimator.md)"
    comps = {
        "static": static["core_aux_w"],
        "static_io": static["io_w"],
        # Low: only data toggles cost, at the logic's activity while computing; high: the whole
        # measured figure every cycle, as if it were all clock tree (which never idles).
        "clock": (ff_lo * ff_w[0] * f * af_lo * duty, ff_hi * ff_w[1] * f),
        "logic": (lc_lo * ph["lut_w_per_mhz"][0] * f * logic_lo,
                  lc_hi * ph["lut_w_per_mhz"][1] * f * logic_hi),
        "dsp": tuple(m * f * multipliers * dsp_utilization * duty * d / data_ref
                     for m, d in zip(ph["mult_w_per_mhz"], (d_lo, d_hi))),
        "memory": tuple(e * clock_hz * memory_rate * duty * ebr_active
                        for e in ph["ebr_j_per_access"]),
    }
    if pll:
        comps["pll"] = ph["pll_w"]
    bases = {name: f"{tag}: {name}" for name in comps}
    bases["clock"] = (f"measured on a ULX3S ({ECP5_FLIP_FLOP['boundary']}): "
                      f"{ff_w[0] * 1e6:g}-{ff_w[1] * 1e6:g} uW per toggling flip-flop per MHz "
                      f"(flip-flop, routing and clock tree) x {ff_text}; low end: toggles at "
                      f"activity {af_lo:.3f} while computing (duty {duty:.2f}), high end: every "
                      f"cycle [{ECP5_FLIP_FLOP['source']}]")
    bases["static"] = static["core_aux_basis"]
    bases["static_io"] = static["io_basis"]
    bases["logic"] = (f"{tag}: {ph['lut_w_per_mhz'][0] * 1e9:g}-{ph['lut_w_per_mhz'][1] * 1e9:g} "
                      f"nW per LUT per MHz x {lc_lo:,.0f}-{lc_hi:,.0f} LUTs; {logic_text}"
                      f"{activity_note}")
    bases["dsp"] = (f"{tag}: {ph['mult_w_per_mhz'][0] * 1e6:g}-{ph['mult_w_per_mhz'][1] * 1e6:g} "
                    f"uW/MHz per 8x8 product x {multipliers} x utilization {dsp_utilization:.2f} "
                    f"x duty {duty:.2f}; operand activity {d_lo:.2f}-{d_hi:.2f} vs "
                    f"{data_ref:.2f}" + (activity_note if data_activity is not None else ""))
    estimate = PowerEstimate(device, clock_hz, comps, bases, unverified=True)
    estimate.notes.append(ph["basis"])
    estimate.notes.append(static["basis"])
    return estimate


def fpga_power(family, clock_hz, **kwargs):
    """:func:`ice40_power` or :func:`ecp5_power` by device family, as the board registry
    (:data:`fpganet.boards.build.BOARDS`) names it: ``"ice40"`` (the iCE40UP5K's figures, the
    registry's iCE40 device) or ``"ecp5"``."""
    if family == "ice40":
        return ice40_power(clock_hz, **kwargs)
    if family == "ecp5":
        return ecp5_power(clock_hz, **kwargs)
    raise ValueError(f"no power model for the device family {family!r}")


# Resources ----------------------------------------------------------------------------------

def canonical_resources(used):
    """``{"lc", "ff", "dsp", "ebr", "spram", "pll"}`` counts from nextpnr/yosys cell names
    (``ff`` 0 when the table has none)."""
    result = {kind: 0 for kind in ("lc", "ff", "dsp", "ebr", "spram", "pll")}
    for name, count in used.items():
        key = str(name).upper()
        for kind, aliases in RESOURCE_ALIASES.items():
            if key in aliases:
                if kind == "lc_pairs":
                    result["lc"] += 2 * int(count)
                else:
                    result[kind] += int(count)
    return result


def configured_resources(board, config):
    """Resources of ``board``'s accelerator built for ``config``, without a routed design: the
    counts ``compile --board`` and ``synth`` check before any tool runs
    (:func:`fpganet.boards.resources.resource_needs`), block RAM, SPRAM and DSP counted on the
    elaborated core, logic cells estimated from the board's routed default as a range of
    its margin. Where the board's core cannot be built for ``config`` at all (a weight buffer
    the SPRAMs cannot hold, say), its default's block counts stand in.

    Returns ``(resources, basis, note)``: canonical counts, their basis, and a line for the
    estimate's notes when the chip cannot hold the design (else None).
    """
    # Imported here: the boards' package imports the compiler, which imports the estimator.
    from fpganet.boards.build import BOARDS
    from fpganet.boards.resources import logic_estimate, resource_needs

    board = BOARDS[board]
    basis = ("counted on the core built for the configuration, not a routed design (block RAM, "
             "SPRAM and DSP as synth's pre-checks count them; logic cells the routed default's "
             "plus measured per-PE and per-lane costs, within the estimate's margin)")
    try:
        needs = resource_needs(board, config)
        blocks = needs.exact
        logic = ((needs.logic.used, needs.logic.margin) if needs.logic is not None
                 else logic_estimate(board, config))
        refusal = needs.refusal()
        note = refusal and f"the design {refusal}: no build of it routes here"
    except (ValueError, FpganetError) as error:
        blocks = resource_needs(board, board.default_config).exact
        logic = logic_estimate(board, config)
        basis = ("not a routed design: the board's core cannot be built for this "
                 "configuration, so its default's block RAM, SPRAM and DSP counts; logic cells "
                 "the routed default's plus measured per-PE and per-lane costs")
        note = f"the {board.name}'s core cannot be built for this configuration: {error}"
    resources = canonical_resources({need.name: need.used for need in blocks})
    used, margin = logic
    resources["lc"] = (max(0, used - margin), used + margin)
    return resources, basis, note


def accelerator_power(workload, cycles, clock, performance, family, *, resources,
                      resources_basis, oscillator_hz=None, activity=None):
    """Chip power of the accelerator running ``workload`` at the end-to-end rate.

    Parameters
    ----------
    workload : Workload
    cycles, clock : Quantity
        Cycles per image and Hz.
    performance : dict
        From :func:`fpganet.estimate.throughput.fpga_performance` (its ``duty``).
    family : str
        ``"ice40"`` or ``"ecp5"`` (the board registry's family names).
    resources : dict
        Canonical counts (:func:`canonical_resources` of a routed report, or
        :func:`configured_resources`).
    oscillator_hz : float, optional
        The board's oscillator; another clock needs the PLL.
    activity : Activity, float or (float, float), optional
        Switching activity (:class:`fpganet.estimate.activity.Activity`: simulated from RTL
        toggle counts, given, or the stated default); a number or pair is a logic activity
        factor given by the caller. Default: figures.ACTIVITY.
    """
    config = workload.config
    notes = []
    busy_cycles = cycles.value
    utilization = min(1.0, workload.macs / (busy_cycles * config.macs_per_cycle))
    memory_rate = min(1.0, workload.beats / busy_cycles)
    duty = performance["duty"].value
    if family == "ice40":
        weight_blocks = math.ceil(8 * config.weight_word_bytes / 16)
        weight_sprams = weight_blocks if resources.get("spram") else 0
        act_sprams = activation_sprams(config)
        spram_active = weight_sprams + act_sprams
        ebr_active = config.act_banks - act_sprams + (0 if weight_sprams else weight_blocks)
    else:
        spram_active = 0
        ebr_active = math.ceil(8 * config.weight_word_bytes / 18) + config.act_banks
    pll = oscillator_hz is not None and abs(clock.value - oscillator_hz) > 1.0
    if activity is None:
        activity = default_activity()
    elif not isinstance(activity, Activity):
        activity = given_activity(activity)
    # Operand toggles counted over every busy cycle already hold the idle beats.
    dsp_utilization = 1.0 if activity.data_includes_utilization else utilization
    basis = None if activity.source == "published" else f"{activity.source}, {activity.origin}"
    estimate = fpga_power(family, clock.value, lcs=resources["lc"], ffs=resources.get("ff") or None,
                          multipliers=config.macs_per_cycle, dsp_utilization=dsp_utilization,
                          spram_active=spram_active, ebr_active=ebr_active,
                          memory_rate=memory_rate, duty=duty, pll=pll,
                          reference="external", logic_activity=activity.logic,
                          data_activity=activity.data, activity_basis=basis)
    estimate.activity = activity
    estimate.notes.extend(notes)
    estimate.notes.append(f"resources: {resources_basis}")
    estimate.notes.append(f"multiplier utilization while computing {utilization:.2f} (useful MACs / "
                          f"(cycles x {config.macs_per_cycle})); operand beats in "
                          f"{memory_rate:.2f} of compute cycles; engine busy {duty:.2f} of the "
                          f"time; {'PLL' if pll else 'no PLL'}"
                          + ("; the multipliers' power follows their operands' simulated "
                             "toggles, which hold the utilization" if dsp_utilization == 1.0
                             and utilization < 1.0 else ""))
    estimate.notes.append(f"switching activity: {activity.source}, {activity.origin}")
    estimate.resources = {"counts": {k: v for k, v in resources.items()}, "basis": resources_basis}
    return estimate


# Checks against measurements ----------------------------------------------------------------

def reproduce_ice40_measurements():
    """The model's core-rail power for each ice40_power measurement it was built from.

    Returns
    -------
    list of dict
        ``description``, ``measured_w``, ``model_w`` (midpoint of a range that is a point
        here: the measured conditions fix the activity), ``error`` (relative).
    """
    counter = ACTIVITY["counter_reference"]
    results = []
    for row in ICE40_MEASUREMENTS:
        clock = row.clock_mhz * 1e6 if row.clock not in ("none", "halted") else 0.0
        reference = {"hfosc": "hfosc", "pll": "hfosc"}.get(row.clock, "external")
        lut_mult = 1 if row.multiply == "lut" else 0
        lcs = row.lcs - 180 if lut_mult else row.lcs     # the LUT multiply figure holds its LCs
        estimate = ice40_power(clock, lcs=lcs, multipliers=row.dsp, lut_multipliers=lut_mult,
                               pll=row.clock == "pll", reference=reference,
                               logic_activity=(counter, counter),
                               data_activity=(ACTIVITY["data"][0],) * 2)
        if row.clock in ("none", "halted", "lfosc"):
            estimate.components["reference"] = (0.0, 0.0)
        lo, hi = estimate.core
        model = (lo + hi) / 2
        results.append({"description": row.description, "measured_w": row.core_w,
                        "model_w": model, "error": model / row.core_w - 1.0})
    return results


def marlann_check(lcs=None):
    """The model against MARLANN's measured core power (never fitted to it).

    MARLANN: 8 SB_MAC16 (16 products per cycle) at about 80 % utilization, 4 SPRAMs
    read every compute cycle, a 2-EBR command buffer, LCs unknown (assumed range).

    Returns
    -------
    list of dict
        Per measured run: ``name``, ``measured_w``, ``low_w``, ``nominal_w``, ``high_w``,
        ``within`` (measured inside [low, high]), ``nominal_error`` (relative).
    """
    res = MARLANN["resources"]
    lcs = lcs or res["lcs"]
    results = []
    for run in MARLANN["runs"]:
        estimate = ice40_power(run["clock_mhz"] * 1e6, lcs=lcs, multipliers=res["multipliers"],
                               dsp_utilization=MARLANN["mac_utilization"],
                               spram_active=res["spram"] if run["running"] else 0,
                               ebr_active=0, memory_rate=MARLANN["mac_utilization"],
                               duty=1.0 if run["running"] else 0.0, pll=run["pll"],
                               reference="external")
        lo, hi = estimate.core
        nominal = (lo + hi) / 2
        measured = run["core_w"]
        results.append({"name": run["name"], "measured_w": measured, "low_w": lo,
                        "nominal_w": nominal, "high_w": hi, "within": lo <= measured <= hi,
                        "nominal_error": nominal / measured - 1.0})
    return results
