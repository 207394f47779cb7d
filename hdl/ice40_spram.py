"""The weight and activation buffers in the iCE40 UltraPlus single-port RAMs (SB_SPRAM256KA).

The UP5K has four 16K x 16-bit SPRAMs (128 KiB) next to only 30 block RAMs
(15 KiB): LeNet-5's ~62 KB of weights fit only there. An SPRAM has one address
for reads and writes; the accelerator writes weights only while idle and reads
them only while running, so one port multiplexed between the two loses nothing.
The activation banks are read and written while the engine runs: in SPRAM
(:class:`SPRAMActivationBuffer`, ``config.single_port_activations``) each write takes a
cycle of its own, the engine held (:mod:`fpganet.hdl.engine_hold`). MLPerf Tiny's ResNet-8
needs 55 KB of activations, which only two SPRAMs hold.

Yosys's ``synth_ice40`` infers SPRAM only from single-port memories with its
``-spram`` option and silently falls back to block RAM otherwise; the cells are
instantiated here so that a design that cannot use them fails to build instead.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .memories import ActivationBuffer, held_read
from .registers import update


__all__ = ["SPRAMWeightBuffer", "SPRAMActivationBuffer", "spram_mapping_problem", "SPRAM_WORDS", "SPRAM_BITS", "SPRAM_COUNT"]

#: Words of one SB_SPRAM256KA.
SPRAM_WORDS = 16384
#: Bits per word of one SB_SPRAM256KA.
SPRAM_BITS = 16
#: SB_SPRAM256KA cells on an iCE40UP5K.
SPRAM_COUNT = 4


def _spram_lanes(config):
    return -(-8 * config.weight_word_bytes // SPRAM_BITS)


#: Bytes of one activation bank in an SPRAM (both bytes of each word).
SPRAM_BANK_BYTES = SPRAM_WORDS * SPRAM_BITS // 8


def activation_sprams(config):
    """SPRAMs of ``config``'s activation banks: one a bank with ``single_port_activations``,
    else none (block RAM)."""
    return config.act_banks if config.single_port_activations else 0


def spram_mapping_problem(config):
    """Why ``config``'s weight buffer, and with ``single_port_activations`` its activation
    banks, do not map onto the UP5K's SPRAMs, or None."""
    width, words, lanes = 8 * config.weight_word_bytes, config.weight_buffer_words, _spram_lanes(config)
    spare = SPRAM_COUNT - activation_sprams(config)
    if spare < 1:
        return (f"{config.act_banks} activation banks (act_buffer_bytes {config.act_buffer_bytes}) "
                f"take an SPRAM each, and the UP5K's {SPRAM_COUNT} must also hold the weights")
    if config.single_port_activations and config.act_bank_depth > SPRAM_BANK_BYTES:
        return (f"activation banks of {config.act_bank_depth} bytes (act_buffer_bytes "
                f"{config.act_buffer_bytes} in {config.act_banks}) do not map onto the UP5K's "
                f"SPRAMs: one holds {SPRAM_BANK_BYTES} bytes a bank")
    if words % SPRAM_WORDS == 0 and 1 <= words // SPRAM_WORDS and lanes * (words // SPRAM_WORDS) <= spare:
        return None
    beside = (f" beside the {activation_sprams(config)} of the activation banks"
              if config.single_port_activations else "")
    if lanes > spare:
        need = (f"at most {spare * SPRAM_BITS // 8} bytes a weight word (one a row, two "
                f"with pair_products){beside}, not {config.weight_word_bytes}")
    else:
        need = (f"weight_buffer_bytes a multiple of {SPRAM_WORDS * width // 8} and at most "
                f"{spare // lanes * SPRAM_WORDS * width // 8}{beside}")
    return (f"a weight buffer of {words} words of {width} bits (weight_buffer_bytes "
            f"{config.weight_buffer_bytes}, rows {config.rows}) does not map onto the UP5K's "
            f"{SPRAM_COUNT} SPRAMs of {SPRAM_WORDS} x {SPRAM_BITS} bits: it needs {need}")


def _spram(m, name, *, address, data, mask, write, select, dataout):
    m.submodules[name] = Instance(
        "SB_SPRAM256KA",
        i_ADDRESS=address, i_DATAIN=data, i_MASKWREN=mask, i_WREN=write,
        i_CHIPSELECT=select, i_CLOCK=ClockSignal(),
        i_STANDBY=Const(0), i_SLEEP=Const(0), i_POWEROFF=Const(1),
        o_DATAOUT=dataout,
    )


class SPRAMWeightBuffer(wiring.Component):
    """:class:`fpganet.hdl.memories.WeightBuffer` on SB_SPRAM256KA cells.

    Same members and timing as :class:`~fpganet.hdl.memories.WeightBuffer` (the cells and
    the register take the first copy of ``rd_en``):
    ``rd_data`` one cycle after ``rd_en`` (two with ``config.registered_bram_outputs``: a register
    behind the cells' multiplexer, advancing with ``rd_en``), held while ``rd_en`` is low,
    undefined after a write until the next read; a write and a read in the same cycle are
    not allowed (the write wins).

    Parameters
    ----------
    config : AcceleratorConfig
        A word of ``8 * rows`` bits spans ``ceil(rows / 2)`` SPRAMs side by side;
        ``weight_buffer_words`` must be a multiple of 16,384, and all the cells
        at most the UP5K's four.

    Raises
    ------
    ValueError
        When the buffer does not map onto the SPRAMs.
    """

    #: The word is in the SPRAM at the end of the write's cycle.
    write_latency = 0

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        problem = spram_mapping_problem(config)
        if problem:
            raise ValueError(problem)
        self.lanes = _spram_lanes(config)                                # cells side by side
        self.depth_cells = config.weight_buffer_words // SPRAM_WORDS     # ...and one above the other
        width = 8 * config.weight_word_bytes
        self.config = config
        aw = config.weight_addr_width
        super().__init__({
            "rd_addr": In(aw), "rd_en": In(config.weight_blocks), "rd_data": Out(width),
            "wr_addr": In(aw), "wr_data": In(width), "wr_en": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        width = 8 * self.config.weight_word_bytes
        rd_en = self.rd_en[0]
        low = SPRAM_WORDS.bit_length() - 1
        address = Mux(self.wr_en, self.wr_addr, self.rd_addr)
        padded = Cat(self.wr_data, Const(0, self.lanes * SPRAM_BITS - width))
        # Which row of cells the last read went to: the output multiplexer follows it
        # and holds, like the read data, while no read is enabled.
        read_row = Signal(range(max(2, self.depth_cells)))
        if self.depth_cells > 1:
            with m.If(rd_en & ~self.wr_en):
                m.d.sync += read_row.eq(self.rd_addr[low:])
        rows = []
        for row in range(self.depth_cells):
            selected = (address[low:] == row) if self.depth_cells > 1 else Const(1)
            outputs = []
            for lane in range(self.lanes):
                dataout = Signal(SPRAM_BITS, name=f"spram{row}_{lane}_data")
                _spram(m, f"spram{row}_{lane}", address=address[:low],
                       data=padded[lane * SPRAM_BITS:(lane + 1) * SPRAM_BITS],
                       mask=Const(0b1111, 4), write=self.wr_en,
                       select=selected & (rd_en | self.wr_en), dataout=dataout)
                outputs.append(dataout)
            rows.append(Cat(*outputs)[:width])
        registered = self.config.weight_read_latency == 2
        selected = Signal(width, name="selected_word") if registered else self.rd_data
        if self.depth_cells > 1:
            with m.Switch(read_row):
                for row, word in enumerate(rows):
                    with m.Case(row):
                        m.d.comb += selected.eq(word)
        else:
            m.d.comb += selected.eq(rows[0])
        if registered:
            update(m, self.rd_data, selected, enable=rd_en)
        return m


class SPRAMActivationBuffer(ActivationBuffer):
    """:class:`~fpganet.hdl.memories.SinglePortActivationBuffer` on SB_SPRAM256KA cells, one a
    bank (``config.single_port_activations``).

    Same members and timing. Byte ``w`` of a bank is byte ``w % 2`` of the SPRAM's word
    ``w // 2`` (a byte write masks the other's nibbles), so a bank holds up to
    :data:`SPRAM_BANK_BYTES`. A write wins over a read of its bank; the SPRAM's output is
    undefined after it, and ``rd_data`` is the last read's byte, held
    (:func:`~fpganet.hdl.memories.held_read`). An SPRAM starts empty: no ``init``.
    """

    def __init__(self, config, init=None):
        if init:
            raise ValueError("an SPRAM has no initial contents: init must be empty")
        super().__init__(config)
        if not config.single_port_activations:
            raise ValueError("SPRAM activation banks are single-port: the configuration needs "
                             "single_port_activations")
        problem = spram_mapping_problem(config)
        if problem:
            raise ValueError(problem)

    def elaborate(self, platform):
        m = Module()
        config = self.config
        low = SPRAM_WORDS.bit_length() - 1
        for b in range(config.act_banks):
            write, read = self.wr_en[b], self.rd_en & ~self.wr_en[b]
            address = Mux(write, self.wr_addr[b], self.rd_addr[b])
            dataout = Signal(SPRAM_BITS, name=f"bank{b}_word")
            _spram(m, f"bank{b}", address=address[1:][:low], data=self.wr_data[b].replicate(2),
                   mask=Mux(self.wr_addr[b][0], 0b1100, 0b0011), write=write,
                   select=write | read, dataout=dataout)
            high = Signal(name=f"bank{b}_high")
            update(m, high, self.rd_addr[b][0], enable=read)
            byte = Mux(high, dataout[8:], dataout[:8])
            m.d.comb += self.rd_data[b].eq(held_read(m, byte, read=read, name=f"bank{b}"))
        return m
