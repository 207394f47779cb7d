"""TFLite models: fully-int8 ones straight into the integer network, float32 ones into the
float IR.

A TFLite model converted with full-integer quantization (int8 activations with one scale
and zero point per tensor, int8 weights with one scale per output channel and zero point
0, int32 biases) already holds every integer fpganet's accelerator needs.
:func:`load_tflite` reads the flatbuffer with the ``tflite`` schema package (no
TensorFlow) and builds a :class:`~fpganet.qnet.QNetwork` directly, layer by layer, with
fpganet's documented arithmetic (``docs/reference/numerics.md``): the model's scales, zero points,
int8 weights and int32 biases as they are; the requantization multipliers from the float
scales ``s_in * s_w[m] / s_out`` in fpganet's 15-bit form (not TFLite's 31-bit one), the
residual add and the average pool as fpganet's :class:`~fpganet.qnet.QAdd` and
:class:`~fpganet.qnet.QAvgPool` (:func:`~fpganet.quantize.quantizer.quantize_add`,
:func:`~fpganet.quantize.quantizer.quantize_avgpool`). How each op maps and how closely
the result follows LiteRT's reference kernels: ``docs/guide/tflite.md``.

Each op is one small handler in :mod:`fpganet.model.tflite_ops`, registered for the reader
kinds that take it (:mod:`fpganet.model.tflite_registry`); the walk they share and what a
layer becomes in each kind: :mod:`fpganet.model.tflite_context`.

TFLite stores feature maps NHWC; fpganet's are NCHW. Weights are transposed to OIHW, the
network takes its inputs NHWC as LiteRT does (the host transposes them,
:func:`~fpganet.model.ir.input_to_chw`), and a FULLY_CONNECTED layer after
a flatten of an ``H x W x C`` map has its weight columns permuted from TFLite's
``(h, w, c)`` order to fpganet's ``(c, h, w)``.

A float32 model (float32 weights and activations, no quantization) is read by
:func:`load_tflite_float` into the float IR (:class:`~fpganet.model.ir.Graph`, NCHW) with
the same layouts, windows and op rules, and quantized as a float ONNX model is, with
calibration data (:func:`~fpganet.quantize.quantizer.quantize_graph`). :func:`tflite_kind`
says which reader takes a file; a model that is neither (float16 weights, dynamic-range or
partial quantization) is refused in one line saying which it is.

What the integer network cannot represent (another op, a float or int16 tensor, a
per-channel activation scale, a -128 weight code, ...) is refused in one line naming the
op or tensor; a file that is not a readable TFLite flatbuffer in one line naming the file.
"""

import os
from collections import namedtuple
from pathlib import Path

from ..errors import FpganetError, one_line
from ..files import existing_file
from . import tflite_ops  # noqa: F401  (registers the op handlers)
from .ir import Graph, fuse_relu
from .tflite_context import FloatContext, Int8Context
from .tflite_read import read_model
from .tflite_registry import supported

__all__ = ["load_tflite", "load_tflite_float", "load_tflite_any", "load_tflite_graph",
           "tflite_kind", "is_tflite", "tflite_layer_tensors", "LayerTensors",
           "TFLITE_OPS", "FLOAT_OPS"]

#: The flatbuffer file identifier of a TFLite model (bytes 4..8).
IDENTIFIER = b"TFL3"
#: Ops the importer maps (QUANTIZE/DEQUANTIZE only at the network's input/output, SOFTMAX
#: only at its end, where it is dropped).
TFLITE_OPS = supported("int8")
#: Ops the float reader maps (SOFTMAX only at the end, where it is dropped; RELU and RELU6
#: folded into the layer before them; MEAN only over H and W).
FLOAT_OPS = supported("float")
_LINEAR_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def is_tflite(path):
    """Whether ``path`` is to be read as TFLite: its suffix is ``.tflite`` or its content
    carries the TFLite flatbuffer identifier."""
    path = os.fspath(path)
    if Path(path).suffix.lower() == ".tflite":
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == IDENTIFIER


def _kind(tensors, ops, graph_inputs):
    """``"int8"`` or ``"float"``: which reader takes the model, or a one-line refusal of a
    model that is neither (float16 weights, dynamic-range or partial quantization)."""
    weights = [(op, tensors[op.inputs[1]]) for op in ops
               if op.code in _LINEAR_OPS and len(op.inputs) > 1 and op.inputs[1] >= 0]
    half = next((t for t in tensors if t.dtype == "float16"), None)
    if half is not None:
        raise FpganetError(f"{half} is float16: a float16-quantized model (weights stored as "
                           f"float16); fpganet takes fully-int8 TFLite models, or float32 ones "
                           f"with --calib")
    floats = [t for _, t in weights if t.dtype == "float32"]
    others = [t for _, t in weights if t.dtype != "float32"]
    if floats and others:
        raise FpganetError(f"a partially quantized model: weight {floats[0]} is float32, weight "
                           f"{others[0]} {others[0].dtype}; fpganet takes fully-int8 TFLite "
                           f"models, or float32 ones with --calib")
    if others:
        for op, weight in weights:
            out = tensors[op.outputs[0]] if op.outputs and op.outputs[0] >= 0 else None
            if out is not None and out.dtype == "float32":
                # Dynamic-range quantization: int8 weights, float activations quantized at run
                # time by the kernel itself.
                raise FpganetError(f"a dynamic-range quantized model: {op.code} #{op.index} has "
                                   f"{weight.dtype} weights ({weight}) and a float32 output; "
                                   f"fpganet takes fully-int8 TFLite models, or float32 ones "
                                   f"with --calib")
        return "int8"
    if floats:
        return "float"
    # No weights at all: a float input that no QUANTIZE reads makes a float model.
    source = tensors[graph_inputs[0]] if len(graph_inputs) == 1 else None
    plain = not any(op.code in ("QUANTIZE", "DEQUANTIZE") for op in ops)
    return "float" if source is not None and source.dtype == "float32" and plain else "int8"


#: A read TFLite file: its only subgraph, schema version, description and kind (:func:`_kind`).
_Parsed = namedtuple("_Parsed", "tensors ops graph_inputs graph_outputs version description kind")


def _parse(path):
    """A TFLite file as :class:`_Parsed`, or a one-line refusal naming the file."""
    path = existing_file(path, "model file")
    try:
        with open(path, "rb") as handle:
            buf = handle.read()
    except OSError as error:
        raise FpganetError(f"cannot read model file '{path}': {error.strerror}") from None
    if len(buf) < 8 or buf[4:8] != IDENTIFIER:
        raise FpganetError(f"'{path}' is not a TFLite model (no 'TFL3' flatbuffer identifier)")
    try:
        parsed = read_model(buf)
    except FpganetError as error:
        raise FpganetError(f"'{path}': {error}") from None
    except Exception as error:   # flatbuffers reads past the end: struct.error, IndexError, ...
        raise FpganetError(f"'{path}' is not a readable TFLite model ({type(error).__name__}: "
                           f"{one_line(error)[:200]}; truncated or damaged?)") from None
    tensors, ops, graph_inputs, graph_outputs, version, description = parsed
    if version != 3:
        raise FpganetError(f"'{path}' is TFLite schema version {version}; fpganet reads version 3")
    return _Parsed(*parsed, _kind(tensors, ops, graph_inputs))


def tflite_kind(path):
    """Which reader takes a TFLite model.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        ``"int8"`` (fully-int8: :func:`load_tflite`) or ``"float"`` (float32 weights and
        activations: :func:`load_tflite_float`, then post-training quantization).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is not a readable TFLite model, or it is neither (float16 weights,
        dynamic-range or partial quantization): one line saying which.
    """
    return _parse(path).kind


def load_tflite_float(path):
    """Read a float32 TFLite model into the float IR, for post-training quantization.

    TFLite's NHWC becomes the IR's NCHW: weights OHWI -> OIHW, depthwise
    ``[1, kh, kw, C*mult]`` -> ``[C*mult, 1, kh, kw]`` with ``groups = C``, a
    FULLY_CONNECTED after a flatten of an ``H x W x C`` map gets its weight columns
    permuted from ``(h, w, c)`` to ``(c, h, w)`` behind a :class:`~fpganet.model.ir.Reshape`,
    SAME/VALID padding becomes explicit pads, fused RELU/RELU6 a ``relu`` (with
    ``clip_max`` 6), as in the int8 reader.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    fpganet.model.ir.Graph
        ReLUs fused; ``input_shape`` is the TFLite input's without the batch (``(H, W, C)``,
        ``(H, W)`` or ``(K,)``) and ``input_layout`` ``"nhwc"``: inputs are given as LiteRT
        takes them; ``output_shape`` that of the logits (a final SOFTMAX dropped:
        ``dropped_output_op`` ``"SOFTMAX"``).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is not a readable TFLite model, not a float32 one, or holds something
        the IR cannot represent (one line naming the op or tensor).
    """
    parsed = _parse(path)
    if parsed.kind != "float":
        raise FpganetError(f"'{os.fspath(path)}' is a fully-int8 TFLite model, not a float one: "
                           f"it compiles with its own quantization (load_tflite)")
    return _graph(path, parsed)


def _walk(parsed):
    """The importer's walk over a read model's operators, run."""
    context = FloatContext if parsed.kind == "float" else Int8Context
    importer = context(parsed.tensors, parsed.ops, parsed.graph_inputs, parsed.graph_outputs)
    importer.run()
    return importer


#: Which tensor of a fully-int8 TFLite model holds each integer layer's codes:
#: ``input`` the network input's (after a QUANTIZE of a float input), ``layers`` one per
#: layer of the compiled network, in order, and ``names`` those layers' names.
LayerTensors = namedtuple("LayerTensors", "input layers names")


def tflite_layer_tensors(path):
    """For each layer the importer makes of a fully-int8 TFLite model, the index of the model
    tensor that holds its output (what LiteRT computes there, NHWC or ``[1, K]``): the output
    of the op it comes from, a fused activation included; a flatten's is the map it flattens,
    which fpganet reads in ``(c, h, w)`` order.

    Returns
    -------
    LayerTensors

    Raises
    ------
    fpganet.errors.FpganetError
        As :func:`load_tflite`; a float32 model (its layers are fpganet's quantization, no
        tensor of the model holds their codes).
    """
    parsed = _parse(path)
    if parsed.kind != "int8":
        raise FpganetError(f"'{os.fspath(path)}' is a float32 TFLite model: no tensor of it holds "
                           f"the integer layers' codes")
    importer = _walk(parsed)
    return LayerTensors(importer.input_tensor, list(importer.layer_tensors),
                        [layer.name for layer in importer.layers])


def _graph(path, parsed):
    """The float IR of a read model: a float32 one's with its ReLUs fused, a fully-int8 one's
    with its own quantization attached."""
    importer = _walk(parsed)
    output_name, output_shape = importer.logits_name_shape()
    graph = Graph(name=Path(path).stem, input_name=importer.input_name,
                  input_shape=importer.input_shape, input_layout="nhwc", output_name=output_name,
                  output_shape=output_shape, layers=importer.layers, notes=importer.notes,
                  dropped_output_op=importer.dropped, quantization=importer.quantization())
    return fuse_relu(graph) if parsed.kind == "float" else graph


def load_tflite(path, config=None, source=None):
    """Read a fully-int8 TFLite model into a validated integer network.

    Parameters
    ----------
    path : str or os.PathLike
    config : fpganet.config.AcceleratorConfig, optional
    source : dict, optional
        More provenance for the manifest's ``source``.

    Returns
    -------
    fpganet.qnet.QNetwork
        Its ``input_shape`` is the TFLite input's without the batch, ``input_layout``
        ``"nhwc"``: it takes inputs as LiteRT does; its ``output_shape`` is that of the
        logits (before a final SOFTMAX).

    Raises
    ------
    fpganet.errors.FpganetError
        The file is missing or not a readable TFLite flatbuffer, or the model holds
        something the integer network cannot represent (one line naming the op or tensor).
    """
    parsed = _parse(path)
    if parsed.kind != "int8":
        raise FpganetError(f"'{os.fspath(path)}' is a float32 TFLite model, not a fully-int8 "
                           f"one: it needs post-training quantization with calibration data "
                           f"(--calib)")
    return _int8_network(path, parsed, config, source)


def load_tflite_any(path, config=None, source=None):
    """A TFLite model read once: :func:`load_tflite`'s network if it is fully int8,
    :func:`load_tflite_float`'s float graph if it is float32 (``config`` and ``source`` then
    unused)."""
    parsed = _parse(path)
    if parsed.kind == "float":
        return _graph(path, parsed)
    return _int8_network(path, parsed, config, source)


def load_tflite_graph(path):
    """A TFLite model of either kind at ``path`` in the float IR (a
    :class:`~fpganet.model.ir.Graph`): a float32 model's as :func:`load_tflite_float` gives it;
    a fully-int8 model's with the model's own quantization attached
    (:attr:`~fpganet.model.ir.Graph.quantization`: its tensors' scales and zero points, weight
    scales, int8 weights and int32 biases), which :func:`~fpganet.quantize.quantize_graph`
    takes as given (as :func:`load_tflite` does). Its float weights and biases are the
    model's codes times their scales."""
    return _graph(path, _parse(path))


def _int8_network(path, parsed, config, source):
    """A fully-int8 model's graph quantized with its own quantization, as given."""
    from ..config import DEFAULT_CONFIG
    from ..quantize import quantize_graph

    config = config or DEFAULT_CONFIG
    if config.operand_width != 8:
        raise FpganetError(f"a TFLite int8 model needs operand_width 8, not {config.operand_width}")
    graph = _graph(path, parsed)
    info = {"format": "tflite", "schema_version": parsed.version,
            "description": parsed.description, "dropped_output_op": graph.dropped_output_op,
            "notes": list(graph.notes), "ops": len(parsed.ops), **(source or {})}
    return quantize_graph(graph, None, config=config, source=info,
                          calibration={"data": "scales and zero points of the TFLite model's "
                                               "int8 tensors", "method": "tflite", "samples": 0})
