"""Binary layers: a dense layer of the integer network in the form the XNOR-popcount unit
(:class:`fpganet.hdl.binary_mvu.BinaryMatrixVectorUnit`) computes.

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

The unit folds a layer as FINN's MVAU does: ``pe`` channels at a time, ``simd`` input bits a
beat (:func:`fold_network`, :func:`layer_beats`). A layer whose ``K`` is not a multiple of ``simd`` is padded with
input bit 0 against weight bit 1, whose XNOR is 0: padding adds nothing to a count.
"""

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from ..errors import FpganetError
from ..ops import xnor_popcount
from ..qnet import QConv
from ..quantize.fixed_point import requantize_mode

__all__ = ["LoweredDense", "BinaryLayer", "lower_binary", "lower_chain", "lower_binary_network",
           "run_binary", "run_binary_network", "input_bits", "codes_of_counts", "FoldedLayer",
           "FoldedNetwork", "fold_network", "UNITS", "ENGINE_NAMES",
           "unpack_fields", "pack_input_words", "layer_beats"]


@dataclass(frozen=True)
class LoweredDense:
    """A dense layer of the integer network in a form an engine in logic cells computes: a
    channel's total over its inputs, then thresholds on the total (a few output levels) or the
    source's requantization of ``total + offset`` (a wider output). Each form says how its
    weights, inputs and thresholds are stored in the engine's words (:func:`fold_network`)."""

    source: QConv

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
    """The binary form of dense ``layer`` whose input codes are ``in_lo`` or ``in_lo + 1``.

    Parameters
    ----------
    layer : fpganet.qnet.QConv
        A dense layer (1x1 output) with weights in {-1, +1}.
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
    if not isinstance(layer, QConv) or layer.kind != "dense":
        raise FpganetError(f"layer '{layer.name}': only a dense layer has a binary form")
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


def _requantized(layer, acc, mode):
    """The layer's output codes for accumulators ``acc`` [M, P] (bias included), through the
    golden model's own requantization."""
    return requantize_mode(acc[None], layer.mult, layer.shift, layer.zp_out, layer.lo, layer.hi,
                           mode, layer.single_rounding)[0].astype(np.int64)


def lower_binary_network(net):
    """Every dense layer of a chain of reshapes and dense layers (an MLP such as FINN's TFC)
    in binary form, each reading the previous one's bits; the network's input must be one
    bit (``input_hi == input_lo + 1``) and every layer but the last one bit out.

    Returns
    -------
    list of BinaryLayer

    Raises
    ------
    FpganetError
        Naming the first layer that is not binary, and why.
    """
    if net.input_hi != net.input_lo + 1:
        raise FpganetError(f"the network's input codes {net.input_lo}..{net.input_hi} are not "
                           f"one bit")
    return lower_chain(net, lambda layer, in_lo, _, mode: lower_binary(layer, in_lo, mode),
                       "is not one bit")


def lower_chain(net, lower, not_narrow):
    """``lower(layer, in_lo, in_hi, mode)`` of every dense layer of a chain of reshapes and
    dense layers, each given the code range of the one before's output (the network's input
    for the first); every layer but the last must have thresholds, else the next is refused,
    its input ``not_narrow``."""
    layers, in_lo, in_hi = [], net.input_lo, net.input_hi
    for layer in net.layers:
        if layer.type == "reshape":
            continue
        if layers and layers[-1].thresholds is None:
            raise FpganetError(f"layer '{layer.name}': its input, '{layers[-1].name}''s output, "
                               f"{not_narrow}")
        layers.append(lower(layer, in_lo, in_hi, net.config.requant_mode))
        in_lo, in_hi = layer.lo, layer.hi
    return layers


def input_bits(layers, q_in):
    """The first layer's input bits [N, K] of int8 inputs ``q_in`` [N, ...] (codes ``in_lo``
    or ``in_lo + 1``)."""
    return (q_in.reshape(len(q_in), -1).astype(np.int64) - layers[0].in_lo).astype(np.uint8)


def run_binary_network(layers, q_in, mode="fpganet"):
    """The binary layers' int8 output codes [N, M] for int8 inputs ``q_in`` [N, ...] (codes
    ``in_lo`` or ``in_lo + 1`` of the first layer), as the golden model gives them."""
    bits = input_bits(layers, q_in)
    for layer in layers:
        bits = run_binary(layer, bits, mode)
    last = layers[-1]
    return bits if last.thresholds is None else (bits + last.out_lo).astype(np.int8)


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
    """Where one layer sits in a :class:`FoldedNetwork`: ``beats`` of ``simd`` input elements
    for each of ``groups`` groups of ``pe`` channels, its weight words from ``weight_base``
    (group-major), its threshold words from ``threshold_base`` (one a group)."""

    k: int
    m: int
    beats: int
    groups: int
    weight_base: int
    threshold_base: int


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
        """Words of one input vector."""
        return self.layers[0].beats

    @property
    def output_groups(self):
        """Results (``pe`` totals each) of one input vector."""
        return self.layers[-1].groups

    @property
    def buffer_words(self):
        """Words an activation buffer holds: the widest layer input."""
        return max(layer.beats for layer in self.layers)

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
                           [list(vars(layer).values()) for layer in self.layers],
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
        beats, groups = -(-layer.k // simd), -(-layer.m // pe)
        folded.append(FoldedLayer(layer.k, layer.m, beats, groups, len(weight_words),
                                  len(threshold_words)))
        w = np.full((groups * pe, beats * simd), layer.weight_pad, np.int64)
        w[:layer.m, :layer.k] = layer.weight_fields() & field_mask
        thresholds = np.full((groups * pe, levels), never, np.int64)
        rows = layer.threshold_rows()
        if rows is not None:
            thresholds[:layer.m, :rows.shape[1]] = rows
        for g in range(groups):
            channels = thresholds[g * pe:(g + 1) * pe].reshape(-1)
            threshold_words.append(_pack_fields(channels & ((1 << count_width) - 1), count_width))
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
    """One input vector of layer ``index`` as words of ``simd`` elements, element ``i`` of
    word ``t`` (``input_bits`` from bit ``i * input_bits``) being element ``t * simd + i``
    (padded with 0)."""
    simd, words = folded.simd, folded.layers[index].beats
    padded = np.zeros(words * simd, np.uint8)
    padded[:len(elements)] = elements
    return [_pack_fields(padded[t * simd:(t + 1) * simd], folded.input_bits)
            for t in range(words)]


def layer_beats(folded, index, bits):
    """The unit's beats for layer ``index`` on one input vector's bits, as the engine issues
    them: ``(x, w, last, thresholds)``, each word the unit's payload field."""
    layer = folded.layers[index]
    x = pack_input_words(folded, bits, index)
    for g in range(layer.groups):
        thresholds = folded.threshold_words[layer.threshold_base + g]
        for t in range(layer.beats):
            w = folded.weight_words[layer.weight_base + g * layer.beats + t]
            yield x[t], w, t == layer.beats - 1, thresholds
