"""Float reference executor of the IR (numpy), used for calibration and to test the importer."""

import numpy as np

from ..ops import avgpool, grouped_matmul, im2col, maxpool
from .ir import (GRAPH_INPUT, Add, AvgPool, Conv, Dense, MaxPool, Relu, Reshape, input_to_chw,
                 layer_inputs)

__all__ = ["run_float"]


def _activation(layer, y):
    if not getattr(layer, "relu", False):
        return y
    y = np.maximum(y, 0)
    return y if layer.clip_max is None else np.minimum(y, np.float32(layer.clip_max))


def _layer(layer, x, *others):
    if isinstance(layer, Conv):
        m = layer.weight.shape[0]
        cols, (ho, wo) = im2col(x, layer.kernel, layer.stride, layer.pads, 0.0)
        y = grouped_matmul(cols, layer.weight.reshape(m, -1), layer.groups) + layer.bias
        y = y.transpose(0, 2, 1).reshape(x.shape[0], m, ho, wo)  # [N, Ho*Wo, M] -> NCHW
    elif isinstance(layer, Dense):
        y = (x.reshape(x.shape[0], -1) @ layer.weight.T + layer.bias).reshape(x.shape[0], -1, 1, 1)
    elif isinstance(layer, MaxPool):
        return maxpool(x, layer.kernel, layer.stride, layer.pads, -np.inf)
    elif isinstance(layer, AvgPool):
        y = avgpool(x.astype(np.float64), layer.kernel, layer.stride, layer.pads) \
            / (layer.kernel[0] * layer.kernel[1])
    elif isinstance(layer, Add):
        y = x + others[0]
    elif isinstance(layer, Relu):
        y = np.maximum(x, 0)
        return y if layer.clip_max is None else np.minimum(y, np.float32(layer.clip_max))
    elif isinstance(layer, Reshape):
        return x.reshape(x.shape[0], *layer.out_shape)
    else:
        raise TypeError(f"unknown layer {layer!r}")
    return _activation(layer, y)


def run_float(graph, x, layer_outputs=False):
    """Run the float IR on a batch.

    Parameters
    ----------
    graph : fpganet.model.Graph
    x : numpy.ndarray
        float [N, *graph.input_shape], in the model's layout.
    layer_outputs : bool
        Also return every layer's output ([N, C, H, W] each).

    Returns
    -------
    numpy.ndarray
        float32 [N, *graph.output_shape] (the logits when a final Softmax was dropped).
    list of numpy.ndarray
        Only with ``layer_outputs``.
    """
    x = np.asarray(x, dtype=np.float32)
    n = x.shape[0]
    values = {GRAPH_INPUT: input_to_chw(x, graph.input_shape, graph.input_layout)}
    y = values[GRAPH_INPUT]
    outputs = []
    for index, layer in enumerate(graph.layers):
        y = _layer(layer, *(values[i] for i in layer_inputs(graph.layers, index)))
        y = y.astype(np.float32, copy=False)
        values[index] = y
        if layer_outputs:
            outputs.append(y)
    y = y.reshape(n, *graph.output_shape)
    return (y, outputs) if layer_outputs else y
