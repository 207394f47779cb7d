"""A small float graph IR: a chain of layers over one activation per sample.

The importer (:mod:`fpganet.model.onnx_import`) turns an ONNX graph into a
:class:`Graph`; the quantizer turns that into the integer network of
:mod:`fpganet.qnet`. Every activation has a per-sample canonical shape
``(C, H, W)``: a dense layer's vector of K features is ``(K, 1, 1)``, so that a
dense layer is a 1x1 convolution on a 1x1 image and a flatten is a change of
shape metadata only (data stay in NCHW order). The batch axis is never part of
the IR; it is free.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Conv", "Dense", "Relu", "MaxPool", "Reshape", "Graph", "LINEAR_LAYERS"]


@dataclass
class Conv:
    """2-D convolution, group 1, dilation 1.

    Attributes
    ----------
    name : str
        Name of the ONNX node it came from (or a synthesized one).
    weight : numpy.ndarray
        float32 [M, C, kh, kw].
    bias : numpy.ndarray
        float32 [M].
    stride : tuple of int
        ``(sh, sw)``.
    pads : tuple of int
        ``(top, left, bottom, right)``; padding positions read zero.
    in_shape, out_shape : tuple of int
        ``(C, H, W)`` and ``(M, Ho, Wo)``.
    relu : bool
        A ReLU follows (set by :func:`fuse_relu`).
    """

    name: str
    weight: np.ndarray
    bias: np.ndarray
    stride: tuple
    pads: tuple
    in_shape: tuple
    out_shape: tuple
    relu: bool = False

    @property
    def kernel(self):
        return tuple(self.weight.shape[2:])

    @property
    def macs(self):
        """Multiply-accumulates per sample."""
        m, c, kh, kw = self.weight.shape
        return m * c * kh * kw * self.out_shape[1] * self.out_shape[2]


@dataclass
class Dense:
    """Fully connected layer ``y = W x + b`` on a vector of ``K`` features.

    Attributes
    ----------
    weight : numpy.ndarray
        float32 [M, K] (output features first, like a PyTorch ``Linear``).
    bias : numpy.ndarray
        float32 [M].
    in_shape, out_shape : tuple of int
        ``(K, 1, 1)`` and ``(M, 1, 1)``.
    relu : bool
        A ReLU follows (set by :func:`fuse_relu`).
    """

    name: str
    weight: np.ndarray
    bias: np.ndarray
    in_shape: tuple
    out_shape: tuple
    relu: bool = False

    @property
    def macs(self):
        return int(self.weight.size)


@dataclass
class Relu:
    name: str
    in_shape: tuple

    @property
    def out_shape(self):
        return self.in_shape


@dataclass
class MaxPool:
    """Max pooling; padding positions never win.

    Attributes
    ----------
    kernel, stride : tuple of int
    pads : tuple of int
        ``(top, left, bottom, right)``, the extra end padding of ``ceil_mode``
        already included.
    """

    name: str
    kernel: tuple
    stride: tuple
    pads: tuple
    in_shape: tuple
    out_shape: tuple


@dataclass
class Reshape:
    """Change of shape with the data kept in NCHW (C-contiguous) order, e.g. a flatten."""

    name: str
    in_shape: tuple
    out_shape: tuple


LINEAR_LAYERS = (Conv, Dense)


@dataclass
class Graph:
    """An imported network: a chain of layers from one input to one output.

    Attributes
    ----------
    name : str
        Graph name from the ONNX file.
    input_name : str
        Name of the ONNX graph input.
    input_shape : tuple of int
        Per-sample shape the ONNX input declares, without the batch axis,
        e.g. ``(1, 28, 28)``; inputs are given as ``[N, *input_shape]``.
    output_name : str
        Name of the ONNX tensor the IR's last layer produces.
    output_shape : tuple of int
        Per-sample shape of that tensor in ONNX terms, e.g. ``(10,)``.
    layers : list
        :class:`Conv`, :class:`Dense`, :class:`Relu`, :class:`MaxPool`,
        :class:`Reshape` in execution order.
    notes : list of str
        What the importer folded or dropped (BatchNorm, Dropout, a final Softmax).
    dropped_output_op : str or None
        ``"Softmax"`` or ``"LogSoftmax"`` when the final normalization was dropped;
        the IR then outputs the logits before it (same arg-max).
    """

    name: str
    input_name: str
    input_shape: tuple
    output_name: str
    output_shape: tuple
    layers: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    dropped_output_op: str = None

    @property
    def input_chw(self):
        """Canonical ``(C, H, W)`` of the input."""
        return canonical_shape(self.input_shape)

    @property
    def macs(self):
        """Multiply-accumulates per sample."""
        return sum(layer.macs for layer in self.layers if isinstance(layer, LINEAR_LAYERS))


def canonical_shape(shape):
    """The IR's ``(C, H, W)`` for a per-sample ONNX shape (data order unchanged).

    Lower ranks are padded with trailing ones (``(K,)`` becomes ``(K, 1, 1)``);
    higher ranks fold their trailing axes into W.
    """
    shape = tuple(int(d) for d in shape)
    if len(shape) <= 3:
        return shape + (1,) * (3 - len(shape))
    return shape[:2] + (int(np.prod(shape[2:])),)


def fuse_relu(graph):
    """Move every ReLU into the Conv/Dense before it (``relu=True``) and drop it.

    A ReLU commutes with max pooling and with reshapes (both are monotone and
    work element-wise on the order), so a ReLU separated from its linear layer
    by those is fused too. This is what lets the integer network fold ReLU into
    the requantization clamp.

    Parameters
    ----------
    graph : Graph
        Modified in place and returned.

    Raises
    ------
    fpganet.errors.FpganetError
        A ReLU with no Conv/Dense before it (only MaxPool/Reshape between).
    """
    from ..errors import FpganetError

    layers = []
    for layer in graph.layers:
        if isinstance(layer, Relu):
            for earlier in reversed(layers):
                if isinstance(earlier, LINEAR_LAYERS):
                    earlier.relu = True
                    break
                if not isinstance(earlier, (MaxPool, Reshape)):
                    raise AssertionError(f"unexpected layer {earlier!r}")
            else:
                raise FpganetError(f"Relu '{layer.name}' has no Conv or Gemm before it; a ReLU "
                                   f"is only supported folded into the layer it follows")
            continue
        layers.append(layer)
    graph.layers = layers
    return graph
