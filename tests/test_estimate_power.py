"""The FPGA power model against the measurements it was built from, and against MARLANN's."""

import pytest

from fpganet.boards.build import BOARDS
from fpganet.compiler import compile_model
from fpganet.estimate import figures
from fpganet.estimate.activity import Activity
from fpganet.estimate.figures import ECP5_FLIP_FLOP, FF_PER_LUT
from fpganet.estimate.power import (COEFFICIENTS, accelerator_power, canonical_resources,
                                    configured_resources, ecp5_power, ice40_power,
                                    marlann_check, reproduce_ice40_measurements)
from fpganet.estimate.quantity import Quantity
from fpganet.estimate.workload import Workload


def coefficient(name):
    return COEFFICIENTS[name][0]


def test_coefficients_come_to_the_reference_notes_figures():
    # figures.md: core ~104 uW + ~20 uW I/O, clock ~52 uW/MHz, ~14 nW/LC/MHz, ~24 uW/MHz per 8x8
    # multiply in a SB_MAC16, ~36 uW/MHz in LUTs, the PLL rail 0.10-0.14 mA.
    assert coefficient("static_core_w") == pytest.approx(104e-6, rel=0.01)
    assert coefficient("static_io_w") == pytest.approx(20e-6, rel=0.05)
    assert coefficient("clock_w_per_mhz") == pytest.approx(52e-6, rel=0.01)
    assert coefficient("lc_w_per_mhz") == pytest.approx(14e-9, rel=0.05)
    assert coefficient("dsp_w_per_mhz") == pytest.approx(24e-6, rel=0.01)
    assert coefficient("lut_multiply_w_per_mhz") == pytest.approx(36e-6, rel=0.02)
    low, high = COEFFICIENTS["pll_rail_w"][0]
    assert 0.10e-3 * 1.219 <= low <= high <= 0.14e-3 * 1.219


@pytest.mark.parametrize("row", reproduce_ice40_measurements(), ids=lambda r: r["description"])
def test_model_reproduces_each_ice40_measurement(row):
    # Clocked rows within 3 %; the near-static rows (halted clock, 10 kHz) carry 8 uW of
    # configured-logic leakage the model does not have: within 12 %.
    static = any(word in row["description"] for word in ("halted", "LFOSC", "Blank"))
    assert abs(row["error"]) <= (0.12 if static else 0.03), row


def test_blank_design_is_below_the_datasheet_standby_figure():
    blank = figures.ICE40_MEASUREMENTS[0]
    assert blank.core_ua * 1e-6 <= figures.ICE40_STANDBY["current_a"]


def test_marlann_running_power_lies_in_the_model_range():
    """MARLANN (never fitted): 10.58 mW at 12 MHz, 16.99 mW at 20 MHz, running.

    The model brackets both; its midpoint is 20 % low at 12 MHz and 13 % low at 20 MHz
    (docs/guide/estimator.md, "How close the power model gets").
    """
    running = [check for check in marlann_check() if "longrun" in check["name"]]
    assert len(running) == 2
    for check in running:
        assert check["within"], check
        assert -0.25 < check["nominal_error"] < 0.0, check
    by_clock = {check["name"]: check for check in running}
    assert by_clock["longrun demo, 12 MHz"]["nominal_error"] == pytest.approx(-0.20, abs=0.03)
    assert by_clock["longrun demo, 20 MHz (PLL)"]["nominal_error"] == pytest.approx(-0.13, abs=0.03)


def test_marlann_idle_power_is_the_known_gap():
    # Idle (clocked, not computing) the model finds 1.2-1.6 mW against 3.53 mW measured: the
    # clock distribution of a full design is missing (documented). If this changes, update
    # docs/guide/estimator.md.
    (idle,) = [check for check in marlann_check() if check["name"].startswith("idle")]
    assert not idle["within"]
    assert 0.3 < idle["nominal_w"] / idle["measured_w"] < 0.6


def test_power_grows_with_clock_activity_and_duty():
    def total(**kwargs):
        base = dict(lcs=2000, multipliers=16, spram_active=1, ebr_active=8, duty=0.5)
        base.update(kwargs)
        estimate = ice40_power(base.pop("clock", 40e6), **base)
        return estimate.low, estimate.high

    low, high = total()
    assert 0 < low < high
    assert total(clock=20e6)[1] < high < total(clock=48e6)[1]
    assert total(duty=0.1)[1] < high < total(duty=1.0)[1]
    assert total(logic_activity=(0.1, 0.1))[1] < high < total(logic_activity=(0.4, 0.4))[1]
    # The PLL costs its fixed power on top.
    assert ice40_power(40e6, pll=True).low > ice40_power(40e6).high


def test_ecp5_static_from_the_data_sheet_and_dynamic_placeholders_are_marked():
    estimate = ecp5_power(50e6, lcs=3000, multipliers=16, ebr_active=9, duty=1.0)
    assert estimate.unverified
    assert estimate.total().unverified
    assert "PLACEHOLDER" in estimate.notes[0] and "DS1044" in estimate.notes[0]
    assert "Table 3.8" in estimate.notes[1]
    # LFE5U-85F typical standby: ICC 212 mA x 1.1 V + ICCAUX 26 mA x 2.5 V; 7 banks x 0.5 mA x 3.3 V.
    assert estimate.components["static"] == pytest.approx((0.2982, 0.2982))
    assert estimate.components["static_io"] == pytest.approx((0.01155, 0.01155))
    assert "unverified" in estimate.bases["static"] and "PLACEHOLDER" in estimate.bases["logic"]
    assert 0 < estimate.low < estimate.high


def test_ecp5_flip_flops_and_clock_tree_follow_the_ulx3s_measurement():
    # 83,640 toggling flip-flops: +176.9 mW at 10 MHz, +2,102 mW at 100 MHz (whole board).
    low, high = ECP5_FLIP_FLOP["w_per_mhz"]
    assert 176.9e-3 / (83_640 * 10) == pytest.approx(low, rel=0.01)
    assert 2102e-3 / (83_640 * 100) == pytest.approx(high, rel=0.01)
    estimate = ecp5_power(30e6, lcs=11_059, ffs=8_210, logic_activity=(0.2, 0.3), duty=0.5)
    # High end: every flip-flop's measured figure every cycle; low end: data toggles only.
    assert estimate.components["clock"] == pytest.approx((8_210 * low * 30 * 0.2 * 0.5,
                                                          8_210 * high * 30))
    assert "measured on a ULX3S" in estimate.bases["clock"]
    assert "8,210 flip-flops" in estimate.bases["clock"]
    # Without a flip-flop count, the routed builds' flip-flops per LUT stand in.
    guessed = ecp5_power(30e6, lcs=10_000)
    assert guessed.components["clock"][1] == pytest.approx(10_000 * FF_PER_LUT[1] * high * 30)
    assert canonical_resources({"TRELLIS_COMB": 11_059, "TRELLIS_FF": 8_210})["ff"] == 8_210


def test_nextpnr_resource_names_are_understood():
    assert canonical_resources({"ICESTORM_LC": 3000, "ICESTORM_DSP": 8, "ICESTORM_RAM": 20,
                                "ICESTORM_SPRAM": 2, "SB_IO": 6, "ICESTORM_PLL": 1}) == \
        {"lc": 3000, "ff": 0, "dsp": 8, "ebr": 20, "spram": 2, "pll": 1}
    assert canonical_resources({"TRELLIS_COMB": 4000, "MULT18X18D": 16, "DP16KD": 40,
                                "TRELLIS_FF": 3000})["lc"] == 4000
    assert canonical_resources({"TRELLIS_SLICE": 100})["lc"] == 200


def test_accelerator_power_uses_the_engine_duty():
    workload = Workload.from_network(compile_model())
    cycles = Quantity(workload.tiled_cycles, "cycles", "estimated", "test")
    clock = Quantity(40e6, "Hz", "estimated", "test")

    def at(duty):
        perf = {"duty": Quantity(duty, None, "estimated", "test")}
        return accelerator_power(workload, cycles, clock, perf, "ice40", oscillator_hz=12e6,
                                 **_resources(workload.config))

    idle, busy = at(0.0), at(1.0)
    assert idle.high < busy.low          # the multipliers and RAMs work only while computing
    assert idle.low > 2e-3               # static + PLL + clock tree at 40 MHz
    assert busy.components["dsp"][0] > 0 and idle.components["dsp"] == (0.0, 0.0)


def _lenet_power(activity, duty=1.0):
    workload = Workload.from_network(compile_model())
    cycles = Quantity(workload.tiled_cycles, "cycles", "estimated", "test")
    clock = Quantity(40e6, "Hz", "estimated", "test")
    perf = {"duty": Quantity(duty, None, "estimated", "test")}
    return accelerator_power(workload, cycles, clock, perf, "ice40", oscillator_hz=12e6,
                             activity=activity, **_resources(workload.config))


def _resources(config):
    resources, basis, _ = configured_resources("icebreaker", config)
    return {"resources": resources, "resources_basis": basis}


def test_configured_resources_are_the_pre_checks_counts():
    """Without a routed design the power model takes the counts synth's pre-checks make (the
    iCEBreaker default: 30 EBR, 4 SPRAM, 8 DSP, its routed logic within the margin); a
    configuration the chip cannot hold says which resource it lacks."""
    board = BOARDS["icebreaker"]
    resources, basis, refusal = configured_resources("icebreaker", board.default_config)
    assert (resources["ebr"], resources["spram"], resources["dsp"]) == (30, 4, 8)
    low, high = resources["lc"]
    assert low < board.routed_logic < high and refusal is None and "not a routed" in basis
    big = board.default_config.replace(act_buffer_bytes=16384)
    assert configured_resources("icebreaker", big)[2].startswith("the design needs 46 EBR")
    # A weight buffer the SPRAMs cannot hold: the core is not built, the default's blocks stand in.
    odd = board.default_config.replace(weight_buffer_bytes=8192)
    resources, basis, note = configured_resources("icebreaker", odd)
    assert resources["spram"] == 4 and "cannot be built" in basis and "SPRAM" in note


def test_simulated_activity_scales_both_ends_and_replaces_the_utilization():
    default = _lenet_power(None)
    simulated = Activity(logic=(0.10, 0.12), data=(0.3, 0.3), source="simulated",
                         basis="test", data_includes_utilization=True, origin="test")
    measured = _lenet_power(simulated)
    counter = figures.ACTIVITY["counter_reference"]
    # Logic: both ends scale with the measured AF (duty 1): x AF / AF_counter.
    (d_lo, _), (m_lo, m_hi) = default.components["logic"], measured.components["logic"]
    assert m_lo / d_lo == pytest.approx(0.10 / counter, rel=1e-9)
    assert m_hi / m_lo == pytest.approx(default.resources["counts"]["lc"][1] * 0.12
                                        / (default.resources["counts"]["lc"][0] * 0.10))
    # Multipliers: the operands' measured toggles (0.3 vs the measurement's 0.25), utilization 1.
    dsp = coefficient("dsp_w_per_mhz") * 40 * 16 * 0.3 / figures.ACTIVITY["data"][0]
    assert measured.components["dsp"] == pytest.approx((dsp, dsp))
    assert "simulated" in measured.bases["logic"] and "simulated" in measured.bases["dsp"]
    assert measured.activity is simulated
    # A number given on the command line scales both ends too, with the stated operand range.
    given = _lenet_power(0.2)
    assert given.components["logic"][0] / d_lo == pytest.approx(0.2 / counter)
    assert given.components["dsp"] == default.components["dsp"]
