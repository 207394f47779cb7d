"""Binary layers: a dense layer or convolution of the integer network in the form the
XNOR-popcount unit (:class:`fpganet.hdl.binary_mvu.BinaryMatrixVectorUnit`) computes, and the
chain of such layers folded for the network engine.

A dense layer is binary when its weights are all -1 or +1 and its input codes take two
adjacent values ``lo``, ``lo + 1`` (a bipolar or binary activation, as QONNX's BipolarQuant
and 1-bit Quant give them). With the input as bits ``c = q - lo`` and the weights as bits
``b = (w + 1) / 2``, the layer's accumulator is an affine function of the XNOR popcount::

    acc = sum_k w_k (q_k - zp_in) + bias
        = sum_k (2 b_k - 1) c_k + (lo - zp_in) sum_k w_k + bias
        = count + sum_k b_k - K + (lo - zp_in) sum_k w_k + bias

since ``sum_k (2 b_k - 1) c_k = count + sum_k b_k - K`` with ``count = sum_k [b_k == c_k]``.
So each output channel's code is a function of its count alone, ``offset + count`` through
the layer's requantization, and where the codes are two adjacent values it is a step: one
threshold per channel on the count. :func:`lower_binary` finds those thresholds by
evaluating the layer's own requantization (the golden model's) on every count ``0..K`` and
refuses a channel whose codes are not one step, so the binary form is exact by
construction; :func:`run_binary` is its arithmetic.

A convolution is the same on each window of its input map, and a max pool of one-bit outputs
their OR (:meth:`LoweredDense.run_map`; docs/reference/numerics.md section 14).

The unit folds a layer as FINN's MVAU does: ``pe`` channels at a time, ``simd`` input bits a
beat (:func:`fold_network`, :func:`layer_beats`). A layer whose ``K`` (or a map pixel's
channels) is not a multiple of ``simd`` is padded with input bit 0 against weight bit 1, whose
XNOR is 0: padding adds nothing to a count.
"""

import hashlib
import json
from dataclasses import KW_ONLY, dataclass, replace

import numpy as np

from ..errors import FpganetError
from ..ops import im2col, maxpool, xnor_popcount
from ..qnet import QConv
from ..quantize.fixed_point import requantize_mode

__all__ = ["LoweredDense", "BinaryLayer", "lower_binary", "lower_chain", "lower_binary_network",
           "check_engine_layer", "chain_input", "run_lowered", "run_binary", "run_binary_network",
           "input_bits", "codes_of_counts", "FoldedLayer", "FoldedNetwork", "fold_network",
           "UNITS", "ENGINE_NAMES", "unpack_fields", "pack_input_words", "layer_beats"]


@dataclass(frozen=True)
class LoweredDense:
    """A dense or convolution layer of the integer network in a form an engine in logic cells
    computes: a channel's total over its inputs (a window of the input map, for a
    convolution), then thresholds on the total (a few output levels) or the source's
    requantization of ``total + offset`` (a wider output), then, where the network max-pools
    the layer's output, that pool. Each form says how its weights, inputs and thresholds are
    stored in the engine's words (:func:`fold_network`).

    Attributes
    ----------
    pool : int
        The window and stride of a max pool fused after the layer (1: none). A pool of
        thresholded outputs is the greatest of its elements (an OR, of bits).
    map_in : tuple of int or None
        ``(C, H, W)`` of a dense layer that reads a flattened map: the engine computes it as a
        convolution whose kernel is the whole map (its weights are ordered ``(c, y, x)``, as the
        flattening of an NCHW map is). None: the source's own ``in_shape``.
    """

    source: QConv
    _: KW_ONLY
    pool: int = 1
    map_in: tuple = None

    @property
    def name(self):
        return self.source.name

    #: The weight field of a padded input (its product must add nothing to a total).
    weight_pad = 0

    @property
    def k(self):
        return self.source.weight_matrix.shape[1]

    @property
    def m(self):
        return self.source.weight_matrix.shape[0]

    @property
    def in_map(self):
        """``(C, H, W)``: the map the layer reads (``(K, 1, 1)`` for a dense layer)."""
        return tuple(self.map_in or self.source.in_shape)

    @property
    def kernel(self):
        """``(kh, kw)``: its window over :attr:`in_map` (stride 1, no padding)."""
        return tuple(self.in_map[1:]) if self.map_in else tuple(self.source.kernel)

    @property
    def out_map(self):
        """``(M, Ho, Wo)``: the map it writes, after its pool (a floor: a pool's partial windows
        are dropped, as ONNX's MaxPool does)."""
        _, h, w = self.in_map
        kh, kw = self.kernel
        return self.m, (h - kh + 1) // self.pool, (w - kw + 1) // self.pool

    def weight_fields(self):
        """int64 [M, K]: each weight's field in the engine's words (``field_bits`` bits; its
        ``input_bits`` is an input element's)."""
        raise NotImplementedError

    def threshold_rows(self):
        """int64 [M, levels] of a layer with thresholds, else None."""
        raise NotImplementedError

    def total_range(self):
        """``(least, greatest)``: the bounds of any channel's total."""
        raise NotImplementedError

    def totals(self, inputs):
        """int64 [N, M]: each channel's total for input elements [N, K]."""
        raise NotImplementedError

    def outputs(self, totals):
        """The next layer's input elements [N, M] (uint8): how many of a channel's thresholds
        its total reaches."""
        return (totals[:, :, None] >= self.threshold_rows()[None]).sum(axis=2).astype(np.uint8)

    def codes(self, totals, mode="fpganet"):
        """int8 [N, M]: the layer's output codes of its totals [N, M]."""
        if self.threshold_rows() is not None:
            return (self.outputs(totals).astype(np.int64) + self.source.lo).astype(np.int8)
        return codes_of_counts(self, totals, mode)

    def run(self, inputs, mode="fpganet"):
        """The layer's output for input elements [N, K]: the next layer's elements [N, M]
        (:meth:`outputs`), or without thresholds its int8 codes [N, M] (:meth:`codes`)."""
        totals = self.totals(inputs)
        return self.outputs(totals) if self.threshold_rows() is not None else \
            self.codes(totals, mode)

    def run_map(self, elements, mode="fpganet"):
        """The layer's output maps [N, M, Ho, Wo] for input element maps [N, C, H, W] (any
        shape of ``N * C * H * W`` elements, flattened NCHW): :meth:`run` on every window,
        then the pool."""
        n = len(elements)
        cols, (ho, wo) = im2col(np.asarray(elements).reshape(n, *self.in_map), self.kernel,
                                (1, 1), (0, 0, 0, 0), 0)
        out = self.run(cols.reshape(n * ho * wo, self.k), mode)
        maps = out.reshape(n, ho, wo, self.m).transpose(0, 3, 1, 2)
        if self.pool > 1:
            maps = maxpool(maps, (self.pool,) * 2, (self.pool,) * 2, (0, 0, 0, 0), 0)
        return maps


@dataclass(frozen=True)
class BinaryLayer(LoweredDense):
    """A dense layer as XNOR-popcount counts, then per-channel thresholds (a 1-bit output)
    or its own requantization of ``count + offset`` (a wider one, as a network's last layer).

    Attributes
    ----------
    source : fpganet.qnet.QConv
        The layer it computes.
    weight_bits : numpy.ndarray
        uint8 {0, 1} [M, K]: 1 for weight +1.
    in_lo : int
        The input code of bit 0 (bit 1 is ``in_lo + 1``).
    offset : numpy.ndarray
        int64 [M]: the layer's accumulator is ``count + offset``.
    thresholds : numpy.ndarray or None
        int64 [M] for a 1-bit output: bit 1 where the count is at least this (0: always,
        ``K + 1``: never). None: the output is the source's requantization of the accumulator.
    """

    weight_bits: np.ndarray
    in_lo: int
    offset: np.ndarray
    thresholds: np.ndarray = None

    #: Bits of one input element and of one weight field in the engine's words.
    input_bits = field_bits = 1
    #: A padded input is bit 0 against weight bit 1: their XNOR adds nothing to a count.
    weight_pad = 1

    def weight_fields(self):
        return self.weight_bits.astype(np.int64)

    def threshold_rows(self):
        return None if self.thresholds is None else self.thresholds[:, None]

    def total_range(self):
        return 0, self.k

    def totals(self, inputs):
        return xnor_popcount(inputs, self.weight_bits).astype(np.int64)

    @property
    def out_lo(self):
        """The output code of bit 0 of a 1-bit output."""
        return self.source.lo


def lower_binary(layer, in_lo, mode="fpganet"):
    """The binary form of dense or convolution ``layer`` whose input codes are ``in_lo`` or
    ``in_lo + 1``.

    Parameters
    ----------
    layer : fpganet.qnet.QConv
        A dense layer, or a convolution of stride 1 without padding (:func:`check_engine_layer`),
        with weights in {-1, +1}.
    in_lo : int
    mode : str
        The network's requantization mode.

    Returns
    -------
    BinaryLayer
        With thresholds where the outputs are ``lo``, ``lo + 1``.

    Raises
    ------
    FpganetError
        Naming the layer and what is not binary.
    """
    check_engine_layer(layer, "binary")
    weight = layer.weight_matrix.astype(np.int64)
    if not np.all(np.abs(weight) == 1):
        others = sorted(set(np.unique(weight).tolist()) - {-1, 1})
        raise FpganetError(f"layer '{layer.name}': weights other than -1 and +1 ({others[0]})")
    m, k = weight.shape
    # acc = count + offset, exactly (module docstring); the golden model's bias has
    # -zp_in * sum(w) folded in (acc = w . q + bias).
    offset = (((weight + 1) // 2).sum(axis=1) - k + in_lo * weight.sum(axis=1)
              + layer.bias.astype(np.int64).reshape(-1))
    bits = ((weight + 1) // 2).astype(np.uint8)
    if layer.hi != layer.lo + 1:
        return BinaryLayer(layer, bits, int(in_lo), offset)
    codes = _requantized(layer, offset[:, None] + np.arange(k + 1)[None, :], mode)   # [M, K + 1]
    steps = np.diff(codes, axis=1)
    if np.any(steps < 0):
        channel = int(np.nonzero((steps < 0).any(axis=1))[0][0])
        raise FpganetError(f"layer '{layer.name}': channel {channel}'s output falls as its "
                           f"count grows: no threshold gives it")
    ones = codes == layer.hi
    thresholds = np.where(ones.any(axis=1), ones.argmax(axis=1), k + 1)
    return BinaryLayer(layer, bits, int(in_lo), offset, thresholds.astype(np.int64))


def check_engine_layer(layer, form):
    """Refuse, in one line, a layer no engine's window computes: the engines run dense layers
    and convolutions of one group, stride 1 and no padding (the window walks the stored map)."""
    if not isinstance(layer, QConv):
        raise FpganetError(f"layer '{layer.name}': only a dense layer or a convolution has a "
                           f"{form} form")
    if layer.kind == "dense":
        return
    for what, value, plain in (("groups", layer.groups, 1), ("stride", tuple(layer.stride), (1, 1)),
                               ("pads", tuple(layer.pads), (0, 0, 0, 0))):
        if value != plain:
            raise FpganetError(f"layer '{layer.name}': the engines run convolutions of one group, "
                               f"stride 1 and no padding, not {what} {value}")


def _requantized(layer, acc, mode):
    """The layer's output codes for accumulators ``acc`` [M, P] (bias included), through the
    golden model's own requantization."""
    return requantize_mode(acc[None], layer.mult, layer.shift, layer.zp_out, layer.lo, layer.hi,
                           mode, layer.single_rounding)[0].astype(np.int64)


def lower_binary_network(net, start=0):
    """Every dense and convolution layer of a chain (reshapes, dense layers, convolutions and
    the max pools after them: FINN's TFC and CNV), from layer ``start`` on, in binary form,
    each reading the previous one's bits; the input (the network's, or layer ``start - 1``'s
    output) must be one bit and every layer but the last one bit out.

    Returns
    -------
    list of BinaryLayer

    Raises
    ------
    FpganetError
        Naming the first layer that is not binary, and why.
    """
    lo, hi, _ = chain_input(net, start)
    if hi != lo + 1:
        where = ("the network's input" if start == 0
                 else f"layer '{net.layers[start - 1].name}''s output")
        raise FpganetError(f"{where} codes {lo}..{hi} are not one bit")
    return lower_chain(net, lambda layer, in_lo, _, mode: lower_binary(layer, in_lo, mode),
                       "is not one bit", start)


def chain_input(net, start=0):
    """``(lo, hi, (C, H, W))``: the codes and map an engine's chain from layer ``start`` of
    ``net`` reads: the network's input, or layer ``start - 1``'s output."""
    if start == 0:
        return net.input_lo, net.input_hi, tuple(net.input_chw)
    before = net.layers[start - 1]
    if not isinstance(before, QConv):
        raise FpganetError(f"layer '{net.layers[start].name}': an engine's chain starts after a "
                           f"dense layer or a convolution, not after '{before.name}'")
    return before.lo, before.hi, tuple(before.out_shape)


def lower_chain(net, lower, not_narrow, start=0):
    """``lower(layer, in_lo, in_hi, mode)`` of every dense and convolution layer of a chain
    from layer ``start`` on, each given the code range of the one before's output; a max pool
    is fused into the layer before it, and a dense layer after a flatten of a lowered layer's
    map reads that map (``map_in``). Every layer but the last must have thresholds, else the
    next is refused, its input ``not_narrow``; so is a layer that reads any other shape than
    the map the one before stored (a reshape other than a flatten).

    The first layer's input comes from the host, which lays it out as the layer reads it."""
    if not net.is_chain:
        raise FpganetError("an engine runs a chain of layers; this network branches")
    layers, stored = [], None            # `stored`: the map the last lowered layer wrote
    in_lo, in_hi, _ = chain_input(net, start)
    for layer in net.layers[start:]:
        if layer.type == "reshape":
            if layers and tuple(layer.out_shape) != (int(np.prod(stored)), 1, 1):
                raise FpganetError(f"layer '{layer.name}': an engine reshapes a map it stored "
                                   f"only by flattening it, {list(stored)} to "
                                   f"{[int(np.prod(stored)), 1, 1]}, not to "
                                   f"{list(layer.out_shape)}")
            continue
        if layer.type == "maxpool":
            fused = _fused_pool(layers[-1] if layers else None, layer)
            if tuple(layer.in_shape) != stored:
                raise FpganetError(f"layer '{layer.name}': an engine max-pools the map the layer "
                                   f"before stored, {list(stored)}, not {list(layer.in_shape)}")
            layers[-1:] = [fused]
            stored = layers[-1].out_map
            continue
        if layers and layers[-1].thresholds is None:
            raise FpganetError(f"layer '{layer.name}': its input, '{layers[-1].name}''s output, "
                               f"{not_narrow}")
        lowered = lower(layer, in_lo, in_hi, net.config.requant_mode)
        if layers:
            vector = lowered.in_map[1:] == (1, 1) and lowered.kernel == (1, 1)
            if vector and stored[1:] != (1, 1) and int(np.prod(stored)) == lowered.k:
                # The map the layer before stored, pixel by pixel, read whole: the flatten's
                # NCHW order is the weights' (c, y, x).
                lowered = replace(lowered, map_in=stored)
            elif lowered.in_map != stored:
                raise FpganetError(f"layer '{layer.name}': an engine reads the map the layer "
                                   f"before stored, {list(stored)}, not {list(lowered.in_map)}")
        layers.append(lowered)
        in_lo, in_hi, stored = layer.lo, layer.hi, lowered.out_map
    return layers


def _fused_pool(before, pool):
    """``before`` (a lowered layer) with max pool ``pool`` after it, or a one-line refusal."""
    p = pool.kernel[0]
    if before is None or before.pool != 1 or before.thresholds is None:
        raise FpganetError(f"layer '{pool.name}': an engine max-pools only the thresholded "
                           f"output of the dense layer or convolution before it")
    if (tuple(pool.kernel) != (p, p) or tuple(pool.stride) != (p, p)
            or any(pool.pads)):
        raise FpganetError(f"layer '{pool.name}': an engine max-pools square windows as far "
                           f"apart as they are wide, unpadded, not kernel {list(pool.kernel)} "
                           f"stride {list(pool.stride)} pads {list(pool.pads)}")
    return replace(before, pool=p)


def input_bits(layers, q_in):
    """The first layer's input bits [N, K] of int8 inputs ``q_in`` [N, ...] (codes ``in_lo``
    or ``in_lo + 1``)."""
    return (q_in.reshape(len(q_in), -1).astype(np.int64) - layers[0].in_lo).astype(np.uint8)


def run_binary_network(layers, q_in, mode="fpganet"):
    """The binary layers' int8 output codes [N, M] for int8 inputs ``q_in`` [N, ...] (codes
    ``in_lo`` or ``in_lo + 1`` of the first layer), as the golden model gives them."""
    bits = run_lowered(layers, input_bits(layers, q_in), mode)
    last = layers[-1]
    return bits if last.thresholds is None else (bits + last.out_lo).astype(np.int8)


def run_lowered(layers, elements, mode="fpganet", count=None):
    """The output [N, ...] flattened of the first ``count`` (default all) lowered layers, each
    on its input map (:meth:`LoweredDense.run_map`), for first-layer input elements [N, ...]:
    the next layer's elements, or the int8 codes of a layer without thresholds."""
    for layer in layers[:count]:
        elements = layer.run_map(elements, mode)
    return elements.reshape(len(elements), -1)


def run_binary(layer, bits, mode="fpganet"):
    """``layer``'s output for input bits [N, K]: bits [N, M] (``count >= threshold``), or
    with no thresholds the int8 codes [N, M] of its source's requantization of
    ``count + offset``."""
    return layer.run(bits, mode)


def codes_of_counts(layer, counts, mode="fpganet"):
    """int8 [N, M]: the source layer's requantization of ``counts + offset`` ([N, M] counts)."""
    acc = (np.asarray(counts, np.int64) + layer.offset[None, :]).T
    return _requantized(layer.source, acc, mode).T.astype(np.int8)


@dataclass(frozen=True)
class FoldedLayer:
    """Where one layer sits in a :class:`FoldedNetwork`, and how the engine walks it.

    The layer reads an ``in_h x in_w`` map stored pixel by pixel (row-major), each pixel's
    channels in :attr:`pixel_words` words of ``simd`` elements (padded with 0); a dense layer's
    map is one pixel. For each output pixel of its (pooled) ``out_h x out_w`` map, then each
    of its ``groups`` groups of ``pe`` channels, then each of the ``pool * pool`` windows the
    pool takes the greatest of, the engine issues ``beats`` beats: the window's
    ``kernel_h`` rows of ``kernel_w * pixel_words`` consecutive words. Its weight words are
    from ``weight_base`` (``beats`` a group, group-major, in that window order), its threshold
    words from ``threshold_base`` (one a group). Its results are written as its output map
    is stored for the next layer.
    """

    k: int
    m: int
    beats: int
    groups: int
    weight_base: int
    threshold_base: int
    in_h: int = 1
    in_w: int = 1
    kernel_h: int = 1
    kernel_w: int = 1
    pool: int = 1
    out_h: int = 1
    out_w: int = 1

    @property
    def pixel_words(self):
        """Words of one input pixel's channels."""
        return self.beats // (self.kernel_h * self.kernel_w)

    @property
    def input_words(self):
        """Words of the whole input map."""
        return self.in_h * self.in_w * self.pixel_words

    @property
    def results(self):
        """The unit's results for one input: a window's count per group, pool window and
        output pixel."""
        return self.out_h * self.out_w * self.groups * self.pool * self.pool

    #: The fields of a layer's walk over a map, each 1 for a vector layer.
    MAP_FIELDS = ("in_h", "in_w", "kernel_h", "kernel_w", "pool", "out_h", "out_w")

    @property
    def is_map(self):
        """Whether the layer walks a map (more than one pixel in, or out, or a kernel), not
        one vector."""
        return any(getattr(self, name) != 1 for name in self.MAP_FIELDS)

    @property
    def id_fields(self):
        """What the layer's design id hashes: a vector layer's fields but its map's (so that
        the ids of networks of vector layers are what they were before maps), a map's all."""
        return [value for name, value in vars(self).items()
                if self.is_map or name not in self.MAP_FIELDS]


#: The engines' units: ``binary``, XNOR-popcount MACs of one-bit weights and inputs
#: (:class:`~fpganet.hdl.binary_mvu.BinaryMatrixVectorUnit`); ``lowbit``, products of signed
#: weight codes and unsigned input digits of a few bits
#: (:class:`~fpganet.hdl.lowbit_mvu.LowBitMatrixVectorUnit`).
UNITS = ("binary", "lowbit")
#: Each unit's engine, in words.
ENGINE_NAMES = {"binary": "binary engine", "lowbit": "low-bit engine"}


@dataclass(frozen=True)
class FoldedNetwork:
    """A chain of lowered layers as an engine's memory images
    (:class:`fpganet.hdl.binary_engine.BinaryNetworkEngine`).

    Attributes
    ----------
    layers : tuple of FoldedLayer
    pe, simd : int
    count_width : int
        Bits of a channel's total and of a threshold: unsigned counts for the binary unit,
        two's complement sums for the low-bit one.
    weight_words : tuple of int
        ``pe * simd * weight_bits`` bits each: channel ``j``'s ``simd`` weight fields from bit
        ``j * simd * weight_bits``, input ``i``'s at ``i * weight_bits`` within them.
    threshold_words : tuple of int
        ``pe * levels * count_width`` bits each: channel ``j``'s threshold ``t`` at bit
        ``(j * levels + t) * count_width``. A threshold no total reaches (a padded channel's, or
        one beyond a layer's own levels) is the greatest value of the field, so that a padded
        channel's output is 0 as the next layer's padding needs. The last layer's are unused
        when its totals are the output.
    unit : str
        One of :data:`UNITS`.
    weight_bits, input_bits : int
        Bits of a weight field and of an input element (1 and 1 for the binary unit).
    levels : int
        Thresholds a channel (1 for the binary unit).
    """

    layers: tuple
    pe: int
    simd: int
    count_width: int
    weight_words: tuple
    threshold_words: tuple
    unit: str = "binary"
    weight_bits: int = 1
    input_bits: int = 1
    levels: int = 1

    @property
    def input_words(self):
        """Words of one input (a vector, or a map pixel by pixel)."""
        return self.layers[0].input_words

    @property
    def input_bytes(self):
        """Bytes of one input on a byte stream: a vector's elements packed (``input_bits``
        each, the last word partial), or a map's words whole (its pixels' padding included)."""
        first = self.layers[0]
        if not first.is_map:
            return -(-first.k * self.input_bits // 8)
        return -(-first.input_words * self.simd * self.input_bits // 8)

    @property
    def output_groups(self):
        """Results (``pe`` totals each) of one input."""
        return self.layers[-1].results

    @property
    def buffer_words(self):
        """Words an activation buffer holds: the largest layer input."""
        return max(layer.input_words for layer in self.layers)

    @property
    def signed_totals(self):
        """Whether a total is two's complement (the low-bit unit's sums) or a count."""
        return self.unit == "lowbit"

    @property
    def word_bits(self):
        """``(weights, thresholds, activations)``: the bits of a word of each memory."""
        return (self.pe * self.simd * self.weight_bits, self.pe * self.levels * self.count_width,
                self.simd * self.input_bits)

    @property
    def description(self):
        """The engine in words: its unit, fold and widths."""
        fold = f"{ENGINE_NAMES[self.unit]} {self.pe}x{self.simd}"
        return fold if self.unit == "binary" else f"{fold} (W{self.weight_bits}A{self.input_bits})"

    @property
    def design_id(self):
        """A 32-bit id of these images (never 0, the int8 accelerator's): the first bytes of a
        SHA-256 of the fold and every word. The device answers PING with it, so that a host
        refuses a board that holds another network's weights."""
        widths = [] if self.unit == "binary" else [self.weight_bits, self.input_bits, self.levels]
        blob = json.dumps([self.pe, self.simd, self.count_width, *widths,
                           [layer.id_fields for layer in self.layers],
                           [f"{word:x}" for word in self.weight_words],
                           [f"{word:x}" for word in self.threshold_words]])
        return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:4], "little") or 1


def fold_network(layers, pe, simd):
    """An engine's images of ``layers``, all binary (:func:`lower_binary_network`) or all
    low-bit (:func:`fpganet.codegen.lowbit.lower_lowbit_network`), every layer but the last
    with thresholds, ``simd`` a multiple of ``pe`` so that a group's outputs land in one word
    of the next layer's input. The low-bit unit's widths are the widest layer's.

    Raises
    ------
    FpganetError
        On a fold the engine cannot run.
    """
    if simd % pe:
        raise FpganetError(f"simd ({simd}) must be a multiple of pe ({pe}): a group's output "
                           f"bits are written into one word")
    binary = all(isinstance(layer, BinaryLayer) for layer in layers)
    if any(layer.threshold_rows() is None for layer in layers[:-1]):
        raise FpganetError("every layer but the last must have "
                           + ("one-bit outputs" if binary else "thresholds"))
    last = layers[-1]
    if last.out_map[1:] != (1, 1) or last.pool != 1:
        pooled = f" pooled {last.pool} x {last.pool}" if last.pool != 1 else ""
        raise FpganetError(f"layer '{last.name}': the last layer's output must be one pixel, "
                           f"unpooled (its totals leave the engine), not "
                           f"{list(last.out_map)}{pooled}")
    for before, after in zip(layers, layers[1:]):
        if before.out_map != after.in_map:
            raise FpganetError(f"layer '{after.name}' reads {list(after.in_map)}; "
                               f"'{before.name}' stores {list(before.out_map)}")
    if binary:
        widths = dict(unit="binary", weight_bits=1, input_bits=1, levels=1)
        count_width = (max(simd, *(layer.k for layer in layers)) + 1).bit_length()
        never = (1 << count_width) - 1
    else:
        widths = dict(unit="lowbit", weight_bits=max(layer.field_bits for layer in layers),
                      input_bits=max(layer.input_bits for layer in layers),
                      levels=max([1, *(layer.threshold_rows().shape[1] for layer in layers
                                       if layer.threshold_rows() is not None)]))
        # Every total, a threshold no total reaches, and one beat's widest sum (the unit's
        # own bound), as two's complement.
        beat = -(1 << (widths["weight_bits"] - 1)) * ((1 << widths["input_bits"]) - 1) * simd
        ranges = [layer.total_range() for layer in layers]
        count_width = max(_signed_bits(value) for value in
                          (beat, *(least for least, _ in ranges), *(most + 1 for _, most in ranges)))
        never = (1 << (count_width - 1)) - 1
    levels, field_bits = widths["levels"], widths["weight_bits"]
    field_mask = (1 << field_bits) - 1
    weight_words, threshold_words, folded = [], [], []
    for layer in layers:
        channels, h, w = layer.in_map
        kh, kw = layer.kernel
        pixel_words, groups = -(-channels // simd), -(-layer.m // pe)
        beats = kh * kw * pixel_words
        _, out_h, out_w = layer.out_map
        folded.append(FoldedLayer(layer.k, layer.m, beats, groups, len(weight_words),
                                  len(threshold_words), in_h=h, in_w=w, kernel_h=kh,
                                  kernel_w=kw, pool=layer.pool, out_h=out_h, out_w=out_w))
        # The weights in the window's order: (row, column, channel), channels padded per pixel.
        w = np.full((groups * pe, kh, kw, pixel_words * simd), layer.weight_pad, np.int64)
        w[:layer.m, :, :, :channels] = (layer.weight_fields() & field_mask).reshape(
            layer.m, channels, kh, kw).transpose(0, 2, 3, 1)
        w = w.reshape(groups * pe, beats * simd)
        thresholds = np.full((groups * pe, levels), never, np.int64)
        rows = layer.threshold_rows()
        if rows is not None:
            thresholds[:layer.m, :rows.shape[1]] = rows
        for g in range(groups):
            group = thresholds[g * pe:(g + 1) * pe].reshape(-1)
            threshold_words.append(_pack_fields(group & ((1 << count_width) - 1), count_width))
            for t in range(beats):
                block = w[g * pe:(g + 1) * pe, t * simd:(t + 1) * simd]
                weight_words.append(_pack_fields(block.reshape(-1), field_bits))
    return FoldedNetwork(tuple(folded), pe, simd, count_width, tuple(weight_words),
                         tuple(threshold_words), **widths)


def _signed_bits(value):
    """Bits of the narrowest two's complement that holds ``value``."""
    return (value if value >= 0 else -value - 1).bit_length() + 1


def _pack_fields(values, width):
    """``values`` as one integer, value ``i`` at bit ``i * width``."""
    return sum(int(v) << (i * width) for i, v in enumerate(values))


def unpack_fields(word, width, count, signed=False):
    """int64 [count]: the ``width``-bit fields of ``word``, field ``i`` at bit ``i * width``,
    two's complement if ``signed``."""
    values = np.array([(word >> (i * width)) & ((1 << width) - 1) for i in range(count)],
                      np.int64)
    return values - ((values >> (width - 1)) << width) if signed else values


def pack_input_words(folded, elements, index=0):
    """One input of layer ``index`` as the engine stores it: its map (``elements``, any shape
    of ``C * H * W`` elements in NCHW order; a dense layer's vector) pixel by pixel, each
    pixel's channels in words of ``simd`` elements, element ``i`` of a word (``input_bits``
    from bit ``i * input_bits``) being channel ``t * simd + i`` of its pixel's word ``t``
    (padded with 0)."""
    layer, simd = folded.layers[index], folded.simd
    pixels = layer.in_h * layer.in_w
    channels = layer.k // (layer.kernel_h * layer.kernel_w)
    padded = np.zeros((pixels, layer.pixel_words * simd), np.uint8)
    padded[:, :channels] = np.asarray(elements).reshape(channels, pixels).T
    padded = padded.reshape(-1, simd)
    return [_pack_fields(word, folded.input_bits) for word in padded]


def layer_beats(folded, index, bits):
    """The unit's beats for dense layer ``index`` (one pixel in) on one input vector's bits,
    as the engine issues them: ``(x, w, last, thresholds)``, each word the unit's payload
    field."""
    layer = folded.layers[index]
    x = pack_input_words(folded, bits, index)
    for g in range(layer.groups):
        thresholds = folded.threshold_words[layer.threshold_base + g]
        for t in range(layer.beats):
            w = folded.weight_words[layer.weight_base + g * layer.beats + t]
            yield x[t], w, t == layer.beats - 1, thresholds
