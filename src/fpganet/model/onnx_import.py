"""ONNX import: a CNN in ONNX (a chain or a DAG) into the float IR of :mod:`fpganet.model.ir`.

Each supported op is one small handler function in :mod:`fpganet.model.onnx_ops`,
registered under its op type (:data:`SUPPORTED_OPS` and the refusal of any other op come
from that registry); :class:`~fpganet.model.onnx_context.ImportContext` holds what they
share. The importer visits the nodes on the data path (computed from the graph input,
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
converters emit); a Transpose [0, 3, 1, 2] that alone reads an NHWC graph input is left
to the host, which transposes the model's own inputs (``Graph.input_layout`` ``"nhwc"``). Removed: Dropout, Identity, a final Softmax/LogSoftmax (the arg-max is
unchanged; :attr:`Graph.dropped_output_op` says so). The batch is free: a fixed
batch in the input declaration, or baked into a Reshape constant (``[10, 400]``),
is ignored, and the ``x.view(x.size(0), -1)`` pattern (Shape, Gather, Unsqueeze,
Concat) is folded symbolically. Before all of it, nodes of constant inputs become
initializers (:mod:`fpganet.model.onnx_fold`), so that a weight written as a Reshape or
Transpose of an initializer is a constant; an initializer that is a graph input too (IR 3)
is a constant as well.
"""

from ..errors import FpganetError, one_line
from ..files import existing_file, file_sha256
from .ir import fuse_relu
from .onnx_context import ImportContext
from .onnx_fold import fold_constants, without_static_inputs
from .onnx_ops import ONNX_OPS

__all__ = ["load_onnx", "import_model", "SUPPORTED_OPS", "file_sha256"]

#: Ops the importer accepts on the data path, with the restrictions their handlers check.
SUPPORTED_OPS = {op_type: ONNX_OPS[op_type].restriction for op_type in sorted(ONNX_OPS)}


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
    from .qonnx import attach_qonnx, strip_qonnx

    model = without_static_inputs(model)
    model, qdq = strip_qdq(model)
    if qdq is None:
        model, qdq = strip_qonnx(model)
    model = fold_constants(model)
    importer = ImportContext(model)
    graph = importer.run()
    tensor_layers = importer.tensor_layers(graph) if qdq is not None else None
    graph = fuse_relu(graph)
    if qdq is not None:
        # The quantization of a dropped final Softmax's output means nothing for the logits.
        ignored = importer.output_name if graph.dropped_output_op else None
        attach = attach_qonnx if hasattr(qdq, "levels") else attach_quantization
        attach(graph, qdq, tensor_layers, importer.node_layers, ignored)
    return graph
