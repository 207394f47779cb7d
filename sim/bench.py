"""Simulation-speed benchmark of the systolic array (``make bench``).

Three ways of simulating the same array, in simulated clock cycles per second
of wall time, measured on this machine:

``amaranth.sim``
    Amaranth's Python simulator, a testbench driving the streams every cycle.
``cocotb, Python every cycle``
    The generated Verilog under Verilator (and Icarus when installed), the
    cocotb testbench driving and sampling the streams every cycle.
``cocotb, Python waits for done``
    The same Verilog wrapped in :class:`FreeRunningArray`, which feeds itself;
    the clock runs in the simulator and Python only waits for ``done``.
``Verilator, no Python``
    The same free-running design under a plain C++ Verilator main: the
    ceiling the cocotb runs are measured against.

Every run checks its results. The report goes to ``<output>/sim_speed.json``.
"""

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from amaranth.sim import Simulator

from fpganet.argtypes import non_negative_int
from fpganet.command_line import run_subcommand
from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig
from fpganet.datasets import mnist
from fpganet.estimate.workload import simulated_cycles
from fpganet.files import check_output_directory, staged_directory
from fpganet.golden import layer_macs, run_golden
from fpganet.hdl.systolic import SystolicArray
from fpganet.sim import rtl_backend, runner
from fpganet.sim.free_running import FreeRunningArray, expected_checksum

__all__ = ["bench_amaranth", "bench_cocotb", "main"]


def bench_amaranth(config, tiles, tile_k):
    """amaranth.sim, a testbench setting the operands and taking results every cycle."""
    dut = SystolicArray(config)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, size=(tiles * tile_k, config.rows))
    b = rng.integers(-128, 128, size=(tiles * tile_k, config.cols))
    expected = [a[t * tile_k:(t + 1) * tile_k].T @ b[t * tile_k:(t + 1) * tile_k] for t in range(tiles)]
    got, cycles = [], 0

    async def testbench(ctx):
        nonlocal cycles
        ctx.set(dut.results.ready, 1)
        sent = 0
        while len(got) < tiles * config.rows:
            if sent < len(a):
                ctx.set(dut.operands.payload, {"a": a[sent].tolist(), "b": b[sent].tolist(),
                                               "last": sent % tile_k == tile_k - 1})
            ctx.set(dut.operands.valid, sent < len(a))
            _, _, ready, valid, payload = await ctx.tick().sample(
                dut.operands.ready, dut.results.valid, dut.results.payload)
            cycles += 1
            if ready and sent < len(a):
                sent += 1
            if valid:
                got.append([payload.sums[j] for j in range(config.cols)])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    start = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - start
    sums = np.array(got).reshape(tiles, config.rows, config.cols)
    checked = all(np.array_equal(sums[t], expected[t]) for t in range(tiles))
    return {"cycles": cycles, "wall_s": wall, "checked": checked}


def bench_cocotb(config, sim, mode, tiles, tile_k, build_root=None):
    """One cocotb measurement; ``mode`` is ``python_every_cycle`` or ``python_waits_for_done``."""
    if mode == "python_every_cycle":
        design, top, free_running = SystolicArray(config), "systolic_array", False
    else:
        design, top, free_running = FreeRunningArray(config, tiles, tile_k), "free_running_array", True
    start = time.perf_counter()
    build = runner.build(design, top, sim=sim, build_root=build_root, free_running=free_running)
    build_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "measurement.json"
        env = {"FPGANET_TB": json.dumps({"config": config.to_dict(), "tiles": tiles, "tile_k": tile_k}),
               "FPGANET_BENCH_OUT": str(out)}
        result = build.run("fpganet.sim.tb_bench", mode, env, log_file=Path(scratch) / "sim.log")
        if not result.ok or not out.exists():
            raise RuntimeError(f"benchmark {mode} on {sim} failed; see {result.results_xml}")
        measurement = json.loads(out.read_text())
    measurement["build_s"] = build_s
    return measurement




def bench_verilator_alone(config, tiles, tile_k, build_root=None):
    """The free-running design under a C++ main, no Python and no VPI: Verilator's own speed."""
    runner.ensure_simulator("verilator")
    text = runner.generate_verilog(FreeRunningArray(config, tiles, tile_k), "free_running_array_core")
    main_cpp = runner.verilator_main("Vfree_running_array_core", "timed_run")
    key = hashlib.sha256(json.dumps([text, main_cpp, runner.VERILATOR_ARGS]).encode()).hexdigest()[:16]
    directory = (Path(build_root) if build_root else runner.default_build_root()) / "sim" / f"verilator-alone-{key}"
    binary = directory / "Vfree_running_array_core"
    start = time.perf_counter()
    if not binary.exists():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "core.v").write_text(text)
        (directory / "main.cpp").write_text(main_cpp)
        subprocess.run(["verilator", "--cc", "--exe", "--build", "-j", "2", *runner.VERILATOR_ARGS,
                        "--top-module", "free_running_array_core", "-Mdir", str(directory),
                        str(directory / "core.v"), str(directory / "main.cpp")],
                       check=True, capture_output=True, text=True)
    build_s = time.perf_counter() - start
    measurement = json.loads(subprocess.run([str(binary)], check=True, capture_output=True,
                                            text=True).stdout)
    checksum = measurement.pop("checksum")
    measurement["checked"] = checksum == expected_checksum(config, tiles, tile_k)
    measurement["build_s"] = build_s
    return measurement


def bench_lenet_rtl(images, chunk=100, sim="verilator"):
    """LeNet-5 on MNIST through the accelerator's RTL: cocotb (Python waits) against native (no Python).

    Returns the report: per driver the wall time, simulated cycles and cycles/s,
    every output checked against the golden model; and the per-layer cycles and
    utilization from the performance model (equal to the RTL by test).
    """
    with tempfile.TemporaryDirectory() as scratch:
        net = compile_model(out_dir=f"{scratch}/lenet5")
    config = net.config
    x, _ = mnist("eval", images)
    q_in = net.quantize_input(x)
    golden = run_golden(net, q_in)
    runs = []
    for driver in ("cocotb", "native"):
        start = time.perf_counter()
        rtl_backend.build_harness(config, sim=sim, driver=driver)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        q, cycles = rtl_backend.run_network_rtl(net, q_in, sim=sim, driver=driver, chunk=chunk)
        wall = time.perf_counter() - start
        runs.append({"driver": driver, "simulator": sim, "images": images, "chunk": chunk,
                     "cycles": int(cycles.sum()), "wall_s": wall, "cycles_per_s": float(cycles.sum() / wall),
                     "build_s": build_s, "checked": bool(np.array_equal(q, golden)),
                     "source": "measured on this machine"})
        print(f"LeNet-5 RTL  {driver:7s} {sim}  {images} images in {wall:6.1f} s  "
              f"{cycles.sum() / wall:>12,.0f} cycles/s  {'checked' if runs[-1]['checked'] else 'WRONG'}",
              flush=True)
    model = simulated_cycles(net, config)
    macs = layer_macs(net)
    layers = [{"layer": layer.name, "op": getattr(layer, "kind", layer.type), "macs": mac, "cycles": cycles,
               "utilization": mac / (config.macs_per_cycle * cycles) if mac and cycles else None}
              for layer, mac, cycles in zip(net.layers, macs, model["per_layer"])]
    conv = [layer for layer in layers if layer["op"] == "conv"]
    return {
        "benchmark": "LeNet-5 on MNIST through the accelerator's generated Verilog",
        "config": config.to_dict(),
        "runs": runs,
        "cocotb_vs_native": runs[0]["cycles_per_s"] / runs[1]["cycles_per_s"],
        "cycles_per_image": model["total"],
        "cycles_source": "simulated (fpganet.perf, equal to the RTL cycle counter by test)",
        "layers": layers,
        "conv_utilization": sum(l["macs"] for l in conv) / (config.macs_per_cycle * sum(l["cycles"] for l in conv)),
        "network_utilization": sum(macs) / (config.macs_per_cycle * model["total"]),
    }


def configure(parser):
    """Arguments of ``fpganet bench``."""
    parser.add_argument("-o", "--output", default="build/bench",
                        help="report folder (default: %(default)s)")
    parser.add_argument("--array", default="4x4", help="array size ROWSxCOLS (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="short runs (for tests of the benchmark itself)")
    parser.add_argument("--lenet-images", type=non_negative_int, default=1000,
                        help="MNIST images for the LeNet-5 RTL run (default %(default)s; 0 skips it)")


def main(argv=None):
    """``python -m fpganet.sim.bench``: the same as ``fpganet bench``."""
    return run_subcommand("bench", configure, run, argv)


def run(args):
    """``fpganet bench``: 0 when every run checked its results, 1 otherwise."""
    # The report folder is refused before minutes of benchmarking, and written whole at the end.
    check_output_directory(args.output, what="report folder")
    config = AcceleratorConfig.parse_array(args.array)
    scale = 0.05 if args.quick else 1.0
    simulators = ["verilator"] + (["icarus"] if shutil.which("iverilog") else [])

    runs = []

    def record(mode, simulator, tiles, tile_k, measurement):
        measurement = {"mode": mode, "simulator": simulator, "tiles": tiles, "tile_k": tile_k,
                       **measurement, "source": "measured on this machine"}
        measurement["cycles_per_s"] = measurement["cycles"] / measurement["wall_s"]
        runs.append(measurement)
        print(f"{mode:24s} {simulator:13s} {measurement['cycles']:>10,d} cycles "
              f"{measurement['wall_s']:7.2f} s  {measurement['cycles_per_s']:>12,.0f} cycles/s"
              f"  {'checked' if measurement['checked'] else 'WRONG RESULTS'}", flush=True)

    tiles, tile_k = 8, max(16, int(2500 * scale))
    record("python_every_cycle", "amaranth.sim", tiles, tile_k, bench_amaranth(config, tiles, tile_k))
    for simulator in simulators:
        tile_k = max(16, int(12_000 * scale)) if simulator == "verilator" else max(16, int(4_000 * scale))
        record("python_every_cycle", simulator, tiles, tile_k,
               bench_cocotb(config, simulator, "python_every_cycle", tiles, tile_k))
        tile_k = max(16, int(2_500_000 * scale)) if simulator == "verilator" else max(16, int(10_000 * scale))
        record("python_waits_for_done", simulator, tiles, tile_k,
               bench_cocotb(config, simulator, "python_waits_for_done", tiles, tile_k))
    tile_k = max(16, int(2_500_000 * scale))
    record("no_python", "verilator", tiles, tile_k, bench_verilator_alone(config, tiles, tile_k))

    report = {
        "benchmark": "simulation speed of the systolic array",
        "unit": "simulated clock cycles per second of wall time",
        "config": config.to_dict(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "runs": runs,
    }
    output = Path(args.output)
    reports = {"sim_speed.json": report}
    checked = all(run["checked"] for run in runs)
    if args.lenet_images:
        lenet = bench_lenet_rtl(args.lenet_images if not args.quick else 20)
        lenet["machine"] = report["machine"]
        reports["lenet_rtl.json"] = lenet
        print(f"cocotb / native: {lenet['cocotb_vs_native']:.0%}; conv-layer utilization "
              f"{lenet['conv_utilization']:.1%}, whole network {lenet['network_utilization']:.1%}")
        checked = checked and all(run["checked"] for run in lenet["runs"])
    with staged_directory(output, what="report folder") as staging:
        for name, data in reports.items():
            (staging / name).write_text(json.dumps(data, indent=2) + "\n")
    for name in reports:
        print(f"wrote {output / name}")
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
