"""PLL settings for the board clocks: iCE40 SB_PLL40 and ECP5 EHXPLLL.

The searches are those of the open tools that ship with the toolchain
(``icepll`` from IceStorm and ``ecppll`` from Project Trellis, both installed
as ``yowasp-icepll`` / ``yowasp-ecppll``); ``tests/test_boards_pll.py`` checks
that they agree. The chosen output frequency is the closest the PLL can make,
which is what the design is constrained to and what the report states.
"""

import math
from dataclasses import dataclass

from fpganet.errors import FpganetError

__all__ = ["Ice40PLLSettings", "ECP5PLLSettings", "ice40_pll", "ecp5_pll", "PLLError"]


class PLLError(FpganetError, ValueError):
    """No PLL setting reaches the requested clock (the message gives the allowed range)."""


@dataclass(frozen=True)
class Ice40PLLSettings:
    """SB_PLL40_* parameters in SIMPLE feedback mode.

    ``f_out = f_in * (divf + 1) / ((divr + 1) * 2 ** divq)``.
    """
    f_in: float
    f_out: float
    divr: int
    divf: int
    divq: int
    filter_range: int

    @property
    def f_pfd(self):
        return self.f_in / (self.divr + 1)

    @property
    def f_vco(self):
        return self.f_pfd * (self.divf + 1)


def ice40_pll(f_in, f_out):
    """The SB_PLL40 setting closest to ``f_out`` (Hz) from ``f_in`` (Hz), as ``icepll`` finds it.

    Limits (iCE40 sysCLOCK PLL design guide, TN1251, and icepll): input
    10-133 MHz, PFD 10-133 MHz, VCO 533-1066 MHz, output 16-275 MHz.
    """
    fin, fout = f_in / 1e6, f_out / 1e6
    if not 10 <= fin <= 133:
        raise PLLError(f"iCE40 PLL input {fin:.3f} MHz is outside 10-133 MHz")
    if not 16 <= fout <= 275:
        raise PLLError(f"iCE40 PLL output {fout:.3f} MHz is outside 16-275 MHz")
    best = None
    for divr in range(16):
        f_pfd = fin / (divr + 1)
        if not 10 <= f_pfd <= 133:
            continue
        for divf in range(128):
            f_vco = f_pfd * (divf + 1)
            if not 533 <= f_vco <= 1066:
                continue
            for divq in range(1, 7):
                achieved = f_vco / 2 ** divq
                if best is None or abs(achieved - fout) < abs(best[0] - fout):
                    best = (achieved, divr, divf, divq)
    achieved, divr, divf, divq = best
    f_pfd = fin / (divr + 1)
    filter_range = (1 if f_pfd < 17 else 2 if f_pfd < 26 else 3 if f_pfd < 44 else
                    4 if f_pfd < 66 else 5 if f_pfd < 101 else 6)
    return Ice40PLLSettings(f_in=f_in, f_out=achieved * 1e6, divr=divr, divf=divf, divq=divq,
                            filter_range=filter_range)


@dataclass(frozen=True)
class ECP5PLLSettings:
    """EHXPLLL parameters with CLKOP fed back (``FEEDBK_PATH = "CLKOP"``).

    ``f_out = f_in * clkfb_div / clki_div``; ``f_vco = f_out * clkop_div``.
    """
    f_in: float
    f_out: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def f_vco(self):
        return self.f_out * self.clkop_div

    @property
    def clkop_cphase(self):
        # Primary output shifted by 180 degrees of the VCO count, as ecppll writes it.
        return self.clkop_div // 2


def ecp5_pll(f_in, f_out):
    """The EHXPLLL setting closest to ``f_out`` (Hz) from ``f_in`` (Hz), as ``ecppll`` finds it.

    Limits (ecppll, from the ECP5 data sheet DS1044): PFD 3.125-400 MHz, VCO
    400-800 MHz, output 10-400 MHz; ties go to the VCO nearest 600 MHz.
    """
    fin, fout = f_in / 1e6, f_out / 1e6
    if not 10 <= fout <= 400:
        raise PLLError(f"ECP5 PLL output {fout:.3f} MHz is outside 10-400 MHz")
    best = None
    for clki_div in range(1, 129):
        f_pfd = fin / clki_div
        if not 3.125 <= f_pfd <= 400:
            continue
        for clkfb_div in range(1, 81):
            f_fb = f_pfd * clkfb_div
            for clkop_div in range(max(1, math.ceil(400 / f_fb)), min(128, int(800 / f_fb)) + 1):
                f_vco = f_fb * clkop_div
                if not 400 <= f_vco <= 800:
                    continue
                achieved = f_vco / clkop_div
                error = abs(achieved - fout)
                if (best is None or error < best[0] - 1e-9 or
                        (abs(error - best[0]) <= 1e-9 and abs(f_vco - 600) < abs(best[1] - 600))):
                    best = (error, f_vco, achieved, clki_div, clkfb_div, clkop_div)
    if best is None:
        raise PLLError(f"no ECP5 PLL setting makes {fout:.3f} MHz from {fin:.3f} MHz")
    _, _, achieved, clki_div, clkfb_div, clkop_div = best
    return ECP5PLLSettings(f_in=f_in, f_out=achieved * 1e6, clki_div=clki_div,
                           clkfb_div=clkfb_div, clkop_div=clkop_div)
