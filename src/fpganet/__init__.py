"""fpganet: a trained CNN (ONNX) to an int8 systolic-array accelerator, verified bit for bit."""

__version__ = "0.1.0"
