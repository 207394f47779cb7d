"""The quantized network as ONNX for onnxruntime, and the checks against it.

:func:`to_onnx` writes the integer network with standard ONNX quantized ops:
``QuantizeLinear`` (the host's input quantization), ``QLinearConv`` for every
conv and dense layer (a dense layer is a 1x1 convolution on a ``[N, K, 1, 1]``
tensor, exactly as in our IR; grouped and depthwise convolutions with its
``group``), ``Clip`` for a folded ReLU, int8 ``MaxPool`` and ``Reshape``, and
``DequantizeLinear`` for the logits. A residual add and an average pool are
written in QDQ form: ``DequantizeLinear`` of the int8 inputs, the float
``Add`` / ``AveragePool``, ``QuantizeLinear`` to the output scale (and
``Clip`` for a folded ReLU), which is what they compute in real numbers.

onnxruntime computes the same exact int32 accumulators (its QLinearConv takes
the unfolded bias and subtracts the input zero point itself) but requantizes
differently: it multiplies in float32 by ``s_in * s_w[m] / s_out`` and rounds
half to even, where the golden model uses the 15-bit fixed-point multiplier
and rounds half up. A residual add weighs its inputs by small integers in the
ratio of their scales, whose error is up to about 0.4 % of a term.
:func:`compare_layers` feeds both the *same* int8 input for each layer and
measures how often the int8 outputs differ: they may differ by one LSB where a
rounding boundary lies between the exact real result and the golden model's
fixed-point one (or exactly on it, where the two tie-breaking rules part), and
it counts those differences apart.
"""

from dataclasses import dataclass

import numpy as np

from .errors import FpganetError, one_line
from .golden import accumulate, run_golden
from .ops import avgpool
from .model.ir import input_transpose
from .qnet import NETWORK_INPUT, QAdd, QAvgPool, QConv, QMaxPool, QReshape, layer_kind

__all__ = ["to_onnx", "layer_to_onnx", "ort_session", "run_onnx", "compare_layers",
           "LayerAgreement", "CHECK_BOUND", "at_boundary", "double_rounding_room", "run_source_model", "OPSET"]

OPSET = 13
_IR_VERSION = 7


def _helpers():
    # Imported here, not at the top: onnx is slow to import.
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    return onnx, TensorProto, helper, numpy_helper


def _layer_nodes(layer, index, source, target, initializers):
    """ONNX nodes computing one integer layer from tensor ``source`` (a QAdd: a list of two)
    into ``target``."""
    _, _, helper, numpy_helper = _helpers()
    prefix = f"l{index:02d}"

    def constant(name, value):
        initializers.append(numpy_helper.from_array(np.asarray(value), f"{prefix}.{name}"))
        return f"{prefix}.{name}"

    def requantize_to_target(real, s_out, zp_out, lo, hi):
        """QuantizeLinear of float tensor ``real`` into ``target``, then the clamp if any."""
        quantized = target if lo == -128 and hi == 127 else f"{prefix}.q"
        nodes = [helper.make_node("QuantizeLinear", [real, constant("y_scale", np.float32(s_out)),
                                                     constant("y_zero_point", np.int8(zp_out))],
                                  [quantized], name=f"{prefix}.quantize")]
        if quantized != target:
            nodes.append(helper.make_node("Clip", [quantized, constant("lo", np.int8(lo)),
                                                   constant("hi", np.int8(hi))], [target],
                                          name=f"{prefix}.clip"))
        return nodes

    if isinstance(layer, QAdd):
        dequantized = []
        nodes = []
        for tag, name, scale, zp in (("a", source[0], layer.s_a, layer.zp_a),
                                     ("b", source[1], layer.s_b, layer.zp_b)):
            dequantized.append(f"{prefix}.{tag}")
            nodes.append(helper.make_node(
                "DequantizeLinear", [name, constant(f"{tag}_scale", np.float32(scale)),
                                     constant(f"{tag}_zero_point", np.int8(zp))],
                [dequantized[-1]], name=f"{prefix}.dequantize_{tag}"))
        nodes.append(helper.make_node("Add", dequantized, [f"{prefix}.sum"],
                                      name=f"{prefix}.{layer.name}"))
        return nodes + requantize_to_target(f"{prefix}.sum", layer.s_out, layer.zp_out, layer.lo,
                                            layer.hi)
    if isinstance(layer, QAvgPool):
        nodes = [helper.make_node("DequantizeLinear", [source, constant("x_scale", np.float32(layer.s_in)),
                                                       constant("x_zero_point", np.int8(layer.zp_in))],
                                  [f"{prefix}.x"], name=f"{prefix}.dequantize"),
                 helper.make_node("AveragePool", [f"{prefix}.x"], [f"{prefix}.mean"],
                                  name=f"{prefix}.{layer.name}", kernel_shape=list(layer.kernel),
                                  strides=list(layer.stride), pads=list(layer.pads),
                                  count_include_pad=1)]
        return nodes + requantize_to_target(f"{prefix}.mean", layer.s_out, layer.zp_out, layer.lo,
                                            layer.hi)

    if isinstance(layer, QConv):
        m = layer.out_shape[0]
        conv_out = target if layer.lo == -128 and layer.hi == 127 else f"{prefix}.conv"
        inputs = [source, constant("x_scale", np.float32(layer.s_in)),
                  constant("x_zero_point", np.int8(layer.zp_in)),
                  constant("w", layer.weight), constant("w_scale", layer.s_w.astype(np.float32)),
                  constant("w_zero_point", np.zeros(m, np.int8)),
                  constant("y_scale", np.float32(layer.s_out)),
                  constant("y_zero_point", np.int8(layer.zp_out)),
                  constant("bias", layer.bias_unfolded.astype(np.int32))]
        nodes = [helper.make_node("QLinearConv", inputs, [conv_out], name=f"{prefix}.{layer.name}",
                                  kernel_shape=list(layer.kernel), strides=list(layer.stride),
                                  pads=list(layer.pads), dilations=[1, 1], group=layer.groups)]
        if conv_out != target:
            nodes.append(helper.make_node("Clip", [conv_out, constant("lo", np.int8(layer.lo)),
                                                   constant("hi", np.int8(layer.hi))], [target],
                                          name=f"{prefix}.clip"))
        return nodes
    if isinstance(layer, QMaxPool):
        return [helper.make_node("MaxPool", [source], [target], name=f"{prefix}.{layer.name}",
                                 kernel_shape=list(layer.kernel), strides=list(layer.stride),
                                 pads=list(layer.pads))]
    if isinstance(layer, QReshape):
        shape = constant("shape", np.array([-1, *layer.out_shape], np.int64))
        return [helper.make_node("Reshape", [source, shape], [target], name=f"{prefix}.{layer.name}")]
    raise TypeError(f"unknown layer {layer!r}")


def _model(nodes, inputs, outputs, initializers, name):
    onnx, _, helper, _ = _helpers()
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="fpganet")
    model.ir_version = _IR_VERSION
    onnx.checker.check_model(model)
    return model


def to_onnx(net):
    """The whole quantized network as an ONNX model onnxruntime runs.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork

    Returns
    -------
    onnx.ModelProto
        Input ``net.input_name`` float32 [N, *input_shape] in the model's layout; outputs
        ``q`` (int8 [N, *output_shape], the raw network output) and ``logits`` (float32,
        dequantized).
    """
    _, TensorProto, helper, numpy_helper = _helpers()
    initializers = [numpy_helper.from_array(np.float32(net.input_scale), "input_scale"),
                    numpy_helper.from_array(np.int8(net.input_zp), "input_zero_point"),
                    numpy_helper.from_array(np.array([-1, *net.input_chw], np.int64), "input_chw"),
                    numpy_helper.from_array(np.array([-1, *net.output_shape], np.int64), "output_dims"),
                    numpy_helper.from_array(np.float32(net.output_scale), "output_scale"),
                    numpy_helper.from_array(np.int8(net.output_zp), "output_zero_point")]
    # The model's layout converted as QNetwork.quantize_input does: NHWC transposed, then reshaped.
    perm = input_transpose(net.input_shape, net.input_layout)
    layout = [] if perm is None else [helper.make_node("Transpose", ["q_input"], ["q_input_chw"],
                                                       perm=list(perm), name="input_layout")]
    nodes = [helper.make_node("QuantizeLinear", [net.input_name, "input_scale", "input_zero_point"],
                              ["q_input"], name="quantize_input"), *layout,
             helper.make_node("Reshape", ["q_input_chw" if layout else "q_input", "input_chw"],
                              ["t_input"], name="input_chw")]
    current = "t_input"
    for index, layer in enumerate(net.layers):
        target = f"t{index:02d}"
        sources = ["t_input" if s == NETWORK_INPUT else f"t{s:02d}" for s in net.layer_inputs(index)]
        nodes += _layer_nodes(layer, index, sources if isinstance(layer, QAdd) else sources[0],
                              target, initializers)
        current = target
    nodes += [helper.make_node("Reshape", [current, "output_dims"], ["q"], name="output_shape"),
              helper.make_node("DequantizeLinear", ["q", "output_scale", "output_zero_point"],
                               ["logits"], name="dequantize_output")]
    inputs = [helper.make_tensor_value_info(net.input_name, TensorProto.FLOAT, ["N", *net.input_shape])]
    outputs = [helper.make_tensor_value_info("q", TensorProto.INT8, ["N", *net.output_shape]),
               helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", *net.output_shape])]
    return _model(nodes, inputs, outputs, initializers, "fpganet_int8")


def layer_to_onnx(layer, index=0):
    """One integer layer as an ONNX model: int8 ``x`` [N, *in_shape] (a QAdd also ``x1``) ->
    int8 ``y`` [N, *out_shape]."""
    _, TensorProto, helper, _ = _helpers()
    initializers = []
    names = ["x", "x1"] if isinstance(layer, QAdd) else ["x"]
    nodes = _layer_nodes(layer, index, names if isinstance(layer, QAdd) else "x", "y", initializers)
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT8, ["N", *layer.in_shape])
              for name in names]
    outputs = [helper.make_tensor_value_info("y", TensorProto.INT8, ["N", *layer.out_shape])]
    return _model(nodes, inputs, outputs, initializers, f"fpganet_layer_{index}")


def ort_session(model):
    """An onnxruntime CPU session with graph optimizations off (no fusions that change numerics)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def run_onnx(model, feeds):
    """Run a model (ModelProto, bytes or path) once; returns the list of outputs."""
    return ort_session(model).run(None, feeds)


#: What ``check`` accepts of a layer against onnxruntime: ``(min_equal, max_diff, text)``
#: (:meth:`LayerAgreement.passes`).
CHECK_BOUND = (0.99, 1, ">= 99 % equal or 1 LSB apart across a rounding boundary, <= 1 LSB")


@dataclass
class LayerAgreement:
    """How one layer's int8 outputs compare between the golden model and onnxruntime.

    Attributes
    ----------
    index : int
    name : str
    type : str
        "conv", "dwconv" (depthwise), "gconv" (grouped), "dense", "maxpool", "reshape", "add"
        or "avgpool".
    elements : int
        Output values compared.
    equal : int
        Values that are identical.
    max_abs_diff : int
        Largest difference in LSB.
    diff_counts : dict
        ``{difference: count}`` for the nonzero differences (golden minus onnxruntime).
    at_boundary : int
        Differences of 1 LSB where a rounding boundary lies between the layer's exact real
        result and the golden model's fixed-point result, or on the exact result (a tie,
        which fpganet rounds half up and onnxruntime half to even): the golden model's
        documented approximation, not a fault.
    """

    index: int
    name: str
    type: str
    elements: int
    equal: int
    max_abs_diff: int
    diff_counts: dict
    at_boundary: int = 0

    @classmethod
    def measure(cls, index, layer, golden, actual, boundary):
        """The agreement of a layer's golden int8 outputs with the reference's ``actual``;
        ``boundary``: where they differ across a rounding boundary (:func:`at_boundary`)."""
        diff = golden.astype(np.int16) - actual.astype(np.int16)
        values, counts = np.unique(diff[diff != 0], return_counts=True)
        return cls(index=index, name=layer.name, type=layer_kind(layer), elements=int(diff.size),
                   equal=int(np.count_nonzero(diff == 0)),
                   max_abs_diff=int(np.abs(diff).max(initial=0)),
                   diff_counts={int(v): int(c) for v, c in zip(values, counts)},
                   at_boundary=int(np.count_nonzero(boundary)))

    @property
    def equal_fraction(self):
        return self.equal / self.elements if self.elements else 1.0

    def passes(self, min_equal=CHECK_BOUND[0], max_diff=CHECK_BOUND[1]):
        """Equal (or 1 LSB apart at a rounding boundary) on ``min_equal`` of the values, never
        more than ``max_diff`` LSB apart."""
        agreeing = (self.equal + self.at_boundary) / self.elements if self.elements else 1.0
        return agreeing >= min_equal and self.max_abs_diff <= max_diff


#: Room for onnxruntime's float32 arithmetic around a rounding boundary, in output LSB.
_FLOAT32_ROOM = 1e-3


def _exact_and_fixed(layer, feeds, mode):
    """The layer's result before rounding and clamping, in output codes: ``(exact, fixed,
    room)``, the real value the scales define, the golden model's fixed-point value, and how
    far its first rounding (TFLite's double rounding) may move from that value (0, one, or
    one per output channel); None for a layer without arithmetic."""
    a = feeds["x"].astype(np.int64)
    if isinstance(layer, QConv):
        acc = accumulate(layer, feeds["x"]).astype(np.float64)
        scale = (np.float64(layer.s_in) * np.asarray(layer.s_w, np.float64)
                 / np.float64(layer.s_out)).reshape(1, -1, *[1] * (acc.ndim - 2))
        exact = layer.zp_out + acc * scale
        fixed = layer.zp_out + acc * _multiplier(layer.mult, layer.shift, mode, acc.ndim)
        single = layer.single_rounding
    elif isinstance(layer, QAdd):
        a, b = a - layer.zp_a, feeds["x1"].astype(np.int64) - layer.zp_b
        real = np.float64(layer.s_a) * a + np.float64(layer.s_b) * b
        exact = layer.zp_out + real / np.float64(layer.s_out)
        acc = layer.w_a * a + layer.w_b * b
        fixed = layer.zp_out + acc * _multiplier(layer.mult, layer.shift, mode)
        single = layer.single_rounding
    elif isinstance(layer, QAvgPool):
        sums = avgpool(a - layer.zp_in, layer.kernel, layer.stride, layer.pads)
        scale = np.float64(layer.s_in) / (np.float64(layer.s_out) * layer.count)
        exact = layer.zp_out + sums * scale
        acc = sums + (layer.zp_in * layer.count + layer.bias)
        fixed = layer.requant_zp + acc * _multiplier(layer.mult, layer.shift, mode)
        single = layer.sum_codes
    else:
        return None
    double = mode == "tflite" and not single
    return exact, fixed, double_rounding_room(layer.shift) if double else 0.0


def double_rounding_room(shift):
    """How far TFLite's double rounding (``MultiplyByQuantizedMultiplier`` with the exponent
    ``shift``, one or per channel) may move a value before its final rounding, in output
    steps: its first rounding is to ``2**-right`` of a step, ``right = max(-shift, 0)``."""
    right = np.maximum(-np.asarray(shift, np.float64), 0)
    return np.where(right > 0, 0.5 * 2.0 ** -right, 0.0)


def _multiplier(mult, shift, mode, ndim=None):
    """The real factor of a fixed-point ``(mult, shift)`` (per channel on axis 1 when
    ``ndim`` is given)."""
    mult, shift = np.asarray(mult, np.float64), np.asarray(shift, np.float64)
    factor = mult * 2.0 ** (shift - 31) if mode == "tflite" else mult * 2.0 ** -shift
    return factor.reshape(1, -1, *[1] * (ndim - 2)) if ndim and factor.ndim else factor


def at_boundary(layer, feeds, golden, actual, mode, reference_room=_FLOAT32_ROOM):
    """Where golden and the reference (onnxruntime, LiteRT) differ by 1 LSB across a rounding
    boundary that lies between the exact and the fixed-point result, less than one step apart
    (bool). ``reference_room``: how far the reference's own arithmetic may move its value
    before the last rounding, in output steps (one, or one per output channel); by default
    onnxruntime's float32 arithmetic."""
    values = _exact_and_fixed(layer, feeds, mode)
    if values is None:
        return np.zeros(golden.shape, bool)
    exact, fixed, room = values
    room = np.asarray(room + reference_room, np.float64)
    if room.ndim:
        room = room.reshape(1, -1, *[1] * (exact.ndim - 2))
    g, o = (v.astype(np.int64).reshape(exact.shape) for v in (golden, actual))
    boundary = np.maximum(g, o) - 0.5
    low, high = np.minimum(exact, fixed) - room, np.maximum(exact, fixed) + room
    # A fixed-point value a whole step from the exact one is a fault, not a rounding.
    close = np.abs(fixed - exact) < 1
    return (np.abs(g - o) == 1) & (low <= boundary) & (boundary <= high) & close


def compare_layers(net, q_in, golden_outputs=None):
    """Layer-by-layer comparison of the golden model with onnxruntime on the same int8 inputs.

    Each layer is run by onnxruntime on the golden model's int8 input to that
    layer, so differences do not accumulate: what is measured is each layer's
    own arithmetic.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    q_in : numpy.ndarray
        int8 [N, *net.input_chw].
    golden_outputs : list of numpy.ndarray, optional
        Per-layer golden outputs, if already computed.

    Returns
    -------
    list of LayerAgreement
    """
    if golden_outputs is None:
        _, golden_outputs = run_golden(net, q_in, layer_outputs=True)
    results = []
    network_input = q_in.reshape(q_in.shape[0], *net.input_chw)
    for index, (layer, expected) in enumerate(zip(net.layers, golden_outputs)):
        feeds = {name: network_input if source == NETWORK_INPUT else golden_outputs[source]
                 for name, source in zip(("x", "x1"), net.layer_inputs(index))}
        (actual,) = run_onnx(layer_to_onnx(layer, index), feeds)
        boundary = at_boundary(layer, feeds, expected, actual, net.config.requant_mode)
        results.append(LayerAgreement.measure(index, layer, expected, actual, boundary))
    return results


def run_source_model(path, x, input_name=None):
    """Run a float ONNX model with onnxruntime, whatever batch size its input declares.

    A model exported with a fixed batch (LeNet-5 here: 10) is fed chunks of that
    size, the last one padded by repeating its final sample.

    Parameters
    ----------
    path : str or os.PathLike
    x : numpy.ndarray
        float32 [N, ...].

    Returns
    -------
    numpy.ndarray
        The first output, [N, ...].
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    try:
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise FpganetError(f"onnxruntime cannot load '{path}': {type(error).__name__}: "
                           f"{one_line(error)[:200]}") from None
    info = session.get_inputs()[0]
    x = np.asarray(x, dtype=np.float32)
    declared = list(info.shape[1:])
    if len(session.get_inputs()) != 1 or len(declared) != x.ndim - 1 or any(
            isinstance(d, int) and d != n for d, n in zip(declared, x.shape[1:])):
        raise FpganetError(f"'{path}' takes input '{info.name}' of shape {list(info.shape)}, not "
                           f"the [N, {', '.join(map(str, x.shape[1:]))}] of this network: is it "
                           f"another model?")
    batch = info.shape[0] if isinstance(info.shape[0], int) and info.shape[0] > 0 else 256
    outputs = []
    for start in range(0, x.shape[0], batch):
        part = x[start:start + batch]
        count = part.shape[0]
        if count < batch and isinstance(info.shape[0], int):
            part = np.concatenate([part, np.repeat(part[-1:], batch - count, axis=0)])
        try:
            outputs.append(session.run(None, {input_name or info.name: part})[0][:count])
        except Exception as error:
            raise FpganetError(f"onnxruntime cannot run '{path}' on these inputs: "
                               f"{type(error).__name__}: {str(error)[:200]}") from None
    return np.concatenate(outputs)
