"""Command-line entry points: ``fpganet estimate OUT/ --board B [--json]`` and
``fpganet report OUT/ -o DIR/``.

Each comes as ``configure_*(parser)`` + ``run_*(args)`` for the ``fpganet`` command
registry in :mod:`fpganet.cli`; ``*_main(argv)`` runs one alone. Either way
:mod:`fpganet.command_line` prints the errors.
"""

import argparse
import sys
from pathlib import Path

from ..argtypes import positive_float, positive_int
from ..boards.build import BOARDS as BOARD_REGISTRY
from ..codegen.binary_images import is_binary_compiled, read_binary_images
from ..codegen.images import NoProgramError, read_images
from ..command_line import run_subcommand
from ..compiler import load_compiled
from ..errors import FpganetError
from ..files import check_output_directory
from .activity import ACTIVITY_CHOICES
from .gpu import DEFAULT_GPUS
from .throughput import BOARDS, HostLink
from .workload import CYCLE_MODELS

__all__ = ["configure_estimate_parser", "run_estimate", "estimate_main",
           "configure_report_parser", "run_report", "report_main"]

PROG = "fpganet"


def _activity(text):
    if text in ACTIVITY_CHOICES:
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is neither a number nor one of "
                                         f"{', '.join(ACTIVITY_CHOICES)}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"an activity factor lies in (0, 1], not {text}")
    return value


def _common_arguments(parser):
    parser.add_argument("compiled", metavar="OUT", help="directory written by fpganet compile")
    parser.add_argument("--board", choices=sorted(BOARDS),
                        help="target board (default: the board OUT was compiled for, else "
                             "icebreaker); one that contradicts OUT's is refused")
    parser.add_argument("--report", "--board-report", dest="board_report", metavar="REPORT.json",
                        help="boards build report (routed Fmax, resources); without it the clock is "
                             "the configuration's clock_hz and resources are estimated")
    parser.add_argument("--clock-mhz", type=positive_float, metavar="MHZ",
                        help="accelerator clock (overrides the report's Fmax)")
    parser.add_argument("--baud", type=positive_float, metavar="BAUD",
                        help="host UART baud rate (default 3,000,000, 8N1)")
    parser.add_argument("--link", choices=("uart", "spi"), default="uart",
                        help="the host link: the UART (default), or SPI at 30 MHz on the "
                             "iCEBreaker's FTDI MPSSE channel (fpganet synth --link spi)")
    parser.add_argument("--cycles", type=positive_int, metavar="N",
                        help="cycles per image measured elsewhere (RTL simulation, the board)")
    parser.add_argument("--cycles-model", default="ideal", choices=CYCLE_MODELS,
                        help="fallback when fpganet.perf cannot time the network: ideal = "
                             "MACs/(rows x cols), tiled = engine tiles counted (default ideal)")
    parser.add_argument("--no-simulate", dest="simulate", action="store_false",
                        help="do not time the back end's program with fpganet.perf: use the "
                             "--cycles-model fallback")
    parser.add_argument("--activity", type=_activity, default="auto", metavar="AF|rtl|auto|default",
                        help="switching activity for the FPGA power model: rtl = measure it from "
                             "toggle counts of the program on the accelerator's Verilog (an "
                             "engine's: one vector on its device's) "
                             "(Verilator; about a minute the first time, then stored); auto = "
                             "a stored rtl measurement of this network if there is one, else the "
                             "default (the default); default = Lattice's stated 15-25 %%; a "
                             "number = a logic activity factor measured elsewhere")
    parser.add_argument("--asic-clock-mhz", type=positive_float, default=500.0, metavar="MHZ",
                        help="assumed ASIC clock (default 500)")
    parser.add_argument("--gpu", action="append", metavar="KEY",
                        help=f"GPU to compare (repeatable; default: {', '.join(DEFAULT_GPUS)})")
    parser.add_argument("--batch", type=positive_int, metavar="N",
                        help="the GPUs' large batch (default per GPU: the smallest of 256-65536 "
                             "that hides the kernel-launch floor)")
    parser.add_argument("--no-measure", dest="measure", action="store_false",
                        help="do not time the network on this machine with onnxruntime")
    parser.add_argument("--measure-time", type=positive_float, default=0.3, metavar="S",
                        help="seconds of timing per model and batch (default 0.3)")
    parser.add_argument("--synth", action=argparse.BooleanOptionalAction, default=False,
                        help="synthesize with yosys for the ASIC's gate count and logic area "
                             "(off by default: the FPGA figures come in seconds without it)")
    parser.add_argument("--design", choices=("array", "accelerator"), default="accelerator",
                        help="with --synth, what the ASIC gate count synthesizes: the whole accelerator "
                             "(default; about 2 minutes of yosys the first time, then found by the "
                             "hash of the gateware sources and the configuration) or the "
                             "systolic array only (seconds)")


def configure_estimate_parser(parser):
    """Arguments of ``fpganet estimate``."""
    _common_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print JSON (every figure with value, unit, source, basis)")


def configure_report_parser(parser):
    """Arguments of ``fpganet report``."""
    _common_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="folder for report.md, estimate.json and the PNG plots")


def _run(args):
    # Imported here, not at the top: the estimator's tables are slow to import (`fpganet --help`).
    from .comparison import estimate

    net = load_compiled(args.compiled)
    args.board = target_board(net, args.board, args.compiled)
    if is_binary_compiled(args.compiled):
        return _binary(args, net)
    _check_requant_mode(net.config.requant_mode, args.board, args.compiled)
    try:
        program_batch = read_images(args.compiled).batch
    except NoProgramError:
        program_batch = 1        # quantized only (--no-program): no program to batch
    link = host_link(args, program_batch)
    try:
        return estimate(net, board=args.board, board_report=args.board_report,
                        clock_hz=args.clock_mhz * 1e6 if args.clock_mhz else None, link=link,
                        cycles=args.cycles, cycles_model=args.cycles_model,
                        simulate=args.simulate, activity=args.activity,
                        measure=args.measure, measure_options={"min_time_s": args.measure_time},
                        synth=args.synth, design=args.design,
                        asic_clock_hz=args.asic_clock_mhz * 1e6,
                        gpus=tuple(args.gpu) if args.gpu else DEFAULT_GPUS, batch=args.batch,
                        cache_dir=Path.home() / ".cache" / "fpganet" / "estimate",
                        progress=_progress, program_batch=program_batch)
    except KeyError as error:
        raise FpganetError(str(error.args[0])) from None


def _binary(args, net):
    """The estimate of a folder compiled with ``--engine binary`` or ``lowbit``
    (:func:`fpganet.estimate.binary.binary_estimate`); the int8 array's own flags refused."""
    from .binary import binary_estimate

    int8_only = {"--cycles": args.cycles is not None, "--no-simulate": not args.simulate,
                 "--cycles-model": args.cycles_model != "ideal",
                 "--synth": args.synth}
    if given := [flag for flag, on in int8_only.items() if on]:
        raise FpganetError(f"{given[0]} is the int8 array's estimate's; '{args.compiled}' was "
                           f"compiled for an engine in logic cells (--engine binary or lowbit)")
    return binary_estimate(net, read_binary_images(args.compiled, net), board=args.board,
                           board_report=args.board_report,
                           clock_hz=args.clock_mhz * 1e6 if args.clock_mhz else None,
                           link=host_link(args, 1),
                           gpus=tuple(args.gpu) if args.gpu else DEFAULT_GPUS, batch=args.batch,
                           measure=args.measure,
                           measure_options={"min_time_s": args.measure_time},
                           activity=args.activity, progress=_progress,
                           cache_dir=Path.home() / ".cache" / "fpganet" / "estimate")


def host_link(args, images_per_start):
    """The :class:`HostLink` the flags name (None: the default UART)."""
    if args.link == "spi":
        if args.baud:
            raise FpganetError("--baud is the UART's: give it or --link spi, not both")
        if "spi" not in BOARD_REGISTRY[args.board].links:
            raise FpganetError(f"the {args.board} has no SPI link to its host")
        return HostLink.spi(images_per_start=images_per_start)
    return HostLink(baud=args.baud) if args.baud else None


def target_board(net, board, compiled):
    """The board to estimate ``net`` (compiled into ``compiled``) on: ``board`` if given, else
    the one it was compiled for, else the first of the iCEBreaker and the ULX3S that builds
    its requantization mode (an int8 TFLite model compiled with no board is in the ``tflite``
    mode, which only the ULX3S builds). A ``board`` other than the one it was compiled for is
    refused: its figures would be of a design that board does not build."""
    if net.board is not None and net.board not in BOARD_REGISTRY:
        raise FpganetError(f"'{compiled}' names a board fpganet does not know: {net.board!r}")
    if board is not None and net.board is not None and board != net.board:
        raise FpganetError(f"'{compiled}' was compiled for the {net.board} (fpganet compile "
                           f"--board {net.board}); --board {board} contradicts it: compile it "
                           f"again with --board {board}")
    if board or net.board:
        return board or net.board
    mode = net.config.requant_mode
    return next((name for name in ("icebreaker", "ulx3s")
                 if mode in BOARD_REGISTRY[name].requant_modes), "icebreaker")


def _check_requant_mode(mode, board, compiled):
    """Refuse to estimate a network on a board whose accelerator cannot build its
    requantization mode (the UP5K and ``tflite``): the figures would be of no design."""
    registry = BOARD_REGISTRY[board]
    if mode not in registry.requant_modes:
        able = [name for name, other in BOARD_REGISTRY.items() if mode in other.requant_modes]
        raise FpganetError(f"'{compiled}' was compiled with --requant-mode {mode}, which the "
                           f"{registry.description} cannot build: estimate it with "
                           f"{' or '.join(f'--board {name}' for name in able)}, or compile it "
                           f"with --requant-mode {registry.requant_modes[0]}")


def _progress(message):
    # On stderr: the table or JSON on stdout stays clean.
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def run_estimate(args):
    """``fpganet estimate``: print the table (or JSON); returns the exit status."""
    result = _run(args)
    print(result.to_json() if args.json else result.table())
    return 0


def run_report(args):
    """``fpganet report``: write report.md, estimate.json and plots; returns the exit status."""
    # Refused before the estimate's minutes of work, and checked again when written.
    inputs = (args.compiled, args.board_report)
    check_output_directory(args.output, inputs, "report folder")
    from .comparison import report

    result = _run(args)
    for path in report(result, args.output, inputs=inputs):
        print(f"wrote {path}")
    return 0


def estimate_main(argv=None):
    """``fpganet estimate OUT/ --board B [--json]`` as a standalone entry point."""
    return run_subcommand("estimate", configure_estimate_parser, run_estimate, argv)


def report_main(argv=None):
    """``fpganet report OUT/ -o DIR/`` as a standalone entry point."""
    return run_subcommand("report", configure_report_parser, run_report, argv)


if __name__ == "__main__":
    sys.exit(estimate_main())
