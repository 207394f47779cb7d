"""Reading a TFLite flatbuffer into plain Python data: tensors, operators and their options.

Uses the ``tflite`` schema package (no TensorFlow). What the walk over the operators does
with them: :mod:`fpganet.model.tflite_context` and :mod:`fpganet.model.tflite_ops`.
"""

import numpy as np

from ..errors import FpganetError

__all__ = ["read_model", "NUMPY_DTYPES"]


class _Tensor:
    """One tensor: name, dtype name, shape, quantization and raw little-endian data (None: not a
    constant)."""

    def __init__(self, index, name, dtype, shape, scale, zero_point, axis, data, sparse):
        self.index, self.name, self.dtype, self.shape = index, name, dtype, shape
        self.scale, self.zero_point, self.axis = scale, zero_point, axis
        self.data, self.sparse = data, sparse

    def __str__(self):
        return f"tensor '{self.name}'"


class _Op:
    """One operator: its builtin code name, custom code, tensor indices and options dict."""

    def __init__(self, index, code, custom, inputs, outputs, options):
        self.index, self.code, self.custom = index, code, custom
        self.inputs, self.outputs, self.options = inputs, outputs, options


_DTYPES = {}


def _dtype_names():
    if not _DTYPES:
        from tflite.TensorType import TensorType

        for key, value in vars(TensorType).items():
            if not key.startswith("_"):
                _DTYPES[value] = key.lower()
    return _DTYPES


NUMPY_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
                "int64": np.int64, "float32": np.float32, "float16": np.float16}


def _options(op, kind):
    table = op.BuiltinOptions()
    if table is None:
        return None
    options = kind()
    options.Init(table.Bytes, table.Pos)
    return options


def read_model(buf):
    """Every tensor and operator of the only subgraph, as plain Python data."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    op_names = {value: key for key, value in vars(BuiltinOperator).items() if not key.startswith("_")}
    types = _dtype_names()
    model = tflite.Model.GetRootAs(buf, 0)
    if model.SubgraphsLength() != 1:
        raise FpganetError(f"the model has {model.SubgraphsLength()} subgraphs; fpganet imports "
                           f"models with one (no control flow)")
    graph = model.Subgraphs(0)
    buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
    tensors = []
    for index in range(graph.TensorsLength()):
        tensor = graph.Tensors(index)
        name = (tensor.Name() or b"").decode("utf-8", "replace") or f"tensor_{index}"
        dtype = types.get(tensor.Type(), f"type {tensor.Type()}")
        shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
        quant = tensor.Quantization()
        scale = zero_point = None
        axis = 0
        if quant is not None:
            if quant.ScaleLength():
                scale = np.asarray(quant.ScaleAsNumpy(), np.float32)
            if quant.ZeroPointLength():
                zero_point = np.asarray(quant.ZeroPointAsNumpy(), np.int64)
            axis = int(quant.QuantizedDimension())
        data = None
        buffer_index = tensor.Buffer()
        if 0 < buffer_index < len(buffers):
            buffer = buffers[buffer_index]
            if buffer.DataLength():
                raw = buffer.DataAsNumpy().tobytes()
                data = raw
            elif buffer.Offset() > 1:
                offset, size = int(buffer.Offset()), int(buffer.Size())
                if offset + size > len(buf):
                    raise FpganetError(f"tensor '{name}': its data lie beyond the end of the file "
                                       f"(truncated?)")
                data = bytes(buf[offset:offset + size])
        tensors.append(_Tensor(index, name, dtype, shape, scale, zero_point, axis, data,
                               tensor.Sparsity() is not None))
    codes = []
    for index in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(index)
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        custom = (code.CustomCode() or b"").decode("utf-8", "replace")
        codes.append((op_names.get(builtin, f"builtin op {builtin}"), custom))
    ops = []
    for index in range(graph.OperatorsLength()):
        op = graph.Operators(index)
        opcode = op.OpcodeIndex()
        if not 0 <= opcode < len(codes):
            raise FpganetError(f"operator #{index} names operator code {opcode}; the model has "
                               f"{len(codes)}")
        name, custom = codes[opcode]
        inputs = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        outputs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
        for position in inputs + outputs:
            if not -1 <= position < len(tensors):
                raise FpganetError(f"{name} #{index} names tensor {position}; the model has "
                                   f"{len(tensors)}")
        options = _op_options(op, name)
        ops.append(_Op(index, name, custom, inputs, outputs, options))
    graph_inputs = [int(i) for i in graph.InputsAsNumpy()] if graph.InputsLength() else []
    graph_outputs = [int(i) for i in graph.OutputsAsNumpy()] if graph.OutputsLength() else []
    for position in graph_inputs + graph_outputs:
        if not 0 <= position < len(tensors):
            raise FpganetError(f"the subgraph names tensor {position} as an input or output; the "
                               f"model has {len(tensors)}")
    description = (model.Description() or b"").decode("utf-8", "replace")
    return tensors, ops, graph_inputs, graph_outputs, int(model.Version()), description


def _op_options(op, name):
    """The options the importer reads, as a dict."""
    import tflite

    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        kind = tflite.Conv2DOptions if name == "CONV_2D" else tflite.DepthwiseConv2DOptions
        o = _options(op, kind)
        if o is None:
            return None
        result = dict(padding=o.Padding(), stride=(o.StrideH(), o.StrideW()),
                      dilation=(o.DilationHFactor(), o.DilationWFactor()),
                      activation=o.FusedActivationFunction())
        if name == "DEPTHWISE_CONV_2D":
            result["multiplier"] = o.DepthMultiplier()
        return result
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = _options(op, tflite.Pool2DOptions)
        return None if o is None else dict(padding=o.Padding(), stride=(o.StrideH(), o.StrideW()),
                                           kernel=(o.FilterHeight(), o.FilterWidth()),
                                           activation=o.FusedActivationFunction())
    if name == "FULLY_CONNECTED":
        o = _options(op, tflite.FullyConnectedOptions)
        return dict(activation=0, format=0, keep_dims=False) if o is None else dict(
            activation=o.FusedActivationFunction(), format=o.WeightsFormat(),
            keep_dims=bool(o.KeepNumDims()))
    if name == "ADD":
        o = _options(op, tflite.AddOptions)
        return dict(activation=0 if o is None else o.FusedActivationFunction())
    if name == "MEAN":
        o = _options(op, tflite.ReducerOptions)
        return dict(keep_dims=o is not None and bool(o.KeepDims()))
    return {}
