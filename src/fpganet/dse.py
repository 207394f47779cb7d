"""Design-space exploration on Ray: every point of a parameter space, compiled, timed, estimated.

``fpganet dse [MODEL] --board B --space SPACE.toml -o DIR [--eval EVAL.npz] [--synth --seeds
N]`` reads a ``[space]`` table of lists of configuration parameters and of how the network
is compiled (:data:`COMPILE_KEYS`: the int8 array or an engine in logic cells, the engine's
fold, the weight precision per layer; their product is the space) and optional
``[constraints]``, and runs one Ray task per point: the board's configuration with the
point's values, the network compiled in memory for it (a network that does not fit a buffer,
or a configuration the board cannot hold, is recorded as ``does not fit`` with the reason),
its top-1 accuracy from the
golden model on the evaluation inputs, cycles per image from the performance model
(:func:`fpganet.estimate.workload.simulated_cycles`, equal to the RTL by test; an engine's
from its timing model) and images/s and watts from
:func:`fpganet.estimate.comparison.estimate` (no GPU measurement, no ASIC synthesis, the
stated default switching activity; an engine's watts only from its routed build). With
``--synth`` each point that fits is also built for the board once per seed (one Ray task
each, ``num_cpus=1``), and its estimate uses the best seed's routed Fmax and resources.

Every result is kept in a cache folder, one JSON file per point (and per seed), written
atomically and named by the SHA-256 of what it depends on (:func:`point_key`), so a second
run, or one resumed after the first was killed, computes only what is missing. ``DIR``
gets ``results.csv``, ``results.json`` and Pareto plots, built aside and renamed into place
(:func:`fpganet.files.staged_directory`).
"""

import contextlib
import csv
import dataclasses
import hashlib
import importlib.metadata
import io
import itertools
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import warnings
from pathlib import Path

import numpy as np
from amaranth.hdl import UnusedElaboratable
from tqdm import tqdm

from . import __version__, boards, datasets, hdl
from .argtypes import positive_float, positive_int
from .boards.binary import binary_core
from .boards.build import (BOARDS, BuildError, DoesNotFit, Refused, board_config, build,
                           check_buildable, toolchain_versions)
from .codegen import build_images
from .codegen.binary_images import DEFAULT_FOLD, build_binary_images
from .compiler import ENGINES, compile_model, read_inputs, read_npz
from .config import AcceleratorConfig, ConfigError
from .errors import FpganetError
from .files import (atomic_file, check_output_directory, check_writable_folder, existing_file,
                    file_sha256, staged_directory)
from .isa import REQUANT_MODES
from .quantize.rounding import DEFAULT_WEIGHT_BITS, WEIGHT_BITS, parse_layer_weight_bits

__all__ = ["Space", "load_space", "point_config", "point_compile", "point_key", "run_dse",
           "configure", "run", "INSTALL_HINT", "DEFAULT_CACHE", "COMPILE_KEYS"]

INSTALL_HINT = ("fpganet dse runs on Ray, which is not installed: pip install 'fpganet[dse]' "
                "(or ray==2.60.0)")
DEFAULT_CACHE = Path("~/.cache/fpganet/dse")
#: Points a space may have unless ``--max-points`` raises it: at about a second a point, a
#: thousand keep a run on a few cores under ten minutes (a space of 10^6 would run for days).
MAX_POINTS = 1000
#: Seconds a Ray cluster named by ``--address`` (or ``RAY_ADDRESS``) has to answer before the
#: run is refused (``--timeout`` shortens it): Ray itself retries an address where nothing
#: listens without end.
ADDRESS_TIMEOUT_S = 30.0
#: Memory a board build task declares to Ray: nextpnr on the UP5K stays under 1 GiB, the
#: ECP5-85F under 2 GiB (measured peaks on the project's builds, with headroom).
SYNTH_MEMORY = {"icebreaker": 1 << 30, "ulx3s": 2 << 30}
#: Constraints a space may state, each on the configuration of a point.
CONSTRAINTS = {"max_macs": lambda macs, limit: macs <= limit,
               "min_macs": lambda macs, limit: macs >= limit}
_FIELDS = {field.name: field for field in dataclasses.fields(AcceleratorConfig)}
#: ``[space]`` keys that are not configuration fields but how a point compiles the network:
#: the unit that runs it (``fpganet compile --engine``), the binary or low-bit engine's fold
#: (``--pe``, ``--simd``), and a float model's weight widths (``--weight-bits``,
#: ``--layer-weight-bits``); each with the value a space without it has.
COMPILE_KEYS = {"engine": "int8", "pe": None, "simd": None, "weight_bits": DEFAULT_WEIGHT_BITS,
                "layer_weight_bits": ""}
#: Images of the embedded MNIST evaluation split the embedded LeNet-5's accuracy is measured on
#: when no ``--eval`` is given (``--eval-limit`` changes it).
EMBEDDED_EVAL_IMAGES = 1000


# The space -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Space:
    """A parsed SPACE.toml: ``parameters`` (name -> list of values) and ``constraints``."""

    path: str
    parameters: dict
    constraints: dict

    @property
    def size(self):
        """Points in the space (the product of the lists' lengths), without listing them."""
        return math.prod(len(values) for values in self.parameters.values())

    def points(self):
        """Every combination of the parameters' values, as dicts, in the file's order."""
        names = list(self.parameters)
        return [dict(zip(names, values))
                for values in itertools.product(*(self.parameters[name] for name in names))]


def _check_value(path, key, value):
    """One value of ``[space].key``; a wrong type is refused naming the key."""
    where = f"'{path}': [space] {key}"
    if key == "array":
        if not isinstance(value, str):
            raise FpganetError(f"{where}: {value!r} is not a string of the form ROWSxCOLS")
        try:
            AcceleratorConfig.parse_array(value)
        except ConfigError as error:
            raise FpganetError(f"{where}: {error}") from None
        return value
    if key == "engine":
        if value not in ENGINES:
            raise FpganetError(f"{where}: {value!r} is not one of {', '.join(ENGINES)}")
        return value
    if key == "weight_bits":
        if isinstance(value, bool) or not isinstance(value, int) or value not in WEIGHT_BITS:
            raise FpganetError(f"{where}: {value!r} is not an integer from {WEIGHT_BITS.start} "
                               f"to {WEIGHT_BITS.stop - 1}")
        return value
    if key == "layer_weight_bits":
        if not isinstance(value, str):
            raise FpganetError(f"{where}: {value!r} is not a string NAME=BITS,... (\"\" for "
                               f"none)")
        try:
            if value:
                parse_layer_weight_bits(value)
        except FpganetError as error:
            raise FpganetError(f"{where}: {error}") from None
        return value
    if key == "clock_mhz" or (key in _FIELDS and _FIELDS[key].type in (float, "float")):
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or value <= 0):
            raise FpganetError(f"{where}: {value!r} is not a positive finite number")
        return float(value)
    if key in _FIELDS and _FIELDS[key].type in (bool, "bool"):
        if not isinstance(value, bool):
            raise FpganetError(f"{where}: {value!r} is not true or false")
        return value
    if key == "requant_mode":
        if value not in REQUANT_MODES:
            raise FpganetError(f"{where}: {value!r} is not one of {', '.join(REQUANT_MODES)}")
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FpganetError(f"{where}: {value!r} is not a positive integer")
    return value


def load_space(path):
    """Read and check a SPACE.toml (Python's ``tomllib``); every error is one line naming the key.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Space
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise FpganetError(f"space file '{path}' does not exist") from None
    except IsADirectoryError:
        raise FpganetError(f"space file '{path}' is a directory") from None
    except tomllib.TOMLDecodeError as error:
        raise FpganetError(f"space file '{path}' is not valid TOML: {error}") from None
    except UnicodeDecodeError:
        raise FpganetError(f"space file '{path}' is not UTF-8 text") from None
    unknown = sorted(set(data) - {"space", "constraints"})
    if unknown:
        raise FpganetError(f"'{path}': unknown table or key '{unknown[0]}' (known: [space], "
                           f"[constraints])")
    table = data.get("space")
    if not isinstance(table, dict) or not table:
        raise FpganetError(f"'{path}' has no [space] table of parameter lists "
                           f"(e.g. array = [\"2x8\", \"4x4\"])")
    known = {"array", "clock_mhz", *_FIELDS, *COMPILE_KEYS}
    parameters = {}
    for key, values in table.items():
        if key not in known:
            raise FpganetError(f"'{path}': unknown parameter [space] {key} (known: "
                               f"{', '.join(sorted(known))})")
        if not isinstance(values, list) or not values:
            raise FpganetError(f"'{path}': [space] {key} must be a non-empty list of values")
        checked = [_check_value(path, key, value) for value in values]
        if len(set(checked)) != len(checked):
            raise FpganetError(f"'{path}': [space] {key} lists a value twice")
        parameters[key] = checked
    if "array" in parameters and ("rows" in parameters or "cols" in parameters):
        raise FpganetError(f"'{path}': [space] gives array and rows/cols; give one or the other")
    if "clock_mhz" in parameters and "clock_hz" in parameters:
        raise FpganetError(f"'{path}': [space] gives clock_mhz and clock_hz; give one")
    if ("pe" in parameters or "simd" in parameters) and not set(
            parameters.get("engine", ["int8"])) - {"int8"}:
        raise FpganetError(f"'{path}': [space] pe and simd fold the binary or low-bit engine: "
                           f"give engine = [\"binary\"] (or \"lowbit\") too")
    constraints = data.get("constraints", {})
    if not isinstance(constraints, dict):
        raise FpganetError(f"'{path}': [constraints] must be a table")
    for key, value in constraints.items():
        if key not in CONSTRAINTS:
            raise FpganetError(f"'{path}': unknown constraint [constraints] {key} (known: "
                               f"{', '.join(sorted(CONSTRAINTS))})")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise FpganetError(f"'{path}': [constraints] {key} = {value!r} is not a positive "
                               f"integer")
    return Space(path, parameters, dict(constraints))


def point_compile(point):
    """How a point compiles the network: :data:`COMPILE_KEYS` with the point's values.

    Raises :class:`~fpganet.config.ConfigError` for a fold given to the int8 array.
    """
    options = {key: point.get(key, default) for key, default in COMPILE_KEYS.items()}
    if options["engine"] == "int8":
        if options["pe"] is not None or options["simd"] is not None:
            raise ConfigError("pe and simd fold the binary or low-bit engine, not the int8 array")
    else:
        options["pe"] = options["pe"] or DEFAULT_FOLD[0]
        options["simd"] = options["simd"] or DEFAULT_FOLD[1]
    return options


def _compile(model, calib, config, options):
    """The network of a point (:func:`point_compile`'s ``options``), quantized in memory."""
    engine = (None if options["engine"] == "int8"
              else (options["engine"], options["pe"], options["simd"]))
    return compile_model(model, calib, None, config=config, weight_bits=options["weight_bits"],
                         layer_weight_bits=options["layer_weight_bits"] or None, engine=engine)


def point_config(board, point):
    """The board's configuration with a point's values (:func:`fpganet.boards.build.board_config`);
    :data:`COMPILE_KEYS` are :func:`point_compile`'s.

    Raises :class:`~fpganet.config.ConfigError` for a combination that cannot be built.
    """
    changes = {key: value for key, value in point.items() if key not in COMPILE_KEYS}
    if "clock_mhz" in changes:
        changes["clock_hz"] = changes.pop("clock_mhz") * 1e6
    try:
        return board_config(board, **changes)
    except FpganetError as error:
        raise ConfigError(str(error)) from None


# Cache keys ------------------------------------------------------------------------------------

def _tree_digest(folders):
    """SHA-256 of the Python sources below ``folders``: a result depends on the code that made it."""
    digest = hashlib.sha256()
    for folder in folders:
        folder = Path(folder)
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def tool_versions():
    """What a result depends on besides its inputs: versions and source digests.

    ``estimate``: the fpganet package's sources (compiler, performance model, estimator);
    ``synth``: the gateware and board sources and the toolchain's package versions, so that
    an edit to the estimator does not throw away the board builds.
    """
    package = Path(__file__).resolve().parent
    gateware = [Path(hdl.__file__).resolve().parent, Path(boards.__file__).resolve().parent]
    versions = {"fpganet": __version__, "python": sys.version.split()[0],
                "numpy": np.__version__}
    for name in ("onnx", "onnxruntime"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {"estimate": {**versions, "sources": _tree_digest([package, *gateware])},
            "synth": {"fpganet": __version__, "toolchain": toolchain_versions(),
                      "sources": _tree_digest(gateware),
                      "config_source": hashlib.sha256((package / "config.py").read_bytes())
                      .hexdigest()}}


def point_key(kind, **parts):
    """The cache key of one result: SHA-256 of ``kind`` and ``parts`` as canonical JSON."""
    blob = json.dumps({"kind": kind, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class Cache:
    """One JSON file per result in a folder; each written to a temporary file and renamed."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def get(self, key):
        path = self.folder / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None             # a damaged entry is computed again

    def put(self, key, value):
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.folder / f"{key}.json") as stream:
            stream.write(json.dumps(value, indent=1).encode())
            # On disk before the rename: a run killed just after must find it whole.
            stream.flush()
            os.fsync(stream.fileno())


# The work of one task (runs in a Ray worker) ---------------------------------------------------

def evaluate_point(board, config_dict, model_bytes, calib, report=None, options=None,
                   evaluation=None):
    """Compile, time and estimate one configuration; returns a plain dict (a task's result).

    Parameters
    ----------
    board : str
    config_dict : dict
        :meth:`AcceleratorConfig.to_dict`.
    model_bytes : bytes or None
        The ONNX file's bytes (None: the embedded LeNet-5), so that a worker on another
        machine of a cluster needs no shared file system.
    calib : numpy.ndarray or None
        Calibration inputs (None: the embedded MNIST split).
    report : dict, optional
        A board build's report.json: routed Fmax and resources for the estimate.
    options : dict, optional
        :func:`point_compile`'s (default: the int8 array, 8-bit weights).
    evaluation : tuple, optional
        ``(x, y)``: inputs in the model's layout and their labels; the result's ``top1`` is the
        golden model's accuracy on them (the engines compute the golden model's numbers).
    """
    # Imported here, not at the top: the estimator's tables are slow to import (`fpganet --help`).
    from .backends import run_network
    from .estimate.comparison import estimate

    config = AcceleratorConfig.from_dict(config_dict)
    options = options or point_compile({})
    with tempfile.TemporaryDirectory(prefix="fpganet-dse-") as scratch:
        model = model_in(scratch, model_bytes)
        start = time.monotonic()
        try:
            net = _compile(model, calib, config, options)
        except FpganetError as error:
            return {"status": "refused", "reason": " ".join(str(error).split())}
        top1 = (None if evaluation is None
                else run_network(net, evaluation[0]).accuracy(evaluation[1]))
        report_path = None
        if report is not None:
            report_path = Path(scratch) / "report.json"
            report_path.write_text(json.dumps(report))
        if options["engine"] != "int8":
            return _evaluate_engine(net, board, options, report_path, top1, start)
        try:
            # What the board's build would refuse (its blocks, DSPs), then the network's fit.
            _check_board(board, config)
            build_images(net, n_images=1, config=config)
        except FpganetError as error:
            return {"status": "does not fit", "reason": " ".join(str(error).split()),
                    "top1": top1}
        result = estimate(net, board=board, board_report=report_path, measure=False,
                          synth=False, asic_nodes=(), gpus=(), activity=None)
    return _figures(result.cycles, result.clock, result.fpga_row,
                    (result.fpga_extra_rows or [result.fpga_row])[0], top1, start,
                    watts_source=result.fpga_row["watts"].source, workload=result.workload,
                    macs_per_cycle=config.macs_per_cycle, design=config.name)


def _evaluate_engine(net, board, options, report_path, top1, start):
    """:func:`evaluate_point` on the binary or low-bit engine: the device's timing model, and
    power only from a routed build (the engine's logic has no model before one)."""
    from .estimate.binary import binary_estimate, binary_performance
    from .estimate.throughput import clock_quantity

    try:
        images = build_binary_images(net, options["pe"], options["simd"], options["engine"])
    except FpganetError as error:
        return {"status": "refused", "reason": " ".join(str(error).split())}
    try:
        _check_board(board, net.config, binary_core(images.folded))
    except FpganetError as error:
        return {"status": "does not fit", "reason": " ".join(str(error).split()), "top1": top1}
    design = dict(macs_per_cycle=options["pe"] * options["simd"],
                  design=images.folded.description)
    clock = clock_quantity(net.config)
    workload, cycles, performance = binary_performance(net, images, clock)
    if report_path is not None:
        result = binary_estimate(net, images, board=board, board_report=report_path,
                                 measure=False, gpus=(), activity="default")
        return _figures(result.cycles, result.clock, result.fpga_row,
                        (result.fpga_extra_rows or [result.fpga_row])[0], top1, start,
                        watts_source=result.fpga_row["watts"].source, workload=workload,
                        **design)
    row = {"images_per_s": performance["images_per_s"], "latency_s": performance["latency_s"],
           "bottleneck": performance["bottleneck"]}
    compute = {"images_per_s": performance["compute_images_per_s"],
               "latency_s": performance["compute_s"]}
    return _figures(cycles, clock, row, compute, top1, start,
                    watts_source="not estimated: the engine's power needs its routed build "
                                 "(--synth)", workload=workload, **design)


def _check_board(board, config, core=None):
    """Refuse (:class:`~fpganet.boards.build.Refused`) what the board's build would refuse
    before its tools run: block RAM, SPRAM and DSPs counted on the design, as ``fpganet compile
    --board`` and ``synth`` do."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)     # a design refused mid-build
        check_buildable(BOARDS[board], config, core)


def _figures(cycles, clock, row, compute, top1, start, *, watts_source, workload,
             macs_per_cycle, design):
    """A point's result from the estimator's quantities (a missing one is None)."""
    value = lambda q: None if q is None or q.value is None else q.value  # noqa: E731
    return {
        "status": "ok", "reason": "",
        "design": design, "macs_per_cycle": macs_per_cycle,
        "top1": top1,
        "weight_bytes": workload.weight_bytes,
        "cycles_per_image": value(cycles),
        "cycles_source": cycles.source,
        "clock_mhz": clock.value / 1e6,
        "clock_source": clock.source,
        "images_per_s": value(row["images_per_s"]),
        "latency_s": value(row["latency_s"]),
        "watts": value(row.get("watts")),
        "images_per_s_per_w": value(row.get("images_per_s_per_w")),
        "bottleneck": value(row["bottleneck"]),
        "compute_images_per_s": value(compute["images_per_s"]),
        "compute_latency_s": value(compute["latency_s"]),
        "compute_watts": value(compute.get("watts")),
        "compute_images_per_s_per_w": value(compute.get("images_per_s_per_w")),
        "watts_source": watts_source,
        "seconds": round(time.monotonic() - start, 2),
    }


def model_in(folder, model_bytes, suffix=".onnx"):
    """A task's model: ``model_bytes`` written into ``folder`` (where the worker runs, so that
    a cluster needs no shared file system), or None for the embedded LeNet-5."""
    if model_bytes is None:
        return None
    model = Path(folder) / f"model{suffix}"
    model.write_bytes(model_bytes)
    return model


def synth_point(board, config_dict, seed, options=None, model_bytes=None, calib=None):
    """Build one configuration for ``board`` with one nextpnr seed; returns a plain dict.

    ``options``: :func:`point_compile`'s, of a point on the binary or low-bit engine, whose
    network (``model_bytes`` and ``calib`` as :func:`evaluate_point` takes them) is compiled
    here again, since its weights and thresholds are in the bitstream (``fpganet synth OUT``).
    """
    config = AcceleratorConfig.from_dict(config_dict)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fpganet-dse-synth-") as scratch:
        core = None
        if options is not None and options["engine"] != "int8":
            net = _compile(model_in(scratch, model_bytes), calib, config, options)
            folded = build_binary_images(net, options["pe"], options["simd"],
                                         options["engine"]).folded
            core, config = binary_core(folded), net.config
        try:
            report = build(board, config, Path(scratch) / "build", seed=seed, core=core)
        except (DoesNotFit, Refused) as error:
            return {"status": "does not fit", "reason": " ".join(str(error).split()).split(" (see ")[0],
                    "seed": seed}
        except BuildError as error:
            return {"status": "failed", "reason": " ".join(str(error).split()), "seed": seed}
    report.pop("utilization", None)
    return {"status": "ok", "reason": "", "seed": seed, "report": report,
            "seconds": round(time.monotonic() - start, 1)}


# Running on Ray --------------------------------------------------------------------------------

def _ray():
    try:
        # Imported here, not at the top: ray is an optional dependency (the dse extra).
        import ray
    except ImportError:
        raise FpganetError(INSTALL_HINT) from None
    return ray


def _init_ray(ray, address, cpus=None, source="--address"):
    """Start Ray locally (``cpus``, default all cores) or connect to ``address`` (checked by
    :func:`check_address` first); quiet: Ray's own warnings (its token authentication
    notice) stay off stderr, and SIGTERM keeps the handler it had (Ray's would exit with
    status 15 and no word)."""
    os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                   configure_logging=False)
    logging.getLogger("ray").setLevel(logging.ERROR)
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
    received = []
    try:
        with _sigterm_noted(received, main_thread):
            if address:
                ray.init(address=address, **options)
            else:
                # "local": a new instance of our own, even where another one runs on this machine.
                ray.init(address="local", num_cpus=cpus or os.cpu_count() or 1, **options)
    except (ConnectionError, ValueError, RuntimeError) as error:
        if not address:
            raise
        raise FpganetError(f"{source} '{address}': no Ray cluster to connect to "
                           f"({' '.join(str(error).split())})") from None
    finally:
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
    if received:
        # Handed to the handler the command had (fpganet: terminated, 143), Ray stopped first
        # (its shutdown may set the handler again).
        ray.shutdown()
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
        signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def _sigterm_noted(received, main_thread):
    """While Ray starts, a SIGTERM is only noted in ``received``, and Ray may not install its
    own handler. Ray's handler exits with status 15 and no word, and any handler that raises
    can fire inside an after-fork callback (filelock's), where the exception is printed and
    dropped and the run goes on."""
    if not main_thread:
        yield
        return
    install = signal.signal

    def keep_noting(signum, handler):
        if signum == signal.SIGTERM:
            return signal.getsignal(signal.SIGTERM)
        return install(signum, handler)
    install(signal.SIGTERM, lambda signum, frame: received.append(signum))
    signal.signal = keep_noting
    try:
        yield
    finally:
        signal.signal = install


#: Run by :func:`check_address` in a child process that can be killed: connect, then leave.
_PROBE = ("import sys, ray; ray.init(address=sys.argv[1], include_dashboard=False, "
          "log_to_driver=False, logging_level='ERROR', configure_logging=False); ray.shutdown()")


def check_address(address, source="--address", timeout=ADDRESS_TIMEOUT_S):
    """Refuse in one line naming ``source``, within ``timeout`` seconds, an ``address`` that is
    no Ray cluster's: not of the form ``HOST:PORT`` (or ``ray://HOST:PORT``, ``auto``,
    ``local``), nothing listening there, or no Ray answering. Ray's own ``ray.init`` would
    raise a ValueError for the first and retry the others without end, deaf to SIGTERM
    while it does; the connection is tried here in a child process that is killed at the
    deadline."""
    if address in ("local", "auto"):
        return
    where = address.removeprefix("ray://")
    host, _, port = where.rpartition(":")
    if (not host or not port.isdigit() or not 0 < int(port) < 65536
            or any(c.isspace() for c in where)):
        raise FpganetError(f"{source} '{address}' is not a Ray address (HOST:PORT, "
                           f"ray://HOST:PORT, auto or local)")
    deadline = time.monotonic() + timeout
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        reason = "timed out" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        raise FpganetError(f"{source} '{address}': nothing answers there ({reason}; waited at "
                           f"most {timeout:g} s)") from None
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, address], capture_output=True,
                               text=True, timeout=max(1.0, deadline - time.monotonic()),
                               env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    except subprocess.TimeoutExpired:
        raise FpganetError(f"{source} '{address}': no Ray cluster answered within {timeout:g} s "
                           f"(--timeout shortens the wait)") from None
    if probe.returncode != 0:
        lines = [line for line in probe.stderr.splitlines() if line.strip()]
        raise FpganetError(f"{source} '{address}': no Ray cluster to connect to "
                           f"({lines[-1].strip() if lines else f'exit status {probe.returncode}'})")


class _Scheduler:
    """Submit tasks, at most ``window`` at a time, so that time since submission is run time.

    ``timeout`` seconds after its submission a task is cancelled (``ray.cancel(force=True)``)
    and recorded as timed out; a task whose worker died, or that raised, is recorded too.
    """

    def __init__(self, ray, window, timeout, progress):
        self.ray, self.window, self.timeout, self.progress = ray, max(1, window), timeout, progress
        self.queue, self.running = [], {}

    def add(self, submit, done):
        """``submit()`` returns an ObjectRef; ``done(result_dict)`` receives its outcome."""
        self.queue.append((submit, done))

    def run(self):
        ray = self.ray
        while self.queue or self.running:
            while self.queue and len(self.running) < self.window:
                submit, done = self.queue.pop(0)
                self.running[submit()] = (done, time.monotonic())
            ready, _ = ray.wait(list(self.running), num_returns=1, timeout=0.5)
            for ref in ready:
                done, _ = self.running.pop(ref)
                done(self._outcome(ref))
                self.progress.update(1)
            if self.timeout:
                now = time.monotonic()
                for ref, (done, started) in list(self.running.items()):
                    if now - started > self.timeout:
                        ray.cancel(ref, force=True)
                        del self.running[ref]
                        done({"status": "timed out",
                              "reason": f"no result after {self.timeout:g} s (--timeout); "
                                        f"cancelled"})
                        self.progress.update(1)

    def cancel_all(self):
        for ref in list(self.running):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        self.running.clear()

    def _outcome(self, ref):
        ray = self.ray
        try:
            return ray.get(ref)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.OutOfMemoryError) as error:
            return {"status": "worker lost", "reason": _first_line(error)}
        except ray.exceptions.TaskCancelledError:
            return {"status": "timed out", "reason": "cancelled"}
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, (FpganetError, ConfigError)):
                return {"status": "refused", "reason": " ".join(str(cause).split())}
            return {"status": "failed", "reason": _first_line(cause or error)}
        except ray.exceptions.RayError as error:
            return {"status": "failed", "reason": _first_line(error)}


def _first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}"


# The command -----------------------------------------------------------------------------------

def run_dse(*, model, calib, board, space, out, synth=False, seeds=1, address=None,
            timeout=None, cache_dir=None, cpus=None, max_points=MAX_POINTS, announce=None,
            evaluation=None, eval_limit=None):
    """Explore ``space`` for ``model`` on ``board`` with Ray; write ``out``; return the rows.

    Parameters
    ----------
    model, calib : str or None
        As for :func:`fpganet.compiler.compile_model` (None: the embedded LeNet-5 and its
        MNIST calibration split).
    board : str
        A key of :data:`fpganet.boards.build.BOARDS`.
    space : Space
    out : str or os.PathLike
    synth : bool
        Build every point that fits for the board, ``seeds`` times (seeds 1..N).
    address : str, optional
        A Ray cluster's address (else ``RAY_ADDRESS``, else a local instance on every core).
    timeout : float, optional
        Seconds a task may run before it is cancelled and recorded as timed out.
    cache_dir : str or os.PathLike, optional
        Default ``~/.cache/fpganet/dse``.
    cpus : int, optional
        CPUs of the local instance (default: every core); ignored with ``address``.
    max_points : int
        A larger space is refused (:data:`MAX_POINTS` by default).
    announce : callable, optional
        Called with no argument once every input is checked and Ray is up, before any task:
        the command prints its banner there, so that a refusal is its only line. The
        warnings of the up-front compile (a small calibration set, say) follow it.
    evaluation : str, optional
        ``.npz`` of inputs ``x`` in the model's layout and labels ``y``: each point's ``top1``
        is the golden model's accuracy on them. None: the first
        :data:`EMBEDDED_EVAL_IMAGES` of the embedded MNIST evaluation split for the embedded
        LeNet-5, no accuracy for another model.
    eval_limit : int, optional
        Only the first ``eval_limit`` evaluation inputs.

    Every input the points share (the space's size, the output folder, the cache folder,
    the model and its calibration, the evaluation inputs, the address) is checked before Ray
    starts, and refused in one line with nothing written: the model is compiled here for the
    board's configuration once per weight precision of the space, as ``fpganet compile``
    would (a pre-quantized one needs no calibration, and takes no other precision).

    Returns
    -------
    rows : list of dict
        One per point, as in ``results.csv``.
    meta : dict
        ``results.json`` (with the rows).
    """
    cache_dir = Path(os.path.expanduser(cache_dir or DEFAULT_CACHE))
    if space.size > max_points:
        raise FpganetError(f"'{space.path}' has {space.size:,} points, more than the "
                           f"{max_points:,} a run takes (--max-points raises the bound; at "
                           f"about a second a point, on each core)")
    # Refused before Ray starts, not after minutes of work (written aside again at the end).
    inputs = (model, calib, space.path, cache_dir, evaluation)
    check_output_directory(out, inputs)
    check_writable_folder(Path(out).absolute().parent, "output directory's folder")
    check_writable_folder(cache_dir, "cache folder")
    if model is not None:
        existing_file(model, "model file")
    source = "--address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        check_address(address, source, min(ADDRESS_TIMEOUT_S, timeout or ADDRESS_TIMEOUT_S))
    with warnings.catch_warnings(record=True) as noted:
        warnings.simplefilter("always")
        # The network as the points will compile it: a file that is no model, calibration of
        # the wrong shape, a model that needs calibration, a layer named that it lacks, are
        # refused here, once per precision.
        net = None
        for options in _precisions(space):
            try:
                compiled = _compile(model, calib, BOARDS[board].default_config, options)
            except FpganetError as error:
                if options == point_compile({}):
                    raise
                raise FpganetError(f"'{space.path}': [space] weight_bits = "
                                   f"{options['weight_bits']}, layer_weight_bits = "
                                   f"\"{options['layer_weight_bits']}\": {error}") from None
            net = net or compiled
    eval_data, eval_sha, eval_text = _evaluation(net, model, evaluation, eval_limit)
    calib_x = None
    if calib is not None:
        calib_x = np.asarray(read_npz(calib, "calibration file")["x"])
    model_bytes = None if model is None else Path(model).read_bytes()
    model_sha = hashlib.sha256(model_bytes if model_bytes is not None
                               else Path(datasets.LENET5_ONNX).read_bytes()).hexdigest()
    if net.calibration.get("method") in ("qdq", "qonnx", "tflite"):
        calib, calib_x, calib_sha = None, None, "none: the model's own quantization"
    else:
        calib_sha = "embedded MNIST calibration split" if calib is None else file_sha256(calib)

    points = []
    seen = set()
    for point in space.points():
        entry = {"point": point, "config": None, "status": None, "reason": ""}
        try:
            options = point_compile(_without_fold(point))
            config = point_config(BOARDS[board], point)
        except ConfigError as error:
            entry.update(status="invalid configuration", reason=" ".join(str(error).split()))
        else:
            # An int8 point of a space that sweeps the engines' fold too runs once, at the fold's
            # first values; its twins are excluded.
            twin = json.dumps([config.to_dict(), options], sort_keys=True)
            if twin in seen:
                entry.update(status="excluded", reason="the int8 array's point above: pe and "
                                                       "simd fold the engines only")
                points.append(entry)
                continue
            seen.add(twin)
            entry.update(config=config, options=options)
            macs = (config.macs_per_cycle if options["engine"] == "int8"
                    else options["pe"] * options["simd"])
            failed = [name for name, check in CONSTRAINTS.items()
                      if name in space.constraints and not check(macs, space.constraints[name])]
            if failed:
                entry.update(status="excluded",
                             reason=f"[constraints] {failed[0]} = {space.constraints[failed[0]]}: "
                                    f"{macs} MACs/cycle")
        points.append(entry)
    versions = tool_versions()
    cache = Cache(cache_dir)
    counts = {"served": 0, "computed": 0, "shared": 0}

    pending = {}

    def cached_or(key, submit, store):
        """Serve ``key`` from the cache, or schedule ``submit`` and store what it returns; a
        key already scheduled in this run (two precisions of one int8 build) is computed once."""
        found = cache.get(key)
        if found is not None:
            counts["served"] += 1
            progress.update(1)
            store(found)
            return
        if key in pending:
            counts["shared"] += 1
            progress.update(1)
            pending[key].append(store)
            return
        pending[key] = [store]

        def done(result):
            counts["computed"] += 1
            # Deterministic outcomes are kept; a timeout, a lost worker or a crash is tried again
            # by the next run.
            if result.get("status") in ("ok", "does not fit", "refused"):
                cache.put(key, result)
            for each in pending.pop(key):
                each(result)
        scheduler.add(submit, done)

    ray = _ray()

    _init_ray(ray, address, cpus, source)
    scheduler = None
    try:
        if announce is not None:
            announce()
        for note in noted:
            warnings.warn_explicit(note.message, note.category, note.filename, note.lineno)
        resources = ray.cluster_resources()
        window = int(resources.get("CPU", 1))
        model_ref = ray.put(model_bytes)
        calib_ref = ray.put(calib_x)
        eval_ref = ray.put(eval_data)
        evaluate = ray.remote(num_cpus=1, max_retries=0)(evaluate_point)
        build = ray.remote(num_cpus=1, memory=SYNTH_MEMORY.get(board, 2 << 30),
                           max_retries=0)(synth_point)
        live = [entry for entry in points if entry["status"] is None]
        total = len(live) * (2 + seeds if synth else 1)
        progress = tqdm(total=total, desc="dse", unit="task", file=sys.stderr,
                        dynamic_ncols=True, leave=True, disable=None)
        scheduler = _Scheduler(ray, window, timeout, progress)
        with progress:
            # Phase 1: every point compiled and estimated (seconds each).
            for entry in live:
                key = point_key("estimate", model=model_sha, calib=calib_sha, board=board,
                                config=entry["config"].to_dict(), tools=versions["estimate"],
                                options=entry["options"], evaluation=eval_sha)
                submit = (lambda config=entry["config"], options=entry["options"]:
                          evaluate.remote(board, config.to_dict(), model_ref, calib_ref, None,
                                          options, eval_ref))
                cached_or(key, submit, lambda result, entry=entry: entry.update(estimate=result))
            scheduler.run()
            if synth:
                # Phase 2: board builds of the points that fit, one task per seed.
                for entry in live:
                    entry["builds"] = []
                    if entry["estimate"].get("status") != "ok":
                        progress.update(seeds + 1)
                        continue
                    engine = entry["options"]["engine"] != "int8"
                    # An engine's bitstream holds the network: its build depends on it, and on
                    # the compiler that made its weights and thresholds, too.
                    network = (dict(model=model_sha, calib=calib_sha, options=entry["options"],
                                    compiler=versions["estimate"]["sources"])
                               if engine else {})
                    for seed in range(1, seeds + 1):
                        key = point_key("synth", board=board, config=entry["config"].to_dict(),
                                        seed=seed, tools=versions["synth"], **network)
                        submit = (lambda config=entry["config"], seed=seed,
                                  options=entry["options"] if engine else None:
                                  build.remote(board, config.to_dict(), seed, options,
                                               model_ref if options else None,
                                               calib_ref if options else None))
                        cached_or(key, submit, lambda result, entry=entry, seed=seed:
                                  entry["builds"].append(dict(result, seed=seed)))
                scheduler.run()
                # Phase 3: the estimate again with the best seed's routed Fmax and resources.
                for entry in live:
                    built = [b for b in entry["builds"] if b.get("status") == "ok"]
                    if not built:
                        progress.update(1)
                        continue
                    best = max(built, key=lambda b: b["report"]["fmax_mhz"] or 0)
                    entry["best"] = best
                    key = point_key("estimate", model=model_sha, calib=calib_sha, board=board,
                                    config=entry["config"].to_dict(), tools=versions["estimate"],
                                    options=entry["options"], report=best["report"])
                    submit = (lambda config=entry["config"], report=best["report"],
                              options=entry["options"]:
                              evaluate.remote(board, config.to_dict(), model_ref, calib_ref,
                                              report, options))
                    # The accuracy is the network's, measured once in phase 1.
                    cached_or(key, submit, lambda result, entry=entry: entry.update(
                        estimate=dict(result, top1=entry["estimate"].get("top1"))))
                scheduler.run()
            where = {"address": address or "local",
                     "cluster_resources": {k: v for k, v in resources.items()
                                           if not k.startswith("node:")},
                     "nodes": sum(1 for node in ray.nodes() if node.get("Alive"))}
    except BaseException:
        if scheduler is not None:
            scheduler.cancel_all()
        raise
    finally:
        ray.shutdown()

    rows = [_row(entry, synth, seeds) for entry in points]
    meta = {"format": "fpganet-dse/1", "engine": "ray", "ray_version": ray.__version__,
            "ray": where, "board": board,
            "model": {"path": model or "embedded LeNet-5", "sha256": model_sha},
            "calibration": calib_sha if calib is None else {"path": calib, "sha256": calib_sha},
            "evaluation": eval_text,
            "space": {"path": space.path, "parameters": space.parameters,
                      "constraints": space.constraints},
            "synth": {"enabled": synth, "seeds": seeds if synth else 0},
            "cache": {"folder": str(cache_dir), **counts},
            "tools": versions,
            "sources": {"cycles_per_image": "simulated: fpganet.perf on the compiled program "
                                            "(equal to the RTL cycle counter by test); on an "
                                            "engine, its timing model (BinaryDevice.stamp_cycles, "
                                            "equal to its RTL's stamp by test); each row's "
                                            "cycles_source, clock_source and watts_source say "
                                            "which",
                        "weight_bytes": "compiled: the weights as stored (packed, or an "
                                        "engine's fields), fpganet.estimate's workload",
                        "images_per_s": "estimated: fpganet.estimate, end to end over the "
                                        "board's host link (UART)",
                        "compute_images_per_s": "estimated: cycles per image at the clock, "
                                                "as if the host link kept up",
                        "watts": "estimated: fpganet.estimate power model, default switching "
                                 "activity; chip power",
                        "fmax_mhz": "routed: nextpnr, best of the seeds",
                        "top1": "measured: the golden model's arg-max against the labels of "
                                "the evaluation inputs (the engines compute its numbers, by "
                                "test)"},
            "rows": rows}
    _write(out, rows, meta, synth, inputs)
    return rows, meta


def _without_fold(point):
    """``point`` without ``pe`` and ``simd`` where it is the int8 array's (a space sweeping
    both the array and an engine's fold)."""
    if point.get("engine", "int8") != "int8":
        return point
    return {key: value for key, value in point.items() if key not in ("pe", "simd")}


def _precisions(space):
    """:func:`point_compile`'s options of each weight precision of ``space`` (the int8 array's
    engine), in the file's order; the default's first."""
    found = [point_compile({})]
    for bits in space.parameters.get("weight_bits", [DEFAULT_WEIGHT_BITS]):
        for layers in space.parameters.get("layer_weight_bits", [""]):
            options = point_compile({"weight_bits": bits, "layer_weight_bits": layers})
            if options not in found:
                found.append(options)
    return found


def _evaluation(net, model, path, limit):
    """``(x, y)``, their digest and a description: the inputs each point's accuracy is
    measured on (:func:`run_dse`'s ``evaluation``), or Nones."""
    if path is not None:
        x, y = read_inputs(path, net.input_shape, "evaluation file", net.input_name,
                           net.input_layout)
        if y is None:
            raise FpganetError(f"evaluation file '{path}' has no labels 'y' (integers [N]) to "
                               f"measure the accuracy against")
        text = {"path": path, "sha256": file_sha256(path)}
    elif model is None:
        x, y = datasets.mnist("eval", limit=limit or EMBEDDED_EVAL_IMAGES)
        text = {"data": "embedded MNIST evaluation split"}
    else:
        if limit is not None:
            raise FpganetError("--eval-limit limits the inputs of --eval EVAL.npz; give one (a "
                               "model other than the embedded LeNet-5 has no default)")
        return None, None, "none (no --eval)"
    x, y = x[:limit], y[:limit]
    digest = hashlib.sha256(np.ascontiguousarray(x).tobytes() + y.tobytes()).hexdigest()
    return (x, y), digest, {**text, "images": int(len(y))}


def _row(entry, synth, seeds):
    """One flat row of results.csv for a point."""
    row = dict(entry["point"])
    config = entry["config"]
    result = entry.get("estimate") or {}
    options = entry.get("options") or {}
    engine = options.get("engine", "int8") != "int8"
    row["macs_per_cycle"] = (options["pe"] * options["simd"] if engine
                             else config.macs_per_cycle if config else None)
    # An engine's fold is named once the network is folded (not where it is refused).
    row["config"] = result.get("design") if engine else (config.name if config else None)
    row["top1"] = result.get("top1")
    row["weight_bytes"] = result.get("weight_bytes")
    row["status"] = entry["status"] or result.get("status")
    row["reason"] = entry["reason"] or result.get("reason", "")
    for key in ("cycles_per_image", "clock_mhz", "images_per_s", "latency_s", "watts",
                "images_per_s_per_w", "bottleneck", "compute_images_per_s", "compute_latency_s",
                "compute_watts", "compute_images_per_s_per_w", "cycles_source", "clock_source",
                "watts_source"):
        row[key] = result.get(key)
    if synth:
        builds = entry.get("builds", [])
        built = [b for b in builds if b.get("status") == "ok"]
        fmax = sorted(b["report"]["fmax_mhz"] for b in built if b["report"].get("fmax_mhz"))
        best = entry.get("best")
        row["seeds_built"] = f"{len(built)}/{seeds}" if builds else ""
        row["timing_met_seeds"] = (f"{sum(1 for b in built if b['report']['timing_met'])}/{seeds}"
                                   if builds else "")
        row["fmax_mhz"] = fmax[-1] if fmax else None
        row["fmax_min_mhz"] = fmax[0] if fmax else None
        row["fmax_spread_mhz"] = round(fmax[-1] - fmax[0], 2) if fmax else None
        row["best_seed"] = best["seed"] if best else None
        for name, value in (best["report"]["resources"].items() if best else []):
            row[f"{name}_used"] = value.get("used")
        if row["status"] == "ok" and builds and not built:
            failures = [b for b in builds if b.get("status") != "ok"]
            row["status"] = failures[0]["status"] if failures[0]["status"] in (
                "does not fit", "timed out", "worker lost") else "build failed"
            row["reason"] = failures[0].get("reason", "")
    return row


def pareto(points, better_x, better_y):
    """Indices of the points no other point beats on both axes (``better_*``: "low"/"high")."""
    sign = {"low": 1, "high": -1}
    keyed = [(sign[better_x] * x, sign[better_y] * y) for x, y in points]
    return [i for i, (x, y) in enumerate(keyed)
            if not any((ox <= x and oy <= y) and (ox < x or oy < y) for ox, oy in keyed)]


def _plot(path, rows, x_key, y_key, better_x, better_y, xlabel, ylabel, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in rows if r["status"] == "ok" and r.get(x_key) is not None
            and r.get(y_key) is not None]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if good:
        xy = [(r[x_key], r[y_key]) for r in good]
        front = set(pareto(xy, better_x, better_y))
        ax.scatter([x for x, _ in xy], [y for _, y in xy], color="0.6", label="point")
        line = sorted(xy[i] for i in front)
        ax.plot([x for x, _ in line], [y for _, y in line], "o-", color="C0",
                label="Pareto front")
        labels = {}
        for r, (x, y) in zip(good, xy):
            # Points on the same spot to three digits (e.g. two buffer sizes, 7 cycles apart)
            # share one label.
            labels.setdefault((f"{x:.3g}", f"{y:.3g}"), []).append((_label(r), x, y))
        for entries in labels.values():
            _, x, y = entries[0]
            ax.annotate(", ".join(name for name, _, _ in entries), (x, y), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no point with both figures", ha="center", transform=ax.transAxes)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _label(row):
    parts = [row.get("config") or ""]
    if "act_buffer_bytes" in row:
        parts.append(f"{row['act_buffer_bytes'] // 1024} KiB")
    return " ".join(p for p in parts if p)


def _write(out, rows, meta, synth, inputs):
    from .estimate.comparison import _finite

    columns = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row.get(key) is None else row[key] for key in columns})
    cost = "LC_used" if any("LC_used" in r for r in rows) else (
        "LUT4_used" if any("LUT4_used" in r for r in rows) else None)
    with staged_directory(out, inputs=inputs) as staging:
        (staging / "results.csv").write_text(text.getvalue())
        (staging / "results.json").write_text(json.dumps(_finite(meta), indent=1,
                                                         allow_nan=False) + "\n")
        if synth and cost:
            x_key, xlabel = cost, f"{cost.split('_')[0]} used (routed, best seed)"
        else:
            x_key, xlabel = "macs_per_cycle", "MACs/cycle (array rows x cols, or engine pe x simd)"
        _plot(staging / "pareto_throughput.png", rows, x_key, "compute_images_per_s", "low",
              "high", xlabel, "images/s (estimated, compute-bound)",
              f"{meta['board']}: images/s (simulated cycles x clock) against cost")
        _plot(staging / "pareto_efficiency.png", rows, "compute_latency_s",
              "compute_images_per_s_per_w", "low", "high", "latency, s (simulated cycles / clock)",
              "images/s/W (estimated watts)",
              f"{meta['board']}: efficiency against latency (compute-bound)")


# Command line ----------------------------------------------------------------------------------

def configure(parser):
    """Add the ``fpganet dse`` arguments to ``parser``."""
    parser.add_argument("model", nargs="?", metavar="MODEL.onnx",
                        help="ONNX or TFLite model, as for compile; omitted: the embedded "
                             "LeNet-5 with its MNIST calibration split")
    parser.add_argument("--calib", metavar="CALIB.npz",
                        help="calibration inputs, array 'x' (required with a float MODEL; a "
                             "pre-quantized one, QDQ or int8 TFLite, needs none)")
    parser.add_argument("--board", required=True, choices=sorted(BOARDS),
                        help="every point starts from this board's configuration")
    parser.add_argument("--space", required=True, metavar="SPACE.toml",
                        help="[space] table of parameter lists (array, act_buffer_bytes, "
                             "requant_lanes, clock_mhz, any configuration field; engine, pe, "
                             "simd, weight_bits, layer_weight_bits); optional [constraints] "
                             "max_macs, min_macs")
    parser.add_argument("--eval", metavar="EVAL.npz",
                        help="inputs 'x' and labels 'y': each point's top-1 accuracy from the "
                             "golden model (default: the embedded LeNet-5's first "
                             f"{EMBEDDED_EVAL_IMAGES:,} MNIST evaluation images; none for "
                             "another model)")
    parser.add_argument("--eval-limit", type=positive_int, metavar="N",
                        help="only the first N evaluation inputs")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="results.csv, results.json, Pareto plots; written atomically")
    parser.add_argument("--synth", action="store_true",
                        help="also build every point that fits for the board (minutes each)")
    parser.add_argument("--seeds", type=positive_int, default=1, metavar="N",
                        help="with --synth: nextpnr seeds 1..N per point (default 1)")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to run on, HOST:PORT (default: RAY_ADDRESS, else a "
                             f"local Ray on every core); one that does not answer within "
                             f"{ADDRESS_TIMEOUT_S:g} s (or --timeout) is refused")
    parser.add_argument("--cpus", type=positive_int, metavar="N",
                        help="CPUs of the local Ray instance (default: every core)")
    parser.add_argument("--timeout", type=positive_float, metavar="S",
                        help="seconds a task may run before it is cancelled and recorded (and "
                             "the most a cluster at --address may take to answer)")
    parser.add_argument("--max-points", type=positive_int, default=MAX_POINTS, metavar="N",
                        help=f"refuse a space of more points (default {MAX_POINTS:,})")
    parser.add_argument("--cache", metavar="DIR",
                        help=f"results kept per point (default {DEFAULT_CACHE})")


def run(args):
    """Run a parsed ``fpganet dse`` command line; return the exit status."""
    space = load_space(args.space)
    if args.seeds > 1 and not args.synth:
        raise FpganetError("--seeds needs --synth (seeds are nextpnr placement seeds)")
    _ray()                                          # one line on how to install it, up front
    board = BOARDS[args.board]
    n = space.size

    def announce():
        print(f"dse: {n:,} point{'' if n == 1 else 's'} of '{args.space}' on {board.description}"
              + (f", each built with {args.seeds} seed(s)" if args.synth else "")
              + f"; Ray at {args.address or os.environ.get('RAY_ADDRESS') or 'a local instance'}",
              flush=True)
    rows, meta = run_dse(model=args.model, calib=args.calib, board=args.board, space=space,
                         out=args.output, synth=args.synth, seeds=args.seeds,
                         address=args.address, timeout=args.timeout, cache_dir=args.cache,
                         cpus=args.cpus, max_points=args.max_points, announce=announce,
                         evaluation=args.eval, eval_limit=args.eval_limit)
    cache = meta["cache"]
    shared = f", {cache['shared']} shared with a twin" if cache["shared"] else ""
    print(f"dse: {cache['served']} result(s) served from the cache ({cache['folder']}), "
          f"{cache['computed']} computed{shared} on Ray {meta['ray_version']} "
          f"({meta['ray']['cluster_resources'].get('CPU', 0):g} CPUs)")
    width = max([len("point")] + [len(_point_label(row, space)) for row in rows])
    top1 = meta["evaluation"] != "none (no --eval)"
    status = max(len(row["status"]) for row in rows)
    print(f"  {'point':{width}s} {'status':{status}s} {'top-1' if top1 else '':>7s} "
          f"{'cycles/image':>12s} {'images/s':>9s} {'compute':>9s} {'mW':>6s} {'images/s/W':>10s}")
    for row in rows:
        accuracy = (f"{100 * row['top1']:6.2f}%" if row.get("top1") is not None
                    else f"{'':7s}")
        watts = ("     -          -" if row["watts"] is None else
                 f"{1e3 * row['watts']:>6.2f} {row['images_per_s_per_w']:>10,.0f}")
        figures = (f"{row['cycles_per_image']:>12,} {row['images_per_s']:>9,.0f} "
                   f"{row['compute_images_per_s']:>9,.0f} {watts}"
                   if row["status"] == "ok" else row["reason"][:90])
        print(f"  {_point_label(row, space):{width}s} {row['status']:{status}s} {accuracy} "
              f"{figures}")
    print("  (top-1: measured on the golden model; cycles/image: simulated by fpganet.perf, or "
          "the engine's timing model; images/s: estimated end to end over the board's host link, "
          "compute: cycles/image at the clock; mW and images/s/W: estimated chip power, default "
          "switching activity, end to end; an engine's only from its routed build, --synth)")
    print(f"dse: wrote {args.output}/results.csv, results.json, pareto_throughput.png, "
          f"pareto_efficiency.png")
    return 0


def _point_label(row, space):
    return " ".join(f"{key}={row[key]}" for key in space.parameters)
