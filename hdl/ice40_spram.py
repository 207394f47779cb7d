"""The weight buffer in the iCE40 UltraPlus single-port RAMs (SB_SPRAM256KA).

The UP5K has four 16K x 16-bit SPRAMs (128 KiB) next to only 30 block RAMs
(15 KiB): LeNet-5's ~62 KB of weights fit only there. An SPRAM has one address
for reads and writes; the accelerator writes weights only while idle and reads
them only while running, so one port multiplexed between the two loses nothing.

Yosys's ``synth_ice40`` infers SPRAM only from single-port memories with its
``-spram`` option and silently falls back to block RAM otherwise; the cells are
instantiated here so that a design that cannot use them fails to build instead.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fpganet.config import AcceleratorConfig

from .registers import update


__all__ = ["SPRAMWeightBuffer", "spram_mapping_problem", "SPRAM_WORDS", "SPRAM_BITS", "SPRAM_COUNT"]

#: Words of one SB_SPRAM256KA.
SPRAM_WORDS = 16384
#: Bits per word of one SB_SPRAM256KA.
SPRAM_BITS = 16
#: SB_SPRAM256KA cells on an iCE40UP5K.
SPRAM_COUNT = 4


def _spram_lanes(config):
    return -(-8 * config.weight_word_bytes // SPRAM_BITS)


def spram_mapping_problem(config):
    """Why ``config``'s weight buffer does not map onto the UP5K's SPRAMs, or None."""
    width, words, lanes = 8 * config.weight_word_bytes, config.weight_buffer_words, _spram_lanes(config)
    if words % SPRAM_WORDS == 0 and 1 <= words // SPRAM_WORDS and lanes * (words // SPRAM_WORDS) <= SPRAM_COUNT:
        return None
    if lanes > SPRAM_COUNT:
        need = (f"at most {SPRAM_COUNT * SPRAM_BITS // 8} bytes a weight word (one a row, two "
                f"with pair_products), not {config.weight_word_bytes}")
    else:
        need = (f"weight_buffer_bytes a multiple of {SPRAM_WORDS * width // 8} and at most "
                f"{SPRAM_COUNT // lanes * SPRAM_WORDS * width // 8}")
    return (f"a weight buffer of {words} words of {width} bits (weight_buffer_bytes "
            f"{config.weight_buffer_bytes}, rows {config.rows}) does not map onto the UP5K's "
            f"{SPRAM_COUNT} SPRAMs of {SPRAM_WORDS} x {SPRAM_BITS} bits: it needs {need}")


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
                m.submodules[f"spram{row}_{lane}"] = Instance(
                    "SB_SPRAM256KA",
                    i_ADDRESS=address[:low],
                    i_DATAIN=padded[lane * SPRAM_BITS:(lane + 1) * SPRAM_BITS],
                    i_MASKWREN=Const(0b1111, 4),
                    i_WREN=self.wr_en,
                    i_CHIPSELECT=selected & (rd_en | self.wr_en),
                    i_CLOCK=ClockSignal(),
                    i_STANDBY=Const(0),
                    i_SLEEP=Const(0),
                    i_POWEROFF=Const(1),
                    o_DATAOUT=dataout,
                )
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
