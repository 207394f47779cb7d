"""Read what yosys and nextpnr say about a build: utilization, Fmax, errors.

nextpnr writes a JSON report (``--report``) with ``utilization`` (per cell
type, ``used``/``available``) and ``fmax`` (per clock net, ``achieved`` and
``constraint`` in MHz) after routing. When a design does not fit, nextpnr stops
before writing it; the log (``--log``) then still holds the "Device
utilisation" table printed after packing, where the overflowing type shows
more used than available, and an ``ERROR:`` line.
"""

import re

__all__ = ["parse_utilization", "parse_errors", "parse_log_fmax", "overflows",
           "parse_yosys_cells", "select_main_clock"]

_UTILIZATION = re.compile(r"^Info:\s+([A-Za-z0-9_]+):\s+(\d+)/\s*(\d+)\s+\d+%\s*$")
_ERROR = re.compile(r"^ERROR:\s*(.*\S)\s*$")
_FMAX = re.compile(r"^Info: Max frequency for clock\s+'([^']+)':\s+([0-9.]+) MHz"
                   r"\s+\((PASS|FAIL) at ([0-9.]+) MHz\)")
_CELL_COUNT = re.compile(r"^\s+(\d+)\s+([A-Za-z0-9_$]+)\s*$")


def parse_utilization(log_text):
    """``{cell_type: {"used": n, "available": m}}`` from the last utilisation table of a nextpnr log."""
    tables, current = [], None
    for line in log_text.splitlines():
        if "Device utilisation" in line:
            current = {}
            tables.append(current)
            continue
        if current is not None:
            match = _UTILIZATION.match(line)
            if match:
                current[match[1]] = {"used": int(match[2]), "available": int(match[3])}
            elif current:
                current = None
    return tables[-1] if tables else {}


def overflows(utilization):
    """Cell types used beyond what the device has: ``[(type, used, available)]``."""
    return [(name, value["used"], value["available"]) for name, value in utilization.items()
            if value["used"] > value["available"]]


def parse_errors(log_text):
    """The ``ERROR:`` messages of a yosys or nextpnr log, in order."""
    return [match[1] for line in log_text.splitlines() if (match := _ERROR.match(line))]


def parse_log_fmax(log_text):
    """``{clock: {"achieved": MHz, "constraint": MHz}}`` from the last timing summary of a nextpnr log.

    nextpnr prints an estimate after placement and the real figure after
    routing; the later lines win.
    """
    fmax = {}
    for line in log_text.splitlines():
        match = _FMAX.match(line)
        if match:
            fmax[match[1]] = {"achieved": float(match[2]), "constraint": float(match[4])}
    return fmax


def parse_yosys_cells(log_text):
    """Cell counts ``{type: n}`` of the last statistics block of a yosys log."""
    blocks, current = [], None
    for line in log_text.splitlines():
        if re.match(r"^\s+\d+\s+cells\s*$", line):
            current = {}
            blocks.append(current)
            continue
        if current is not None:
            match = _CELL_COUNT.match(line)
            if match and match[2] != "submodules":
                current[match[2]] = current.get(match[2], 0) + int(match[1])
            elif not match:
                current = None
    return blocks[-1] if blocks else {}


def select_main_clock(fmax, constraint_mhz):
    """The ``(name, entry)`` of the clock constrained at ``constraint_mhz`` (the core clock).

    With several candidates, the slowest; with no match, the slowest clock.
    """
    if not fmax:
        return None, None
    matching = {name: entry for name, entry in fmax.items()
                if abs(entry.get("constraint", 0) - constraint_mhz) <= 0.01 * constraint_mhz}
    pool = matching or fmax
    name = min(pool, key=lambda key: pool[key]["achieved"])
    return name, pool[name]
