"""The networks on each board: accuracy, cycles, images/s, chip watts, as results rows.

For each network and board configuration this compiles the network (``fpganet compile``),
runs its golden model on the test images (the RTL equals it bit for bit, by test), times the
compiled program with the cycle model (the RTL's counter equals it, by test), and estimates
images/s and chip power (``fpganet estimate --json``; with ``--synth DIR`` at each board's
routed clock from ``DIR/BOARD/report.json``, or for a board's variant
``DIR/BOARD-VARIANT/report.json``). With ``--rtl-images N`` the cases marked for it also run
their first N test images on the RTL and record the share whose outputs equal the golden
model's and whose cycles equal the cycle model's. The int8 TFLite models are also compared with
LiteRT's reference kernels, and FINN's QONNX networks (TFC, and CNV from BNN-PYNQ's trained
parameters, ``benchmarks/cnv_bnn_pynq.py``) with qonnx's executor. GPU rows
(batch 1 and large batch) come from the estimator's
published figures and roofline, for LeNet-5 and CNV-W1A1.

Usage::

    .venv/bin/python benchmarks/networks.py --synth build/synth     # every network it finds
    .venv/bin/python benchmarks/networks.py --networks lenet5
    .venv/bin/python benchmarks/networks.py --networks resnet8 --synth build/synth --rtl-images 200

Writes ``benchmarks/results/networks.json`` (``-o``). The MLPerf Tiny networks need the
shared test material (``../shared/models/mlperf-tiny``); without it they are skipped with a
note.
"""

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from fpganet.backends import run_network
from fpganet.boards.build import build_name
from fpganet.codegen.images import read_images
from fpganet.compiler import load_compiled
from fpganet.datasets import mlperf_tiny, mlperf_tiny_dir, mnist, write_inputs
from fpganet.errors import FpganetError
from fpganet.results import check_rows, make_row, write_rows

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results"
SHARED = "../shared/models/mlperf-tiny"
QONNX = "../shared/models/qonnx"
FPGANET = "fpganet"

#: (network, board, configuration, compile arguments after the model, test set, and
#: optionally ``{"rtl": True}``: run on the RTL with ``--rtl-images``). ``{calib}`` is the
#: calibration file this script writes; the shared models are named by their path under
#: ``../shared`` as a user types it. A configuration that names a board variant
#: (``--variant``) is estimated with that variant's build.
CASES = [
    ("lenet5", "none", "batch 1", [], "mnist"),
    ("lenet5", "icebreaker", "batch 1", ["--board", "icebreaker"], "mnist"),
    ("lenet5", "icebreaker", "batch 2", ["--board", "icebreaker", "--batch", "2"], "mnist"),
    ("lenet5", "ulx3s", "batch 1", ["--board", "ulx3s"], "mnist"),
    ("resnet8", "ulx3s", "batch 1",
     [f"{SHARED}/resnet8.onnx", "--calib", "{calib}", "--board", "ulx3s"], "resnet8"),
    # The UP5K holds ResNet-8 with its activations in SPRAM and most weights at 4 bits, packed;
    # the first two convolutions and the dense layer keep 8 (benchmarks/lowbit_ptq.py).
    ("resnet8", "icebreaker", "spram-activations, 4-bit weights",
     [f"{SHARED}/resnet8.onnx", "--calib", "{calib}", "--board", "icebreaker", "--variant",
      "spram-activations", "--weight-bits", "4", "--layer-weight-bits", "0=8,1=8,13=8"],
     "resnet8", {"rtl": True}),
    ("vww", "ulx3s", "batch 1",
     [f"{SHARED}/vww_mobilenetv1_025.onnx", "--calib", "{calib}", "--board", "ulx3s"], "vww"),
    ("tfc-w1a1", "icebreaker", "batch 1", [f"{QONNX}/TFC_1W1A.onnx", "--board", "icebreaker"],
     "mnist-pixels"),
    ("tfc-w1a1", "ulx3s", "batch 1", [f"{QONNX}/TFC_1W1A.onnx", "--board", "ulx3s"],
     "mnist-pixels"),
    ("tfc-w2a2", "icebreaker", "batch 1", [f"{QONNX}/TFC_2W2A.onnx", "--board", "icebreaker"],
     "mnist-pixels"),
    ("tfc-w2a2", "ulx3s", "batch 1", [f"{QONNX}/TFC_2W2A.onnx", "--board", "ulx3s"],
     "mnist-pixels"),
    # FINN's CNV-W1A1 as BNN-PYNQ trained it (benchmarks/cnv_bnn_pynq.py), its +-1 weights
    # eight to a byte on the ULX3S's binary-weights variant.
    ("cnv-w1a1", "ulx3s", "binary-weights",
     ["{cnv}", "--board", "ulx3s", "--variant", "binary-weights"], "cifar-unit", {"rtl": True}),
    ("resnet8-int8-tflite", "ulx3s", "tflite requantization",
     [f"{SHARED}/resnet8_int8.tflite", "--board", "ulx3s", "--requant-mode", "tflite"], "resnet8"),
    ("vww-int8-tflite", "ulx3s", "tflite requantization",
     [f"{SHARED}/vww_mobilenetv1_025_int8.tflite", "--board", "ulx3s", "--requant-mode", "tflite"],
     "vww"),
]

#: MLPerf Tiny's published FPGA results for image classification beside ResNet-8: (network,
#: board, round, top-1 %, inferences/s, uJ an inference of the whole board, median), from the
#: public results repositories as the reference notes gather them.
MLPERF_PUBLISHED = [
    ("hls4ml-rn08", "pynq-z2", "MLPerf Tiny v1.0 open", 83.5, 130.8, 12266),
    ("finn-cnv-w1a1", "pynq-z2", "MLPerf Tiny v0.7 open", 84.5, 661.5, 2530),
]
MLPERF_SOURCE = ("MLPerf Tiny results (public repositories mlcommons/tiny_results_v0.7 and _v1.0, "
                 "results/*/results.txt; energy of the whole board, median), as gathered in "
                 "../shared/reference/figures.md (beside the checkout); hls4ml's RN08 is "
                 "ResNet-8 without its skip connections, FINN's CNV-W1A1 a binary CNN")

#: GPUs of the comparison, estimated for LeNet-5 (``fpganet estimate --gpu KEY``).
GPUS = ("t4", "a100-sxm", "l4", "orin-nano")


def _fpganet(*args, cwd):
    result = subprocess.run([sys.executable, "-m", "fpganet", *args], cwd=cwd,
                            capture_output=True, text=True)
    if result.returncode:
        raise FpganetError(f"fpganet {' '.join(args)}: {result.stderr.strip() or result.stdout}")
    return result.stdout


def _test_set(name, work, layout="nchw"):
    """(x, y, calibration file or None) of a case's test set, x in ``layout`` (the network's:
    NHWC for a TFLite model, as the calibration file of the float ONNX models is not)."""
    if name == "mnist":
        x, y = mnist("eval")
        return x, y, None
    if name == "mnist-pixels":      # FINN's TFC networks: raw pixels, all 10,000 test images
        x, y = mnist("all", unit=True)
        return x, y, None
    if name == "cifar-unit":        # FINN's CNV: the CIFAR-10 test images' pixels over 255
        x, y = mlperf_tiny("resnet8", "test", layout=layout)
        return (x / 255).astype(np.float32), y, None
    x, y = mlperf_tiny(name, "test", layout=layout)
    calib = Path(work) / f"{name}_calib.npz"
    if not calib.exists():
        write_inputs(calib, mlperf_tiny(name, "calib")[0])
    return x, y, calib


def measure_case(network, board, configuration, compile_args, test_set, work, synth=None,
                 activity="rtl", rtl_images=0):
    """The rows of one case; with ``rtl_images``, its first that many test images on the RTL."""
    x, y, calib = _test_set(test_set, work, "nhwc" if network.endswith("-tflite") else "nchw")
    out = Path(work) / f"{network}-{board}-{configuration.replace(' ', '-')}"
    cnv = Path(work) / "cnv_w1a1.onnx"
    if "{cnv}" in compile_args and not cnv.exists():
        from cnv_bnn_pynq import write_model
        write_model(cnv)
    args = [arg.replace("{calib}", str(calib)).replace("{cnv}", str(cnv)) for arg in compile_args]
    shown = [arg.replace("{calib}", f"CALIB_{test_set.upper()}.npz")
             .replace("{cnv}", "cnv_w1a1.onnx") for arg in compile_args]
    _fpganet("compile", *args, "-o", str(out), cwd=ROOT)
    compile_command = shlex.join([FPGANET, "compile", *shown, "-o", "OUT"])
    if "{cnv}" in compile_args:
        compile_command = f"python benchmarks/cnv_bnn_pynq.py qonnx -o cnv_w1a1.onnx; {compile_command}"
    rows = []

    def add(metric, value, basis, command, **extra):
        rows.append(make_row(network, board, configuration, metric, value, basis, command,
                             **extra))

    net = load_compiled(out)
    golden = run_network(net, x, backend="golden")
    inputs = {"mnist": "the MNIST eval split (9,500 images)",
              "mnist-pixels": "the 10,000 MNIST test images"}.get(
        test_set, f"the {len(x)} MLPerf Tiny test images{' over 255' * (test_set == 'cifar-unit')}")
    add("top1", 100 * golden.accuracy(y), "model",
        f"{compile_command}; fpganet run OUT --backend golden  # on {inputs}")
    add("macs_per_image", net.macs, "model", compile_command)
    add("weight_bytes", read_images(out).weights.size, "model", compile_command)
    if network.endswith("-tflite"):
        rows += _litert_rows(network, board, configuration, compile_command, net, x, golden,
                             args[0])
    if network.startswith(("tfc-", "cnv-")):
        rows += _qonnx_rows(network, board, configuration, compile_command, net, x, golden,
                            args[0])
    if rtl_images:
        rows += _rtl_rows(network, board, configuration, compile_command, net, out, x[:rtl_images],
                          golden.q[:rtl_images])
    estimate_args = ["estimate", str(out), "--json", "--no-measure"]
    shown_estimate = [FPGANET, "estimate", "OUT"]
    if board != "none":
        estimate_args += ["--board", board, "--activity", activity]
        shown_estimate += ["--board", board, "--activity", activity]
        build = build_name(board, args[args.index("--variant") + 1] if "--variant" in args else None)
        report = Path(synth or "", build, "report.json")
        if synth and report.exists():
            estimate_args += ["--report", str(report)]
            shown_estimate += ["--report", f"build/synth/{build}/report.json"]
    estimate = json.loads(_fpganet(*estimate_args, cwd=ROOT))
    estimate_command = f"{compile_command}; {shlex.join(shown_estimate)}"
    add("cycles_per_image", estimate["cycles_per_image"]["value"], "model", estimate_command)
    if board != "none":
        for metric, value in _fpga_figures(estimate):
            add(metric, value, "estimated", estimate_command)
    if network == "lenet5" and board == "icebreaker" and configuration == "batch 1" \
            or network == "cnv-w1a1":
        rows += _gpu_rows(out, network)
    return rows


def _fpga_figures(estimate):
    """(metric, value) of the FPGA's estimate, compute-bound and over the host link."""
    throughput = estimate["fpga"]["throughput"]
    # The estimate's compute-bound row is its "what if" beside a link-bound one; a network the
    # link keeps up with has none, its own row being compute-bound.
    compute = (estimate["fpga"]["what_if"] or [estimate])[0]
    return [("images_per_s_compute", throughput["compute_images_per_s"]["value"]),
            ("images_per_s_delivered", throughput["images_per_s"]["value"]),
            ("watts_chip_compute", compute["watts"]["value"]),
            ("watts_chip_delivered", estimate["fpga"]["power"]["total"]["value"]),
            ("images_per_s_per_w_chip", compute["images_per_s_per_w"]["value"]),
            ("uj_per_inference_chip", 1e6 * compute["joules_per_image"]["value"])]


def _gpu_rows(out, network="lenet5"):
    """``network`` on the GPUs of :data:`GPUS`: the estimator's batch-1 and large-batch rows."""
    args = ["estimate", str(out), "--json", "--no-measure"]
    for gpu in GPUS:
        args += ["--gpu", gpu]
    estimate = json.loads(_fpganet(*args, cwd=ROOT))
    command = shlex.join([FPGANET, "estimate", "OUT", *args[4:]])
    return gpu_result_rows(network, estimate["gpus"], command)


def gpu_result_rows(network, gpus, command):
    """Results rows of an estimate's GPU rows (its JSON's ``gpus``): batch 1 and large batch,
    images/s, board watts and images/s/W, each published or estimated as the estimate says."""
    rows = []
    for entry in gpus:
        regime = "batch 1" if entry["batch"] == 1 else "large batch"
        for metric, field in (("images_per_s_compute", "images_per_s"),
                              ("watts_board", "watts"),
                              ("images_per_s_per_w_board", "images_per_s_per_w")):
            figure = entry[field]
            published = figure["source"] == "published"
            rows.append(make_row(network, entry["key"], regime, metric, figure["value"],
                                 "published" if published else "estimated", command,
                                 source=figure["basis"] if published else None))
    return rows


def _litert_rows(network, board, configuration, command, net, x, golden, tflite):
    """Agreement of the golden model's int8 outputs with LiteRT's reference kernels."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from tflite_mlperf import litert, litert_input, run_litert

    reference, _ = run_litert(litert(ROOT / tflite), litert_input(net, x))
    reference = reference.reshape(len(x), -1)
    ours = golden.q.reshape(len(x), -1)
    measured = f"{command}; python benchmarks/tflite_mlperf.py --requant-mode tflite"
    return [make_row(network, board, configuration, "agreement_outputs",
                     100 * np.mean(ours == reference), "model", measured),
            make_row(network, board, configuration, "agreement_top1",
                     100 * np.mean(ours.argmax(1) == reference.argmax(1)), "model", measured)]


def mlperf_published_rows():
    """:data:`MLPERF_PUBLISHED` as results rows (basis ``published``)."""
    rows = []
    for network, board, configuration, top1, rate, energy in MLPERF_PUBLISHED:
        for metric, value in (("top1", top1), ("images_per_s_delivered", rate),
                              ("uj_per_inference_board", energy)):
            rows.append(make_row(network, board, configuration, metric, value, "published",
                                 "python benchmarks/networks.py --networks resnet8",
                                 source=MLPERF_SOURCE))
    return rows


def bnn_pynq_published_rows():
    """BNN-PYNQ's own top-1 of CNV-W1A1 on its overlay, beside the network it publishes."""
    return [make_row("cnv-w1a1", "pynq-z2", "BNN-PYNQ overlay, 10,000 test images", "top1",
                     79.22, "published", "python benchmarks/networks.py --networks cnv-w1a1",
                     source="Xilinx/BNN-PYNQ, notebooks/CNV-QNN_Cifar10_Testset.ipynb (commit "
                            "d39c1c7), the output of its accuracy cell")]


#: The metrics of :func:`_rtl_rows`, kept from the last run that measured them.
RTL_METRICS = ("rtl_bit_exact", "rtl_cycles_exact")


def _rtl_rows(network, board, configuration, command, net, out, x, golden_q):
    """The share of ``x``'s images whose outputs on the RTL (Verilator) equal the golden
    model's, and whose cycle counts (the accelerator's STAMPs) equal the cycle model's."""
    from fpganet.sim.rtl_backend import model_cycles, run_network_rtl

    q, cycles = run_network_rtl(net, net.quantize_input(x), compiled=out)
    expected = np.fromiter(model_cycles(net, len(x), compiled=out), dtype=np.int64)
    exact = np.all(q.reshape(len(x), -1) == golden_q.reshape(len(x), -1), axis=1)
    measured = f"{command}; fpganet run OUT --backend rtl --limit {len(x)}"
    print(f"{network} on {board}: {int(exact.sum())} of {len(x)} images equal golden on the RTL, "
          f"{int(np.sum(cycles == expected))} at the modelled cycles", flush=True)
    return [make_row(network, board, configuration, "rtl_bit_exact", 100 * np.mean(exact),
                     "rtl", measured),
            make_row(network, board, configuration, "rtl_cycles_exact",
                     100 * np.mean(cycles == expected), "rtl", measured)]


def _qonnx_rows(network, board, configuration, command, net, x, golden, model):
    """Agreement of the golden model's answers with qonnx's executor on the same model."""
    from fpganet.model.qonnx_reference import qonnx_execute

    reference = qonnx_execute(ROOT / model, x)
    measured = f"{command}; fpganet run OUT --backend golden, qonnx's execute_onnx on the model"
    return [make_row(network, board, configuration, "agreement_top1",
                     100 * np.mean(golden.q.reshape(len(x), -1).argmax(1)
                                   == reference.argmax(1)), "model", measured)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", help="comma-separated networks of the cases (default all)")
    parser.add_argument("--boards", help="comma-separated boards of the cases (default all)")
    parser.add_argument("--synth", metavar="DIR",
                        help="folder of `fpganet synth` outputs, DIR/BOARD/report.json (a "
                             "board variant's DIR/BOARD-VARIANT/report.json)")
    parser.add_argument("--activity", default="rtl",
                        help="the estimator's switching activity (default rtl: measured on the "
                             "RTL running the network, minutes for the MLPerf Tiny networks)")
    parser.add_argument("--rtl-images", type=int, default=0, metavar="N",
                        help="run the first N test images of the cases marked for it on the "
                             "RTL (Verilator; seconds an image for ResNet-8); without it their "
                             "RTL rows are kept as they are")
    parser.add_argument("-o", "--output", default=str(RESULTS / "networks.json"))
    args = parser.parse_args(argv)
    wanted = set(args.networks.split(",")) if args.networks else None
    unknown = sorted(wanted - {case[0] for case in CASES}) if wanted else []
    if unknown:
        parser.error(f"--networks: unknown network {unknown[0]!r} "
                     f"(known: {', '.join(dict.fromkeys(case[0] for case in CASES))})")
    boards = set(args.boards.split(",")) if args.boards else None
    known_boards = {case[1] for case in CASES}
    if args.rtl_images < 0:
        parser.error(f"--rtl-images must be 0 or more, not {args.rtl_images}")
    if boards and (unknown := sorted(boards - known_boards)):
        parser.error(f"--boards: unknown board {unknown[0]!r} (known: {', '.join(sorted(known_boards))})")
    try:
        rows = _measure(wanted, boards, args)
        if (wanted or boards) and Path(args.output).exists():      # keep the other cases' rows
            kept = check_rows(json.loads(Path(args.output).read_text()), args.output)
            new_keys = {row.key for row in rows}
            rows += [row for row in kept if row.key not in new_keys and (
                wanted and row.network not in wanted or boards and row.board not in boards
                or row.metric in RTL_METRICS and not args.rtl_images)]
        write_rows(args.output, rows)
    except (FpganetError, OSError, ValueError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(rows)} rows")
    return 0


def _measure(wanted, boards, args):
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for network, board, configuration, compile_args, test_set, *marks in CASES:
            if wanted and network not in wanted or boards and board not in boards:
                continue
            shared = QONNX if test_set == "mnist-pixels" else SHARED
            if not test_set.startswith("mnist") and not (ROOT / SHARED).is_dir() \
                    or test_set == "mnist-pixels" and not (ROOT / QONNX).is_dir():
                print(f"{network}: skipped, no {shared}", file=sys.stderr)
                continue
            rtl = args.rtl_images if marks and marks[0].get("rtl") else 0
            case = measure_case(network, board, configuration, compile_args, test_set, work,
                                args.synth, args.activity, rtl)
            print(f"{network} on {board}, {configuration}: {len(case)} rows", flush=True)
            rows += case
            if network == "resnet8" and board == "icebreaker":
                rows += mlperf_published_rows()
            if network == "cnv-w1a1":
                rows += bnn_pynq_published_rows()
    return rows


if __name__ == "__main__":
    sys.exit(main())
