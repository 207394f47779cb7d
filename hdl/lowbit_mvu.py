"""Low-bit matrix-vector unit: small products in logic cells, then multi-thresholds.

A low-bit layer (:mod:`fpganet.codegen.lowbit`) multiplies unsigned input digits of a few
bits by signed weight codes of a few bits. Such a product is a handful of LUT4s, no DSP; the
unit sums ``simd`` of them a beat for each of ``pe`` output channels, accumulates the sums
over the beats of a dot product, and compares each total with its channel's ``levels``
non-decreasing thresholds: the output digit is how many it reaches, as FINN's MultiThreshold
after its MVAU gives a W2A2 or W4A4 layer's activations. It is the binary unit
(:mod:`fpganet.hdl.binary_mvu`) with products where that one has XNORs.

The unit computes ``pe`` dot products at once, each over ``simd`` inputs a beat, as FINN's
MVAU folds a layer: the input vector streams through once per group of ``pe`` output
channels, ``ceil(K / simd)`` beats, and a beat flagged ``last`` closes the group. The
numerics are :func:`fpganet.codegen.lowbit.run_lowbit`'s dot products and thresholds.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LowBitMatrixVectorUnit", "beat_layout", "result_layout", "adder_tree",
           "dot_product_pipeline", "DOT_PRODUCT_LATENCY"]

#: Cycles from a closing beat to its result in :func:`dot_product_pipeline`: the beat's sums,
#: the totals, the outputs, each registered.
DOT_PRODUCT_LATENCY = 3


def beat_layout(pe, simd, weight_bits, input_bits, acc_width, levels):
    """Payload of one beat: ``x``, ``simd`` unsigned input digits (shared by every PE); ``w``,
    ``simd`` signed weight codes for each of the ``pe`` channels; ``last``: the beat ends the
    dot products; ``thresholds``: each channel's ``levels`` thresholds on its total, read from
    the ``last`` beat only."""
    return data.StructLayout({
        "x": data.ArrayLayout(unsigned(input_bits), simd),
        "w": data.ArrayLayout(data.ArrayLayout(signed(weight_bits), simd), pe),
        "last": 1,
        "thresholds": data.ArrayLayout(data.ArrayLayout(signed(acc_width), levels), pe),
    })


def result_layout(pe, acc_width, levels):
    """Payload of one result: ``sums``, each channel's dot product; ``y``, each channel's
    digit: how many of its thresholds its sum reaches."""
    return data.StructLayout({
        "sums": data.ArrayLayout(signed(acc_width), pe),
        "y": data.ArrayLayout(range(levels + 1), pe),
    })


def _signed(code, bits):
    """The two's complement value of the ``bits``-bit ``code``."""
    return code - (1 << bits) if code >> (bits - 1) else code


def adder_tree(terms):
    """The sum of ``terms`` (values), as a balanced tree of adders: ``ceil(log2(n))`` adders
    deep, each as wide as its operands' sum needs."""
    terms = list(terms)
    if not terms:
        return C(0, 1)
    while len(terms) > 1:
        pairs = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        terms = pairs + terms[len(terms) - len(terms) % 2:]
    return terms[0]


class LowBitMatrixVectorUnit(wiring.Component):
    """``pe`` dot products of ``simd`` small products a beat, and their multi-thresholds.

    Parameters
    ----------
    pe : int
        Output channels computed at once.
    simd : int
        Inputs each PE takes a beat.
    weight_bits : int
        Bits of a signed weight code (2..4).
    input_bits : int
        Bits of an unsigned input digit (1..4).
    acc_width : int
        Bits of a signed total: at least one beat's widest sum needs.
    levels : int
        Thresholds a channel (an output digit takes ``levels + 1`` values).

    Members
    -------
    beats : In(stream.Signature(beat_layout(...)))
    results : Out(stream.Signature(result_layout(pe, acc_width, levels)))
        One result per closing beat.

    Latency: a result is valid :attr:`latency` cycles after its closing beat's transfer when
    ``results.ready`` is held high.
    Throughput: one beat per cycle, back to back across dot products.
    Back-pressure: the whole pipeline moves while ``results.ready`` is high and holds while it
    is low, empty output or not: ``beats.ready`` is ``results.ready``, a wire, so that a
    consumer whose ready is a flip-flop drives the stages' enables from that flip-flop alone;
    ``results.valid`` never depends on ``results.ready``. Gaps in ``beats.valid`` are bubbles.
    """

    #: Cycles from the closing beat to its result: the products, the sums of each
    #: :attr:`chunk` of them, the beat's sums, the totals, the compares, each registered.
    latency = DOT_PRODUCT_LATENCY + 2
    #: Registered products summed before the next register: three adders.
    chunk = 8
    #: The result field that carries the channels' totals.
    totals_field = "sums"

    def __init__(self, pe, simd, weight_bits, input_bits, acc_width, levels):
        for name, value in (("pe", pe), ("simd", simd), ("acc_width", acc_width),
                            ("levels", levels)):
            if not isinstance(value, int) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if weight_bits not in range(2, 5):
            raise ValueError(f"weight_bits must be 2 to 4, not {weight_bits!r}")
        if input_bits not in range(1, 5):
            raise ValueError(f"input_bits must be 1 to 4, not {input_bits!r}")
        beat_bits = len(Const(-(1 << (weight_bits - 1)) * ((1 << input_bits) - 1) * simd))
        if acc_width < beat_bits:
            raise ValueError(f"acc_width must be at least {beat_bits} to hold one beat's sum of "
                             f"{simd} products, not {acc_width}")
        self.pe, self.simd, self.levels = pe, simd, levels
        self.weight_bits, self.input_bits, self.acc_width = weight_bits, input_bits, acc_width
        super().__init__({
            "beats": In(stream.Signature(beat_layout(pe, simd, weight_bits, input_bits,
                                                     acc_width, levels))),
            "results": Out(stream.Signature(result_layout(pe, acc_width, levels))),
        })

    def elaborate(self, platform):
        m = Module()
        wb, ib = self.weight_bits, self.input_bits
        if wb + ib <= 4:
            # Every bit of such a product is a function of four bits: one LUT4 each, as a table.
            table = Array(C(_signed(code, wb) * digit, signed(wb + ib))
                          for code in range(1 << wb) for digit in range(1 << ib))

            def product(w, d):
                return table[Cat(d, w)]
        else:
            def product(w, d):
                # The weight where each digit bit is set: written as a `*`, synth_ecp5 would
                # give every small product a DSP multiplier.
                return adder_tree(Mux(d[b], w.as_signed() << b, 0) for b in range(ib))

        def beat_terms(x, w):
            return [product(w[i], x[i].as_unsigned()) for i in range(self.simd)]

        def digit(total, thresholds):
            return adder_tree(total >= thresholds[t] for t in range(self.levels))
        dot_product_pipeline(m, self.beats, self.results, self.totals_field,
                             signed(self.acc_width), None, digit, beat_terms=beat_terms,
                             chunk=self.chunk)
        return m


def dot_product_pipeline(m, beats, results, totals_field, total_shape, beat_sum, output, *,
                         beat_shape=None, beat_terms=None, chunk=None, beat_partials=None):
    """The three registered stages a matrix-vector unit shares: each channel's sum of a beat
    (``beat_sum(j)``, registered as ``beat_shape``, default ``total_shape``), the running
    totals over a dot product's beats, and each channel's output from its total and its
    thresholds (``output(total, thresholds)``). ``results`` carries the totals in
    ``totals_field`` and the outputs in ``y``; the whole pipeline moves while
    ``results.ready`` is high (``beats.ready`` is ``results.ready``).

    With ``beat_terms(x, w)`` (a channel's terms of the beat from the inputs ``x`` and its
    weights ``w``) and ``chunk`` instead of ``beat_sum``, two stages come first: the terms,
    registered, then the sums of each ``chunk`` of them; the beat's sum is then theirs. With
    ``beat_partials(j)`` instead (a channel's partial sums of the beat, from the beat itself),
    one stage comes first: those partial sums, registered; the beat's sum is theirs."""
    pe = len(results.payload.y)
    advance = Signal()
    # Not `~results.valid | results.ready`: the enables of every stage hang on this net, and
    # on the ECP5's 16x64 the consumer's logic in front of them was the critical path.
    m.d.comb += [advance.eq(results.ready), beats.ready.eq(advance)]
    beat = beats.payload
    # What stage 1 takes: the beat itself, or its registered partial sums.
    valid, last, thresholds = beats.valid, beats.valid & beat.last, beat.thresholds

    def stage(name, values, valid, last, thresholds):
        """``values`` (a list per channel) registered as ``name{j}_{k}``, with the
        beat's flags and, from its last beat, its thresholds."""
        registers = [[Signal(value.shape(), name=f"{name}{j}_{k}")
                      for k, value in enumerate(channel)] for j, channel in enumerate(values)]
        stage_valid, stage_last = Signal(), Signal()
        stage_thresholds = Signal.like(beat.thresholds)
        with m.If(advance):
            m.d.sync += [register.eq(value) for channel, channel_values in
                         zip(registers, values) for register, value in
                         zip(channel, channel_values)]
            m.d.sync += [stage_valid.eq(valid), stage_last.eq(last)]
            with m.If(last):
                m.d.sync += stage_thresholds.eq(thresholds)
        return registers, stage_valid, stage_last, stage_thresholds

    if beat_terms is not None:
        # The products, registered: the beat's inputs reach every channel, and on the ECP5
        # that broadcast was most of the critical path, so it ends at a register after one
        # table. (A copy of the inputs for each channel would be merged back into one
        # register by synthesis.)
        products, valid, last, thresholds = stage(
            "product", [beat_terms(beat.x, beat.w[j]) for j in range(pe)], valid, last,
            thresholds)
        partials, valid, last, thresholds = stage(
            "partial", [[adder_tree(terms[i:i + chunk]) for i in range(0, len(terms), chunk)]
                        for terms in products], valid, last, thresholds)

        def beat_sum(j):
            return adder_tree(partials[j])
    elif beat_partials is not None:
        partials, valid, last, thresholds = stage(
            "partial", [beat_partials(j) for j in range(pe)], valid, last, thresholds)

        def beat_sum(j):
            return adder_tree(partials[j])
    # Stage 1: each channel's sum of the beat.
    beat_sums = [Signal(beat_shape or total_shape, name=f"beat_sum{j}") for j in range(pe)]
    beat_valid, beat_last = Signal(), Signal()
    beat_thresholds = Signal.like(beat.thresholds)
    # Stage 2: the running totals; a closing beat's go on to the outputs.
    running = [Signal(total_shape, name=f"running{j}") for j in range(pe)]
    totals = Signal(data.ArrayLayout(total_shape, pe))
    total_valid = Signal()
    total_thresholds = Signal.like(beat.thresholds)
    with m.If(advance):
        m.d.sync += [
            beat_valid.eq(valid),
            beat_last.eq(last),
            *(value.eq(beat_sum(j)) for j, value in enumerate(beat_sums)),
            total_valid.eq(beat_last),
            total_thresholds.eq(beat_thresholds),
        ]
        with m.If(last):
            m.d.sync += beat_thresholds.eq(thresholds)
        for j, (total_j, value) in enumerate(zip(running, beat_sums)):
            total = total_j + value
            with m.If(beat_last):
                m.d.sync += [totals[j].eq(total), total_j.eq(0)]
            with m.Elif(beat_valid):
                m.d.sync += total_j.eq(total)
        # Stage 3: the outputs.
        m.d.sync += [results.valid.eq(total_valid),
                     getattr(results.payload, totals_field).eq(totals)]
        for j in range(pe):
            m.d.sync += results.payload.y[j].eq(output(totals[j], total_thresholds[j]))
