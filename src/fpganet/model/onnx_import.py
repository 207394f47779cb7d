"""ONNX import: a chain CNN in ONNX into the float IR of :mod:`fpganet.model.ir`.

The importer walks the data path from the graph input to the graph output, one
node at a time, and keeps two things about the current tensor: its per-sample
*view* (the ONNX shape without the batch axis, e.g. ``(400,)``) and its
*orientation* (0 when the batch is axis 0, 1 when a 2-D tensor has been
transposed so that the batch is axis 1; only Transpose/Gemm/MatMul may touch
that). Layers are emitted in canonical ``(C, H, W)`` shapes; a
:class:`~fpganet.model.ir.Reshape` is emitted only when a layer needs a
different canonical shape than the one the previous layer produced, so
Unsqueeze/Squeeze pairs around a 1-D BatchNorm leave no trace.

Folded at import: BatchNormalization into the Conv/Gemm before it, an Add of a
per-channel constant into the bias before it (MatMul+Add becomes a dense
layer). Removed: Dropout, Identity, a final Softmax/LogSoftmax (the arg-max is
unchanged; :attr:`Graph.dropped_output_op` says so). The batch is free: a fixed
batch in the input declaration, or baked into a Reshape constant (``[10, 400]``),
is ignored, and the ``x.view(x.size(0), -1)`` pattern (Shape, Gather, Unsqueeze,
Concat) is folded symbolically.
"""

import os

import numpy as np

from ..errors import FpganetError, one_line
from ..files import file_sha256
from .ir import (LINEAR_LAYERS, Conv, Dense, Graph, MaxPool, Relu, Reshape, canonical_shape,
                 fuse_relu)

__all__ = ["load_onnx", "import_model", "SUPPORTED_OPS", "file_sha256"]

#: Ops the importer accepts on the data path, with the restrictions it checks.
SUPPORTED_OPS = {
    "Conv": "2-D, group 1, dilation 1",
    "Relu": "",
    "MaxPool": "2-D, dilation 1",
    "Gemm": "one constant operand",
    "MatMul": "one constant 2-D operand, followed by Add as dense",
    "Add": "per-channel constant after Conv/Gemm/MatMul",
    "BatchNormalization": "after Conv/Gemm, folded",
    "Flatten": "axis 1",
    "Reshape": "batch stays axis 0",
    "Unsqueeze": "",
    "Squeeze": "",
    "Transpose": "perm [1, 0] on 2-D, around Gemm/MatMul",
    "Dropout": "removed",
    "Identity": "removed",
    "Softmax": "final node, dropped",
    "LogSoftmax": "final node, dropped",
}

#: Ops that only read a tensor's shape; the importer folds them, they are not on the data path.
_SHAPE_READERS = {"Shape", "Size"}

_BATCH = "N"  # the symbolic batch size inside folded shape expressions


def load_onnx(path):
    """Read an ONNX file and import it.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Graph
        With ReLUs fused into the layer before them.

    Raises
    ------
    fpganet.errors.FpganetError
        The file is missing or not ONNX, or the network uses something the
        importer does not support; the message names the node or tensor.
    """
    import onnx

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FpganetError(f"model file '{path}' does not exist")
    if not os.path.isfile(path):
        raise FpganetError(f"model file '{path}' is not a regular file")
    try:
        model = onnx.load(path)
    except Exception as error:  # protobuf raises DecodeError, external data OSError, ...
        raise FpganetError(f"'{path}' is not a readable ONNX model ({type(error).__name__}: "
                           f"{one_line(error)[:200]})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise FpganetError(f"'{path}' is not an ONNX model (it has no graph nodes)")
    return import_model(model)


def import_model(model):
    """Import an in-memory ``onnx.ModelProto``.

    Parameters
    ----------
    model : onnx.ModelProto

    Returns
    -------
    Graph
        With ReLUs fused into the layer before them (:func:`~fpganet.model.ir.fuse_relu`).
    """
    graph = _Importer(model).run()
    return fuse_relu(graph)


def _check_acyclic(graph):
    """Refuse a graph whose nodes feed one another in a cycle (Kahn's algorithm)."""
    producers = {name: index for index, node in enumerate(graph.node)
                 for name in node.output if name}
    waiting = {}
    users = {}
    for index, node in enumerate(graph.node):
        sources = {producers[name] for name in node.input if name in producers}
        waiting[index] = len(sources)
        for source in sources:
            users.setdefault(source, []).append(index)
    ready = [index for index, count in waiting.items() if count == 0]
    done = 0
    while ready:
        index = ready.pop()
        done += 1
        for user in users.get(index, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user)
    if done < len(graph.node):
        # Walk back through unfinished producers until a node repeats: it is on the cycle.
        index = min(index for index, count in waiting.items() if count > 0)
        seen = set()
        while index not in seen:
            seen.add(index)
            index = next(producers[name] for name in graph.node[index].input
                         if name in producers and waiting[producers[name]] > 0)
        raise FpganetError(f"the graph has a cycle: {_describe(graph.node[index], index)} "
                           f"depends on its own output")


def _describe(node, index):
    if node.name:
        return f"{node.op_type} node '{node.name}'"
    output = node.output[0] if node.output else "?"
    return f"{node.op_type} node #{index} (output '{output}')"


def _layer_name(node, index):
    if node.name:
        return node.name
    return f"{node.op_type.lower()}_{node.output[0] if node.output else index}"


def _shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


class _Importer:
    """One import; holds the maps over the ONNX graph and the walk's state."""

    def __init__(self, model):
        import onnx
        from onnx import numpy_helper

        self.numpy_helper = numpy_helper
        self.opset = max((entry.version for entry in model.opset_import
                          if entry.domain in ("", "ai.onnx")), default=0)
        if self.opset == 0:
            raise FpganetError("the ONNX model imports no version of the default operator set")
        known = onnx.defs.onnx_opset_version()
        if self.opset > known:
            # onnxruntime refuses such a model too; its ops' meaning is not known here.
            raise FpganetError(f"the model uses opset {self.opset} of the default operator set; "
                               f"the installed onnx {onnx.__version__} knows opsets up to {known}")
        _check_acyclic(model.graph)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        except Exception:  # inference is advisory: the importer computes shapes itself
            inferred = model
        self.graph = inferred.graph
        self.value_shapes = {}
        for info in list(self.graph.value_info) + list(self.graph.output) + list(self.graph.input):
            self.value_shapes[info.name] = info
        self.initializers = {}
        for tensor in self.graph.initializer:
            self.initializers[tensor.name] = self._tensor_array(tensor, f"initializer '{tensor.name}'")
        self.producers = {}
        self.consumers = {}
        for index, node in enumerate(self.graph.node):
            for name in node.output:
                if name:
                    self.producers[name] = (index, node)
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append((index, node))
        self.constants = {}
        for index, node in enumerate(self.graph.node):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                self.constants[node.output[0]] = self._constant_value(node, index)
        self.view_of = {}  # chain tensor -> (view, orientation), for folding Shape nodes
        self.layers = []
        self.notes = []

    # Constants -----------------------------------------------------------------------------

    def _tensor_array(self, tensor, what):
        try:
            array = self.numpy_helper.to_array(tensor)
        except Exception as error:
            raise FpganetError(f"{what} cannot be read ({one_line(error)[:200]})") from None
        if array.dtype.kind == "f" and array.size:
            if np.isnan(array).any():
                raise FpganetError(f"{what} contains NaN")
            if np.isinf(array).any():
                raise FpganetError(f"{what} contains Inf")
        return array

    def _constant_value(self, node, index):
        from onnx import helper

        what = f"value of Constant node '{node.name or node.output[0]}'"
        for attribute in node.attribute:
            if attribute.name == "value":
                return self._tensor_array(attribute.t, what)
            if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
                value = np.asarray(helper.get_attribute_value(attribute))
                return self._tensor_array(self.numpy_helper.from_array(
                    value.astype(np.float32 if "float" in attribute.name else np.int64)), what)
        raise FpganetError(f"{_describe(node, index)} has no dense 'value' (sparse or string "
                           f"constants are not supported)")

    def const(self, name, node, index, role):
        """The constant array behind input ``name`` of ``node``, or an error naming both."""
        if name in self.initializers:
            return self.initializers[name]
        if name in self.constants:
            return self.constants[name]
        producer = self.producers.get(name)
        if producer is not None and producer[1].op_type in ("Identity", "Cast") and producer[1].input:
            source_index, source_node = producer
            value = self.const(source_node.input[0], source_node, source_index, role)
            to = self.attrs(source_node).get("to")
            if to is not None:
                from onnx import helper
                value = value.astype(helper.tensor_dtype_to_np_dtype(to))
            return value
        raise FpganetError(f"the {role} input '{name}' of {_describe(node, index)} is not a "
                           f"constant (initializer or Constant node)")

    def attrs(self, node):
        from onnx import helper

        return {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}

    # Symbolic shape folding ----------------------------------------------------------------

    def fold_shape(self, name, depth=0):
        """Value of an integer shape expression as an object array of ints and ``_BATCH``, or None."""
        if depth > 32:
            return None
        if name in self.initializers or name in self.constants:
            value = self.initializers.get(name, self.constants.get(name))
            if value.dtype.kind not in "iu":
                return None
            return np.array(value.tolist(), dtype=object)
        producer = self.producers.get(name)
        if producer is None:
            return None
        index, node = producer
        attrs = self.attrs(node)
        op = node.op_type
        inputs = [self.fold_shape(i, depth + 1) if i and i not in self.view_of else None
                  for i in node.input]
        try:
            if op in _SHAPE_READERS:
                if op == "Size" or node.input[0] not in self.view_of:
                    return None
                view, orientation = self.view_of[node.input[0]]
                full = [_BATCH, *view] if orientation == 0 else [*view, _BATCH]
                start = attrs.get("start", 0)
                end = attrs.get("end", len(full))
                return np.array(full[start:end], dtype=object)
            if not inputs or inputs[0] is None:
                return None
            if op in ("Identity", "Cast"):
                return inputs[0]
            if op == "Gather":
                return np.take(inputs[0], np.asarray(inputs[1].tolist(), dtype=np.int64),
                               axis=attrs.get("axis", 0))
            axes = attrs.get("axes")
            if axes is None and len(inputs) > 1 and inputs[1] is not None:
                axes = inputs[1].tolist()
            if op == "Unsqueeze":
                result = inputs[0]
                for axis in sorted(axes):
                    result = np.expand_dims(result, axis)
                return result
            if op == "Squeeze":
                return np.squeeze(inputs[0], axis=None if axes is None else tuple(axes))
            if op == "Concat":
                if any(value is None for value in inputs):
                    return None
                return np.concatenate([np.atleast_1d(value) for value in inputs], axis=attrs.get("axis", 0))
            if op == "Slice" and inputs[0].ndim == 1:
                if "starts" in attrs:
                    starts, ends = attrs["starts"], attrs["ends"]
                    steps = [1]
                else:
                    starts, ends = inputs[1].tolist(), inputs[2].tolist()
                    steps = inputs[4].tolist() if len(inputs) > 4 and inputs[4] is not None else [1]
                return inputs[0][slice(int(starts[0]), int(min(ends[0], 2**62)), int(steps[0]))]
            if op in ("Mul", "Div") and len(inputs) == 2 and inputs[1] is not None:
                a, b = np.broadcast_arrays(inputs[0], inputs[1])
                if any(v is _BATCH for v in a.flat) or any(v is _BATCH for v in b.flat):
                    return None
                result = a * b if op == "Mul" else a // b
                return np.array(result.tolist(), dtype=object)
        except (ValueError, IndexError, TypeError, KeyError, np.exceptions.AxisError):
            return None
        return None

    def inferred_view(self, name):
        """Per-sample dims ONNX shape inference found for ``name`` (None where unknown)."""
        info = self.value_shapes.get(name)
        if info is None or not info.type.HasField("tensor_type") \
                or not info.type.tensor_type.HasField("shape"):
            return None
        dims = info.type.tensor_type.shape.dim
        return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in dims]

    # The walk ------------------------------------------------------------------------------

    def run(self):
        graph = self.graph
        initializer_names = set(self.initializers)
        inputs = [info for info in graph.input if info.name not in initializer_names]
        if len(inputs) != 1:
            names = ", ".join(f"'{info.name}'" for info in inputs) or "none"
            raise FpganetError(f"the model must have exactly one non-constant input; it has "
                               f"{len(inputs)} ({names})")
        if len(graph.output) != 1:
            names = ", ".join(f"'{info.name}'" for info in graph.output)
            raise FpganetError(f"the model must have exactly one output; it has "
                               f"{len(graph.output)} ({names})")
        input_info = inputs[0]
        output_name = graph.output[0].name
        view, self.export_batch = self._input_view(input_info)
        self.input_view = view
        current = input_info.name
        orientation = 0
        self.canon = canonical_shape(view)
        self.view_of[current] = (view, orientation)
        self.dropped = None
        visited = set()
        while current != output_name:
            index, node = self._next_node(current)
            if index in visited:
                raise FpganetError(f"{_describe(node, index)} is reached twice on the data path "
                                   f"(the graph has a cycle)")
            visited.add(index)
            layers_before = len(self.layers)
            with np.errstate(all="ignore"):  # folding overflow is reported below, by layer
                view, orientation, current = self._convert(node, index, current, view, orientation)
            if any(int(d) < 1 for d in view):
                raise FpganetError(f"{_describe(node, index)} produces an empty tensor "
                                   f"{_shape_text(view)} (a dimension of size 0)")
            self.view_of[current] = (view, orientation)
            self._check_inferred(current, view, orientation, node, index)
            self._check_finite(layers_before, node, index)
        if orientation != 0:
            raise FpganetError(f"the output '{output_name}' has the batch on axis 1 "
                               f"(a transposed 2-D tensor); add a Transpose [1, 0] before it")
        final_name = self.logits_name if self.dropped else output_name
        self._ensure_canonical(canonical_shape(view), "output")
        return Graph(name=graph.name or "model", input_name=input_info.name,
                     input_shape=tuple(self.input_view), output_name=final_name,
                     output_shape=tuple(view), layers=self.layers, notes=self.notes,
                     dropped_output_op=self.dropped)

    def _check_finite(self, first, node, index):
        """Refuse a layer whose weights or bias stopped being finite float32 when ``node`` was
        converted or folded into it (a BatchNormalization with a huge gamma, Gemm alpha=inf)."""
        for layer in self.layers[max(first - 1, 0):]:
            for role in ("weight", "bias"):
                values = getattr(layer, role, None)
                if values is None:
                    continue
                values = np.asarray(values)
                if values.size == 0:
                    raise FpganetError(f"{_describe(node, index)}: layer '{layer.name}' has an "
                                       f"empty {role} tensor")
                if not np.all(np.isfinite(values.astype(np.float32))):
                    raise FpganetError(f"{_describe(node, index)}: the {role} of layer "
                                       f"'{layer.name}' is not finite in float32 after this node "
                                       f"is applied (its scale or offset overflows)")

    def _input_view(self, info):
        from onnx import TensorProto

        name = info.name
        tensor_type = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            raise FpganetError(f"the input '{name}' is not a tensor")
        if tensor_type.elem_type != TensorProto.FLOAT:
            dtype = TensorProto.DataType.Name(tensor_type.elem_type)
            raise FpganetError(f"the input '{name}' has element type {dtype}; only FLOAT "
                               f"(float32) inputs are supported")
        if not tensor_type.HasField("shape"):
            raise FpganetError(f"cannot infer the shape of tensor '{name}': the input declares "
                               f"no shape")
        dims = tensor_type.shape.dim
        if len(dims) < 2:
            raise FpganetError(f"the input '{name}' has rank {len(dims)}; it needs a batch axis "
                               f"and at least one more")
        view = []
        for axis, dim in enumerate(dims[1:], start=1):
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                label = f"'{dim.dim_param}'" if dim.dim_param else "unknown"
                raise FpganetError(f"cannot infer the shape of tensor '{name}': dimension {axis} "
                                   f"is {label}; every dimension but the batch must be fixed")
            view.append(int(dim.dim_value))
        batch = dims[0].dim_value if dims[0].HasField("dim_value") and dims[0].dim_value > 0 else None
        return tuple(view), batch

    def _next_node(self, current):
        users = [(index, node) for index, node in self.consumers.get(current, [])
                 if node.op_type not in _SHAPE_READERS]
        if not users:
            raise FpganetError(f"tensor '{current}' is used by no node and is not the graph "
                               f"output; the data path is broken")
        if len(users) > 1:
            names = ", ".join(_describe(node, index) for index, node in users)
            raise FpganetError(f"tensor '{current}' feeds {len(users)} nodes ({names}); only "
                               f"chain networks are supported (no branches or skip connections)")
        index, node = users[0]
        if node.domain not in ("", "ai.onnx"):
            raise self._unsupported(node, index)
        return index, node

    def _unsupported(self, node, index):
        supported = ", ".join(sorted(SUPPORTED_OPS))
        domain = f" (domain '{node.domain}')" if node.domain not in ("", "ai.onnx") else ""
        return FpganetError(f"unsupported op '{node.op_type}'{domain} in "
                            f"{_describe(node, index)}; supported: {supported}")

    def _check_inferred(self, name, view, orientation, node, index):
        inferred = self.inferred_view(name)
        if inferred is None:
            return
        expected = [None, *view] if orientation == 0 else [*view, None]
        if len(inferred) != len(expected):
            return  # rank differs only where inference gave up on a folded op; ours is checked
        skip = 0 if orientation == 0 else len(expected) - 1
        for axis, (mine, theirs) in enumerate(zip(expected, inferred)):
            if axis != skip and theirs is not None and mine != theirs:
                raise FpganetError(f"tensor '{name}' ({_describe(node, index)}): shape inference "
                                   f"says {_shape_text(inferred)}, the importer computed "
                                   f"{_shape_text(expected)}")

    def _ensure_canonical(self, shape, name):
        """Emit a Reshape if the canonical shape changed since the last emitted layer."""
        shape = tuple(shape)
        if shape != self.canon:
            if self.layers and isinstance(self.layers[-1], Reshape):
                previous = self.layers.pop()
                start = previous.in_shape
            else:
                start = self.canon
            if start != shape:
                self.layers.append(Reshape(name=f"reshape_{name}", in_shape=start, out_shape=shape))
            self.canon = shape

    def _data_index(self, node, index, current, allowed):
        positions = [i for i, name in enumerate(node.input) if name == current]
        if len(positions) != 1 or positions[0] not in allowed:
            raise FpganetError(f"{_describe(node, index)} takes the data tensor '{current}' as "
                               f"input {positions}; the importer supports it as input "
                               f"{' or '.join(map(str, allowed))} only")
        return positions[0]

    def _require(self, condition, node, index, message):
        if not condition:
            raise FpganetError(f"{_describe(node, index)}: {message}")

    def _convert(self, node, index, current, view, orientation):
        op = node.op_type
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise self._unsupported(node, index)
        self._check_arity(node, index)
        try:
            return handler(node, index, current, view, orientation)
        except FpganetError:
            raise
        except (ArithmeticError, IndexError, KeyError, TypeError, ValueError) as error:
            # A node malformed in a way no check above names (an attribute of the wrong
            # length or type): still one line, naming the node.
            raise FpganetError(f"{_describe(node, index)} is malformed: {type(error).__name__}: "
                               f"{one_line(error)[:160]}") from None

    def _check_arity(self, node, index):
        """Refuse a node with fewer or more inputs than its op's ONNX schema allows."""
        import onnx

        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, node.domain or "")
        except Exception:
            raise FpganetError(f"{_describe(node, index)}: op {node.op_type} does not exist in "
                               f"opset {self.opset}") from None
        given = len(node.input)
        if not schema.min_input <= given <= schema.max_input:
            expected = (str(schema.min_input) if schema.min_input == schema.max_input
                        else f"{schema.min_input} to {schema.max_input}")
            raise FpganetError(f"{_describe(node, index)} has {given} input(s); {node.op_type} "
                               f"takes {expected} in opset {self.opset}")

    # Pass-through ops ----------------------------------------------------------------------

    def _op_Identity(self, node, index, current, view, orientation):
        return view, orientation, node.output[0]

    def _op_Dropout(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        if len(node.output) > 1 and node.output[1] and self.consumers.get(node.output[1]):
            raise FpganetError(f"{_describe(node, index)}: its mask output is used; only "
                               f"inference-mode Dropout (removed) is supported")
        self.notes.append(f"removed Dropout '{_layer_name(node, index)}'")
        return view, orientation, node.output[0]

    def _final(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        if node.output[0] != self.graph.output[0].name:
            raise FpganetError(f"{_describe(node, index)} is not the last node; {node.op_type} is "
                               f"only supported as the final node, where it is dropped")
        self._require(orientation == 0 and len(view) == 1, node, index,
                      f"{node.op_type} is only supported on a [N, classes] tensor")
        axis = self.attrs(node).get("axis", 1 if self.opset < 13 else -1)
        self._require(axis in (1, -1), node, index, f"{node.op_type} over axis {axis} is not "
                      f"supported (only the class axis 1)")
        self.dropped = node.op_type
        self.logits_name = current
        self.notes.append(f"dropped the final {node.op_type} '{_layer_name(node, index)}' "
                          f"(outputs are the logits before it; the arg-max is unchanged)")
        return view, orientation, node.output[0]

    _op_Softmax = _final
    _op_LogSoftmax = _final

    # Shape ops -----------------------------------------------------------------------------

    def _axes(self, node, index, rank):
        """The ``axes`` of Unsqueeze/Squeeze (attribute before opset 13, input after), made
        non-negative against ``rank``; None when absent."""
        attrs = self.attrs(node)
        if "axes" in attrs:
            axes = list(attrs["axes"])
        elif len(node.input) > 1 and node.input[1]:
            axes = [int(a) for a in np.asarray(self.const(node.input[1], node, index, "axes")).ravel()]
        else:
            return None
        return sorted(a + rank if a < 0 else a for a in axes)

    def _op_Unsqueeze(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        self._require(orientation == 0, node, index, "unsqueezing a transposed tensor is not supported")
        count = len(self._axes(node, index, 0) or [])
        axes = self._axes(node, index, len(view) + 1 + count) or []
        self._require(axes and 0 not in axes, node, index, "inserting an axis before the batch "
                      "axis is not supported")
        full = [None, *view]
        for axis in axes:
            full.insert(axis, 1)
        return tuple(full[1:]), orientation, node.output[0]

    def _op_Squeeze(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        self._require(orientation == 0, node, index, "squeezing a transposed tensor is not supported")
        axes = self._axes(node, index, len(view) + 1)
        if axes is None:
            axes = [axis + 1 for axis, dim in enumerate(view) if dim == 1]
        self._require(0 not in axes, node, index, "squeezing the batch axis is not supported")
        for axis in axes:
            self._require(0 < axis <= len(view) and view[axis - 1] == 1, node, index,
                          f"axis {axis} of {_shape_text(['N', *view])} cannot be squeezed")
        return tuple(d for axis, d in enumerate(view, start=1) if axis not in axes), \
            orientation, node.output[0]

    def _op_Flatten(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        axis = self.attrs(node).get("axis", 1)
        if axis < 0:
            axis += len(view) + 1
        self._require(axis == 1, node, index, f"Flatten with axis {axis} is not supported; only "
                      f"axis 1 (keep the batch axis)")
        self._require(orientation == 0, node, index, "flattening a transposed tensor is not supported")
        return (int(np.prod(view)),), orientation, node.output[0]

    def _op_Reshape(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        self._require(orientation == 0, node, index, "reshaping a transposed tensor is not supported")
        allow_zero = self.attrs(node).get("allowzero", 0)
        target = self.fold_shape(node.input[1]) if len(node.input) > 1 else None
        size = int(np.prod(view))
        if target is not None and target.ndim == 1 and len(target) >= 1:
            return self._reshape_to(node, index, list(target), view, size, allow_zero), \
                orientation, node.output[0]
        inferred = self.inferred_view(node.output[0])
        if inferred is None or len(inferred) < 2 or any(d is None for d in inferred[1:]):
            raise FpganetError(f"cannot infer the shape of tensor '{node.output[0]}' (output of "
                               f"{_describe(node, index)}): its shape input '{node.input[1]}' is "
                               f"neither a constant nor a foldable shape expression")
        new_view = tuple(inferred[1:])
        self._require(int(np.prod(new_view)) == size, node, index,
                      f"inferred shape {_shape_text(inferred)} does not hold {size} elements per sample")
        return new_view, orientation, node.output[0]

    def _reshape_to(self, node, index, target, view, size, allow_zero):
        first, rest = target[0], target[1:]
        shown = _shape_text(target)
        if first is _BATCH or first == 0 and not allow_zero:
            pass
        elif first == -1:
            self._require(-1 not in rest and _BATCH not in rest, node, index,
                          f"target shape {shown} leaves the batch ambiguous")
        elif isinstance(first, int) and first > 0 and (self.export_batch in (None, first)):
            pass  # the export's batch size, baked in by a tracing exporter
        else:
            raise FpganetError(f"{_describe(node, index)}: target shape {shown} does not keep the "
                               f"batch (size {self.export_batch or 'N'}) as axis 0")
        dims = []
        for axis, dim in enumerate(rest, start=1):
            if dim is _BATCH:
                raise FpganetError(f"{_describe(node, index)}: target shape {shown} moves the batch "
                                   f"off axis 0")
            if dim == 0 and not allow_zero:
                self._require(axis <= len(view), node, index, f"target shape {shown} copies a "
                              f"dimension the input does not have")
                dim = view[axis - 1]
            dims.append(int(dim))
        if -1 in dims:
            self._require(dims.count(-1) == 1, node, index, f"target shape {shown} has two -1")
            known = int(np.prod([d for d in dims if d != -1]))
            self._require(known > 0 and size % known == 0, node, index,
                          f"target shape {shown} does not fit {size} elements per sample")
            dims[dims.index(-1)] = size // known
        self._require(all(d > 0 for d in dims) and int(np.prod(dims)) == size, node, index,
                      f"target shape {shown} does not hold the {size} elements per sample of "
                      f"{_shape_text(['N', *view])}")
        return tuple(dims)

    def _op_Transpose(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        perm = list(self.attrs(node).get("perm", reversed(range(len(view) + 1))))
        if perm == list(range(len(view) + 1)):
            return view, orientation, node.output[0]
        self._require(len(view) == 1 and perm == [1, 0], node, index,
                      f"Transpose with perm {perm} is not supported; only [1, 0] on a 2-D tensor")
        return view, 1 - orientation, node.output[0]

    # Layers --------------------------------------------------------------------------------

    def _spatial_pads(self, node, index, attrs, in_hw, kernel, stride):
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        if auto_pad in ("NOTSET", ""):
            pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
            self._require(len(pads) == 4 and min(pads) >= 0, node, index, f"pads {list(pads)} are "
                          f"not 4 non-negative values")
            return pads
        if auto_pad == "VALID":
            return (0, 0, 0, 0)
        self._require(auto_pad in ("SAME_UPPER", "SAME_LOWER"), node, index,
                      f"auto_pad {auto_pad} is not supported")
        begin, end = [], []
        for size, k, s in zip(in_hw, kernel, stride):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return (begin[0], begin[1], end[0], end[1])

    def _op_Conv(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        attrs = self.attrs(node)
        weight = self.const(node.input[1], node, index, "weight").astype(np.float32)
        self._require(weight.ndim == 4, node, index, f"only 2-D convolution is supported (weight "
                      f"{_shape_text(weight.shape)})")
        self._require(attrs.get("group", 1) == 1, node, index, f"group {attrs.get('group')} is not "
                      f"supported (only group 1)")
        dilations = list(attrs.get("dilations", (1, 1)))
        self._require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported "
                      f"(only 1)")
        m, c, kh, kw = weight.shape
        self._require(orientation == 0 and len(view) == 3, node, index, f"needs an [N, C, H, W] input, "
                      f"got {_shape_text(['N', *view])}")
        self._require(view[0] == c, node, index, f"weight {_shape_text(weight.shape)} needs {c} input "
                      f"channels, the input has {view[0]}")
        kernel = tuple(attrs.get("kernel_shape", (kh, kw)))
        self._require(kernel == (kh, kw), node, index, f"kernel_shape {list(kernel)} does not match "
                      f"the weight {_shape_text(weight.shape)}")
        stride = tuple(attrs.get("strides", (1, 1)))
        self._require(len(stride) == 2 and min(stride) >= 1, node, index, f"strides {list(stride)}")
        pads = self._spatial_pads(node, index, attrs, view[1:], kernel, stride)
        bias = np.zeros(m, np.float32)
        if len(node.input) > 2 and node.input[2]:
            bias = self.const(node.input[2], node, index, "bias").astype(np.float32).reshape(-1)
            self._require(bias.shape == (m,), node, index, f"bias has shape "
                          f"{_shape_text(bias.shape)}, expected [{m}]")
        ho = (view[1] + pads[0] + pads[2] - kh) // stride[0] + 1
        wo = (view[2] + pads[1] + pads[3] - kw) // stride[1] + 1
        self._require(ho >= 1 and wo >= 1, node, index, f"the kernel {kh}x{kw} does not fit the "
                      f"padded input {_shape_text(view)}")
        self._ensure_canonical(tuple(view), _layer_name(node, index))
        out = (m, ho, wo)
        self.layers.append(Conv(name=_layer_name(node, index), weight=weight, bias=bias,
                                stride=stride, pads=pads, in_shape=tuple(view), out_shape=out))
        self.canon = out
        return out, 0, node.output[0]

    def _op_MaxPool(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        if len(node.output) > 1 and node.output[1] and self.consumers.get(node.output[1]):
            raise FpganetError(f"{_describe(node, index)}: its Indices output is used; not supported")
        attrs = self.attrs(node)
        self._require(orientation == 0 and len(view) == 3, node, index, f"needs an [N, C, H, W] input, "
                      f"got {_shape_text(['N', *view])}")
        kernel = tuple(attrs.get("kernel_shape", ()))
        self._require(len(kernel) == 2, node, index, f"kernel_shape {list(kernel)} is not 2-D")
        dilations = list(attrs.get("dilations", (1, 1)))
        self._require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported")
        stride = tuple(attrs.get("strides", (1, 1)))
        pads = list(self._spatial_pads(node, index, attrs, view[1:], kernel, stride))
        self._require(all(p < k for p, k in zip(pads, kernel + kernel)), node, index,
                      f"pads {pads} must be smaller than the kernel {list(kernel)}")
        out_hw = []
        for axis in range(2):
            size, k, s = view[1 + axis], kernel[axis], stride[axis]
            begin, end = pads[axis], pads[axis + 2]
            if attrs.get("ceil_mode", 0):
                out = -(-(size + begin + end - k) // s) + 1
                if (out - 1) * s >= size + begin:  # a window must start inside the input or left pad
                    out -= 1
                pads[axis + 2] = max(end, (out - 1) * s + k - size - begin)
            else:
                out = (size + begin + end - k) // s + 1
            self._require(out >= 1, node, index, f"the kernel {list(kernel)} does not fit the input "
                          f"{_shape_text(view)}")
            out_hw.append(out)
        self._ensure_canonical(tuple(view), _layer_name(node, index))
        out = (view[0], *out_hw)
        self.layers.append(MaxPool(name=_layer_name(node, index), kernel=kernel, stride=stride,
                                   pads=tuple(pads), in_shape=tuple(view), out_shape=out))
        self.canon = out
        return out, 0, node.output[0]

    def _op_Relu(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        shape = canonical_shape(view)
        self._ensure_canonical(shape, _layer_name(node, index))
        self.layers.append(Relu(name=_layer_name(node, index), in_shape=shape))
        return view, orientation, node.output[0]

    def _dense(self, node, index, view, weight, bias):
        """Emit a Dense layer ``W [M, K]`` on the current (K,) view."""
        m, k = weight.shape
        name = _layer_name(node, index)
        self._ensure_canonical((k, 1, 1), name)
        self.layers.append(Dense(name=name, weight=weight.astype(np.float32),
                                 bias=bias.astype(np.float32), in_shape=(k, 1, 1),
                                 out_shape=(m, 1, 1)))
        self.canon = (m, 1, 1)

    def _op_Gemm(self, node, index, current, view, orientation):
        data = self._data_index(node, index, current, (0, 1))
        attrs = self.attrs(node)
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        trans_a, trans_b = attrs.get("transA", 0), attrs.get("transB", 0)
        self._require(len(view) == 1, node, index, f"needs a 2-D input, got "
                      f"{_shape_text(['N', *view])}")
        other = self.const(node.input[1 - data], node, index, "B" if data == 0 else "A")
        self._require(other.ndim == 2, node, index, f"constant operand has shape "
                      f"{_shape_text(other.shape)}, expected 2-D")
        other = other.astype(np.float64)
        if data == 0:
            # Y[N, M] = op(A)[N, K] op(B)[K, M]: the data must read as [N, K].
            self._require(orientation == trans_a, node, index,
                          "transA does not match the data layout (the batch must end up on axis 0 of op(A))")
            op_b = other.T if trans_b else other
            weight, out_orientation = op_b.T, 0
        else:
            # Y[M, N] = op(A)[M, K] op(B)[K, N]: the data must read as [K, N].
            self._require(orientation != trans_b, node, index,
                          "transB does not match the data layout (the batch must end up on axis 1 of op(B))")
            weight, out_orientation = (other.T if trans_a else other), 1
        m, k = weight.shape
        self._require(k == view[0], node, index, f"constant operand {_shape_text(other.shape)} does "
                      f"not match the {view[0]} input features")
        bias = np.zeros(m)
        if len(node.input) > 2 and node.input[2]:
            c = self.const(node.input[2], node, index, "C").astype(np.float64)
            bias = beta * self._per_channel(node, index, c, (m,), out_orientation, m)
        self._dense(node, index, view, alpha * weight, bias)
        return (m,), out_orientation, node.output[0]

    def _op_MatMul(self, node, index, current, view, orientation):
        data = self._data_index(node, index, current, (0, 1))
        self._require(len(view) == 1, node, index, f"needs a 2-D input, got "
                      f"{_shape_text(['N', *view])}")
        other = self.const(node.input[1 - data], node, index, "weight").astype(np.float64)
        self._require(other.ndim == 2, node, index, f"constant operand has shape "
                      f"{_shape_text(other.shape)}, expected 2-D")
        if data == 0:
            self._require(orientation == 0, node, index, "the data operand must be [N, K]")
            weight, out_orientation = other.T, 0
        else:
            self._require(orientation == 1, node, index, "the data operand must be [K, N]")
            weight, out_orientation = other, 1
        self._require(weight.shape[1] == view[0], node, index, f"constant operand "
                      f"{_shape_text(other.shape)} does not match the {view[0]} input features")
        self._dense(node, index, view, weight, np.zeros(weight.shape[0]))
        return (weight.shape[0],), out_orientation, node.output[0]

    def _last_linear(self, node, index, view):
        """The Conv/Dense whose output the current tensor is (through shape-only ops)."""
        layer = self.layers[-1] if self.layers else None
        fits = isinstance(layer, LINEAR_LAYERS) and self.canon == layer.out_shape
        if not fits:
            raise FpganetError(f"{_describe(node, index)} does not directly follow a Conv, Gemm or "
                               f"MatMul; {node.op_type} is only supported folded into one")
        m = layer.out_shape[0]
        self._require(view and view[0] in (m, 1) and int(np.prod(view)) == int(np.prod(layer.out_shape)),
                      node, index, f"its channel axis (size {view[0] if view else '?'}) is not the "
                      f"{m} output channels of '{layer.name}'")
        return layer

    def _per_channel(self, node, index, const, view, orientation, m):
        """A constant broadcast over [N, *view] as one value per channel (axis 1), or an error."""
        full = (1, *view) if orientation == 0 else (*view, 1)
        try:
            if const.ndim > len(full):
                raise ValueError
            values = np.broadcast_to(const, full)
        except ValueError:
            raise FpganetError(f"{_describe(node, index)}: constant of shape "
                               f"{_shape_text(const.shape)} does not broadcast over "
                               f"{_shape_text(['N', *view] if orientation == 0 else [*view, 'N'])} "
                               f"without depending on the batch") from None
        values = values.reshape(view)
        per_channel = values.reshape(view[0], -1)
        self._require(np.all(per_channel == per_channel[:, :1]), node, index,
                      f"constant of shape {_shape_text(const.shape)} varies within a channel; only "
                      f"per-channel values can be folded")
        return np.broadcast_to(per_channel[:, 0], (m,)).astype(np.float64)

    def _op_Add(self, node, index, current, view, orientation):
        data = self._data_index(node, index, current, (0, 1))
        layer = self._last_linear(node, index, view)
        const = self.const(node.input[1 - data], node, index, "addend").astype(np.float64)
        m = layer.out_shape[0]
        layer.bias = (layer.bias.astype(np.float64)
                      + self._per_channel(node, index, const, view, orientation, m)).astype(np.float32)
        self.notes.append(f"folded Add '{_layer_name(node, index)}' into the bias of '{layer.name}'")
        return view, orientation, node.output[0]

    def _op_BatchNormalization(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        attrs = self.attrs(node)
        self._require(not attrs.get("training_mode", 0), node, index, "training_mode 1 is not supported")
        self._require(attrs.get("spatial", 1) == 1, node, index, "spatial 0 is not supported")
        for extra in node.output[1:]:
            self._require(not (extra and self.consumers.get(extra)), node, index,
                          "its training outputs are used; only inference BatchNorm is supported")
        self._require(orientation == 0, node, index, "needs the batch on axis 0")
        layer = self._last_linear(node, index, view)
        gamma, beta, mean, var = (self.const(node.input[i], node, index, role).astype(np.float64).ravel()
                                  for i, role in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")))
        channels = view[0]
        for values, role in ((gamma, "scale"), (beta, "B"), (mean, "mean"), (var, "var")):
            self._require(values.shape == (channels,), node, index, f"{role} has "
                          f"{values.size} values for {channels} channels")
        epsilon = float(attrs.get("epsilon", 1e-5))
        self._require(np.all(var + epsilon > 0), node, index, "var + epsilon is not positive")
        m = layer.out_shape[0]
        scale = np.broadcast_to(gamma / np.sqrt(var + epsilon), (m,))
        shift = np.broadcast_to(beta - mean * gamma / np.sqrt(var + epsilon), (m,))
        weight = layer.weight.astype(np.float64)
        layer.weight = (weight * scale.reshape((m,) + (1,) * (weight.ndim - 1))).astype(np.float32)
        layer.bias = (layer.bias.astype(np.float64) * scale + shift).astype(np.float32)
        self.notes.append(f"folded BatchNormalization '{_layer_name(node, index)}' into '{layer.name}'")
        return view, orientation, node.output[0]
