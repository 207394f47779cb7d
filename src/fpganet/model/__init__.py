"""Model import: ONNX into a float graph IR, and a numpy reference executor for it."""

from .ir import (Add, AvgPool, Conv, Dense, Graph, MaxPool, Relu, Reshape, canonical_shape, fuse_relu,
                 layer_inputs)
from .onnx_import import SUPPORTED_OPS, file_sha256, import_model, load_onnx
from .reference import run_float

__all__ = ["Add", "AvgPool", "Conv", "Dense", "Graph", "MaxPool", "Relu", "Reshape", "canonical_shape",
           "fuse_relu", "layer_inputs",
           "SUPPORTED_OPS", "file_sha256", "import_model", "load_onnx", "run_float"]
