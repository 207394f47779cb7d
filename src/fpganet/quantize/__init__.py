"""Post-training int8 quantization: calibration ranges, fixed-point parameters, the quantizer."""

from .calibrate import DEFAULT_METHOD, METHODS, parse_method, tensor_range
from .fixed_point import activation_qparams, quantize_multiplier, requantize, weight_qparams
from .quantizer import quantize_add, quantize_avgpool, quantize_graph, quantize_linear_layer

__all__ = ["DEFAULT_METHOD", "METHODS", "parse_method", "tensor_range", "activation_qparams",
           "quantize_multiplier", "requantize", "weight_qparams", "quantize_graph",
           "quantize_linear_layer", "quantize_add", "quantize_avgpool"]
