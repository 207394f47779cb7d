"""A binary or low-bit network on one matrix-vector unit: FINN's MLPs and CNNs in logic cells.

:class:`BinaryNetworkEngine` runs a chain of binary or low-bit dense layers and convolutions,
each with the max pool after it (:func:`fpganet.codegen.binary.fold_network`), on one
matrix-vector unit, layer after layer, as FINN's folded MVAUs do, but with one unit shared by
the layers: the XNOR-popcount
:class:`~fpganet.hdl.binary_mvu.BinaryMatrixVectorUnit` for binary layers, the
:class:`~fpganet.hdl.lowbit_mvu.LowBitMatrixVectorUnit` for 2-4-bit ones. Weights and
thresholds are in memories initialized from the folded network (in the bitstream, as FINN's
are); activations are small digits (bits, for the binary unit) in two buffers of ``simd``
digits a word, a map pixel by pixel, each layer reading one and writing the other. A
convolution's windows are read from the stored map in place
(:class:`~fpganet.hdl.window_walk.WindowWalk`), one word a beat, as FINN's sliding-window
generator feeds its MVAU, but without a line buffer: a word is read again for each window
and group that needs it.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .binary_mvu import BinaryMatrixVectorUnit
from .lowbit_mvu import LowBitMatrixVectorUnit
from .window_walk import WindowWalk, walk_layout, walk_params

__all__ = ["BinaryNetworkEngine"]


class BinaryNetworkEngine(wiring.Component):
    """A chain of binary or low-bit dense layers and convolutions, one input at a time.

    Parameters
    ----------
    folded : fpganet.codegen.binary.FoldedNetwork
        The layers' geometry, widths and memory images; its ``unit`` picks the unit.
    weight_buffer : wiring.Component, optional
        Where the weights are read from, with the ports and one-cycle read of
        :class:`fpganet.hdl.memories.WeightBuffer` (``rd_addr``, ``rd_en``, ``rd_data``; its
        words ``folded``'s weight words), written by its owner before the engine runs (the
        iCEBreaker's SPRAMs, which a bitstream does not initialize). Default: a memory
        initialized with the weight words (in the bitstream).

    Members
    -------
    input : In(stream.Signature(simd * input_bits))
        Each input as ``folded.input_words`` words: a vector, element ``i`` of word ``t``
        (``input_bits`` from bit ``i * input_bits``) being input ``t * simd + i``, or a map
        pixel by pixel, each pixel's channels so
        (:func:`~fpganet.codegen.binary.pack_input_words`; padding 0).
    output : Out(stream.Signature(ArrayLayout(count_width, pe)))
        The last layer's totals (unsigned counts, or two's complement sums where
        ``folded.signed_totals``), ``folded.output_groups`` results a vector, channels ``g * pe``
        to ``g * pe + pe - 1`` in result ``g`` (a padded channel's total is to be dropped).

    Timing: an input's words are taken one a cycle; then each layer takes ``results * beats``
    cycles (one beat a cycle: a window's beats for each output pixel, group and pool window),
    the fetch (:attr:`fetch_cycles`) and the unit's latency before the next layer reads what
    it wrote (:meth:`cycles_per_vector`). The next input is taken after the last
    result of the one before leaves the unit. A result is on ``output`` :attr:`output_latency`
    cycles after it leaves the unit (a FIFO of three). Back-pressure: ``output.ready`` low fills
    that FIFO, then stalls the unit and the issue, from a flip-flop (the FIFO's level a cycle
    before); it reaches no logic but the FIFO's read side.
    """

    #: Cycles from a last-layer result leaving the unit to ``output.valid``.
    output_latency = 1

    def __init__(self, folded, weight_buffer=None):
        self.folded = folded
        self.weight_buffer = weight_buffer
        total = (signed if folded.signed_totals else unsigned)(folded.count_width)
        super().__init__({
            "input": In(stream.Signature(folded.simd * folded.input_bits)),
            "output": Out(stream.Signature(data.ArrayLayout(total, folded.pe))),
        })

    #: Cycles from a beat's addresses to its operands at the unit: the memories' read, then
    #: a register (the block RAMs' outputs reach no logic but it).
    fetch_cycles = 2

    def cycles_per_vector(self):
        """Cycles from a vector's first input word to the next vector's, with the input and
        the output never waiting: the words, then per layer its beats, the fetch and the
        unit's latency (the next layer issues in the cycle after its last result)."""
        return self.folded.input_words + sum(self.layer_cycles(layer, self.folded)
                                             for layer in self.folded.layers)

    @classmethod
    def layer_cycles(cls, layer, folded):
        """Cycles from a layer's first beat to the next layer's (a
        :class:`~fpganet.codegen.binary.FoldedLayer` of ``folded``): its beats (a window's for
        each result), the fetch, the unit's latency."""
        return layer.results * layer.beats + cls.fetch_cycles + cls.unit_latency(folded)

    #: A binary unit of at least this many MACs a cycle registers its popcounts of
    #: :attr:`partial_bits` input bits before summing them: at 64 x 64 on the ECP5 the beat's
    #: inputs' route to every PE and a 64-bit popcount were the critical path (70.5 MHz).
    partial_macs = 2048
    partial_bits = 16

    @classmethod
    def unit_partial_bits(cls, folded):
        """The binary unit's ``partial_bits`` for ``folded``: None below :attr:`partial_macs`."""
        wide = folded.unit == "binary" and folded.pe * folded.simd >= cls.partial_macs
        return cls.partial_bits if wide else None

    @classmethod
    def unit_latency(cls, folded):
        """Cycles from a dot product's closing beat to its result in ``folded``'s unit."""
        if folded.unit == "binary":
            return BinaryMatrixVectorUnit.latency_of(cls.unit_partial_bits(folded))
        return LowBitMatrixVectorUnit.latency

    @classmethod
    def make_unit(cls, folded):
        """The matrix-vector unit of ``folded``'s ``unit``."""
        if folded.unit == "binary":
            return BinaryMatrixVectorUnit(folded.pe, folded.simd, folded.count_width,
                                          cls.unit_partial_bits(folded))
        return LowBitMatrixVectorUnit(folded.pe, folded.simd, folded.weight_bits,
                                      folded.input_bits, folded.count_width, folded.levels)

    def elaborate(self, platform):
        m = Module()
        folded = self.folded
        pe, simd, width = folded.pe, folded.simd, folded.count_width
        digit_bits = folded.input_bits
        weight_word, threshold_word, activation_word = folded.word_bits
        m.submodules.unit = unit = self.make_unit(folded)
        layers = folded.layers
        layer_count = len(layers)

        if self.weight_buffer is None:
            m.submodules.weights = weights = Memory(
                shape=weight_word, depth=len(folded.weight_words), init=folded.weight_words)
        else:
            m.submodules.weights = weight_read = _BufferReadPort(self.weight_buffer)
        m.submodules.thresholds = thresholds = Memory(
            shape=threshold_word, depth=len(folded.threshold_words), init=folded.threshold_words)
        buffers = []
        for index in range(2):
            m.submodules[f"buffer{index}"] = buffer = Memory(
                shape=activation_word, depth=folded.buffer_words, init=[])
            buffers.append(buffer)
        if self.weight_buffer is None:
            weight_read, threshold_read = weights.read_port(), thresholds.read_port()
        else:
            threshold_read = thresholds.read_port()
        buffer_reads = [buffer.read_port() for buffer in buffers]
        buffer_writes = [buffer.write_port() for buffer in buffers]

        layer = Signal(range(layer_count))
        parity = Signal()           # the buffer the layer reads: layer % 2
        last_layer = Signal()
        m.d.comb += last_layer.eq(layer == layer_count - 1)

        # Each layer's walk parameters, and the next layer's: loaded into the walk's registers
        # as a layer starts, so that no compare waits on a table of `layer` (at 16 x 64 on the
        # ECP5 such a lookup was the critical path).
        layout = walk_layout(folded)
        params = [layout.const(walk_params(folded_layer)) for folded_layer in layers]
        next_params = Array(Const.cast(value) for value in params[1:] + params[:1])
        m.submodules.walk = walk = WindowWalk(layout, folded.buffer_words,
                                              len(folded.weight_words),
                                              len(folded.threshold_words))
        p = walk.params

        # Issue: a beat's addresses (stage A, the walk's registers), its memory words (stage
        # B), registered at the unit (stage C).
        issuing, issued = Signal(), Signal()
        b_valid, b_last, b_parity = Signal(), Signal(), Signal()
        operands = Signal.like(unit.beats.payload)
        c_valid = Signal()
        advance = Signal()
        m.d.comb += [
            advance.eq(~c_valid | unit.beats.ready),
            weight_read.addr.eq(walk.weight_addr), weight_read.en.eq(advance),
            threshold_read.addr.eq(walk.threshold_addr), threshold_read.en.eq(advance),
            *(port.addr.eq(walk.act_addr) for port in buffer_reads),
            *(port.en.eq(advance) for port in buffer_reads),
            unit.beats.valid.eq(c_valid),
            unit.beats.payload.eq(operands),
            walk.step.eq(advance & issuing),
        ]
        with m.If(advance):
            m.d.sync += [
                b_valid.eq(issuing), b_last.eq(walk.closing), b_parity.eq(parity),
                c_valid.eq(b_valid),
                operands.x.eq(Mux(b_parity, buffer_reads[1].data, buffer_reads[0].data)),
                operands.w.eq(weight_read.data),
                operands.thresholds.eq(threshold_read.data),
                operands.last.eq(b_last),
            ]
            with m.If(issuing & walk.final):
                m.d.sync += issued.eq(1)

        # Results: the last layer's totals out; the others' digits into the other buffer, the
        # greatest of a pool's windows for each group, a group's pe digits at a time into one
        # word, each output pixel's channels from a new word.
        result_sub = Signal.like(p.subs_last)
        result_group = Signal.like(p.group_last)
        result_pixel = Signal.like(p.pixels_last)
        slot = Signal(range(simd // pe))
        word, merged = Signal(activation_word), Signal(activation_word)
        y = unit.results.payload.y
        digits = [Cat(y[j], C(0, digit_bits))[:digit_bits] for j in range(pe)]
        pooled = Signal(pe * digit_bits)     # the greatest digits of the pool's windows so far
        before = [pooled.word_select(j, digit_bits) for j in range(pe)]
        greatest = Cat(Mux((result_sub != 0) & (b > d), b, d) for b, d in zip(before, digits))
        word_addr = Signal(range(folded.buffer_words))
        take = Signal()
        # The last layer's counts leave through a FIFO of three. The unit moves while a flip-flop
        # says the FIFO held at most one a cycle before: it holds at most two now, so the one
        # result the unit may give now fits. Neither the consumer's ready nor the layer control
        # reaches the unit's enables; a consumer always ready leaves it at one and never stalls.
        m.submodules.out_fifo = out_fifo = SyncFIFO(width=width * pe, depth=3)
        room = Signal(init=1)
        m.d.sync += room.eq(out_fifo.level <= 1)
        m.d.comb += [
            out_fifo.w_en.eq(take & last_layer),
            out_fifo.w_data.eq(getattr(unit.results.payload, unit.totals_field)),
            self.output.valid.eq(out_fifo.r_rdy),
            self.output.payload.eq(out_fifo.r_data),
            out_fifo.r_en.eq(self.output.ready),
            unit.results.ready.eq(room),
            take.eq(unit.results.valid & unit.results.ready),
            merged.eq(word),
            merged.word_select(slot, pe * digit_bits).eq(greatest),
        ]
        group_done, pixel_done, layer_done = Signal(), Signal(), Signal()
        m.d.comb += [group_done.eq(take & (result_sub == p.subs_last)),
                     pixel_done.eq(group_done & (result_group == p.group_last)),
                     layer_done.eq(pixel_done & (result_pixel == p.pixels_last))]
        with m.If(take):
            m.d.sync += [result_sub.eq(result_sub + 1), pooled.eq(greatest)]
        with m.If(group_done):
            m.d.sync += [result_sub.eq(0), result_group.eq(result_group + 1),
                         slot.eq(slot + 1), word.eq(merged)]
            with m.If(~last_layer & ((slot == simd // pe - 1) | pixel_done)):
                m.d.sync += [slot.eq(0), word.eq(0), word_addr.eq(word_addr + 1)]
                for index, port in enumerate(buffer_writes):
                    # Layer l writes the buffer that layer l + 1 reads.
                    m.d.comb += port.en.eq(parity != index)
        with m.If(pixel_done):
            m.d.sync += [result_group.eq(0), result_pixel.eq(result_pixel + 1)]
        load_addr = Signal(range(folded.input_words))

        with m.FSM():
            with m.State("LOAD"):
                m.d.comb += [self.input.ready.eq(1), walk.load.eq(params[0])]
                with m.If(self.input.valid):
                    m.d.sync += load_addr.eq(load_addr + 1)
                    with m.If(load_addr == folded.input_words - 1):
                        m.d.sync += [load_addr.eq(0), layer.eq(0), parity.eq(0)]
                        m.d.comb += walk.start.eq(1)
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [issuing.eq(~issued), walk.load.eq(next_params[layer])]
                with m.If(layer_done):
                    m.d.sync += [issued.eq(0), result_sub.eq(0), result_group.eq(0),
                                 result_pixel.eq(0), slot.eq(0), word.eq(0), word_addr.eq(0)]
                    with m.If(last_layer):
                        m.next = "LOAD"
                    with m.Else():
                        m.d.comb += walk.start.eq(1)
                        m.d.sync += [layer.eq(layer + 1), parity.eq(~parity)]
        # Buffer 0's write port takes the input words while loading, results otherwise.
        loading = Signal()
        m.d.comb += loading.eq(self.input.ready & self.input.valid)
        for port in buffer_writes:
            m.d.comb += [port.addr.eq(word_addr), port.data.eq(merged)]
        with m.If(loading):
            m.d.comb += [buffer_writes[0].en.eq(1), buffer_writes[0].addr.eq(load_addr),
                         buffer_writes[0].data.eq(self.input.payload)]
        return m


class _BufferReadPort(Elaboratable):
    """A weight buffer's read side with a memory read port's names (``addr``, ``en``,
    ``data``): every copy of its read enable driven from ``en``."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.addr, self.en = Signal.like(buffer.rd_addr), Signal()
        self.data = buffer.rd_data

    def elaborate(self, platform):
        m = Module()
        m.submodules.buffer = self.buffer
        m.d.comb += [self.buffer.rd_addr.eq(self.addr),
                     self.buffer.rd_en.eq(self.en.replicate(len(self.buffer.rd_en)))]
        return m
