"""cocotb testbench of a single-port activation buffer
(:class:`fpganet.hdl.memories.SinglePortActivationBuffer`, or the synthesized
:class:`fpganet.hdl.ice40_spram.SPRAMActivationBuffer`) against a Python model.

The contract (``config.single_port_activations``): each bank reads or writes in a cycle; a
write wins over its bank's read, which is then lost; ``rd_data`` of a bank is the byte of its
last read, one cycle after it, held while ``rd_en`` is low and through the bank's writes (the
SPRAM's own output is undefined after a write). The testbench fills every bank, then runs
random cycles in which each bank is written, read or idle, at random addresses across its
whole depth, both bytes of an SPRAM word, and checks every bank's ``rd_data`` every cycle.

Parameters from ``FPGANET_TB`` (JSON): ``banks``, ``depth`` (bytes a bank), ``word``
(address bits a bank), ``cycles``, ``seed``.
"""

import json
import os
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from fpganet.sim.tb_weight_buffer import reset_memory


def _pack(values, width):
    return sum(value << (i * width) for i, value in enumerate(values))


class ActivationBufferTB:
    def __init__(self, dut, banks, depth, word, seed):
        self.dut, self.banks, self.depth, self.word = dut, banks, depth, word
        self.random = random.Random(seed)
        self.contents = [[None] * depth for _ in range(banks)]
        self.expected = [None] * banks        # each bank's rd_data (None: not read yet)


    async def fill(self):
        """Every byte of every bank, all banks a cycle (no reads)."""
        dut = self.dut
        for address in range(self.depth):
            values = [self.random.getrandbits(8) for _ in range(self.banks)]
            dut.wr_addr.value = _pack([address] * self.banks, self.word)
            dut.wr_data.value = _pack(values, 8)
            dut.wr_en.value = (1 << self.banks) - 1
            for bank, value in enumerate(values):
                self.contents[bank][address] = value
            await RisingEdge(dut.clk)
        dut.wr_en.value = 0

    async def run(self, cycles):
        dut = self.dut
        checked = 0
        for cycle in range(cycles):
            read = self.random.random() < 0.6
            writes = [self.random.random() < 0.3 for _ in range(self.banks)]
            rd_addr = [self.random.randrange(self.depth) for _ in range(self.banks)]
            wr_addr = [self.random.randrange(self.depth) for _ in range(self.banks)]
            wr_data = [self.random.getrandbits(8) for _ in range(self.banks)]
            dut.rd_addr.value, dut.rd_en.value = _pack(rd_addr, self.word), int(read)
            dut.wr_addr.value, dut.wr_data.value = _pack(wr_addr, self.word), _pack(wr_data, 8)
            dut.wr_en.value = _pack(writes, 1)
            await RisingEdge(dut.clk)
            for bank in range(self.banks):
                if read and not writes[bank]:
                    self.expected[bank] = self.contents[bank][rd_addr[bank]]
                if writes[bank]:
                    self.contents[bank][wr_addr[bank]] = wr_data[bank]
            await ReadOnly()
            got = dut.rd_data.value.to_unsigned()
            for bank, expected in enumerate(self.expected):
                if expected is None:
                    continue
                byte = got >> (8 * bank) & 0xFF
                assert byte == expected, (f"cycle {cycle}, bank {bank}: rd_data {byte:#04x}, "
                                          f"expected {expected:#04x}")
                checked += 1
            await Timer(1, unit="ns")      # out of the read-only phase
        return checked


@cocotb.test()
async def random_reads_and_writes(dut):
    params = json.loads(os.environ["FPGANET_TB"])
    tb = ActivationBufferTB(dut, params["banks"], params["depth"], params["word"], params["seed"])
    await reset_memory(dut)
    await tb.fill()
    checked = await tb.run(params["cycles"])
    assert checked >= params["cycles"] * params["banks"] // 2, f"only {checked} bytes were checked"
