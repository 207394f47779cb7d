"""``make sim``: the main job.

Compiles the embedded LeNet-5 (trained elsewhere, calibrated on MNIST test
images 0..499) for the accelerator, runs MNIST test images from 500 on through
the accelerator's generated Verilog (Verilator through cocotb, ``SIM=icarus``
for Icarus; memories loaded up front, Python waiting only for the end of each
chunk), checks every output against the golden model bit for bit, and prints
the accuracy, the cycles per image, the per-layer utilization and the images/s
at the configured clock.

``make sim NET=resnet8`` (or ``vww``) does the same for an MLPerf Tiny network of the
shared test material (:func:`fpganet.datasets.mlperf_tiny`): the float ONNX model
calibrated on its calibration images, compiled for the ULX3S configuration (the board
whose block RAM holds it), run on its 200 labelled test images.
"""

import sys
import tempfile
import time

import numpy as np
from tqdm import tqdm

from fpganet.argtypes import positive_int
from fpganet.backends import run_network
from fpganet.boards.ulx3s import DEFAULT_CONFIG
from fpganet.command_line import run_subcommand
from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig
from fpganet.datasets import mlperf_tiny, mlperf_tiny_model, mnist
from fpganet.estimate.workload import simulated_cycles
from fpganet.golden import layer_macs
from fpganet.qnet import layer_kind, short_name
from fpganet.sim import rtl_backend
from fpganet.sim.runner import default_simulator


#: ``--net``: name -> what it is, as the report says.
NETS = {"lenet5": "LeNet-5 (trained elsewhere, int8) on {n} MNIST test images",
        "resnet8": "MLPerf Tiny ResNet-8 (int8, post-training quantization) on {n} CIFAR-10 test images",
        "vww": "MLPerf Tiny MobileNetV1-0.25 VWW (int8, post-training quantization) on {n} "
               "Visual Wake Words test images"}


def _network(args, scratch):
    """``(net, config, x, y, first)``: the compiled network, its configuration, the test images
    and labels, and the index of the first image in its test set."""
    if args.net == "lenet5":
        config = AcceleratorConfig()
        if args.array:
            config = AcceleratorConfig.parse_array(args.array)
        net = compile_model(out_dir=f"{scratch}/net", config=config)
        x, y = mnist("eval", args.images or 300)
        return net, config, x, y, 500

    config = DEFAULT_CONFIG
    if args.array:
        array = AcceleratorConfig.parse_array(args.array)
        config = config.replace(rows=array.rows, cols=array.cols)
    calib, _ = mlperf_tiny(args.net, "calib")
    net = compile_model(mlperf_tiny_model(args.net), calib, out_dir=f"{scratch}/net", config=config)
    x, y = mlperf_tiny(args.net, "test")
    limit = args.images or len(x)
    return net, config, x[:limit], y[:limit], 0


def configure(parser):
    """Arguments of ``fpganet sim``."""
    parser.add_argument("--net", choices=NETS, default="lenet5",
                        help="network: the embedded LeNet-5 on MNIST (default), or an MLPerf Tiny "
                             "network of the shared test material on the ULX3S configuration")
    parser.add_argument("--images", type=positive_int, default=None,
                        help="test images to run (default: 300 for LeNet-5, all 200 for the "
                             "MLPerf Tiny networks)")
    parser.add_argument("--array", default=None,
                        help="array size ROWSxCOLS (default: the network's configuration)")
    parser.add_argument("--chunk", type=positive_int, default=50,
                        help="images per simulation run (default %(default)s)")


def main(argv=None):
    """``python -m fpganet.sim.main``: the same as ``fpganet sim``."""
    return run_subcommand("sim", configure, run, argv)


def run(args):
    """``fpganet sim``: 0 when every output equals the golden model and the RTL's cycles equal
    the performance model's, 1 otherwise (errors propagate as FpganetError)."""
    with tempfile.TemporaryDirectory() as scratch:
        net, config, x, y, first = _network(args, scratch)

    sim = default_simulator()
    macs = layer_macs(net)
    print(f"fpganet sim: {NETS[args.net].format(n=len(x))} through the accelerator's generated "
          f"Verilog on {sim}")
    print(f"  compiled  {len(net.layers)} layers, {sum(macs):,} MACs/image, {config.name} array "
          f"({config.macs_per_cycle} MACs/cycle) at {config.clock_hz / 1e6:g} MHz")
    start = time.perf_counter()
    rtl_backend.build_harness(config, sim=sim, driver="cocotb")
    print(f"  built     {sim} harness for cocotb in {time.perf_counter() - start:.1f} s "
          f"(cached under build/sim/)")

    q_in = net.quantize_input(x)
    start = time.perf_counter()
    # On stderr, so that stdout holds the report alone.
    with tqdm(total=len(q_in), desc="  simulate", unit="image", file=sys.stderr,
              ascii=not sys.stderr.isatty()) as bar:
        q_rtl, cycles = rtl_backend.run_network_rtl(
            net, q_in, sim=sim, chunk=args.chunk, progress=lambda done, _: bar.update(done - bar.n))
    wall = time.perf_counter() - start
    golden = run_network(net, x, backend="golden")
    mismatched = np.flatnonzero((q_rtl.reshape(len(x), -1) != golden.q.reshape(len(x), -1)).any(axis=1))
    if mismatched.size:
        print(f"FAILED: {mismatched.size} of {len(x)} images differ from the golden model "
              f"(first: test image {first + mismatched[0]})", file=sys.stderr)
        return 1
    predictions = q_rtl.reshape(len(x), -1).argmax(axis=1)
    accuracy = float(np.mean(predictions == y))
    # The first image of each simulation run also carries the program's prologue.
    steady = cycles[np.arange(len(cycles)) % args.chunk != 0]
    per_image = int(np.median(steady if steady.size else cycles))
    print(f"  check     all {q_rtl.size:,} int8 outputs equal the golden model's, bit for bit")
    print(f"  accuracy  {100 * accuracy:.2f} % top-1 ({int(np.sum(predictions == y))} of {len(x)}; "
          f"test images {first}..{first + len(x) - 1}; measured on the RTL)")
    print(f"  speed     {wall:.1f} s for {int(cycles.sum()):,} simulated cycles "
          f"({cycles.sum() / wall / 1e3:,.0f} k cycles/s of simulation)")

    expected = np.fromiter(rtl_backend.model_cycles(net, len(q_in), chunk=args.chunk), dtype=np.int64)
    differ = np.flatnonzero(expected != cycles)
    model = simulated_cycles(net, config)
    print()
    print(f"  {'layer':<18}{'op':<9}{'MACs':>10}{'cycles':>10}{'utilization':>13}")
    for index, (layer, layer_cycles, layer_mac) in enumerate(zip(net.layers, model["per_layer"], macs)):
        if layer_cycles == 0 and layer_mac == 0:
            continue
        utilization = f"{100 * layer_mac / (config.macs_per_cycle * layer_cycles):.1f} %" if layer_mac else "-"
        print(f"  {short_name(f'{index:>2}', layer.name):<18}{layer_kind(layer):<9}{layer_mac:>10,}{layer_cycles:>10,}{utilization:>13}")
    other = per_image - sum(model["per_layer"])
    print(f"  {'input/output, control':<27}{'':>10}{other:>10,}")
    print(f"  {'whole network':<27}{sum(macs):>10,}{per_image:>10,}"
          f"{100 * sum(macs) / (config.macs_per_cycle * per_image):>11.1f} %")
    print(f"  (cycles per image: the accelerator's own counter in the RTL"
          f"{', the first image carrying the program prologue' if not steady.size else ''}; per "
          f"layer: the performance model's steady state)")
    if differ.size:
        print(f"  cycle model DIFFERS from the RTL on {differ.size} of {len(cycles)} images (first: "
              f"image {differ[0]}, RTL {cycles[differ[0]]:,}, model {expected[differ[0]]:,})")
    else:
        print(f"  cycle model equals the RTL's counter on every image")
    print()
    print(f"  images/s  {config.clock_hz / per_image:,.0f} at {config.clock_hz / 1e6:g} MHz "
          f"(simulated cycles x the configured clock; a routed Fmax comes from `make synth`)")
    return 1 if differ.size else 0


if __name__ == "__main__":
    sys.exit(main())
