"""``fpganet fit MODEL [--calib C]``: which boards hold a model, and how fast.

For every board (:data:`fpganet.boards.build.BOARDS`) and its default configuration, plus
the variants its file names (:attr:`~fpganet.boards.common.Board.variants`): the chip
limits of that build (:func:`~fpganet.boards.build.check_buildable`, the same check as
``compile --board`` and ``synth``), the model compiled in memory for it (its buffers must hold
the network's weights, activations, program and parameters), then ``fpganet estimate``'s
FPGA figures without the ASIC and GPU rows (:func:`fpganet.estimate.comparison.estimate`):
cycles per image from the cycle model (:mod:`fpganet.perf`), images/s compute-bound and
delivered through the host link, and the chip's estimated power.

With ``--ray`` (or ``--address``) the rows are computed as Ray tasks, one a board and
configuration, as ``fpganet dse`` computes its points: on a local instance, or on a cluster
whose workers need no shared file system (the model's bytes and the calibration array travel
with the tasks).
"""

import dataclasses
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from .argtypes import add_weight_bits_arguments, positive_float
from .boards.build import BOARDS, Refused, check_buildable, model_requant_config
from .codegen import build_images
from .compiler import _calibration_x, compile_model
from .config import AcceleratorConfig
from .errors import FpganetError, FpganetWarning
from .quantize.rounding import DEFAULT_WEIGHT_BITS

__all__ = ["Fit", "fit", "configure", "run"]


@dataclass(frozen=True)
class Fit:
    """One board and configuration: ``fits`` and ``why`` (the refusal, or the resource line of
    its tightest chip resource); with a fit, the estimate's figures."""
    board: str
    configuration: str
    array: str
    fits: bool
    why: str
    cycles_per_image: int = None
    compute_images_per_s: float = None
    images_per_s: float = None
    watts: float = None


def _tightest(needs):
    """The resource line of the chip resource used the most, by share."""
    return max(needs, key=lambda need: (need.used + (need.margin or 0)) / need.available).line()


def _configurations(board):
    yield "default", board.default_config
    yield from board.variants.items()


def fit_one(board, name, config, model=None, calib=None, weight_bits=DEFAULT_WEIGHT_BITS,
            layer_weight_bits=None):
    """The :class:`Fit` of ``model`` (default: the embedded LeNet-5) on ``board`` built for
    ``config`` (named ``name``), a float model's weights at ``weight_bits`` (and
    ``layer_weight_bits``, as ``fpganet compile`` takes them)."""
    # Imported here, not at the top: the estimator's tables are slow to import (`fpganet --help`).
    from .estimate.comparison import estimate

    config, _ = model_requant_config(model, config, board)     # as `fpganet compile` picks it
    row = {"board": board.name, "configuration": name, "array": config.name}
    try:
        needs = check_buildable(board, config)
    except Refused as refusal:
        return Fit(**row, fits=False, why=str(refusal).removeprefix(f"{board.description}: "))
    try:
        net = compile_model(model, calib, config=config, board=board.name,
                            weight_bits=weight_bits, layer_weight_bits=layer_weight_bits)
        build_images(net)          # the buffers hold the network, or the back end says why not
    except FpganetError as error:
        return Fit(**row, fits=False, why=" ".join(str(error).split()))
    result = estimate(net, board=board.name, measure=False, synth=False, asic_nodes=(), gpus=())
    performance = result.performance
    return Fit(**row, fits=True, why=_tightest(needs),
               cycles_per_image=int(result.cycles.value),
               compute_images_per_s=float(performance["compute_images_per_s"].value),
               images_per_s=float(performance["images_per_s"].value),
               watts=float(result.power.total().value))


def fit(model=None, calib=None, *, ray=False, address=None, timeout=None,
        weight_bits=DEFAULT_WEIGHT_BITS, layer_weight_bits=None):
    """A :class:`Fit` for every board and configuration (:func:`fit_one`), a float model's
    weights at ``weight_bits`` (and ``layer_weight_bits``). A model or
    calibration file that does not import or quantize at all raises
    :class:`~fpganet.errors.FpganetError` (bad input, not a board's verdict).

    ``ray`` (or an ``address``): the rows as Ray tasks, on a local instance or the cluster at
    ``address`` (refused in one line within ``timeout`` seconds where none answers,
    :func:`fpganet.dse.check_address`); the same rows as without."""
    rows = [(board, name, config) for board in BOARDS.values()
            for name, config in _configurations(board)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        widths = {"weight_bits": weight_bits, "layer_weight_bits": layer_weight_bits}
        net = compile_model(model, calib, **widths)
        if ray or address:
            fits = _fit_on_ray(rows, model, calib, net, address, timeout, widths)
        else:
            fits = [fit_one(board, name, config, model, calib, **widths)
                    for board, name, config in rows]
    # Each board's compile repeats the warnings of the first: each is said once.
    for message in dict.fromkeys(str(w.message) for w in caught):
        warnings.warn(message, FpganetWarning, stacklevel=2)
    return fits


def fit_task(board, name, config_dict, model_bytes, model_suffix, calib, widths):
    """:func:`fit_one` as a Ray task: the model as bytes (None: the embedded LeNet-5) written
    where the worker runs, the calibration inputs as an array (or None), ``widths`` its
    weight-width arguments; returns the :class:`Fit` as a dict."""
    from .dse import model_in

    with tempfile.TemporaryDirectory(prefix="fpganet-fit-") as scratch:
        row = fit_one(BOARDS[board], name, AcceleratorConfig.from_dict(config_dict),
                      model_in(scratch, model_bytes, model_suffix), calib, **widths)
    return dataclasses.asdict(row)


def _fit_on_ray(rows, model, calib, net, address, timeout, widths):
    """The rows' :class:`Fit` from Ray tasks (:func:`fit_task`)."""
    from .dse import ADDRESS_TIMEOUT_S, _init_ray, _ray, check_address

    ray = _ray()
    if address:
        check_address(address, timeout=timeout or ADDRESS_TIMEOUT_S)
    model_bytes = None if model is None else Path(model).read_bytes()
    suffix = "" if model is None else Path(model).suffix
    calib_x = None if calib is None else _calibration_x(calib, net.input_shape, net.input_name,
                                                         net.input_layout)
    _init_ray(ray, address)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(fit_task)
        model_ref, calib_ref = ray.put(model_bytes), ray.put(calib_x)
        refs = [task.remote(board.name, name, config.to_dict(), model_ref, suffix, calib_ref,
                            widths)
                for board, name, config in rows]
        return [Fit(**result) for result in ray.get(refs)]
    finally:
        ray.shutdown()


def table(fits):
    """The rows as text, one a board and configuration; the power is the chip's at the
    delivered rate."""
    lines = [f"{'board':<11} {'configuration':<17} {'array':<6} {'fits':<4} {'cycles/image':>12} "
             f"{'compute img/s':>13} {'delivered img/s':>15} {'power mW':>8}  why"]
    for row in fits:
        figures = (f"{row.cycles_per_image:>12,} {row.compute_images_per_s:>13,.0f} "
                   f"{row.images_per_s:>15,.0f} {row.watts * 1e3:>8,.1f}" if row.fits else
                   f"{'-':>12} {'-':>13} {'-':>15} {'-':>8}")
        lines.append(f"{row.board:<11} {row.configuration:<17} {row.array:<6} "
                     f"{'yes' if row.fits else 'no':<4} {figures}  {row.why}")
    return "\n".join(lines)


def configure(parser):
    """Arguments of ``fpganet fit``."""
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="ONNX or TFLite model (default: the embedded LeNet-5)")
    parser.add_argument("--calib", metavar="CALIB.npz",
                        help="calibration inputs (an array 'x'), as fpganet compile takes them")
    add_weight_bits_arguments(parser)
    parser.add_argument("--ray", action="store_true",
                        help="compute the rows as Ray tasks on a local instance (the dse extra)")
    parser.add_argument("--address", metavar="ADDR",
                        help="compute them on the Ray cluster at HOST:PORT instead (implies "
                             "--ray); one that does not answer within --timeout is refused")
    parser.add_argument("--timeout", type=positive_float, metavar="S",
                        help="seconds a cluster at --address may take to answer (default 30)")


def run(args):
    """``fpganet fit``: print the table; status 0 (a board that cannot hold the model is a
    row, not an error)."""
    print(table(fit(args.model, args.calib, ray=args.ray, address=args.address,
                    timeout=args.timeout, weight_bits=args.weight_bits,
                    layer_weight_bits=args.layer_weight_bits)))
    sys.stdout.flush()
    return 0
