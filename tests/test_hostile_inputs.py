"""What every command promises on bad input (docs/reference/errors.md), case by case.

Each case is one a hostile user tried: an output that would destroy files fpganet did not
write, a graph that would hang the importer, a number that is not finite, a compiled
directory that was truncated or edited. Each must end in one ``fpganet: error:`` line and
exit status 2 with nothing changed, or be accepted and correct. The random counterpart of
these cases is tests/test_property_cli.py.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
from onnx_builders import init, make, node, save, weights
from tree import snapshot

from fpganet.cli import main
from fpganet.datasets import LENET5_ONNX
from fpganet.errors import FpganetError
from fpganet.files import SUMS, read_sums, staged_directory, verify_directory
from fpganet.model import import_model


def run_cli(capfd, *args):
    status = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return status, out, err


def assert_refused(status, out, err, *words):
    assert status == 2, (status, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpganet: error: "), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in out + err


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    """A compiled LeNet-5, MNIST calibration and input files, built once."""
    root = tmp_path_factory.mktemp("hostile")
    assert main(["mnist", "--split", "calib", "-o", str(root / "calib.npz")]) == 0
    assert main(["mnist", "--limit", "20", "-o", str(root / "X.npz")]) == 0
    assert main(["compile", "-o", str(root / "OUT")]) == 0
    return root


# Outputs never destroy what fpganet did not write --------------------------------------------

def test_a_web_folder_with_its_own_manifest_is_not_replaced(capfd, tmp_path):
    web = tmp_path / "site"
    web.mkdir()
    (web / "manifest.json").write_text('{"name": "my web app"}')
    (web / "index.html").write_text("<html></html>")
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "compile", "-o", web)
    assert_refused(status, out, err, "site", SUMS, "refusing")
    assert snapshot(tmp_path) == before


def test_files_added_to_an_earlier_output_are_not_deleted(lenet, capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out)]) == 0
    (out / "NOTES.txt").write_text("my notes")
    before = snapshot(tmp_path)
    status, stdout, err = run_cli(capfd, "compile", "-o", out)
    assert_refused(status, stdout, err, "NOTES.txt", "did not write")
    assert snapshot(tmp_path) == before
    # An output fpganet wrote, untouched, is replaced.
    (out / "NOTES.txt").unlink()
    status, stdout, err = run_cli(capfd, "compile", "-o", out, "--array", "4x4")
    config = json.loads((out / "manifest.json").read_text())["config"]
    assert status == 0 and (config["rows"], config["cols"]) == (4, 4)
    assert sorted(read_sums(out)) == sorted(p.name for p in out.iterdir() if p.name != SUMS)


def test_an_edited_file_of_an_earlier_output_is_not_replaced(capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out)]) == 0
    (out / "program.hex").write_text("00\n")
    before = snapshot(tmp_path)
    status, stdout, err = run_cli(capfd, "compile", "-o", out)
    assert_refused(status, stdout, err, "program.hex", "changed since fpganet wrote it")
    assert snapshot(tmp_path) == before


def test_inputs_inside_the_output_are_refused(lenet, capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out)]) == 0
    model, calib = out / "model.onnx", out / "calib.npz"
    model.write_bytes(LENET5_ONNX.read_bytes())
    calib.write_bytes((lenet / "calib.npz").read_bytes())
    before = snapshot(tmp_path)
    status, stdout, err = run_cli(capfd, "compile", model, "--calib", calib, "-o", out)
    assert_refused(status, stdout, err, "would overwrite the input")
    assert snapshot(tmp_path) == before


def test_report_never_writes_into_a_foreign_folder(lenet, capfd, tmp_path):
    for folder, files in (("mine", {"report.md": "my own report"}),
                          ("other", {"data.csv": "1,2,3"})):
        (tmp_path / folder).mkdir()
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text)
    before = snapshot(tmp_path)
    for folder in ("mine", "other"):
        status, out, err = run_cli(capfd, "report", lenet / "OUT", "-o", tmp_path / folder,
                                   "--no-measure", "--no-synth", "--activity", "default")
        assert_refused(status, out, err, "report folder", "refusing")
    assert snapshot(tmp_path) == before
    # Its own earlier report is replaced.
    for _ in range(2):
        status, out, err = run_cli(capfd, "report", lenet / "OUT", "-o", tmp_path / "new",
                                   "--no-measure", "--no-synth", "--activity", "default")
        assert status == 0, err
    verify_directory(tmp_path / "new")
    assert (tmp_path / "new" / "report.md").read_text().startswith("# ")


def test_run_out_equal_to_inputs_is_refused(lenet, capfd, tmp_path):
    inputs = tmp_path / "X.npz"
    inputs.write_bytes((lenet / "X.npz").read_bytes())
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "run", lenet / "OUT", "--inputs", inputs, "--out", inputs)
    assert_refused(status, out, err, "would overwrite the input")
    assert snapshot(tmp_path) == before


def test_run_out_over_a_file_fpganet_did_not_write_is_refused(lenet, capfd, tmp_path):
    mine = tmp_path / "results.npz"
    np.savez(mine, accuracy=np.float32(0.99))
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "run", lenet / "OUT", "--inputs", lenet / "X.npz",
                               "--out", mine)
    assert_refused(status, out, err, "was not written by fpganet")
    assert snapshot(tmp_path) == before
    # Its own earlier result is replaced.
    fresh = tmp_path / "R.npz"
    for _ in range(2):
        status, out, err = run_cli(capfd, "run", lenet / "OUT", "--inputs", lenet / "X.npz",
                                   "--out", fresh)
        assert status == 0, err
    assert np.load(fresh)["q"].shape == (20, 10)


def test_a_failed_build_leaves_no_staging_folder(tmp_path):
    with pytest.raises(RuntimeError):
        with staged_directory(tmp_path / "OUT") as staging:
            (staging / "half.txt").write_text("half")
            raise RuntimeError("the tool crashed")
    assert list(tmp_path.iterdir()) == []


def test_synth_refuses_a_foreign_build_folder_before_building(capfd, tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "top.pcf").write_text("set_io clk 35")
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "synth", "--board", "icebreaker", "-o", tmp_path / "build")
    assert_refused(status, out, err, "refusing")
    assert out == ""                        # no "synth: ... -> OUT/" banner before it
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args, words", [
    (["--clock-mhz", "1000"], ["PLL", "1000"]),
    (["--requant-mode", "tflite", "--requant-mult-bits", "15"], ["tflite", "UP5K"]),
    (["--synth-opt=-dsp"], ["-dsp", "yosys issue 2922"]),
])
def test_synth_refuses_before_its_banner(args, words, capfd, tmp_path):
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "synth", "--board", "icebreaker", "-o", tmp_path / "build",
                               *args)
    assert_refused(status, out, err, *words)
    assert out == "" and snapshot(tmp_path) == before


# Self-verifying compiled directories ---------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncate", "edit config", "delete", "no sums"])
@pytest.mark.parametrize("backend", ["golden", "isa"])
def test_a_damaged_compiled_directory_is_refused(damage, backend, lenet, capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out)]) == 0
    if damage == "truncate":
        data = (out / "memories.npz").read_bytes()
        (out / "memories.npz").write_bytes(data[:len(data) // 2])
        words = ["memories.npz", "does not match its SHA-256"]
    elif damage == "edit config":
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["config"]["rows"] = 3
        (out / "manifest.json").write_text(json.dumps(manifest))
        words = ["manifest.json", "does not match its SHA-256"]
    elif damage == "delete":
        (out / "weights.hex").unlink()
        words = ["weights.hex", "is missing"]
    else:
        (out / SUMS).unlink()
        words = [SUMS, "missing"]
    status, stdout, err = run_cli(capfd, "run", out, "--inputs", lenet / "X.npz",
                                  "--backend", backend)
    assert_refused(status, stdout, err, *words)


#: Every reader of a compiled directory, as arguments after the directory (fast variants).
READERS = {
    "run golden": ["run", "{OUT}", "--limit", "2"],
    "run isa": ["run", "{OUT}", "--limit", "2", "--backend", "isa"],
    "check": ["check", "{OUT}", "--limit", "2"],
    "estimate": ["estimate", "{OUT}", "--no-measure", "--no-synth", "--activity", "default"],
    "report": ["report", "{OUT}", "-o", "{tmp}/report", "--no-measure", "--no-synth",
               "--activity", "default"],
    "board run": ["board", "run", "{OUT}", "--port", "{tmp}/no-such-port", "--limit", "2"],
}


def _resign(out):
    """Write SHA256SUMS again for what is in ``out`` now, as a user with sha256sum would."""
    from fpganet.files import write_sums
    write_sums(out)


@pytest.fixture(scope="module")
def tampered(lenet):
    """Compiled LeNet-5 directories, each damaged one way that a re-signed or cut-down
    SHA256SUMS would let through: ``{damage: (directory, words of the refusal)}``."""
    damaged = {}
    for damage in ("emptied sums", "sums without memories.npz", "sums without network.npz",
                   "rows edited and re-signed", "cols edited and re-signed",
                   "requant_mult_bits edited and re-signed", "pipeline_registers edited and re-signed",
                   "config digest removed and re-signed"):
        out = lenet / damage.replace(" ", "-")
        assert main(["compile", "-o", str(out)]) == 0
        digests = read_sums(out)
        if damage == "config digest removed and re-signed":
            # Images as an fpganet before the digest wrote them.
            arrays = dict(np.load(out / "memories.npz"))
            del arrays["config_digest"]
            np.savez(out / "memories.npz", **arrays)
            _resign(out)
            words = ["record no digest of their configuration", "compile it again"]
        elif damage.endswith("re-signed"):
            field = damage.split()[0]
            manifest = json.loads((out / "manifest.json").read_text())
            # Fields the images' shapes show, and fields only their configuration digest does.
            manifest["config"][field] = {"rows": 4, "cols": 5, "requant_mult_bits": 14,
                                         "pipeline_registers": True}[field]
            (out / "manifest.json").write_text(json.dumps(manifest))
            _resign(out)
            words = ["not its manifest's configuration's",
                     {"rows": "weight word", "cols": "array columns"}.get(
                         field, "a configuration other than the manifest's")]
        else:
            kept = {} if damage == "emptied sums" else \
                {name: digest for name, digest in digests.items() if name not in damage}
            (out / SUMS).write_text("".join(f"{d}  {n}\n" for n, d in kept.items()))
            missing = "manifest.json" if damage == "emptied sums" else damage.split()[-1]
            words = [SUMS, "does not list", missing]
        if damage != "sums without network.npz":
            # What the listing no longer vouches for is changed too: it must not be used.
            weights = dict(np.load(out / "memories.npz"))
            weights["weights"] = -weights["weights"]
            np.savez(out / "memories.npz", **weights)
            if damage.endswith("re-signed"):
                _resign(out)
        damaged[damage] = (out, words)
    return damaged


@pytest.mark.parametrize("damage", ["emptied sums", "sums without memories.npz",
                                    "sums without network.npz", "rows edited and re-signed",
                                    "cols edited and re-signed",
                                    "requant_mult_bits edited and re-signed",
                                    "pipeline_registers edited and re-signed",
                                    "config digest removed and re-signed"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_cut_down_or_resigned_listing_is_refused_by_every_reader(damage, reader, tampered,
                                                                  capfd, tmp_path):
    out, words = tampered[damage]
    args = [a.format(OUT=out, tmp=tmp_path) for a in READERS[reader]]
    before = snapshot(tmp_path)
    status, stdout, err = run_cli(capfd, *args)
    assert_refused(status, stdout, err, *words)
    assert snapshot(tmp_path) == before


# One line on a refusal: no warning before it, nothing left behind ------------------------------

@pytest.fixture(scope="module")
def qdq_lenet(tmp_path_factory):
    """LeNet-5 quantized by onnxruntime (QDQ), which compiles without calibration."""
    from fpganet.datasets import mnist
    from fpganet.model.qdq import onnxruntime_qdq

    path = tmp_path_factory.mktemp("qdq") / "lenet5_qdq.onnx"
    onnxruntime_qdq(LENET5_ONNX, path, mnist("calib")[0][:10], batch=10)
    return path


@pytest.mark.parametrize("case", ["8 calibration samples", "QDQ at --requant-mult-bits 1"])
def test_a_refusal_prints_no_warning_before_it(case, lenet, qdq_lenet, capfd, tmp_path):
    if case == "8 calibration samples":
        np.savez(tmp_path / "calib8.npz", x=np.load(lenet / "calib.npz")["x"][:8])
        args = [LENET5_ONNX, "--calib", tmp_path / "calib8.npz"]
        warning = "8 sample"
    else:
        args = [qdq_lenet, "--board", "icebreaker"]
        warning = "--requant-mult-bits 1"
    # Accepted, the warning is printed (after the output) ...
    status, out, err = run_cli(capfd, "compile", *args, "-o", tmp_path / "ok")
    assert status == 0 and "fpganet: warning:" in err and warning in err, err
    # ... refused, only the error line is.
    before = snapshot(tmp_path)
    status, out, err = run_cli(capfd, "compile", *args, "-o", tmp_path / "small",
                               "--act-buffer-bytes", "1024")
    assert_refused(status, out, err, "activation buffer", "--act-buffer-bytes")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("target", [".", ".."])
def test_output_into_the_current_directory_is_refused_leaving_nothing(target, capfd, tmp_path,
                                                                      monkeypatch):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out)]) == 0
    capfd.readouterr()
    monkeypatch.chdir(out)
    before = snapshot(tmp_path)
    status, stdout, err = run_cli(capfd, "compile", "-o", target, "--array", "4x4")
    assert_refused(status, stdout, err, "current directory")
    assert snapshot(tmp_path) == before          # no empty '..XXXX.old' folder either


@pytest.mark.parametrize("failing", ["moving the earlier output aside", "moving the new one in"])
def test_a_failed_rename_leaves_the_earlier_output_and_no_old_folder(failing, tmp_path,
                                                                     monkeypatch):
    import os

    out = tmp_path / "OUT"
    with staged_directory(out) as staging:
        (staging / "a.txt").write_text("earlier")
    before = snapshot(tmp_path)
    rename = os.rename

    def refusing(source, target):
        moving_aside = str(target).endswith(".old/OUT")
        moving_in = str(source).endswith(".tmp") and str(target) == str(out)
        if moving_aside if failing == "moving the earlier output aside" else moving_in:
            raise OSError(16, "Device or resource busy")
        rename(source, target)
    monkeypatch.setattr(os, "rename", refusing)
    with pytest.raises(FpganetError, match="Device or resource busy"):
        with staged_directory(out) as staging:
            (staging / "a.txt").write_text("new")
    assert snapshot(tmp_path) == before


def test_estimate_on_the_icebreaker_of_a_tflite_mode_folder_is_refused(capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out), "--requant-mode", "tflite"]) == 0
    capfd.readouterr()
    for command in ("estimate", "report"):
        extra = ["-o", tmp_path / "report"] if command == "report" else []
        status, stdout, err = run_cli(capfd, command, out, "--board", "icebreaker", *extra,
                                      "--no-measure", "--no-synth", "--activity", "default")
        assert_refused(status, stdout, err, "--requant-mode tflite", "iCE40UP5K",
                       "--board ulx3s")
    assert not (tmp_path / "report").exists()
    # The ULX3S builds that mode: estimated, also when no board is named (an int8 TFLite
    # model compiled without one is in that mode by default).
    for board in (["--board", "ulx3s"], []):
        status, stdout, err = run_cli(capfd, "estimate", out, *board, "--no-measure",
                                      "--no-synth", "--activity", "default")
        assert status == 0 and "ULX3S" in stdout, err


# Validation at the boundary -------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["board", "ping", "--port", "/dev/null", "--timeout", "0"], ["--timeout", "positive"]),
    (["board", "ping", "--port", "/dev/null", "--timeout", "-1"], ["--timeout", "positive"]),
    (["board", "ping", "--port", "/dev/null", "--timeout", "nan"], ["--timeout", "finite"]),
    (["board", "ping", "--port", "/dev/null", "--baud", "0"], ["--baud"]),
    (["compile", "-o", "{tmp}/C", "--clock-mhz", "inf"], ["--clock-mhz", "finite"]),
    (["compile", "-o", "{tmp}/C", "--clock-hz", "1e400"], ["--clock-hz", "finite"]),
    (["compile", "-o", "{tmp}/C", "--rows", "0"], ["--rows", "at least 1"]),
    (["estimate", "{OUT}", "--clock-mhz", "inf"], ["--clock-mhz", "finite"]),
    (["estimate", "{OUT}", "--baud", "nan"], ["--baud", "finite"]),
])
def test_numeric_flags_are_checked(args, words, lenet, capfd, tmp_path):
    args = [a.format(tmp=tmp_path, OUT=lenet / "OUT") for a in args]
    status, out, err = run_cli(capfd, *args)
    assert_refused(status, out, err, *words)
    assert list(tmp_path.iterdir()) == []


GOOD_REPORT = {"board": "icebreaker", "device": "iCE40UP5K", "fmax_mhz": 23.9,
               "macs_per_cycle": 8, "toolchain": {},
               "resources": {"LC": {"used": 4701, "available": 5280}}}


@pytest.mark.parametrize("change, words", [
    ({"fmax_mhz": "Infinity"}, ["not valid JSON", "Infinity"]),
    ({"fmax_mhz": "NaN"}, ["not valid JSON", "NaN"]),
    ({"fmax_mhz": -5}, ["'fmax_mhz'", "positive"]),
    ({"fmax_mhz": "fast"}, ["'fmax_mhz'"]),
    ({"macs_per_cycle": 2.5}, ["'macs_per_cycle'", "integer"]),
    ({"resources": {"LC": {"used": "many", "available": 5280}}}, ["'resources.LC.used'"]),
    ({"resources": {"LC": {"used": -1}}}, ["'resources.LC.used'"]),
    ({"resources": [1, 2]}, ["'resources'"]),
    ({"clock": {"pll_mhz": 0}}, ["'clock.pll_mhz'"]),
    ({"device": "XC7A35T"}, ["no power model", "XC7A35T"]),
])
def test_board_report_fields_are_checked(change, words, lenet, capfd, tmp_path):
    text = json.dumps({**GOOD_REPORT, **{k: v for k, v in change.items()
                                         if v not in ("Infinity", "NaN")}})
    for key, value in change.items():
        if value in ("Infinity", "NaN"):
            text = text.replace('"fmax_mhz": 23.9', f'"fmax_mhz": {value}')
    report = tmp_path / "report.json"
    report.write_text(text)
    status, out, err = run_cli(capfd, "estimate", lenet / "OUT", "--report", report,
                               "--no-measure", "--no-synth", "--activity", "default")
    assert_refused(status, out, err, *words)


def test_estimate_json_is_standard_json(lenet, capfd):
    status, out, err = run_cli(capfd, "estimate", lenet / "OUT", "--json", "--no-measure",
                               "--no-synth", "--activity", "default")
    assert status == 0, err
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))


def test_check_model_must_exist_and_be_the_network(lenet, capfd, tmp_path):
    status, out, err = run_cli(capfd, "check", lenet / "OUT", "--model", tmp_path / "missing.onnx",
                               "--inputs", lenet / "X.npz")
    assert_refused(status, out, err, "missing.onnx", "does not exist")
    other = make([node("Relu", ["x"], ["y"])], in_shape=("N", 3, 9, 9))
    save(other, tmp_path / "other.onnx")
    status, out, err = run_cli(capfd, "check", lenet / "OUT", "--model", tmp_path / "other.onnx",
                               "--inputs", lenet / "X.npz")
    assert_refused(status, out, err, "other.onnx", "another model")
    assert out == ""       # refused before any comparison is printed


# Importer guards ------------------------------------------------------------------------------

def _conv_model(extra_nodes=(), extra_inits=(), weight_shape=(2, 1, 3, 3), opset=13):
    nodes = [node("Conv", ["x", "w"], ["c"]), *extra_nodes]
    if not extra_nodes:
        nodes.append(node("Relu", ["c"], ["y"]))
    return make(nodes, [init("w", weights(weight_shape, 1)), *extra_inits],
                in_shape=("N", 1, 8, 8), opset=opset)


def test_a_cycle_is_refused_without_hanging(tmp_path):
    model = _conv_model([node("Add", ["c", "r"], ["a"]), node("Relu", ["a"], ["r"]),
                         node("Relu", ["r"], ["y"])])
    path = save(model, tmp_path / "cycle.onnx")
    # A separate process with a time limit: a regression here would hang the suite.
    result = subprocess.run([sys.executable, "-m", "fpganet", "compile", str(path), "--calib",
                             str(path), "-o", str(tmp_path / "OUT")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("fpganet: error: the graph has a cycle"), result.stderr
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("model, words", [
    (lambda: _conv_model(weight_shape=(0, 1, 3, 3)), ["empty tensor", "[0, 6, 6]"]),
    (lambda: _conv_model(opset=99), ["opset 99", "knows opsets up to"]),
    (lambda: _conv_model([node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"])],
                         [init("g", np.float32([3e38, 3e38])), init("b", np.float32([0, 0])),
                          init("m", np.float32([0, 0])), init("v", np.float32([1e-9, 1e-9]))]),
     ["BatchNormalization", "not finite"]),
    (lambda: make([node("Flatten", ["x"], ["f"]), node("Gemm", ["f", "g"], ["y"], alpha=np.inf)],
                  [init("g", weights((4, 64), 2).T.copy())], in_shape=("N", 1, 8, 8)),
     ["Gemm", "not finite"]),
])
def test_importer_refuses_up_front(model, words):
    with pytest.raises(FpganetError) as error:
        import_model(model())
    for word in words:
        assert word in str(error.value), (word, str(error.value))


# Degenerate calibration: accepted, with one warning line ---------------------------------------

@pytest.mark.parametrize("kind, words", [
    ("constant", ["the input", "constant over the calibration data"]),
    ("few", ["calibration on 5 sample(s) only"]),
    ("huge", ["calibration inputs reach", "preprocessed"]),
])
def test_degenerate_calibration_warns(kind, words, lenet, capfd, tmp_path):
    x = np.load(lenet / "calib.npz")["x"]
    x = {"constant": np.zeros_like(x), "few": x[:5], "huge": x * 1e6}[kind]
    np.savez(tmp_path / "calib.npz", x=x)
    status, out, err = run_cli(capfd, "compile", LENET5_ONNX, "--calib", tmp_path / "calib.npz",
                               "-o", tmp_path / "OUT")
    assert status == 0
    warnings = [line for line in err.splitlines() if line.startswith("fpganet: warning: ")]
    assert warnings and all(line.startswith("fpganet: warning: ") for line in err.splitlines())
    assert any(all(word in line for word in words) for line in warnings), warnings
    if kind == "huge":
        # Inputs of the usual range then collapse onto a few levels: run says so.
        status, out, err = run_cli(capfd, "run", tmp_path / "OUT", "--inputs", lenet / "X.npz")
        assert status == 0 and "fpganet: warning: the inputs take only" in err
