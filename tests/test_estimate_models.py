"""Workload counts, throughput and link model, the fpganet.perf adapter, GPU and ASIC models."""

import argparse
import json

import pytest
from amaranth import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from fpganet import perf
from fpganet.codegen import build_images
from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.estimate import asic, figures
from fpganet.estimate.asic import (GATE_ENERGY_CALIBRATION, asic_projection, sram_read_energy,
                                   synthesize, verilog_of)
from fpganet.estimate.cli import configure_estimate_parser
from fpganet.estimate.gpu import DEFAULT_GPUS, batch1_latency, gpu_rows
from fpganet.estimate.power import canonical_resources
from fpganet.estimate.quantity import Quantity
from fpganet.estimate.throughput import (HostLink, clock_quantity, fpga_performance,
                                         load_board_report)
from fpganet.estimate.workload import Workload, cycles_per_image, simulated_cycles
from fpganet.hdl.systolic import SystolicArray
from fpganet.perf import program_cycles


@pytest.fixture(scope="module")
def lenet():
    return compile_model()


@pytest.fixture(scope="module")
def workload(lenet):
    return Workload.from_network(lenet)


def hz(value):
    return Quantity(value, "Hz", "estimated", "test")


def test_lenet_workload_counts(workload):
    assert workload.macs == 416_520
    assert workload.weight_bytes == 61_470
    assert (workload.input_bytes, workload.output_bytes) == (784, 10)
    assert workload.ideal_cycles == pytest.approx(416_520 / 16)
    conv1 = workload.layers[0]
    # conv1: 6 channels = 3 row tiles, 784 pixels = 98 tiles of 8, K = 25 beats each.
    assert (conv1.groups, conv1.tiles, conv1.k, conv1.lanes) == (3, 98, 25, 8)
    assert conv1.weight_word_reads == 3 * 98 * 25
    assert conv1.tiled_cycles == 3 * 98 * 25 + (8 + 2 + 2)
    dense = workload.layers[5]
    assert dense.type == "dense" and dense.lanes == 1       # batch 1: one column works
    assert workload.layers[4].type == "reshape" and workload.layers[4].tiled_cycles == 0
    assert workload.tiled_cycles > 2 * workload.ideal_cycles
    assert workload.gpu_kernels() == 7 + 4                   # 5 conv/dense + 2 pool + 4


def test_cycles_fallbacks_are_labelled(workload, lenet):
    ideal, per_layer, source = cycles_per_image(workload, lenet, simulate=False)
    assert ideal.source == "estimated" and "ideal, not simulated" in ideal.basis
    assert per_layer == [layer.tiled_cycles for layer in workload.layers]
    assert "not simulated" in source
    tiled, _, _ = cycles_per_image(workload, lenet, model="tiled", simulate=False)
    assert tiled.value == workload.tiled_cycles and "tiled, not simulated" in tiled.basis
    given, _, _ = cycles_per_image(workload, cycles=12345, cycles_source="measured")
    assert (given.value, given.source) == (12345, "measured")


def test_simulated_cycles_come_from_the_backend_program(workload, lenet):
    total, per_layer, source = cycles_per_image(workload, lenet)
    assert total.source == "simulated" and source.startswith("simulated")
    images = build_images(lenet, n_images=3)
    three = perf.program_cycles(images.program_for(3), lenet.config).total
    one = perf.program_cycles(images.program_for(1), lenet.config).total
    assert total.value * 2 == three - one                 # the steady state of the image loop
    assert per_layer[4] == 0                              # the reshape costs nothing
    assert sum(per_layer) < total.value                   # SET, INPUT, OUTPUT... are outside
    # The tiled estimate (not simulated) comes within 5 % of every conv and dense layer here;
    # the pooling layers (bank conflicts, pipeline fill) are 10-20 % slower than it says.
    for layer, cycles in zip(workload.layers, per_layer):
        if layer.type in ("conv", "dense"):
            assert layer.tiled_cycles == pytest.approx(cycles, rel=0.05), layer.name
        elif layer.type == "maxpool":
            assert 0.75 * cycles < layer.tiled_cycles < cycles, layer.name
    assert workload.tiled_cycles == pytest.approx(total.value, rel=0.05)
    assert total.extra["io_cycles"] == (784 + 3) + (10 + 4)    # INPUT N + 3, OUTPUT N + 4


def test_simulated_cycles_are_the_performance_model_s(workload, lenet):
    total, per_layer, source = cycles_per_image(workload, lenet)
    images = build_images(lenet, 1, lenet.config)
    steady = (program_cycles(images.program_for(2), lenet.config).total
              - program_cycles(images.program_for(1), lenet.config).total)
    assert (total.value, total.source) == (steady, "simulated")
    assert source.startswith("simulated") and 0 < sum(per_layer) < steady
    # A network the back end refuses for the configuration falls back, labelled, with the reason.
    small = lenet.config.replace(act_buffer_bytes=512)
    assert simulated_cycles(lenet, small) is None
    assert "activation buffer" in simulated_cycles.last_reason


def test_uart_link_bound_and_compute_bound(workload):
    cycles = Quantity(workload.ideal_cycles, "cycles", "estimated", "test")
    raw = HostLink(overhead_in=0, overhead_out=0)
    uart = fpga_performance(workload, cycles, hz(40e6), raw)
    assert uart["bottleneck"].value.startswith("host link")
    assert uart["images_per_s"].value == pytest.approx(300_000 / 784)
    assert uart["latency_s"].value == pytest.approx(794 / 300_000 + workload.ideal_cycles / 40e6)
    assert 0 < uart["duty"].value < 1
    framed = fpga_performance(workload, cycles, hz(40e6), HostLink())
    assert framed["images_per_s"].value == pytest.approx(300_000 / (784 + 16))   # protocol frames
    assert "SEND_INPUT" in framed["link_images_per_s"].basis
    fast = fpga_performance(workload, cycles, hz(40e6), HostLink(name="SPI", baud=400e6))
    assert fast["bottleneck"].value == "compute"
    assert fast["images_per_s"].value == pytest.approx(40e6 / workload.ideal_cycles)


def test_weights_that_do_not_fit_are_streamed(lenet):
    small = Workload.from_network(lenet, lenet.config.replace(weight_buffer_bytes=4096))
    cycles = Quantity(small.ideal_cycles, "cycles", "estimated", "test")
    perf = fpga_performance(small, cycles, hz(40e6))
    assert perf["link_images_per_s"].value < 300_000 / small.weight_bytes
    assert perf["setup_s"].value is None


def test_board_report_is_read_and_checked(tmp_path):
    good = {"board": "icebreaker", "device": "iCE40UP5K", "fmax_mhz": 42.5, "macs_per_cycle": 16,
            "resources": {"ICESTORM_LC": {"used": 3000, "available": 5280}},
            "toolchain": "yowasp"}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(good))
    report = load_board_report(path)
    assert (report.fmax_mhz, report.family, report.used()) == (42.5, "ice40",
                                                               {"ICESTORM_LC": 3000})
    # As boards/build.py writes it: the board clock (PLL) below the routed Fmax is the clock;
    # nextpnr's raw utilization table is preferred to the renamed resources.

    built = dict(good, fmax_mhz=44.8, clock={"target_mhz": 40.0, "pll_mhz": 39.75},
                 resources={"LC": {"used": 3000, "available": 5280},
                            "DSP": {"used": 8, "available": 8}},
                 utilization={"ICESTORM_LC": {"used": 3000, "available": 5280},
                              "ICESTORM_DSP": {"used": 8, "available": 8},
                              "ICESTORM_SPRAM": {"used": 2, "available": 4}})
    path.write_text(json.dumps(built))
    report = load_board_report(path)
    clock = clock_quantity(AcceleratorConfig(), report)
    assert clock.value == 39.75e6 and "meets it" in clock.basis
    assert canonical_resources(report.used())["spram"] == 2
    slow = load_board_report(path)
    slow.fmax_mhz = 30.0
    assert clock_quantity(AcceleratorConfig(), slow).value == 30e6
    del good["fmax_mhz"]
    path.write_text(json.dumps(good))
    with pytest.raises(FpganetError, match="fmax_mhz"):
        load_board_report(path)
    path.write_text("{")
    with pytest.raises(FpganetError, match="not valid JSON"):
        load_board_report(path)


def test_gpu_rows_cover_every_gpu_in_both_regimes(workload):
    rows = gpu_rows(workload)
    assert {(r["key"], r["regime"]) for r in rows} == {
        (key, regime) for key in DEFAULT_GPUS for regime in ("batch 1", "large batch")}
    for row in rows:
        assert row["watts"].source == "published"
        assert row["images_per_s"].value > 0 and row["images_per_s_per_w"].value > 0
        assert 0 < row["efficiency_vs_peak"].value < 1
    batch1 = [r for r in rows if r["regime"] == "batch 1"]
    assert all(r["bottleneck"].value == "kernel-launch latency floor" for r in batch1)


def test_gpu_batch1_model_against_mlperf_singlestream():
    """ResNet-50 (8.2 GOP, 57 dependent kernels assumed) at batch 1 vs MLPerf SingleStream."""
    ops = figures.RESNET50_GOP * 1e9
    kernels = figures.GPU_KERNEL_OVERHEAD["resnet50_kernels"]
    l4 = figures.MLPERF_SINGLESTREAM["l4"]["latency_s"]
    low, nominal, high, _ = batch1_latency(ops, kernels, figures.gpu("l4"))
    assert low <= l4 <= high and nominal == pytest.approx(l4, rel=0.1)
    orin = figures.MLPERF_SINGLESTREAM["agx-orin-maxn"]["latency_s"]
    low, nominal, high, _ = batch1_latency(ops, kernels, figures.gpu("agx-orin"))
    assert low <= orin <= high


def test_mlperf_efficiencies_are_below_peak():
    for result in figures.MLPERF_OFFLINE.values():
        assert 0.1 < result.efficiency < 0.7, result.key


def test_sram_energy_interpolation_meets_horowitz_points():
    for size, pj in figures.SRAM_READ_64B_45NM_PJ.items():
        assert sram_read_energy(size, 64) * 1e12 == pytest.approx(pj, rel=0.15)


MAC_VERILOG = """
module mac(input clk, input signed [7:0] a, input signed [7:0] b, input clear,
           output reg signed [31:0] acc, output reg [15:0] old);
  reg [15:0] mem [0:63];
  reg [5:0] addr;
  always @(posedge clk) begin
    acc <= clear ? 32'sd0 : acc + a * b;
    addr <= addr + 1;
    mem[addr] <= acc[15:0];
    old <= mem[addr + 6'd1];
  end
endmodule
"""


def test_synthesize_counts_gates_and_keeps_memories_aside():
    result = synthesize(MAC_VERILOG)
    assert result.top == "mac"
    assert result.memories == [{"name": "\\mem", "width": 16, "size": 64, "bits": 1024}]
    assert 32 + 6 <= result.flipflops <= 32 + 6 + 8
    assert 700 < result.nand2_eq < 2000          # an 8x8 multiplier is ~730 NAND2-eq
    assert not result.unknown_cells


def test_gate_energy_calibration_reproduces():
    """The stored NAND2-eq counts of the calibration operators come out of synthesize()."""
    operators = {"int8_add": "module op(input [7:0] a, b, output [7:0] y); assign y = a + b; endmodule",
                 "int32_add": "module op(input [31:0] a, b, output [31:0] y); assign y = a + b; "
                              "endmodule",
                 "int8_mult": "module op(input signed [7:0] a, b, output signed [15:0] y); "
                              "assign y = a * b; endmodule"}
    for name, verilog in operators.items():
        assert synthesize(verilog).nand2_eq == pytest.approx(
            GATE_ENERGY_CALIBRATION[name]["nand2_eq"], rel=0.05), name


def test_asic_projection_of_a_small_array(lenet):
    config = AcceleratorConfig(rows=1, cols=2)
    workload = Workload.from_network(lenet, config)
    cycles = Quantity(workload.tiled_cycles, "cycles", "estimated", "test")
    synthesis = synthesize(SystolicArray(config), "systolic_array")
    assert synthesis.nand2_eq > 2 * 700
    old = asic_projection(workload, cycles, synthesis, node="45nm")
    new = asic_projection(workload, cycles, synthesis, node="7nm")
    for projection in (old, new):
        energy = projection["joules_per_image"]
        assert 0 < energy.low < energy.value < energy.high
        assert projection["images_per_s_per_w"].value == pytest.approx(1 / energy.value)
        assert projection["area_mm2"].value > 0
    assert new["joules_per_image"].value < old["joules_per_image"].value
    assert new["area_mm2"].value < old["area_mm2"].value / 5


def test_memory_initialization_is_stripped_from_amaranth_verilog():
    class Table(wiring.Component):
        addr: In(4)
        wdata: In(8)
        we: In(1)
        data: Out(8)

        def elaborate(self, platform):
            m = Module()
            m.submodules.mem = mem = memory.Memory(shape=8, depth=16, init=range(16))
            read = mem.read_port(domain="comb")
            write = mem.write_port()
            m.d.comb += [read.addr.eq(self.addr), self.data.eq(read.data),
                         write.addr.eq(self.addr), write.data.eq(self.wdata),
                         write.en.eq(self.we)]
            return m

    text, top = verilog_of(Table(), "table")
    assert top == "table"
    assert "= 8'h0f;" not in text and "initial begin" in text
    result = synthesize(Table(), "table")
    assert [m["bits"] for m in result.memories] == [128]


def test_design_synthesis_is_found_again_by_source_hash(tmp_path, monkeypatch):
    """The whole accelerator is the default design; a stored result needs neither Amaranth nor yosys."""
    parser = argparse.ArgumentParser()
    configure_estimate_parser(parser)
    assert parser.parse_args(["out"]).design == "accelerator"

    config = AcceleratorConfig(rows=1, cols=2)
    messages = []
    first, description = asic.synthesize_design("array", config, cache_dir=tmp_path,
                                                progress=messages.append)
    assert first.origin.startswith("synthesized now") and messages
    assert "systolic array" in description
    assert len(list(tmp_path.glob("design-array-*.json"))) == 1

    def no_conversion(*_args, **_kwargs):
        raise AssertionError("the stored synthesis should have been used")

    monkeypatch.setattr(asic, "design_for", no_conversion)
    again, same = asic.synthesize_design("array", config, cache_dir=tmp_path)
    assert again.origin.startswith("cached synthesis") and same == description
    assert (again.cells, again.memories, again.nand2_eq) == (first.cells, first.memories,
                                                             first.nand2_eq)
    # Another configuration is another design.
    assert asic.design_key("array", config) != asic.design_key("array",
                                                              AcceleratorConfig(rows=1, cols=3))
