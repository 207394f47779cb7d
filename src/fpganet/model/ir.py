"""A small float graph IR: layers over one activation per sample, in topological order.

The importer (:mod:`fpganet.model.onnx_import`) turns an ONNX graph into a
:class:`Graph`; the quantizer turns that into the integer network of
:mod:`fpganet.qnet`. Every activation has a per-sample canonical shape
``(C, H, W)``: a dense layer's vector of K features is ``(K, 1, 1)``, so that a
dense layer is a 1x1 convolution on a 1x1 image and a flatten is a change of
shape metadata only (data stay in NCHW order). The batch axis is never part of
the IR; it is free.

A layer reads the outputs of earlier layers named by index in ``inputs``
(``-1``: the graph input); ``inputs = None`` means the layer before it (the
graph input for the first layer), so a chain needs no ``inputs`` at all. The
last layer's output is the graph output.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Conv", "Dense", "Relu", "MaxPool", "AvgPool", "Add", "Reshape", "Graph",
           "IntegerWeights", "LINEAR_LAYERS", "REQUANTIZING_LAYERS", "INPUT_LAYOUTS", "layer_inputs",
           "fuse_relu", "input_chw", "input_transpose", "input_to_chw", "input_text"]

#: Index in ``inputs`` that names the graph input.
GRAPH_INPUT = -1


@dataclass
class Conv:
    """2-D convolution, dilation 1, optionally grouped (``groups == C``: depthwise).

    Attributes
    ----------
    name : str
        Name of the ONNX node it came from (or a synthesized one).
    weight : numpy.ndarray
        float32 [M, C / groups, kh, kw].
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
    groups : int
        Input and output channels split into this many independent groups.
    clip_max : float or None
        With ``relu``: the output is also clipped at this value (ReLU6: 6.0).
    inputs : tuple of int or None
        See the module docstring.
    """

    name: str
    weight: np.ndarray
    bias: np.ndarray
    stride: tuple
    pads: tuple
    in_shape: tuple
    out_shape: tuple
    relu: bool = False
    groups: int = 1
    clip_max: float = None
    inputs: tuple = None

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
    clip_max: float = None
    inputs: tuple = None

    @property
    def macs(self):
        return int(self.weight.size)


@dataclass
class Relu:
    """``max(x, 0)``, or ``min(max(x, 0), clip_max)`` (Clip(0, 6) is ReLU6); always fused away."""

    name: str
    in_shape: tuple
    clip_max: float = None
    inputs: tuple = None

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
    inputs: tuple = None


@dataclass
class AvgPool:
    """Average pooling over ``kernel`` windows; padding positions count as zeros.

    The importer accepts padding only where ONNX counts the padding in the divisor
    (``count_include_pad = 1``), so every window divides by ``kh * kw``.
    GlobalAveragePool and ReduceMean over H and W are an AvgPool whose kernel is the map.
    """

    name: str
    kernel: tuple
    stride: tuple
    pads: tuple
    in_shape: tuple
    out_shape: tuple
    relu: bool = False
    clip_max: float = None
    inputs: tuple = None

    macs = 0


@dataclass
class Add:
    """Element-wise sum of two feature maps of the same shape (a residual connection)."""

    name: str
    in_shape: tuple
    relu: bool = False
    clip_max: float = None
    inputs: tuple = None

    macs = 0

    @property
    def out_shape(self):
        return self.in_shape


@dataclass
class Reshape:
    """Change of shape with the data kept in NCHW (C-contiguous) order, e.g. a flatten."""

    name: str
    in_shape: tuple
    out_shape: tuple
    inputs: tuple = None


@dataclass
class IntegerWeights:
    """A Conv's or Dense's integers as a pre-quantized model gives them (a fully-int8 TFLite
    model): the quantizer takes them as they are (:attr:`Graph.quantization` ``"integers"``).

    Attributes
    ----------
    weight : numpy.ndarray
        int8 [M, C / groups, kh, kw] (a Dense's [M, K, 1, 1]), -127..127.
    bias : numpy.ndarray
        int32 [M] at scale ``s_in * s_w[m]``, the input zero point not folded in.
    origin : str
        The op that gave them, for messages (``"CONV_2D #3 ('name')"``).
    """

    weight: np.ndarray
    bias: np.ndarray
    origin: str


LINEAR_LAYERS = (Conv, Dense)
#: Layers that compute new values (and so can fold a following ReLU into their output clamp).
REQUANTIZING_LAYERS = (Conv, Dense, AvgPool, Add)


@dataclass
class Graph:
    """An imported network: layers in topological order from one input to one output.

    Attributes
    ----------
    name : str
        Graph name from the ONNX file.
    input_name : str
        Name of the ONNX graph input.
    input_shape : tuple of int
        Per-sample shape the model's input declares, without the batch axis,
        e.g. ``(1, 28, 28)``; inputs are given as ``[N, *input_shape]``, in the model's own
        layout.
    output_name : str
        Name of the ONNX tensor the IR's last layer produces.
    output_shape : tuple of int
        Per-sample shape of that tensor in ONNX terms, e.g. ``(10,)``.
    layers : list
        :class:`Conv`, :class:`Dense`, :class:`Relu`, :class:`MaxPool`,
        :class:`AvgPool`, :class:`Add`, :class:`Reshape` in execution order; the
        last one's output is the graph output.
    notes : list of str
        What the importer folded or dropped (BatchNorm, Dropout, a final Softmax).
    dropped_output_op : str or None
        ``"Softmax"`` or ``"LogSoftmax"`` when the final normalization was dropped;
        the IR then outputs the logits before it (same arg-max).
    quantization : dict or None
        A pre-quantized model's own quantization, which the quantizer takes as given
        (a QDQ model's, :mod:`fpganet.model.qdq`; a fully-int8 TFLite model's,
        :mod:`fpganet.model.tflite_import`): ``"activations"``, layer index (-1: the input)
        -> ``(scale, zero_point)`` int8, and ``"weight_scales"``, linear layer index ->
        float32 [M]; a QDQ model's ``"tensors"``, layer index -> the ONNX tensor whose
        QuantizeLinear gave its output's parameters (where one did); a TFLite model's
        ``"integers"``, linear layer index -> :class:`IntegerWeights`, and ``"arithmetic"``
        ``"tflite"`` (in the ``tflite`` requantization mode, LiteRT's reference kernels'
        roundings). None for a float model.
    input_layout : str
        How ``input_shape`` lays out the data (:data:`INPUT_LAYOUTS`): ``"nchw"`` for an
        ONNX model, ``"nhwc"`` for a TFLite one; :func:`input_to_chw` converts.
    """

    name: str
    input_name: str
    input_shape: tuple
    output_name: str
    output_shape: tuple
    layers: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    dropped_output_op: str = None
    quantization: dict = None
    input_layout: str = "nchw"

    @property
    def input_chw(self):
        """Canonical ``(C, H, W)`` of the input."""
        return input_chw(self.input_shape, self.input_layout)

    @property
    def macs(self):
        """Multiply-accumulates per sample."""
        return sum(layer.macs for layer in self.layers if isinstance(layer, LINEAR_LAYERS))

    @property
    def is_chain(self):
        """Whether every layer reads only the layer before it."""
        return all(layer_inputs(self.layers, i) == (i - 1,) for i in range(len(self.layers)))


def layer_inputs(layers, index):
    """The indices layer ``index`` reads (``-1``: the graph input), ``inputs = None`` resolved."""
    inputs = getattr(layers[index], "inputs", None)
    return (index - 1,) if inputs is None else tuple(int(i) for i in inputs)


def canonical_shape(shape):
    """The IR's ``(C, H, W)`` for a per-sample ONNX shape (data order unchanged).

    Lower ranks are padded with trailing ones (``(K,)`` becomes ``(K, 1, 1)``);
    higher ranks fold their trailing axes into W.
    """
    shape = tuple(int(d) for d in shape)
    if len(shape) <= 3:
        return shape + (1,) * (3 - len(shape))
    return shape[:2] + (int(np.prod(shape[2:])),)


#: Input layouts a model can declare: ``"nchw"``, the data already in the accelerator's
#: channel-first order (ONNX, any rank, :func:`canonical_shape`), and ``"nhwc"`` (TFLite:
#: ``(H, W, C)`` channels last, ``(H, W)`` one channel, ``(K,)`` a vector).
INPUT_LAYOUTS = ("nchw", "nhwc")


def input_chw(shape, layout="nchw"):
    """The accelerator's ``(C, H, W)`` of a per-sample input ``shape`` in ``layout``."""
    shape = tuple(int(d) for d in shape)
    if layout not in INPUT_LAYOUTS:
        raise ValueError(f"input layout {layout!r} is not one of {', '.join(INPUT_LAYOUTS)}")
    if layout == "nhwc":
        if len(shape) not in (1, 2, 3):
            raise ValueError(f"an NHWC input has 1 to 3 axes per sample, not {list(shape)}")
        if len(shape) == 3:
            return (shape[2], shape[0], shape[1])
        if len(shape) == 2:
            return (1, *shape)
    return canonical_shape(shape)


def input_transpose(shape, layout="nchw"):
    """The permutation of ``[N, *shape]`` that puts the data in channel-first order, or None
    where the order is already that (a reshape then suffices: NCHW, or NHWC with one channel)."""
    if layout == "nhwc" and len(shape) == 3 and int(shape[2]) > 1:
        return (0, 3, 1, 2)
    return None


def input_text(shape, layout="nchw"):
    """``[N, 12, 12, 3] (NHWC, the model's own layout)`` for messages: only an image in a layout
    other than NCHW names it."""
    text = "[N, " + ", ".join(str(int(d)) for d in shape) + "]"
    if layout == "nchw" or len(shape) != 3:
        return text
    return f"{text} ({layout.upper()}, the model's own layout)"


def input_to_chw(x, shape, layout="nchw"):
    """Inputs ``[N, *shape]`` in the model's ``layout`` as the accelerator's ``[N, C, H, W]``.

    The one place the host converts a model's layout: a transpose for NHWC with more than
    one channel, a reshape otherwise. Works on float and int8 arrays alike.
    """
    x = np.asarray(x)
    perm = input_transpose(shape, layout)
    if perm is not None:
        x = x.transpose(perm)
    return x.reshape(x.shape[0], *input_chw(shape, layout))


def fuse_relu(graph):
    """Move every ReLU into the layer that computes its input (``relu=True``) and drop it.

    The target is the Conv, Dense, Add or AvgPool before the ReLU; a ReLU commutes
    with max pooling and with reshapes (both are monotone and work element-wise on
    the order), so a ReLU separated from that layer by those is fused too. This is
    what lets the integer network fold ReLU into the requantization clamp. Every
    layer on the way must feed only the next one (its unrectified output is used
    nowhere else).

    Parameters
    ----------
    graph : Graph
        Modified in place and returned; ``inputs`` are renumbered.

    Raises
    ------
    fpganet.errors.FpganetError
        A ReLU with no such layer before it, or whose input is also used elsewhere.
    """
    from ..errors import FpganetError

    layers = graph.layers
    inputs = [layer_inputs(layers, i) for i in range(len(layers))]
    users = {}
    for index, sources in enumerate(inputs):
        for source in sources:
            users.setdefault(source, []).append(index)
    last = len(layers) - 1
    replaced = {}   # index of a dropped ReLU -> index of the layer whose output replaces it

    def resolve(index):
        while index in replaced:
            index = replaced[index]
        return index

    for index, layer in enumerate(layers):
        if not isinstance(layer, Relu):
            continue
        source = resolve(inputs[index][0])
        walk = source
        while True:
            if walk == GRAPH_INPUT:
                raise FpganetError(f"Relu '{layer.name}' has no Conv or Gemm before it; a ReLU "
                                   f"is only supported folded into the layer it follows")
            earlier = layers[walk]
            if walk == last or len(users.get(walk, [])) > 1:
                raise FpganetError(f"Relu '{layer.name}': the unrectified output of "
                                   f"'{earlier.name}' is also used elsewhere; a ReLU is only "
                                   f"supported folded into the layer it follows")
            if isinstance(earlier, REQUANTIZING_LAYERS):
                earlier.relu = True
                if layer.clip_max is not None:
                    earlier.clip_max = (layer.clip_max if earlier.clip_max is None
                                        else min(earlier.clip_max, layer.clip_max))
                break
            if not isinstance(earlier, (MaxPool, Reshape, Relu)):
                raise FpganetError(f"Relu '{layer.name}' follows '{earlier.name}' "
                                   f"({type(earlier).__name__}); a ReLU is only supported folded "
                                   f"into a Conv, Gemm, Add or AveragePool")
            walk = resolve(layer_inputs(layers, walk)[0])
        replaced[index] = source
        # The ReLU's users now read its source: their use of the ReLU moves to it.
        users[source] = [u for u in users.get(source, []) if u != index] + users.get(index, [])
        if index == last:
            last = source
    keep = [index for index, layer in enumerate(layers) if not isinstance(layer, Relu)]
    if keep and last != keep[-1]:
        # Only a ReLU can end the graph on an earlier layer (its source); reordering would
        # be needed, which a topological order never asks for here.
        raise AssertionError("fused graph does not end on its last layer")
    renumber = {old: new for new, old in enumerate(keep)}
    renumber[GRAPH_INPUT] = GRAPH_INPUT
    for new, old in enumerate(keep):
        layers[old].inputs = tuple(renumber[resolve(source)] for source in inputs[old])
    graph.layers = [layers[old] for old in keep]
    return graph
