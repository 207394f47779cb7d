"""The ONNX importer's context: the graph's constants, attributes and shapes, and the walk.

:class:`ImportContext` visits the nodes on the data path (computed from the graph input,
and needed for the graph output) in topological order and hands each to its handler in
the registry (:mod:`fpganet.model.onnx_ops`). It keeps, for every data tensor, a
:class:`~fpganet.model.onnx_common.TensorState`; the handlers read and update the *current*
tensor's state through it (``src``, ``canon``, ``exclusive``, ``affine``, ``order``) and
append layers with :meth:`ImportContext.emit`.
"""

import heapq

import numpy as np

from ..errors import FpganetError, one_line
from .ir import GRAPH_INPUT, Graph, Relu, Reshape, canonical_shape, input_chw
from .onnx_common import BATCH, DataInput, TensorState, describe, shape_text
from .onnx_ops import ONNX_OPS, supported_list

__all__ = ["ImportContext", "check_acyclic"]

#: Ops that only read a tensor's shape; the importer folds them, they are not on the data path.
SHAPE_READERS = {"Shape", "Size"}
#: The oldest opset of the default operator set taken: numpy broadcasting begins at 7, and
#: onnxruntime's kernels do too.
MIN_OPSET = 7


def check_acyclic(graph):
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
        raise FpganetError(f"the graph has a cycle: {describe(graph.node[index], index)} "
                           f"depends on its own output")
    return order


class ImportContext:
    """One import: the maps over the ONNX graph, the walk, and its state.

    What handlers use: :meth:`const` and :meth:`attrs` (a node's constant inputs and
    attributes), :meth:`fold_shape` and :meth:`inferred_view` (shapes), :meth:`data_index`
    and :meth:`require` (checks that name the node), :meth:`ensure_canonical` and
    :meth:`emit` (layers), and the current tensor's state ``src``, ``canon``, ``exclusive``,
    ``affine``/``affine_node`` and ``order``/``order_node`` (see
    :class:`~fpganet.model.onnx_common.TensorState`), with ``notes``, ``touched``, ``values``,
    ``consumers``, ``opset``, ``export_batch``, ``dropped`` and ``logits_name``.
    """

    def __init__(self, model):
        import onnx
        from onnx import numpy_helper

        self.numpy_helper = numpy_helper
        self.opset = max((entry.version for entry in model.opset_import
                          if entry.domain in ("", "ai.onnx")), default=0)
        if self.opset == 0:
            raise FpganetError("the ONNX model imports no version of the default operator set")
        if self.opset < MIN_OPSET:
            # Before opset 7, Add and Mul broadcast by an `axis` attribute, not as numpy does;
            # onnxruntime has no kernels for those versions either.
            raise FpganetError(f"the model uses opset {self.opset} of the default operator set; "
                               f"fpganet, as onnxruntime, takes opset {MIN_OPSET} and later")
        known = onnx.defs.onnx_opset_version()
        if self.opset > known:
            # onnxruntime refuses such a model too; its ops' meaning is not known here.
            raise FpganetError(f"the model uses opset {self.opset} of the default operator set; "
                               f"the installed onnx {onnx.__version__} knows opsets up to {known}")
        self.topological = check_acyclic(model.graph)
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
        raise FpganetError(f"{describe(node, index)} has no dense 'value' (sparse or string "
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
        raise FpganetError(f"the {role} input '{name}' of {describe(node, index)} is not a "
                           f"constant (initializer or Constant node)")

    def attrs(self, node):
        from onnx import helper

        return {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}

    # Symbolic shape folding ----------------------------------------------------------------

    def fold_shape(self, name, depth=0):
        """Value of an integer shape expression as an object array of ints and ``BATCH``, or None."""
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
            if op in SHAPE_READERS:
                if op == "Size" or node.input[0] not in self.view_of:
                    return None
                view, orientation = self.view_of[node.input[0]]
                full = [BATCH, *view] if orientation == 0 else [*view, BATCH]
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
                if any(v is BATCH for v in a.flat) or any(v is BATCH for v in b.flat):
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
        self.input_layout = "nchw"
        self.dropped = None
        self.output_name = output_name
        data_nodes = self._data_nodes(input_info.name)
        self.values = {input_info.name: TensorState(view, 0, None, canonical_shape(view),
                                               exclusive=self._uses(input_info.name) <= 1)}
        self.view_of[input_info.name] = (view, 0)
        for index in data_nodes:
            node = graph.node[index]
            if node.domain not in ("", "ai.onnx"):
                raise self._unsupported(node, index)
            self.touched = []
            with np.errstate(all="ignore"):  # folding overflow is reported below, by layer
                value = self._input_transpose(node, input_info.name) or self._visit(node, index)
            if any(int(d) < 1 for d in value.view):
                raise FpganetError(f"{describe(node, index)} produces an empty tensor "
                                   f"{shape_text(value.view)} (a dimension of size 0)")
            out = node.output[0]
            value.exclusive = value.exclusive and self._uses(out) <= 1
            self.values[out] = value
            self.view_of[out] = (value.view, value.orientation)
            self._check_inferred(out, value.view, value.orientation, node, index)
            self._check_finite(node, index)
            self.node_layers.append((describe(node, index),
                                     [name for name in node.input if name in self.initializers],
                                     list(self.touched)))
        if output_name not in self.values:
            raise FpganetError(f"the graph output '{output_name}' is not computed from the input "
                               f"'{input_info.name}'; the data path is broken")
        value = self.values[output_name]
        self.refuse_pending(value, f"the graph output '{output_name}'")
        if value.orientation != 0:
            raise FpganetError(f"the output '{output_name}' has the batch on axis 1 "
                               f"(a transposed 2-D tensor); add a Transpose [1, 0] before it")
        final_name = self.logits_name if self.dropped else output_name
        self.enter(value)
        self.ensure_canonical(canonical_shape(value.view), "output")
        layers = self._live_layers(self.src)
        return Graph(name=graph.name or "model", input_name=input_info.name,
                     input_shape=tuple(self.input_view), output_name=final_name,
                     output_shape=tuple(value.view), layers=layers, notes=self.notes,
                     dropped_output_op=self.dropped, input_layout=self.input_layout)

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
            if node.op_type in SHAPE_READERS or not any(name in data for name in node.input):
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

    def _input_transpose(self, node, input_name):
        """The state after a Transpose [0, 3, 1, 2] that is the only reader of an NHWC graph
        input (Keras and tf2onnx models), or None: the host transposes instead, and the input
        keeps the model's layout (``input_layout`` ``"nhwc"``)."""
        if node.op_type != "Transpose" or list(node.input) != [input_name] \
                or self._uses(input_name) != 1 or len(self.input_view) != 3 \
                or list(self.attrs(node).get("perm", ())) != [0, 3, 1, 2]:
            return None
        self.input_layout = "nhwc"
        chw = input_chw(self.input_view, "nhwc")
        return TensorState(chw, 0, None, chw)

    def _visit(self, node, index):
        """Convert one data-path node with its handler; returns the :class:`TensorState` of its
        first output."""
        sources = [name for name in dict.fromkeys(node.input) if name in self.values]
        data_inputs = [name for name in node.input if name in self.values]
        op = ONNX_OPS.get(node.op_type)
        if op is None:
            raise self._unsupported(node, index)
        if op.join is not None and len(data_inputs) == 2:
            self._check_arity(node, index)
            return self._guarded(node, index, op.join, self, node, index, data_inputs)
        if len(sources) != 1:
            raise FpganetError(f"{describe(node, index)} reads {len(sources)} data tensors "
                               f"({', '.join(repr(s) for s in sources)}); only Add may join two "
                               f"branches")
        value = self.values[sources[0]]
        if (value.affine is not None and not op.takes_affine) or (value.order is not None
                                                                  and not op.takes_order):
            self.refuse_pending(value, describe(node, index))
        self.enter(value)
        data = DataInput(sources[0], value.view, value.orientation)
        self._check_arity(node, index)
        view, orientation = self._guarded(node, index, op.handler, self, node, index, data)
        return TensorState(view, orientation, self.src, self.canon, exclusive=self.exclusive,
                           affine=self.affine, affine_node=self.affine_node, order=self.order,
                           order_node=self.order_node)

    def enter(self, value):
        """Make ``value`` the walk's current tensor (the state the op handlers read and update)."""
        self.src, self.canon, self.exclusive = value.layer, value.canon, value.exclusive
        self.affine, self.affine_node = value.affine, value.affine_node
        self.order, self.order_node = value.order, value.order_node

    def refuse_pending(self, value, what):
        if value.affine is not None:
            node, index = value.affine_node
            raise FpganetError(f"{describe(node, index)} is neither after nor before a Conv, Gemm "
                               f"or MatMul it could be folded into ({what} reads it)")
        if value.order is not None:
            node, index = value.order_node
            raise FpganetError(f"{describe(node, index)} reorders the data for {what}; a "
                               f"transpose is only supported before a flatten into a Gemm or "
                               f"MatMul")

    def emit(self, layer, sources=None):
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
                    raise FpganetError(f"{describe(node, index)}: layer '{layer.name}' has an "
                                       f"empty {role} tensor")
                if not np.all(np.isfinite(values.astype(np.float32))):
                    raise FpganetError(f"{describe(node, index)}: the {role} of layer "
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
        domain = f" (domain '{node.domain}')" if node.domain not in ("", "ai.onnx") else ""
        return FpganetError(f"unsupported op '{node.op_type}'{domain} in "
                            f"{describe(node, index)}; supported: {supported_list()}")

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
                raise FpganetError(f"tensor '{name}' ({describe(node, index)}): shape inference "
                                   f"says {shape_text(inferred)}, the importer computed "
                                   f"{shape_text(expected)}")

    def ensure_canonical(self, shape, name):
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
                self.emit(Reshape(name=f"reshape_{name}", in_shape=start, out_shape=shape))
                self.exclusive = exclusive
            self.canon = shape

    def data_index(self, node, index, current, allowed):
        positions = [i for i, name in enumerate(node.input) if name == current]
        if len(positions) != 1 or positions[0] not in allowed:
            raise FpganetError(f"{describe(node, index)} takes the data tensor '{current}' as "
                               f"input {positions}; the importer supports it as input "
                               f"{' or '.join(map(str, allowed))} only")
        return positions[0]

    def require(self, condition, node, index, message):
        if not condition:
            raise FpganetError(f"{describe(node, index)}: {message}")

    def _guarded(self, node, index, function, *args):
        """``function(*args)``, any error it raises turned into one line naming ``node``."""
        try:
            return function(*args)
        except FpganetError:
            raise
        except (ArithmeticError, IndexError, KeyError, TypeError, ValueError) as error:
            # A node malformed in a way no check above names (an attribute of the wrong
            # length or type): still one line, naming the node.
            raise FpganetError(f"{describe(node, index)} is malformed: {type(error).__name__}: "
                               f"{one_line(error)[:160]}") from None

    def _check_arity(self, node, index):
        """Refuse a node with fewer or more inputs than its op's ONNX schema allows."""
        import onnx

        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, node.domain or "")
        except Exception:
            raise FpganetError(f"{describe(node, index)}: op {node.op_type} does not exist in "
                               f"opset {self.opset}") from None
        given = len(node.input)
        if not schema.min_input <= given <= schema.max_input:
            expected = (str(schema.min_input) if schema.min_input == schema.max_input
                        else f"{schema.min_input} to {schema.max_input}")
            raise FpganetError(f"{describe(node, index)} has {given} input(s); {node.op_type} "
                               f"takes {expected} in opset {self.opset}")
