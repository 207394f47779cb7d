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

__all__ = ["check_case", "fuzz_engine", "output_words", "run_engine_verilog", "RUN_INPUTS"]


def output_words(folded, totals):
    """The engine's output payloads (ints) for totals [N, groups * pe]: ``pe`` fields of
    ``count_width`` bits each, two's complement where the totals are signed."""
    mask = (1 << folded.count_width) - 1
    return [[sum((int(total) & mask) << (j * folded.count_width) for j, total in enumerate(group))
             for group in vector.reshape(-1, folded.pe)] for vector in totals]


#: Inputs a testbench run takes at most: its parameters travel in one environment variable
#: (128 KiB at most), and a map of CNV's layer 2 is 900 words.
RUN_INPUTS = 4


def run_engine_verilog(folded, inputs, totals, name, sim="verilator", ready_stalls=0.0, seed=0):
    """The engine of ``folded`` on its Verilog, ``inputs`` [N, ...] (vectors or maps) in runs
    of :data:`RUN_INPUTS`, each run's testbench asserting the last layer's ``totals`` [N, ...]
    and, at full rate, the cycles between inputs; the failing runs' results (empty: all
    passed)."""
    engine = BinaryNetworkEngine(folded)
    build = runner.build(engine, name, sim=sim)
    failed = []
    for first in range(0, len(inputs), RUN_INPUTS):
        chunk = slice(first, first + RUN_INPUTS)
        params = {"words": [pack_input_words(folded, vector) for vector in inputs[chunk]],
                  "expected": output_words(folded, totals[chunk]),
                  "cycles_per_vector": engine.cycles_per_vector(),
                  "ready_stalls": ready_stalls, "seed": seed}
        result = build.run("fpganet.sim.tb_binary_engine", None,
                           {"FPGANET_TB": json.dumps(params)})
        if not result.ok:
            failed.append(result)
    return failed


def check_case(case, sim="verilator", ready_stalls=0.0):
    """Run ``case`` on the engine's Verilog; raise AssertionError naming what differs."""
    failed = run_engine_verilog(case.folded, case.inputs, case.totals,
                                f"engine_{case.folded.unit}", sim, ready_stalls, case.index)
    assert not failed, (f"{case.describe()}: {failed[0].failed} "
                        f"(see {failed[0].results_xml.parent})")


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
