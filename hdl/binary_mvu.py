"""Binary matrix-vector unit: XNOR-popcount MACs in logic cells.

A 1-bit operand stands for -1 (bit 0) or +1 (bit 1), as FINN's bipolar datatype does. The
product of two is +1 where the bits agree, so a dot product of K such operands is
``2 * count - K``, ``count`` being the popcount of their XNOR; no multiplier is involved, and
a MAC costs a few LUT4s where an int8 one takes a DSP. Binary layers compare that count with
a threshold per output channel to give the next layer's 1-bit activations (FINN's
MultiThreshold after a binary MatrixVectorActivation), so the unit emits both.

The unit computes ``pe`` dot products at once, each over ``simd`` input bits a beat, as
FINN's MVAU folds a layer: the input vector streams through once per group of ``pe``
output channels, ``ceil(K / simd)`` beats, and a beat flagged ``last`` closes the group.
The numerics are :func:`fpganet.ops.xnor_popcount`.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lowbit_mvu import DOT_PRODUCT_LATENCY, adder_tree, dot_product_pipeline

__all__ = ["BinaryMatrixVectorUnit", "beat_layout", "result_layout", "popcount"]


def beat_layout(pe, simd, count_width):
    """Payload of one beat: ``x``, ``simd`` input bits (shared by every PE); ``w``, ``simd``
    weight bits for each of the ``pe`` output channels; ``last``: the beat ends the dot
    products; ``thresholds``: each channel's threshold on its count, read from the ``last``
    beat only."""
    return data.StructLayout({
        "x": simd,
        "w": data.ArrayLayout(simd, pe),
        "last": 1,
        "thresholds": data.ArrayLayout(count_width, pe),
    })


def result_layout(pe, count_width):
    """Payload of one result: ``counts``, each channel's XNOR popcount over the whole input;
    ``y``, bit ``j`` set where ``counts[j] >= thresholds[j]``."""
    return data.StructLayout({
        "counts": data.ArrayLayout(count_width, pe),
        "y": pe,
    })


def popcount(bits):
    """The number of set bits of ``bits``, as a balanced tree of adders (its depth is
    ``ceil(log2(len(bits)))`` adders, each as wide as its operands' sum needs)."""
    return adder_tree(bits[i] for i in range(len(bits)))


class BinaryMatrixVectorUnit(wiring.Component):
    """``pe`` binary dot products, ``simd`` XNOR-popcount MACs each per beat.

    Parameters
    ----------
    pe : int
        Output channels computed at once (processing elements).
    simd : int
        Input bits each PE takes a beat.
    count_width : int
        Bits of each channel's count: the dot products can span up to
        ``2**count_width - 1`` input bits. At least ``simd``'s width.
    partial_bits : int, optional
        Register the popcounts of each ``partial_bits`` input bits of a beat before summing
        them (one more cycle of latency): the beat's inputs reach every PE, and in a wide unit
        that broadcast and a whole beat's popcount make too long a path for one cycle.
        Default: the beat's popcount in one stage.

    Members
    -------
    beats : In(stream.Signature(beat_layout(pe, simd, count_width)))
        The operands; a beat whose ``last`` is set closes the dot products and brings their
        thresholds.
    results : Out(stream.Signature(result_layout(pe, count_width)))
        One result per closing beat.

    Latency: a result is valid :attr:`latency` cycles after its closing beat's transfer
    when ``results.ready`` is held high (one more with ``partial_bits``).
    Throughput: one beat per cycle, back to back across dot products.
    Back-pressure: the whole pipeline moves while ``results.ready`` is high and holds while it
    is low, empty output or not: ``beats.ready`` is ``results.ready``, a wire, so that a
    consumer whose ready is a flip-flop drives the stages' enables from that flip-flop alone;
    ``results.valid`` never depends on ``results.ready``. Gaps in ``beats.valid`` are bubbles.
    """

    @staticmethod
    def latency_of(partial_bits=None):
        """Cycles from the closing beat to its result: the popcounts (partial ones, then their
        sums, with ``partial_bits``), the running sums, the compares, each registered."""
        return DOT_PRODUCT_LATENCY + (partial_bits is not None)

    @property
    def latency(self):
        """:meth:`latency_of` this unit's ``partial_bits``."""
        return self.latency_of(self.partial_bits)
    #: The result field that carries the channels' totals.
    totals_field = "counts"

    def __init__(self, pe, simd, count_width, partial_bits=None):
        for name, value in (("pe", pe), ("simd", simd), ("count_width", count_width),
                            *((("partial_bits", partial_bits),) if partial_bits is not None
                              else ())):
            if not isinstance(value, int) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if count_width < simd.bit_length():
            raise ValueError(f"count_width must be at least {simd.bit_length()} to hold one "
                             f"beat's popcount of {simd} bits, not {count_width}")
        self.pe, self.simd, self.count_width = pe, simd, count_width
        self.partial_bits = partial_bits
        super().__init__({
            "beats": In(stream.Signature(beat_layout(pe, simd, count_width))),
            "results": Out(stream.Signature(result_layout(pe, count_width))),
        })

    def elaborate(self, platform):
        m = Module()
        beat = self.beats.payload
        agree = lambda j: ~(beat.x ^ beat.w[j])     # noqa: E731
        step = self.partial_bits
        partials = None if step is None else (
            lambda j: [popcount(agree(j)[i:i + step]) for i in range(0, self.simd, step)])
        dot_product_pipeline(
            m, self.beats, self.results, self.totals_field, unsigned(self.count_width),
            lambda j: popcount(agree(j)), lambda count, threshold: count >= threshold,
            beat_shape=range(self.simd + 1), beat_partials=partials)
        return m
