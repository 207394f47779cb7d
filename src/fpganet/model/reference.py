"""Float reference executor of the IR (numpy), used for calibration and to test the importer."""

import numpy as np

from ..ops import im2col, maxpool
from .ir import Conv, Dense, MaxPool, Relu, Reshape

__all__ = ["run_float"]


def _layer(layer, x):
    if isinstance(layer, Conv):
        m = layer.weight.shape[0]
        cols, (ho, wo) = im2col(x, layer.kernel, layer.stride, layer.pads, 0.0)
        y = cols @ layer.weight.reshape(m, -1).T + layer.bias  # [N, Ho*Wo, M]
        y = y.transpose(0, 2, 1).reshape(x.shape[0], m, ho, wo)
    elif isinstance(layer, Dense):
        y = (x.reshape(x.shape[0], -1) @ layer.weight.T + layer.bias).reshape(x.shape[0], -1, 1, 1)
    elif isinstance(layer, MaxPool):
        return maxpool(x, layer.kernel, layer.stride, layer.pads, -np.inf)
    elif isinstance(layer, Relu):
        return np.maximum(x, 0)
    elif isinstance(layer, Reshape):
        return x.reshape(x.shape[0], *layer.out_shape)
    else:
        raise TypeError(f"unknown layer {layer!r}")
    return np.maximum(y, 0) if layer.relu else y


def run_float(graph, x, layer_outputs=False):
    """Run the float IR on a batch.

    Parameters
    ----------
    graph : fpganet.model.Graph
    x : numpy.ndarray
        float [N, *graph.input_shape].
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
    y = x.reshape(n, *graph.input_chw)
    outputs = []
    for layer in graph.layers:
        y = _layer(layer, y).astype(np.float32, copy=False)
        if layer_outputs:
            outputs.append(y)
    y = y.reshape(n, *graph.output_shape)
    return (y, outputs) if layer_outputs else y
