"""``fpganet compile --engine binary``: FINN's TFC_1W1A as the binary engine's memory images,
run by the ``isa`` backend (the engine's arithmetic on its words) and the ``rtl`` backend (the
device's Verilog) bit for bit as the golden model, with the device model's stamps; a network
or a fold the engine cannot run, flags of the int8 program, and altered images, each refused
in one line."""

import contextlib
import io
import json
import os

import numpy as np
import pytest
from test_binary_layers import TFC_W1A1, needs_tfc
from test_lowbit_layers import TFC_W2A2

from fpganet.backends import run_network
from fpganet.cli import main
from fpganet.boards.binary import binary_core
from fpganet.boards.build import Refused, check_buildable
from fpganet.boards.icebreaker import BOARD as ICEBREAKER
from fpganet.codegen.binary_images import THRESHOLDS, WEIGHTS, build_binary_images, \
    read_binary_images
from fpganet.compiler import compile_model, load_compiled
from fpganet.datasets import mnist
from fpganet.errors import FpganetError
from fpganet.files import write_sums
from fpganet.golden import run_golden
from fpganet.hdl.binary_device import BinaryDevice
from fpganet.hdl.memories import WeightBuffer
from fpganet.isa import HostSpace
from fpganet.link import BoardLink, load_compiled_job, run_images
from fpganet.link.simport import SimulatedPort
from fpganet.link.transport import LinkError
from fpganet.sim.binary_backend import model_stamp


@needs_tfc
@pytest.mark.parametrize("unit, fold", [("binary", (4, 16)), ("binary", (1, 8)),
                                        ("binary", (8, 8)), ("binary", (16, 32)),
                                        ("lowbit", (2, 4)), ("lowbit", (16, 32))])
def test_the_engine_arithmetic_on_its_words_equals_the_golden_model(tmp_path, unit, fold):
    """Each fold pads differently (pe 2, 4, 8 and 16 of the last layer's 10 channels; 784
    inputs in words of 4 to 32 elements); the low-bit unit runs FINN's TFC_2W2A."""
    out = tmp_path / "tfc"
    compile_model(TFC_W1A1 if unit == "binary" else TFC_W2A2, out_dir=out,
                  engine=(unit, *fold))
    net = load_compiled(out)
    x, _ = mnist("all", unit=True)
    x = x[:300]
    golden = run_network(net, x, backend="golden").q
    assert np.array_equal(run_network(net, x, backend="isa", compiled=out).q, golden)
    layout = json.loads((out / "manifest.json").read_text())[f"{unit}_engine"]
    assert (layout["pe"], layout["simd"]) == fold


@needs_tfc
def test_the_rtl_backend_runs_the_engine_verilog(tmp_path, capsys):
    """The binary engine's Verilog (the low-bit engine's runs in
    test_lowbit_weights_loaded_by_the_host_into_the_weight_buffer)."""
    out, inputs, result = tmp_path / "tfc", tmp_path / "x.npz", tmp_path / "r.npz"
    assert main(["compile", str(TFC_W1A1), "--engine", "binary", "--pe", "8", "--simd", "16",
                 "-o", str(out)]) == 0
    assert main(["mnist", "--unit", "--limit", "40", "-o", str(inputs)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--inputs", str(inputs), "--backend", "rtl",
                 "--out", str(result)]) == 0
    printed = capsys.readouterr().out
    assert "all 400 int8 outputs of the rtl backend equal the golden model's" in printed
    net = load_compiled(out)
    stamp = model_stamp(read_binary_images(out, net), net.config)
    with np.load(result) as data:
        assert data["cycles"].tolist() == [stamp] * 40
    assert f"cycles per image {stamp:,}" in printed


@needs_tfc
@pytest.mark.parametrize("flags, message", [
    (["--engine", "binary", "--pe", "3"],
     "simd (16) must be a multiple of pe (3): a group's output bits are written into one word"),
    (["--engine", "binary", "--pe", "4", "--simd", "12"],
     "the binary engine cannot run 4x12: simd must be a multiple of 8 for a byte input of "
     "1-bit elements, not 12"),
    (["--engine", "lowbit", "--pe", "2", "--simd", "6"],
     "the low-bit engine cannot run 2x6: simd must be a multiple of 8 for a byte input of "
     "1-bit elements, not 6"),
    (["--pe", "4"], "--pe, --simd and --host-weights are the binary or low-bit engine's: "
                    "give them with --engine binary or --engine lowbit"),
    (["--engine", "lowbit", "--pe", "4", "--simd", "16", "--host-weights", "--board",
      "icebreaker"],
     "the low-bit engine cannot run 4x16: a weight word of 4x16 is 128 bits; the weight "
     "buffer's are 64: pe * simd * weight_bits must be 64"),
    (["--engine", "binary", "--batch", "2"],
     "--batch is the int8 array's program's; the binary engine runs one vector a START "
     "(--engine binary)"),
])
def test_a_fold_or_flag_the_engine_cannot_take_is_refused(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    assert main(["compile", str(TFC_W1A1), *flags, "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"fpganet: error: {message}\n"
    assert not out.exists()


def test_a_network_that_is_not_binary_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", "--engine", "binary", "-o", str(out)]) == 2
    assert capsys.readouterr().err == ("fpganet: error: not a network for the binary engine: the "
                                       "network's input codes -128..127 are not one bit\n")
    assert not out.exists()


@needs_tfc
def test_images_that_are_not_the_network_are_refused(tmp_path):
    """Re-signed after an edit (SHA256SUMS rewritten), the images still have to be the
    network's at the manifest's fold; a listing without them vouches for nothing."""
    out = tmp_path / "tfc"
    compile_model(TFC_W1A1, out_dir=out, engine=("binary", 4, 16))
    weights = out / WEIGHTS
    text = weights.read_text()
    weights.write_text(("0" if text[0] != "0" else "1") + text[1:])
    write_sums(out)
    with pytest.raises(FpganetError, match=rf"^'{out / WEIGHTS}' is not network.npz folded 4x16: "
                                           r"compile it again$"):
        load_compiled(out)
    weights.write_text(text)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["binary_engine"]["pe"] = 8
    (out / "manifest.json").write_text(json.dumps(manifest))
    write_sums(out)
    with pytest.raises(FpganetError, match=r"is not network.npz folded 8x16: compile it again$"):
        load_compiled(out)
    manifest["binary_engine"]["pe"] = 4
    (out / "manifest.json").write_text(json.dumps(manifest))
    sums = out / "SHA256SUMS"
    write_sums(out)
    sums.write_text("".join(line for line in sums.read_text().splitlines(keepends=True)
                            if THRESHOLDS not in line))
    with pytest.raises(FpganetError, match=rf"does not list '{THRESHOLDS}'"):
        load_compiled(out)
    assert os.path.exists(out / THRESHOLDS)


@pytest.fixture(scope="module")
def tfc_for_the_icebreaker(tmp_path_factory):
    out = tmp_path_factory.mktemp("binary") / "tfc"
    assert main(["compile", str(TFC_W1A1), "--engine", "binary", "--board", "icebreaker",
                 "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def tfc_built(tfc_for_the_icebreaker, tmp_path_factory):
    """``fpganet synth`` of the folder: yosys and nextpnr-ice40 on the host link and the
    engine, its weights in the bitstream (about 30 s); its status, printout and folder."""
    build = tmp_path_factory.mktemp("binary-build")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = main(["synth", str(tfc_for_the_icebreaker), "-o", str(build)])
    return status, printed.getvalue(), build


@needs_tfc
def test_synth_builds_the_binary_engine_of_a_compiled_folder(tfc_built):
    """Timing is the benchmark's to report, not this test's."""
    status, printed, build = tfc_built
    assert status == 0, printed
    assert "binary engine 4x16, 64 binary MACs/cycle" in printed
    report = json.loads((build / "report.json").read_text())
    assert report["macs_per_cycle"] == 64 and report["core"].endswith("binary_core(4x16)")
    assert report["resources"]["EBR"]["used"] > 0 and (build / report["bitstream"]).stat().st_size


@needs_tfc
def test_estimate_of_the_binary_engine_from_its_routed_build(tfc_for_the_icebreaker, tfc_built,
                                                             capsys):
    """Its cycles are the device's model, its clock the routed report's, its link bytes the
    input bits and the counts; no multiplier, no ASIC row; the GPUs beside it."""
    _, _, build = tfc_built
    assert main(["estimate", str(tfc_for_the_icebreaker), "--no-measure", "--report",
                 str(build / "report.json"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    net = load_compiled(tfc_for_the_icebreaker)
    images = read_binary_images(tfc_for_the_icebreaker, net)
    stamp = model_stamp(images, net.config)
    report = json.loads((build / "report.json").read_text())
    clock = min(report["fmax_mhz"], report["clock"]["pll_mhz"]) * 1e6
    assert result["cycles_per_image"]["value"] == stamp
    assert result["accelerator"]["design"] == "binary engine 4x16"
    throughput = result["fpga"]["throughput"]
    assert throughput["compute_images_per_s"]["value"] == pytest.approx(clock / stamp, rel=1e-6)
    assert (result["network"]["input_bytes"], result["network"]["output_bytes"]) == (98, 24)
    assert throughput["setup_s"]["value"] == 0
    assert result["fpga"]["power"]["components"]["dsp"]["high"] == 0
    assert result["asic"] == [] and len(result["gpus"]) > 0
    assert result["images_per_s_per_w"]["value"] > 0


@needs_tfc
def test_estimate_of_the_binary_engine_needs_its_own_build(tfc_for_the_icebreaker, tfc_built,
                                                           tmp_path, capsys):
    _, _, build = tfc_built
    out = str(tfc_for_the_icebreaker)
    assert main(["estimate", out, "--no-measure"]) == 2
    assert capsys.readouterr().err == (
        "fpganet: error: the binary engine's logic has no model: give --report REPORT.json of "
        "its routed build (fpganet synth OUT writes it)\n")
    other = json.loads((build / "report.json").read_text())
    other["macs_per_cycle"] = 16
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main(["estimate", out, "--no-measure", "--report", str(tmp_path / "other.json")]) == 2
    assert capsys.readouterr().err == (
        f"fpganet: error: the board report '{tmp_path / 'other.json'}' is of a design with 16 "
        f"MACs a cycle, not the binary engine 4x16 (64): give the report of this folder's "
        f"build\n")
    assert main(["estimate", out, "--no-measure", "--synth", "--report",
                 str(build / "report.json")]) == 2
    assert capsys.readouterr().err == (
        f"fpganet: error: --synth is the int8 array's estimate's; '{out}' was compiled for "
        f"an engine in logic cells (--engine binary or lowbit)\n")


@needs_tfc
def test_estimate_of_the_binary_engine_with_its_measured_activity(tfc_for_the_icebreaker,
                                                                  tfc_built, capsys, tmp_path,
                                                                  monkeypatch):
    """--activity rtl: the engine's flip-flops' and signals' toggles over a vector on its
    device's Verilog set the logic's activity, in place of the stated 15-25 %. (The
    measurement is stored under a home of its own: the other estimates here keep the stated
    activity whatever ran before.)"""
    monkeypatch.setenv("HOME", str(tmp_path))
    _, _, build = tfc_built
    results = {}
    for activity in ("default", "rtl"):
        assert main(["estimate", str(tfc_for_the_icebreaker), "--no-measure", "--report",
                     str(build / "report.json"), "--activity", activity, "--json"]) == 0
        results[activity] = json.loads(capsys.readouterr().out)
    measured = results["rtl"]["fpga"]["activity"]
    assert measured["source"] == "simulated"
    assert results["default"]["fpga"]["activity"]["source"] == "published"
    assert "binary engine 4x16's generated Verilog" in measured["logic"]["basis"]
    counts = measured["measurement"]["counts"]
    assert counts["flipflop_bits"] > 500 and counts["operand_bits"] == 0
    assert 0 < measured["logic"]["low"] <= measured["logic"]["high"] < 1
    assert (results["rtl"]["fpga"]["power"]["total"]["value"]
            != results["default"]["fpga"]["power"]["total"]["value"])


@needs_tfc
@pytest.mark.parametrize("argv, message", [
    (["synth", "{out}", "--core", "stand-in", "-o", "{tmp}/b"],
     "'{out}' was compiled for the binary engine (--engine binary), which is its core: give "
     "no --core"),
])
def test_what_does_not_take_a_binary_folder_says_so(tfc_for_the_icebreaker, tmp_path, capsys,
                                                    argv, message):
    where = {"out": str(tfc_for_the_icebreaker), "tmp": str(tmp_path)}
    assert main([arg.format(**where) for arg in argv]) == 2
    assert capsys.readouterr().err == f"fpganet: error: {message.format(**where)}\n"
    assert list(tmp_path.iterdir()) == []


@needs_tfc
def test_board_run_of_a_binary_folder_through_the_link_gateware(tfc_for_the_icebreaker):
    """The job ``fpganet board run`` makes of the folder, through the real driver and the host
    link's gateware (amaranth.sim, byte level) into the binary device: the board's PING names
    the folded network, each image's counts decode to the golden model's codes, its stamp is
    the device model's. A board holding the int8 accelerator, or another network, is refused."""
    out = tfc_for_the_icebreaker
    job = load_compiled_job(out)
    net = load_compiled(out)
    images = read_binary_images(out, net)
    assert job.memories == {}

    def board(design):
        port = SimulatedPort(job.config, design=design,
                             device=lambda config, width: BinaryDevice(images.folded, config,
                                                                       width))
        return BoardLink(port, timeout=5)

    x, _ = mnist("all", unit=True)
    q_in = job.quantize(x[:3])
    run = run_images(board(job.design), job.memories, job.encode(q_in),
                     output_bytes=job.output_bytes, config=job.config, design=job.design)
    assert np.array_equal(job.decode(run.outputs), run_golden(net, q_in))
    assert run.cycles == [model_stamp(images, net.config)] * 3
    for held, wanted in ((0, job.design), (job.design ^ 1, job.design), (job.design, 0)):
        with pytest.raises(LinkError, match=r"^the board holds the (int8 accelerator|fixed-"
                                            r"function design [0-9a-f]{8}), not the "):
            run_images(board(held), job.memories, job.encode(q_in[:1]),
                       output_bytes=job.output_bytes, config=job.config, design=wanted)


@needs_tfc
def test_lowbit_weights_loaded_by_the_host_into_the_weight_buffer(tmp_path, capsys):
    """TFC_2W2A's weights do not fit the UP5K's block RAM; with ``--host-weights`` they go to
    the configuration's weight buffer (the SPRAMs on the board), a 64-bit word a WRITE before
    the first image. ``run --backend rtl`` loads them through the host port and equals the
    golden model, its stamps the device model's; ``board run``'s job carries them, and the
    real driver loads them through the host link's gateware (amaranth.sim)."""
    out, inputs = tmp_path / "tfc", tmp_path / "x.npz"
    assert main(["compile", str(TFC_W2A2), "--engine", "lowbit", "--pe", "2", "--simd", "16",
                 "--host-weights", "--board", "icebreaker", "-o", str(out)]) == 0
    assert main(["mnist", "--unit", "--limit", "20", "-o", str(inputs)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--inputs", str(inputs), "--backend", "rtl"]) == 0
    printed = capsys.readouterr().out
    net = load_compiled(out)
    images = read_binary_images(out, net)
    assert "all 200 int8 outputs of the rtl backend equal the golden model's" in printed
    assert f"cycles per image {model_stamp(images, net.config):,}" in printed
    assert json.loads((out / "manifest.json").read_text())["lowbit_engine"]["weights"] == "host"
    job = load_compiled_job(out)
    assert job.memories == {HostSpace.WEIGHTS: list(images.folded.weight_words)}
    port = SimulatedPort(job.config, design=job.design,
                         device=lambda config, width: BinaryDevice(images.folded, config, width,
                                                                   weights=WeightBuffer))
    x, _ = mnist("all", unit=True)
    q_in = job.quantize(x[:2])
    run = run_images(BoardLink(port, timeout=5), job.memories, job.encode(q_in),
                     output_bytes=job.output_bytes, config=job.config, design=job.design)
    assert np.array_equal(job.decode(run.outputs), run_golden(net, q_in))


@needs_tfc
def test_synth_of_a_lowbit_folder_uses_the_engines_seed(tmp_path, monkeypatch, capsys):
    """The UP5K's low-bit build routes on its own seed (``Board.engine_seeds``), not the
    accelerator's; ``--seed`` still picks. The build itself is stopped at its call: which seed
    routes is the benchmark's to measure."""
    import fpganet.boards.build as board_build

    out = tmp_path / "tfc"
    assert main(["compile", str(TFC_W2A2), "--engine", "lowbit", "--pe", "2", "--simd", "16",
                 "--host-weights", "--board", "icebreaker", "-o", str(out)]) == 0
    seeds = []

    def stop(board, config, output, *, seed, **options):
        seeds.append(seed)
        raise FpganetError("stopped before the tools")
    monkeypatch.setattr(board_build, "build", stop)
    assert main(["synth", str(out), "-o", str(tmp_path / "default")]) == 2
    assert main(["synth", str(out), "--seed", "2", "-o", str(tmp_path / "seed2")]) == 2
    assert seeds == [ICEBREAKER.engine_seeds["lowbit"], 2] and ICEBREAKER.seed not in seeds


@needs_tfc
def test_the_icebreaker_holds_tfc_w2a2_only_with_its_weights_in_spram():
    """Before any tool runs: in block RAM the weights need more than the UP5K's 30 EBR; in the
    SPRAM weight buffer the design needs all four SPRAMs and fewer EBR than the chip has."""
    net = compile_model(TFC_W2A2, config=ICEBREAKER.default_config,
                        engine=("lowbit", 2, 16, True))
    folded = build_binary_images(net, 2, 16, "lowbit", host_weights=True).folded
    with pytest.raises(Refused, match=r"the design needs \d+ EBR, the device has 30"):
        check_buildable(ICEBREAKER, net.config, binary_core(folded))
    needs = check_buildable(ICEBREAKER, net.config,
                            binary_core(folded, ICEBREAKER.weight_buffer))
    used = {need.name: need.used for need in needs.exact}
    assert used["SPRAM"] == 4 and used["EBR"] <= 30
