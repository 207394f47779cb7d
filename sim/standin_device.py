"""A device with the accelerator's host-facing ports, made of memories, for testing the host
link without the accelerator (amaranth.sim, and the Verilog of ``HostLinkSystem`` in
``tests/test_hostlink_cocotb.py``)."""

from amaranth import *
from amaranth.lib import memory, wiring
from amaranth.utils import ceil_log2

from fpganet.hdl.hostport import device_signature, host_addr_width
from fpganet.hdl.linkfifo import check_int
from fpganet.isa import HostSpace

__all__ = ["StandInDevice"]


class StandInDevice(wiring.Component):
    """A device with the accelerator's ports, built from memories, to test the link.

    It keeps what the host writes in one memory per :class:`~fpganet.isa.HostSpace` (``depth``
    words each, the address taken modulo ``depth``) and, on ``start``, runs a fixed job
    described by program word 0 (``[15:0]`` inputs, ``[31:16]`` echoes, ``[47:32]`` weight
    words, ``[63:48]`` parameter words):

    1. it reads ``inputs`` bytes from ``input``; for each of the first ``echoes`` of them,
       ``x``, it sends ``activations[x]`` (the activation memory is a lookup table);
    2. it sends weight words ``0..`` and parameter words ``0..`` (``weight_word_bytes`` and 8
       bytes each, little-endian);
    3. it sends ``cycles`` (4 bytes, little-endian, as STAMP does), lowers ``busy`` and raises
       ``done`` (a level, until the next ``start``).

    ``host.ready`` is low while busy and every other cycle when idle (back-pressure for the
    link to cope with). ``cycles`` counts the cycles since ``start`` while busy.

    Parameters
    ----------
    config : AcceleratorConfig
    addr_width : int, optional
    depth : int
        Words of each memory.
    """

    def __init__(self, config, addr_width=None, *, depth=256):
        check_int("StandInDevice depth", depth, 1, 1 << 16)
        self.config = config
        self.depth = depth
        self.addr_width = host_addr_width(config) if addr_width is None else addr_width
        super().__init__(device_signature(config, self.addr_width))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        widths = {HostSpace.PROGRAM: 64, HostSpace.WEIGHTS: 8 * config.weight_word_bytes,
                  HostSpace.PARAMS: 64, HostSpace.ACTIVATIONS: 8}
        reads = {}
        bits = max(1, ceil_log2(self.depth))
        gap = Signal()
        m.d.sync += gap.eq(~gap)
        m.d.comb += self.host.ready.eq(~self.busy & gap)
        for space, width in widths.items():
            mem = memory.Memory(shape=width, depth=self.depth, init=[])
            m.submodules[f"{space.name.lower()}_memory"] = mem
            write = mem.write_port()
            reads[space] = mem.read_port()
            m.d.comb += [
                write.addr.eq(self.host.payload.addr % self.depth if self.depth & (self.depth - 1)
                              else self.host.payload.addr[:bits]),
                write.data.eq(self.host.payload.data[:width]),
                write.en.eq(self.host.valid & self.host.ready & (self.host.payload.space == space)),
            ]

        control = Signal(64)
        inputs, echoes, weight_words, param_words = (control[16 * i:16 * i + 16] for i in range(4))
        count = Signal(16)
        byte = Signal(range(8))
        stamp = Signal(32)
        m.d.comb += [reads[HostSpace.PROGRAM].addr.eq(0), reads[HostSpace.ACTIVATIONS].en.eq(0)]
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)

        with m.FSM(name="standin_fsm"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(1),
                                 count.eq(0)]
                    m.next = "CONTROL"
            with m.State("CONTROL"):
                m.d.sync += control.eq(reads[HostSpace.PROGRAM].data)
                m.next = "INPUT"
            with m.State("INPUT"):
                m.d.comb += self.input.ready.eq(count < inputs)
                lut = reads[HostSpace.ACTIVATIONS]
                m.d.comb += lut.addr.eq(self.input.payload)
                m.d.comb += lut.en.eq(self.input.valid & self.input.ready)
                with m.If(count == inputs):
                    m.d.sync += [count.eq(0), byte.eq(0)]
                    m.next = "WEIGHT_READ"
                with m.Elif(self.input.valid):
                    with m.If(count < echoes):
                        m.next = "ECHO"
                    with m.Else():
                        m.d.sync += count.eq(count + 1)
            with m.State("ECHO"):
                m.d.comb += [self.output.valid.eq(1),
                             self.output.payload.eq(reads[HostSpace.ACTIVATIONS].data)]
                with m.If(self.output.ready):
                    m.d.sync += count.eq(count + 1)
                    m.next = "INPUT"
            for space, words, next_state in ((HostSpace.WEIGHTS, weight_words, "PARAM_READ"),
                                             (HostSpace.PARAMS, param_words, "STAMP")):
                name = "WEIGHT" if space is HostSpace.WEIGHTS else "PARAM"
                port = reads[space]
                size = widths[space] // 8
                m.d.comb += port.addr.eq(count)
                with m.State(f"{name}_READ"):
                    with m.If(count == words):
                        m.d.sync += [count.eq(0), byte.eq(0)]
                        m.d.sync += stamp.eq(self.cycles)
                        m.next = next_state
                    with m.Else():
                        m.next = f"{name}_SEND"
                with m.State(f"{name}_SEND"):
                    m.d.comb += [self.output.valid.eq(1),
                                 self.output.payload.eq(port.data.word_select(byte, 8))]
                    m.d.comb += port.en.eq(0)
                    with m.If(self.output.ready):
                        with m.If(byte == size - 1):
                            m.d.sync += [byte.eq(0), count.eq(count + 1)]
                            m.next = f"{name}_READ"
                        with m.Else():
                            m.d.sync += byte.eq(byte + 1)
            with m.State("STAMP"):
                m.d.comb += [self.output.valid.eq(1),
                             self.output.payload.eq(stamp.word_select(byte[:2], 8))]
                with m.If(self.output.ready):
                    m.d.sync += byte.eq(byte + 1)
                    with m.If(byte == 3):
                        m.d.sync += [self.busy.eq(0), self.done.eq(1)]
                        m.next = "IDLE"
        return m
