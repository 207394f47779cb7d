"""ONNX import: LeNet-5 and synthetic graphs, the float IR executor against onnxruntime, refusals."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_builders import constant, init, make, node, ort_run, small_cnn, weights

from fpganet.datasets import LENET5_ONNX, mnist
from fpganet.errors import FpganetError
from fpganet.model import Conv, Dense, MaxPool, Reshape, import_model, load_onnx, run_float
from fpganet.qdq_export import run_source_model

RNG = np.random.default_rng(1234)


def inputs(shape, n=5):
    return RNG.normal(0, 1, (n, *shape)).astype(np.float32)


def assert_matches_ort(model, x, atol=2e-4):
    """Import ``model``, run the float IR and onnxruntime on ``x``, compare."""
    graph = import_model(model)
    expected = ort_run(model, x)
    actual = run_float(graph, x)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=atol)
    return graph


# LeNet-5 -----------------------------------------------------------------------------------

def test_lenet_structure():
    graph = load_onnx(LENET5_ONNX)
    kinds = [type(layer).__name__ for layer in graph.layers]
    assert kinds == ["Conv", "MaxPool", "Conv", "MaxPool", "Reshape", "Dense", "Dense", "Dense"]
    assert graph.input_shape == (1, 28, 28) and graph.output_shape == (10,)
    assert [getattr(layer, "relu", None) for layer in graph.layers] == \
        [True, None, True, None, None, True, True, False]
    assert graph.layers[0].pads == (2, 2, 2, 2) and graph.layers[0].out_shape == (6, 28, 28)
    assert graph.layers[4].in_shape == (16, 5, 5) and graph.layers[4].out_shape == (400, 1, 1)
    assert graph.macs == 416_520  # SOURCE.md: 0.42 M multiply-accumulates per image
    assert graph.dropped_output_op == "Softmax"


def test_lenet_float_ir_matches_onnxruntime_with_free_batch():
    # The export fixes the batch at 10; the IR runs 23 images at once.
    x, _ = mnist("eval", limit=23)
    graph = load_onnx(LENET5_ONNX)
    logits = run_float(graph, x)
    probabilities = run_source_model(LENET5_ONNX, x)
    softmax = np.exp(logits - logits.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(softmax, probabilities, atol=1e-5)


# Synthetic graphs against onnxruntime ------------------------------------------------------

def test_conv_stride_asymmetric_pads_odd_channels_maxpool_flatten_gemm():
    graph = assert_matches_ort(small_cnn(), inputs((3, 9, 9)))
    conv1 = graph.layers[0]
    assert isinstance(conv1, Conv) and conv1.stride == (2, 2) and conv1.pads == (1, 0, 2, 1)
    assert conv1.kernel == (3, 2) and conv1.relu
    # The ReLU after the MaxPool is moved before it (they commute), into conv2.
    assert graph.layers[1].relu and isinstance(graph.layers[2], MaxPool)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad(auto_pad):
    model = make([node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 2],
                       kernel_shape=[4, 3])],
                 [init("w", weights((2, 3, 4, 3), 9))], in_shape=("N", 3, 8, 7))
    assert_matches_ort(model, inputs((3, 8, 7)))


def test_maxpool_ceil_mode():
    model = make([node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
                 in_shape=("N", 2, 8, 8))
    graph = assert_matches_ort(model, inputs((2, 8, 8)))
    assert graph.layers[-1].out_shape == (2, 4, 4)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_alpha_beta_trans_b(trans_b):
    w = weights((6, 4) if trans_b else (4, 6), 11)
    model = make([node("Gemm", ["x", "w", "c"], ["y"], alpha=0.75, beta=-1.5, transB=trans_b)],
                 [init("w", w), init("c", weights((1, 6), 12))], in_shape=("N", 4))
    graph = assert_matches_ort(model, inputs((4,)))
    assert isinstance(graph.layers[0], Dense) and graph.layers[0].weight.shape == (6, 4)


def test_gemm_trans_a_on_transposed_data():
    # Transpose makes the data [K, N]; Gemm with transA=1 reads it back as [N, K].
    model = make([node("Transpose", ["x"], ["t"], perm=[1, 0]),
                  node("Gemm", ["t", "w", "c"], ["y"], transA=1, alpha=2.0, beta=0.5)],
                 [init("w", weights((5, 3), 13)), init("c", weights((3,), 14))], in_shape=("N", 5))
    assert_matches_ort(model, inputs((5,)))


def test_gemm_with_constant_first_operand():
    # y^T = A op(x)^T: Gemm(A=W, B=x, transB=1) gives [M, N], a Transpose brings the batch back.
    model = make([node("Gemm", ["w", "x", "c"], ["t"], transB=1),
                  node("Transpose", ["t"], ["y"], perm=[1, 0])],
                 [init("w", weights((3, 5), 15)), init("c", weights((3, 1), 16))], in_shape=("N", 5))
    assert_matches_ort(model, inputs((5,)))


def test_matmul_add_as_dense_with_constant_node_weights():
    model = make([constant("w", weights((6, 4), 17)), constant("b", weights((4,), 18)),
                  node("MatMul", ["x", "w"], ["m"]), node("Add", ["b", "m"], ["y"])],
                 in_shape=("N", 6))
    graph = assert_matches_ort(model, inputs((6,)))
    assert len(graph.layers) == 1 and isinstance(graph.layers[0], Dense)


def test_batchnorm_after_conv_and_after_gemm_with_unsqueeze_squeeze():
    c, m = 4, 6
    bn = lambda prefix, n, seed: [init(f"{prefix}_s", 1 + weights((n,), seed, 0.2)),
                                  init(f"{prefix}_b", weights((n,), seed + 1, 0.2)),
                                  init(f"{prefix}_m", weights((n,), seed + 2, 0.2)),
                                  init(f"{prefix}_v", np.abs(weights((n,), seed + 3, 0.5)) + 0.1)]
    features = c * 5 * 5
    model = make([
        node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"], epsilon=1e-3),
        node("Relu", ["n1"], ["r"]),
        node("Flatten", ["r"], ["f"]),
        node("Gemm", ["f", "g", "gb"], ["d"], transB=1),
        node("Unsqueeze", ["d", "ax"], ["u"]),  # [N, M] -> [N, M, 1], as a 1-D BatchNorm exports
        node("BatchNormalization", ["u", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["n2"]),
        node("Squeeze", ["n2", "ax"], ["y"]),
    ], [init("w", weights((c, 2, 3, 3), 19)), init("g", weights((m, features), 20, 0.1)),
        init("gb", weights((m,), 21)), init("ax", np.array([2], np.int64)),
        *bn("bn1", c, 30), *bn("bn2", m, 40)], in_shape=("N", 2, 5, 5))
    graph = assert_matches_ort(model, inputs((2, 5, 5)))
    assert [type(layer) for layer in graph.layers] == [Conv, Reshape, Dense]
    assert sum("BatchNormalization" in note for note in graph.notes) == 2


def test_unsqueeze_squeeze_as_attributes_in_opset_11():
    model = make([node("Gemm", ["x", "g"], ["d"]),
                  node("Unsqueeze", ["d"], ["u"], axes=[2]),
                  node("BatchNormalization", ["u", "s", "b", "m", "v"], ["n"]),
                  node("Squeeze", ["n"], ["y"], axes=[2])],
                 [init("g", weights((3, 4), 22)), init("s", np.float32([1, 2, 3, 4])),
                  init("b", np.float32([0, 1, 0, 1])), init("m", np.float32([0.5, 0, 0, 1])),
                  init("v", np.float32([1, 2, 0.5, 1]))], in_shape=("N", 3), opset=11)
    assert_matches_ort(model, inputs((3,)))


def test_dropout_identity_are_removed():
    model = make([node("Identity", ["x"], ["i"]), node("Dropout", ["i"], ["d"], ratio=0.5),
                  node("Conv", ["d", "w"], ["y"])],
                 [init("w", weights((2, 3, 3, 3), 23))], in_shape=("N", 3, 6, 6), opset=11)
    graph = assert_matches_ort(model, inputs((3, 6, 6)))
    assert len(graph.layers) == 1


@pytest.mark.parametrize("batch", ["N", 7])
@pytest.mark.parametrize("target", ["minus_one", "baked", "shape_ops"])
def test_reshape_keeps_the_batch_free(batch, target):
    # An export with a fixed batch bakes it into the Reshape ([7, 32]); x.view(x.size(0), -1)
    # exports Shape -> Gather -> Unsqueeze -> Concat.
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    inits = [init("w", weights((2, 3, 3, 3), 24)), init("g", weights((5, 32), 25, 0.2))]
    if target == "shape_ops":
        nodes += [node("Shape", ["c"], ["s"]), constant("zero", np.array(0, np.int64)),
                  node("Gather", ["s", "zero"], ["n"], axis=0),
                  node("Unsqueeze", ["n", "ax0"], ["n1"]), constant("rest", np.array([-1], np.int64)),
                  node("Concat", ["n1", "rest"], ["shape"], axis=0)]
        inits.append(init("ax0", np.array([0], np.int64)))
    else:
        first = batch if target == "baked" and batch != "N" else -1
        inits.append(init("shape", np.array([first, 32], np.int64)))
    nodes += [node("Reshape", ["c", "shape"], ["r"]), node("Gemm", ["r", "g"], ["y"], transB=1)]
    model = make(nodes, inits, in_shape=(batch, 3, 4, 4))
    graph = import_model(model)
    assert [type(layer) for layer in graph.layers] == [Conv, Reshape, Dense]
    x = inputs((3, 4, 4), n=7)
    np.testing.assert_allclose(run_float(graph, x), ort_run(model, x), rtol=1e-4, atol=2e-4)
    # The IR itself is batch-free: any N runs.
    assert run_float(graph, inputs((3, 4, 4), n=3)).shape == (3, 5)


def test_log_softmax_is_dropped_and_argmax_kept():
    model = make([node("Gemm", ["x", "g"], ["d"], transB=1), node("LogSoftmax", ["d"], ["y"], axis=1)],
                 [init("g", weights((10, 6), 26))], in_shape=("N", 6))
    graph = import_model(model)
    assert graph.dropped_output_op == "LogSoftmax"
    x = inputs((6,), n=20)
    logits = run_float(graph, x)
    reference = ort_run(model, x)
    log_softmax = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - logits.max(1, keepdims=True)
    np.testing.assert_allclose(log_softmax, reference, atol=1e-5)
    assert np.array_equal(logits.argmax(1), reference.argmax(1))


# Refusals: one line naming the problem ------------------------------------------------------

def refusal(model):
    with pytest.raises(FpganetError) as caught:
        import_model(model)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unsupported_op_names_op_node_and_supported_list():
    message = refusal(make([node("Sigmoid", ["x"], ["y"], name="act7")], in_shape=("N", 4)))
    assert "'Sigmoid'" in message and "'act7'" in message
    assert "supported:" in message and "Conv" in message and "Gemm" in message


def test_unnamed_node_is_described_by_its_output():
    sigmoid = helper.make_node("Sigmoid", ["x"], ["out_9"])
    assert "output 'out_9'" in refusal(make([sigmoid], in_shape=("N", 4)))


@pytest.mark.parametrize("attrs, words", [({"group": 2}, "group 2"),
                                          ({"dilations": [2, 2]}, "dilations [2, 2]")])
def test_grouped_or_dilated_conv_is_refused(attrs, words):
    model = make([node("Conv", ["x", "w"], ["y"], name="cv", **attrs)],
                 [init("w", weights((3, 1 if "group" in attrs else 3, 3, 3), 27))])
    message = refusal(model)
    assert "'cv'" in message and words in message


def test_symbolic_spatial_dimension_names_the_tensor():
    model = make([node("Relu", ["x"], ["y"])], in_shape=("N", 3, "H", "W"))
    message = refusal(model)
    assert "cannot infer the shape of tensor 'x'" in message and "'H'" in message


def test_uninferable_reshape_names_the_tensor():
    # The target shape is computed by an op neither the importer nor ONNX inference folds.
    model = make([constant("a", np.array([-1, 12], np.int64)), node("Abs", ["a"], ["shape"]),
                  node("Reshape", ["x", "shape"], ["y"], name="rs")], in_shape=("N", 3, 2, 2))
    message = refusal(model)
    assert "cannot infer the shape of tensor 'y'" in message and "'rs'" in message


@pytest.mark.parametrize("bad, word", [(np.nan, "NaN"), (np.inf, "Inf")])
def test_nan_or_inf_weights_name_the_initializer(bad, word):
    w = weights((2, 3, 3, 3), 28)
    w[1, 2, 0, 1] = bad
    message = refusal(make([node("Conv", ["x", "conv.w"], ["y"])], [init("conv.w", w)]))
    assert "initializer 'conv.w'" in message and word in message


def test_a_join_other_than_add_is_refused():
    # Branches are imported (a residual Add); only Add may join them.
    model = make([node("Relu", ["x"], ["a"]), node("Relu", ["a"], ["b"]),
                  node("MatMul", ["a", "b"], ["y"], name="join")], in_shape=("N", 4))
    message = refusal(model)
    assert "'join'" in message and "only Add may join" in message


def test_softmax_before_the_end_is_refused():
    model = make([node("Softmax", ["x"], ["s"], name="sm"), node("Relu", ["s"], ["y"])],
                 in_shape=("N", 4))
    assert "'sm'" in refusal(model)


def test_batchnorm_without_linear_layer_is_refused():
    model = make([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
                 [init(n, np.ones(3, np.float32)) for n in "sbmv"], in_shape=("N", 3, 4, 4))
    assert "'bn'" in refusal(model) and "folded" in refusal(model)


def test_non_float_input_is_refused():
    graph = helper.make_graph([node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert "INT64" in refusal(model)


# Import simplification: graphs equivalent to supported ones -----------------------------------

def _conv_then(nodes, initializers, batch=1):
    """Conv(1 -> 6, 3x3) on an 8x8 input of declared batch ``batch``, then ``nodes`` to 'y'."""
    conv_w = weights((6, 1, 3, 3), 1)
    return make([node("Conv", ["x", "w"], ["c"]), node("Relu", ["c"], ["r"]), *nodes],
                [init("w", conv_w), *initializers], in_shape=(batch, 1, 8, 8))


def test_matmul_weight_reshaped_from_an_initializer_is_a_constant():
    """The ONNX zoo's mnist-8 writes its dense weight as Reshape(initializer, shape)."""
    fc = weights((216, 10), 2)
    model = _conv_then([node("Reshape", ["r", "s"], ["f"]), node("Reshape", ["fc_flat", "fc_shape"], ["fc"]),
                        node("MatMul", ["f", "fc"], ["y"])],
                       [init("s", np.array([1, 216])), init("fc_flat", fc.reshape(-1)),
                        init("fc_shape", np.array([216, 10]))])
    graph = assert_matches_ort(model, inputs((1, 8, 8), n=1))
    assert [type(layer).__name__ for layer in graph.layers] == ["Conv", "Reshape", "Dense"]


def test_matmul_weight_transposed_and_scaled_from_constants_is_a_constant():
    fc = weights((10, 216), 2)
    model = _conv_then([node("Flatten", ["r"], ["f"]), node("Transpose", ["fcT"], ["t"], perm=[1, 0]),
                        constant("half", np.float32(0.5)), node("Mul", ["t", "half"], ["fc"]),
                        node("MatMul", ["f", "fc"], ["y"])], [init("fcT", fc)], batch="N")
    assert_matches_ort(model, inputs((1, 8, 8), n=3))


def test_flatten_axis_0_at_a_declared_batch_of_1():
    """At batch 1, Flatten(axis 0) is [1, n], as axis 1 is; at a free batch it would mix images."""
    fc = weights((216, 10), 2)
    nodes = [node("Flatten", ["r"], ["f"], axis=0), node("MatMul", ["f", "fc"], ["y"])]
    assert_matches_ort(_conv_then(nodes, [init("fc", fc)]), inputs((1, 8, 8), n=1))
    with pytest.raises(FpganetError, match="Flatten with axis 0 is not supported; only axis 1"):
        import_model(_conv_then(nodes, [init("fc", fc)], batch="N"))


@pytest.mark.parametrize("bias_shape", [(1, 6, 1, 1), (6, 1, 1)])
def test_conv_then_add_of_a_per_channel_constant_is_the_conv_bias(bias_shape):
    model = make([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "b"], ["a"]),
                  node("Relu", ["a"], ["y"])],
                 [init("w", weights((6, 1, 3, 3), 1)), init("b", weights(bias_shape, 3))],
                 in_shape=("N", 1, 8, 8))
    graph = assert_matches_ort(model, inputs((1, 8, 8), n=2))
    assert [type(layer).__name__ for layer in graph.layers] == ["Conv"] and graph.layers[0].relu


@pytest.mark.parametrize("channels", [1, 3])
def test_nhwc_input_transposed_to_nchw_keeps_the_models_layout(channels, tmp_path):
    """A Keras or tf2onnx input [N, H, W, C] that a Transpose makes NCHW: fpganet takes
    [N, 8, 8, C], as onnxruntime does, and the host transposes (no layer for it); the compiled
    network records the layout, and `check` (its ONNX export against the source model) passes."""
    import json

    from onnx_builders import nhwc_cnn, save

    from fpganet.backends import run_network
    from fpganet.cli import main
    from fpganet.compiler import load_compiled

    model = nhwc_cnn(channels)
    graph = assert_matches_ort(model, inputs((8, 8, channels)))
    assert graph.input_shape == (8, 8, channels) and graph.input_layout == "nhwc"
    assert [type(layer).__name__ for layer in graph.layers] == ["Conv", "Reshape", "Dense"]
    path, calib, out = tmp_path / "nhwc.onnx", tmp_path / "calib.npz", tmp_path / "OUT"
    save(model, path)
    np.savez(calib, x=inputs((8, 8, channels), n=64))
    assert main(["compile", str(path), "--calib", str(calib), "-o", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["input"]["layout"] == "nhwc"
    assert main(["check", str(out), "--inputs", str(calib)]) == 0
    x = inputs((8, 8, channels), n=200)
    golden = run_network(load_compiled(out), x).logits
    agreement = np.mean(golden.argmax(1) == ort_run(model, x).argmax(1))
    assert agreement >= 0.9, agreement       # a wrong order would agree by chance (~10 %)
