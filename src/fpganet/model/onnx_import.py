"""ONNX import: a CNN in ONNX (a chain or a DAG) into the float IR of :mod:`fpganet.model.ir`.

The importer visits the nodes on the data path (computed from the graph input,
and needed for the graph output) in topological order and keeps, for every data
tensor, its per-sample *view* (the ONNX shape without the batch axis, e.g.
``(400,)``), its *orientation* (0 when the batch is axis 0, 1 when a 2-D tensor
has been transposed so that the batch is axis 1; only Transpose/Gemm/MatMul may
touch that), the IR layer whose output holds its data and that layer's canonical
shape. Layers are emitted in canonical ``(C, H, W)`` shapes; a
:class:`~fpganet.model.ir.Reshape` is emitted only when a layer needs a
different canonical shape than the one its input layer produced, so
Unsqueeze/Squeeze pairs around a 1-D BatchNorm leave no trace. An Add of two
data tensors is a residual :class:`~fpganet.model.ir.Add`; a tensor may feed
several nodes.

Folded at import: BatchNormalization into the Conv/Gemm before it, or, where it
follows something else (a ReLU), forward into the Conv/Gemm after it; an Add of
a per-channel constant likewise (MatMul+Add becomes a dense layer); a Transpose
to NHWC before a flatten into the columns of the Gemm after it (the heads TF
converters emit). Removed: Dropout, Identity, a final Softmax/LogSoftmax (the arg-max is
unchanged; :attr:`Graph.dropped_output_op` says so). The batch is free: a fixed
batch in the input declaration, or baked into a Reshape constant (``[10, 400]``),
is ignored, and the ``x.view(x.size(0), -1)`` pattern (Shape, Gather, Unsqueeze,
Concat) is folded symbolically.
"""

import heapq

import numpy as np

from ..errors import FpganetError, one_line
from ..files import existing_file, file_sha256
from .ir import (GRAPH_INPUT, LINEAR_LAYERS, Add, AvgPool, Conv, Dense, Graph, MaxPool, Relu,
                 Reshape, canonical_shape, fuse_relu)

__all__ = ["load_onnx", "import_model", "SUPPORTED_OPS", "file_sha256"]

#: Ops the importer accepts on the data path, with the restrictions it checks.
SUPPORTED_OPS = {
    "Conv": "2-D, dilation 1, any group (depthwise)",
    "Relu": "",
    "Clip": "min 0 (ReLU, ReLU6)",
    "MaxPool": "2-D, dilation 1",
    "AveragePool": "2-D, padding only with count_include_pad 1",
    "GlobalAveragePool": "",
    "ReduceMean": "over H and W",
    "Gemm": "one constant operand",
    "MatMul": "one constant 2-D operand, followed by Add as dense",
    "Add": "two feature maps of one shape (residual), or a per-channel constant, folded",
    "BatchNormalization": "folded into the Conv/Gemm before or after it",
    "Flatten": "axis 1",
    "Reshape": "batch stays axis 0",
    "Unsqueeze": "",
    "Squeeze": "",
    "Transpose": "perm [1, 0] on 2-D around Gemm/MatMul; batch-first perms before a Gemm",
    "Dropout": "removed",
    "Identity": "removed",
    "Softmax": "final node, dropped",
    "LogSoftmax": "final node, dropped",
}

#: Ops that only read a tensor's shape; the importer folds them, they are not on the data path.
_SHAPE_READERS = {"Shape", "Size"}

_BATCH = "N"  # the symbolic batch size inside folded shape expressions

#: Ops that only move or relabel data: a pending fold (BatchNorm forward, a transposed
#: order) passes through them to the Conv/Gemm that absorbs it.
_PASS_THROUGH = {"Identity", "Dropout", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose"}


class _Value:
    """What the importer knows about one data tensor.

    ``layer``: the IR layer whose output holds its data (None: the graph input);
    ``canon``: that data's canonical shape (a Reshape still to emit when a layer wants
    another); ``exclusive``: no other node reads the data between ``layer`` and here (so a
    BatchNorm may be folded back into it); ``affine``: a per-element ``(scale, shift)`` over
    the stored data, still to fold forward, and ``affine_node`` the node that made it;
    ``order``: logical flat index -> stored flat index after a Transpose (None: NCHW), and
    ``order_node`` that Transpose.
    """

    __slots__ = ("view", "orientation", "layer", "canon", "exclusive", "affine", "affine_node",
                 "order", "order_node")

    def __init__(self, view, orientation, layer, canon, exclusive=True, affine=None,
                 affine_node=None, order=None, order_node=None):
        self.view, self.orientation, self.layer, self.canon = tuple(view), orientation, layer, canon
        self.exclusive, self.affine, self.affine_node = exclusive, affine, affine_node
        self.order, self.order_node = order, order_node


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

    path = existing_file(path, "model file")
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
    from .qdq import attach_quantization, strip_qdq

    model, qdq = strip_qdq(model)
    importer = _Importer(model)
    graph = importer.run()
    tensor_layers = importer.tensor_layers(graph) if qdq is not None else None
    graph = fuse_relu(graph)
    if qdq is not None:
        # The quantization of a dropped final Softmax's output means nothing for the logits.
        ignored = importer.output_name if graph.dropped_output_op else None
        attach_quantization(graph, qdq, tensor_layers, importer.node_layers, ignored)
    return graph


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
    heapq.heapify(ready)
    done = 0
    order = []
    while ready:
        index = heapq.heappop(ready)  # the file's order wherever the dependencies allow it
        order.append(index)
        done += 1
        for user in users.get(index, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
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
    return order


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
        self.topological = _check_acyclic(model.graph)
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
        self.node_layers = []  # (node, its constant inputs, layers it made or changed)
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
        self.dropped = None
        self.output_name = output_name
        data_nodes = self._data_nodes(input_info.name)
        self.values = {input_info.name: _Value(view, 0, None, canonical_shape(view),
                                               exclusive=self._uses(input_info.name) <= 1)}
        self.view_of[input_info.name] = (view, 0)
        for index in data_nodes:
            node = graph.node[index]
            if node.domain not in ("", "ai.onnx"):
                raise self._unsupported(node, index)
            self.touched = []
            with np.errstate(all="ignore"):  # folding overflow is reported below, by layer
                value = self._visit(node, index)
            if any(int(d) < 1 for d in value.view):
                raise FpganetError(f"{_describe(node, index)} produces an empty tensor "
                                   f"{_shape_text(value.view)} (a dimension of size 0)")
            out = node.output[0]
            value.exclusive = value.exclusive and self._uses(out) <= 1
            self.values[out] = value
            self.view_of[out] = (value.view, value.orientation)
            self._check_inferred(out, value.view, value.orientation, node, index)
            self._check_finite(node, index)
            self.node_layers.append((_describe(node, index),
                                     [name for name in node.input if name in self.initializers],
                                     list(self.touched)))
        if output_name not in self.values:
            raise FpganetError(f"the graph output '{output_name}' is not computed from the input "
                               f"'{input_info.name}'; the data path is broken")
        value = self.values[output_name]
        self._refuse_pending(value, f"the graph output '{output_name}'")
        if value.orientation != 0:
            raise FpganetError(f"the output '{output_name}' has the batch on axis 1 "
                               f"(a transposed 2-D tensor); add a Transpose [1, 0] before it")
        final_name = self.logits_name if self.dropped else output_name
        self._enter(value)
        self._ensure_canonical(canonical_shape(value.view), "output")
        layers = self._live_layers(self.src)
        return Graph(name=graph.name or "model", input_name=input_info.name,
                     input_shape=tuple(self.input_view), output_name=final_name,
                     output_shape=tuple(value.view), layers=layers, notes=self.notes,
                     dropped_output_op=self.dropped)

    def tensor_layers(self, graph):
        """ONNX tensor name -> the layer object holding its data (None: the graph input), for
        tensors with no affine fold pending (a pending transpose only reorders the data); a
        ReLU's tensor maps to the layer it will be fused into (or the pass-through layer before
        it, which then carries the rectified data)."""
        result = {}
        for name, value in self.values.items():
            if value.affine is not None:
                continue
            layer = value.layer
            while isinstance(layer, Relu):
                source = layer.inputs[0]
                layer = None if source == GRAPH_INPUT else graph.layers[source]
            result[name] = layer
        return result

    def _data_nodes(self, input_name):
        """Indices of the nodes on the data path, in topological order.

        A node is on it when it reads a data tensor (the input, or an output of such a
        node) other than through a shape reader. Every one is converted (so an unsupported
        op is refused wherever it is); layers the output does not depend on are dropped.
        """
        graph = self.graph
        data, on_path = {input_name}, []
        for index in self.topological:
            node = graph.node[index]
            if node.op_type in _SHAPE_READERS or not any(name in data for name in node.input):
                continue
            on_path.append(index)
            data.update(name for name in node.output if name)
        self.data_consumers = {}
        for index in on_path:
            for name in set(graph.node[index].input):
                if name in data:
                    self.data_consumers[name] = self.data_consumers.get(name, 0) + 1
        return on_path

    def _uses(self, name):
        """Nodes on the data path reading tensor ``name`` (the graph output counts as one)."""
        return self.data_consumers.get(name, 0) + (name == self.output_name)

    def _visit(self, node, index):
        """Convert one data-path node; returns the :class:`_Value` of its first output."""
        sources = [name for name in dict.fromkeys(node.input) if name in self.values]
        data_inputs = [name for name in node.input if name in self.values]
        if getattr(self, f"_op_{node.op_type}", None) is None:
            raise self._unsupported(node, index)
        if node.op_type == "Add" and len(data_inputs) == 2:
            self._check_arity(node, index)
            return self._guarded(node, index, self._residual_add, node, index, data_inputs)
        if len(sources) != 1:
            raise FpganetError(f"{_describe(node, index)} reads {len(sources)} data tensors "
                               f"({', '.join(repr(s) for s in sources)}); only Add may join two "
                               f"branches")
        value = self.values[sources[0]]
        op = node.op_type
        if op not in _PASS_THROUGH and op not in ("Conv", "Gemm", "MatMul", "BatchNormalization",
                                                  "Add"):
            self._refuse_pending(value, _describe(node, index))
        elif op in ("BatchNormalization", "Add", "Conv") and value.order is not None:
            self._refuse_pending(value, _describe(node, index))
        self._enter(value)
        view, orientation, _ = self._convert(node, index, sources[0], value.view, value.orientation)
        result = _Value(view, orientation, self.src, self.canon,
                        exclusive=self.exclusive, affine=self.affine,
                        affine_node=self.affine_node, order=self.order, order_node=self.order_node)
        return result

    def _enter(self, value):
        """Make ``value`` the walk's current tensor (the state the op handlers read and update)."""
        self.src, self.canon, self.exclusive = value.layer, value.canon, value.exclusive
        self.affine, self.affine_node = value.affine, value.affine_node
        self.order, self.order_node = value.order, value.order_node

    def _refuse_pending(self, value, what):
        if value.affine is not None:
            node, index = value.affine_node
            raise FpganetError(f"{_describe(node, index)} is neither after nor before a Conv, Gemm "
                               f"or MatMul it could be folded into ({what} reads it)")
        if value.order is not None:
            node, index = value.order_node
            raise FpganetError(f"{_describe(node, index)} reorders the data for {what}; a "
                               f"transpose is only supported before a flatten into a Gemm or "
                               f"MatMul")

    def _emit(self, layer, sources=None):
        """Append ``layer`` reading the current tensor (or ``sources``: layers, None = input)."""
        layer.inputs = (self.src,) if sources is None else tuple(sources)
        self.layers.append(layer)
        self.touched.append(layer)
        self.src = layer
        self.exclusive = True

    def _live_layers(self, last):
        """The layers the output layer ``last`` depends on, ``inputs`` turned into indices."""
        if last is None:
            return []
        live, stack = set(), [last]
        while stack:
            layer = stack.pop()
            if layer is None or id(layer) in live:
                continue
            live.add(id(layer))
            stack.extend(layer.inputs)
        layers = [layer for layer in self.layers if id(layer) in live]
        position = {id(layer): i for i, layer in enumerate(layers)}
        for layer in layers:
            layer.inputs = tuple(GRAPH_INPUT if source is None else position[id(source)]
                                 for source in layer.inputs)
        return layers

    def _check_finite(self, node, index):
        """Refuse a layer whose weights or bias stopped being finite float32 when ``node`` was
        converted or folded into it (a BatchNormalization with a huge gamma, Gemm alpha=inf)."""
        for layer in self.touched:
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
        """Emit a Reshape if the canonical shape differs from the current data's."""
        shape = tuple(shape)
        if shape != self.canon:
            if isinstance(self.src, Reshape):
                # Reshape the reshape's own input instead; the earlier Reshape is dropped at
                # the end unless another layer reads it.
                start_layer, start = self.src.inputs[0], self.src.in_shape
            else:
                start_layer, start = self.src, self.canon
            self.src = start_layer
            if start != shape:
                exclusive = self.exclusive
                self._emit(Reshape(name=f"reshape_{name}", in_shape=start, out_shape=shape))
                self.exclusive = exclusive
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
        return self._guarded(node, index, handler, node, index, current, view, orientation)

    def _guarded(self, node, index, function, *args):
        """``function(*args)``, any error it raises turned into one line naming ``node``."""
        try:
            return function(*args)
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
        if len(view) >= 2 and orientation == 0 and sorted(perm) == list(range(len(view) + 1)) \
                and perm[0] == 0:
            # The batch stays first: the data are reordered, which only a Gemm/MatMul after a
            # flatten can absorb (its weight columns are permuted); tracked until then.
            axes = [p - 1 for p in perm[1:]]
            base = np.arange(int(np.prod(view))) if self.order is None else self.order
            order = base.reshape(view).transpose(axes).ravel()
            identity = np.array_equal(order, np.arange(order.size))
            self.order = None if identity else order
            self.order_node = None if identity else (node, index)
            return tuple(view[a] for a in axes), orientation, node.output[0]
        self._require(len(view) == 1 and perm == [1, 0], node, index,
                      f"Transpose with perm {perm} is not supported; only [1, 0] on a 2-D tensor, "
                      f"or one that keeps the batch first")
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
        groups = attrs.get("group", 1)
        dilations = list(attrs.get("dilations", (1, 1)))
        self._require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported "
                      f"(only 1)")
        m, c, kh, kw = weight.shape
        self._require(orientation == 0 and len(view) == 3, node, index, f"needs an [N, C, H, W] input, "
                      f"got {_shape_text(['N', *view])}")
        self._require(isinstance(groups, int) and groups >= 1 and view[0] == c * groups
                      and m % groups == 0, node, index,
                      f"group {groups} with weight {_shape_text(weight.shape)} does not fit the "
                      f"{view[0]} input channels (needs input channels = group x {c}, output "
                      f"channels a multiple of the group)")
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
        if self.affine is not None:
            weight, bias = self._fold_forward_conv(node, index, weight, bias, groups, pads, view)
        out = (m, ho, wo)
        self._emit(Conv(name=_layer_name(node, index), weight=weight, bias=bias,
                        stride=stride, pads=pads, in_shape=tuple(view), out_shape=out,
                        groups=int(groups)))
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
        self._emit(MaxPool(name=_layer_name(node, index), kernel=kernel, stride=stride,
                           pads=tuple(pads), in_shape=tuple(view), out_shape=out))
        self.canon = out
        return out, 0, node.output[0]

    def _op_Relu(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        shape = canonical_shape(view)
        self._ensure_canonical(shape, _layer_name(node, index))
        self._emit(Relu(name=_layer_name(node, index), in_shape=shape))
        return view, orientation, node.output[0]

    def _op_Clip(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        attrs = self.attrs(node)
        if "min" in attrs or "max" in attrs:   # before opset 11: attributes
            low, high = attrs.get("min"), attrs.get("max")
        else:
            low, high = (float(np.asarray(self.const(node.input[i], node, index, role)).reshape(-1)[0])
                         if len(node.input) > i and node.input[i] else None
                         for i, role in ((1, "min"), (2, "max")))
        self._require(low is not None and float(low) == 0.0, node, index,
                      f"Clip with min {low} is not supported; only min 0 (ReLU, ReLU6)")
        self._require(high is None or (np.isfinite(high) and high > 0), node, index,
                      f"Clip with max {high} is not supported; the max must be positive")
        shape = canonical_shape(view)
        self._ensure_canonical(shape, _layer_name(node, index))
        self._emit(Relu(name=_layer_name(node, index), in_shape=shape,
                        clip_max=None if high is None or np.isinf(high) else float(high)))
        return view, orientation, node.output[0]

    def _pool_window(self, node, index, view, orientation, kernel, stride, pads):
        self._require(orientation == 0 and len(view) == 3, node, index, f"needs an [N, C, H, W] "
                      f"input, got {_shape_text(['N', *view])}")
        self._require(len(kernel) == 2 and min(kernel) >= 1, node, index,
                      f"kernel_shape {list(kernel)} is not 2-D")
        self._require(len(stride) == 2 and min(stride) >= 1, node, index, f"strides {list(stride)}")
        self._require(all(p < k for p, k in zip(pads, kernel + kernel)), node, index,
                      f"pads {list(pads)} must be smaller than the kernel {list(kernel)}")
        out_hw = tuple((view[1 + a] + pads[a] + pads[a + 2] - kernel[a]) // stride[a] + 1
                       for a in range(2))
        self._require(min(out_hw) >= 1, node, index, f"the kernel {list(kernel)} does not fit the "
                      f"input {_shape_text(view)}")
        self._ensure_canonical(tuple(view), _layer_name(node, index))
        out = (view[0], *out_hw)
        self._emit(AvgPool(name=_layer_name(node, index), kernel=tuple(kernel), stride=tuple(stride),
                           pads=tuple(pads), in_shape=tuple(view), out_shape=out))
        self.canon = out
        return out

    def _op_AveragePool(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        attrs = self.attrs(node)
        kernel = tuple(attrs.get("kernel_shape", ()))
        self._require(len(kernel) == 2, node, index, f"kernel_shape {list(kernel)} is not 2-D")
        dilations = list(attrs.get("dilations", (1, 1)))
        self._require(dilations == [1, 1], node, index, f"dilations {dilations} are not supported")
        self._require(not attrs.get("ceil_mode", 0), node, index, "ceil_mode 1 is not supported")
        stride = tuple(attrs.get("strides", (1, 1)))
        self._require(len(view) == 3, node, index, f"needs an [N, C, H, W] input, got "
                      f"{_shape_text(['N', *view])}")
        pads = tuple(self._spatial_pads(node, index, attrs, view[1:], kernel, stride))
        self._require(not any(pads) or attrs.get("count_include_pad", 0), node, index,
                      f"pads {list(pads)} with count_include_pad 0 are not supported (border "
                      f"windows would divide by fewer elements)")
        out = self._pool_window(node, index, view, orientation, kernel, stride, pads)
        return out, 0, node.output[0]

    def _op_GlobalAveragePool(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        self._require(len(view) == 3, node, index, f"needs an [N, C, H, W] input, got "
                      f"{_shape_text(['N', *view])}")
        out = self._pool_window(node, index, view, orientation, tuple(view[1:]), (1, 1), (0, 0, 0, 0))
        return out, 0, node.output[0]

    def _op_ReduceMean(self, node, index, current, view, orientation):
        self._data_index(node, index, current, (0,))
        attrs = self.attrs(node)
        axes = self._axes(node, index, len(view) + 1)
        self._require(len(view) == 3 and axes == [2, 3], node, index,
                      f"ReduceMean over axes {axes} of {_shape_text(['N', *view])} is not "
                      f"supported; only over H and W (axes [2, 3]) of [N, C, H, W]")
        out = self._pool_window(node, index, view, orientation, tuple(view[1:]), (1, 1), (0, 0, 0, 0))
        return (out if attrs.get("keepdims", 1) else (out[0],)), 0, node.output[0]

    def _residual_add(self, node, index, names):
        """An Add of two data tensors: a residual :class:`~fpganet.model.ir.Add`."""
        values = [self.values[name] for name in names]
        for name, value in zip(names, values):
            self._refuse_pending(value, _describe(node, index))
            self._require(value.orientation == 0, node, index, f"input '{name}' has the batch on "
                          f"axis 1 (a transposed 2-D tensor)")
        view = values[0].view
        self._require(values[1].view == view, node, index,
                      f"adds {_shape_text(['N', *values[0].view])} and "
                      f"{_shape_text(['N', *values[1].view])}; only two tensors of one shape "
                      f"(no broadcasting) are supported")
        shape = canonical_shape(view)
        sources = []
        for value in values:
            self._enter(value)
            self._ensure_canonical(shape, _layer_name(node, index))
            sources.append(self.src)
        self._emit(Add(name=_layer_name(node, index), in_shape=shape), sources=sources)
        self.canon = shape
        return _Value(view, 0, self.src, shape)

    def _dense(self, node, index, view, weight, bias):
        """Emit a Dense layer ``W [M, K]`` on the current (K,) view."""
        m, k = weight.shape
        name = _layer_name(node, index)
        self._ensure_canonical((k, 1, 1), name)
        weight = np.asarray(weight, np.float64)
        bias = np.asarray(bias, np.float64)
        if self.order is not None:
            # The data are stored in NCHW order; logical feature j lies at stored order[j].
            stored = np.empty_like(weight)
            stored[:, self.order] = weight
            weight = stored
            self.notes.append(f"folded the transpose '{_layer_name(*self.order_node)}' "
                              f"into the columns of '{name}'")
            self.order = self.order_node = None
        if self.affine is not None:
            scale, shift = self.affine
            bias = bias + weight @ shift
            weight = weight * scale[None, :]
            self._note_forward(name)
        self._emit(Dense(name=name, weight=weight.astype(np.float32),
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
        layer = self.src
        fits = (isinstance(layer, LINEAR_LAYERS) and self.canon == layer.out_shape
                and self.exclusive and self.affine is None and self.order is None)
        if not fits:
            return None
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
        if layer is None:
            self._require(orientation == 0 and view, node, index, "needs the batch on axis 0")
            shift = self._per_channel(node, index, const, view, orientation, view[0])
            self._pend_affine(node, index, view, np.ones_like(shift), shift)
            return view, orientation, node.output[0]
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
        if layer is None:
            scale = gamma / np.sqrt(var + epsilon)
            self._pend_affine(node, index, view, scale, beta - mean * scale)
            return view, orientation, node.output[0]
        m = layer.out_shape[0]
        scale = np.broadcast_to(gamma / np.sqrt(var + epsilon), (m,))
        shift = np.broadcast_to(beta - mean * gamma / np.sqrt(var + epsilon), (m,))
        weight = layer.weight.astype(np.float64)
        layer.weight = (weight * scale.reshape((m,) + (1,) * (weight.ndim - 1))).astype(np.float32)
        layer.bias = (layer.bias.astype(np.float64) * scale + shift).astype(np.float32)
        self.touched.append(layer)
        self.notes.append(f"folded BatchNormalization '{_layer_name(node, index)}' into '{layer.name}'")
        return view, orientation, node.output[0]

    # Folding forward -----------------------------------------------------------------------

    def _pend_affine(self, node, index, view, scale, shift):
        """Record ``x -> scale[c] * x + shift[c]`` (per channel, axis 1) on the current tensor, to
        fold into the Conv/Gemm that reads it."""
        size = int(np.prod(view))
        per = size // view[0]
        scale = np.repeat(np.asarray(scale, np.float64), per)
        shift = np.repeat(np.asarray(shift, np.float64), per)
        if self.order is not None:   # stored position order[j] holds logical element j
            stored_scale, stored_shift = np.empty(size), np.empty(size)
            stored_scale[self.order], stored_shift[self.order] = scale, shift
            scale, shift = stored_scale, stored_shift
        if self.affine is not None:
            scale, shift = scale * self.affine[0], scale * self.affine[1] + shift
        self.affine = (scale, shift)
        self.affine_node = (node, index)

    def _note_forward(self, name):
        node, index = self.affine_node
        self.notes.append(f"folded {node.op_type} '{_layer_name(node, index)}' forward into '{name}'")
        self.affine = self.affine_node = None

    def _fold_forward_conv(self, node, index, weight, bias, groups, pads, view):
        """Fold the pending per-channel affine of the input into a Conv's weight and bias."""
        scale, shift = (a.reshape(view[0], -1) for a in self.affine)
        bn_node, bn_index = self.affine_node
        if not (np.all(scale == scale[:, :1]) and np.all(shift == shift[:, :1])):
            raise FpganetError(f"{_describe(bn_node, bn_index)} is not per channel where "
                               f"{_describe(node, index)} reads it; it cannot be folded")
        scale, shift = scale[:, 0], shift[:, 0]
        if any(pads) and np.any(shift != 0):
            raise FpganetError(f"{_describe(bn_node, bn_index)} cannot be folded forward into the "
                               f"padded {_describe(node, index)}: its offset would reach the "
                               f"padding")
        m, cg = weight.shape[:2]
        group_of = np.arange(m) // (m // groups)
        channels = group_of[:, None] * cg + np.arange(cg)[None, :]   # [M, C/g] input channel
        w = weight.astype(np.float64)
        bias = bias.astype(np.float64) + np.einsum("mcij,mc->m", w, shift[channels])
        weight = w * scale[channels][:, :, None, None]
        self._note_forward(_layer_name(node, index))
        return weight.astype(np.float32), bias.astype(np.float32)
