"""QONNX import: FINN's TFC networks and hand-built QONNX graphs against qonnx's own executor.

The outside reference is ``qonnx.core.onnx_exec.execute_onnx`` (PyPI qonnx, the ``dev``
extra) through :func:`fpganet.model.qonnx_reference.qonnx_execute`. The golden model must
give the model's class on every image and, layer by layer, the very levels qonnx computes;
the logits differ from qonnx's by less than half an output step.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpganet.config import AcceleratorConfig
from fpganet.datasets import mnist, qonnx_model
from fpganet.golden import run_golden
from fpganet.model.onnx_import import load_onnx
from fpganet.model.qonnx_reference import qonnx_execute
from fpganet.quantize.quantizer import quantize_graph

pytest.importorskip("qonnx")

TFC = ["tfc-w1a1", "tfc-w2a2"]
IMAGES = 2000


@pytest.mark.parametrize("name", TFC)
def test_tfc_golden_equals_qonnx_executor(name):
    """Every hidden quantizer's levels equal qonnx's on every image; the class too; the logits
    within half an output step."""
    path = qonnx_model(name)
    x, y = mnist("all", unit=True)
    x = x[:IMAGES]
    graph = load_onnx(path)
    net = quantize_graph(graph, None, config=AcceleratorConfig())
    assert net.calibration["inexact_channels"] == 0
    q_in = net.quantize_input(x)
    q, outputs = run_golden(net, q_in, layer_outputs=True)
    reference, quantized = qonnx_execute(path, x, quantized=True)
    # The input's and each hidden layer's quantizer, in order; the last layer has none.
    levels = graph.quantization["levels"]
    ours = [(levels[-1], q_in)] + [(levels[i], outputs[i]) for i in sorted(levels)
                                   if i >= 0 and levels[i] is not None]
    assert len(ours) == len(quantized)
    for (spec, codes), theirs in zip(ours, quantized):
        values = spec.code_scale * (codes.astype(np.float64) - spec.code_zero)
        assert np.array_equal(values.reshape(len(x), -1), theirs.reshape(len(x), -1)), spec.node
    logits = net.dequantize_output(q)
    assert np.array_equal(logits.argmax(axis=1), reference.argmax(axis=1))
    assert np.max(np.abs(logits - reference)) < 0.5 * net.output_scale
    assert np.mean(logits.argmax(axis=1) == y[:IMAGES]) > 0.85


@pytest.mark.parametrize("name", TFC)
def test_tfc_rtl_equals_golden_and_cycle_model(name):
    """The generated Verilog runs the QONNX network bit for bit (200 images), in the cycles the
    cycle model counts."""
    from fpganet.sim import rtl_backend

    net = quantize_graph(load_onnx(qonnx_model(name)), None, config=AcceleratorConfig())
    x, _ = mnist("all", unit=True)
    q_in = net.quantize_input(x[:200])
    q, cycles = rtl_backend.run_network_rtl(net, q_in)
    assert np.array_equal(q, run_golden(net, q_in))
    assert np.array_equal(cycles, np.fromiter(rtl_backend.model_cycles(net, len(q_in)), np.int64))


# Bad input: one line, exit 2, nothing written ------------------------------------------------


def _tfc_w2a2_with(change):
    """TFC_2W2A with ``change(model, input_quant)`` applied, ``input_quant`` the Quant of the
    network input."""
    model = onnx.load(qonnx_model("tfc-w2a2"))
    quant = next(n for n in model.graph.node if n.op_type == "Quant")
    change(model, quant)
    return model


def _set(model, name, value):
    tensor = next(t for t in model.graph.initializer if t.name == name)
    tensor.CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32), name))


def _bits(value):
    return lambda model, quant: _set(model, quant.input[3], value)


def _scale(value):
    return lambda model, quant: _set(model, quant.input[1], value)


def _trunc(model, quant):
    trunc = helper.make_node("Trunc", [quant.output[0], quant.input[1], quant.input[2],
                                       quant.input[3], quant.input[1], quant.input[3]],
                             ["truncated"], domain="qonnx.custom_op.general")
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            if name == quant.output[0]:
                node.input[position] = "truncated"
    model.graph.node.append(trunc)
    # Keep the graph topologically sorted: the Trunc right after the Quant.
    nodes = list(model.graph.node)
    nodes.insert(nodes.index(quant) + 1, nodes.pop())
    del model.graph.node[:]
    model.graph.node.extend(nodes)


@pytest.mark.parametrize("change, words", [
    (_bits(0), ["Quant", "0 bits", "1 to 8"]),
    (_bits(9), ["Quant", "9 bits", "1 to 8"]),
    (_bits(2.5), ["Quant", "bit width must be one integer"]),
    (_scale(0.0), ["Quant", "scale must be finite and positive"]),
    (_scale(np.nan), ["Quant", "scale must be finite and positive"]),
    (_trunc, ["Trunc", "truncation"]),
], ids=["0-bits", "9-bits", "fractional-bits", "zero-scale", "nan-scale", "trunc"])
def test_bad_quantizers_are_refused_in_one_line(capfd, tmp_path, change, words):
    from test_hostile_inputs import assert_refused, run_cli
    from tree import snapshot

    path = tmp_path / "model.onnx"
    onnx.save(_tfc_w2a2_with(change), path)
    before = snapshot(tmp_path)
    assert_refused(*run_cli(capfd, "compile", path, "-o", tmp_path / "OUT"), *words)
    assert snapshot(tmp_path) == before


def test_a_qonnx_layer_without_an_input_quantizer_is_refused():
    """The input must be quantized: the accelerator takes codes."""
    def drop_input_quant(model, quant):
        for node in model.graph.node:
            for position, name in enumerate(node.input):
                if name == quant.output[0]:
                    node.input[position] = quant.input[0]
        model.graph.node.remove(quant)

    from fpganet.errors import FpganetError
    from fpganet.model.onnx_import import import_model

    with pytest.raises(FpganetError, match="graph input has no Quant"):
        import_model(_tfc_w2a2_with(drop_input_quant))


# Random QONNX networks of mixed precision ---------------------------------------------------


def test_random_qonnx_networks_equal_qonnx_executor_and_the_isa_simulator():
    """1-8 bits per layer, binary layers, BatchNorm with negative scales, ReLU, max pools:
    each level equal to qonnx's executor's, the program bit-exact on the ISA simulator."""
    import io

    from fpganet.codegen.fuzz_qonnx import fuzz_qonnx_isa

    out = io.StringIO()
    assert fuzz_qonnx_isa(24, seed=3, out=out) == 0, out.getvalue()


def test_random_qonnx_networks_run_bit_exact_on_the_rtl():
    """Three random QONNX networks on the generated Verilog: outputs equal to the golden model,
    cycles to the cycle model."""
    import warnings

    from fpganet.codegen.fuzz_qonnx import random_qonnx_network
    from fpganet.errors import FpganetWarning
    from fpganet.sim.fuzz_rtl import CONFIGS, check_network
    from fpganet.sim.rtl_backend import build_harness

    config = CONFIGS["4x2-pooled"]
    build = build_harness(config)
    for index in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FpganetWarning)
            net, q_in = random_qonnx_network(np.random.default_rng([11, index]), config)
        check_network(build, net, q_in)


def test_check_compares_a_qonnx_network_with_qonnx_executor(capfd, tmp_path):
    """`fpganet check` of a compiled QONNX network: every quantized tensor and the logits
    against qonnx's executor on the source model."""
    from fpganet.cli import main

    assert main(["compile", str(qonnx_model("tfc-w2a2")), "-o", str(tmp_path / "OUT")]) == 0
    assert main(["mnist", "--unit", "--limit", "100", "-o", str(tmp_path / "x.npz")]) == 0
    capfd.readouterr()
    assert main(["check", str(tmp_path / "OUT"), "--inputs", str(tmp_path / "x.npz")]) == 0
    out = capfd.readouterr().out
    assert "qonnx's executor" in out and "check passed" in out
    assert out.count("100.0000 % of levels equal") == 4


def test_an_epilogue_that_is_not_per_channel_is_refused():
    """A Mul by a constant along the width (ONNX broadcasting of an [M] constant over NCHW) is
    no per-channel map: refused naming the op, not computed wrong."""
    from fpganet.codegen.fuzz_qonnx import QONNX_DOMAIN, _Builder
    from fpganet.errors import FpganetError
    from fpganet.model.onnx_import import import_model

    rng = np.random.default_rng(0)
    b = _Builder(rng)

    def weight(shape):
        return b.node("Quant", [b.const(rng.normal(0, 1, shape).astype(np.float32)),
                                b.const(np.float32(0.5)), b.const(np.float32(0)),
                                b.const(np.float32(2))], QONNX_DOMAIN, signed=1, narrow=1,
                      rounding_mode="ROUND")

    x = b.quant("x", 2, True, True, 0.25)
    x = b.node("Conv", [x, weight((4, 2, 3, 3))], kernel_shape=[3, 3])
    x = b.node("Mul", [x, b.const(np.ones(4, np.float32))])
    x = b.node("Flatten", [b.quant(x, 2, True, True, 1.0)], axis=1)
    b.node("MatMul", [x, b.node("Transpose", [weight((3, 64))], perm=[1, 0])])
    b.nodes[-1].output[0] = "y"
    graph = helper.make_graph(b.nodes, "t", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 2, 6, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 3])], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(QONNX_DOMAIN, 1)])
    model.ir_version = 8
    with pytest.raises(FpganetError, match="Mul .* do not act on each output channel alone"):
        quantize_graph(import_model(model), None, config=AcceleratorConfig())


def test_an_input_quantized_by_its_finn_datatype_annotation(tmp_path):
    """No input quantizer but a `finn_datatype` BIPOLAR annotation, then `(x + 1) / 2` before
    the first layer (FINN's UNSW-NB15 MLP): the host quantizes by the datatype; every level
    and the logits as qonnx's executor gives them."""
    from fpganet.codegen.fuzz_qonnx import QONNX_DOMAIN, _Builder, _weights
    from fpganet.model.onnx_import import import_model
    from fpganet.model.qonnx_reference import compare_with_qonnx

    rng = np.random.default_rng(5)
    b = _Builder(rng)
    x = b.node("Div", [b.node("Add", ["x", b.const(np.float32(1))]), b.const(np.float32(2))])
    x = b.node("MatMul", [x, b.node("Transpose", [_weights(b, rng, (16, 40))], perm=[1, 0])])
    x = b.node("BatchNormalization", [x, b.const(rng.uniform(0.5, 2, 16).astype(np.float32)),
                                      b.const(rng.normal(0, 1, 16).astype(np.float32)),
                                      b.const(rng.normal(0, 1, 16).astype(np.float32)),
                                      b.const(rng.uniform(1, 4, 16).astype(np.float32))])
    x = b.quant(x, 2, True, True, 1.0)
    b.node("MatMul", [x, b.node("Transpose", [_weights(b, rng, (5, 16))], perm=[1, 0])])
    b.nodes[-1].output[0] = "y"
    graph = helper.make_graph(b.nodes, "t", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 40])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 5])], b.initializers)
    annotation = onnx.TensorAnnotation(tensor_name="x")
    annotation.quant_parameter_tensor_names.add(key="finn_datatype", value="BIPOLAR")
    graph.quantization_annotation.append(annotation)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(QONNX_DOMAIN, 1)])
    model.ir_version = 8
    imported = import_model(model)
    net = quantize_graph(imported, None, config=AcceleratorConfig())
    assert (net.input_lo, net.input_hi) == (0, 1)
    x = np.where(rng.random((200, 40)) < 0.5, 1.0, -1.0).astype(np.float32)
    onnx.save(model, tmp_path / "model.onnx")
    comparison = compare_with_qonnx(net, imported, str(tmp_path / "model.onnx"), x)
    # Hidden levels all equal; the logits within their bound (arg-max ties may split).
    assert not comparison.failures()
    assert all(equal == 1.0 for _, _, equal, _, _ in comparison.layers)


def test_check_of_a_qonnx_network_refuses_another_model(capfd, tmp_path):
    """`check OUT --model FLOAT.onnx` of a QONNX network: one line, exit 2."""
    from test_hostile_inputs import assert_refused, run_cli

    from fpganet.cli import main
    from fpganet.datasets import LENET5_ONNX

    assert main(["compile", str(qonnx_model("tfc-w1a1")), "-o", str(tmp_path / "OUT")]) == 0
    assert main(["mnist", "--unit", "--limit", "5", "-o", str(tmp_path / "x.npz")]) == 0
    capfd.readouterr()
    assert_refused(*run_cli(capfd, "check", tmp_path / "OUT", "--inputs", tmp_path / "x.npz",
                            "--model", LENET5_ONNX), "--model", "not a QONNX model")
