"""cocotb tests of the network engine's generated Verilog, on Verilator and Icarus:
TFC_1W1A's counts equal its binary layers' (so the golden model's logits), at the cycles of
the engine's model and under output back-pressure; random binary and low-bit networks of the
engine's RTL fuzz (``fpganet fuzz --engines``) likewise."""

import json

import numpy as np
import pytest
from test_binary_layers import needs_tfc, tfc_w1a1
from test_systolic_cocotb import simulators

from fpganet.codegen.binary import fold_network, pack_input_words
from fpganet.codegen.fuzz_engine import engine_case, expected_totals
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.sim import runner
from fpganet.sim.fuzz_engine import check_case, output_words


@needs_tfc
@pytest.mark.parametrize("sim", simulators())
@pytest.mark.parametrize("ready_stalls", [0.0, 0.5])
def test_tfc_w1a1_engine_verilog_equals_the_binary_layers(sim, ready_stalls):
    _, layers, _, inputs = tfc_w1a1(3)
    folded = fold_network(layers, 8, 32)
    counts = expected_totals(folded, layers, inputs)
    expected = output_words(folded, counts)
    engine = BinaryNetworkEngine(folded)
    params = {"words": [pack_input_words(folded, vector) for vector in inputs],
              "expected": expected, "cycles_per_vector": engine.cycles_per_vector(),
              "ready_stalls": ready_stalls, "seed": 1}
    build = runner.build(engine, "binary_engine", sim=sim)
    result = build.run("fpganet.sim.tb_binary_engine", None,
                       {"FPGANET_TB": json.dumps(params)})
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert result.passed == ["vectors_equal_the_binary_layers"]


def test_a_random_network_of_the_engine_fuzz():
    """A case of ``fpganet fuzz --engines`` (``make fuzz`` runs more): a small CNN on the
    low-bit unit at a 4x12 fold (a 2x3 convolution over a 5x7 map, max-pooled 3x3 with its
    edges dropped, then a dense layer), digits of 3 bits, two's complement totals, under
    back-pressure."""
    case = engine_case(1, 55)
    first = case.folded.layers[0]
    assert case.folded.unit == "lowbit" and case.folded.input_bits == 3
    assert (first.in_h, first.in_w, first.kernel_h, first.kernel_w, first.pool) == (5, 7, 2, 3, 3)
    check_case(case, ready_stalls=0.4)
