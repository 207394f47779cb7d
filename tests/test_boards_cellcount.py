"""The iCE40 logic-cell count (fpganet.boards.cellcount) on designs whose packing is known.

A flip-flop shares its logic cell with the LUT4 that feeds it only when that LUT feeds
nothing else; every other flip-flop (fed by a flip-flop, a port, or a LUT with other loads)
is "lonely" and takes a cell of its own. The designs below have exactly known counts of
each kind after ``synth_ice40``.
"""

import pytest
from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fpganet.boards.cellcount import ice40_cells, main
from fpganet.config import AcceleratorConfig
from fpganet.hdl.memories import IDLE_WRITTEN


class _Chain(wiring.Component):
    """``width`` bits through two flip-flop stages: the first fed by a port, the second by
    the first: all lonely, no LUT."""

    def __init__(self, width):
        self.width = width
        super().__init__({"i": In(width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        stage = Signal(self.width)
        m.d.sync += [stage.eq(self.i), self.o.eq(stage)]
        return m


class _Xor(wiring.Component):
    """Three inputs XOR-ed into a flip-flop per bit: one LUT4 each, packed with its flip-flop
    (``shared=False``), or also driving an output port, which leaves the flip-flop lonely."""

    def __init__(self, width, *, shared):
        self.width, self.shared = width, shared
        super().__init__({"a": In(width), "b": In(width), "c": In(width), "o": Out(width),
                          **({"x": Out(width)} if shared else {})})

    def elaborate(self, platform):
        m = Module()
        value = self.a ^ self.b ^ self.c
        m.d.sync += self.o.eq(value)
        if self.shared:
            m.d.comb += self.x.eq(value)
        return m


def test_flip_flops_fed_by_flip_flops_are_lonely():
    counts = ice40_cells(_Chain(5))
    assert counts["lut4"] == 0 and counts["ff"] == 10 and counts["lonely_ff"] == 10
    assert counts["cells"] == 10


@pytest.mark.parametrize("shared, lonely", [(False, 0), (True, 6)])
def test_a_lut_with_one_load_packs_its_flip_flop(shared, lonely):
    counts = ice40_cells(_Xor(6, shared=shared))
    assert counts["lut4"] == 6 and counts["ff"] == 6 and counts["lonely_ff"] == lonely
    assert counts["cells"] == 6 + lonely


class _IdleWritten(wiring.Component):
    """Memories named as the accelerator's program and parameters, written and read on the
    same clock edge (as without the pipeline registers)."""

    def __init__(self):
        super().__init__({"wa": In(8), "wd": In(53), "we": In(1), "ra": In(8), "re": In(1),
                          "program_data": Out(53), "params_data": Out(53)})

    def elaborate(self, platform):
        m = Module()
        for name in IDLE_WRITTEN:
            m.submodules[name] = memory = Memory(shape=53, depth=256, init=[])
            write, read = memory.write_port(), memory.read_port()
            m.d.comb += [write.addr.eq(self.wa), write.data.eq(self.wd), write.en.eq(self.we),
                         read.addr.eq(self.ra), read.en.eq(self.re),
                         getattr(self, f"{name}_data").eq(read.data)]
        return m


def test_idle_written_memories_need_no_read_during_write_logic():
    """The builds' Yosys commands (memories.yosys_idle_written) leave the program and the
    parameters in block RAM alone; without them Yosys wraps each in a register of the written
    word, an address compare and a multiplexer per bit."""
    told = ice40_cells(_IdleWritten(), config=AcceleratorConfig())
    untold = ice40_cells(_IdleWritten())
    assert told["ram"] == untold["ram"] == 8
    assert told["ff"] == 0 and told["lut4"] <= 2
    assert untold["ff"] > 100 and untold["lut4"] > 100


@pytest.mark.parametrize("argv, message", [
    (["--rows", "3"], "the configuration flags need --accelerator"),
    (["--accelerator", "--rows", "x"], "argument --rows: 'x' is not an integer"),
    (["--accelerator", "--weight-buffer-bytes", "65536"], "does not map onto the UP5K's 4 SPRAMs"),
    (["--accelerator", "--acc-width", "3"], "acc_width 3 cannot hold"),
    (["--accelerator", "--clock-mhz", "20", "--clock-hz", "3"], "give either --clock-hz or --clock-mhz"),
    (["--accelerator", "--requant-mode", "tflite", "--requant-mult-bits", "15"],
     "use --requant-mode fpganet"),
])
def test_bad_input_is_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("cellcount: error: ") and message in err
