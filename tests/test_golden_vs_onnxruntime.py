"""The golden model against onnxruntime: input quantization, layer by layer, end to end, accuracy."""

import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_builders import small_cnn

from fpganet.backends import run_network
from fpganet.compiler import compile_model
from fpganet.datasets import LENET5_ONNX, mnist
from fpganet.golden import accumulate, layer_macs, run_golden
from fpganet.model import import_model
from fpganet.qdq_export import compare_layers, run_onnx, run_source_model, to_onnx
from fpganet.qnet import QConv
from fpganet.quantize import quantize_graph


@pytest.fixture(scope="module")
def lenet():
    return compile_model()  # embedded LeNet-5, calibration split = test images 0..499


@pytest.fixture(scope="module")
def eval_split():
    return mnist("eval")  # test images 500..9999, never seen by the calibration


def quantize_linear_op(scale, zero_point, shape):
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])], "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info("q", TensorProto.INT8, ["N", *shape])],
        [numpy_helper.from_array(np.float32(scale), "s"), numpy_helper.from_array(np.int8(zero_point), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def test_host_input_quantization_equals_onnxruntime(lenet, eval_split):
    x = np.concatenate([eval_split[0][:2000],
                        np.random.default_rng(3).normal(0, 3, (500, 1, 28, 28)).astype(np.float32)])
    (expected,) = run_onnx(quantize_linear_op(lenet.input_scale, lenet.input_zp, (1, 28, 28)), {"x": x})
    assert np.array_equal(lenet.quantize_input(x), expected)


def test_lenet_accuracy_on_images_not_used_for_calibration(lenet, eval_split):
    x, y = eval_split
    start = time.perf_counter()
    result = run_network(lenet, x, backend="golden")
    elapsed = time.perf_counter() - start
    accuracy = result.accuracy(y)
    print(f"golden int8 top-1 {100 * accuracy:.2f} % on {len(y)} images in {elapsed:.1f} s")
    assert accuracy >= 0.990
    assert elapsed < 30  # 9,500 images; about 3 s on one core
    assert result.q.dtype == np.int8 and result.logits.shape == (len(y), 10)
    np.testing.assert_array_equal(result.logits,
                                  np.float32(lenet.output_scale) * (result.q.astype(np.float32) - lenet.output_zp))


def test_lenet_layer_by_layer_against_onnxruntime(lenet, eval_split):
    x = eval_split[0][:1000]
    results = compare_layers(lenet, lenet.quantize_input(x))
    assert [r.type for r in results] == ["conv", "maxpool", "conv", "maxpool", "reshape",
                                         "dense", "dense", "dense"]
    for r in results:
        print(f"{r.name}: {100 * r.equal_fraction:.4f} % equal, max {r.max_abs_diff} LSB")
        assert r.equal_fraction >= 0.99 and r.max_abs_diff <= 1, r
        if r.type in ("maxpool", "reshape"):
            assert r.equal == r.elements  # no arithmetic: must be identical


def test_golden_agrees_with_the_float_model_in_onnxruntime(lenet, eval_split):
    x, y = eval_split
    golden = run_golden(lenet, lenet.quantize_input(x)).argmax(1)
    float_pred = run_source_model(LENET5_ONNX, x).argmax(1)
    agreement = np.mean(golden == float_pred)
    print(f"golden vs float arg-max agreement {100 * agreement:.2f} %, float top-1 "
          f"{100 * np.mean(float_pred == y):.2f} %")
    assert agreement >= 0.995


def test_whole_int8_network_in_onnxruntime(lenet, eval_split):
    x = eval_split[0][:2000]
    golden = run_golden(lenet, lenet.quantize_input(x))
    ort_q, ort_logits = run_onnx(to_onnx(lenet), {lenet.input_name: x})
    assert ort_q.dtype == np.int8 and ort_q.shape == golden.shape
    assert np.mean(ort_q.argmax(1) == golden.argmax(1)) >= 0.995
    assert np.mean(ort_q == golden) >= 0.9  # one-LSB differences propagate through the layers
    np.testing.assert_allclose(ort_logits, lenet.dequantize_output(ort_q), rtol=1e-6)


def test_synthetic_network_layer_by_layer():
    # Stride 2, asymmetric padding (read as zp_in != -128), padded max pooling, odd channels.
    graph = import_model(small_cnn())
    rng = np.random.default_rng(5)
    net = quantize_graph(graph, rng.normal(0.3, 1, (200, 3, 9, 9)).astype(np.float32))
    assert net.layers[0].zp_in not in (-128, 0) and net.layers[0].pads == (1, 0, 2, 1)
    q_in = net.quantize_input(rng.normal(0.3, 1, (300, 3, 9, 9)).astype(np.float32))
    for r in compare_layers(net, q_in):
        assert r.equal_fraction >= 0.99 and r.max_abs_diff <= 1, r


def test_mac_counts(lenet):
    assert layer_macs(lenet) == [117_600, 0, 240_000, 0, 0, 48_000, 10_080, 840]
    assert lenet.macs == 416_520


def test_accumulators_are_exact_for_wide_layers():
    # Sums beyond 2**24, where float32 stops representing integers: the golden model must switch
    # its BLAS product to float64 and stay exact; checked against an int64 einsum.
    rng = np.random.default_rng(9)
    m, c = 3, 600
    weight = rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8)
    weight[0] = 127
    weight[1] = -127
    layer = QConv(name="wide", kind="conv", in_shape=(c, 4, 4), out_shape=(m, 2, 2), kernel=(3, 3),
                  stride=(1, 1), pads=(0, 0, 0, 0), zp_in=-7, zp_out=0, lo=-128, hi=127, relu=False,
                  weight=weight, bias=rng.integers(-10**6, 10**6, m).astype(np.int32),
                  mult=np.full(m, 2**14, np.int32), shift=np.full(m, 40, np.int32),
                  s_in=1.0, s_out=1.0, s_w=np.ones(m, np.float32))
    layer.validate()
    x = np.where(rng.random((2, c, 4, 4)) < 0.97, 127, -rng.integers(1, 129, (2, c, 4, 4))).astype(np.int8)
    acc = accumulate(layer, x)
    expected = np.empty_like(acc)
    for i in range(2):
        for j in range(2):
            patch = x[:, :, i:i + 3, j:j + 3].astype(np.int64)
            expected[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, weight.astype(np.int64)) + layer.bias
    assert np.abs(expected).max() > 2**24
    assert np.array_equal(acc, expected)
    cols = x[:, :, :3, :3].reshape(2, -1).astype(np.float32)
    float32 = cols @ weight.reshape(m, -1).T.astype(np.float32)
    assert not np.array_equal(float32.astype(np.int64) + layer.bias, expected[:, :, 0, 0])
