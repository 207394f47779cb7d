"""Each board's default build: resources, Fmax and build time, as results rows.

Reads the ``report.json`` that ``fpganet synth --board BOARD -o DIR/BOARD`` writes (it runs
the build first unless ``--reports`` points at finished ones) and turns its routed figures
into rows of ``benchmarks/results/boards.json``, replacing the rows of the same key there
and keeping the others. ``--requant-mode tflite`` builds (or reads) the default
configuration in that requantization mode instead: configuration ``tflite requantization``;
``--packed-weights`` builds it with ``CONV packed`` (``packed_weights``): configuration
``packed weights``. ``--variant NAME`` builds a board's variant (``fpganet synth --variant``)
into ``DIR/BOARD-NAME``: configuration ``NAME``.

Usage::

    .venv/bin/python benchmarks/boards.py                       # builds both boards (~30 min)
    .venv/bin/python benchmarks/boards.py --reports build/synth # rows of finished builds
    .venv/bin/python benchmarks/boards.py --boards ulx3s --requant-mode tflite \
        --reports build/synth-tflite                            # the ULX3S in the tflite mode
    .venv/bin/python benchmarks/boards.py --packed-weights      # both, with CONV packed
    .venv/bin/python benchmarks/boards.py --boards icebreaker --variant spram-activations
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from fpganet.boards.build import BOARDS as BOARD_REGISTRY
from fpganet.boards.build import build_name
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.isa import REQUANT_MODES
from fpganet.results import check_rows, make_row, write_rows

ROOT = Path(__file__).resolve().parent.parent
BOARDS = ("icebreaker", "ulx3s")

#: report resource name -> (metric, whether its 'available' is a metric too).
RESOURCES = {"LC": "luts", "LUT4": "luts", "FF": "ffs", "DSP": "dsps", "MULT18": "dsps",
             "EBR": "brams", "SPRAM": "sprams"}


def board_rows(board, report, requant_mode=None, packed_weights=False, variant=None):
    """The rows of one board's ``report.json`` (parsed), a build of its default configuration
    (in ``requant_mode`` if given and not the default's: its configuration is then named by
    the mode; with ``packed_weights``, configuration ``packed weights``) or of its ``variant``
    (configuration ``variant``)."""
    command = f"fpganet synth --board {board}"
    configuration = "default"
    base = BOARD_REGISTRY[board].configuration(variant)
    if variant:
        built = AcceleratorConfig.from_dict(report["config"])
        if built.replace(clock_hz=base.clock_hz) != base:     # at another clock, said below
            raise ValueError(f"{board}: the report is not of a build of the variant {variant}")
        command += f" --variant {variant}"
        configuration = variant
        packed_weights = base.packed_weights
    built_packed = bool(report["config"].get("packed_weights"))
    if built_packed != packed_weights:
        raise ValueError(f"{board}: the report is of a build {'with' if built_packed else 'without'} "
                         f"packed_weights")
    default_mode = BOARD_REGISTRY[board].default_config.requant_mode
    built_mode = report["config"]["requant_mode"]
    if built_mode != (requant_mode or default_mode):
        raise ValueError(f"{board}: the report is of a {built_mode}-mode build, not "
                         f"{requant_mode or default_mode}")
    if built_mode != default_mode:
        command += f" --requant-mode {built_mode}"
        configuration = f"{built_mode} requantization"
    if packed_weights and not variant:
        command += " --packed-weights yes"
        configuration = "packed weights" if configuration == "default" else f"{configuration}, packed weights"
    target_mhz = report["clock"]["target_mhz"]
    if abs(target_mhz - base.clock_hz / 1e6) > 1e-6:
        command += f" --clock-mhz {target_mhz:g}"
    if report.get("seed") is not None and report["seed"] != BOARD_REGISTRY[board].seed:
        command += f" --seed {report['seed']}"       # a build of another seed than the board's

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
                        help="read DIR/BOARD/report.json (with --variant DIR/BOARD-VARIANT/...) "
                             "instead of building")
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/boards.json"))
    parser.add_argument("--requant-mode", choices=REQUANT_MODES,
                        help="build the default configuration in this requantization mode "
                             "(default: the board's)")
    parser.add_argument("--packed-weights", action="store_true",
                        help="build the default configuration with packed_weights (CONV packed)")
    parser.add_argument("--variant", metavar="NAME",
                        help="build the boards' configuration variant NAME (fpganet synth --variant)")
    args = parser.parse_args(argv)
    if args.variant and (args.packed_weights or args.requant_mode):
        parser.error("--variant builds the variant as its board file names it: no "
                     "--packed-weights or --requant-mode with it")
    boards = args.boards.split(",")
    if set(boards) - set(BOARDS):
        parser.error(f"--boards: unknown board {sorted(set(boards) - set(BOARDS))[0]!r} "
                     f"(known: {', '.join(BOARDS)})")
    mode_flags = ["--requant-mode", args.requant_mode] if args.requant_mode else []
    mode_flags += ["--packed-weights", "yes"] if args.packed_weights else []
    mode_flags += ["--variant", args.variant] if args.variant else []
    suffix = "".join(f"-{part}" for part in (args.requant_mode, "packed" * args.packed_weights) if part)
    rows = []
    try:
        for board in boards:
            folder = Path(args.reports or ROOT / f"build/synth{suffix}") / build_name(board,
                                                                                   args.variant)
            if not args.reports and subprocess.run(
                    [sys.executable, "-m", "fpganet", "synth", "--board", board, *mode_flags,
                     "-o", str(folder)], cwd=ROOT).returncode:
                return 2                        # fpganet synth has said why, in one line
            rows += board_rows(board, json.loads((folder / "report.json").read_text()),
                               args.requant_mode, args.packed_weights, args.variant)
        new_keys = {row.key for row in rows}
        output = Path(args.output)
        kept = [row for row in (check_rows(json.loads(output.read_text()), str(output))
                                if output.exists() else [])
                if row.key not in new_keys]
        write_rows(output, kept + rows)
    except (FpganetError, OSError, ValueError, KeyError) as error:
        print(f"{parser.prog}: error: {error!s} (a report.json of `fpganet synth`?)",
              file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
