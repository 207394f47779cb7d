"""LiteRT's reference kernels on a fully-int8 TFLite model: the outside reference of ``check``.

LiteRT (PyPI ``ai-edge-litert``, installed with the ``dev`` extra) runs the model with its
reference kernels (``OpResolverType.BUILTIN_REF``, no delegate) and keeps every
intermediate tensor (``experimental_preserve_all_tensors``). Which tensor holds which
layer's output comes from the importer (:func:`~fpganet.model.tflite_import.tflite_layer_tensors`):
a layer with a fused activation maps to its op's output, a flatten to the map it flattens.
:func:`compare_with_litert` feeds each golden layer LiteRT's own int8 input(s) of that layer
and compares its output with LiteRT's there, so a difference does not carry on into the
layers after it; and it compares the whole network's outputs, each side run on its own.
"""

from dataclasses import dataclass

import numpy as np

from ..golden import run_golden, run_layer
from ..qnet import NETWORK_INPUT, QAdd, QConv, layer_kind, quantize_input
from .ir import input_to_chw

__all__ = ["litert_interpreter", "run_litert", "compare_with_litert", "LiteRTComparison",
           "litert_room", "litert_bound"]

#: How far LiteRT's value before its last rounding may lie from the exact result besides its
#: double rounding, in output steps: its 31-bit multipliers and the ADD's inputs shifted left
#: by 20 carry errors far below this.
_LITERT_ROOM = 1e-3


def litert_interpreter(path):
    """A LiteRT interpreter of the model at ``path`` on its reference kernels, every
    intermediate tensor kept, its tensors allocated."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    return interpreter


def run_litert(path, x, tensors, input_scale, input_zp):
    """The int8 tensors ``tensors`` (indices) of the model at ``path`` for each input of ``x``
    (float32, the model's own layout), as ``{index: [N, *shape without the batch]}``.

    A float network input is given ``x`` (the model's QUANTIZE quantizes it); an int8 one the
    codes the host would give the accelerator (``input_scale``, ``input_zp``)."""
    interpreter = litert_interpreter(path)
    source = interpreter.get_input_details()[0]
    feeds = (np.asarray(x, np.float32) if source["dtype"] == np.float32
             else quantize_input(x, input_scale, input_zp))
    result = {index: [] for index in tensors}
    for sample in feeds:
        interpreter.set_tensor(source["index"], sample[None].astype(source["dtype"]))
        interpreter.invoke()
        for index in tensors:
            result[index].append(interpreter.get_tensor(index)[0].copy())
    return {index: np.stack(values) for index, values in result.items()}


def litert_room(layer):
    """How far LiteRT's own arithmetic may move a layer's value before its last rounding, in
    output steps (one, or one per output channel): CONV_2D and DEPTHWISE_CONV_2D round twice
    (their multiplier's exponent from the scales as LiteRT derives it), FULLY_CONNECTED,
    ADD and AVERAGE_POOL_2D as good as once."""
    if isinstance(layer, QConv) and layer_kind(layer) != "dense":
        from ..qdq_export import double_rounding_room

        real = np.float64(layer.s_in) * np.asarray(layer.s_w, np.float64) / np.float64(layer.s_out)
        return _LITERT_ROOM + double_rounding_room(np.frexp(real)[1])
    return _LITERT_ROOM


def litert_bound(layer, mode):
    """``(min_equal, max_diff, text)`` a layer must meet against LiteRT's reference kernels
    (:meth:`~fpganet.qdq_export.LayerAgreement.passes`).

    In the ``tflite`` requantization mode the golden model computes what LiteRT computes:
    every value equal, but for the residual add, which is fpganet's two-input convolution and
    not TFLite's ADD (docs/guide/tflite.md): every difference 1 LSB across a rounding boundary
    (measured: all of ResNet-8's). In the ``fpganet`` mode, the bound the onnxruntime check
    has.
    """
    from ..qdq_export import CHECK_BOUND

    if mode != "tflite":
        return CHECK_BOUND
    if isinstance(layer, QAdd):
        return 1.0, 1, "every value equal or 1 LSB apart across a rounding boundary"
    return 1.0, 0, "every value equal"


@dataclass
class LiteRTComparison:
    """The golden model of a compiled int8 TFLite network against LiteRT's reference kernels.

    ``layers``: a :class:`~fpganet.qdq_export.LayerAgreement` per layer, the golden layer fed
    LiteRT's int8 input(s) of that layer, and ``bounds`` what each must meet
    (:func:`litert_bound`); ``outputs_equal``: the share of the network's int8 outputs equal,
    each side run end to end on the same inputs; ``agreement``: the share of inputs whose
    arg-max is LiteRT's; ``golden_pred``, ``litert_pred``: the arg-maxes.
    """

    layers: list
    bounds: list
    outputs_equal: float
    agreement: float
    golden_pred: np.ndarray
    litert_pred: np.ndarray


def compare_with_litert(net, path, x, tensors):
    """Compare the golden model of ``net`` with LiteRT's reference kernels on the model at
    ``path``, layer by layer and end to end.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
        Compiled from ``path``.
    path : str or os.PathLike
        The fully-int8 TFLite model.
    x : numpy.ndarray
        float32 [N, *net.input_shape], the model's own layout.
    tensors : fpganet.model.tflite_import.LayerTensors
        Which tensor holds each layer's output (``tflite_layer_tensors(path)``).

    Returns
    -------
    LiteRTComparison
    """
    from ..qdq_export import LayerAgreement, at_boundary

    count = len(x)
    wanted = sorted({tensors.input, *tensors.layers})
    theirs = run_litert(path, x, wanted, net.input_scale, net.input_zp)
    mode = net.config.requant_mode

    def litert_output(layer_index):
        index = tensors.input if layer_index == NETWORK_INPUT else tensors.layers[layer_index]
        shape = net.input_chw if layer_index == NETWORK_INPUT else \
            net.layers[layer_index].out_shape
        value = theirs[index]
        return input_to_chw(value, value.shape[1:], "nhwc").reshape(count, *shape)

    layers = []
    for index, layer in enumerate(net.layers):
        inputs = [litert_output(source) for source in net.layer_inputs(index)]
        ours = run_layer(layer, *inputs, mode=mode)
        reference = litert_output(index)
        feeds = dict(zip(("x", "x1"), inputs))
        boundary = at_boundary(layer, feeds, ours, reference, mode, litert_room(layer))
        layers.append(LayerAgreement.measure(index, layer, ours, reference, boundary))
    golden = run_golden(net, net.quantize_input(x)).reshape(count, -1)
    logits = litert_output(len(net.layers) - 1).reshape(count, -1)
    golden_pred, litert_pred = golden.argmax(1), logits.argmax(1)
    return LiteRTComparison(layers, [litert_bound(layer, mode) for layer in net.layers],
                            float(np.mean(golden == logits)),
                            float(np.mean(golden_pred == litert_pred)), golden_pred, litert_pred)
