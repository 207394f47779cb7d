"""Switching activity from RTL toggle counts (Verilator --coverage-toggle) and its use in the estimate.

The simulation tests use the single-PE configuration: its toggle-counting build is the
quickest (under a minute on two cores the first time, then kept under build/sim/).
"""

import dataclasses

import numpy as np
import pytest

from fpganet.codegen import build_images
from fpganet.codegen.fuzz_engine import random_map_network
from fpganet.estimate import estimate
from fpganet.estimate.activity import Activity, resolve_activity
from fpganet.perf import program_cycles
from fpganet.sim.activity import (ActivityMeasurement, default_inputs, measure_activity,
                                  parse_coverage, verilog_registers)
from fpganet.sim.fuzz_rtl import CONFIGS, random_fitting_network

CONFIG = CONFIGS["1x1"]


@pytest.fixture(scope="module")
def small_net():
    return random_fitting_network(np.random.default_rng(7), CONFIG)


@pytest.fixture(scope="module")
def measured(small_net):
    rng = np.random.default_rng(1)
    shape = (2, *small_net.input_chw)
    zeros = measure_activity(small_net, np.zeros(shape, np.int8), data="all-zero")
    noise = measure_activity(small_net, rng.integers(-128, 128, shape).astype(np.int8),
                             data="uniform random")
    return zeros, noise


def test_toggle_counts_cover_the_program_run(small_net, measured):
    _, noise = measured
    # Exactly the cycles the program runs, boot loading excluded.
    images = build_images(small_net, 2, CONFIG)
    assert noise.cycles == program_cycles(images.program_for(2), CONFIG).total
    assert noise.extra["program_cycles"] == noise.cycles
    counts = noise.counts
    assert counts["flipflop_bits"] > 100 and counts["operand_bits"] == 16   # a_in, b_in of one PE
    assert counts["uncovered_flipflops"] <= 2
    assert set(noise.blocks) == {"array", "datapath", "control"}
    assert sum(b["flipflop_bits"] for b in noise.blocks.values()) == counts["flipflop_bits"]


def test_activity_is_plausible_and_follows_the_data(measured):
    zeros, noise = measured
    for result in (zeros, noise):
        # A flip-flop changes at most once per cycle; a working engine moves some of them.
        assert 0.0 < result.flipflop < 0.5
        assert 0.0 < result.signals < 0.5
        assert 0.0 < result.operands <= 1.0
    # The weights still stream with an all-zero image, but random pixels toggle far more.
    assert noise.operands > 1.5 * zeros.operands
    assert noise.flipflop > zeros.flipflop
    assert noise.blocks["array"]["flipflop_activity"] > zeros.blocks["array"]["flipflop_activity"]
    assert "all-zero" in zeros.basis and "zero-delay" in zeros.basis
    # Stored and read back unchanged.
    again = ActivityMeasurement.from_dict(noise.to_dict())
    assert (again.flipflop, again.operands, again.blocks) == (noise.flipflop, noise.operands,
                                                              noise.blocks)


def test_estimate_uses_the_simulated_activity(small_net, tmp_path):
    cache = tmp_path / "cache"
    empty = estimate(small_net, measure=False, synth=False, activity="auto", cache_dir=cache)
    assert empty.to_dict()["fpga"]["activity"]["logic"]["source"] == "published"
    result = estimate(small_net, measure=False, synth=False, activity="rtl", cache_dir=cache)
    data = result.to_dict()
    activity = data["fpga"]["activity"]
    assert activity["logic"]["source"] == "simulated"
    assert activity["operands"]["source"] == "simulated"
    assert activity["logic"]["unit"] == "transitions/bit/cycle"
    assert "Verilator --coverage-toggle" in activity["logic"]["basis"]
    assert 0 < activity["logic"]["low"] <= activity["logic"]["high"] < 0.5
    assert activity["measurement"]["counts"]["flipflop_bits"] > 100
    power = data["fpga"]["power"]["components"]
    assert "simulated" in power["logic"]["basis"] and "simulated" in power["dsp"]["basis"]
    assert any("switching activity: simulated" in note for note in data["notes"])
    # Stored: "auto" finds it now, and measures nothing.
    again = estimate(small_net, measure=False, synth=False, activity="auto", cache_dir=cache)
    assert again.activity.source == "simulated" and "stored" in again.activity.origin
    assert again.activity.logic == result.activity.logic


def test_verilog_registers_finds_flipflops_memories_and_operands():
    verilog = r"""
module \top.array.pe_0_0 (clk, a_in, b_in, y);
  reg [7:0] a_out = 8'h00;
  reg [15:0] product = 16'h0000;
  reg [7:0] mem [15:0];
  reg [7:0] _0_;
  wire [15:0] \$1 ;
  assign \$1  = $signed(a_in) * $signed(b_in);
  always @(posedge clk)
    a_out <= \$4 ;
  always @(posedge clk)
    product <= \$8 ;
  always @(posedge clk) begin
    if (we)
      mem[addr] <= a_in;
  end
  always @(posedge clk) begin
    _0_ <= mem[raddr];
  end
endmodule
module \top.array.pe_0_1 (clk, \port$7$0 );
  assign \$1  = $signed(\port$7$0 [7:0]) * $signed(\port$7$0 [15:8]);
endmodule
module top(clk);
  reg \count$5  = 1'h0;
  assign \$2  = $signed(x) * $signed(y);
  always @(posedge clk)
    \count$5  <= \$2 ;
endmodule
"""
    modules = verilog_registers(verilog)
    assert modules["top.array.pe_0_0"] == {"flipflops": {"a_out", "product"},
                                            "operands": {"a_in": None, "b_in": None}}
    assert modules["top.array.pe_0_1"]["operands"] == {"port$7$0": set(range(16))}
    # Only the array's multipliers are the DSP operands the power model scales.
    assert modules["top"] == {"flipflops": {"count$5"}, "operands": {}}


def test_coverage_file_is_parsed(tmp_path):
    path = tmp_path / "coverage.dat"
    line = ("C '\x01f\x02x.v\x01l\x0210\x01n\x028\x01t\x02toggle\x01page\x02v_toggle/fpganet_accel"
            "\x01o\x02cycles__0245[3]:0->1\x01h\x02TOP.top.harness.core' 17\n")
    path.write_text("# SystemC::Coverage-3\n" + line)
    (point,) = parse_coverage(path)
    assert point == {"hierarchy": "TOP.top.harness.core", "module": "fpganet_accel",
                     "signal": "cycles$5", "bit": 3, "edge": "0->1", "count": 17}


def test_activity_choices():
    assert resolve_activity(None).source == "published"
    given = resolve_activity(0.3)
    assert given.source == "measured" and given.logic == (0.3, 0.3)
    assert isinstance(resolve_activity(given), Activity)
    with pytest.raises(ValueError):
        resolve_activity("sometimes")
    with pytest.raises(ValueError):
        resolve_activity(1.5)


def test_default_inputs_take_a_low_bit_inputs_own_codes():
    """A network with no data set of its own is measured on random input codes in its input's
    range: int8 for the int8 array, 0 and 1 for a binary CNN (whose engine packs one bit an
    element, so an int8 code would spill into its neighbours)."""
    rng = np.random.default_rng(3)
    net = random_map_network(rng, "binary", (4, 6, 6), [("conv", 8, 3), ("flatten",),
                                                        ("dense", 3)])
    q, description = default_inputs(net, 2)
    assert q.shape == (2, 4, 6, 6) and set(np.unique(q)) == {0, 1}
    assert description == "uniform random codes 0..1 (seed 0)"
    wide = dataclasses.replace(net, input_lo=-128, input_hi=127)
    q, description = default_inputs(wide, 2)
    assert q.min() < -100 and q.max() > 100 and description == "uniform random int8 (seed 0)"
