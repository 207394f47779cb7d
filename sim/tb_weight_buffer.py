"""cocotb testbench of a weight buffer (:class:`fpganet.hdl.memories.WeightBuffer` or the
synthesized :class:`fpganet.hdl.ice40_spram.SPRAMWeightBuffer`) against a Python model.

The accelerator's contract with its weight buffer (docs/reference/architecture.md): writes
happen only while idle, reads only while running; a read's word appears one cycle
after ``rd_en`` (``latency``, two with the pipeline registers: the word of the read one
``rd_en`` cycle before the latest) and stays while ``rd_en`` is low. The testbench writes
random words at random addresses spread over the whole depth (every SPRAM cell or block),
half of them near the cells' or blocks' boundaries, then reads them back with ``rd_en``
dropped at random, checking every cycle's ``rd_data`` against the model.

Parameters from ``FPGANET_TB`` (JSON): ``width`` (bits per word), ``words``
(depth), ``writes``, ``reads``, ``seed``, ``latency`` (1 or 2), ``boundary`` (the words
of a cell or block), ``enables`` (the copies of ``rd_en``, driven alike).
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, Timer


async def reset_memory(dut):
    """Start the clock, hold reset three cycles with every port of a buffer (``rd_addr``,
    ``rd_en``, ``wr_addr``, ``wr_data``, ``wr_en``) at 0, and wait a cycle after it."""
    for port in (dut.rd_addr, dut.rd_en, dut.wr_addr, dut.wr_data, dut.wr_en):
        port.value = 0
    dut.rst.value = 1
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


class WeightBufferTB:
    """Drives the two ports; keeps the expected contents and the expected ``rd_data``."""

    def __init__(self, dut, width, words, seed, latency, boundary, enables):
        self.dut = dut
        self.all_enables = (1 << enables) - 1
        self.width = width
        self.words = words
        self.random = random.Random(seed)
        self.latency = latency
        self.boundary = boundary
        self.contents = {}
        self.expected = None        # rd_data after the last read (None: undefined)
        self.pending = None         # latency 2: the word of the last read, next to come

    async def reset(self):
        await reset_memory(self.dut)

    def random_address(self):
        # Half the addresses near the cells' boundaries, where a wrong cell select shows.
        if self.random.random() < 0.5:
            boundary = self.random.randrange(0, self.words, self.boundary)
            return max(0, min(self.words - 1, boundary + self.random.randint(-3, 3)))
        return self.random.randrange(self.words)

    async def write(self, count):
        dut = self.dut
        for _ in range(count):
            address, value = self.random_address(), self.random.getrandbits(self.width)
            dut.wr_addr.value, dut.wr_data.value, dut.wr_en.value = address, value, 1
            self.contents[address] = value
            await RisingEdge(dut.clk)
        dut.wr_en.value = 0
        # The last word may land at the end of the next cycle (a buffer's write_latency).
        await RisingEdge(dut.clk)
        self.expected = self.pending = None

    async def read(self, count):
        dut = self.dut
        addresses = sorted(self.contents)
        checked = 0
        for cycle in range(count):
            enable = self.random.random() < 0.7
            address = self.random.choice(addresses)
            dut.rd_addr.value, dut.rd_en.value = address, self.all_enables if enable else 0
            await RisingEdge(dut.clk)
            if enable and self.latency == 2:
                self.expected, self.pending = self.pending, self.contents[address]
            elif enable:
                self.expected = self.contents[address]
            await ReadOnly()
            if self.expected is not None:
                got = dut.rd_data.value.to_unsigned()
                assert got == self.expected, (
                    f"cycle {cycle}: rd_data {got:#x}, expected {self.expected:#x} "
                    f"({'read of' if enable else 'held from a read of'} a written word)")
                checked += 1
            await Timer(1, unit="ns")      # out of the read-only phase
        dut.rd_en.value = 0
        return checked


@cocotb.test()
async def random_writes_then_reads(dut):
    params = json.loads(os.environ["FPGANET_TB"])
    tb = WeightBufferTB(dut, params["width"], params["words"], params["seed"],
                        params.get("latency", 1), params.get("boundary", 16384), params["enables"])
    await tb.reset()
    await tb.write(params["writes"])
    checked = await tb.read(params["reads"])
    assert checked >= params["reads"] // 2, f"only {checked} reads were checked"
