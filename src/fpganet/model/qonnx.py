"""QONNX: a low-bit network's own quantization (Quant, BipolarQuant), read before import.

QONNX (Brevitas's ``export_qonnx``, qonnx's converters) marks every quantized tensor with a
``Quant`` node (integer levels of 1 to 8 bits, signed or not, narrow or not, a scale and a
zero point; a 1-bit signed one is bipolar) or a ``BipolarQuant`` (+-1 times a scale). The
accelerator computes each linear layer's dot product on the integer codes of its weights
and input, then maps the accumulator to the next layer's codes in one requantization.
:func:`strip_qonnx` turns the model into the float model the importer understands and
records, in a :class:`QonnxInfo`:

* ``constants``: a quantized weight -> its integer levels (int8) and scale, the weight
  initializer replaced by their product (exact in float32);
* ``activations`` and ``levels``: the tensor a linear layer (MatMul, Gemm, Conv) writes ->
  the quantizer that follows it (:class:`Levels`), with the elementwise ops between them
  (:class:`Epilogue`: BatchNormalization, Mul, Div, Add, Sub, Relu, Clip with constant
  operands) taken out of the graph;
* the graph input's quantizer, after its preprocessing (a scalar Mul/Div/Add/Sub chain);
* the epilogue of the last linear layer where no quantizer follows it (the logits).

The quantizer (:mod:`fpganet.quantize.qonnx_layers`) then evaluates each epilogue and
quantizer as qonnx's executor does (onnxruntime for the standard ops, qonnx's own numpy
arithmetic for the quantizers) on every accumulator value where the output level changes.
What the accelerator cannot represent is refused in one line naming the node.
"""

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..errors import FpganetError
from .qdq import QdqInfo, _QdqStrip

__all__ = ["strip_qonnx", "QonnxInfo", "Levels", "Epilogue", "QONNX_DOMAINS", "ROUNDING_MODES"]

#: Domains QONNX writes its ops in (Brevitas's exports, qonnx's and FINN's own).
QONNX_DOMAINS = ("onnx.brevitas", "qonnx.custom_op.general", "finn.custom_op.general")
#: Quantizers read here; IntQuant is Quant's newer name.
QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant")
#: Elementwise ops an epilogue may hold (one data operand, the others constant).
EPILOGUE_OPS = ("BatchNormalization", "Mul", "Div", "Add", "Sub", "Relu", "Clip", "Identity")
#: Ops whose output the epilogue of a linear layer starts from.
LINEAR_OPS = ("MatMul", "Gemm", "Conv")
#: Ops that only rearrange a constant (folded before import).
SHAPE_OPS = ("Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")
#: Most bits a quantizer may have: the accelerator's codes are int8.
MAX_BITS = 8
#: Most bits of a bias's quantizer: the accumulator's.
BIAS_BITS = 32


def _round_half_up(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _round_half_down(x):
    return np.sign(x) * np.ceil(np.abs(x) - 0.5)


#: qonnx's rounding modes (``qonnx.custom_op.general.intquant.resolve_rounding_mode``).
ROUNDING_MODES = {
    "ROUND": np.round, "HALF_EVEN": np.round, "CEIL": np.ceil, "FLOOR": np.floor,
    "UP": lambda x: np.sign(x) * np.ceil(np.abs(x)), "DOWN": np.fix,
    "HALF_UP": _round_half_up, "HALF_DOWN": _round_half_down,
}


def _describe(node):
    output = node.output[0] if node.output else "?"
    return f"{node.op_type} '{node.name or output}'"


@dataclass(frozen=True)
class Levels:
    """One quantizer: the integer level of a float32 value, as qonnx's executor computes it.

    A ``Quant`` maps ``x`` to ``l = round(clip(x / scale + zero_point, low, high))`` and stands
    for ``(l - zero_point) * scale``; a bipolar one (``BipolarQuant``, or a signed 1-bit
    ``Quant``) to ``l = +1`` where ``x >= 0`` else ``-1``, standing for ``l * scale``.

    On the accelerator a level is an int8 *code*: a bipolar level ``(l + 1) / 2`` (0 or 1),
    any other ``l`` itself, less 128 where the levels reach above 127 (unsigned 8 bits).
    The code's real value is ``code_scale * (code - code_zero)``; ``code_zero`` is 0.5 for a
    bipolar tensor, so that no code stands for zero there.
    """

    scale: float
    zero_point: float
    low: int
    high: int
    bipolar: bool
    rounding: str
    bits: int
    node: str
    #: The real value a layer reads is ``gain * value + shift`` (an input whose datatype the
    #: model annotates, before a scalar map to the first layer: FINN's ``(x + 1) / 2``).
    gain: float = 1.0
    shift: float = 0.0

    def of(self, x):
        """int64 levels of the float32 values ``x``."""
        x = np.asarray(x, dtype=np.float32)
        if self.bipolar:
            return np.where(x >= 0, 1, -1).astype(np.int64)
        with np.errstate(all="ignore"):
            y = x / np.float32(self.scale) + np.float32(self.zero_point)
            y = np.where(y > self.high, np.float32(self.high), y)
            y = np.where(y < self.low, np.float32(self.low), y)
            return ROUNDING_MODES[self.rounding](y).astype(np.int64)

    @property
    def offset(self):
        """What a level adds to become its code."""
        return -128 if self.high > 127 else 0

    def code(self, level):
        level = np.asarray(level, dtype=np.int64)
        return (level + 1) // 2 if self.bipolar else level + self.offset

    @property
    def code_low(self):
        return int(self.code(self.low))

    @property
    def code_high(self):
        return int(self.code(self.high))

    @property
    def code_scale(self):
        return self.gain * (2.0 * float(self.scale) if self.bipolar else float(self.scale))

    @property
    def code_zero(self):
        zero = 0.5 if self.bipolar else float(self.zero_point) + self.offset
        return zero - self.shift / self.code_scale


@dataclass
class Epilogue:
    """Elementwise ops between a linear layer and its quantizer (or the graph output), as
    ONNX nodes with their constants; :meth:`evaluate` runs them in onnxruntime, as qonnx's
    executor runs standard ops."""

    nodes: list
    constants: dict
    opset: int
    _session: object = field(default=None, repr=False, compare=False)

    @property
    def description(self):
        return ", ".join(_describe(node) for node in self.nodes) or "none"

    def evaluate(self, y):
        """float32 ``y`` (the linear layer's output, channels on axis 1) through the ops."""
        y = np.ascontiguousarray(y, dtype=np.float32)
        if not self.nodes:
            return y
        if self._session is None:
            self._session = self._build()
        try:
            out = self._session.run(None, {self.nodes[0].input[0]: y})[0]
        except Exception as error:
            out, reason = None, str(error).splitlines()[0][:160]
        if out is None or out.shape != y.shape:
            raise FpganetError(f"the ops {self.description} after a linear layer do not act on "
                               f"each output channel alone (constants of another shape"
                               f"{'' if out is not None else ': ' + reason})")
        return out

    def _build(self):
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        first, last = self.nodes[0], self.nodes[-1]
        used = {name for node in self.nodes for name in node.input if name in self.constants}
        graph = helper.make_graph(
            list(self.nodes), "epilogue",
            [helper.make_tensor_value_info(first.input[0], TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info(last.output[0], TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.asarray(self.constants[name]), name) for name in sorted(used)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = min(model.ir_version, 10)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])
        except Exception as error:
            raise FpganetError(f"the ops {self.description} after a linear layer cannot be "
                               f"evaluated on their own ({str(error).splitlines()[0][:160]})") from None


class QonnxInfo(QdqInfo):
    """What a QONNX model's quantizers say (see the module docstring); ``activations`` holds
    ``(code_scale, code_zero, node, tensor)`` as a QDQ model's does, keyed like it."""

    def __init__(self):
        super().__init__()
        self.levels = {}        # tensor -> Levels (None: the logits, no quantizer)
        self.epilogues = {}     # tensor -> Epilogue
        self.input_affine = (1.0, 0.0)   # the input's preprocessing: a * x + b
        self.annotated_input = False     # quantized by its finn_datatype, not a quantizer


def is_qonnx(model):
    """Whether ``model`` holds a QONNX quantizer."""
    return any(node.domain in QONNX_DOMAINS for node in model.graph.node)


def strip_qonnx(model):
    """Remove the quantizers of a QONNX model and the elementwise ops around them.

    Parameters
    ----------
    model : onnx.ModelProto
        Without graph inputs that name an initializer
        (:func:`~fpganet.model.onnx_fold.without_static_inputs`, which
        :func:`~fpganet.model.onnx_import.import_model` applies first).

    Returns
    -------
    model : onnx.ModelProto
        The float model (a copy), or ``model`` itself when it holds no QONNX op.
    info : QonnxInfo or None
        None for a model without QONNX ops.

    Raises
    ------
    fpganet.errors.FpganetError
        A quantizer or op the accelerator cannot represent, named.
    """
    import onnx

    from .onnx_fold import fold_constants

    if not is_qonnx(model):
        return model, None
    model = fold_constants(onnx.ModelProto.FromString(model.SerializeToString()))
    strip = _QonnxStrip(model)
    strip.refuse_other_ops()
    strip.quantize_weights()
    strip.take_activation_quantizers()
    strip.take_output_epilogue()
    strip.rewire()
    return model, strip.info


class _QonnxStrip(_QdqStrip):
    """One :func:`strip_qonnx`: the steps, in order, over :class:`~fpganet.model.qdq._QdqStrip`'s
    bookkeeping (``removed`` nodes, ``alias`` of their outputs, :meth:`rewire`)."""

    def __init__(self, model):
        super().__init__(model.graph)
        self.info = QonnxInfo()
        self.opset = max((entry.version for entry in model.opset_import
                          if entry.domain in ("", "ai.onnx")), default=0)
        self.producers = {}
        for index, node in enumerate(self.graph.node):
            for name in node.output:
                self.producers[name] = (index, node)
        self.inputs = {value.name for value in self.graph.input}

    def refuse_other_ops(self):
        for node in self.graph.node:
            if node.domain in QONNX_DOMAINS and node.op_type not in QUANTIZERS:
                what = ("a truncation the accelerator does not do yet" if node.op_type == "Trunc"
                        else "not a quantizer this importer reads (Quant, BipolarQuant)")
                raise FpganetError(f"{_describe(node)} ({node.domain}): {what}")

    # Quantizers ----------------------------------------------------------------------------

    def levels(self, node, per_tensor=True, max_bits=MAX_BITS):
        """The :class:`Levels` of a quantizer node, checked; a weight's (``per_tensor`` False)
        with scale 1, its scales being read by :meth:`weight_scale`."""
        name = _describe(node)
        bipolar = node.op_type == "BipolarQuant"
        count = 2 if bipolar else 4
        if len(node.input) != count or len(node.output) != 1:
            raise FpganetError(f"{name} has {len(node.input)} input(s); expected {count}")
        for role, tensor in zip(("scale", "zero point", "bit width"), node.input[1:]):
            if tensor not in self.initializers:
                raise FpganetError(f"{name}: its {role} '{tensor}' is not a constant")
        scale = 1.0
        if per_tensor:
            scale = np.asarray(self.initializers[node.input[1]], dtype=np.float64)
            if scale.size != 1:
                raise FpganetError(f"{name} quantizes an activation with {scale.size} scales; "
                                   f"the accelerator has one scale per activation tensor")
            scale = float(scale.ravel()[0])
            if not np.isfinite(scale) or scale <= 0:
                raise FpganetError(f"{name}: its scale must be finite and positive, not {scale}")
        if bipolar:
            return Levels(np.float32(scale), 0.0, -1, 1, True, "ROUND", 1, name)
        zero_point, bits = self.zero_point_and_bits(node, name, per_tensor, max_bits)
        attrs = {a.name: onnx_attribute(a) for a in node.attribute}
        signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
        rounding = attrs.get("rounding_mode", "ROUND")
        rounding = (rounding.decode() if isinstance(rounding, bytes) else str(rounding)).upper()
        if rounding not in ROUNDING_MODES:
            raise FpganetError(f"{name}: rounding mode '{rounding}' is not one of "
                               f"{', '.join(sorted(ROUNDING_MODES))}")
        if bits == 1 and signed:   # qonnx's executor makes it bipolar
            return Levels(np.float32(scale), zero_point, -1, 1, True, "ROUND", 1, name)
        low = -(1 << (bits - 1)) + int(narrow) if signed else 0
        high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - int(narrow)
        return Levels(np.float32(scale), zero_point, low, high, False, rounding, bits, name)

    def zero_point_and_bits(self, node, name, per_tensor=True, max_bits=MAX_BITS):
        """A Quant's zero point (0.0 for a weight's, whose are checked with its scales) and bits."""
        zero_point = np.asarray(self.initializers[node.input[2]], dtype=np.float64)
        bits = np.asarray(self.initializers[node.input[3]], dtype=np.float64)
        if not per_tensor:
            zero_point = np.zeros(1)
        if zero_point.size != 1 or not np.isfinite(zero_point).all():
            raise FpganetError(f"{name}: its zero point must be one finite value")
        if bits.size != 1 or not np.isfinite(bits).all() or bits.ravel()[0] != round(bits.ravel()[0]):
            raise FpganetError(f"{name}: its bit width must be one integer, not "
                               f"{bits.ravel().tolist()[:4]}")
        bits = int(bits.ravel()[0])
        if not 1 <= bits <= max_bits:
            raise FpganetError(f"{name}: {bits} bits; the accelerator takes 1 to {max_bits}")
        zero_point = float(zero_point.ravel()[0])
        if zero_point != round(zero_point):
            raise FpganetError(f"{name}: its zero point {zero_point} is not an integer")
        return zero_point, bits

    def quantize_weights(self):
        """A quantizer of a constant becomes the constant's exact float value; its integer
        levels and scale go to ``info.constants``."""
        from onnx import numpy_helper

        for index, node in enumerate(self.graph.node):
            if node.op_type not in QUANTIZERS or node.input[0] not in self.initializers:
                continue
            name = _describe(node)
            weight = np.asarray(self.initializers[node.input[0]], dtype=np.float32)
            scale, zero_point = self.weight_scale(node, name, weight.shape)
            # A bias (a vector) is added to the accumulator in float by the layer's fit: any
            # width up to 32 bits (Brevitas quantizes it at s_in * s_w).
            bias = weight.ndim <= 1
            if np.any(zero_point != 0):
                raise FpganetError(f"{name}: a weight quantizer with a nonzero zero point; the "
                                   f"accelerator's weights are symmetric (zero point 0)")
            levels = self.levels(node, per_tensor=False, max_bits=BIAS_BITS if bias else MAX_BITS)
            with np.errstate(all="ignore"):
                if levels.bipolar:
                    codes = np.where(weight >= 0, 1, -1)
                else:
                    y = np.clip(weight / scale, levels.low, levels.high)
                    codes = ROUNDING_MODES[levels.rounding](y)
            if not np.all(np.isfinite(codes)):
                raise FpganetError(f"{name} quantizes a weight holding NaN or infinity")
            if bias:
                values = (codes.astype(np.float32) * scale).astype(np.float32)
                self.graph.initializer.append(numpy_helper.from_array(values, node.output[0]))
                self.initializers[node.output[0]] = values
                self.removed.add(index)
                continue
            if codes.min(initial=0) < -127 or codes.max(initial=0) > 127:
                raise FpganetError(f"{name}: weight levels reach {int(codes.min())}.."
                                   f"{int(codes.max())}; the accelerator's weights lie in "
                                   f"-127..127")
            codes = codes.astype(np.int8)
            values = (codes.astype(np.float32) * scale).astype(np.float32)
            output = node.output[0]
            self.info.constants[output] = (codes, np.asarray(scale, np.float32).ravel(), name)
            self.graph.initializer.append(numpy_helper.from_array(values, output))
            self.initializers[output] = values
            self.removed.add(index)
        # The folds after this step (a Transpose of the weight) keep the levels, in another
        # order, which the layer's check compares as a multiset.
        for node in self.graph.node:
            if node.op_type in SHAPE_OPS and node.input and node.input[0] in self.info.constants:
                self.info.constants[node.output[0]] = self.info.constants[node.input[0]]

    def weight_scale(self, node, name, shape):
        """A weight quantizer's scale and zero point, broadcast over the weight: one, or one
        per slice along one axis."""
        scale = np.asarray(self.initializers[node.input[1]], dtype=np.float32)
        zero_point = (np.zeros(()) if node.op_type == "BipolarQuant"
                      else np.asarray(self.initializers[node.input[2]], dtype=np.float32))
        for what, value in (("scale", scale), ("zero point", zero_point)):
            try:
                np.broadcast_to(value, shape)
            except ValueError:
                raise FpganetError(f"{name}: its {what} {list(value.shape)} does not broadcast "
                                   f"over the weight {list(shape)}") from None
        if not np.all(np.isfinite(scale)) or not np.all(scale > 0):
            raise FpganetError(f"{name}: its scale must be finite and positive")
        if sum(size > 1 for size in scale.shape) > 1:
            raise FpganetError(f"{name}: scales along more than one axis of the weight")
        return scale, zero_point

    # Activations ---------------------------------------------------------------------------

    def epilogue_back(self, tensor):
        """Walk back from ``tensor`` through elementwise ops of constant operands that nothing
        else reads: ``(start tensor, its producer or None, [nodes in order])``."""
        nodes = []
        while True:
            producer = self.producers.get(tensor)
            if producer is None:
                return tensor, None, nodes
            index, node = producer
            if node.op_type not in EPILOGUE_OPS or node.domain not in ("", "ai.onnx") \
                    or index in self.removed:
                return tensor, node, nodes
            data = [name for name in node.input if name and name not in self.initializers]
            if len(data) != 1 or node.input[0] != data[0]:
                raise FpganetError(f"{_describe(node)} between a layer and its quantizer has "
                                   f"{len(data)} non-constant input(s); an elementwise op there "
                                   f"takes its data first and constants after")
            readers = self.consumers.get(data[0], [])
            if len(readers) != 1:
                raise FpganetError(f"'{data[0]}' feeds {len(readers)} nodes; the float value "
                                   f"between a layer and its quantizer cannot be read elsewhere")
            nodes.insert(0, node)
            tensor = data[0]

    def epilogue(self, nodes):
        constants = {name: self.initializers[name] for node in nodes for name in node.input
                     if name in self.initializers}
        return Epilogue(list(nodes), constants, self.opset)

    def take_activation_quantizers(self):
        """Each activation quantizer (and the epilogue before it) leaves the graph; its readers
        read the linear layer's output (or the graph input) instead."""
        for index, node in enumerate(self.graph.node):
            if node.op_type not in QUANTIZERS or index in self.removed:
                continue
            levels = self.levels(node)
            start, producer, nodes = self.epilogue_back(node.input[0])
            if producer is not None and producer.op_type in LINEAR_OPS:
                self.note_activation(start, levels, self.epilogue(nodes), node)
            elif self.leads_to_input(start):
                self.note_input(start, levels, nodes, node)
            else:
                what = _describe(producer) if producer is not None else f"'{start}'"
                raise FpganetError(f"{_describe(node)} quantizes the output of {what}; the "
                                   f"accelerator quantizes the outputs of Conv, Gemm and MatMul "
                                   f"layers (through BatchNormalization, Mul, Add, Relu) and "
                                   f"the input")
            self.removed.add(index)
            self.removed.update(self.index_of(n) for n in nodes)
            self.alias[node.output[0]] = start
        if not any(tensor in self.inputs or self.leads_to_input(tensor)
                   for tensor in self.info.activations):
            self.take_annotated_input()

    def take_annotated_input(self):
        """An input without a quantizer whose integer datatype the model annotates (FINN's
        ``finn_datatype``: BIPOLAR, BINARY, INTn, UINTn up to 8 bits) is quantized by it; the
        scalar Mul/Div/Add/Sub between it and the first layer become the levels' real value."""
        name = self.graph.input[0].name if len(self.graph.input) == 1 else None
        annotated = {entry.tensor_name: {p.key: p.value for p in entry.quant_parameter_tensor_names}
                     for entry in self.graph.quantization_annotation}
        datatype = annotated.get(name, {}).get("finn_datatype", "")
        levels = _datatype_levels(datatype, f"the input's datatype {datatype}")
        if levels is None:
            raise FpganetError("the graph input has no Quant or BipolarQuant (nor an integer "
                               "finn_datatype annotation); a QONNX model must quantize its input")
        tensor, nodes = name, []
        while len(self.consumers.get(tensor, [])) == 1:
            node = self.consumers[tensor][0]
            constants = [n for n in node.input[1:] if n]
            if node.op_type not in ("Mul", "Div", "Add", "Sub", "Identity") \
                    or node.input[0] != tensor or any(n not in self.initializers or
                                                      np.asarray(self.initializers[n]).size != 1
                                                      for n in constants):
                break
            nodes.append(node)
            tensor = node.output[0]
        gain, shift = _scalar_affine(nodes, self.initializers, levels.node)
        levels = dataclasses.replace(levels, gain=gain, shift=shift)
        self.removed.update(self.index_of(n) for n in nodes)
        if nodes:
            self.alias[tensor] = name
        self.info.levels[name] = levels
        self.info.activations[name] = (levels.code_scale, levels.code_zero, levels.node, name)
        self.info.annotated_input = True

    def leads_to_input(self, tensor):
        """Whether ``tensor`` is the graph input seen through shape-only ops (a flatten)."""
        seen = 0
        while tensor not in self.inputs and seen < 16:
            producer = self.producers.get(tensor)
            if producer is None or producer[1].op_type not in ("Reshape", "Flatten"):
                return False
            tensor, seen = producer[1].input[0], seen + 1
        return tensor in self.inputs

    def index_of(self, node):
        return next(i for i, n in enumerate(self.graph.node) if n is node)

    def note_activation(self, tensor, levels, epilogue, node):
        previous = self.info.levels.get(tensor)
        if previous is not None and previous != levels:
            raise FpganetError(f"{previous.node} and {_describe(node)} quantize '{tensor}' "
                               f"differently")
        if len(self.consumers.get(tensor, [])) != 1:
            raise FpganetError(f"the output '{tensor}' of a linear layer feeds "
                               f"{len(self.consumers.get(tensor, []))} nodes; its quantizer "
                               f"must be its only reader")
        self.info.levels[tensor] = levels
        self.info.epilogues[tensor] = epilogue
        self.info.activations[tensor] = (levels.code_scale, levels.code_zero, levels.node, tensor)

    def note_input(self, tensor, levels, nodes, node):
        """The input's preprocessing must be a scalar affine map ``a * x + b``, a > 0."""
        a, b = _scalar_affine(nodes, self.initializers, _describe(node))
        self.info.levels[tensor] = levels
        self.info.input_affine = (a, b)
        self.info.activations[tensor] = (levels.code_scale, levels.code_zero, levels.node, tensor)

    def take_output_epilogue(self):
        """The logits: the graph output, reached from a linear layer through an epilogue (and a
        final Softmax, which the importer drops), has no quantizer."""
        output = self.graph.output[0].name if len(self.graph.output) == 1 else None
        if output is None:
            return
        tensor = output
        producer = self.producers.get(tensor)
        if producer is not None and producer[1].op_type in ("Softmax", "LogSoftmax"):
            tensor = producer[1].input[0]
        start, producer, nodes = self.epilogue_back(tensor)
        if producer is None or producer.op_type not in LINEAR_OPS or start in self.info.levels:
            return
        self.info.levels[start] = None
        self.info.epilogues[start] = self.epilogue(nodes)
        self.info.activations[start] = (1.0, 0.0, "the logits", start)
        self.removed.update(self.index_of(n) for n in nodes)
        if nodes:
            self.alias[tensor] = start


def _scalar_affine(nodes, initializers, before):
    """``(a, b)`` of a chain of scalar Mul, Div, Add, Sub (and Identity) nodes: ``a * x + b``,
    ``a`` positive (the host's quantization takes a positive scale)."""
    a, b = 1.0, 0.0
    for op in nodes:
        if op.op_type == "Identity":
            continue
        constants = [np.asarray(initializers[name], np.float64) for name in op.input[1:] if name]
        if op.op_type not in ("Mul", "Div", "Add", "Sub") or any(c.size != 1 for c in constants):
            raise FpganetError(f"{_describe(op)} preprocesses the input next to {before}; only "
                               f"scalar Mul, Div, Add and Sub can be done by the host's "
                               f"quantization")
        c = float(constants[0].ravel()[0])
        if op.op_type == "Div" and c == 0:
            raise FpganetError(f"{_describe(op)} divides the input by zero")
        a, b = {"Mul": lambda: (a * c, b * c), "Div": lambda: (a / c, b / c),
                "Add": lambda: (a, b + c), "Sub": lambda: (a, b - c)}[op.op_type]()
    if not np.isfinite(a) or a <= 0 or not np.isfinite(b):
        raise FpganetError(f"the input's preprocessing next to {before} scales it by {a:.6g}; "
                           f"the host's quantization takes a positive scale")
    return a, b


def _datatype_levels(datatype, node):
    """The :class:`Levels` of an integer FINN datatype name (None for any other)."""
    if datatype == "BIPOLAR":
        return Levels(np.float32(1.0), 0.0, -1, 1, True, "ROUND", 1, node)
    if datatype == "BINARY":
        return Levels(np.float32(1.0), 0.0, 0, 1, False, "ROUND", 1, node)
    for prefix, signed in (("UINT", False), ("INT", True)):
        if datatype.startswith(prefix) and datatype[len(prefix):].isdigit():
            bits = int(datatype[len(prefix):])
            if not 1 <= bits <= MAX_BITS:
                return None
            low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            return Levels(np.float32(1.0), 0.0, low, high, False, "ROUND", bits, node)
    return None


def onnx_attribute(attribute):
    from onnx import helper

    return helper.get_attribute_value(attribute)


def attach_qonnx(graph, info, tensor_layers, node_layers, ignored=None):
    """:func:`~fpganet.model.qdq.attach_quantization` for a QONNX model, then each layer's
    quantizer and epilogue: ``graph.quantization`` gains ``"levels"`` and ``"epilogues"``
    (layer index -> :class:`Levels` or None, :class:`Epilogue`), ``"input_affine"`` and
    ``"arithmetic": "qonnx"``."""
    from .ir import LINEAR_LAYERS
    from .qdq import attach_quantization

    attach_quantization(graph, info, tensor_layers, node_layers, ignored, quantizer="Quant")
    quantization = graph.quantization
    tensors = quantization["tensors"]
    levels, epilogues = {}, {}
    for index, tensor in tensors.items():
        levels[index] = info.levels[tensor]
        if index >= 0:
            layer = graph.layers[index]
            if not isinstance(layer, LINEAR_LAYERS):
                raise FpganetError(f"{info.activations.get(tensor, (0, 0, tensor))[2]} quantizes "
                                   f"the output of '{layer.name}', not of a Conv, Gemm or MatMul")
            epilogues[index] = info.epilogues[tensor]
    for index, layer in enumerate(graph.layers):
        if isinstance(layer, LINEAR_LAYERS) and index not in levels:
            raise FpganetError(f"layer '{layer.name}' has no Quant on its output; every Conv, "
                               f"Gemm and MatMul of a QONNX model but the last must be quantized")
    quantization.update(levels=levels, epilogues=epilogues, input_affine=info.input_affine,
                        annotated_input=info.annotated_input,
                        arithmetic="qonnx")
    return graph
