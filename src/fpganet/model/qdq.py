"""Pre-quantized QDQ ONNX: the model's own quantization, read before import.

A QDQ model (onnxruntime's ``quantize_static`` with ``QuantFormat.QDQ``) marks every
quantized activation with a QuantizeLinear -> DequantizeLinear pair and stores its
weights as int8 (and biases as int32) initializers behind a DequantizeLinear; a
fake-quantized PyTorch model exported by ``torch.onnx.export`` keeps its weights in float
behind a QuantizeLinear -> DequantizeLinear pair instead (folded here into the int8 values
ONNX defines) and may share a zero point through Identity nodes.
:func:`strip_qdq` removes those nodes, leaving the float model the importer already
understands (every weight is its int8 value times its scale, exactly, in float32), and
returns what they said:

* ``activations``: tensor name -> ``(scale, zero_point, node, name in the model)``, the zero
  point as int8 (a uint8 tensor's zero point less 128: ``q8 = u8 - 128`` is the same real
  value); a tensor renamed to the graph output it stood for keeps its model name;
* ``constants``: float initializer name -> ``(q, scale, node)``, the integer values and
  their scales (one, or one per slice along the DequantizeLinear's axis).

:func:`attach_quantization` then maps them onto the imported layers
(:attr:`fpganet.model.ir.Graph.quantization`); the quantizer uses them as given
(``docs/reference/numerics.md``, "Pre-quantized QDQ models"). What fpganet's integer network cannot
represent is refused in one line naming the node.
"""

from pathlib import Path

import numpy as np

from ..errors import FpganetError, one_line
from .ir import GRAPH_INPUT, LINEAR_LAYERS, REQUANTIZING_LAYERS, layer_inputs

__all__ = ["strip_qdq", "attach_quantization", "QdqInfo", "onnxruntime_qdq"]

_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


class QdqInfo:
    """The quantization a QDQ model carries (see the module docstring)."""

    def __init__(self):
        self.activations = {}
        self.constants = {}


def _name(node):
    output = node.output[0] if node.output else "?"
    return f"{node.op_type} '{node.name or output}'"


def strip_qdq(model):
    """Remove the QuantizeLinear/DequantizeLinear nodes of a QDQ model.

    Parameters
    ----------
    model : onnx.ModelProto

    Returns
    -------
    model : onnx.ModelProto
        The float model (a copy), or ``model`` itself when it has no QuantizeLinear.
    info : QdqInfo or None
        None for a float model.

    Raises
    ------
    fpganet.errors.FpganetError
        A Q/DQ node outside the patterns above, a per-channel activation scale, an
        integer type other than int8/uint8 for activations, a zero or non-finite scale.
    """
    import onnx

    if not any(node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx")
               for node in model.graph.node):
        return model, None
    model = onnx.ModelProto.FromString(model.SerializeToString())
    strip = _QdqStrip(model.graph)
    strip.fold_weight_quantizers()
    strip.dequantize_constants()
    strip.remove_activation_pairs()
    strip.refuse_stray_dequantizers()
    strip.rewire()
    return model, strip.info


def _constant_arrays(graph):
    """Initializer and Constant name -> array, with the Identity aliases of initializers."""
    from onnx import numpy_helper

    initializers = {}
    for tensor in graph.initializer:
        try:
            initializers[tensor.name] = numpy_helper.to_array(tensor)
        except Exception as error:
            raise FpganetError(f"initializer '{tensor.name}' cannot be read "
                               f"({one_line(error)[:200]})") from None
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for attribute in node.attribute:
                if attribute.name == "value":
                    try:
                        initializers[node.output[0]] = numpy_helper.to_array(attribute.t)
                    except Exception:
                        pass   # the importer refuses it with its own message
        elif (node.op_type == "Identity" and node.input and node.output
              and node.input[0] in initializers):
            # torch.onnx.export shares one zero point among Q/DQ nodes through Identity nodes.
            initializers[node.output[0]] = initializers[node.input[0]]
    return initializers


def _qdq_params(node, initializers, per_tensor):
    """``(scale, zero_point)`` of a Q/DQ node, checked: float32 finite positive scales, one
    (``per_tensor``) or one zero point per scale; a missing zero point is 0 of the type
    ``output_dtype`` names (uint8 by default)."""
    if node.domain not in ("", "ai.onnx") or len(node.input) < 2 or len(node.output) != 1:
        raise FpganetError(f"{_name(node)} has {len(node.input)} input(s) and "
                           f"{len(node.output)} output(s); expected x, scale[, zero_point]")
    for position, name in enumerate(node.input[1:3]):
        if (name or position == 0) and name not in initializers:
            raise FpganetError(f"{_name(node)}: its scale or zero point '{name}' is not a "
                               f"constant")
    scale = np.asarray(initializers[node.input[1]])
    zp_name = node.input[2] if len(node.input) > 2 else ""
    if zp_name:
        zero_point = np.asarray(initializers[zp_name])
    else:
        from onnx import helper

        to = next((a.i for a in node.attribute if a.name == "output_dtype"), 0)
        try:
            dtype = helper.tensor_dtype_to_np_dtype(to) if to else np.uint8
        except Exception:
            dtype = np.float32   # refused by the caller as not int8/uint8
        zero_point = np.zeros((), dtype)
    if scale.dtype != np.float32 or not scale.size:
        raise FpganetError(f"{_name(node)}: its scale is {scale.dtype} {list(scale.shape)}; "
                           f"expected float32")
    if not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        raise FpganetError(f"{_name(node)}: its scale must be finite and positive")
    if per_tensor and (scale.size != 1 or zero_point.size != 1):
        raise FpganetError(f"{_name(node)} quantizes an activation per channel ({scale.size} "
                           f"scales); the accelerator has one scale per activation tensor")
    if zero_point.size not in (1, scale.size):
        raise FpganetError(f"{_name(node)}: {zero_point.size} zero points for "
                           f"{scale.size} scales")
    return scale.astype(np.float32), zero_point


class _QdqStrip:
    """One :func:`strip_qdq`: the graph's constants and readers, and the steps, in order.

    Each step marks the nodes it takes in ``removed``; :meth:`rewire` then drops them and
    points their readers at the tensors they stood for (``alias``).
    """

    def __init__(self, graph):
        self.graph = graph
        self.info = QdqInfo()
        self.initializers = _constant_arrays(graph)
        self.consumers = {}
        for node in graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.graph_outputs = {output.name for output in graph.output}
        self.removed = set()
        self.alias = {}         # DequantizeLinear output -> the tensor it stands for

    def params(self, node, per_tensor):
        return _qdq_params(node, self.initializers, per_tensor)

    def fold_weight_quantizers(self):
        """Fold a float constant's QuantizeLinear into its integer constant.

        torch.onnx.export writes a fake-quantized weight as float constant -> QuantizeLinear
        -> DequantizeLinear: the QuantizeLinear becomes the integer constant ONNX defines
        (x / scale rounded half to even, plus the zero point, saturated), which
        :meth:`dequantize_constants` then reads like any stored int8 weight.
        """
        initializers = self.initializers
        for index, node in enumerate(self.graph.node):
            source = node.input[0] if node.op_type == "QuantizeLinear" and node.input else None
            if (source not in initializers or not node.output
                    or not np.issubdtype(np.asarray(initializers[source]).dtype, np.floating)):
                continue   # not a float constant's QuantizeLinear: the activation rules apply
            readers = self.consumers.get(node.output[0], [])
            other = next((r for r in readers if r.op_type != "DequantizeLinear"), None)
            if other is not None or not readers or node.output[0] in self.graph_outputs:
                raise FpganetError(f"{_name(node)} quantizes the constant '{source}'"
                                   + (f" and feeds {_name(other)}" if other else "")
                                   + "; only a DequantizeLinear may read its output")
            scale, zero_point = self.params(node, per_tensor=False)
            if zero_point.dtype not in (np.int8, np.uint8):
                raise FpganetError(f"{_name(node)} quantizes to {zero_point.dtype}; only int8 "
                                   f"weights are supported")
            x = np.asarray(initializers[source], dtype=np.float32)
            limits = np.iinfo(zero_point.dtype)
            with np.errstate(all="ignore"):
                codes = np.rint(x / _along_axis(node, scale, x.shape))
                codes = codes + _along_axis(node, zero_point.astype(np.float32), x.shape)
            if not np.all(np.isfinite(codes)):
                raise FpganetError(f"{_name(node)} quantizes a constant holding NaN or infinity")
            initializers[node.output[0]] = np.clip(codes, limits.min, limits.max).astype(
                zero_point.dtype)
            self.removed.add(index)

    def dequantize_constants(self):
        """Replace each constant's DequantizeLinear by a float initializer holding its exact
        value, keeping the integer values and scales in ``info.constants``."""
        from onnx import numpy_helper

        for index, node in enumerate(self.graph.node):
            if node.op_type != "DequantizeLinear" or not node.input \
                    or node.input[0] not in self.initializers:
                continue
            scale, zero_point = self.params(node, per_tensor=False)
            q = np.asarray(self.initializers[node.input[0]])
            if q.dtype not in (np.int8, np.uint8, np.int32):
                raise FpganetError(f"{_name(node)} dequantizes {q.dtype}; only int8 weights and "
                                   f"int32 biases are supported")
            if np.any(zero_point != 0):
                raise FpganetError(f"{_name(node)}: {q.dtype} constant with a nonzero zero "
                                   f"point; the accelerator's weights are symmetric (zero point 0)")
            values = (q.astype(np.float32) * _along_axis(node, scale, q.shape)).astype(np.float32)
            output = node.output[0]
            self.info.constants[output] = (q, scale.ravel(), _name(node))
            self.graph.initializer.append(numpy_helper.from_array(values, output))
            self.initializers[output] = values
            self.removed.add(index)

    def remove_activation_pairs(self):
        """Take each activation's QuantizeLinear -> DequantizeLinear pair out, recording its
        scale and zero point (int8) in ``info.activations``."""
        for index, node in enumerate(self.graph.node):
            if node.op_type != "QuantizeLinear" or index in self.removed:
                continue
            scale, zero_point = self.params(node, per_tensor=True)
            if zero_point.dtype not in (np.int8, np.uint8):
                raise FpganetError(f"{_name(node)} quantizes to {zero_point.dtype}; the "
                                   f"accelerator's activations are int8 (uint8 is shifted by 128)")
            zp = int(zero_point.ravel()[0]) - (128 if zero_point.dtype == np.uint8 else 0)
            source, output = node.input[0], node.output[0]
            readers = self.consumers.get(output, [])
            if output in self.graph_outputs or not readers:
                raise FpganetError(f"{_name(node)}: its output must feed DequantizeLinear nodes "
                                   f"(a QuantizeLinear -> DequantizeLinear pair)")
            for reader in readers:
                self._remove_dequantizer(node, reader, scale, zero_point, source)
            self.removed.add(index)
            previous = self.info.activations.get(source)
            value = (float(scale.ravel()[0]), zp, _name(node), source)
            if previous is not None and previous[:2] != value[:2]:
                raise FpganetError(f"{previous[2]} and {value[2]} quantize '{source}' differently")
            self.info.activations[source] = value

    def _remove_dequantizer(self, quantizer, reader, scale, zero_point, source):
        """Remove the DequantizeLinear ``reader`` of an activation's QuantizeLinear, which must
        use the same scale and zero point."""
        output = quantizer.output[0]
        if reader.op_type != "DequantizeLinear" or reader.input[0] != output:
            raise FpganetError(f"{_name(quantizer)} feeds {_name(reader)}; only a "
                               f"DequantizeLinear may read a quantized activation")
        r_scale, r_zero_point = self.params(reader, per_tensor=True)
        # Without a zero point a DequantizeLinear takes its input's type (the Q's).
        typed = len(reader.input) > 2 and reader.input[2]
        if (r_scale.ravel()[0] != scale.ravel()[0]
                or (typed and r_zero_point.dtype != zero_point.dtype)
                or r_zero_point.ravel()[0] != zero_point.ravel()[0]):
            raise FpganetError(f"{_name(reader)} dequantizes with another scale or zero point "
                               f"than {_name(quantizer)}")
        self.removed.add(next(i for i, n in enumerate(self.graph.node) if n is reader))
        self.alias[reader.output[0]] = source

    def refuse_stray_dequantizers(self):
        for index, node in enumerate(self.graph.node):
            if node.op_type == "DequantizeLinear" and index not in self.removed:
                raise FpganetError(f"{_name(node)} reads '{node.input[0] if node.input else ''}', "
                                   f"neither a constant nor the output of a QuantizeLinear")

    def resolve(self, name):
        """The tensor a chain of removed DequantizeLinear outputs stands for."""
        seen = set()
        while name in self.alias and name not in seen:
            seen.add(name)
            name = self.alias[name]
        return name

    def rewire(self):
        """Drop the removed nodes; their readers read the tensors they stood for, and a graph
        output that a DequantizeLinear produced passes its name to its source tensor."""
        graph, info = self.graph, self.info
        kept = [node for index, node in enumerate(graph.node) if index not in self.removed]
        rename = {}
        for output in graph.output:
            if output.name in self.alias:
                rename[self.resolve(output.name)] = output.name
        for name, new in rename.items():
            if name in info.activations:
                info.activations[new] = info.activations.pop(name)
            if name in {i.name for i in graph.input}:
                raise FpganetError(f"the graph output '{new}' is the quantized graph input")
        for node in kept:
            for position, name in enumerate(node.input):
                target = self.resolve(name) if name in self.alias else name
                node.input[position] = rename.get(target, target)
            for position, name in enumerate(node.output):
                node.output[position] = rename.get(name, name)
        del graph.node[:]
        graph.node.extend(kept)
        # Consumers of a dropped node's output are gone; its stale shape annotations would
        # contradict the renamed tensors.
        stale = set(self.alias) | set(rename)
        keep_info = [v for v in graph.value_info if v.name not in stale]
        del graph.value_info[:]
        graph.value_info.extend(keep_info)


def _along_axis(node, values, shape):
    """A Q/DQ node's scales (or zero points) shaped to broadcast over a constant of ``shape``:
    one, or one per slice along the node's ``axis`` (default 1)."""
    values = np.asarray(values)
    if values.size == 1:
        return values.reshape(())
    axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 1)
    if not -len(shape) <= axis < len(shape) or shape[axis] != values.size:
        raise FpganetError(f"{_name(node)}: {values.size} scales along axis {axis} of a "
                           f"{list(shape)} tensor")
    broadcast = [1] * len(shape)
    broadcast[axis] = values.size
    return values.reshape(broadcast)


def attach_quantization(graph, info, tensor_layers, node_layers, ignored=None,
                        quantizer="QuantizeLinear"):
    """Map a :class:`QdqInfo` onto the layers of an imported graph.

    Parameters
    ----------
    graph : fpganet.model.ir.Graph
        ReLUs fused; its ``quantization`` is set and it is returned.
    info : QdqInfo
    tensor_layers : dict
        ONNX tensor name -> the layer object holding its data (None: the graph input),
        for tensors with no fold still pending (a ReLU's already resolved to its source).
    node_layers : list of tuple
        ``(node description, constant input names, layers the node created or changed)``.
    ignored : str, optional
        A tensor whose quantization does not matter (the output of a dropped final Softmax).
    quantizer : str
        The op that quantizes activations in the model, for messages.

    Returns
    -------
    fpganet.model.ir.Graph

    Raises
    ------
    fpganet.errors.FpganetError
        A quantized tensor the accelerator fuses away with another scale, a requantizing
        layer without an output quantization, weights changed by a fold.
    """
    index_of = {id(layer): index for index, layer in enumerate(graph.layers)}

    def layer_index(layer):
        return GRAPH_INPUT if layer is None else index_of.get(id(layer))

    act = _activation_parameters(graph, info, tensor_layers, layer_index, ignored, quantizer)
    _pass_through_parameters(graph.layers, act, quantizer)
    scales = _weight_scales(graph.layers, info, node_layers, layer_index)
    graph.quantization = {"activations": {index: value[:2] for index, value in act.items()},
                          "tensors": {index: value[3] for index, value in act.items()
                                      if value[3] is not None},
                          "weight_scales": scales}
    return graph


def _activation_parameters(graph, info, tensor_layers, layer_index, ignored, quantizer):
    """Layer index (-1: the input) -> ``(scale, zero point, node, tensor)`` of the activations
    the model quantizes; the input must be one."""
    layers = graph.layers
    act = {}
    for tensor, (scale, zp, node, original) in info.activations.items():
        if tensor == ignored:
            continue
        if tensor not in tensor_layers:
            raise FpganetError(f"{node} quantizes '{tensor}', a tensor the accelerator does not "
                               f"hold (a fold is still pending there, or it is off the data path)")
        index = layer_index(tensor_layers[tensor])
        if index is None:
            raise FpganetError(f"{node} quantizes '{tensor}', which the accelerator fuses away")
        if index in act and act[index][:2] != (scale, zp):
            raise FpganetError(f"{act[index][2]} and {node} quantize one accelerator tensor "
                               f"differently ('{tensor}' is fused into the output of "
                               f"'{_layer_label(layers, index)}')")
        act.setdefault(index, (scale, zp, node, original))   # the first: before any reorder
    if GRAPH_INPUT not in act:
        raise FpganetError(f"the graph input '{graph.input_name}' has no {quantizer}; "
                           f"{_model_kind(quantizer)} model must quantize its input")
    return act


def _model_kind(quantizer):
    return "a QDQ" if quantizer == "QuantizeLinear" else "a QONNX"


def _pass_through_parameters(layers, act, quantizer="QuantizeLinear"):
    """Give pass-through layers their input's parameters in ``act`` (the model must agree);
    every requantizing layer must have its own."""
    for index, layer in enumerate(layers):
        source = layer_inputs(layers, index)[0]
        if isinstance(layer, REQUANTIZING_LAYERS):
            if index not in act:
                raise FpganetError(f"layer '{layer.name}' has no {quantizer} on its output; "
                                   f"every Conv, Gemm, Add and AveragePool output of "
                                   f"{_model_kind(quantizer)} model must be quantized")
            continue
        if source not in act:
            continue
        if index in act and act[index][:2] != act[source][:2]:
            raise FpganetError(f"{act[index][2]} quantizes the output of '{layer.name}' "
                               f"({type(layer).__name__}) with another scale or zero point than "
                               f"its input ({act[source][2]}); the accelerator passes them "
                               f"through")
        if index not in act:
            act[index] = act[source][:3] + (None,)


def _weight_scales(layers, info, node_layers, layer_index):
    """Linear layer index -> its per-output-channel weight scales; every linear layer's
    weights must be the model's int8 values."""
    weights = {}
    for node, inputs, touched in node_layers:
        quantized = [name for name in inputs if name in info.constants
                     and info.constants[name][0].dtype != np.int32]
        if not quantized:
            continue
        targets = [layer for layer in touched if isinstance(layer, LINEAR_LAYERS)]
        index = layer_index(targets[0]) if len(targets) == 1 else None
        if index is None:
            raise FpganetError(f"{node} reads the quantized weight '{quantized[0]}' but makes no "
                               f"single Conv or dense layer of it")
        weights[index] = (info.constants[quantized[0]], node)
    scales = {}
    for index, layer in enumerate(layers):
        if not isinstance(layer, LINEAR_LAYERS):
            continue
        if index not in weights:
            raise FpganetError(f"layer '{layer.name}' has float weights in a QDQ model; its "
                               f"weights must come through a DequantizeLinear")
        (q, scale, dq_node), node = weights[index]
        scales[index] = _channel_scales(layer, q, scale, dq_node)
    return scales


def _layer_label(layers, index):
    return "the input" if index == GRAPH_INPUT else layers[index].name


def _channel_scales(layer, q, scale, node):
    """Per-output-channel float32 scales under which the layer's float weights are exactly
    the model's int8 values (a fold that changed them, or scales along another axis, fail)."""
    weight = layer.weight
    m = weight.shape[0]
    if q.dtype != np.int8:
        raise FpganetError(f"{node} dequantizes {q.dtype} weights; the accelerator's are int8")
    if scale.size == 1:
        s_w = np.full(m, scale[0], np.float32)
    elif scale.size == m:
        s_w = scale.astype(np.float32)
    else:
        raise FpganetError(f"{node}: {scale.size} weight scales for layer '{layer.name}' with "
                           f"{m} output channels; per-channel scales must be per output channel")
    shape = (m,) + (1,) * (weight.ndim - 1)
    with np.errstate(all="ignore"):
        codes = np.rint(weight.astype(np.float64) / s_w.reshape(shape).astype(np.float64))
    exact = np.all(np.abs(codes) <= 127) and np.array_equal(
        (codes.astype(np.float32) * s_w.reshape(shape)).astype(np.float32), weight)
    if not exact or not np.array_equal(np.sort(codes.ravel()), np.sort(q.ravel().astype(np.float64))):
        if q.size and q.min() < -127:
            raise FpganetError(f"{node}: int8 weights reach -128; the accelerator's weights are "
                               f"symmetric, -127..127")
        raise FpganetError(f"{node}: the weights of layer '{layer.name}' are not the model's int8 "
                           f"values times one scale per output channel (something was folded "
                           f"into them, or the scales run along another axis)")
    return s_w


def onnxruntime_qdq(model, out, calib_x, per_channel=False, activation_type="uint8", batch=None):
    """Quantize a float ONNX model with onnxruntime's ``quantize_static`` into QDQ format.

    A reference producer of pre-quantized models for tests and benchmarks (onnxruntime
    is an optional dependency): int8 symmetric weights, activations ``activation_type``.

    Parameters
    ----------
    model, out : str or os.PathLike
        Float model read, QDQ model written.
    calib_x : numpy.ndarray
        float32 calibration inputs [N, ...].
    per_channel : bool
        Per-output-channel weight scales.
    activation_type : {"uint8", "int8"}
        onnxruntime's default for QDQ is uint8.
    batch : int, optional
        Inputs per calibration run (a model with a fixed batch size needs it); default 1.
    """
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    float_model = onnx.load(str(model))
    name = float_model.graph.input[0].name
    opset = max((entry.version for entry in float_model.opset_import
                 if entry.domain in ("", "ai.onnx")), default=0)
    if opset < 13:
        # Per-channel DequantizeLinear (its axis) needs opset 13; quantize_static only
        # raises an older model to 11.
        from onnx import version_converter

        float_model = version_converter.convert_version(float_model, 13)
    source = Path(out).with_suffix(".float.onnx")
    onnx.save(float_model, str(source))
    calib_x = np.asarray(calib_x, dtype=np.float32)
    step = batch or 1

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{name: calib_x[i:i + step]}
                               for i in range(0, len(calib_x) - step + 1, step)])

        def get_next(self):
            return next(self.feeds, None)

    types = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}
    try:
        quantize_static(str(source), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=per_channel, activation_type=types[activation_type],
                        weight_type=QuantType.QInt8)
    finally:
        source.unlink()
