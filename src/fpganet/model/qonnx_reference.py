"""qonnx's own executor on a batch: the outside reference of the QONNX import.

``qonnx.core.onnx_exec.execute_onnx`` (PyPI ``qonnx``, installed with the ``dev`` extra)
runs each standard op as a one-node onnxruntime model and each quantizer in qonnx's numpy
code. Two things are set up around it, neither touching its arithmetic: the model is
cleaned and given the batch (qonnx's ``cleanup_model`` and ``ChangeBatchSize``, as FINN's
flows do), and the one-node models are written at an ONNX IR version the installed
onnxruntime loads (qonnx writes onnx's newest, which onnxruntime may not know yet).
"""

import numpy as np

__all__ = ["qonnx_execute"]

#: Newest ONNX IR version onnxruntime 1.31 loads.
ORT_IR_VERSION = 10


def _capped_make_model(make_model):
    def make(graph, **kwargs):
        model = make_model(graph, **kwargs)
        model.ir_version = min(model.ir_version, ORT_IR_VERSION)
        return model
    return make


def qonnx_execute(path, x, quantized=False):
    """float32 outputs of the QONNX model at ``path`` for the float inputs ``x`` [N, ...]
    (its first input and first output); with ``quantized``, also the outputs of its
    activation quantizers, in graph order (a list of float32 arrays)."""
    import qonnx.core.onnx_exec as onnx_exec
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.change_batchsize import ChangeBatchSize
    from qonnx.util.cleanup import cleanup_model

    x = np.ascontiguousarray(x, dtype=np.float32)
    original = onnx_exec.qonnx_make_model
    onnx_exec.qonnx_make_model = _capped_make_model(original)
    try:
        model = cleanup_model(ModelWrapper(str(path)))
        model = cleanup_model(model.transform(ChangeBatchSize(len(x))))
        model.model.ir_version = min(model.model.ir_version, ORT_IR_VERSION)
        name, output = model.graph.input[0].name, model.graph.output[0].name
        context = onnx_exec.execute_onnx(model, {name: x}, return_full_exec_context=quantized)
        result = np.asarray(context[output], dtype=np.float32)
        if not quantized:
            return result
        constants = {tensor.name for tensor in model.graph.initializer}
        tensors = [node.output[0] for node in model.graph.node
                   if node.op_type in ("Quant", "IntQuant", "BipolarQuant")
                   and node.input[0] not in constants]
        return result, [np.asarray(context[t], dtype=np.float32) for t in tensors]
    finally:
        onnx_exec.qonnx_make_model = original
