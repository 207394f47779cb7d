"""``fpganet fit MODEL [--calib C]``: which boards hold a model, and how fast.

For every board (:data:`fpganet.boards.build.BOARDS`) and its default configuration, plus
the variants its file names (:attr:`~fpganet.boards.common.Board.variants`): the chip
limits of that build (:func:`~fpganet.boards.build.check_buildable`, the same check as
``compile --board`` and ``synth``), the model compiled in memory for it (its buffers must hold
the network's weights, activations, program and parameters), then ``fpganet estimate``'s
FPGA figures without the ASIC and GPU rows (:func:`fpganet.estimate.comparison.estimate`):
cycles per image from the cycle model (:mod:`fpganet.perf`), images/s compute-bound and
delivered through the host link, and the chip's estimated power.
"""

import sys
import warnings
from dataclasses import dataclass

from .boards.build import BOARDS, Refused, check_buildable
from .codegen import build_images
from .compiler import compile_model, runtime_requant_mode
from .errors import FpganetError, FpganetWarning

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


def fit_one(board, name, config, model=None, calib=None):
    """The :class:`Fit` of ``model`` (default: the embedded LeNet-5) on ``board`` built for
    ``config`` (named ``name``)."""
    # Imported here, not at the top: the estimator's tables are slow to import (`fpganet --help`).
    from .estimate.comparison import estimate

    mode = runtime_requant_mode(model)
    if mode is not None and mode in board.requant_modes:
        config = config.replace(requant_mode=mode)     # as `fpganet compile --board` picks it
    row = {"board": board.name, "configuration": name, "array": config.name}
    try:
        needs = check_buildable(board, config)
    except Refused as refusal:
        return Fit(**row, fits=False, why=str(refusal).removeprefix(f"{board.description}: "))
    try:
        net = compile_model(model, calib, config=config, board=board.name)
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


def fit(model=None, calib=None):
    """A :class:`Fit` for every board and configuration (:func:`fit_one`). A model or
    calibration file that does not import or quantize at all raises
    :class:`~fpganet.errors.FpganetError` (bad input, not a board's verdict)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_model(model, calib)
        fits = [fit_one(board, name, config, model, calib)
                for board in BOARDS.values() for name, config in _configurations(board)]
    # Each board's compile repeats the warnings of the first: each is said once.
    for message in dict.fromkeys(str(w.message) for w in caught):
        warnings.warn(message, FpganetWarning, stacklevel=2)
    return fits


def table(fits):
    """The rows as text, one a board and configuration; the power is the chip's at the
    delivered rate."""
    lines = [f"{'board':<11} {'configuration':<14} {'array':<6} {'fits':<4} {'cycles/image':>12} "
             f"{'compute img/s':>13} {'delivered img/s':>15} {'power mW':>8}  why"]
    for row in fits:
        figures = (f"{row.cycles_per_image:>12,} {row.compute_images_per_s:>13,.0f} "
                   f"{row.images_per_s:>15,.0f} {row.watts * 1e3:>8,.1f}" if row.fits else
                   f"{'-':>12} {'-':>13} {'-':>15} {'-':>8}")
        lines.append(f"{row.board:<11} {row.configuration:<14} {row.array:<6} "
                     f"{'yes' if row.fits else 'no':<4} {figures}  {row.why}")
    return "\n".join(lines)


def configure(parser):
    """Arguments of ``fpganet fit``."""
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="ONNX or TFLite model (default: the embedded LeNet-5)")
    parser.add_argument("--calib", metavar="CALIB.npz",
                        help="calibration inputs (an array 'x'), as fpganet compile takes them")


def run(args):
    """``fpganet fit``: print the table; status 0 (a board that cannot hold the model is a
    row, not an error)."""
    print(table(fit(args.model, args.calib)))
    sys.stdout.flush()
    return 0
