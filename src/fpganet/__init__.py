"""fpganet: a trained CNN (ONNX) to an int8 systolic-array accelerator, verified bit for bit.

The compile flow's Python API is importable from here (loaded on first use, so
that ``import fpganet.hdl`` does not pay for onnx and onnxruntime):

- :func:`compile_model` ONNX + calibration data -> :class:`~fpganet.qnet.QNetwork`
  (and a compiled directory);
- :func:`load_compiled` read a compiled directory back;
- :func:`run_network` host quantization, a backend (``"golden"``...), dequantization;
- :func:`run_golden` the integer golden model on int8 inputs;
- :func:`register_backend` plug in another backend (the RTL simulator);
- :class:`FpganetError` the user-facing error.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "compile_model": "fpganet.compiler",
    "load_compiled": "fpganet.compiler",
    "run_network": "fpganet.backends",
    "register_backend": "fpganet.backends",
    "BACKENDS": "fpganet.backends",
    "run_golden": "fpganet.golden",
    "QNetwork": "fpganet.qnet",
    "FpganetError": "fpganet.errors",
    "AcceleratorConfig": "fpganet.config",
    "load_onnx": "fpganet.model",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fpganet' has no attribute {name!r}")
