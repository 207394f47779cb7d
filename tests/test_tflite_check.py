"""``fpganet check`` of an int8 TFLite network: layer by layer against LiteRT's reference kernels.

Each golden layer is fed LiteRT's own int8 input(s) of that layer (its intermediate tensors,
which tensor holding which layer's output as the importer recorded it) and its output compared
with LiteRT's there; the network's outputs are compared end to end. In the ``tflite``
requantization mode every layer must equal LiteRT's but the residual add (fpganet's, not
TFLite's ADD), whose differences must all be 1 LSB across a rounding boundary; in the
``fpganet`` mode, onnxruntime's check's bound. A perturbed multiplier fails the check: exit 2,
the table on stdout and one error line.
"""

import numpy as np
import pytest

from fpganet.cli import main
from fpganet.compiler import load_compiled
from fpganet.datasets import mlperf_tiny, mlperf_tiny_dir
from fpganet.model.litert_reference import litert_interpreter
from fpganet.model.tflite_import import tflite_layer_tensors
from fpganet.model.tflite_read import read_model
from test_tflite_float import FLOAT32, INT8, INT32, SAME, VALID, TFLiteModel

pytest.importorskip("ai_edge_litert.interpreter")

RELU = 1
INPUT_Q = (0.05, -3)


def _conv(m, name, x, in_scale, shape, out_q, depthwise=False, activation=0):
    """An int8 CONV_2D (or DEPTHWISE_CONV_2D, multiplier 1) 3x3 SAME, per-channel scales."""
    rng = m.rng
    channels = shape[3]
    in_channels = m.tensors[x][1][3]
    weight_shape = (1, 3, 3, channels) if depthwise else (channels, 3, 3, in_channels)
    scales = rng.uniform(0.003, 0.008, channels).astype(np.float32)
    codes = rng.integers(-127, 128, weight_shape).astype(np.int8)
    w = m.tensor(f"{name}/w", weight_shape, INT8, codes.tobytes(),
                 quant=(scales, [0] * channels, 3 if depthwise else 0))
    b = m.tensor(f"{name}/b", (channels,), INT32,
                 rng.integers(-400, 400, channels).astype(np.int32).tobytes(),
                 quant=(in_scale * scales, [0] * channels))
    y = m.tensor(name, shape, INT8, quant=([out_q[0]], [out_q[1]]))
    common = dict(Padding=SAME, StrideH=1, StrideW=1, FusedActivationFunction=activation,
                  DilationHFactor=1, DilationWFactor=1)
    if depthwise:
        return m.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions",
                    DepthMultiplier=1, **common)
    return m.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", **common)


def residual_int8_model(float_input=False):
    """image int8 [1, 8, 8, 3] -> CONV_2D RELU -> DEPTHWISE_CONV_2D, ADD of the two RELU ->
    MAX_POOL_2D 2x2 -> AVERAGE_POOL_2D 2x2 VALID -> RESHAPE [1, 16] -> FULLY_CONNECTED
    -> logits int8 [1, 5]: every layer kind the importer makes of an int8 model. With
    ``float_input`` the image is float32 and a QUANTIZE makes the int8 one."""
    m = TFLiteModel(seed=8)
    conv_q, dw_q, add_q, out_q = (0.04, -128), (0.05, 0), (0.06, -128), (0.1, 0)
    source = x = m.tensor("image", (1, 8, 8, 3), FLOAT32 if float_input else INT8,
                          quant=None if float_input else ([INPUT_Q[0]], [INPUT_Q[1]]))
    if float_input:
        x = m.op("QUANTIZE", [source], [m.tensor("image_int8", (1, 8, 8, 3), INT8,
                                                  quant=([INPUT_Q[0]], [INPUT_Q[1]]))])
    a = _conv(m, "conv", x, INPUT_Q[0], (1, 8, 8, 4), conv_q, activation=RELU)
    d = _conv(m, "dw", a, conv_q[0], (1, 8, 8, 4), dw_q, depthwise=True)
    s = m.tensor("add", (1, 8, 8, 4), INT8, quant=([add_q[0]], [add_q[1]]))
    m.op("ADD", [a, d], [s], "AddOptions", FusedActivationFunction=RELU)
    pools = []
    for code, name, size in (("MAX_POOL_2D", "maxpool", 4), ("AVERAGE_POOL_2D", "avgpool", 2)):
        y = m.tensor(name, (1, size, size, 4), INT8, quant=([add_q[0]], [add_q[1]]))
        m.op(code, [pools[-1] if pools else s], [y], "Pool2DOptions", Padding=VALID, StrideH=2,
             StrideW=2, FilterHeight=2, FilterWidth=2, FusedActivationFunction=0)
        pools.append(y)
    flat = m.tensor("flatten", (1, 16), INT8, quant=([add_q[0]], [add_q[1]]))
    m.op("RESHAPE", [pools[-1], m.const("flatten/shape", np.array([1, 16], np.int32))], [flat],
         "ReshapeOptions", NewShape=[1, 16])
    rng = m.rng
    w = m.tensor("logits/w", (5, 16), INT8, rng.integers(-127, 128, (5, 16)).astype(np.int8)
                 .tobytes(), quant=([0.01], [0]))
    b = m.tensor("logits/b", (5,), INT32, rng.integers(-300, 300, 5).astype(np.int32).tobytes(),
                 quant=([add_q[0] * 0.01], [0]))
    y = m.tensor("logits", (1, 5), INT8, quant=([out_q[0]], [out_q[1]]))
    m.op("FULLY_CONNECTED", [flat, w, b], [y], "FullyConnectedOptions", FusedActivationFunction=0)
    return m.build([source], [y])


@pytest.fixture(params=[False, True], ids=["int8-input", "float-input"])
def compiled(tmp_path, request):
    """``compile(mode)``: the test model (an int8 input, or a float one and its QUANTIZE)
    compiled in that requantization mode, and inputs."""
    path = tmp_path / "residual_int8.tflite"
    path.write_bytes(residual_int8_model(float_input=request.param))
    codes = np.random.default_rng(9).integers(-128, 128, (40, 8, 8, 3))
    np.savez(tmp_path / "x.npz",
             x=(np.float32(INPUT_Q[0]) * (codes - INPUT_Q[1])).astype(np.float32))

    def compile_in(mode):
        out = tmp_path / mode
        assert main(["compile", str(path), "--requant-mode", mode, "--no-program",
                     "-o", str(out)]) == 0
        return path, out, tmp_path / "x.npz"
    return compile_in


def table(out):
    """``{layer index: (kind, % equal, max |diff|, line)}`` of check's table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 6 and parts[0].isdigit() and "% equal," in line:
            rows[int(parts[0])] = (parts[1], float(parts[3]), int(parts[8]), line)
    return rows


def test_the_importer_records_which_tensor_holds_each_layer(compiled):
    path, out, _ = compiled("tflite")
    net = load_compiled(out)
    tensors = tflite_layer_tensors(path)
    names = [t.name for t in read_model(path.read_bytes())[0]]
    assert tensors.names == [layer.name for layer in net.layers]
    # The int8 input: after the QUANTIZE of a float one.
    assert names[tensors.input] == ("image_int8" if "image_int8" in names else "image")
    assert load_compiled(out).input_zp == INPUT_Q[1]
    # The fused RELU's layer maps to its op's output; the flatten to the map it flattens
    # (fpganet reads it in (c, h, w) order, LiteRT's RESHAPE output is (h, w, c)).
    assert [names[i] for i in tensors.layers] == ["conv", "dw", "add", "maxpool", "avgpool",
                                                  "avgpool", "logits"]
    assert [layer.type for layer in net.layers] == ["conv", "conv", "add", "maxpool",
                                                    "avgpool", "reshape", "conv"]
    # LiteRT numbers the tensors as the flatbuffer does.
    details = litert_interpreter(path).get_tensor_details()
    assert all(names[d["index"]] == d["name"] for d in details if d["index"] < len(names))


def test_tflite_mode_equals_litert_layer_by_layer(compiled, capfd):
    _, out, inputs = compiled("tflite")
    capfd.readouterr()
    assert main(["check", str(out), "--inputs", str(inputs)]) == 0
    stdout, err = capfd.readouterr()
    assert err == "" and "golden model vs LiteRT's reference kernels on 40 inputs" in stdout
    rows = table(stdout)
    assert [rows[i][0] for i in sorted(rows)] == ["conv", "dwconv", "add", "maxpool", "avgpool",
                                                  "reshape", "dense"]
    for kind, equal, largest, line in rows.values():
        assert largest <= (1 if kind == "add" else 0), line
    assert "int8 network in LiteRT: " in stdout and "check passed" in stdout


def test_fpganet_mode_meets_the_onnxruntime_bound(compiled, capfd):
    _, out, inputs = compiled("fpganet")
    capfd.readouterr()
    assert main(["check", str(out), "--inputs", str(inputs)]) == 0
    stdout, _ = capfd.readouterr()
    assert "(fpganet requantization)" in stdout and "check passed" in stdout
    assert all(largest <= 1 for _, _, largest, _ in table(stdout).values())


@pytest.mark.parametrize("mode, factor", [("tflite", 1.01), ("fpganet", 1.2)])
def test_a_perturbed_multiplier_fails_the_check(compiled, capfd, monkeypatch, mode, factor):
    """One channel of the depthwise layer's multiplier scaled: its row fails, exit 2 with the
    table on stdout and one error line naming the layer."""
    import fpganet.cli

    _, out, inputs = compiled(mode)

    def perturbed(path):
        net = load_compiled(path)
        layer = net.layers[1]
        mult = np.array(layer.mult, dtype=np.int64)
        limit = (1 << 31) - 1 if mode == "tflite" else (1 << 15) - 1
        mult[0] = min(int(mult[0] * factor), limit)
        layer.mult = mult
        return net
    monkeypatch.setattr(fpganet.cli, "load_compiled", perturbed)
    capfd.readouterr()
    assert main(["check", str(out), "--inputs", str(inputs)]) == 2
    stdout, err = capfd.readouterr()
    rows = table(stdout)
    assert "FAIL" in rows[1][3] and all("FAIL" not in row[3] for i, row in rows.items() if i != 1)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpganet: error: check failed: 1 layer(s)")
    assert lines[0].endswith("bound: 1 (dwconv)")


def test_missing_or_other_source_model_is_one_line(compiled, tmp_path, capfd):
    path, out, inputs = compiled("tflite")
    other = tmp_path / "other.tflite"
    from test_tflite_float import int8_dense_model

    other.write_bytes(int8_dense_model())
    capfd.readouterr()
    assert main(["check", str(out), "--inputs", str(inputs), "--model", str(other)]) == 2
    err = capfd.readouterr().err.strip()
    assert "\n" not in err and "is not the compiled network's source" in err
    path.unlink()
    assert main(["check", str(out), "--inputs", str(inputs)]) == 2
    err = capfd.readouterr().err.strip()
    assert "\n" not in err and "is missing or changed since compiling" in err


@pytest.mark.skipif(not (mlperf_tiny_dir() / "resnet8_int8.tflite").is_file(),
                    reason="MLPerf Tiny material (../shared) absent")
def test_resnet8_check_against_litert(tmp_path, capfd):
    """ResNet-8 as compiled by default (the ``tflite`` mode): its convolutions, average pool and
    fully connected layer equal LiteRT's, its three residual adds differ only by 1 LSB across
    a rounding boundary (measured on 200 images: 121, 1,037 and 275 values, every one
    explained); every arg-max is LiteRT's."""
    out = tmp_path / "OUT"
    assert main(["compile", str(mlperf_tiny_dir() / "resnet8_int8.tflite"), "--no-program",
                 "-o", str(out)]) == 0
    x, y = mlperf_tiny("resnet8", "test", layout="nhwc")
    np.savez(tmp_path / "x.npz", x=x[:60], y=y[:60])
    capfd.readouterr()
    assert main(["check", str(out), "--inputs", str(tmp_path / "x.npz")]) == 0
    stdout, _ = capfd.readouterr()
    rows = table(stdout)
    assert [rows[i][0] for i in sorted(rows)].count("add") == 3
    for kind, equal, largest, line in rows.values():
        if kind == "add":
            assert largest == 1 and "across a rounding boundary" in line, line
        else:
            assert (equal, largest) == (100.0, 0), line
    assert "arg-max agreement 100.00 %" in stdout
