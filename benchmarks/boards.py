"""Each board's default build: resources, Fmax and build time, as results rows.

Reads the ``report.json`` that ``fpganet synth --board BOARD -o DIR/BOARD`` writes (it runs
the build first unless ``--reports`` points at finished ones) and turns its routed figures
into rows of ``benchmarks/results/boards.json``.

Usage::

    .venv/bin/python benchmarks/boards.py                       # builds both boards (~30 min)
    .venv/bin/python benchmarks/boards.py --reports build/synth # rows of finished builds
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from fpganet.errors import FpganetError
from fpganet.results import make_row, write_rows

ROOT = Path(__file__).resolve().parent.parent
BOARDS = ("icebreaker", "ulx3s")

#: report resource name -> (metric, whether its 'available' is a metric too).
RESOURCES = {"LC": "luts", "LUT4": "luts", "FF": "ffs", "DSP": "dsps", "MULT18": "dsps",
             "EBR": "brams", "SPRAM": "sprams"}


def board_rows(board, report):
    """The rows of one board's ``report.json`` (parsed)."""
    command = f"fpganet synth --board {board}"
    configuration = "default"

    def row(metric, value):
        return make_row("none", board, configuration, metric, value, "routed", command)
    rows = [row("fmax_mhz", report["fmax_mhz"]), row("clock_mhz", report["clock"]["target_mhz"]),
            row("build_s", report["runtime_s"])]
    for name, metric in RESOURCES.items():
        if name in report["resources"]:
            rows.append(row(metric, report["resources"][name]["used"]))
            if metric == "luts":
                rows.append(row("luts_available", report["resources"][name]["available"]))
    if not report["timing_met"]:
        print(f"{board}: timing not met ({report['fmax_mhz']:.1f} MHz)", file=sys.stderr)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--reports", metavar="DIR",
                        help="read DIR/BOARD/report.json instead of building")
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/boards.json"))
    args = parser.parse_args(argv)
    boards = args.boards.split(",")
    if set(boards) - set(BOARDS):
        parser.error(f"--boards: unknown board {sorted(set(boards) - set(BOARDS))[0]!r} "
                     f"(known: {', '.join(BOARDS)})")
    rows = []
    try:
        for board in boards:
            folder = Path(args.reports or ROOT / "build/synth") / board
            if not args.reports and subprocess.run(
                    [sys.executable, "-m", "fpganet", "synth", "--board", board, "-o", str(folder)],
                    cwd=ROOT).returncode:
                return 2                        # fpganet synth has said why, in one line
            rows += board_rows(board, json.loads((folder / "report.json").read_text()))
        write_rows(args.output, rows)
    except (FpganetError, OSError, ValueError, KeyError) as error:
        print(f"{parser.prog}: error: {error!s} (a report.json of `fpganet synth`?)",
              file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
