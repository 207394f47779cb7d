"""The binary or low-bit network engine as a host-link device: the accelerator's ports
(:func:`~fpganet.hdl.hostport.device_signature`), so that the host link and its driver
(:func:`fpganet.link.runner.run_images`) run it as they run the int8 accelerator.

Each START runs one input: a vector's elements arrive packed in bytes (``input_bits`` each,
element ``i`` from bit ``i * input_bits`` of the vector, byte ``b`` holding bits ``8 * b`` to
``8 * b + 7``), a map's as the engine's words, whole, pixel by pixel (each word's bytes
least significant first; :func:`~fpganet.codegen.binary.pack_input_words`); the last layer's totals leave as two bytes each, little-endian (two's
complement for the low-bit unit's sums), ``pe`` a result and ``output_groups`` results, then
the 4-byte cycle stamp (cycles since START), as the accelerator's ``OUTPUT`` and ``STAMP``
send them. The weights and thresholds are in the bitstream, so host writes are taken and
dropped.
"""

import math

from amaranth import *
from amaranth.lib import wiring

from fpganet.isa import HostSpace

from .binary_engine import BinaryNetworkEngine
from .hostport import device_signature

__all__ = ["BinaryDevice", "COUNT_BYTES", "STAMP_BYTES"]

#: Bytes of one count in the output stream.
COUNT_BYTES = 2
#: Bytes of the cycle stamp after a vector's counts.
STAMP_BYTES = 4


class BinaryDevice(wiring.Component):
    """A :class:`~fpganet.hdl.binary_engine.BinaryNetworkEngine` behind the device ports.

    Parameters
    ----------
    folded : fpganet.codegen.binary.FoldedNetwork
        A word of whole bytes (``simd * input_bits`` a multiple of 8), totals of at most 16
        bits.
    config : AcceleratorConfig
        The host link's configuration (the widths of the host write port).
    addr_width : int, optional
    weights : callable, optional
        ``weights(config)``: a weight buffer (:class:`~fpganet.hdl.memories.WeightBuffer` or
        the iCE40's :class:`~fpganet.hdl.ice40_spram.SPRAMWeightBuffer`) that the host fills
        with ``folded``'s weight words (WRITEs to space ``WEIGHTS``, a word each) before the
        first START; its words must be the engine's (``8 * config.weight_word_bytes`` bits).
        Default: the weights are in the bitstream and host writes are dropped.

    Timing: ``busy`` from the cycle after ``start`` until the stamp's last byte is taken;
    ``done`` then stays high until the next ``start``. The stamp counts the cycles from
    ``start`` to the last count byte (:meth:`stamp_cycles` when neither side waits).
    """

    def __init__(self, folded, config, addr_width=None, weights=None):
        self.check_fold(folded, config if weights is not None else None)
        self.folded, self.config, self.weights = folded, config, weights
        #: PING's ``design`` (:attr:`~fpganet.codegen.binary.FoldedNetwork.design_id`).
        self.design_id = folded.design_id
        self.input_bytes = folded.input_bytes
        self.output_bytes = folded.output_groups * folded.pe * COUNT_BYTES
        super().__init__(device_signature(config, addr_width))

    @staticmethod
    def check_fold(folded, config=None):
        """Raise ValueError if the device cannot carry ``folded`` (with ``config``: its weights
        in that configuration's weight buffer, loaded by the host)."""
        if config is not None:
            word = 8 * config.weight_word_bytes
            if folded.word_bits[0] != word:
                raise ValueError(f"a weight word of {folded.pe}x{folded.simd} is "
                                 f"{folded.word_bits[0]} bits; the weight buffer's are {word}: "
                                 f"pe * simd * weight_bits must be {word}")
            if len(folded.weight_words) > config.weight_buffer_words:
                raise ValueError(f"{len(folded.weight_words)} weight words do not fit the "
                                 f"weight buffer's {config.weight_buffer_words}")
            if config.weight_read_latency != 1:
                raise ValueError("the engine reads a weight buffer of one cycle's latency")
        if folded.simd * folded.input_bits % 8:
            raise ValueError(f"simd must be a multiple of {8 // math.gcd(8, folded.input_bits)} "
                             f"for a byte input of {folded.input_bits}-bit elements, not "
                             f"{folded.simd}")
        if folded.count_width > 8 * COUNT_BYTES:
            raise ValueError(f"totals of {folded.count_width} bits do not fit {COUNT_BYTES} "
                             f"bytes")

    def stamp_cycles(self):
        """The stamp when the input bytes wait for the device and the output is always taken:
        the cycle of the last count byte, counting ``start``'s as 0. The bytes come one a
        cycle, the last one's word starting the engine; each layer but the last takes
        :meth:`~fpganet.hdl.binary_engine.BinaryNetworkEngine.layer_cycles`; the
        last layer's results are taken one at a time, each after the one before has left as
        ``2 * pe`` bytes, so they come ``max(beats, 2 * pe + 1)`` cycles apart."""
        *hidden, last = self.folded.layers
        result_bytes = self.folded.pe * COUNT_BYTES
        first_result = (self.input_bytes + 1
                        + sum(BinaryNetworkEngine.layer_cycles(layer, self.folded)
                              for layer in hidden)
                        # group 0's closing beat is issued ``beats - 1`` cycles in, fetched,
                        # then through the unit
                        + last.beats - 1 + BinaryNetworkEngine.fetch_cycles
                        + BinaryNetworkEngine.unit_latency(self.folded)
                        + BinaryNetworkEngine.output_latency)
        last_result = first_result + (last.groups - 1) * max(last.beats, result_bytes + 1)
        return last_result + result_bytes

    def elaborate(self, platform):
        m = Module()
        folded = self.folded
        buffer = None if self.weights is None else self.weights(self.config)
        m.submodules.engine = engine = BinaryNetworkEngine(folded, buffer)
        word_bits = folded.simd * folded.input_bits
        word_bytes = word_bits // 8
        busy, done = Signal(), Signal()
        cycles = Signal(32)
        m.d.comb += [self.host.ready.eq(1), self.busy.eq(busy), self.done.eq(done),
                     self.cycles.eq(cycles)]
        if buffer is not None:
            write = self.host.payload
            m.d.comb += [buffer.wr_addr.eq(write.addr), buffer.wr_data.eq(write.data),
                         buffer.wr_en.eq(self.host.valid & (write.space == HostSpace.WEIGHTS))]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        # Bytes into words: byte b of the vector goes to bits 8 * (b % word_bytes) of word
        # b // word_bytes; a word goes to the engine with its last byte or the vector's.
        byte_index = Signal(range(self.input_bytes + 1))
        slot = Signal(range(word_bytes))
        word = Signal(word_bits)
        merged = Signal(word_bits)
        word_full = Signal()
        m.d.comb += [
            merged.eq(word),
            merged.word_select(slot, 8).eq(self.input.payload),
            word_full.eq((slot == word_bytes - 1) | (byte_index == self.input_bytes - 1)),
            engine.input.payload.eq(merged),
        ]
        # Totals out, two bytes each (sign-extended where signed), then the stamp. The bytes
        # are picked from the held result by a counter, not shifted out: the link's ready
        # then reaches the counters alone, not every flip-flop of a result (1,024 of them at
        # 64 channels, across the chip: the critical path of a 64 x 64 engine on the ECP5).
        result = Signal(folded.pe * 8 * COUNT_BYTES)
        pad = 8 * COUNT_BYTES - folded.count_width
        result_bytes = Signal(range(folded.pe * COUNT_BYTES + 1))
        byte_at = Signal(range(folded.pe * COUNT_BYTES))
        results_left = Signal(range(folded.output_groups + 1))
        stamp = Signal(32)
        stamp_bytes = Signal(range(STAMP_BYTES + 1))

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [busy.eq(1), done.eq(0), cycles.eq(0), byte_index.eq(0),
                                 slot.eq(0), word.eq(0), results_left.eq(folded.output_groups)]
                    m.next = "INPUT"
            with m.State("INPUT"):
                # A byte is taken when its word can go on: the engine takes a word a cycle
                # while it loads.
                m.d.comb += [self.input.ready.eq(~word_full | engine.input.ready),
                             engine.input.valid.eq(self.input.valid & word_full)]
                with m.If(self.input.valid & self.input.ready):
                    m.d.sync += [byte_index.eq(byte_index + 1), slot.eq(slot + 1),
                                 word.eq(merged)]
                    with m.If(word_full):
                        m.d.sync += [slot.eq(0), word.eq(0)]
                    with m.If(byte_index == self.input_bytes - 1):
                        m.next = "OUTPUT"
            with m.State("OUTPUT"):
                with m.If(result_bytes == 0):
                    m.d.comb += engine.output.ready.eq(1)
                    with m.If(engine.output.valid):
                        m.d.sync += [
                            result.eq(Cat(
                                Cat(total, (total[-1] if folded.signed_totals else C(0, 1))
                                    .replicate(pad))
                                for total in engine.output.payload)),
                            result_bytes.eq(folded.pe * COUNT_BYTES),
                            byte_at.eq(0),
                            results_left.eq(results_left - 1),
                        ]
                with m.Else():
                    m.d.comb += [self.output.valid.eq(1),
                                 self.output.payload.eq(result.word_select(byte_at, 8))]
                    with m.If(self.output.ready):
                        m.d.sync += [byte_at.eq(byte_at + 1), result_bytes.eq(result_bytes - 1)]
                        with m.If((result_bytes == 1) & (results_left == 0)):
                            m.d.sync += [stamp.eq(cycles + 1), stamp_bytes.eq(STAMP_BYTES)]
                            m.next = "STAMP"
            with m.State("STAMP"):
                m.d.comb += [self.output.valid.eq(1), self.output.payload.eq(stamp[:8])]
                with m.If(self.output.ready):
                    m.d.sync += [stamp.eq(stamp >> 8), stamp_bytes.eq(stamp_bytes - 1)]
                    with m.If(stamp_bytes == 1):
                        m.d.sync += [busy.eq(0), done.eq(1)]
                        m.next = "IDLE"
        return m
