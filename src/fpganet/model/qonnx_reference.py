"""qonnx's own executor on a batch: the outside reference of the QONNX import.

``qonnx.core.onnx_exec.execute_onnx`` (PyPI ``qonnx``, installed with the ``dev`` extra)
runs each standard op as a one-node onnxruntime model and each quantizer in qonnx's numpy
code. Two things are set up around it, neither touching its arithmetic: the model is
cleaned and given the batch (qonnx's ``cleanup_model`` and ``ChangeBatchSize``, as FINN's
flows do), and the one-node models are written at an ONNX IR version the installed
onnxruntime loads (qonnx writes onnx's newest, which onnxruntime may not know yet).
"""

import numpy as np

__all__ = ["qonnx_execute", "compare_with_qonnx", "QonnxComparison"]

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


class QonnxComparison:
    """The golden model of a compiled QONNX network against qonnx's executor on ``x``.

    ``layers``: per quantized tensor (the input's, then each hidden layer's), ``(quantizer,
    layer name or None, share of levels equal, largest difference in levels, allowed)``:
    ``allowed`` is 0 where the layer and every one before it were fitted exactly, the
    compiler's bound for the first layer that was not (its codes differ by at most that
    many levels), None past it (one level off there can change anything after).
    ``logit_error`` against ``logit_bound`` (None past an inexact layer): half an output code
    plus the codes the logits' fit can be off by; ``agreement``: share of inputs whose
    arg-max equals qonnx's.
    """

    def __init__(self, layers, logit_error, logit_bound, agreement, golden_pred, reference_pred):
        self.layers, self.logit_error, self.logit_bound = layers, logit_error, logit_bound
        self.agreement = agreement
        self.golden_pred, self.reference_pred = golden_pred, reference_pred

    def failures(self):
        """What breaks the contract: levels beyond what the compiler allowed, logits beyond
        their bound."""
        found = [f"{node}: {100 * (1 - equal):.3g} % of levels differ, by up to {largest:g}"
                 for node, _, equal, largest, allowed in self.layers
                 if allowed is not None and largest > allowed]
        if self.logit_bound is not None and self.logit_error > self.logit_bound * (1 + 1e-5):
            found.append(f"logits differ by {self.logit_error:.4g}, over {self.logit_bound:.4g}")
        return found


def compare_with_qonnx(net, graph, path, x):
    """:class:`QonnxComparison` of ``net`` (compiled from the QONNX model at ``path``, imported
    as ``graph``) on the float inputs ``x``."""
    from ..golden import run_golden

    q_in = net.quantize_input(x)
    q, outputs = run_golden(net, q_in, layer_outputs=True)
    reference, quantized = qonnx_execute(path, x, quantized=True)
    levels = graph.quantization["levels"]
    # An input quantized by its datatype annotation has no quantizer in qonnx's executor.
    first = [] if graph.quantization.get("annotated_input") else [(levels[-1], q_in, None)]
    ours = first + [(levels[i], outputs[i], net.layers[i].name) for i in sorted(levels)
                    if i >= 0 and levels[i] is not None]
    if len(ours) != len(quantized):
        raise AssertionError(f"{len(ours)} quantized tensors, qonnx's executor has "
                             f"{len(quantized)}")
    inexact = net.calibration.get("inexact_layers", {})
    rows, compared = [], True
    for (spec, codes, name), theirs in zip(ours, quantized):
        allowed = (inexact.get(name, 0) if compared else None)
        compared = compared and name not in inexact
        values = spec.code_scale * (codes.astype(np.float64) - spec.code_zero)
        steps = np.abs(values.reshape(len(x), -1) - theirs.reshape(len(x), -1)) / spec.code_scale
        rows.append((spec.node, name, float(np.mean(steps == 0)) if steps.size else 1.0,
                     float(np.round(steps.max(initial=0), 6)), allowed))
    logits = net.dequantize_output(q)
    bound = ((0.5 + net.calibration.get("logits_error_codes", 0)) * net.output_scale
             if compared else None)
    golden_pred = logits.reshape(len(x), -1).argmax(1)
    reference_pred = reference.reshape(len(x), -1).argmax(1)
    return QonnxComparison(rows, float(np.max(np.abs(logits - reference), initial=0)),
                           None if bound is None else float(bound),
                           float(np.mean(golden_pred == reference_pred)), golden_pred,
                           reference_pred)
