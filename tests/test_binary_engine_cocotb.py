"""cocotb tests of the binary network engine's generated Verilog, on Verilator and Icarus:
TFC_1W1A's counts equal its binary layers' (so the golden model's logits), at the cycles of
the engine's model and under output back-pressure."""

import json

import numpy as np
import pytest
from test_binary_layers import needs_tfc, tfc_w1a1
from test_systolic_cocotb import simulators

from fpganet.codegen.binary import engine_counts, fold_network, pack_input_words
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.sim import runner


@needs_tfc
@pytest.mark.parametrize("sim", simulators())
@pytest.mark.parametrize("ready_stalls", [0.0, 0.5])
def test_tfc_w1a1_engine_verilog_equals_the_binary_layers(sim, ready_stalls):
    _, layers, _, inputs = tfc_w1a1(3)
    folded = fold_network(layers, 8, 32)
    counts = engine_counts(folded, layers, inputs)
    expected = [[sum(int(c) << (j * folded.count_width) for j, c in enumerate(group))
                 for group in vector.reshape(-1, folded.pe)] for vector in counts]
    engine = BinaryNetworkEngine(folded)
    params = {"words": [pack_input_words(folded, vector) for vector in inputs],
              "expected": expected, "cycles_per_vector": engine.cycles_per_vector(),
              "ready_stalls": ready_stalls, "seed": 1}
    build = runner.build(engine, "binary_engine", sim=sim)
    result = build.run("fpganet.sim.tb_binary_engine", None,
                       {"FPGANET_TB": json.dumps(params)})
    assert result.ok, f"failed: {result.failed} (see {result.results_xml.parent})"
    assert result.passed == ["vectors_equal_the_binary_layers"]
