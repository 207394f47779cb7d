"""Pre-quantized QDQ ONNX (onnxruntime's quantize_static): compiled without calibration.

The QDQ LeNet-5s are made here from the embedded LeNet-5, calibrated on the MNIST
calibration split, with per-tensor and per-channel weight scales (uint8 and int8
activations). fpganet must take their scales, zero points and int8 weights as given and
agree with onnxruntime running the same QDQ model; models it cannot represent are refused
in one line. The full-split figures come from ``benchmarks/qdq_lenet5.py``.
"""

import importlib.util
import logging
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
import test_graph_networks
from onnx import numpy_helper

from fpganet import datasets
from fpganet.cli import main
from fpganet.compiler import compile_model, load_compiled, runtime_requant_mode
from fpganet.config import DEFAULT_CONFIG
from fpganet.errors import FpganetError, FpganetWarning
from fpganet.golden import run_golden
from fpganet.model import import_model, load_onnx
from fpganet.model.qdq import onnxruntime_qdq
from fpganet.qnet import QConv

pytest.importorskip("onnxruntime")

#: The embedded LeNet-5 fixes its batch at 10.
BATCH = 10
EVAL_IMAGES = 300
KINDS = {"per_tensor": (False, "uint8"), "per_channel": (True, "int8")}


@pytest.fixture(scope="module")
def qdq_models(tmp_path_factory):
    logging.getLogger().setLevel(logging.ERROR)   # quantize_static's advice on pre-processing
    root = tmp_path_factory.mktemp("qdq")
    calib_x, _ = datasets.mnist("calib")
    paths = {}
    for kind, (per_channel, activations) in KINDS.items():
        paths[kind] = root / f"lenet5_qdq_{kind}.onnx"
        onnxruntime_qdq(datasets.LENET5_ONNX, paths[kind], calib_x, per_channel=per_channel,
                        activation_type=activations, batch=BATCH)
    return paths


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def onnxruntime_logits(path, x):
    """onnxruntime's int8 codes of the logits (the QuantizeLinear before the Softmax)."""
    # Imported here, not at the top: onnxruntime is slow to import.
    import onnxruntime as ort

    model = onnx.load(str(path))
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    dq = next(n for n in model.graph.node if n.output[0] == softmax.input[0])
    model.graph.output.append(onnx.ValueInfoProto(name=dq.input[0]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    codes = [session.run([dq.input[0]], {"input_0": x[i:i + BATCH]})[0]
             for i in range(0, len(x), BATCH)]
    codes = np.concatenate(codes)
    return codes.astype(np.int16) - (128 if codes.dtype == np.uint8 else 0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_qdq_compiles_without_calibration_and_agrees_with_onnxruntime(qdq_models, kind, tmp_path):
    path = qdq_models[kind]
    net = compile_model(path, out_dir=tmp_path / "OUT")
    assert net.calibration["method"] == "qdq" and net.calibration["samples"] == 0
    assert "prequantized" in net.source
    params = initializers(path)
    convs = [layer for layer in net.layers if isinstance(layer, QConv)]
    names = ["body.conv1", "body.conv2", "head.fc1", "head.fc2", "head.fc3"]
    for layer, name in zip(convs, names, strict=True):
        # Exactly the model's int8 weights and scales; its int32 bias with the input zero
        # point folded in.
        q = params[f"{name}.weight_quantized"]
        np.testing.assert_array_equal(layer.weight.reshape(q.shape), q)
        scale = np.broadcast_to(params[f"{name}.weight_scale"], (q.shape[0],))
        np.testing.assert_array_equal(layer.s_w, scale)
        row_sums = q.reshape(q.shape[0], -1).astype(np.int64).sum(axis=1)
        np.testing.assert_array_equal(layer.bias, params[f"{name}.bias_quantized"]
                                      - layer.zp_in * row_sums)
    x, y = datasets.mnist("eval", limit=EVAL_IMAGES)
    ours = run_golden(net, net.quantize_input(x)).reshape(len(x), -1)
    theirs = onnxruntime_logits(path, x)
    agreement = np.mean(ours.argmax(axis=1) == theirs.argmax(axis=1))
    assert agreement >= 0.99, agreement
    assert np.mean(np.all(ours == theirs, axis=1)) >= 0.7
    assert np.mean(ours.argmax(axis=1) == y) >= 0.97


def test_cli_compiles_qdq_without_calib_and_ignores_calib_with_a_warning(qdq_models, tmp_path,
                                                                         capfd):
    path = qdq_models["per_channel"]
    assert main(["compile", str(path), "-o", str(tmp_path / "A")]) == 0
    out, err = capfd.readouterr()
    assert "qdq" in out and "error" not in err
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=datasets.mnist("calib", limit=40)[0])
    with pytest.warns(FpganetWarning, match="pre-quantized"):
        net = compile_model(path, calib, out_dir=tmp_path / "B")
    assert (tmp_path / "A" / "network.npz").read_bytes() == (tmp_path / "B" / "network.npz").read_bytes()
    assert net.calibration["samples"] == 0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_qdq_stays_in_the_fpganet_requantization_which_agrees_more_with_onnxruntime(
        qdq_models, kind, tmp_path):
    """onnxruntime requantizes a QDQ model in float: the ``fpganet`` mode gives its logits
    exactly on more images than the ``tflite`` one, so a QDQ model's mode does not follow
    the model as an int8 TFLite one's does (``runtime_requant_mode``)."""
    path = qdq_models[kind]
    assert runtime_requant_mode(path) is None
    assert main(["compile", str(path), "--no-program", "-o", str(tmp_path / "A")]) == 0
    assert load_compiled(tmp_path / "A").config.requant_mode == "fpganet"
    x, _ = datasets.mnist("eval", limit=EVAL_IMAGES)
    theirs = onnxruntime_logits(path, x)
    exact = {}
    for mode in ("fpganet", "tflite"):
        net = compile_model(path, config=DEFAULT_CONFIG.replace(requant_mode=mode))
        ours = run_golden(net, net.quantize_input(x)).reshape(len(x), -1)
        exact[mode] = np.mean(np.all(ours == theirs, axis=1))
    assert exact["fpganet"] > exact["tflite"], exact


def test_float_model_still_needs_calibration(tmp_path):
    copy = tmp_path / "lenet_copy.onnx"
    model = onnx.load(str(datasets.LENET5_ONNX))
    model.graph.name = "renamed"
    onnx.save(model, str(copy))
    assert load_onnx(copy).quantization is None
    with pytest.raises(FpganetError, match="calibration file is required"):
        compile_model(copy)


def _node(model, predicate):
    return next(n for n in model.graph.node if predicate(n))


def _set_init(model, name, value):
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == name:
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(value, name))
            return
    raise KeyError(name)


def _per_channel_activation(model):
    _set_init(model, "12_scale", np.full(6, 0.07, np.float32))
    _set_init(model, "12_zero_point", np.zeros(6, np.uint8))


def _dq_other_scale(model):
    dq = _node(model, lambda n: n.name == "12_DequantizeLinear")
    model.graph.initializer.append(numpy_helper.from_array(np.float32(0.5), "other_scale"))
    dq.input[1] = "other_scale"


def _maxpool_rescaled(model):
    model.graph.initializer.append(numpy_helper.from_array(np.float32(0.5), "pool_scale"))
    for name in ("13_QuantizeLinear", "13_DequantizeLinear"):
        _node(model, lambda n: n.name == name).input[1] = "pool_scale"


def _zero_scale(model):
    _set_init(model, "15_scale", np.float32(0.0))


def _uint8_weights(model):
    _set_init(model, "body.conv1.weight_quantized",
              numpy_helper.to_array(_init(model, "body.conv1.weight_quantized")).view(np.uint8))
    _set_init(model, "body.conv1.weight_zero_point", np.uint8(128))


def _int16_activation(model):
    _set_init(model, "15_zero_point", np.int16(0))


def _weight_minus_128(model):
    q = numpy_helper.to_array(_init(model, "head.fc1.weight_quantized")).copy()
    q.flat[0] = -128
    _set_init(model, "head.fc1.weight_quantized", q)


def _q_feeds_conv(model):
    conv = _node(model, lambda n: n.op_type == "Conv")
    conv.input[0] = "input_0_QuantizeLinear_Output"


def _float_weight(model):
    conv = _node(model, lambda n: n.op_type == "Conv")
    q = numpy_helper.to_array(_init(model, "body.conv1.weight_quantized")).astype(np.float32)
    model.graph.initializer.append(numpy_helper.from_array(q * 0.01, "float_w"))
    conv.input[1] = "float_w"


def _no_output_q(model):
    q = _node(model, lambda n: n.name == "20_QuantizeLinear")
    dq = _node(model, lambda n: n.name == "20_DequantizeLinear")
    for n in model.graph.node:
        for i, name in enumerate(n.input):
            if name == dq.output[0]:
                n.input[i] = q.input[0]
    model.graph.node.remove(q)
    model.graph.node.remove(dq)


def _empty_scale_name(model):
    _node(model, lambda n: n.name == "12_QuantizeLinear").input[1] = ""


def _int8_without_zero_point(model):
    for name in ("12_QuantizeLinear", "12_DequantizeLinear"):
        node = _node(model, lambda n: n.name == name)
        del node.input[2:]
        if node.op_type == "QuantizeLinear":
            node.attribute.append(onnx.helper.make_attribute("output_dtype", onnx.TensorProto.INT16))


def _init(model, name):
    return next(t for t in model.graph.initializer if t.name == name)


MALFORMED = {
    "per-channel activation scale": (_per_channel_activation, "per channel"),
    "DequantizeLinear with another scale": (_dq_other_scale, "another scale"),
    "MaxPool output with its own scale": (_maxpool_rescaled, "passes them through"),
    "zero scale": (_zero_scale, "finite and positive"),
    "uint8 weights with zero point 128": (_uint8_weights, "nonzero zero point"),
    "int16 activation": (_int16_activation, "int16"),
    "weight -128": (_weight_minus_128, "-128"),
    "QuantizeLinear feeding a Conv": (_q_feeds_conv, "only a DequantizeLinear"),
    "float weight in a QDQ model": (_float_weight, "float weights"),
    "Gemm output not quantized": (_no_output_q, "no QuantizeLinear on its output"),
    "empty scale name": (_empty_scale_name, "is not a constant"),
    "int16 output_dtype without zero point": (_int8_without_zero_point, "int16"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_qdq_is_refused_in_one_line(qdq_models, case, tmp_path, capfd):
    mutate, message = MALFORMED[case]
    model = onnx.load(str(qdq_models["per_tensor"]))
    mutate(model)
    with pytest.raises(FpganetError, match=message):
        import_model(model)
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    before = sorted(os.listdir(tmp_path))
    assert main(["compile", str(path), "-o", str(tmp_path / "OUT")]) == 2
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpganet: error:"), err
    assert sorted(os.listdir(tmp_path)) == before


def test_random_qdq_mutations_fail_cleanly(qdq_models):
    """Scales, zero points, axes and edges of the QDQ nodes set to random values: every
    import succeeds or raises FpganetError (never another exception)."""
    base = onnx.load(str(qdq_models["per_channel"]))
    rng = np.random.default_rng(0)
    qdq_nodes = [i for i, n in enumerate(base.graph.node)
                 if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    values = [np.float32(0), np.float32(-1), np.float32(np.nan), np.float32(1e-30),
              np.zeros(3, np.float32), np.int8(5), np.uint8(3), np.int32(7), np.zeros((2, 2))]
    for _ in range(60):
        model = onnx.ModelProto()
        model.CopyFrom(base)
        node = model.graph.node[int(rng.choice(qdq_nodes))]
        action = rng.integers(4)
        if action == 0 and len(node.input) > 1:
            name = node.input[int(rng.integers(1, len(node.input)))]
            _set_init(model, name, values[int(rng.integers(len(values)))])
        elif action == 1:
            node.attribute.append(onnx.helper.make_attribute("axis", int(rng.integers(-3, 4))))
        elif action == 2:
            del node.input[int(rng.integers(len(node.input))):]
        else:
            node.input[0] = model.graph.node[int(rng.choice(qdq_nodes))].output[0]
        try:
            import_model(model)
        except FpganetError as error:
            assert "\n" not in str(error)


def _benchmark():
    """``benchmarks/qdq_lenet5.py`` as a module (its layer-by-layer comparison)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "qdq_lenet5.py"
    spec = importlib.util.spec_from_file_location("qdq_lenet5", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("builder", ["residual_model", "mobilenet_block"])
def test_qdq_graph_networks_agree_with_onnxruntime(builder, tmp_path):
    """Residual add, global and plain average pooling, depthwise convs, ReLU6 (onnxruntime
    removes it into the output range) and an NHWC head, quantized by onnxruntime: every
    layer, fed onnxruntime's codes of its input, within 1 LSB of onnxruntime's."""
    model = getattr(test_graph_networks, builder)()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = np.random.default_rng(1).uniform(-1, 1, (64, *shape)).astype(np.float32)
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(model, str(float_path))
    onnxruntime_qdq(float_path, path, x, per_channel=True, activation_type="int8", batch=8)
    net = compile_model(path, program=False)
    isolated = _benchmark().compare_qdq(net, path, x, batch=8)["isolated"]
    assert len(isolated) >= 6
    for name, (share, difference) in isolated.items():
        # An average pool rounds its ties half up, onnxruntime half to even.
        assert difference <= 1 and share >= (0.9 if "avg" in name or "gap" in name else 0.99), \
            (name, share)


def test_qdq_benchmark_rows_name_each_model_and_metric():
    measured = {"argmax_agreement": 0.9999, "output_codes_equal": 0.978, "fpganet_top1": 0.9911}
    rows = _benchmark().results_rows({"per_tensor_uint8": measured}, "benchmarks/qdq_lenet5.py")
    assert {(row.configuration, row.metric): row.value for row in rows} == {
        ("per-tensor uint8", "top1"): pytest.approx(99.11),
        ("per-tensor uint8", "agreement_top1"): pytest.approx(99.99),
        ("per-tensor uint8", "agreement_outputs"): pytest.approx(97.8)}
    assert {(row.network, row.board, row.basis) for row in rows} == \
        {("lenet5-qdq", "none", "model")}


def test_qdq_model_with_an_nhwc_input_takes_its_own_layout(tmp_path):
    """onnxruntime's QDQ of a model whose NHWC input a Transpose makes NCHW: fpganet takes
    [N, 8, 8, 3], as onnxruntime does, and agrees with the float model."""
    from onnx_builders import nhwc_cnn, ort_run

    from fpganet.backends import run_network

    logging.getLogger().setLevel(logging.ERROR)
    model = nhwc_cnn(3)
    float_path, path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(model, str(float_path))
    x = np.random.default_rng(2).normal(0, 1, (200, 8, 8, 3)).astype(np.float32)
    onnxruntime_qdq(float_path, path, x[:64], per_channel=True, activation_type="int8", batch=8)
    net = compile_model(path, program=False)
    assert net.input_shape == (8, 8, 3) and net.input_layout == "nhwc"
    golden = run_network(net, x).logits
    agreement = np.mean(golden.argmax(1) == ort_run(model, x).argmax(1))
    assert agreement >= 0.9, agreement       # a wrong order would agree by chance (~10 %)


def test_a_target_that_rounds_a_qdq_models_multipliers_measures_its_answers(qdq_models,
                                                                             tmp_path, capfd):
    """On the iCEBreaker (1-bit multipliers) a QDQ model's scales are rounded: with --calib
    inputs compile measures how often it keeps onnxruntime's arg-max, prints and records it,
    and refuses below --min-agreement, writing nothing; without inputs, one warning says how
    to measure it."""
    path = qdq_models["per_channel"]
    calib = tmp_path / "x.npz"
    x, _ = datasets.mnist("eval", limit=100)
    np.savez(calib, x=x)
    out = tmp_path / "A"
    assert main(["compile", str(path), "--board", "icebreaker", "--calib", str(calib),
                 "--min-agreement", "0", "-o", str(out)]) == 0
    stdout, err = capfd.readouterr()
    agreement = load_compiled(out).calibration["agreement"]
    ours = run_golden(load_compiled(out), load_compiled(out).quantize_input(x)).reshape(100, -1)
    expected = np.mean(ours.argmax(axis=1) == onnxruntime_logits(path, x).argmax(axis=1))
    assert agreement["argmax"] == expected and agreement["samples"] == 100
    assert agreement["runtime"] == "onnxruntime" and "--requant-mult-bits 1" in agreement["why"]
    assert f"{100 * expected:.1f} % of the 100 inputs" in stdout and err == ""
    assert expected < 1      # else the refusal below could not be seen
    refused = tmp_path / "B"
    assert main(["compile", str(path), "--board", "icebreaker", "--calib", str(calib),
                 "--min-agreement", f"{100 * expected + 0.5:g}", "-o", str(refused)]) == 2
    stdout, err = capfd.readouterr()
    assert len(err.splitlines()) == 1 and "below --min-agreement" in err, err
    assert not refused.exists()
    assert main(["compile", str(path), "--board", "icebreaker", "-o", str(refused)]) == 0
    stdout, err = capfd.readouterr()
    assert len(err.splitlines()) == 1 and "--calib X.npz (inputs) measures" in err, err
    assert "agreement" not in load_compiled(refused).calibration


def test_a_broken_calib_of_a_qdq_model_is_bad_input_on_every_target(qdq_models, tmp_path,
                                                                    capfd):
    """Ignored on one target and measured on another, a calibration file that is no archive
    is refused by compile and by fit alike, in one line, exit 2; fit says a warning its
    boards' compiles share once."""
    path, junk = qdq_models["per_channel"], tmp_path / "junk.npz"
    junk.write_text("not an archive")
    for argv in (["compile", str(path), "--calib", str(junk), "-o", str(tmp_path / "A")],
                 ["fit", str(path), "--calib", str(junk)]):
        assert main(argv) == 2
        out, err = capfd.readouterr()
        assert err.count("\n") == 1 and "is not a .npz archive" in err, err
    assert not (tmp_path / "A").exists()
    calib = tmp_path / "x.npz"
    np.savez(calib, x=datasets.mnist("eval", limit=20)[0])
    assert main(["fit", str(path), "--calib", str(calib)]) == 0
    _, err = capfd.readouterr()
    assert len(err.splitlines()) == len(set(err.splitlines())), err
