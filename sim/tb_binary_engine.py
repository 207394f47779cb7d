"""cocotb testbench of the generated binary network engine Verilog.

Parameters come from the environment variable ``FPGANET_TB`` (JSON), written by
``tests/test_binary_engine_cocotb.py``:

``words``
    The input words of each vector (``[[int, ...], ...]``).
``expected``
    The output counts of each vector, as the engine's output payloads (ints).
``cycles_per_vector``
    The engine's cycle model, checked between vectors' first words at full rate.
``ready_stalls``, ``seed``
    Probability that the sink refuses a result in a cycle, and its seed (0: the full-rate
    run, whose cycles are checked).
"""

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


def parameters():
    return json.loads(os.environ.get("FPGANET_TB", "{}"))


@cocotb.test()
async def vectors_equal_the_binary_layers(dut):
    params = parameters()
    rng = np.random.default_rng(params["seed"])
    # Icarus leaves Amaranth's combinational logic at X until an input changes: give every
    # input a value at time 0.
    dut.rst.value = 1
    dut.input__valid.value = 0
    dut.input__payload.value = 0
    dut.output__ready.value = 0
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    per_vector = len(params["words"][0])
    pending = [word for vector in params["words"] for word in vector]
    expected = [count for vector in params["expected"] for count in vector]
    received, starts, sent = [], [], 0
    for cycle in range(200 * len(pending) + 100 * len(expected) + 1000):
        if len(received) == len(expected):
            break
        dut.input__valid.value = int(bool(pending))
        dut.input__payload.value = pending[0] if pending else 0
        ready = int(rng.random() >= params["ready_stalls"])
        dut.output__ready.value = ready
        await ReadOnly()
        if pending and int(dut.input__ready.value):
            if sent % per_vector == 0:
                starts.append(cycle)
            pending.pop(0)
            sent += 1
        if ready and int(dut.output__valid.value):
            received.append(int(dut.output__payload.value))
        await RisingEdge(dut.clk)
    assert received == expected, "output counts differ from the binary layers'"
    if params["ready_stalls"] == 0:
        assert list(np.diff(starts)) == [params["cycles_per_vector"]] * (len(starts) - 1)
