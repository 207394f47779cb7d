"""The compile flow as a Python API: ONNX + calibration data (or a fully-int8 TFLite model)
-> a compiled directory.

:func:`compile_model` imports the ONNX model, quantizes it with calibration
inputs, and (optionally) writes ``OUT/manifest.json`` and ``OUT/network.npz``,
with the accelerator program and memory images of :mod:`fpganet.codegen`
(``program.hex``, ``weights.hex``, ``params.hex``, ``memories.npz``; see
docs/reference/compiler.md), and ``SHA256SUMS``: everything is computed in memory, written into a
temporary directory beside ``OUT`` and renamed into place, so a failure leaves no
partial ``OUT`` (:mod:`fpganet.files`). :func:`load_compiled` reads it back. The command line
(:mod:`fpganet.cli`) is a thin layer over these.
"""

import os
import warnings
from pathlib import Path

import numpy as np

from . import datasets
from .codegen import build_images, read_images
from .codegen.binary_images import build_binary_images, is_binary_compiled, read_binary_images, \
    unit_files
from .codegen.images import NoProgramError
from .config import DEFAULT_CONFIG, MULT_BITS
from .errors import FpganetError, FpganetWarning
from .files import staged_directory
from .golden import run_golden
from .model import Graph, file_sha256, load_onnx
from .model.ir import input_text
from .qnet import load_network
from .quantize import DEFAULT_METHOD, parse_method, quantize_graph
from .quantize.rounding import check_float_only

__all__ = ["ENGINES", "compile_model", "load_compiled", "read_npz", "read_inputs", "runtime_requant_mode",
           "write_compiled"]


#: What ``fpganet compile --engine`` compiles for: the int8 systolic array's program, or the
#: images of the engine in logic cells with its binary or low-bit unit
#: (:mod:`fpganet.codegen.binary_images`).
ENGINES = ("int8", "binary", "lowbit")

#: The least share of inputs on which a pre-quantized model whose arithmetic the target
#: changes must keep its own runtime's arg-max (``fpganet compile --min-agreement``).
DEFAULT_MIN_AGREEMENT = 0.9


def read_npz(path, role, keys=("x",)):
    """Arrays from a ``.npz`` file, with one-line errors naming the file and the key.

    Parameters
    ----------
    path : str or os.PathLike
    role : str
        What the file is, for messages ("calibration file", "inputs file").
    keys : tuple of str
        Required keys.

    Returns
    -------
    dict
        Every array in the file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FpganetError(f"{role} '{path}' does not exist")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except OSError as error:
        raise FpganetError(f"cannot read {role} '{path}': {error.strerror}") from None
    if magic == b"\x93NUMPY":
        raise FpganetError(f"{role} '{path}' is a single .npy array, not a .npz archive with an "
                           f"array 'x' (save it with numpy.savez(path, x=...))")
    if not magic.startswith(b"PK"):  # a .npz is a zip archive
        raise FpganetError(f"{role} '{path}' is not a .npz archive")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as error:
        raise FpganetError(f"{role} '{path}' is not a readable .npz archive ({type(error).__name__}: "
                           f"{error})") from None
    for key in keys:
        if key not in arrays:
            present = ", ".join(f"'{k}'" for k in sorted(arrays)) or "none"
            raise FpganetError(f"{role} '{path}' has no array '{key}' (arrays present: {present})")
    return arrays


def read_inputs(path, input_shape, role="inputs file", input_name="input", layout="nchw"):
    """Float inputs ``x`` (and labels ``y`` if present) from a ``.npz``, checked against a shape.

    Returns
    -------
    x : numpy.ndarray
        float32 [N, *input_shape], in the model's ``layout`` (named in the refusal of another
        shape).
    y : numpy.ndarray or None
        int64 [N].
    """
    arrays = read_npz(path, role)
    x = _check_x(arrays["x"], input_shape, f"array 'x' in {role} '{os.fspath(path)}'", input_name,
                 layout)
    y = arrays.get("y")
    if y is not None:
        y = np.asarray(y)
        if y.shape != (x.shape[0],) or y.dtype.kind not in "iu":
            raise FpganetError(f"labels 'y' in {role} '{os.fspath(path)}' are {y.dtype} "
                               f"{list(y.shape)}; expected integers [{x.shape[0]}]")
        y = y.astype(np.int64)
    return x, y


def _check_x(x, input_shape, what, input_name, layout="nchw"):
    x = np.asarray(x)
    expected = input_text(input_shape, layout)
    if x.dtype.kind != "f":
        raise FpganetError(f"{what} is {x.dtype}; it must be float in the model's input domain "
                           f"(preprocessed), shape {expected}")
    if x.ndim != len(input_shape) + 1 or tuple(x.shape[1:]) != tuple(input_shape):
        raise FpganetError(f"{what} has shape {list(x.shape)}; the model input '{input_name}' "
                           f"expects {expected}")
    if x.shape[0] == 0:
        raise FpganetError(f"{what} holds no samples")
    if not np.all(np.isfinite(x)):
        raise FpganetError(f"{what} contains NaN or Inf")
    return x.astype(np.float32, copy=False)


def _calibration_x(calib, input_shape, input_name, layout):
    """The float inputs of ``calib`` (a ``.npz`` path with an array ``x``, or the array itself),
    checked against the model's input."""
    if isinstance(calib, np.ndarray):
        return _check_x(calib, input_shape, "calibration array", input_name, layout)
    arrays = read_npz(calib, "calibration file")
    return _check_x(arrays["x"], input_shape, f"array 'x' in calibration file "
                    f"'{os.fspath(calib)}'", input_name, layout)


def _calibration_source(calib):
    """How a measurement names ``calib``."""
    return "the array given" if isinstance(calib, np.ndarray) else f"'{os.fspath(calib)}'"


def runtime_requant_mode(model):
    """The requantization mode (:data:`fpganet.isa.REQUANT_MODES`) in which a pre-quantized
    ``model`` gives its own runtime's answers: ``"tflite"`` for a fully-int8 TFLite model
    (LiteRT's), None for any other. A QDQ ONNX model gets None: onnxruntime requantizes in
    float, and the ``tflite`` mode agrees with it less often than the ``fpganet`` one
    (docs/guide/prequantized.md). A file that is no readable model also gets None: compiling
    it says why."""
    # Imported here, not at the top: the TFLite importer is slow to import (`fpganet --help`).
    from .model.tflite_import import is_tflite, tflite_kind

    if model is None or not is_tflite(model):
        return None
    try:
        return "tflite" if tflite_kind(model) == "int8" else None
    except FpganetError:
        return None


def compile_model(model=None, calib=None, out_dir=None, *, config=None, method=None,
                  calib_limit=None, program=True, n_images=1, batch=1, dump_ir=None, board=None,
                  weight_bits=8, layer_weight_bits=None, weight_rounding=None,
                  not_runtime_mode=None, min_agreement=DEFAULT_MIN_AGREEMENT, engine=None):
    """Import, quantize and optionally write a network.

    Parameters
    ----------
    model : str or os.PathLike, optional
        ONNX file, or a TFLite model (suffix ``.tflite`` or the flatbuffer's ``TFL3``
        identifier, :mod:`fpganet.model.tflite_import`): a fully-int8 one keeps its own
        quantization, a float32 one is quantized with ``calib`` as a float ONNX model is.
        None: the embedded LeNet-5 (:data:`fpganet.datasets.LENET5_ONNX`).
    calib : str, os.PathLike or numpy.ndarray, optional
        ``.npz`` with ``x`` float32 [N, *input_shape], or the array itself.
        None: the embedded MNIST calibration split (only with the embedded LeNet-5 or
        a byte-identical copy of it). A pre-quantized model (QDQ, int8 TFLite) needs none; given
        one anyway, it is ignored with a :class:`~fpganet.errors.FpganetWarning`, unless the
        target changes the model's arithmetic: then it measures the answers' agreement with
        the model's own runtime (``min_agreement``).
    out_dir : str or os.PathLike, optional
        Directory to write (replaced atomically if it is an earlier output).
    config : fpganet.config.AcceleratorConfig, optional
        Stored in the manifest; ``acc_width`` bounds the accumulators. Used as given: its
        ``requant_mode`` does not follow the model here (``fpganet compile`` picks
        :func:`runtime_requant_mode` where the target builds it).
    method : str, optional
        Calibration method (:data:`fpganet.quantize.METHODS`); default
        :data:`fpganet.quantize.DEFAULT_METHOD`.
    calib_limit : int, optional
        Use only the first ``calib_limit`` calibration samples.
    program : bool
        With ``out_dir``: also generate the accelerator program and memory images
        (:func:`fpganet.codegen.build_images`); a network that does not fit the
        configuration is refused and nothing is written. False: quantize only.
    n_images : int
        Images the written program processes (the host sends that many).
    batch : int
        1..cols: the written program runs the dense layers once per group of ``batch`` images
        (docs/reference/compiler.md, "Batching"); refused for a network without dense layers.
    dump_ir : text stream, optional
        Gets the compiler's intermediate form after each pass (:mod:`fpganet.codegen.passes`);
        needs ``out_dir`` and ``program``.
    board : str, optional
        The board ``config`` is for (``fpganet compile --board``): recorded in the manifest,
        so that ``estimate``, ``report`` and ``synth`` take it from there.
    weight_bits, layer_weight_bits, weight_rounding
        A float model's weight widths (2..8; ``{layer name: bits}`` or ``"NAME=BITS,..."``
        overrides) and their rounding (:mod:`fpganet.quantize.rounding`), as
        :func:`~fpganet.quantize.quantize_graph` takes them; a pre-quantized model is refused
        any but the defaults.
    not_runtime_mode : str, optional
        Why ``config`` is not in the model's :func:`runtime_requant_mode` (``fpganet compile``
        with no ``--requant-mode``, for a target that cannot build it): said in the one
        warning of a pre-quantized model, with any rounding of its multipliers.
    min_agreement : float
        A pre-quantized model whose arithmetic the target changes (its multipliers rounded
        below 15 bits, or an int8 TFLite model outside the ``tflite`` mode) is refused when
        its golden model's arg-max agrees with the model's own runtime on fewer than this
        share of the ``calib`` inputs; the share is in ``net.calibration["agreement"]``.
    engine : tuple, optional
        ``(unit, pe, simd[, host_weights])``: with ``out_dir``, write the images of the engine
        in logic cells (:mod:`fpganet.codegen.binary_images`; ``unit`` ``binary`` for a chain
        of binary dense layers, ``lowbit`` for 2-4-bit ones) folded so, its weights loaded by
        the host where ``host_weights``, instead of the int8 array's program; a network the
        unit cannot run is refused.

    Returns
    -------
    fpganet.qnet.QNetwork
    """
    # Imported here, not at the top: the TFLite importer is slow to import (`fpganet --help`).
    from .model.tflite_import import is_tflite

    config = config or DEFAULT_CONFIG
    if engine is not None and config.requant_mult_bits != DEFAULT_CONFIG.requant_mult_bits:
        # The engine's thresholds are found from the layers' requantization, whatever its
        # multipliers; narrower multipliers are the int8 array's economy, and would widen the
        # weights (a board such as the iCEBreaker builds its array with them).
        config = config.replace(requant_mult_bits=DEFAULT_CONFIG.requant_mult_bits)
    method = method or DEFAULT_METHOD
    if dump_ir is not None and (out_dir is None or not program):
        raise FpganetError("--dump-ir prints the passes that make the accelerator program; "
                           "with --no-program none runs")
    parse_method(method)
    model_path = Path(datasets.LENET5_ONNX if model is None else model)
    origin = {}
    if model is not None and is_tflite(model_path):
        net = _load_tflite(model_path, calib, config)
        if isinstance(net, Graph):
            # A float TFLite model: quantized with calibration data, as a float ONNX model.
            graph, origin = net, {"format": "tflite"}
        else:
            check_float_only("int8 TFLite", weight_bits, layer_weight_bits, weight_rounding)
            measured = None if calib is None else (
                _calibration_x(calib, net.input_shape, net.input_name,
                               net.input_layout)[:calib_limit], _calibration_source(calib))
            _prequantized_answers(net, "int8 TFLite", measured, config,
                                  lambda x: _litert_codes(model_path, x), not_runtime_mode,
                                  min_agreement)
            net.board = board
            if out_dir is not None:
                write_compiled(net, out_dir, program=program, n_images=n_images, batch=batch,
                               inputs=(model_path,), dump_ir=dump_ir, engine=engine)
            return net
    else:
        graph = load_onnx(model_path)
    sha256 = file_sha256(model_path)
    # A byte-identical copy of the embedded LeNet-5 gets its defaults (calibration split, eval inputs).
    embedded = sha256 == file_sha256(datasets.LENET5_ONNX)
    qonnx = graph.quantization is not None and graph.quantization.get("arithmetic") == "qonnx"
    if graph.quantization is not None:
        # A QDQ or QONNX model carries its quantization; calibration data would not change it.
        kind = "QONNX" if qonnx else "QDQ"
        # A QONNX layer's requantization is fitted to the multiplier's bits; a QDQ model's
        # agreement is measured once it is quantized.
        measured = None
        if calib is not None:
            # Checked even where it is ignored: a broken file is bad input on every target.
            measured = (_calibration_x(calib, graph.input_shape, graph.input_name,
                                       graph.input_layout)[:calib_limit],
                        _calibration_source(calib))
            if qonnx or not _changes_arithmetic(config, kind):
                measured = None
                warnings.warn(f"the model is pre-quantized ({kind}): its own quantizers are used "
                              f"and the calibration data are ignored", FpganetWarning,
                              stacklevel=2)
        calib, calib_x = None, None
        calibration = ({"data": "levels of the model's Quant and BipolarQuant nodes",
                        "method": "qonnx", "samples": 0} if qonnx else
                       {"data": "scales and zero points of the model's QuantizeLinear nodes",
                        "method": "qdq", "samples": 0})
    elif calib is None:
        if not embedded:
            raise FpganetError("a calibration file is required for a model other than the "
                               "embedded LeNet-5 (--calib CALIB.npz with an array 'x')")
        calib_x, _ = datasets.mnist("calib")
        calibration = {"data": f"embedded MNIST calibration split, test images "
                               f"0..{datasets.CALIB_COUNT - 1}"}
    else:
        calib_x = _calibration_x(calib, graph.input_shape, graph.input_name, graph.input_layout)
        calibration = ({"data": "array given to compile_model"} if isinstance(calib, np.ndarray)
                       else {"data": os.path.abspath(os.fspath(calib)),
                             "sha256": file_sha256(calib)})
    if calib_limit is not None and calib_limit < 1:
        raise FpganetError(f"calibration limit must be at least 1, not {calib_limit}")
    if calib_x is not None:
        calib_x = calib_x[:calib_limit]
        calibration.update(method=method, samples=int(calib_x.shape[0]))
    source = {"path": str(model_path.resolve()), "file": model_path.name,
              "sha256": sha256, "embedded": embedded, "graph": graph.name,
              "dropped_output_op": graph.dropped_output_op, "notes": list(graph.notes),
              "float_macs": int(graph.macs), **origin}
    if qonnx:
        source["prequantized"] = "QONNX: the model's quantizers and integer weights"
    elif graph.quantization is not None:
        source["prequantized"] = "QDQ: the model's activation scales and int8 weights"
    net = quantize_graph(graph, calib_x, method=method, config=config, source=source,
                         calibration=calibration, weight_bits=weight_bits,
                         layer_bits=layer_weight_bits, weight_rounding=weight_rounding)
    if graph.quantization is not None and not qonnx:
        _prequantized_answers(net, "QDQ", measured, config,
                              lambda x: _onnxruntime_outputs(model_path, x), None, min_agreement)
    net.board = board
    if out_dir is not None:
        write_compiled(net, out_dir, program=program, n_images=n_images, batch=batch,
                       inputs=(model_path, calib if isinstance(calib, (str, os.PathLike)) else None),
                       dump_ir=dump_ir, engine=engine)
    return net


def _changes_arithmetic(config, kind, not_runtime_mode=None):
    """Why a pre-quantized model's answers can move on ``config``, or None: an int8 TFLite
    model that ``fpganet compile`` keeps out of LiteRT's ``tflite`` mode (``not_runtime_mode``
    says why; asked for with ``--requant-mode``, it is the user's choice), multipliers
    rounded below 15 bits (the ``tflite`` mode keeps its 31)."""
    reasons = []
    if not_runtime_mode:
        reasons.append(f"{not_runtime_mode}: the model ({kind}) is compiled in the "
                       f"{config.requant_mode} requantization")
    if config.requant_mode == "fpganet" and config.requant_mult_bits < MULT_BITS:
        reasons.append(f"its own scales keep their multipliers, which --requant-mult-bits "
                       f"{config.requant_mult_bits} rounds")
    return "; ".join(reasons) or None


def _prequantized_answers(net, kind, measured, config, reference, not_runtime_mode,
                          min_agreement):
    """Tell how far a pre-quantized model's answers move where ``config`` changes its
    arithmetic (:func:`_changes_arithmetic`). With inputs (``measured``: the checked
    calibration inputs and how to name them) the golden model's
    arg-max is compared with the model's own runtime's (``reference(x)``), recorded in
    ``net.calibration["agreement"]`` and refused below ``min_agreement``; without, one
    warning says why the answers can move and how to measure it."""
    why = _changes_arithmetic(config, kind, not_runtime_mode)
    if why is None:
        if measured is not None and kind == "int8 TFLite":
            warnings.warn("the model is a fully-int8 TFLite model: its own scales and zero "
                          "points are used and the calibration data are ignored", FpganetWarning,
                          stacklevel=3)
        return
    runtime = "LiteRT" if kind == "int8 TFLite" else "onnxruntime"
    if measured is None:
        warnings.warn(f"the model is pre-quantized ({kind}): {why}; its answers can differ from "
                      f"{runtime}'s: --calib X.npz (inputs) measures how often", FpganetWarning,
                      stacklevel=3)
        return
    x, where = measured
    ours = run_golden(net, net.quantize_input(x)).reshape(len(x), -1).argmax(axis=1)
    theirs = np.asarray(reference(x)).reshape(len(x), -1).argmax(axis=1)
    agreement = float(np.mean(ours == theirs))
    net.calibration["agreement"] = {
        "runtime": runtime, "inputs": where, "samples": int(len(x)), "argmax": agreement,
        "why": why, "min_agreement": float(min_agreement)}
    if agreement < min_agreement:
        raise FpganetError(
            f"the model ({kind}) keeps {runtime}'s arg-max on only {100 * agreement:.1f} % of "
            f"the {len(x)} inputs of {where} on this target ({why}), below --min-agreement "
            f"{100 * min_agreement:g}")


def _litert_codes(model_path, x):
    """LiteRT's int8 outputs of an int8 TFLite model: the golden model in the ``tflite``
    mode, which gives them bit for bit (tests/test_tflite_import.py)."""
    from .model.tflite_import import load_tflite_any

    reference = load_tflite_any(model_path, config=DEFAULT_CONFIG.replace(requant_mode="tflite"))
    return run_golden(reference, reference.quantize_input(x))


def _onnxruntime_outputs(model_path, x):
    """onnxruntime's outputs of a QDQ model."""
    from .qdq_export import run_source_model

    return run_source_model(model_path, x)


def _load_tflite(model_path, calib, config):
    """A fully-int8 TFLite model with its own quantization, as a network, or a float32 one as
    a float graph for post-training quantization (:mod:`fpganet.model.tflite_import`, one read
    of the file)."""
    from .model.tflite_import import load_tflite_any

    loaded = load_tflite_any(model_path, config=config)
    if isinstance(loaded, Graph):
        if calib is None:
            # The embedded LeNet-5's MNIST calibration split is no default for it.
            raise FpganetError(f"'{model_path}' is a float32 TFLite model: a calibration file is "
                               f"required (--calib CALIB.npz with an array 'x', float32 "
                               f"[N, C, H, W], NCHW)")
        return loaded
    # The digest sits under 'tflite_sha256', not 'sha256': check and estimate rerun a float
    # source model (ONNX, in onnxruntime) whose 'sha256' still matches, and this one is not.
    loaded.source.update({"path": str(model_path.resolve()), "file": model_path.name,
                          "embedded": False, "tflite_sha256": file_sha256(model_path),
                          "prequantized": "TFLite: the model's int8 tensors' scales and zero "
                                          "points, its int8 weights and int32 biases"})
    loaded.source.setdefault("graph", model_path.stem)
    loaded.source["float_macs"] = int(loaded.macs)
    return loaded


def write_compiled(net, out_dir, program=True, n_images=1, batch=1, inputs=(), dump_ir=None,
                   engine=None):
    """Write ``net`` into ``out_dir``, built aside and renamed into place.

    With ``program`` the accelerator program and memory images for ``n_images``
    are built first (a network that does not fit is refused before anything is
    written; ``batch``: images per group of the dense layers, stored in the manifest)
    and saved beside the network (``program.hex``, ``weights.hex``, ``params.hex``,
    ``memories.npz``, the manifest's ``accelerator`` section).

    The directory also holds ``SHA256SUMS`` (:mod:`fpganet.files`), which readers
    verify. An existing ``out_dir`` is replaced only when every file in it is one
    fpganet wrote, unchanged; ``out_dir`` never holds one of ``inputs`` (the model
    and calibration files). ``dump_ir``: a text stream for the compiler's intermediate form
    after each pass. ``engine``: ``(unit, pe, simd)``, the engine's images
    (``UNIT_weights.hex``, ``UNIT_thresholds.hex``, the manifest's ``UNIT_engine``
    section) instead of the int8 program.
    """
    images, extra = None, None
    if engine is not None:
        unit, pe, simd, *host_weights = engine
        images = build_binary_images(net, pe, simd, unit, *host_weights)
        extra = {unit_files(unit)[0]: images.layout}
    elif program:
        images = build_images(net, n_images, batch=batch, dump=dump_ir)
        extra = {"accelerator": images.layout}
    with staged_directory(out_dir, inputs=inputs) as staging:
        net.save(staging, extra=extra)
        if images is not None:
            images.save(staging)
    return Path(out_dir)


def load_compiled(out_dir):
    """Read a compiled directory; see :func:`fpganet.qnet.load_network`. Its memory images, if
    it has them, are checked too (:func:`fpganet.codegen.read_images`): a directory whose
    images are not its manifest's configuration's is refused by every reader, whether or not
    that reader runs them."""
    net = load_network(out_dir)
    if is_binary_compiled(out_dir):
        read_binary_images(out_dir, net)
        return net
    try:
        read_images(out_dir)
    except NoProgramError:
        pass
    return net
