"""``fpganet fuzz`` (engine part): random binary and low-bit networks on the network engine's
Verilog (:class:`~fpganet.hdl.binary_engine.BinaryNetworkEngine`), against their lowered
layers' arithmetic and its cycle model.

The weights are the memories' initial contents, part of the design, so each case is a build
of its own (:func:`fpganet.codegen.fuzz_engine.engine_case`). Every other case runs with the
output refused at random, the others at full rate, whose cycles a vector are checked. A
failure prints the seed and index that regenerate the case.
"""

import json
import sys
import time

from fpganet.codegen.binary import pack_input_words
from fpganet.codegen.fuzz_engine import engine_case
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.sim import runner

__all__ = ["check_case", "fuzz_engine", "output_words"]


def output_words(folded, totals):
    """The engine's output payloads (ints) for totals [N, groups * pe]: ``pe`` fields of
    ``count_width`` bits each, two's complement where the totals are signed."""
    mask = (1 << folded.count_width) - 1
    return [[sum((int(total) & mask) << (j * folded.count_width) for j, total in enumerate(group))
             for group in vector.reshape(-1, folded.pe)] for vector in totals]


def check_case(case, sim="verilator", ready_stalls=0.0):
    """Run ``case`` on the engine's Verilog; raise AssertionError naming what differs."""
    folded = case.folded
    engine = BinaryNetworkEngine(folded)
    params = {"words": [pack_input_words(folded, vector) for vector in case.inputs],
              "expected": output_words(folded, case.totals),
              "cycles_per_vector": engine.cycles_per_vector(), "ready_stalls": ready_stalls,
              "seed": case.index}
    build = runner.build(engine, f"engine_{folded.unit}", sim=sim)
    result = build.run("fpganet.sim.tb_binary_engine", None, {"FPGANET_TB": json.dumps(params)})
    assert result.ok, f"{case.describe()}: {result.failed} (see {result.results_xml.parent})"


def fuzz_engine(cases, seed=1, sim="verilator", out=None):
    """Check ``cases`` random networks on the engine's RTL; returns the failures (each
    printed)."""
    out = out or sys.stdout
    failures, start = 0, time.perf_counter()
    for index in range(cases):
        case = engine_case(seed, index)
        try:
            check_case(case, sim, ready_stalls=0.4 if index % 2 else 0.0)
        except AssertionError as error:
            failures += 1
            print(f"FAIL engine seed={seed} index={index}: {error}", file=out, flush=True)
    print(f"engine: {cases} random binary and low-bit networks on the engine's RTL ({sim}), "
          f"{time.perf_counter() - start:.1f} s, {failures} failures", file=out, flush=True)
    return failures
