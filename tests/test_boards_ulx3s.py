"""The ULX3S (ECP5-85F) build of the accelerator (8x8 pair array, host link): not run by default.

It takes several minutes on a 2-core machine (README.md has the measured time). Run it with ``FPGANET_ECP5_BUILD=1 pytest tests/test_boards_ulx3s.py``
(or ``python -m fpganet.boards.build --board ulx3s``).
"""

import json
import os

import pytest

from fpganet.boards import build as board_build

pytestmark = pytest.mark.skipif(os.environ.get("FPGANET_ECP5_BUILD") != "1",
                                reason="long ECP5 build: set FPGANET_ECP5_BUILD=1 to run it")


def test_ulx3s_accelerator_build(tmp_path):
    status = board_build.main(["--board", "ulx3s", "-o", str(tmp_path)])
    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["device"] == "LFE5U-85F"
    assert report["core"] == "fpganet.boards.ulx3s.accelerator_core"
    assert report["macs_per_cycle"] == 128
    # Two MULT18 per PE (pair products), the rest in the two requantizer lanes.
    assert 128 < report["resources"]["MULT18"]["used"] <= 156
    assert (tmp_path / "top.bit").stat().st_size > 100_000
    assert report["fmax_mhz"] > 50
