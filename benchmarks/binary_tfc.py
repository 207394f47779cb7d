"""FINN's TFC_1W1A on the binary network engine, and its TFC_2W2A on the low-bit one, behind a
board's UART host link: routed builds (resources, Fmax), the device's cycles, and the
estimate of its images/s, chip watts and images/s/W beside the GPUs', as results rows of
``benchmarks/results/binary.json``.

Each build is ``fpganet compile --engine UNIT --board B --pe P --simd S`` then
``fpganet synth`` of that folder, through the same functions. The cycles an image are the
device's timing model (one START an image: its input bytes, the layers, its counts out),
which its RTL's stamp equals by test (tests/test_binary_device.py, tests/test_binary_target.py);
images/s compute-bound are those cycles at the routed Fmax or the target clock, whichever is
lower, and the watts are the chip power model's on the routed resources, its logic at the
switching activity counted on the engine's Verilog over a test image (``fpganet estimate OUT
--report --activity rtl``). The GPU rows are the estimator's for the same network.
Nothing here ran on a board.

The builds named on the command line replace their rows; the rows of other builds stay. A
build refused before its tools run (a design the board cannot hold) is printed with why.

Usage::

    .venv/bin/python benchmarks/binary_tfc.py                       # TFC_1W1A's default builds
    .venv/bin/python benchmarks/binary_tfc.py --builds icebreaker:4x16
    .venv/bin/python benchmarks/binary_tfc.py --network tfc-w2a2 --builds ulx3s:8x32
"""

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path

from fpganet.argtypes import positive_int
from fpganet.boards.binary import binary_core
from fpganet.boards.build import BOARDS, build
from fpganet.codegen.binary_images import build_binary_images, read_binary_images
from fpganet.compiler import compile_model, load_compiled
from fpganet.hdl.memories import WeightBuffer
from fpganet.datasets import qonnx_model
from fpganet.errors import FpganetError
from fpganet.estimate.binary import binary_estimate
from fpganet.results import ResultsError, check_rows, make_row, write_rows

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from networks import gpu_result_rows  # noqa: E402
#: Each network's engine unit.
NETWORKS = {"tfc-w1a1": "binary", "tfc-w2a2": "lowbit"}
#: ``(board, pe, simd)`` built when none is named, per network.
DEFAULT_BUILDS = {
    "tfc-w1a1": (("icebreaker", 4, 16), ("icebreaker", 8, 16), ("icebreaker", 8, 32),
                 ("ulx3s", 8, 32), ("ulx3s", 16, 64)),
    "tfc-w2a2": (("icebreaker", 2, 16, True), ("ulx3s", 8, 32), ("ulx3s", 16, 64)),
}
#: GPUs of the comparison (``fpganet estimate --gpu KEY``).
GPUS = ("t4", "a100-sxm", "l4", "orin-nano")


#: Seconds a build may take before it is stopped (a router that does not converge on a
#: seed never finishes by itself); the next seed is then tried.
BUILD_TIMEOUT_S = 300


def _builds(text):
    builds = []
    for item in text.split(","):
        board, _, fold = item.partition(":")
        fold, _, where = fold.partition(":")
        pe, _, simd = fold.partition("x")
        if (board not in BOARDS or not pe.isdigit() or not simd.isdigit()
                or not int(pe) * int(simd) or where not in ("", "host")):
            raise argparse.ArgumentTypeError(f"'{item}' is not BOARD:PExSIMD[:host] with a board "
                                             f"of {', '.join(BOARDS)}")
        builds.append((board, int(pe), int(simd), where == "host"))
    return builds


def _label(board, pe, simd, host=False):
    return f"{board}:{pe}x{simd}" + (":host" if host else "")


@functools.cache
def configuration_of(network, pe, simd, host=False):
    """The rows' configuration of ``network`` folded ``pe`` x ``simd``: its engine's
    description (and where its weights are, when the host loads them)."""
    net = compile_model(qonnx_model(network))
    description = build_binary_images(net, pe, simd, NETWORKS[network]).folded.description
    return description + (", weights loaded" if host else "")


def build_rows(network, board_name, pe, simd, host, build_dir, command, seeds=1,
               timeout_s=BUILD_TIMEOUT_S):
    """The rows of one build: routed resources and Fmax, the device's cycles, the estimate."""
    board = BOARDS[board_name]
    configuration = configuration_of(network, pe, simd, host)

    def row(metric, value, basis):
        return make_row(network, board_name, configuration, metric, value, basis, command)
    with tempfile.TemporaryDirectory(prefix="binary-tfc-") as scratch:
        out = Path(scratch) / "tfc"
        compile_model(qonnx_model(network), out_dir=out, config=board.default_config,
                      board=board_name, engine=(NETWORKS[network], pe, simd, host))
        net = load_compiled(out)
        images = read_binary_images(out, net)
        base = Path(build_dir) / f"{network}-{board_name}-{pe}x{simd}{'-host' if host else ''}"
        weights = (board.weight_buffer or WeightBuffer) if host else None
        # The seed `fpganet synth` would use first, then others until one meets timing; the
        # best is kept.
        best = None
        first = board.engine_seed(NETWORKS[network])
        for seed in [first, *(s for s in range(1, seeds + 1) if s != first)][:seeds]:
            output = base / f"seed{seed}"
            try:
                report = build(board, net.config, output, seed=seed, timeout_s=timeout_s,
                               core=binary_core(images.folded, weights))
            except FpganetError as error:     # not routed on this seed
                print(f"{board_name} {configuration} seed {seed}: {error}", file=sys.stderr,
                      flush=True)
                continue
            if best is None or report["fmax_mhz"] > best[0]["fmax_mhz"]:
                best = report, output
            if report["timing_met"]:
                break
        if best is None:
            raise FpganetError(f"no seed of {seeds} routed")
        report, output = best
        # The logic's switching activity from toggle counts of a vector on the engine's
        # Verilog, not the stated default.
        estimate = binary_estimate(net, images, board=board_name,
                                   board_report=output / "report.json", measure=False,
                                   gpus=GPUS, activity="rtl", cache_dir=Path(build_dir) / "activity")
    compute = (estimate.fpga_extra_rows or [estimate.fpga_row])[0]
    rows = [row("fmax_mhz", report["fmax_mhz"], "routed"),
            row("seed", report["seed"], "routed"),
            row("clock_mhz", report["clock"]["target_mhz"], "routed"),
            row("build_s", report["runtime_s"], "routed"),
            row("cycles_per_image", estimate.cycles.value, "model"),
            row("images_per_s_compute", estimate.performance["compute_images_per_s"].value,
                "model"),
            row("images_per_s_delivered", estimate.performance["images_per_s"].value, "model"),
            row("watts_chip_compute", compute["watts"].value, "estimated"),
            row("watts_chip_delivered", estimate.fpga_row["watts"].value, "estimated"),
            row("images_per_s_per_w_chip", compute["images_per_s_per_w"].value, "estimated"),
            row("uj_per_inference_chip", 1e6 * compute["joules_per_image"].value, "estimated")]
    for name, metric in {"LC": "luts", "LUT4": "luts", "FF": "ffs", "EBR": "brams",
                         "SPRAM": "sprams"}.items():
        if report["resources"].get(name, {}).get("used"):
            rows.append(row(metric, report["resources"][name]["used"], "routed"))
    if not report["timing_met"]:
        print(f"{board_name} {configuration}: timing not met ({report['fmax_mhz']:.1f} MHz)",
              file=sys.stderr)
    return rows, estimate


def _kept(path, replaced, networks):
    """The rows of ``path`` that no build in ``replaced`` (network, board, configuration) makes
    again, and the GPU rows of networks other than ``networks`` (whose GPU rows are made
    again)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    try:
        rows = check_rows(data, str(path))
    except ResultsError:
        return []
    return [row for row in rows if (row.network, row.board, row.configuration) not in replaced
            and (row.board in BOARDS or row.network not in networks)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", choices=NETWORKS, default="tfc-w1a1",
                        help="the network and so the engine's unit (default tfc-w1a1: binary)")
    parser.add_argument("--builds", type=_builds, metavar="BOARD:PExSIMD[:host],...",
                        help="builds to make, ':host' where the host loads the weights "
                             "(default: the network's, " + "; ".join(
                                 f"{n}: " + ",".join(_label(*build) for build in builds)
                                 for n, builds in DEFAULT_BUILDS.items()) + ")")
    parser.add_argument("--seeds", type=positive_int, default=1, metavar="N",
                        help="placement seeds tried per build, the board's first, until one "
                             "meets timing; the best is kept (default 1)")
    parser.add_argument("--timeout", type=positive_int, default=BUILD_TIMEOUT_S, metavar="S",
                        help=f"seconds a build may take before the next seed is tried "
                             f"(default {BUILD_TIMEOUT_S})")
    parser.add_argument("--build-dir", default=str(ROOT / "build/synth-binary"))
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/binary.json"))
    args = parser.parse_args(argv)
    network = args.network
    builds = args.builds or DEFAULT_BUILDS[network]
    rows, estimate = [], None
    for board, pe, simd, *host in builds:
        host = bool(host and host[0])
        command = (f"python benchmarks/binary_tfc.py --network {network} "
                   f"--builds {_label(board, pe, simd, host)} --seeds {args.seeds}"
                   + (f" --timeout {args.timeout}" if args.timeout != BUILD_TIMEOUT_S else ""))
        try:
            built, estimate = build_rows(network, board, pe, simd, host, args.build_dir,
                                         command, args.seeds, args.timeout)
        except FpganetError as error:     # a build that does not route: its rows go
            print(f"{_label(board, pe, simd, host)}: {error}", file=sys.stderr, flush=True)
            continue
        rows += built
        for r in built:
            print(f"{board:10s} {r.configuration:20s} {r.metric:24s} {r.value:14,.3f} {r.unit} "
                  f"({r.basis})", flush=True)
    replaced = {(network, board, configuration_of(network, pe, simd, bool(host and host[0])))
                for board, pe, simd, *host in builds}
    networks = set()
    if estimate is not None:
        networks.add(network)
        rows += gpu_result_rows(network, json.loads(estimate.to_json())["gpus"],
                                f"python benchmarks/binary_tfc.py --network {network}")
    write_rows(args.output, _kept(args.output, replaced, networks) + rows)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FpganetError as error:
        print(f"binary_tfc: error: {error}", file=sys.stderr)
        sys.exit(2)
