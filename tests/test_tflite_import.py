"""Fully-int8 TFLite models compiled with their own quantization, against LiteRT.

The two MLPerf Tiny reference int8 models (../shared, SOURCE.md) compile without
calibration; fpganet's golden int8 logits agree with LiteRT's reference kernels
(``OpResolverType.BUILTIN_REF``) on the 200 test images at least as often as measured
(``benchmarks/tflite_mlperf.py``, docs/guide/tflite.md): with fpganet's 15-bit requantization
within a few LSB; with the ``tflite`` requantization mode every layer but the residual add
bit for bit (VWW's logits all equal). The accelerator program (ISA simulator) equals the
golden model; what the importer cannot take is refused in one line.
"""

import warnings

import flatbuffers
import numpy as np
import pytest

from fpganet.cli import main
from fpganet.codegen import run_isa
from fpganet.compiler import compile_model, load_compiled
from fpganet.config import DEFAULT_CONFIG
from fpganet.datasets import mlperf_tiny, mlperf_tiny_dir
from fpganet.errors import FpganetError, FpganetWarning
from fpganet.golden import run_golden
from fpganet.isa import param_ranges
from fpganet.model.litert_reference import compare_with_litert
from fpganet.model.tflite_import import tflite_layer_tensors
from fpganet.quantize.quantizer import constant_channels
from fpganet.quantize.fixed_point import multiply_tflite

SHARED = mlperf_tiny_dir()
MODELS = {"resnet8": "resnet8_int8.tflite", "vww": "vww_mobilenetv1_025_int8.tflite"}
#: Top-1 agreement with LiteRT BUILTIN_REF measured on the 200 test images (what the test
#: holds, minus nothing): ResNet-8 8 of 200 differ, VWW none.
AGREEMENT = {"resnet8": 0.96, "vww": 1.0}

needs_shared = pytest.mark.skipif(not all((SHARED / f).is_file() for f in MODELS.values()),
                                  reason="MLPerf Tiny material (../shared) absent")


def litert_logits(path, net, x):
    """LiteRT reference-kernel int8 logits (the input of the final SOFTMAX) for the float
    inputs ``x`` fpganet takes, NHWC, quantized as the host does."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from fpganet.model.litert_reference import litert_interpreter, run_litert

    interpreter = litert_interpreter(path)
    output = interpreter.get_output_details()[0]["index"]
    softmax = next(op for op in interpreter._get_ops_details() if op["op_name"] == "SOFTMAX")
    assert list(softmax["outputs"]) == [output]
    logits = int(softmax["inputs"][0])
    return run_litert(path, x, [logits], net.input_scale, net.input_zp)[logits]


@needs_shared
@pytest.mark.parametrize("model", sorted(MODELS))
def test_mlperf_tiny_int8_agrees_with_litert_reference(model):
    path = SHARED / MODELS[model]
    net = compile_model(path)
    assert net.calibration["method"] == "tflite" and net.calibration["samples"] == 0
    assert net.source["format"] == "tflite" and net.source["dropped_output_op"] == "SOFTMAX"
    x, y = mlperf_tiny(model, "test", layout="nhwc")
    assert net.input_shape == x.shape[1:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FpganetWarning)
        q_in = net.quantize_input(x)
    # Both models' int8 input is pixel - 128 (ResNet-8: scale 1; VWW: scale 1/255), NHWC
    # pixels transposed to the accelerator's CHW.
    pixels = np.rint(x / (1.0 if model == "resnet8" else np.float32(1 / 255))).astype(np.int16)
    np.testing.assert_array_equal(q_in, (pixels - 128).transpose(0, 3, 1, 2))
    ours = run_golden(net, q_in).reshape(len(x), -1)
    theirs = litert_logits(path, net, x)
    agreement = np.mean(ours.argmax(1) == theirs.argmax(1))
    assert agreement >= AGREEMENT[model], agreement
    assert np.abs(ours.astype(int) - theirs).max() <= 10
    assert np.mean(ours.argmax(1) == y) >= 0.8


@needs_shared
def test_tflite_requantization_is_litert_bit_exact_but_for_the_residual_adds():
    """In the ``tflite`` requantization mode each ResNet-8 layer, fed LiteRT's own int8 inputs,
    gives LiteRT's int8 outputs exactly (convolutions, the fully connected layer, the average
    pool), the residual adds within 1 LSB (TFLite's ADD rescales each input on its own, which
    the accelerator's two-input convolution does not), and the top-1 answers agree; VWW,
    without adds, is bit-exact end to end."""
    from fpganet.config import DEFAULT_CONFIG

    config = DEFAULT_CONFIG.replace(requant_mode="tflite")
    x_vww, _ = mlperf_tiny("vww", "test", layout="nhwc")
    net = compile_model(SHARED / MODELS["vww"], config=config)
    q_in = net.quantize_input(x_vww)
    np.testing.assert_array_equal(run_golden(net, q_in).reshape(len(x_vww), -1),
                                  litert_logits(SHARED / MODELS["vww"], net, x_vww))

    path = SHARED / MODELS["resnet8"]
    net = compile_model(path, config=config)
    x, _ = mlperf_tiny("resnet8", "test", layout="nhwc")
    x = x[:60]
    # Each layer fed LiteRT's own int8 inputs of it (check's comparison).
    comparison = compare_with_litert(net, path, x, tflite_layer_tensors(path))
    kinds = set()
    for layer, result in zip(net.layers, comparison.layers):
        assert result.max_abs_diff <= (1 if layer.type == "add" else 0), (layer.name, result)
        kinds.add(layer.type if layer.type != "conv" else layer.kind)
    assert kinds == {"conv", "dense", "add", "avgpool"}
    assert comparison.agreement >= 0.99


@needs_shared
@pytest.mark.parametrize("mode", ["fpganet", "tflite"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_isa_program_equals_golden_on_the_ulx3s(model, mode, tmp_path):
    from fpganet.boards.ulx3s import DEFAULT_CONFIG

    config = DEFAULT_CONFIG.replace(requant_mode=mode)
    net = compile_model(SHARED / MODELS[model], out_dir=tmp_path / "OUT", config=config)
    x, _ = mlperf_tiny(model, "test", layout="nhwc")
    q_in = net.quantize_input(x[:2])
    isa, _ = run_isa(net, q_in, config=config)
    np.testing.assert_array_equal(isa.reshape(2, -1),
                                  run_golden(net, q_in).reshape(2, -1))


@needs_shared
def test_few_multiplier_bits_round_the_models_own_multipliers():
    """An int8 model keeps its scales: with 3-bit multipliers (ULX3S) its multipliers are
    rounded to them, with a warning, and the program still equals the golden model. (Top-1
    on the 200 test images, measured: 83.5 % at 3 bits, 84.5 % at 15, 35.0 % at one.)"""
    from fpganet.boards.ulx3s import DEFAULT_CONFIG

    config = DEFAULT_CONFIG.replace(requant_mult_bits=3)
    with pytest.warns(FpganetWarning, match=r"pre-quantized \(int8 TFLite\).*"
                                            r"--requant-mult-bits 3 rounds"):
        net = compile_model(SHARED / MODELS["resnet8"], config=config)
    layers = [layer for layer in net.layers if hasattr(layer, "mult")]
    assert {layer.type for layer in layers} == {"conv", "add", "avgpool"}   # dense: a conv
    assert all(np.all(np.asarray(layer.mult) % config.mult_step == 0) for layer in layers)
    x, y = mlperf_tiny("resnet8", "test", layout="nhwc")
    q_in = net.quantize_input(x[:2])
    isa, _ = run_isa(net, q_in, config=config)
    np.testing.assert_array_equal(isa.reshape(2, -1), run_golden(net, q_in).reshape(2, -1))


@needs_shared
def test_cli_compiles_tflite_and_ignores_calib_with_a_warning(tmp_path, capfd):
    path = SHARED / MODELS["resnet8"]
    assert main(["compile", str(path), "--board", "ulx3s", "-o", str(tmp_path / "A")]) == 0
    out, err = capfd.readouterr()
    assert "tflite" in out.lower() and "error" not in err
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=mlperf_tiny("resnet8", "calib", layout="nhwc")[0][:4])
    with pytest.warns(FpganetWarning, match="TFLite"):
        compile_model(path, calib, out_dir=tmp_path / "B", program=False)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=mlperf_tiny("resnet8", "test", layout="nhwc")[0][:3])
    assert main(["run", str(tmp_path / "A"), "--inputs", str(inputs)]) == 0


@needs_shared
def test_with_no_mode_flag_a_ulx3s_compile_gives_litert_logits(tmp_path, capfd):
    """With no ``--requant-mode`` an int8 TFLite model compiles in the ``tflite``
    requantization for the ULX3S, which builds it: the compiled folder's logits are every one
    LiteRT's reference kernels' (VWW, 200 images), and its accelerator program gives them too
    (``run --backend isa`` checks itself against the golden model)."""
    path, out = SHARED / MODELS["vww"], tmp_path / "A"
    assert main(["compile", str(path), "--board", "ulx3s", "-o", str(out)]) == 0
    stdout, err = capfd.readouterr()
    assert "requantization: tflite" in stdout and err == ""
    net = load_compiled(out)
    assert net.config.requant_mode == "tflite"
    x, _ = mlperf_tiny("vww", "test", layout="nhwc")
    np.savez(tmp_path / "x.npz", x=x)
    assert main(["run", str(out), "--inputs", str(tmp_path / "x.npz"),
                 "--out", str(tmp_path / "r.npz")]) == 0
    with np.load(tmp_path / "r.npz") as result:
        np.testing.assert_array_equal(result["q"].reshape(len(x), -1),
                                      litert_logits(path, net, x))
    assert main(["run", str(out), "--inputs", str(tmp_path / "x.npz"), "--limit", "2",
                 "--backend", "isa"]) == 0


@needs_shared
@pytest.mark.parametrize("flags, mode, note", [
    ([], "tflite", None),                                             # the default configuration
    (["--board", "ulx3s", "--requant-mode", "fpganet"], "fpganet", None),   # the flag wins
    (["--board", "icebreaker"], "fpganet", "--board icebreaker (iCEBreaker"),
    (["--board", "ulx3s", "--requant-latency", "5"], "fpganet", "requant_latency must be 6"),
])
def test_the_requantization_mode_follows_the_model_where_the_target_builds_it(
        flags, mode, note, tmp_path, capfd):
    """No flag: the ``tflite`` mode, LiteRT's; a target that cannot build it (the UP5K, or
    flags that contradict it) keeps the ``fpganet`` one, in one warning line."""
    out = tmp_path / "A"
    assert main(["compile", str(SHARED / MODELS["resnet8"]), "--no-program", *flags,
                 "-o", str(out)]) == 0
    stdout, err = capfd.readouterr()
    assert load_compiled(out).config.requant_mode == mode
    assert ("requantization: tflite" in stdout) == (mode == "tflite" and not flags)
    if note is None:
        assert err == ""
    else:
        assert len(err.splitlines()) == 1 and err.startswith("fpganet: warning: "), err
        assert note in err
        assert "the fpganet requantization" in err and "differ from LiteRT's" in err


@needs_shared
def test_an_int8_tflite_model_the_target_moves_from_litert_is_measured_and_refused(tmp_path,
                                                                                   capfd):
    """On the iCEBreaker ResNet-8 is compiled in the fpganet mode with 1-bit multipliers: with
    --calib inputs compile measures how often it keeps LiteRT's arg-max (LiteRT's codes as
    the tflite-mode golden model gives them, bit for bit) and refuses it below the default
    --min-agreement, in one line; --min-agreement 0 compiles it and records the share."""
    calib = tmp_path / "x.npz"
    x = mlperf_tiny("resnet8", "test", layout="nhwc")[0][:40]
    np.savez(calib, x=x)
    flags = ["compile", str(SHARED / MODELS["resnet8"]), "--board", "icebreaker", "--no-program",
             "--calib", str(calib)]
    assert main([*flags, "-o", str(tmp_path / "A")]) == 2
    _, err = capfd.readouterr()
    assert len(err.splitlines()) == 1 and "LiteRT's arg-max" in err and "--board icebreaker" in err
    assert "below --min-agreement 90" in err and not (tmp_path / "A").exists()
    assert main([*flags, "--min-agreement", "0", "-o", str(tmp_path / "B")]) == 0
    net = load_compiled(tmp_path / "B")
    reference = compile_model(SHARED / MODELS["resnet8"],
                              config=DEFAULT_CONFIG.replace(requant_mode="tflite"))
    litert = run_golden(reference, reference.quantize_input(x)).reshape(len(x), -1)
    ours = run_golden(net, net.quantize_input(x)).reshape(len(x), -1)
    assert net.calibration["agreement"]["argmax"] == np.mean(ours.argmax(1) == litert.argmax(1))
    assert net.calibration["agreement"]["argmax"] < 0.9


def _table_field(buf, table_pos, slot):
    """Absolute position of a scalar field of a flatbuffer table (slot: the vtable offset)."""
    tab = flatbuffers.table.Table(buf, table_pos)
    offset = tab.Offset(slot)
    assert offset, "field absent"
    return table_pos + offset


def _mutated(tmp_path, name, mutate):
    import tflite

    buf = bytearray((SHARED / MODELS["resnet8"]).read_bytes())
    model = tflite.Model.GetRootAs(bytes(buf), 0)
    mutate(buf, model)
    path = tmp_path / name
    path.write_bytes(bytes(buf))
    return path


def _set_opcode(code):
    def mutate(buf, model):
        # The AVERAGE_POOL_2D's operator code (1): builtin_code (int32, slot 10) and the
        # deprecated int8 one (slot 4), where stored.
        for index in range(model.OperatorCodesLength()):
            entry = model.OperatorCodes(index)
            if max(entry.BuiltinCode(), entry.DeprecatedBuiltinCode()) == 1:
                tab = flatbuffers.table.Table(bytes(buf), entry._tab.Pos)
                for slot, size in ((4, 1), (10, 4)):
                    if tab.Offset(slot):
                        pos = entry._tab.Pos + tab.Offset(slot)
                        buf[pos:pos + size] = code.to_bytes(size, "little")
    return mutate


def _set_input_type(type_code):
    def mutate(buf, model):
        graph = model.Subgraphs(0)
        tensor = graph.Tensors(int(graph.InputsAsNumpy()[0]))
        buf[_table_field(buf, tensor._tab.Pos, 6)] = type_code   # Tensor.type
    return mutate


@needs_shared
@pytest.mark.parametrize("case, expected", [
    ("op", "unsupported op MUL"),
    ("float", "float32: the model is not fully int8"),
    ("int16", "int16; the accelerator's activations are int8"),
    ("truncated", "not a readable TFLite model"),
    ("text", "not a TFLite model"),
])
def test_refusals_are_one_line(case, expected, tmp_path, capfd):
    if case == "op":
        path = _mutated(tmp_path, "mul.tflite", _set_opcode(18))          # MUL
    elif case == "float":
        path = _mutated(tmp_path, "float.tflite", _set_input_type(0))      # FLOAT32
    elif case == "int16":
        path = _mutated(tmp_path, "int16.tflite", _set_input_type(7))      # INT16
    elif case == "truncated":
        path = tmp_path / "cut.tflite"
        path.write_bytes((SHARED / MODELS["resnet8"]).read_bytes()[:20000])
    else:
        path = tmp_path / "notes.tflite"
        path.write_text("this is not a model\n")
    with pytest.raises(FpganetError, match=expected):
        compile_model(path)
    out_dir = tmp_path / "OUT"
    assert main(["compile", str(path), "-o", str(out_dir)]) == 2
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fpganet: error:") and expected in lines[0]
    assert "Traceback" not in err and not out_dir.exists()


@pytest.mark.parametrize("single", [False, True])
def test_constant_channels_keep_their_outputs(single):
    """Channels whose output does not depend on the input (TFLite's zero multiplier; all-zero
    weights with biases near 2**30) are rewritten into the 64-bit tflite entry with the same
    outputs for any accumulator, with either rounding."""
    rng = np.random.default_rng(5)
    weight = rng.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8)
    weight[2] = weight[3] = 0
    bias = np.array([100, -5000, 1 << 30, -(1 << 30) + 7, 3000, 12], np.int64)
    mult = np.array([1 << 30, 1500000000, 1400000000, 2000000000, 0, 0], np.int64)
    shift = np.array([-5, -8, -30, -27, 0, 0], np.int64)
    new_weight, new_bias, new_mult, new_shift = constant_channels(weight, bias, mult, shift, single)
    ranges = param_ranges("tflite")
    for name, values in (("bias", new_bias), ("mult", new_mult), ("shift", new_shift)):
        lo, hi = ranges[name]
        assert values.min() >= lo and values.max() <= hi, name
    x = rng.integers(-128, 128, (50, 4 * 9)).astype(np.int64)
    acc = x @ weight.reshape(6, -1).astype(np.int64).T + bias
    acc_new = x @ new_weight.reshape(6, -1).astype(np.int64).T + new_bias
    want = np.clip(multiply_tflite(acc, mult, shift, single), -128, 127)
    got = np.clip(multiply_tflite(acc_new, new_mult, new_shift, single), -128, 127)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(new_weight[:2], weight[:2])
