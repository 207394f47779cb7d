"""cocotb testbench of :class:`fpganet.hdl.ice40_dsp.MultiplyAdd16` and
:class:`~fpganet.hdl.ice40_dsp.Multiply16` after synthesis.

The netlist (``synth_ice40``, the SB_MAC16 from Yosys's ``cells_sim.v``) must give
``o = a * b + addend`` with the component's latency: the product of the operands two
cycles back plus the addend of the previous cycle, modulo ``2^32`` (``Multiply16``: the
product of the previous cycle, no addend). Parameters come from ``FPGANET_TB`` (JSON):
``seed``, ``cycles`` and ``addend`` (false for ``Multiply16``).
"""

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from fpganet.hdl.ice40_dsp import Multiply16, MultiplyAdd16


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _operands(rng, cycles):
    """Random operands with every extreme of both factors and of the addend."""
    ends = [-(1 << 15), -(1 << 15) + 1, -1, 0, 1, (1 << 15) - 1]
    sets = []
    for _ in range(cycles):
        a = int(rng.choice(ends)) if rng.random() < 0.3 else int(rng.integers(-(1 << 15), 1 << 15))
        b = int(rng.choice(ends)) if rng.random() < 0.3 else int(rng.integers(-(1 << 15), 1 << 15))
        addend = int(rng.choice([0, 1, (1 << 32) - 1, 1 << 31, (1 << 15) - 1])) \
            if rng.random() < 0.3 else int(rng.integers(0, 1 << 32))
        sets.append((a, b, addend))
    return sets


@cocotb.test()
async def random_multiply_add(dut):
    params = json.loads(os.environ.get("FPGANET_TB", "{}"))
    rng = np.random.default_rng(params.get("seed", 0))
    sets = _operands(rng, params.get("cycles", 2000))
    with_addend = params.get("addend", True)
    if not with_addend:
        sets = [(a, b, 0) for a, b, _ in sets]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 0
    latency = (MultiplyAdd16 if with_addend else Multiply16).latency
    checked = 0
    for cycle in range(len(sets) + latency):
        await FallingEdge(dut.clk)
        if cycle < len(sets):
            a, b, _ = sets[cycle]
            dut.a.value = a & 0xFFFF
            dut.b.value = b & 0xFFFF
        if with_addend and 1 <= cycle <= len(sets):
            dut.addend.value = sets[cycle - 1][2]
        await RisingEdge(dut.clk)
        await ReadOnly()
        if cycle >= latency - 1 and cycle - (latency - 1) < len(sets):
            a, b, addend = sets[cycle - (latency - 1)]
            expected = _signed(a * b + addend, 32)
            got = _signed(int(dut.o.value), 32)
            assert got == expected, f"set {cycle - latency + 1}: {a} * {b} + {addend}: {got} != {expected}"
            checked += 1
    assert checked == len(sets)
