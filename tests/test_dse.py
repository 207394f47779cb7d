"""``fpganet dse`` on a real local Ray instance (2 CPUs): results, the cache, a killed run resumed.

Each run is a subprocess, as a user runs it: Ray starts its own processes, and the resumed
run needs a run that was killed with SIGKILL, Ray's processes and all.
"""

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tree import snapshot

from fpganet import datasets, dse
from fpganet.cli import main
from fpganet.datasets import qonnx_model
from fpganet.dse import load_space, pareto
from fpganet.errors import FpganetError

pytest.importorskip("ray", reason="fpganet dse needs the optional extra 'dse' (make installs it)")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "dse_lenet5.toml"
try:
    TFC_W1A1 = qonnx_model("tfc-w1a1")
except FpganetError:        # no ../shared beside the checkout
    TFC_W1A1 = None
needs_tfc = pytest.mark.skipif(TFC_W1A1 is None, reason="../shared/models/qonnx not found")
BOARD = dse.BOARDS["icebreaker"]
ENV = dict(os.environ, RAY_DISABLE_IMPORT_WARNING="1", RAY_USAGE_STATS_ENABLED="0",
           PYTHONUNBUFFERED="1")
ENV.pop("RAY_ADDRESS", None)            # always a local instance of our own


def dse_command(space, out, cache, *extra):
    return [sys.executable, "-m", "fpganet", "dse", "--board", "icebreaker", "--space",
            str(space), "-o", str(out), "--cache", str(cache), "--cpus", "2", *extra]


def run_dse(space, out, cache, *extra, timeout=180):
    result = subprocess.run(dse_command(space, out, cache, *extra), env=ENV, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader(open(out / "results.csv")))
    meta = json.loads((out / "results.json").read_text())
    return result, rows, meta


def test_example_space_then_served_from_the_cache(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    result, rows, meta = run_dse(EXAMPLE, out, cache, "--eval-limit", "100")
    assert [(row["array"], row["act_buffer_bytes"]) for row in rows] == [
        (array, size) for array in ("1x8", "2x4", "4x2") for size in ("6144", "8192")]
    assert all(row["status"] == "ok" for row in rows)
    for row in rows:
        assert int(row["cycles_per_image"]) > 0
        assert float(row["images_per_s"]) > 0 and float(row["watts"]) > 0
        assert float(row["images_per_s_per_w"]) > 0
    # The 4x2 array needs fewer cycles than the 1x8 on LeNet-5 (README's table
    # on the iCEBreaker's configuration).
    cycles = {row["array"]: int(row["cycles_per_image"]) for row in rows}
    assert cycles["4x2"] < cycles["2x4"] < cycles["1x8"]
    assert meta["engine"] == "ray" and meta["ray_version"]
    assert meta["ray"]["cluster_resources"]["CPU"] == 2
    assert meta["cache"] == {"folder": str(cache), "served": 0, "computed": 6,
                             "shared": 0}
    for name in ("pareto_throughput.png", "pareto_efficiency.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SHA256SUMS" in os.listdir(out)
    assert "6 computed" in result.stdout
    # Ray's own notices (its token authentication) stay off stderr.
    assert "Token authentication" not in result.stderr and "Ray" not in result.stderr

    # Again, into the same (fpganet-written) folder: nothing is computed.
    result, again, meta = run_dse(EXAMPLE, out, cache, "--eval-limit", "100")
    assert meta["cache"] == {"folder": str(cache), "served": 6, "computed": 0,
                             "shared": 0}
    assert "6 result(s) served from the cache" in result.stdout
    assert again == rows


def test_killed_run_resumes_from_the_cache_and_a_point_that_does_not_fit(tmp_path):
    space = tmp_path / "space.toml"
    # 2,048 bytes of activations cannot hold LeNet-5's 5,880-byte feature maps on any of them.
    space.write_text('[space]\narray = ["1x8", "2x4", "4x2"]\n'
                     'act_buffer_bytes = [2048, 6144, 7168, 8192]\n')
    out, cache = tmp_path / "out", tmp_path / "cache"
    # A few evaluation images: the accuracy is not what this test is about.
    process = subprocess.Popen(dse_command(space, out, cache, "--eval-limit", "50"), env=ENV,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if len(list(cache.glob("*.json"))) >= 2:
                break
            time.sleep(0.02)
    finally:
        # The whole session: the driver and the Ray processes it started.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done = len(list(cache.glob("*.json")))
    assert 2 <= done < 12
    assert not out.exists()

    result, rows, meta = run_dse(space, out, cache, "--eval-limit", "50")
    assert meta["cache"]["served"] == done
    assert meta["cache"]["computed"] == 12 - done
    refused = [row for row in rows if row["act_buffer_bytes"] == "2048"]
    assert len(refused) == 3
    for row in refused:
        assert row["status"] == "does not fit"
        assert "activation buffer" in row["reason"] and "--act-buffer-bytes" in row["reason"]
        assert row["cycles_per_image"] == ""
    assert all(row["status"] == "ok" for row in rows if row["act_buffer_bytes"] != "2048")


@pytest.mark.parametrize("text, named", [
    ('[space]\narray = ["2x8"]\nact_bufer_bytes = [8192]\n', "act_bufer_bytes"),
    ('[space]\narray = ["2x8", "4by4"]\n', "array"),
    ('[space]\nact_buffer_bytes = [8192, -1]\n', "act_buffer_bytes"),
    ('[space]\nact_buffer_bytes = 8192\n', "act_buffer_bytes"),
    ('[space]\nclock_mhz = [18, "fast"]\n', "clock_mhz"),
    ('[space]\nbroadcast_operands = [1]\n', "broadcast_operands"),
    ('[space]\narray = ["2x8"]\n[constraints]\nmax_luts = 5\n', "max_luts"),
    ('[spaces]\narray = ["2x8"]\n', "spaces"),
    ('[space]\narray = ["2x8"\n', "not valid TOML"),
    ('', "[space]"),
    ('[space]\nengine = ["int8", "gpu"]\n', "engine"),
    ('[space]\nweight_bits = [8, 9]\n', "weight_bits"),
    ('[space]\nlayer_weight_bits = [3]\n', "layer_weight_bits"),
    ('[space]\nlayer_weight_bits = ["conv1"]\n', "layer_weight_bits"),
    ('[space]\npe = [4]\nsimd = [16]\n', "engine"),
])
def test_bad_space_file_is_one_line_and_writes_nothing(tmp_path, capsys, text, named):
    space = tmp_path / "space.toml"
    space.write_text(text)
    before = sorted(os.listdir(tmp_path))
    status = main(["dse", "--board", "icebreaker", "--space", str(space), "-o",
                   str(tmp_path / "out"), "--cache", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("fpganet: error: ") and named in err
    assert sorted(os.listdir(tmp_path)) == before


def test_space_points_and_pareto_front():
    space = load_space(EXAMPLE)
    assert len(space.points()) == 6
    assert space.points()[0] == {"array": "1x8", "act_buffer_bytes": 6144}
    engine = load_space(ROOT / "examples" / "dse_tfc_w1a1.toml")
    assert engine.size == 9 and engine.points()[-1] == {"engine": "binary", "pe": 16, "simd": 64}
    assert dse.point_compile(engine.points()[0])["weight_bits"] == 8
    # Lower x and higher y are better: (1, 5) and (3, 9) are on the front, (2, 4) is not.
    assert pareto([(1, 5), (2, 4), (3, 9)], "low", "high") == [0, 2]


def test_a_task_past_its_timeout_is_cancelled_and_recorded_not_cached(tmp_path):
    # 0.3 s is less than one compile of LeNet-5 (about 0.5 s in a warm worker).
    out, cache = tmp_path / "out", tmp_path / "cache"
    _, rows, meta = run_dse(EXAMPLE, out, cache, "--timeout", "0.3")
    timed_out = [row for row in rows if row["status"] == "timed out"]
    assert timed_out and all(row["status"] in ("timed out", "ok") for row in rows)
    assert "--timeout" in timed_out[0]["reason"]
    # Only finished results are kept: the next run tries the others again.
    assert len(list(cache.glob("*.json"))) == len(rows) - len(timed_out)


def _descendants(pid):
    """Process ids below ``pid`` (Linux /proc): the Ray processes our subprocess started."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        found.extend(int(child) for child in children)
        stack.extend(int(child) for child in children)
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_worker_killed_mid_task_is_recorded_and_the_run_goes_on(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text('[space]\narray = ["2x4", "4x2"]\nact_buffer_bytes = [6144, 8192]\n')
    out, cache = tmp_path / "out", tmp_path / "cache"
    process = subprocess.Popen(dse_command(space, out, cache), env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    killed, deadline = None, time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and process.poll() is None:
        for pid in _descendants(process.pid):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::evaluate_point"):
                os.kill(pid, signal.SIGKILL)
                killed = pid
                break
        time.sleep(0.01)
    stdout, _ = process.communicate(timeout=180)
    assert killed is not None and process.returncode == 0, stdout
    rows = list(csv.DictReader(open(out / "results.csv")))
    lost = [row for row in rows if row["status"] == "worker lost"]
    assert len(lost) == 1 and "WorkerCrashedError" in lost[0]["reason"]
    assert sum(row["status"] == "ok" for row in rows) == 3


def test_without_ray_one_line_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)         # import ray raises ImportError
    status = main(["dse", "--board", "icebreaker", "--space", str(EXAMPLE), "-o",
                   str(tmp_path / "out"), "--cache", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "pip install 'fpganet[dse]'" in err
    assert os.listdir(tmp_path) == []


# Bad input: refused before Ray starts, in one line, with nothing written or printed ------------

ONE_POINT = '[space]\narray = ["2x8"]\n'


@pytest.fixture
def no_ray(monkeypatch):
    """Ray must not start: an up-front refusal needs none (the test fails if it is tried)."""
    def started(*args, **kwargs):
        raise AssertionError("Ray was started before the inputs were checked")
    monkeypatch.setattr(dse, "_init_ray", started)


def refused(capsys, tmp_path, *args, space_text=ONE_POINT, cache=None):
    """``fpganet dse`` with ``args``: the one error line (asserted: exit 2, no banner, nothing
    written in ``tmp_path``)."""
    space = tmp_path / "space.toml"
    space.write_text(space_text)
    before = snapshot(tmp_path)
    status = main(["dse", "--board", "icebreaker", "--space", str(space), "-o",
                   str(tmp_path / "out"), "--cache", str(cache or tmp_path / "cache"),
                   *map(str, args)])
    out, err = capsys.readouterr()
    assert status == 2 and out == "", (status, out, err)
    assert err.count("\n") == 1 and err.startswith("fpganet: error: "), err
    assert snapshot(tmp_path) == before
    return err


def test_an_address_that_is_not_one_is_refused_naming_it(no_ray, capsys, tmp_path):
    for address in ("not a cluster", "127.0.0.1", "host:99999", "ray://:10001"):
        err = refused(capsys, tmp_path, "--address", address)
        assert "--address" in err and "not a Ray address" in err


def test_an_address_where_nothing_listens_is_refused_at_once(no_ray, capsys, tmp_path):
    with socket.socket() as probe:          # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.monotonic()
    err = refused(capsys, tmp_path, "--address", f"127.0.0.1:{port}")
    assert "--address" in err and "nothing answers" in err
    assert time.monotonic() - start < 10


def test_an_address_where_no_ray_answers_is_refused_within_timeout(no_ray, capsys, tmp_path,
                                                                   monkeypatch):
    # A socket that listens and never speaks: Ray would retry it without end.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{silent.getsockname()[1]}")
        start = time.monotonic()
        err = refused(capsys, tmp_path, "--timeout", "1.5")
    assert "RAY_ADDRESS" in err and "within 1.5 s" in err
    assert time.monotonic() - start < 10


def test_a_space_above_the_bound_is_refused_unless_max_points_raises_it(no_ray, capsys,
                                                                        tmp_path):
    values = ", ".join(str(8192 + 64 * i) for i in range(100))
    big = f"[space]\nact_buffer_bytes = [{values}]\nrows = [1, 2, 4, 8]\ncols = [1, 2, 4]\n"
    err = refused(capsys, tmp_path, space_text=big)
    assert "1,200 points" in err and "--max-points" in err
    # Raised, the space passes that check and the next one (the address) refuses.
    err = refused(capsys, tmp_path, "--max-points", "2000", "--address", "no address",
                  space_text=big)
    assert "--address" in err and "points" not in err


def test_shared_inputs_are_refused_before_ray(no_ray, capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n")
    np.savez(tmp_path / "calib.npz", x=np.zeros((4, 3, 8, 8), np.float32))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "mine.txt").write_text("mine")
    cases = [
        ((tmp_path / "notes.txt", "--calib", tmp_path / "calib.npz"), {}, "not a readable ONNX"),
        ((datasets.LENET5_ONNX, "--calib", tmp_path / "missing.npz"), {}, "missing.npz"),
        ((datasets.LENET5_ONNX, "--calib", tmp_path / "calib.npz"), {}, "expects [N, 1, 28, 28]"),
        ((tmp_path / "missing.onnx",), {}, "missing.onnx"),
        ((), {"cache": tmp_path / "notes.txt" / "cache"}, "not a directory"),
        ((), {"cache": "/proc/fpganet-dse-cache"}, "cannot be written"),
        (("-o", tmp_path / "foreign"), {}, "not written by fpganet"),
        (("-o", tmp_path / "notes.txt" / "out"), {}, "not a directory"),
    ]
    for args, options, words in cases:
        err = refused(capsys, tmp_path, *args, **options)
        assert words in err, (args, err)


@needs_tfc
def test_precisions_and_evaluation_inputs_are_refused_before_ray(no_ray, capsys, tmp_path):
    """Each weight precision of the space is compiled up front: a layer the model lacks, or a
    width for a pre-quantized model, is one line naming the space's values."""
    err = refused(capsys, tmp_path, space_text='[space]\nlayer_weight_bits = ["", "conv9=4"]\n')
    assert 'layer_weight_bits = "conv9=4"' in err and "conv9" in err
    err = refused(capsys, tmp_path, TFC_W1A1,
                  space_text="[space]\nweight_bits = [8, 4]\n")
    assert "weight_bits = 4" in err and "pre-quantized" in err
    x, _ = datasets.mnist("eval", limit=4)
    np.savez(tmp_path / "unlabelled.npz", x=x)
    err = refused(capsys, tmp_path, "--eval", tmp_path / "unlabelled.npz")
    assert "unlabelled.npz" in err and "no labels 'y'" in err
    err = refused(capsys, tmp_path, "--eval", tmp_path / "missing.npz")
    assert "missing.npz" in err
    err = refused(capsys, tmp_path, TFC_W1A1, "--eval-limit", "5")
    assert "--eval-limit" in err and "--eval EVAL.npz" in err


@needs_tfc
def test_the_binary_engine_fold_and_the_weight_precision_with_accuracy(tmp_path):
    """Points on the binary engine (FINN's TFC_1W1A) and at narrower weights (the embedded
    LeNet-5): accuracy from the golden model, cycles from each unit's own model."""
    from fpganet.backends import run_network
    from fpganet.codegen.binary_images import build_binary_images
    from fpganet.compiler import compile_model
    from fpganet.config import DEFAULT_CONFIG
    from fpganet.hdl.binary_device import BinaryDevice

    tfc = TFC_W1A1
    x, y = datasets.mnist("eval", limit=200, unit=True)
    np.savez(tmp_path / "eval.npz", x=x, y=y)
    space = tmp_path / "engine.toml"
    space.write_text('[space]\nengine = ["int8", "binary"]\npe = [4, 8]\nsimd = [16, 12]\n')
    result, rows, meta = run_dse(space, tmp_path / "engine", tmp_path / "cache", tfc,
                                 "--eval", tmp_path / "eval.npz")
    net = compile_model(tfc, config=DEFAULT_CONFIG, engine=("binary", 4, 16))
    top1 = run_network(net, x).accuracy(y)
    # The int8 array runs once, whatever the fold: its twins are excluded.
    int8 = [row for row in rows if row["engine"] == "int8"]
    assert [row["status"] for row in int8] == ["ok", "excluded", "excluded", "excluded"]
    assert "pe and simd fold the engines only" in int8[1]["reason"]
    assert int8[0]["cycles_source"] == "simulated" and int8[0]["top1"] != ""
    for row in rows:
        if row["engine"] == "int8":
            continue
        pe, simd = int(row["pe"]), int(row["simd"])
        if simd == 12:          # not a multiple of 8: the engine cannot run it
            assert row["status"] == "refused" and "simd" in row["reason"] and "12" in row["reason"], row
            assert row["cycles_per_image"] == "" and int(row["macs_per_cycle"]) == pe * simd
            assert row["top1"] == ""
            continue
        assert row["status"] == "ok" and row["config"] == f"binary engine {pe}x{simd}"
        assert int(row["macs_per_cycle"]) == pe * simd
        assert float(row["top1"]) == top1
        folded = build_binary_images(net, pe, simd).folded
        assert int(row["cycles_per_image"]) == BinaryDevice(folded, net.config).stamp_cycles()
        # No power without a routed build.
        assert row["watts"] == "" and float(row["compute_images_per_s"]) > 0
    assert meta["evaluation"]["images"] == 200 and "top-1" in result.stdout

    # The weight precision, one task's work (Ray's side is the run above).
    x, y = datasets.mnist("eval", limit=300)
    config = dse.point_config(BOARD, {"packed_weights": True})
    by_bits = {bits: dse.evaluate_point("icebreaker", config.to_dict(), None, None,
                                        options=dse.point_compile({"weight_bits": bits}),
                                        evaluation=(x, y)) for bits in (8, 4)}
    for bits, row in by_bits.items():
        net = compile_model(config=config, weight_bits=bits)
        assert row["status"] == "ok" and row["top1"] == run_network(net, x).accuracy(y)
    # Two 4-bit weights a byte: half the bytes, the same cycles.
    assert by_bits[4]["weight_bytes"] * 2 == by_bits[8]["weight_bytes"]
    assert by_bits[4]["cycles_per_image"] == by_bits[8]["cycles_per_image"]


def test_a_pre_quantized_model_needs_no_calibration(capsys, tmp_path, monkeypatch):
    """As ``fpganet compile`` takes a QDQ model without --calib, so does ``dse``: its checks
    pass, and the run reaches Ray (stopped there: the rest is the embedded model's path)."""
    from fpganet.model.qdq import onnxruntime_qdq

    qdq = tmp_path / "lenet5_qdq.onnx"
    calib_x, _ = datasets.mnist("calib")
    onnxruntime_qdq(datasets.LENET5_ONNX, qdq, calib_x[:10], batch=10)
    reached = []

    def stop(*args, **kwargs):
        reached.append(True)
        raise FpganetError("stopped where Ray would start")
    monkeypatch.setattr(dse, "_init_ray", stop)
    err = refused(capsys, tmp_path, qdq)
    assert reached and "stopped where Ray would start" in err


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("when", ["while Ray starts", "while the points run"])
def test_sigterm_ends_a_run_with_143_and_one_line(when, tmp_path):
    values = ", ".join(str(8192 + 64 * i) for i in range(60))
    space = tmp_path / "space.toml"
    space.write_text(f"[space]\nact_buffer_bytes = [{values}]\n")
    process = subprocess.Popen(dse_command(space, tmp_path / "out", tmp_path / "cache"),
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if when == "while Ray starts":                # its first process is up, the banner is not
        deadline = time.monotonic() + 60
        while not _descendants(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    else:
        banner = process.stdout.readline()        # printed once Ray is up
        assert banner.startswith("dse: 60 points"), banner
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143 and err == "fpganet: terminated\n", err
    assert not (tmp_path / "out").exists()


@needs_tfc
@pytest.mark.skipif(os.environ.get("FPGANET_DSE_SYNTH") != "1",
                    reason="a board build (about a minute): FPGANET_DSE_SYNTH=1")
def test_an_engine_point_built_gets_its_routed_clock_and_power(tmp_path):
    """``--synth`` of a binary engine point builds the engine with the network in its
    bitstream, as ``fpganet synth OUT`` does, and estimates its power from that build."""
    space = tmp_path / "engine.toml"
    space.write_text('[space]\nengine = ["binary"]\npe = [4]\nsimd = [16]\n')
    _, rows, _ = run_dse(space, tmp_path / "out", tmp_path / "cache", TFC_W1A1, "--synth",
                         timeout=600)
    (row,) = rows
    assert row["status"] == "ok" and row["seeds_built"] == "1/1", row
    assert float(row["fmax_mhz"]) > 0 and int(row["LC_used"]) > 0
    assert float(row["watts"]) > 0 and float(row["images_per_s_per_w"]) > 0


@pytest.mark.skipif(os.environ.get("FPGANET_DSE_SYNTH") != "1",
                    reason="a board build (about two minutes): FPGANET_DSE_SYNTH=1")
def test_two_precisions_of_one_configuration_share_its_build(tmp_path):
    """The int8 array's bitstream does not hold the weights: two weight precisions of one
    configuration are one build, made once in the run."""
    space = tmp_path / "precision.toml"
    space.write_text("[space]\nweight_bits = [8, 4]\n")
    _, rows, meta = run_dse(space, tmp_path / "out", tmp_path / "cache", "--synth",
                            timeout=900)
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert rows[0]["fmax_mhz"] == rows[1]["fmax_mhz"] != ""
    # Two estimates and one build computed; the second point's build shared with the first.
    assert meta["cache"]["shared"] == 1
    assert meta["cache"]["computed"] == 2 + 1 + 2       # estimates, the build, re-estimates


@needs_tfc
def test_a_point_the_board_cannot_hold_does_not_fit_before_any_build():
    """As ``compile --board`` and ``synth`` refuse it: the array's DSPs, an engine's blocks."""
    array = dse.evaluate_point("icebreaker", dse.point_config(BOARD, {"rows": 4, "cols": 4})
                               .to_dict(), None, None)
    assert array["status"] == "does not fit" and "DSP" in array["reason"], array
    fold = dse.evaluate_point("icebreaker", BOARD.default_config.to_dict(),
                              TFC_W1A1.read_bytes(), None,
                              options=dse.point_compile({"engine": "binary", "pe": 8,
                                                         "simd": 32}))
    assert fold["status"] == "does not fit" and "31 EBR" in fold["reason"], fold
