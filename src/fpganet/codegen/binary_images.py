"""A binary or low-bit network compiled for the engine in logic cells: its memory images,
its streams, and the files ``fpganet compile --engine binary`` (or ``lowbit``) writes.

The engine (:class:`fpganet.hdl.binary_device.BinaryDevice`) keeps its weights and thresholds
in memories initialized in the bitstream, as FINN's MVAUs do, so a compiled directory holds
them as ``$readmemh`` files, one word a line, most significant digit first (``UNIT`` being
``binary`` or ``lowbit``, :data:`~fpganet.codegen.binary.UNITS`):

``UNIT_weights.hex``
    ``pe * simd * weight_bits``-bit words, channel ``j``'s ``simd`` weight fields from bit
    ``j * simd * weight_bits``, each layer's groups in order and each group's beats in order
    (:func:`~fpganet.codegen.binary.fold_network`).
``UNIT_thresholds.hex``
    ``pe * levels * count_width``-bit words, one a group.

The manifest's ``UNIT_engine`` section (:attr:`BinaryImages.layout`) says how they are
folded. A reader rebuilds the images from ``network.npz`` and refuses files that differ
(:func:`read_binary_images`): the images are the network's, at the fold the manifest names.

Streams, one START an input: the first layer's input elements packed in bytes
(``input_bits`` each, element ``i`` from bit ``i * input_bits``, least significant bit
first), or a map's words whole, pixel by pixel (``BinaryImages.pack_inputs``); out, the last layer's totals at two bytes each, little-endian (two's complement for
the low-bit unit's sums), ``pe`` a group, then the 4-byte cycle stamp.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import FpganetError
from ..files import verify_directory
from ..isa import HostSpace
from ..hdl.binary_device import COUNT_BYTES, STAMP_BYTES, BinaryDevice
from ..ops import xnor_popcount
from .binary import (ENGINE_NAMES, UNITS, fold_network, input_bits, lower_binary_network,
                     pack_input_words, unpack_fields)
from .lowbit import lower_lowbit_network

__all__ = ["BinaryImages", "build_binary_images", "read_binary_images", "run_folded",
           "DEFAULT_FOLD", "FORMAT", "WEIGHTS", "THRESHOLDS", "is_binary_compiled", "unit_files"]

#: The manifest section's format name (``binary`` for the binary unit).
FORMAT = "fpganet-binary-engine-1"
#: The files of a directory compiled for the binary unit (:func:`unit_files`).
WEIGHTS, THRESHOLDS = "binary_weights.hex", "binary_thresholds.hex"
#: How each unit's layers are lowered.
_LOWER = {"binary": lower_binary_network, "lowbit": lower_lowbit_network}


def unit_files(unit):
    """``(section, format, weights file, thresholds file)`` of a directory compiled for
    ``unit``."""
    return (f"{unit}_engine", f"fpganet-{unit}-engine-1", f"{unit}_weights.hex",
            f"{unit}_thresholds.hex")
#: ``(pe, simd)`` when none is given: the fold routed on the iCEBreaker
#: (benchmarks/results/binary.json).
DEFAULT_FOLD = (4, 16)

_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BinaryImages:
    """A chain of binary or low-bit layers folded for the engine.

    Attributes
    ----------
    layers : list of fpganet.codegen.binary.LoweredDense
    folded : fpganet.codegen.binary.FoldedNetwork
    output_shape : tuple of int
        The network's output shape (after any trailing reshape).
    mode : str
        The network's requantization mode (the last layer's, when its output is a count).
    host_weights : bool
        The weights are loaded by the host into the configuration's weight buffer before the
        first image (:attr:`memories`), not in the bitstream.
    """

    layers: list
    folded: object
    output_shape: tuple
    mode: str
    host_weights: bool = False

    @property
    def memories(self):
        """What the host writes before the first image: ``{HostSpace.WEIGHTS: words}`` where
        the weights are loaded, else nothing."""
        return {HostSpace.WEIGHTS: list(self.folded.weight_words)} if self.host_weights else {}

    @property
    def input_bytes(self):
        """Bytes of one vector or map on the input stream."""
        return self.folded.input_bytes

    @property
    def output_bytes(self):
        """Bytes of one vector's counts on the output stream (the stamp follows)."""
        return self.folded.output_groups * self.folded.pe * COUNT_BYTES

    @property
    def layout(self):
        """The manifest's ``UNIT_engine`` section."""
        folded = self.folded
        binary = folded.unit == "binary"
        return {
            "format": unit_files(folded.unit)[1], "pe": folded.pe, "simd": folded.simd,
            "count_width": folded.count_width,
            **({} if binary else {"weight_bits": folded.weight_bits,
                                  "input_bits": folded.input_bits, "levels": folded.levels}),
            **({"weights": "host"} if self.host_weights else {}),
            "weight_words": len(folded.weight_words),
            "threshold_words": len(folded.threshold_words),
            "buffer_words": folded.buffer_words,
            "streams": {"input_bytes": self.input_bytes, "output_bytes": self.output_bytes,
                        "stamp_bytes": STAMP_BYTES},
            "layers": [{"name": layer.name, "k": layer.k, "m": layer.m, "beats": at.beats,
                        "groups": at.groups, "weight_base": at.weight_base,
                        "threshold_base": at.threshold_base,
                        **({} if not at.is_map else
                           {"in": [at.in_h, at.in_w], "kernel": [at.kernel_h, at.kernel_w],
                            "pool": at.pool, "out": [at.out_h, at.out_w]}),
                        "output": ("count" if binary else "sum") if layer.thresholds is None
                        else ("bit" if binary else "digit")}
                       for layer, at in zip(self.layers, folded.layers)],
        }

    def files(self):
        """``{name: text}`` of the ``.hex`` files."""
        folded = self.folded
        _, _, weights, thresholds = unit_files(folded.unit)
        weight_bits, threshold_bits, _ = folded.word_bits
        return {name: "".join(f"{word:0{-(-bits // 4)}x}\n" for word in words)
                for name, words, bits in ((weights, folded.weight_words, weight_bits),
                                          (thresholds, folded.threshold_words, threshold_bits))}

    def save(self, directory):
        """Write the ``.hex`` files into ``directory``."""
        for name, text in self.files().items():
            Path(directory, name).write_text(text)

    def pack_inputs(self, q_in):
        """The input stream of int8 inputs ``q_in`` [N, ...] (codes from the first layer's
        ``in_lo``), one vector after another."""
        elements = input_bits(self.layers, np.asarray(q_in))
        folded = self.folded
        if folded.layers[0].is_map:
            # A map: its words as the engine stores them, pixel by pixel, each little-endian.
            word_bytes = folded.simd * folded.input_bits // 8
            return b"".join(word.to_bytes(word_bytes, "little") for vector in elements
                            for word in pack_input_words(folded, vector))
        width = folded.input_bits
        bits = (elements[:, :, None] >> np.arange(width, dtype=np.uint8)) & 1
        return np.packbits(bits.reshape(len(bits), -1), axis=1, bitorder="little").tobytes()

    def unpack_outputs(self, data, n):
        """``(q int8 [N, *output_shape], stamps uint32 [N])`` from ``n`` vectors' output bytes."""
        step = self.output_bytes + STAMP_BYTES
        raw = np.frombuffer(bytes(data), np.uint8)
        if raw.size != n * step:
            raise FpganetError(f"the {ENGINE_NAMES[self.folded.unit]} sent {raw.size} bytes for {n} vector(s); "
                               f"expected {n * step}")
        raw = raw.reshape(n, step)
        stamps = raw[:, self.output_bytes:].copy().view("<u4").reshape(n)
        return self.decode(raw[:, :self.output_bytes]), stamps.astype(np.uint32)

    def decode(self, count_bytes):
        """int8 [N, *output_shape]: the network's output codes of ``N`` vectors' total bytes
        (uint8 [N, output_bytes], or a list of ``bytes``; padded channels' totals dropped)."""
        raw = np.asarray([np.frombuffer(b, np.uint8) for b in count_bytes]
                         if isinstance(count_bytes, list) else count_bytes, np.uint8)
        totals = raw.copy().view("<i2" if self.folded.signed_totals else "<u2").astype(np.int64)
        return self.codes(totals[:, :self.layers[-1].m])

    def codes(self, totals):
        """int8 [N, *output_shape]: the network's output codes of the last layer's totals
        [N, M]."""
        return self.layers[-1].codes(totals, self.mode).reshape(len(totals), *self.output_shape)


def build_binary_images(net, pe, simd, unit="binary", host_weights=False):
    """``net`` (:class:`~fpganet.qnet.QNetwork`, a chain of binary dense layers and
    convolutions, or of low-bit ones for ``unit="lowbit"``) folded ``pe`` x ``simd`` for the engine; with
    ``host_weights``, its weights loaded by the host into the weight buffer of ``net``'s
    configuration (whose words they must fill exactly).

    Raises
    ------
    FpganetError
        A layer that is not of the unit's form, or a fold the engine cannot run, in one line.
    """
    for name, value in (("pe", pe), ("simd", simd)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise FpganetError(f"{name} must be a positive integer, not {value!r}")
    if unit not in UNITS:
        raise FpganetError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    engine = ENGINE_NAMES[unit]
    try:
        layers = _LOWER[unit](net)
    except FpganetError as error:
        raise FpganetError(f"not a network for the {engine}: {error}") from None
    folded = fold_network(layers, pe, simd)
    try:
        BinaryDevice.check_fold(folded, net.config if host_weights else None)
    except ValueError as error:
        raise FpganetError(f"the {engine} cannot run {pe}x{simd}: {error}") from None
    return BinaryImages(layers, folded, tuple(net.output_shape), net.config.requant_mode,
                        host_weights)


def is_binary_compiled(directory):
    """Whether a compiled directory's manifest has an engine section of one of the units
    (unverified: :func:`read_binary_images` checks)."""
    return _compiled_unit(directory) is not None


def _compiled_unit(directory):
    """The unit whose ``UNIT_engine`` section the manifest has, or None."""
    try:
        with open(os.path.join(os.fspath(directory), _MANIFEST)) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    return next((unit for unit in UNITS if unit_files(unit)[0] in manifest), None)


def read_binary_images(directory, net):
    """The :class:`BinaryImages` of a directory compiled with ``--engine binary`` or
    ``lowbit``, whose network ``net`` is (:func:`fpganet.compiler.load_compiled`).

    The ``.hex`` files must be listed in and match ``SHA256SUMS``, and equal ``net`` folded at
    the manifest's ``pe`` x ``simd``.

    Raises
    ------
    FpganetError
        No engine section, or files that are not the network's.
    """
    directory = os.fspath(directory)
    unit = _compiled_unit(directory) or "binary"
    name, format_, weights, thresholds = unit_files(unit)
    verify_directory(directory, needed=(_MANIFEST, weights, thresholds))
    with open(os.path.join(directory, _MANIFEST)) as handle:
        section = json.load(handle).get(name)
    if not isinstance(section, dict) or section.get("format") != format_:
        raise FpganetError(f"'{directory}' was not compiled for the {ENGINE_NAMES[unit]} "
                           f"(fpganet compile --engine {unit})")
    try:
        pe, simd = int(section["pe"]), int(section["simd"])
    except (KeyError, TypeError, ValueError):
        raise FpganetError(f"the {name} section of '{directory}/{_MANIFEST}' has no "
                           f"valid pe and simd: compile it again") from None
    images = build_binary_images(net, pe, simd, unit, section.get("weights") == "host")
    for file, text in images.files().items():
        if Path(directory, file).read_text() != text:
            raise FpganetError(f"'{os.path.join(directory, file)}' is not network.npz folded "
                               f"{pe}x{simd}: compile it again")
    if section != json.loads(json.dumps(images.layout)):
        raise FpganetError(f"the {name} section of '{directory}/{_MANIFEST}' is not "
                           f"network.npz folded {pe}x{simd}: compile it again")
    return images


def run_folded(images, q_in):
    """The engine's arithmetic on its memory words: int8 inputs [N, ...] to the network's
    output codes [N, *output_shape] (the ``isa`` backend of a binary or low-bit compile). The
    words are unpacked here, as the engine reads them, not taken from the layers they were
    folded from, and each layer reads its input map as the engine stores it (pixel by pixel,
    channels padded to whole words): a total is the XNOR popcount of a window's bits
    (binary) or the dot product of its digits and the signed weight fields (low-bit); the
    next layer's element is how many of its channel's thresholds the total reaches, the
    greatest over a pool's windows."""
    folded = images.folded
    first = folded.layers[0]
    elements = input_bits(images.layers, np.asarray(q_in))
    n = len(elements)
    channels = first.k // (first.kernel_h * first.kernel_w)
    stored = elements.reshape(n, channels, first.in_h, first.in_w).transpose(0, 2, 3, 1)
    for index, at in enumerate(folded.layers):
        weights, thresholds = _unpacked(folded, at)
        padded = np.zeros((n, at.in_h, at.in_w, at.pixel_words * folded.simd), np.uint8)
        padded[..., :stored.shape[3]] = stored
        windows = sliding_window_view(padded, (at.kernel_h, at.kernel_w), axis=(1, 2))
        out_h, out_w = windows.shape[1:3]
        # [N, Ho, Wo, C, kh, kw] to the weights' order (row, column, channel).
        cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * out_h * out_w, -1)
        if folded.unit == "binary":
            totals = xnor_popcount(cols, weights.astype(np.uint8)).astype(np.int64)
        else:
            totals = cols.astype(np.int64) @ weights.T
        if index < len(folded.layers) - 1:
            out = (totals[:, :, None] >= thresholds[None]).sum(axis=2).astype(np.uint8)
            stored = out.reshape(n, out_h, out_w, -1)
            if at.pool > 1:
                p = at.pool
                stored = stored[:, :at.out_h * p, :at.out_w * p].reshape(
                    n, at.out_h, p, at.out_w, p, -1).max(axis=(2, 4))
    return images.codes(totals[:, :images.layers[-1].m])


def _unpacked(folded, at):
    """A folded layer's weight fields [groups * pe, beats * simd] (signed for the low-bit
    unit) and thresholds [groups * pe, levels] from its memory words."""
    pe, simd, levels = folded.pe, folded.simd, folded.levels
    signed = folded.signed_totals
    weights = np.zeros((at.groups * pe, at.beats * simd), np.int64)
    thresholds = np.zeros((at.groups * pe, levels), np.int64)
    for g in range(at.groups):
        word = folded.threshold_words[at.threshold_base + g]
        thresholds[g * pe:(g + 1) * pe] = unpack_fields(
            word, folded.count_width, pe * levels, signed).reshape(pe, levels)
        for t in range(at.beats):
            word = folded.weight_words[at.weight_base + g * at.beats + t]
            weights[g * pe:(g + 1) * pe, t * simd:(t + 1) * simd] = unpack_fields(
                word, folded.weight_bits, pe * simd, signed).reshape(pe, simd)
    return weights, thresholds
