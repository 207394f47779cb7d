"""The command line: compile and run end to end, and one-line errors for bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest
from onnx_builders import init, make, node, save, weights

from fpganet.cli import main
from fpganet.datasets import LENET5_ONNX, mnist
from fpganet.model.qdq import onnxruntime_qdq


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Calibration and input files written by ``fpganet mnist``, and a compiled LeNet-5."""
    root = tmp_path_factory.mktemp("cli")
    assert main(["mnist", "--split", "calib", "-o", str(root / "calib.npz")]) == 0
    assert main(["mnist", "--split", "eval", "--limit", "300", "-o", str(root / "X.npz")]) == 0
    assert main(["compile", str(LENET5_ONNX), "--calib", str(root / "calib.npz"),
                 "-o", str(root / "OUT")]) == 0
    return root


def run_cli(capfd, *args):
    status = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return status, out, err


def test_compile_and_run_golden(files, capfd, tmp_path):
    status, out, err = run_cli(capfd, "run", files / "OUT", "--inputs", files / "X.npz",
                               "--backend", "golden", "--out", tmp_path / "R.npz")
    assert status == 0 and err == ""
    assert "top-1 accuracy" in out and "measured by the golden model on 300 images" in out
    result = np.load(tmp_path / "R.npz")
    assert result["q"].dtype == np.int8 and result["q"].shape == (300, 10)
    assert result["logits"].dtype == np.float32 and result["logits"].shape == (300, 10)
    manifest = json.loads((files / "OUT" / "manifest.json").read_text())
    scale, zp = manifest["output"]["scale"], manifest["output"]["zero_point"]
    np.testing.assert_array_equal(result["logits"],
                                  np.float32(scale) * (result["q"].astype(np.float32) - zp))
    labels = np.load(files / "X.npz")["y"]
    accuracy = np.mean(result["q"].argmax(1) == labels)
    assert f"{100 * accuracy:.2f} %" in out


def test_run_limit_and_inputs_without_labels(files, capfd, tmp_path):
    x = np.load(files / "X.npz")["x"][:20]
    np.savez(tmp_path / "nolabels.npz", x=x)
    status, out, _ = run_cli(capfd, "run", files / "OUT", "--inputs", tmp_path / "nolabels.npz",
                             "--limit", 7, "--out", tmp_path / "R.npz")
    assert status == 0 and "ran 7 inputs" in out and "top-1" not in out
    assert np.load(tmp_path / "R.npz")["q"].shape == (7, 10)


def test_compile_without_model_uses_embedded_lenet(capfd, tmp_path):
    status, out, _ = run_cli(capfd, "compile", "-o", tmp_path / "OUT", "--array", "4x8")
    assert status == 0 and "embedded" in out
    manifest = json.loads((tmp_path / "OUT" / "manifest.json").read_text())
    assert manifest["config"]["rows"] == 4 and manifest["config"]["cols"] == 8
    assert manifest["calibration"]["samples"] == 500 and manifest["source"]["embedded"]
    # Compiling again replaces the earlier output in place.
    assert run_cli(capfd, "compile", "-o", tmp_path / "OUT", "--method", "minmax")[0] == 0
    assert json.loads((tmp_path / "OUT" / "manifest.json").read_text())["calibration"]["method"] == "minmax"
    status, out, _ = run_cli(capfd, "run", tmp_path / "OUT", "--limit", 50)
    assert status == 0 and "on 50 images of the embedded MNIST eval split" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT"]


def test_check_subcommand(files, capfd):
    status, out, _ = run_cli(capfd, "check", files / "OUT", "--inputs", files / "X.npz", "--limit", 100)
    assert status == 0 and "check passed" in out and "arg-max agreement" in out


def test_module_entry_point(files, tmp_path):
    ok = subprocess.run([sys.executable, "-m", "fpganet.cli", "run", str(files / "OUT"),
                         "--inputs", str(files / "X.npz"), "--limit", "10"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "top-1 accuracy" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "fpganet.cli", "compile", str(tmp_path / "no.onnx"),
                          "--calib", str(files / "calib.npz"), "-o", str(tmp_path / "OUT")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("fpganet: error: ")
    assert not (tmp_path / "OUT").exists()


# Bad input: status 2, one line on stderr, nothing left behind -------------------------------

def bad_models(root):
    """name -> ONNX file that must be refused."""
    conv = lambda w: make([node("Conv", ["x", "conv1.w"], ["y"])], [init("conv1.w", w)],
                          in_shape=("N", 1, 28, 28))
    nan, inf = weights((2, 1, 3, 3), 1), weights((2, 1, 3, 3), 2)
    nan[0, 0, 1, 1], inf[1, 0, 0, 0] = np.nan, -np.inf
    (root / "text.onnx").write_text("this is not a protobuf\n")
    return {
        "text": root / "text.onnx",
        "unsupported": save(make([node("Conv", ["x", "w"], ["c"]), node("Sigmoid", ["c"], ["y"], name="sig")],
                                 [init("w", weights((2, 1, 3, 3), 3))], in_shape=("N", 1, 28, 28)),
                            root / "sigmoid.onnx"),
        "uninferable": save(make([node("Relu", ["x"], ["y"])], in_shape=("N", 1, "H", 28)),
                            root / "symbolic.onnx"),
        "nan": save(conv(nan), root / "nan.onnx"),
        "valid": save(conv(weights((2, 1, 3, 3), 4)), root / "valid.onnx"),
        "inf": save(conv(inf), root / "inf.onnx"),
    }


@pytest.fixture(scope="module")
def bad(files):
    root = files / "bad"
    root.mkdir()
    paths = bad_models(root)
    np.savez(root / "nox.npz", images=np.zeros((4, 1, 28, 28), np.float32))
    np.savez(root / "shape.npz", x=np.zeros((4, 28, 28), np.float32))
    np.savez(root / "uint8.npz", x=np.zeros((4, 1, 28, 28), np.uint8))
    np.savez(root / "labels.npz", x=np.zeros((4, 1, 28, 28), np.float32), y=np.zeros((3,), np.int64))
    paths.update({key: root / f"{key}.npz" for key in ("nox", "shape", "uint8", "labels")})
    return paths


COMPILE_CASES = {
    # case: (model, calib, extra flags, words the message must contain)
    "missing model file": ("{root}/missing.onnx", "calib", [], ["missing.onnx", "does not exist"]),
    "not ONNX": ("text", "calib", [], ["text.onnx", "not a readable ONNX model"]),
    "unsupported op": ("unsupported", "calib", [], ["'Sigmoid'", "'sig'", "supported:"]),
    "uninferable shape": ("uninferable", "calib", [], ["cannot infer the shape of tensor 'x'"]),
    "NaN weights": ("nan", "calib", [], ["initializer 'conv1.w'", "NaN"]),
    "Inf weights": ("inf", "calib", [], ["initializer 'conv1.w'", "Inf"]),
    "calib without x": ("lenet", "nox", [], ["has no array 'x'", "'images'"]),
    "calib wrong shape": ("lenet", "shape", [], ["[4, 28, 28]", "[N, 1, 28, 28]", "'input_0'"]),
    "calib not float": ("lenet", "uint8", [], ["uint8", "float"]),
    "calib missing": ("lenet", "{root}/none.npz", [], ["none.npz", "does not exist"]),
    "model without calib": ("valid", None, [], ["calibration file is required"]),
    "bad array": (None, None, ["--array", "2by8"], ["2by8"]),
    "bad method": (None, None, ["--method", "median"], ["unknown calibration method 'median'"]),
    "accumulator overflow": (None, None, ["--acc-width", "20"], ["layer 'conv_14'", "overflow"]),
}


def resolve(value, files, bad):
    if value is None:
        return None
    if value == "lenet":
        return str(LENET5_ONNX)
    if value == "calib":
        return str(files / "calib.npz")
    if value in bad:
        return str(bad[value])
    return value.format(root=files)


def assert_one_line_error(status, out, err, words):
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("fpganet: error: "), err
    for word in words:
        assert word in err, (word, err)
    assert "Traceback" not in err + out


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_bad_compile_input(case, files, bad, capfd, tmp_path):
    model, calib, flags, words = COMPILE_CASES[case]
    args = ["compile"]
    if model is not None:
        args.append(resolve(model, files, bad))
    if calib is not None:
        args += ["--calib", resolve(calib, files, bad)]
    args += ["-o", tmp_path / "OUT", *flags]
    status, out, err = run_cli(capfd, *args)
    assert_one_line_error(status, out, err, words)
    assert list(tmp_path.iterdir()) == []  # no OUT, no staging directory


RUN_CASES = {
    "compiled directory missing": ("{root}/nothing", "X", ["nothing", "does not exist"]),
    "inputs missing": ("OUT", "{root}/none.npz", ["none.npz", "does not exist"]),
    "inputs without x": ("OUT", "nox", ["has no array 'x'"]),
    "inputs wrong shape": ("OUT", "shape", ["[4, 28, 28]", "[N, 1, 28, 28]"]),
    "labels wrong shape": ("OUT", "labels", ["labels 'y'", "[3]"]),
    "not a compiled directory": ("{root}/bad", "X", ["manifest.json", "is missing"]),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_bad_run_input(case, files, bad, capfd, tmp_path):
    compiled, inputs, words = RUN_CASES[case]
    compiled = str(files / "OUT") if compiled == "OUT" else compiled.format(root=files)
    inputs = str(files / "X.npz") if inputs == "X" else resolve(inputs, files, bad)
    status, out, err = run_cli(capfd, "run", compiled, "--inputs", inputs, "--out", tmp_path / "R.npz")
    assert_one_line_error(status, out, err, words)
    assert list(tmp_path.iterdir()) == []


def test_unrelated_output_directory_is_not_replaced(capfd, tmp_path):
    precious = tmp_path / "data"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep me")
    status, out, err = run_cli(capfd, "compile", "-o", precious)
    assert_one_line_error(status, out, err, ["not empty", "refusing"])
    assert (precious / "thesis.tex").read_text() == "keep me"


def test_usage_errors_are_one_line(capfd):
    status, out, err = run_cli(capfd, "compile")  # -o missing
    assert_one_line_error(status, out, err, ["-o"])
    status, out, err = run_cli(capfd, "run", "OUT", "--backend", "verilog")
    assert_one_line_error(status, out, err, ["golden"])


def test_mnist_says_what_it_writes_and_raw_writes_the_pixels(tmp_path, capfd):
    status, out, _ = run_cli(capfd, "mnist", "--limit", "5", "-o", tmp_path / "n.npz")
    assert status == 0 and "normalized as the embedded LeNet-5 wants" in out and "--raw" in out
    status, out, _ = run_cli(capfd, "mnist", "--limit", "5", "--raw", "-o", tmp_path / "r.npz")
    assert status == 0 and "raw pixels 0..255" in out
    normalized, raw = (np.load(tmp_path / name)["x"] for name in ("n.npz", "r.npz"))
    assert raw.shape == normalized.shape == (5, 1, 28, 28) and raw.dtype == np.float32
    assert raw.min() == 0 and raw.max() == 255 and np.all(raw == np.round(raw))
    np.testing.assert_allclose(normalized, (raw / 255 - 0.1307) / 0.3081, atol=1e-5)


def test_a_failed_check_prints_its_table_then_one_error_line(files, capfd, tmp_path):
    """A QDQ LeNet-5 on the iCEBreaker, whose 1-bit requantizer multipliers round the model's
    own scales: the layer table on stdout, then one error line naming the layers, exit 2."""
    onnxruntime_qdq(LENET5_ONNX, tmp_path / "q.onnx", mnist("calib")[0][:10], batch=10)
    assert main(["compile", str(tmp_path / "q.onnx"), "--board", "icebreaker",
                 "-o", str(tmp_path / "OUT")]) == 0
    capfd.readouterr()
    status, out, err = run_cli(capfd, "check", tmp_path / "OUT", "--inputs", files / "X.npz",
                               "--limit", 50)
    assert status == 2 and "FAIL (needs >= 99 % equal" in out and "check passed" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpganet: error: check failed: ")
    assert "gemm_23" in lines[0]
