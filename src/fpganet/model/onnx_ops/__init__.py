"""ONNX op handlers, one small function per op, registered by :func:`onnx_handler`.

:data:`ONNX_OPS` maps an op type to its :class:`~fpganet.model.onnx_ops.registry.OnnxOp`;
the importer's supported list (:data:`fpganet.model.onnx_import.SUPPORTED_OPS`) and its
refusal of another op come from it. The handlers live by kind: :mod:`.structure` (ops that
move or drop data), :mod:`.conv_pool`, :mod:`.dense`, :mod:`.folding`.
"""

from . import conv_pool, dense, folding, structure  # noqa: F401  (registers the handlers)
from .registry import ONNX_OPS, OnnxOp, onnx_handler, supported_list

__all__ = ["ONNX_OPS", "OnnxOp", "onnx_handler", "supported_list"]
