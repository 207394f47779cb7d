"""A binary network compiled for the binary engine: its memory images, its streams, and the
files ``fpganet compile --engine binary`` writes.

The engine (:class:`fpganet.hdl.binary_device.BinaryDevice`) keeps its weights and thresholds
in memories initialized in the bitstream, as FINN's MVAUs do, so a compiled directory holds
them as ``$readmemh`` files, one word a line, most significant digit first:

``binary_weights.hex``
    ``pe * simd``-bit words, channel ``j``'s ``simd`` bits at bit ``j * simd``, each layer's
    groups in order and each group's beats in order (:func:`~fpganet.codegen.binary.fold_network`).
``binary_thresholds.hex``
    ``pe * count_width``-bit words, one a group.

The manifest's ``binary_engine`` section (:attr:`BinaryImages.layout`) says how they are
folded. A reader rebuilds the images from ``network.npz`` and refuses files that differ
(:func:`read_binary_images`): the images are the network's, at the fold the manifest names.

Streams, one START a vector: the first layer's input bits as bytes (bit ``i`` in bit
``i % 8`` of byte ``i // 8``); out, the last layer's counts at two bytes each, little-endian,
``pe`` a group, then the 4-byte cycle stamp.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FpganetError
from ..files import verify_directory
from ..hdl.binary_device import COUNT_BYTES, STAMP_BYTES, BinaryDevice
from ..ops import xnor_popcount
from .binary import codes_of_counts, fold_network, input_bits, lower_binary_network

__all__ = ["BinaryImages", "build_binary_images", "read_binary_images", "run_folded",
           "DEFAULT_FOLD", "FORMAT", "WEIGHTS", "THRESHOLDS", "is_binary_compiled"]

#: The manifest section's format name.
FORMAT = "fpganet-binary-engine-1"
#: The files of a compiled directory.
WEIGHTS, THRESHOLDS = "binary_weights.hex", "binary_thresholds.hex"
#: ``(pe, simd)`` when none is given: the fold routed on the iCEBreaker
#: (benchmarks/results/binary.json).
DEFAULT_FOLD = (4, 16)

_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BinaryImages:
    """A chain of binary layers folded for the engine.

    Attributes
    ----------
    layers : list of fpganet.codegen.binary.BinaryLayer
    folded : fpganet.codegen.binary.FoldedNetwork
    output_shape : tuple of int
        The network's output shape (after any trailing reshape).
    mode : str
        The network's requantization mode (the last layer's, when its output is a count).
    """

    layers: list
    folded: object
    output_shape: tuple
    mode: str

    @property
    def input_bytes(self):
        """Bytes of one vector on the input stream."""
        return -(-self.layers[0].k // 8)

    @property
    def output_bytes(self):
        """Bytes of one vector's counts on the output stream (the stamp follows)."""
        return self.folded.output_groups * self.folded.pe * COUNT_BYTES

    @property
    def layout(self):
        """The manifest's ``binary_engine`` section."""
        folded = self.folded
        return {
            "format": FORMAT, "pe": folded.pe, "simd": folded.simd,
            "count_width": folded.count_width,
            "weight_words": len(folded.weight_words),
            "threshold_words": len(folded.threshold_words),
            "buffer_words": folded.buffer_words,
            "streams": {"input_bytes": self.input_bytes, "output_bytes": self.output_bytes,
                        "stamp_bytes": STAMP_BYTES},
            "layers": [{"name": layer.name, "k": layer.k, "m": layer.m, "beats": at.beats,
                        "groups": at.groups, "weight_base": at.weight_base,
                        "threshold_base": at.threshold_base,
                        "output": "count" if layer.thresholds is None else "bit"}
                       for layer, at in zip(self.layers, folded.layers)],
        }

    def files(self):
        """``{name: text}`` of the ``.hex`` files."""
        folded = self.folded
        return {name: "".join(f"{word:0{-(-bits // 4)}x}\n" for word in words)
                for name, words, bits in (
                    (WEIGHTS, folded.weight_words, folded.pe * folded.simd),
                    (THRESHOLDS, folded.threshold_words, folded.pe * folded.count_width))}

    def save(self, directory):
        """Write the ``.hex`` files into ``directory``."""
        for name, text in self.files().items():
            Path(directory, name).write_text(text)

    def pack_inputs(self, q_in):
        """The input stream of int8 inputs ``q_in`` [N, ...] (codes ``in_lo``, ``in_lo + 1``),
        one vector after another."""
        bits = input_bits(self.layers, np.asarray(q_in))
        return np.packbits(bits, axis=1, bitorder="little").tobytes()

    def unpack_outputs(self, data, n):
        """``(q int8 [N, *output_shape], stamps uint32 [N])`` from ``n`` vectors' output bytes."""
        step = self.output_bytes + STAMP_BYTES
        raw = np.frombuffer(bytes(data), np.uint8)
        if raw.size != n * step:
            raise FpganetError(f"the binary engine sent {raw.size} bytes for {n} vector(s); "
                               f"expected {n * step}")
        raw = raw.reshape(n, step)
        stamps = raw[:, self.output_bytes:].copy().view("<u4").reshape(n)
        return self.decode(raw[:, :self.output_bytes]), stamps.astype(np.uint32)

    def decode(self, count_bytes):
        """int8 [N, *output_shape]: the network's output codes of ``N`` vectors' count bytes
        (uint8 [N, output_bytes], or a list of ``bytes``; padded channels' counts dropped)."""
        raw = np.asarray([np.frombuffer(b, np.uint8) for b in count_bytes]
                         if isinstance(count_bytes, list) else count_bytes, np.uint8)
        counts = raw.copy().view("<u2").astype(np.int64)
        return self.codes(counts[:, :self.layers[-1].m])

    def codes(self, counts):
        """int8 [N, *output_shape]: the network's output codes of the last layer's counts
        [N, M]."""
        last = self.layers[-1]
        if last.thresholds is None:
            q = codes_of_counts(last, counts, self.mode)
        else:
            q = ((counts >= last.thresholds[None, :]) + last.out_lo).astype(np.int8)
        return q.reshape(len(counts), *self.output_shape)


def build_binary_images(net, pe, simd):
    """``net`` (:class:`~fpganet.qnet.QNetwork`, a chain of binary dense layers) folded
    ``pe`` x ``simd`` for the engine.

    Raises
    ------
    FpganetError
        A layer that is not binary, or a fold the engine cannot run, in one line.
    """
    for name, value in (("pe", pe), ("simd", simd)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise FpganetError(f"{name} must be a positive integer, not {value!r}")
    try:
        layers = lower_binary_network(net)
    except FpganetError as error:
        raise FpganetError(f"not a network for the binary engine: {error}") from None
    folded = fold_network(layers, pe, simd)
    try:
        BinaryDevice.check_fold(folded)
    except ValueError as error:
        raise FpganetError(f"the binary engine cannot run {pe}x{simd}: {error}") from None
    return BinaryImages(layers, folded, tuple(net.output_shape), net.config.requant_mode)


def is_binary_compiled(directory):
    """Whether a compiled directory's manifest has a ``binary_engine`` section (unverified:
    :func:`read_binary_images` checks)."""
    try:
        with open(os.path.join(os.fspath(directory), _MANIFEST)) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and "binary_engine" in manifest


def read_binary_images(directory, net):
    """The :class:`BinaryImages` of a directory compiled with ``--engine binary``, whose
    network ``net`` is (:func:`fpganet.compiler.load_compiled`).

    The ``.hex`` files must be listed in and match ``SHA256SUMS``, and equal ``net`` folded at
    the manifest's ``pe`` x ``simd``.

    Raises
    ------
    FpganetError
        No ``binary_engine`` section, or files that are not the network's.
    """
    directory = os.fspath(directory)
    verify_directory(directory, needed=(_MANIFEST, WEIGHTS, THRESHOLDS))
    with open(os.path.join(directory, _MANIFEST)) as handle:
        section = json.load(handle).get("binary_engine")
    if not isinstance(section, dict) or section.get("format") != FORMAT:
        raise FpganetError(f"'{directory}' was not compiled for the binary engine "
                           f"(fpganet compile --engine binary)")
    try:
        pe, simd = int(section["pe"]), int(section["simd"])
    except (KeyError, TypeError, ValueError):
        raise FpganetError(f"the binary_engine section of '{directory}/{_MANIFEST}' has no "
                           f"valid pe and simd: compile it again") from None
    images = build_binary_images(net, pe, simd)
    for name, text in images.files().items():
        if Path(directory, name).read_text() != text:
            raise FpganetError(f"'{os.path.join(directory, name)}' is not network.npz folded "
                               f"{pe}x{simd}: compile it again")
    if section != json.loads(json.dumps(images.layout)):
        raise FpganetError(f"the binary_engine section of '{directory}/{_MANIFEST}' is not "
                           f"network.npz folded {pe}x{simd}: compile it again")
    return images


def run_folded(images, q_in):
    """The engine's arithmetic on its memory words: int8 inputs [N, ...] to the network's
    output codes [N, *output_shape] (the ``isa`` backend of a binary compile). The words are
    unpacked here, as the engine reads them, not taken from the layers they were folded from."""
    folded = images.folded
    bits = input_bits(images.layers, np.asarray(q_in))
    for index, at in enumerate(folded.layers):
        weights, thresholds = _unpacked(folded, at)
        padded = np.zeros((len(bits), at.beats * folded.simd), np.uint8)
        padded[:, :bits.shape[1]] = bits
        counts = xnor_popcount(padded, weights)
        if index < len(folded.layers) - 1:
            bits = (counts >= thresholds[None, :]).astype(np.uint8)
    return images.codes(counts[:, :images.layers[-1].m])


def _unpacked(folded, at):
    """A folded layer's weight bits [groups * pe, beats * simd] and thresholds [groups * pe]
    from its memory words."""
    pe, simd, width = folded.pe, folded.simd, folded.count_width
    weights = np.zeros((at.groups * pe, at.beats * simd), np.uint8)
    thresholds = np.zeros(at.groups * pe, np.int64)
    for g in range(at.groups):
        word = folded.threshold_words[at.threshold_base + g]
        for j in range(pe):
            thresholds[g * pe + j] = (word >> (j * width)) & ((1 << width) - 1)
        for t in range(at.beats):
            word = folded.weight_words[at.weight_base + g * at.beats + t]
            for j in range(pe):
                for i in range(simd):
                    weights[g * pe + j, t * simd + i] = (word >> (j * simd + i)) & 1
    return weights, thresholds
