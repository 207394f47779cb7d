"""The registry of ONNX op handlers: op type -> one small function (as hls4ml's converters).

A handler is ``handler(ctx, node, index, data) -> (view, orientation)``: ``ctx`` the
:class:`~fpganet.model.onnx_context.ImportContext` (constants, attributes, the walk's
current tensor, ``emit``), ``node`` the ``onnx.NodeProto`` and ``index`` its position in
the graph, ``data`` the :class:`~fpganet.model.onnx_common.DataInput` it reads; it emits
IR layers through ``ctx`` (or folds the node into earlier ones) and returns the per-sample
view and orientation of its output. A new op is one such function under
:func:`onnx_handler`; the importer's supported list and its refusal message come from here.
"""

from dataclasses import dataclass

__all__ = ["OnnxOp", "ONNX_OPS", "onnx_handler", "supported_list"]


@dataclass(frozen=True)
class OnnxOp:
    """One supported op.

    Attributes
    ----------
    op_type : str
        The ONNX op type (default domain).
    handler : callable
        See the module docstring.
    restriction : str
        What the handler checks, in a few words ("" when nothing beyond ONNX).
    takes_affine : bool
        A per-channel scale and shift still to fold forward (a BatchNormalization after a
        ReLU) may reach it: the op folds it, or passes it on.
    takes_order : bool
        A transposed data order still to fold (a Transpose to NHWC before a flatten) may
        reach it.
    join : callable or None
        ``join(ctx, node, index, names) -> TensorState`` for a node reading two data
        tensors (a residual Add); None: the op reads one.
    """

    op_type: str
    handler: object
    restriction: str = ""
    takes_affine: bool = False
    takes_order: bool = False
    join: object = None


#: Op type -> :class:`OnnxOp`, in registration order.
ONNX_OPS = {}


def onnx_handler(op_type, restriction="", *, takes_affine=False, takes_order=False, join=None):
    """Register the decorated function as the handler of ``op_type``."""
    def register(handler):
        if op_type in ONNX_OPS:
            raise ValueError(f"two handlers for ONNX op '{op_type}'")
        ONNX_OPS[op_type] = OnnxOp(op_type, handler, restriction, takes_affine, takes_order, join)
        return handler
    return register


def supported_list():
    """The supported op types as the refusal message names them: sorted, comma-separated."""
    return ", ".join(sorted(ONNX_OPS))
