"""PLL settings for the boards agree with the open tools' own searches (icepll, ecppll)."""

import re
import subprocess

import pytest

from fpganet.boards.build import toolchain_env
from fpganet.boards.pll import PLLError, ecp5_pll, ice40_pll


def run_tool(tool, *args, cwd):
    env = toolchain_env()
    result = subprocess.run([tool, *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("f_out", [40e6, 48e6, 25e6])
def test_ice40_pll_matches_icepll(tmp_path, f_out):
    text = run_tool("yowasp-icepll", "-i", "12", "-o", f"{f_out / 1e6:g}", cwd=tmp_path)
    field = lambda name: int(re.search(rf"^{name}:\s+(\d+)", text, re.M)[1])
    settings = ice40_pll(12e6, f_out)
    assert (settings.divr, settings.divf, settings.divq, settings.filter_range) == \
        (field("DIVR"), field("DIVF"), field("DIVQ"), field("FILTER_RANGE"))
    achieved = float(re.search(r"F_PLLOUT:\s+([0-9.]+) MHz \(achieved\)", text)[1])
    assert settings.f_out / 1e6 == pytest.approx(achieved, abs=1e-3)


@pytest.mark.parametrize("f_out", [100e6, 64e6, 125e6])
def test_ecp5_pll_matches_ecppll(tmp_path, f_out):
    run_tool("yowasp-ecppll", "-i", "25", "-o", f"{f_out / 1e6:g}", "-f", "pll.v", cwd=tmp_path)
    text = (tmp_path / "pll.v").read_text()
    param = lambda name: int(re.search(rf"\.{name}\((\d+)\)", text)[1])
    settings = ecp5_pll(25e6, f_out)
    tool_f_out = 25 * param("CLKFB_DIV") / param("CLKI_DIV")
    assert settings.f_out / 1e6 == pytest.approx(tool_f_out, abs=1e-3)
    assert (settings.clki_div, settings.clkfb_div, settings.clkop_div) == \
        (param("CLKI_DIV"), param("CLKFB_DIV"), param("CLKOP_DIV"))
    assert 400 <= settings.f_vco / 1e6 <= 800


def test_pll_ranges_are_checked():
    with pytest.raises(PLLError, match="16-275 MHz"):
        ice40_pll(12e6, 300e6)
    with pytest.raises(PLLError, match="10-400 MHz"):
        ecp5_pll(25e6, 500e6)
