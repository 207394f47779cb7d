"""Every register that misses the clock in a routed build, from nextpnr's SDF.

nextpnr reports one critical path per clock. To see all the endpoints over the period,
build with ``--nextpnr-opt=--sdf=top.sdf`` (``fpganet synth``) and run
``python -m fpganet.boards.slack BUILD_DIR``. It is a static timing analysis over the
delays nextpnr wrote (its own, the maximum of each triple): the cells' paths, the
interconnect and the setup checks. Start points are clock-to-output paths; endpoints are
the inputs of clocked cells. One clock, no skew (the SDF has none), as nextpnr's own
report for a single-clock design: the worst arrival equals its critical path.

The endpoints over the period are grouped by the register (or memory, multiplier) the path
starts at and the one it ends at, named as in the Amaranth design: cell names less the
suffixes Yosys and nextpnr add (``_TRELLIS_FF_Q_3``, ``_LUT4_Z``, ``$...``).
"""

import argparse
import collections
import json
import re
import sys
from pathlib import Path

from fpganet.errors import FpganetError

__all__ = ["Timing", "read_sdf", "register_name", "main"]

_CELL_SPLIT = re.compile(r"^\s*\(CELL\s*$", re.M)
_CELLTYPE = re.compile(r'\(CELLTYPE "([^"]*)"\)')
_INSTANCE = re.compile(r"\(INSTANCE ([^)]*)\)")
_TRIPLE = r"\(\s*[-\d.]*:[-\d.]*:([-\d.]+)\s*\)"
_INTERCONNECT = re.compile(r"\(INTERCONNECT (\S+) (\S+) " + _TRIPLE)
_IOPATH = re.compile(r"\(IOPATH (\S+) (\S+) " + _TRIPLE)
_SETUP = re.compile(r"\(SETUPHOLD \((?:posedge|negedge) (\S+)\) \(posedge (\S+)\) " + _TRIPLE)
_SUFFIX = re.compile(r"_(TRELLIS_FF|TRELLIS_COMB|LUT4|PFUMX|L6MUX21|CCU2C|SB_DFF|SB_LUT4|SB_CARRY|"
                     r"MULT18X18D).*$|\$.*$")
#: Cells whose clock-to-output paths start nothing here (clock buffers, I/O, PLLs).
_NOT_REGISTERS = {"DCCA", "TRELLIS_IO", "EHXPLLL", "SB_IO", "SB_GB", "SB_PLL40_PAD",
                  "SB_PLL40_CORE", "top"}


def _name(text):
    return text.replace("\\", "")


class Timing:
    """The arrival time of every pin of an SDF's design, in picoseconds.

    ``endpoints``: ``(arrival + setup, "cell/pin")`` of every clocked cell's data input
    reached from a register, worst first. :meth:`path` lists the pins from the start point.
    """

    def __init__(self, cells, iopaths, setups, clocks, interconnect):
        comb_inputs = {key for key in iopaths if key not in clocks}
        arrival, previous = {}, {}
        for (cell, pin), outputs in iopaths.items():
            if (cell, pin) in clocks and cells[cell] not in _NOT_REGISTERS:
                for out, delay in outputs:
                    key = f"{cell}/{out}"
                    if delay > arrival.get(key, -1):
                        arrival[key], previous[key] = delay, f"{cell}/{pin}"
        edges = collections.defaultdict(list)
        waiting = collections.Counter()
        for source, sinks in interconnect.items():
            for sink, delay in sinks:
                edges[source].append((sink, delay))
                waiting[sink] += 1
        for (cell, pin), outputs in iopaths.items():
            if (cell, pin) in comb_inputs:
                for out, delay in outputs:
                    edges[f"{cell}/{pin}"].append((f"{cell}/{out}", delay))
                    waiting[f"{cell}/{out}"] += 1
        # Kahn's order: a pin's arrival is final once all its fan-in is.
        ready = collections.deque(n for n in set(edges) | set(waiting) if not waiting[n])
        ordered = 0
        while ready:
            node = ready.popleft()
            ordered += 1
            here = arrival.get(node)
            for sink, delay in edges.get(node, ()):
                if here is not None and here + delay > arrival.get(sink, -1):
                    arrival[sink], previous[sink] = here + delay, node
                waiting[sink] -= 1
                if not waiting[sink]:
                    ready.append(sink)
        #: Pins on combinational loops (not timed).
        self.looped = len(set(edges) | set(waiting)) - ordered
        self.arrival, self._previous, self._clocks = arrival, previous, clocks
        self.endpoints = sorted(
            ((arrival[f"{cell}/{pin}"] + setups.get((cell, pin), 0), f"{cell}/{pin}")
             for cell, pin in {tuple(s.rsplit("/", 1)) for sinks in interconnect.values()
                               for s, _ in sinks}
             if cells.get(cell) not in _NOT_REGISTERS and (cell, pin) not in comb_inputs
             and (cell, pin) not in clocks and f"{cell}/{pin}" in arrival),
            reverse=True)

    def path(self, endpoint):
        """The pins from the start point's clock pin to ``endpoint``."""
        pins = [endpoint]
        while pins[-1] in self._previous:
            pins.append(self._previous[pins[-1]])
        return pins[::-1]


def read_sdf(path):
    """A :class:`Timing` of the SDF file at ``path`` (nextpnr's ``--sdf``)."""
    text = Path(path).read_text()
    cells, iopaths, setups, clocks = {}, collections.defaultdict(list), {}, set()
    interconnect = collections.defaultdict(list)
    blocks = _CELL_SPLIT.split(text)[1:]
    if not blocks:
        raise FpganetError(f"{path} holds no SDF cells")
    for block in blocks:
        celltype, instance = _CELLTYPE.search(block), _INSTANCE.search(block)
        if celltype is None or instance is None:
            raise FpganetError(f"{path}: an SDF cell without CELLTYPE or INSTANCE")
        cell = _name(instance.group(1).strip())
        cells[cell] = celltype.group(1)
        for source, sink, delay in _INTERCONNECT.findall(block):
            interconnect[_name(source)].append((_name(sink), float(delay)))
        for source, sink, delay in _IOPATH.findall(block):
            iopaths[(cell, source)].append((sink, float(delay)))
        for pin, clock, setup in _SETUP.findall(block):
            setups[(cell, pin)] = max(setups.get((cell, pin), 0.0), float(setup))
            clocks.add((cell, clock))
    # A clock pin without a setup check of its own (a register whose data input is constant).
    clocks |= {key for key in iopaths if re.fullmatch(r"[RW]?CLK[A-Z0-9]*", key[1])}
    timing = Timing(cells, iopaths, setups, clocks, interconnect)
    if not timing.endpoints:
        raise FpganetError(f"{path}: no path from a register to a register to time")
    return timing


def register_name(pin):
    """The design's name of the register (memory, multiplier) a pin belongs to."""
    cell = pin.rsplit("/", 1)[0]
    name = _SUFFIX.sub("", cell)
    return cell if not name or name.endswith(".") else name


def report(timing, period_ps, top=20):
    """The summary as lines of text."""
    late = [(t, e) for t, e in timing.endpoints if t > period_ps]
    worst = timing.endpoints[0][0]
    lines = [f"{len(timing.endpoints):,} endpoints; the worst arrives at {worst / 1000:.2f} ns "
             f"({1e6 / worst:.1f} MHz); {len(late):,} over the {period_ps / 1000:.2f} ns period"
             + (f"; {timing.looped} pins on combinational loops not timed" if timing.looped else "")]
    groups = collections.Counter()
    worst_of = {}
    for arrival, endpoint in late:
        path = timing.path(endpoint)
        key = (register_name(path[0]), register_name(endpoint))
        groups[key] += 1
        worst_of.setdefault(key, (arrival, path))
    if groups:
        lines.append("")
        lines.append("endpoints | worst ns | from | to")
        for (source, sink), count in groups.most_common(top):
            lines.append(f"{count:9,} | {worst_of[(source, sink)][0] / 1000:8.2f} | {source} | {sink}")
    return lines, groups, worst_of


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fpganet.boards.slack",
        description="every endpoint over the clock period in a routed build, from nextpnr's SDF")
    parser.add_argument("build", metavar="BUILD_DIR_OR_SDF",
                        help="a build folder (its top.sdf and report.json) or an SDF file")
    parser.add_argument("--clock-mhz", type=float, metavar="F",
                        help="the period to check (default: the build's target clock)")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="groups shown")
    parser.add_argument("--paths", action="store_true", help="the worst path of each group")

    def one_line(message):
        print(f"slack: error: {message}", file=sys.stderr)
        sys.exit(2)

    parser.error = one_line
    args = parser.parse_args(argv)
    try:
        build = Path(args.build)
        sdf = build / "top.sdf" if build.is_dir() else build
        if not sdf.is_file():
            raise FpganetError(f"no SDF at {sdf}: build with --nextpnr-opt=--sdf=top.sdf")
        mhz = args.clock_mhz
        if mhz is None:
            report_json = sdf.parent / "report.json"
            if not report_json.is_file():
                raise FpganetError(f"no report.json beside {sdf}: give --clock-mhz")
            try:
                mhz = float(json.loads(report_json.read_text())["clock"]["target_mhz"])
            except (ValueError, KeyError, TypeError) as error:
                raise FpganetError(f"{report_json} is not an fpganet build report "
                                   f"({type(error).__name__}: {error}): give --clock-mhz")
        if not mhz > 0:
            raise FpganetError(f"--clock-mhz must be positive, not {mhz}")
        timing = read_sdf(sdf)
        lines, groups, worst_of = report(timing, 1e6 / mhz, args.top)
    except (FpganetError, OSError, ValueError) as error:
        print(f"slack: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    if args.paths:
        for key, _ in groups.most_common(args.top):
            arrival, path = worst_of[key]
            print(f"\n{arrival / 1000:.2f} ns, {key[0]} -> {key[1]}")
            for pin in path:
                print(f"  {timing.arrival.get(pin, 0) / 1000:6.2f}  {pin}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
