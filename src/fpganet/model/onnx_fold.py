"""Constant folding of an ONNX graph before import.

A node whose every input is a constant (an initializer, a ``Constant`` node's output, or
the output of a node folded before) computes the same tensor on every run, so it becomes
an initializer: a MatMul weight written as ``Reshape(initializer, shape)`` (the ONNX zoo's
mnist-8) or ``Transpose(initializer)`` then reaches the importer as the constant it is.
The values come from onnx's own reference implementation of each op
(:class:`onnx.reference.ReferenceEvaluator`, at the model's opset), so they are what the
model defines. Only shape and arithmetic ops are folded (:data:`FOLDABLE`); quantization
ops stay, so that a QDQ model's quantization is read from its nodes.
"""

import numpy as np

__all__ = ["FOLDABLE", "fold_constants", "without_static_inputs"]

#: Ops folded when every input is a constant.
FOLDABLE = frozenset({
    "Add", "Cast", "Concat", "Div", "Expand", "Flatten", "Gather", "Identity", "Mul", "Neg", "Pow",
    "Reshape", "Slice", "Sqrt", "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze",
})

#: Folded tensors above this many elements are left to the importer (an Expand or Tile
#: could otherwise make a huge initializer from a small one).
MAX_ELEMENTS = 1 << 24


def without_static_inputs(model):
    """``model`` without the graph inputs that name an initializer (a copy; ``model`` itself
    when there is none). Exporters of IR 3 (CNTK's mnist-8, older PyTorch and Keras) list
    every weight as a graph input too; ONNX lets a caller override such an input, but a
    compiled network's weights are fixed, so they are constants, as onnxruntime reads them
    when they are not fed."""
    static = {tensor.name for tensor in model.graph.initializer}
    if not any(value.name in static for value in model.graph.input):
        return model
    result = model.__class__()
    result.CopyFrom(model)
    kept = [value for value in result.graph.input if value.name not in static]
    del result.graph.input[:]
    result.graph.input.extend(kept)
    return result


def _constant_values(graph, numpy_helper):
    # Every initializer is a constant here, as for the importer (without_static_inputs).
    values = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((attribute.t for attribute in node.attribute if attribute.name == "value"),
                         None)
            if value is not None:
                values[node.output[0]] = numpy_helper.to_array(value)
    return values


def _evaluate(node, values, opset):
    from onnx.reference import ReferenceEvaluator

    try:
        outputs = ReferenceEvaluator(node, opsets={"": opset}).run(
            None, {name: values[name] for name in node.input if name})
    except Exception:  # left to the importer, which names what it cannot take
        return None
    outputs = [np.asarray(output) for output in outputs]
    if any(output.dtype == object or output.size > MAX_ELEMENTS for output in outputs):
        return None
    return outputs


def fold_constants(model):
    """``model`` (an ``onnx.ModelProto``, its static inputs dropped by
    :func:`without_static_inputs`) with every foldable node of constant inputs replaced by
    initializers; the model itself when there is none. Initializers that only folded nodes
    read are dropped."""
    from onnx import numpy_helper

    graph = model.graph
    opset = max((entry.version for entry in model.opset_import
                 if entry.domain in ("", "ai.onnx")), default=0)
    values = _constant_values(graph, numpy_helper)
    outputs = {value.name for value in graph.output}
    folded = {}
    changed = True
    while changed:
        changed = False
        for node in graph.node:
            if (node.op_type not in FOLDABLE or node.domain not in ("", "ai.onnx")
                    or node.output[0] in folded or not node.input
                    or any(name and name not in values for name in node.input)
                    or any(name in outputs for name in node.output)):
                continue
            results = _evaluate(node, values, opset)
            if results is None:
                continue
            for name, result in zip(node.output, results):
                values[name] = folded[name] = result
            changed = True
    if not folded:
        return model
    kept = [node for node in graph.node if node.output[0] not in folded]
    read = {name for node in kept for name in node.input} | outputs
    only_folded = {name for node in graph.node if node.output[0] in folded
                   for name in node.input} - read
    result = model.__class__()
    result.CopyFrom(model)
    del result.graph.node[:]
    result.graph.node.extend(kept)
    initializers = [tensor for tensor in graph.initializer if tensor.name not in only_folded]
    initializers += [numpy_helper.from_array(value, name) for name, value in folded.items()
                     if name in read]
    del result.graph.initializer[:]
    result.graph.initializer.extend(initializers)
    return result
