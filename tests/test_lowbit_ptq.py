"""Weights below 8 bits for float models: ``--weight-bits``, per-layer widths, GPTQ rounding.

The accuracies on LeNet-5, ResNet-8 and VWW come from ``benchmarks/lowbit_ptq.py``; these
tests check the codes' range, the manifest, the refusals and that GPTQ lowers a layer's
output error against round-to-nearest.
"""

import json

import numpy as np
import pytest

from fpganet import datasets
from fpganet.cli import main
from fpganet.compiler import compile_model, load_compiled
from fpganet.errors import FpganetError
from fpganet.model.ir import Conv
from fpganet.ops import grouped_matmul, im2col
from fpganet.quantize.fixed_point import weight_qparams
from fpganet.quantize.rounding import gptq_codes, gptq_rounding, weight_limit

#: Calibration images for the compiles here (the embedded split has 500; fewer keep it fast).
CALIB = 100


def _compile(**weights):
    return compile_model(calib_limit=CALIB, program=False, **weights)


@pytest.mark.parametrize("bits", [2, 3, 4, 6])
@pytest.mark.parametrize("rounding", ["nearest", "gptq"])
def test_weights_lie_in_the_narrow_range_of_their_bits(bits, rounding):
    net = _compile(weight_bits=bits, weight_rounding=rounding)
    for layer in net.conv_layers:
        limit = weight_limit(bits)
        assert layer.weight_bits == bits
        assert layer.weight.dtype == np.int8 and np.abs(layer.weight).max() <= limit
        if rounding == "nearest":
            # Each channel's scale is its largest magnitude over the limit: that weight reaches it.
            peaks = np.abs(layer.weight.reshape(len(layer.weight), -1)).max(axis=1)
            assert np.all(peaks[peaks > 0] == limit)


def test_layer_overrides_are_recorded_in_the_manifest_and_read_back(tmp_path, capfd):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out), "--calib-limit", str(CALIB), "--weight-bits", "4",
                 "--layer-weight-bits", "gemm_23=6,conv_11=8", "--no-program"]) == 0
    printed = capfd.readouterr().out
    assert "weights: 4/6/8 bits, gptq rounding" in printed
    assert " w4\n" in printed and " w6\n" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    widths = {entry["name"]: entry.get("weight_bits") for entry in manifest["layers"]
              if entry["type"] == "conv"}
    # An 8-bit layer's entry has no width: as every int8 manifest.
    assert widths == {"conv_11": None, "conv_14": 4, "gemm_19": 4, "gemm_21": 4, "gemm_23": 6}
    assert manifest["calibration"]["weight_rounding"] == "gptq"
    assert "weight_bits" in manifest["numerics"]
    net = load_compiled(out)
    assert [layer.weight_bits for layer in net.conv_layers] == [8, 4, 4, 4, 6]
    # The same layers by their numbers in the printout (gemm_23 is layer 7, after a reshape).
    assert main(["compile", "-o", str(tmp_path / "BY_NUMBER"), "--calib-limit", str(CALIB),
                 "--weight-bits", "4", "--layer-weight-bits", "7=6,0=8", "--no-program"]) == 0
    assert "   7 dense    gemm_23" in capfd.readouterr().out
    assert json.loads((tmp_path / "BY_NUMBER" / "manifest.json").read_text())["layers"] == manifest["layers"]


def test_packed_weights_store_layers_of_4_bits_two_to_a_byte(tmp_path, capfd):
    """With --packed-weights yes the 4-bit layers take half their weight words (the 8-bit one
    as many as before), the printout says so, and the ISA simulator still equals the golden
    model. Without it the same widths take a byte each."""
    common = ["--calib-limit", str(CALIB), "--weight-bits", "4", "--layer-weight-bits", "conv_11=8"]
    assert main(["compile", "-o", str(tmp_path / "P"), *common, "--packed-weights", "yes"]) == 0
    printed = capfd.readouterr().out
    assert ("weights: 4/8 bits, gptq rounding, those of 4 bits or fewer stored two to a byte, "
            "the others in a byte") in printed
    assert main(["compile", "-o", str(tmp_path / "U"), *common]) == 0
    assert "gptq rounding\n" in capfd.readouterr().out
    packed, plain = (json.loads((tmp_path / name / "manifest.json").read_text())
                     for name in ("P", "U"))
    assert packed["config"]["packed_weights"] is True and plain["config"]["packed_weights"] is False
    words, flags = {}, {}
    for name, manifest in (("packed", packed), ("plain", plain)):
        steps = {entry["name"]: entry["steps"][0] for entry in manifest["accelerator"]["layers"]
                 if entry["type"] == "conv"}
        words[name] = {layer: step["weight_words"][1] - step["weight_words"][0]
                       for layer, step in steps.items()}
        flags[name] = sorted(layer for layer, step in steps.items() if step.get("packed"))
    assert flags == {"packed": ["conv_14", "gemm_19", "gemm_21", "gemm_23"], "plain": []}
    assert words["packed"]["conv_11"] == words["plain"]["conv_11"]
    for layer in flags["packed"]:
        assert words["packed"][layer] == -(-words["plain"][layer] // 2)
    assert main(["run", str(tmp_path / "P"), "--backend", "isa", "--limit", "20"]) == 0
    assert "equal the golden model's, bit for bit" in capfd.readouterr().out
    # The estimate's weight bytes (the link's load, whether they fit) are the packed ones.
    weight_bytes = {}
    for name in ("P", "U"):
        assert main(["estimate", str(tmp_path / name), "--no-measure", "--no-synth",
                     "--json"]) == 0
        weight_bytes[name] = json.loads(capfd.readouterr().out)["network"]["weight_bytes"]
    net = load_compiled(tmp_path / "U")
    conv_11 = net.conv_layers[0].weight.size
    assert weight_bytes["U"] == sum(layer.weight.size for layer in net.conv_layers)
    assert weight_bytes["P"] == conv_11 + sum(-(-layer.weight.size // 2)
                                              for layer in net.conv_layers[1:])


def test_default_compile_is_the_int8_compile(tmp_path):
    """8 bits and nearest, named or not, give the same bytes; the manifest names neither."""
    compile_model(out_dir=tmp_path / "A", calib_limit=CALIB)
    compile_model(out_dir=tmp_path / "B", calib_limit=CALIB, weight_bits=8, layer_weight_bits={},
                  weight_rounding="nearest")
    for path in sorted((tmp_path / "A").iterdir()):
        assert path.read_bytes() == (tmp_path / "B" / path.name).read_bytes(), path.name
    text = (tmp_path / "A" / "manifest.json").read_text()
    assert "weight_bits" not in text and "weight_rounding" not in text


@pytest.mark.parametrize("flags, message", [
    (["--weight-bits", "9"], "argument --weight-bits: must be from 2 to 8, not 9"),
    (["--weight-bits", "1"], "argument --weight-bits: must be from 2 to 8, not 1"),
    (["--weight-bits", "four"], "argument --weight-bits: 'four' is not an integer"),
    (["--layer-weight-bits", "conv_11"], "expected LAYER=BITS[,LAYER=BITS...], not 'conv_11'"),
    (["--layer-weight-bits", "conv_11=12"], "the weight bits of layer 'conv_11' must be an "
                                            "integer from 2 to 8, not 12"),
    (["--layer-weight-bits", "conv_11=4,conv_11=3"], "names layer 'conv_11' twice"),
    (["--layer-weight-bits", "fc1=4"], "'fc1' is no layer of the model; the layers with "
                                       "weights are conv_11, conv_14, gemm_19, gemm_21, gemm_23"),
    (["--layer-weight-bits", "maxpool_13=4"], "'maxpool_13' is a MaxPool, which has no weights"),
    (["--layer-weight-bits", "1=4"], "layer 1 ('maxpool_13') is a MaxPool, which has no weights"),
    (["--layer-weight-bits", "8=4"], "layer 8 is past the model's 8 layers (0..7)"),
    (["--layer-weight-bits", "conv_11=4,0=3"], "names layer 'conv_11' twice"),
    (["--weight-rounding", "stochastic"], "invalid choice: 'stochastic'"),
])
def test_bad_weight_flags_are_one_line_and_write_nothing(flags, message, tmp_path, capfd):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out), *flags]) == 2
    err = capfd.readouterr().err
    assert err.startswith("fpganet: error: ") and err.count("\n") == 1 and message in err
    assert not out.exists()


def test_prequantized_models_refuse_weight_flags(tmp_path, capfd):
    tflite = datasets.mlperf_tiny_dir() / "resnet8_int8.tflite"
    qonnx = datasets.mlperf_tiny_dir().parent / "qonnx" / datasets.QONNX_MODELS["tfc-w2a2"]
    if not tflite.is_file() or not qonnx.is_file():
        pytest.skip("the shared models are not beside the checkout")
    for model, kind in ((tflite, "int8 TFLite"), (qonnx, "QONNX")):
        for flags in (["--weight-bits", "4"], ["--weight-rounding", "gptq"]):
            assert main(["compile", str(model), "-o", str(tmp_path / "OUT"), *flags]) == 2
            err = capfd.readouterr().err
            assert err.count("\n") == 1 and f"this model is pre-quantized ({kind})" in err
            assert not (tmp_path / "OUT").exists()


def _correlated_inputs(rng, k, n):
    """Inputs whose features are correlated, as a layer's are (a random mixing of noise)."""
    return rng.normal(size=(k, k)) @ rng.normal(size=(k, n)) + rng.normal(size=(k, 1))


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_gptq_lowers_the_output_error_of_a_random_layer(bits):
    rng = np.random.default_rng(bits)
    weight = rng.normal(size=(16, 48))
    x = _correlated_inputs(rng, 48, 4000)
    limit = weight_limit(bits)
    nearest, scale = weight_qparams(weight, bits=bits)
    codes = gptq_codes(weight, scale.astype(np.float64), limit, x @ x.T)
    assert np.abs(codes).max() <= limit and np.all(codes == np.rint(codes))

    def error(q):
        return np.sum(((weight - q * scale.astype(np.float64)[:, None]) @ x) ** 2)
    assert error(codes) < 0.9 * error(nearest.astype(np.float64))


def test_gptq_rounds_each_group_of_a_depthwise_conv_on_its_own_inputs():
    rng = np.random.default_rng(7)
    channels = 4
    layer = Conv(name="dw", weight=rng.normal(size=(channels, 1, 3, 3)).astype(np.float32),
                 bias=np.zeros(channels, np.float32), stride=(1, 1), pads=(1, 1, 1, 1),
                 in_shape=(channels, 8, 8), out_shape=(channels, 8, 8), groups=channels)
    # Channels of very different statistics: a Hessian shared by the groups would be wrong.
    x = np.cumsum(rng.normal(size=(64, channels, 8, 8)), axis=3) * np.arange(1, 5).reshape(1, 4, 1, 1)
    cols, _ = im2col(x, layer.kernel, layer.stride, layer.pads, 0.0)
    scale = None

    def error(codes):
        matrix = (layer.weight - codes * scale.reshape(-1, 1, 1, 1)).reshape(channels, -1)
        return np.sum(grouped_matmul(cols, matrix, channels) ** 2)
    nearest, scale = weight_qparams(layer.weight, bits=3)
    gptq, _ = weight_qparams(layer.weight, bits=3, rounding=gptq_rounding(layer, x))
    assert np.abs(gptq).max() <= 3
    assert error(gptq.astype(np.float64)) < 0.9 * error(nearest.astype(np.float64))


def test_api_refuses_an_unknown_rounding_and_bad_bits():
    with pytest.raises(FpganetError, match="unknown weight rounding 'best'; choose from nearest"):
        _compile(weight_rounding="best")
    with pytest.raises(FpganetError, match="the weight bits must be an integer from 2 to 8"):
        _compile(weight_bits=4.0)
