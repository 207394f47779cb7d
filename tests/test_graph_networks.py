"""Graphs, not chains: residual adds, depthwise and grouped convolutions, average pooling,
ReLU6, BatchNorm folded forward, NHWC classifier heads; imported against onnxruntime, quantized
through the golden model against onnxruntime layer by layer, and refused by the accelerator."""

import dataclasses
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx_builders import init, make, node, ort_run, save, weights

from fpganet.cli import main
from fpganet.codegen import build_images, run_isa
from fpganet.compiler import write_compiled
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.golden import run_golden, run_layer
from fpganet.model import import_model, load_onnx, run_float
from fpganet.model.ir import Add, AvgPool, Conv, Dense
from fpganet.qdq_export import compare_layers, run_onnx, run_source_model, to_onnx
from fpganet.qnet import QAdd, QAvgPool, QConv, QNetwork, load_network
from fpganet.quantize import quantize_add, quantize_graph, quantize_linear_layer

def inputs(shape, n=6, low=-1.0, high=1.0, seed=77):
    """``n`` uniform inputs; the same for the same arguments, whichever tests ran before."""
    rng = np.random.default_rng([seed, n, *shape])
    return rng.uniform(low, high, (n, *shape)).astype(np.float32)


def imported(model, x, atol=2e-4):
    """Import ``model``, run the float IR and onnxruntime on ``x``, compare; the graph."""
    graph = import_model(model)
    np.testing.assert_allclose(run_float(graph, x), ort_run(model, x), rtol=1e-4, atol=atol)
    return graph


def refusal(model):
    with pytest.raises(FpganetError) as caught:
        import_model(model)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def conv(name, x, out, cin, seed, k=(3, 3), group=1, **attrs):
    """A Conv node and its weight/bias initializers."""
    w = init(f"{name}.w", weights((out, cin // group, *k), seed))
    b = init(f"{name}.b", weights((out,), seed + 100, 0.1))
    return node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name, kernel_shape=list(k),
                group=group, **attrs), [w, b]


def residual_model(channels=4, size=8):
    """conv-relu-conv + skip (the input's conv), Add, Relu, GlobalAveragePool, Flatten, Gemm."""
    c0, i0 = conv("c0", "x", channels, 3, 1, pads=[1, 1, 1, 1])
    c1, i1 = conv("c1", "r0", channels, channels, 2, pads=[1, 1, 1, 1])
    c2, i2 = conv("c2", "r1", channels, channels, 3, pads=[1, 1, 1, 1])
    nodes = [c0, node("Relu", ["c0"], ["r0"]), c1, node("Relu", ["c1"], ["r1"]), c2,
             node("Add", ["r0", "c2"], ["s"], name="add"), node("Relu", ["s"], ["rs"]),
             node("GlobalAveragePool", ["rs"], ["g"], name="gap"), node("Flatten", ["g"], ["f"]),
             node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    inits = [*i0, *i1, *i2, init("fw", weights((5, channels), 4)), init("fb", weights((5,), 5, 0.1))]
    return make(nodes, inits, in_shape=("N", 3, size, size))


def mobilenet_block(size=(9, 7)):
    """conv stride 2 (asymmetric pads) - depthwise 3x3 - ReLU6 - pointwise - depthwise stride 2
    with a non-square kernel - AveragePool - Transpose NHWC - Reshape - Gemm."""
    c0, i0 = conv("c0", "x", 6, 3, 11, strides=[2, 2], pads=[0, 0, 1, 1])
    d1, i1 = conv("d1", "r0", 6, 6, 12, group=6, pads=[1, 1, 1, 1])
    p2, i2 = conv("p2", "r1", 8, 6, 13, k=(1, 1))
    d3, i3 = conv("d3", "r2", 8, 8, 14, k=(3, 2), group=8, strides=[2, 1], pads=[1, 0, 1, 1])
    nodes = [c0, node("Relu", ["c0"], ["r0"]), d1,
             node("Clip", ["d1", "zero", "six"], ["r1"], name="relu6"), p2,
             node("Relu", ["p2"], ["r2"]), d3, node("Relu", ["d3"], ["r3"]),
             node("AveragePool", ["r3"], ["a"], name="avg", kernel_shape=[2, 2], strides=[1, 1]),
             node("Transpose", ["a"], ["t"], perm=[0, 2, 3, 1]),
             node("Reshape", ["t", "shape"], ["f"]), node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    ho = (size[0] + 1 - 3) // 2 + 1
    wo = (size[1] + 1 - 3) // 2 + 1
    h3, w3 = (ho + 2 - 3) // 2 + 1, (wo + 1 - 2) // 1 + 1
    features = 8 * (h3 - 1) * (w3 - 1)
    inits = [*i0, *i1, *i2, *i3, init("zero", np.float32(0)), init("six", np.float32(6)),
             init("shape", np.array([-1, features], np.int64)),
             init("fw", weights((3, features), 15)), init("fb", weights((3,), 16, 0.1))]
    return make(nodes, inits, in_shape=("N", 3, *size))


# Import: each new op against onnxruntime ------------------------------------------------------

def test_residual_add_with_relu_and_global_average_pool():
    graph = imported(residual_model(), inputs((3, 8, 8)))
    kinds = [type(layer).__name__ for layer in graph.layers]
    assert kinds == ["Conv", "Conv", "Conv", "Add", "AvgPool", "Dense"]
    add = graph.layers[3]
    assert add.inputs == (0, 2) and add.relu and graph.layers[0].relu
    assert graph.layers[4].kernel == (8, 8) and not graph.is_chain


def test_depthwise_relu6_non_square_strides_and_nhwc_head():
    graph = imported(mobilenet_block(), inputs((3, 9, 7), low=-3, high=3))
    depthwise = [layer for layer in graph.layers if isinstance(layer, Conv) and layer.groups > 1]
    assert [layer.groups for layer in depthwise] == [6, 8]
    assert depthwise[0].clip_max == 6.0 and depthwise[1].kernel == (3, 2)
    assert any("transpose" in note for note in graph.notes)


@pytest.mark.parametrize("group", [2, 3])
def test_grouped_conv(group):
    c, attrs = conv("y", "x", 6, 6, 21, group=group, pads=[0, 1, 2, 1], strides=[1, 2])
    graph = imported(make([c], attrs, in_shape=("N", 6, 7, 8)), inputs((6, 7, 8)))
    assert graph.layers[0].groups == group


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 2], strides=[2, 1]),
                                   dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                        count_include_pad=1),
                                   dict(kernel_shape=[2, 2], auto_pad="VALID", strides=[2, 2])])
def test_average_pool(attrs):
    model = make([node("AveragePool", ["x"], ["y"], **attrs)], in_shape=("N", 2, 7, 6))
    graph = imported(model, inputs((2, 7, 6)))
    assert isinstance(graph.layers[0], AvgPool)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_over_h_and_w(keepdims):
    model = make([node("ReduceMean", ["x"], ["y"], axes=[-2, -1], keepdims=keepdims)],
                 in_shape=("N", 3, 4, 5))
    graph = imported(model, inputs((3, 4, 5)))
    assert graph.layers[0].kernel == (4, 5)


def test_batchnorm_after_relu_is_folded_forward_into_conv_and_gemm():
    c0, i0 = conv("c0", "x", 4, 3, 31, pads=[1, 1, 1, 1])
    c1, i1 = conv("c1", "n0", 4, 4, 32)           # unpadded: the BN offset folds exactly
    bn = [init(f"{k}{i}", np.abs(weights((4,), 33 + i)) + 0.5) for i in (0, 1) for k in "gmv"] + \
         [init(f"o{i}", weights((4,), 40 + i)) for i in (0, 1)]
    nodes = [c0, node("Relu", ["c0"], ["r0"]),
             node("BatchNormalization", ["r0", "g0", "o0", "m0", "v0"], ["n0"], name="bn0"), c1,
             node("Relu", ["c1"], ["r1"]),
             node("BatchNormalization", ["r1", "g1", "o1", "m1", "v1"], ["n1"], name="bn1"),
             node("Flatten", ["n1"], ["f"]), node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    model = make(nodes, [*i0, *i1, *bn, init("fw", weights((3, 4 * 4 * 4), 44)),
                         init("fb", weights((3,), 45))], in_shape=("N", 3, 6, 6))
    graph = imported(model, inputs((3, 6, 6)))
    assert [type(layer).__name__ for layer in graph.layers] == ["Conv", "Conv", "Reshape", "Dense"]
    assert sum("forward" in note for note in graph.notes) == 2


def test_refusals_name_the_node():
    c0, i0 = conv("c0", "x", 4, 3, 51, pads=[1, 1, 1, 1])
    c1, i1 = conv("c1", "n0", 4, 4, 52, pads=[1, 1, 1, 1])
    bn = [init(k, np.abs(weights((4,), 53)) + 0.5) for k in "gmv"] + [init("o", weights((4,), 54))]
    padded = make([c0, node("Relu", ["c0"], ["r0"]),
                   node("BatchNormalization", ["r0", "g", "o", "m", "v"], ["n0"], name="bn"), c1],
                  [*i0, *i1, *bn], in_shape=("N", 3, 6, 6))
    message = refusal(padded)
    assert "'bn'" in message and "padded" in message
    shapes = make([c0, node("MaxPool", ["c0"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                   node("Add", ["p", "c0"], ["y"], name="badd")], i0, in_shape=("N", 3, 6, 6))
    assert "'badd'" in refusal(shapes) and "no broadcasting" in refusal(shapes)
    shared = make([c0, node("Relu", ["c0"], ["r0"], name="act"),
                   node("Add", ["r0", "c0"], ["y"])], i0, in_shape=("N", 3, 6, 6))
    assert "'act'" in refusal(shared) and "also used" in refusal(shared)
    clip = make([c0, node("Clip", ["c0", "m1"], ["y"], name="clip")],
                [*i0, init("m1", np.float32(-1))], in_shape=("N", 3, 6, 6))
    assert "'clip'" in refusal(clip) and "min" in refusal(clip)
    pads = make([node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1])], in_shape=("N", 3, 6, 6))
    assert "'ap'" in refusal(pads) and "count_include_pad" in refusal(pads)


# Quantized: golden model against onnxruntime ---------------------------------------------------

@pytest.fixture(scope="module", params=["residual", "mobilenet"])
def quantized(request):
    if request.param == "residual":
        model, shape, low, high = residual_model(), (3, 8, 8), -1.0, 1.0
    else:
        model, shape, low, high = mobilenet_block(), (3, 9, 7), -3.0, 3.0
    graph = import_model(model)
    net = quantize_graph(graph, inputs(shape, 200, low, high))
    return model, graph, net, inputs(shape, 300, low, high)


def test_golden_layer_by_layer_against_onnxruntime(quantized):
    _, _, net, x = quantized
    q_in = net.quantize_input(x)
    results = compare_layers(net, q_in)
    assert {type(layer) for layer in net.layers} & {QAdd, QAvgPool}
    for result in results:
        assert result.passes(min_equal=0.99, max_diff=1), result


def test_golden_end_to_end_against_onnxruntime_and_float(quantized):
    model, graph, net, x = quantized
    q = run_golden(net, net.quantize_input(x))
    ort_q, _ = run_onnx(to_onnx(net), {net.input_name: x})
    assert np.mean(ort_q == q) > 0.9
    golden = q.reshape(len(x), -1).argmax(1)
    assert np.mean(ort_q.reshape(len(x), -1).argmax(1) == golden) > 0.97
    float_pred = run_float(graph, x).reshape(len(x), -1).argmax(1)
    assert np.mean(float_pred == golden) > 0.9


def test_compiled_graph_round_trips_and_runs_on_the_isa_simulator(quantized, tmp_path):
    _, _, net, x = quantized
    q_in = net.quantize_input(x[:20])
    q_isa, _ = run_isa(net, q_in)
    assert np.array_equal(q_isa, run_golden(net, q_in))
    kinds = {step.kind for step in build_images(net).plan.steps}
    assert kinds & {"add", "grouped"}
    write_compiled(net, tmp_path / "OUT")
    loaded = load_network(tmp_path / "OUT")
    assert np.array_equal(run_golden(loaded, q_in), run_golden(net, q_in))
    assert [layer.inputs for layer in loaded.layers] == [layer.inputs for layer in net.layers]


def test_add_rescales_each_input_then_requantizes():
    layer = Add(name="a", in_shape=(1, 1, 4), relu=True)
    q = quantize_add(layer, (0.02, 5), (0.05, -3), (0.08, -128))
    a = np.array([[[[-128, 5, 60, 127]]]], np.int8)
    b = np.array([[[[127, -3, -50, -128]]]], np.int8)
    got = run_layer(q, a, b)
    real = 0.02 * (a.astype(float) - 5) + 0.05 * (b.astype(float) + 3)
    expected = np.clip(np.floor(real / 0.08 + 0.5) - 128, -128, 127)
    assert np.abs(got - expected).max() <= 1 and got.min() >= -128


def test_relu6_clamps_at_the_code_of_six():
    layer = Dense(name="d", weight=np.eye(2, dtype=np.float32), bias=np.zeros(2, np.float32),
                  in_shape=(2, 1, 1), out_shape=(2, 1, 1), relu=True, clip_max=6.0)
    q = quantize_linear_layer(layer, 0.1, 0, 0.05, -128)
    assert q.lo == -128 and q.hi == -128 + 120


# The MLPerf Tiny networks on the shared test material --------------------------------------------

def _shared():
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    import mlperf_tiny
    if not mlperf_tiny.SHARED.is_dir():
        pytest.skip(f"no shared test material at {mlperf_tiny.SHARED}")
    return mlperf_tiny



TARGETS = {"resnet8": 0.85, "vww": 0.83}


@pytest.mark.parametrize("model", ["resnet8", "vww"])
def test_mlperf_tiny_float_ir_matches_onnxruntime(model):
    mlperf_tiny = _shared()
    x, _ = mlperf_tiny.load_set(model, "test")
    x = x[:40]
    graph = load_onnx(mlperf_tiny.model_path(model))
    assert not graph.is_chain or model == "vww"
    logits = run_float(graph, x)
    softmax = np.exp(logits - logits.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(softmax, run_source_model(mlperf_tiny.model_path(model), x), atol=1e-5)


@pytest.mark.parametrize("model", ["resnet8", "vww"])
def test_mlperf_tiny_through_the_golden_model(model):
    mlperf_tiny = _shared()
    result = mlperf_tiny.measure(model, "mse", layers=False)
    assert result["golden_top1"] >= TARGETS[model], result
    assert result["agreement"] >= 0.95, result


# Malformed graphs: accepted and runnable, or refused in one line -------------------------------

def _mutated_graph(draw):
    """The residual or the MobileNet block with up to three random mutations of an op, an
    attribute, an edge (a new branch, a join, a cycle) or an initializer."""
    from onnx import helper, numpy_helper

    model = draw(st.sampled_from([residual_model, mobilenet_block]))()
    nodes, inits = model.graph.node, model.graph.initializer
    ops = ["Conv", "Relu", "Add", "AveragePool", "GlobalAveragePool", "ReduceMean", "Clip",
           "BatchNormalization", "Transpose", "Reshape", "Flatten", "MaxPool", "Gemm", "Concat"]
    attributes = {"group": st.integers(-1, 9), "perm": st.permutations([0, 1, 2, 3]),
                  "pads": st.lists(st.integers(-1, 3), min_size=4, max_size=4),
                  "count_include_pad": st.integers(0, 1), "keepdims": st.integers(0, 1),
                  "axes": st.lists(st.integers(-4, 3), min_size=1, max_size=3),
                  "kernel_shape": st.lists(st.integers(0, 4), min_size=2, max_size=2),
                  "strides": st.lists(st.integers(0, 3), min_size=2, max_size=2)}
    for _ in range(draw(st.integers(1, 3))):
        target = nodes[draw(st.integers(0, len(nodes) - 1))]
        kind = draw(st.sampled_from(["op", "attribute", "edge", "initializer"]))
        if kind == "op":
            target.op_type = draw(st.sampled_from(ops))
        elif kind == "attribute":
            key = draw(st.sampled_from(sorted(attributes)))
            kept = [a for a in target.attribute if a.name != key]
            del target.attribute[:]
            target.attribute.extend([*kept, helper.make_attribute(key, draw(attributes[key]))])
        elif kind == "edge":
            source = nodes[draw(st.integers(0, len(nodes) - 1))]
            position = draw(st.integers(0, max(len(target.input) - 1, 0)))
            if target.input:
                target.input[position] = source.output[0]
        else:
            index = draw(st.integers(0, len(inits) - 1))
            value = numpy_helper.to_array(inits[index])
            fill = draw(st.sampled_from([0.0, 1e-30, 3e38, -1.0, 6.0]))
            inits[index].CopyFrom(numpy_helper.from_array(np.full_like(value, fill), inits[index].name))
    return model


def test_mutated_graphs_import_run_and_quantize_or_refuse_in_one_line():
    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.composite(_mutated_graph)())
    def check(model):
        try:
            graph = import_model(model)
            shape = graph.input_shape
            x = inputs(shape, 4)
            with np.errstate(all="ignore"):
                y = run_float(graph, x)
            assert y.shape == (4, *graph.output_shape)
            if np.all(np.isfinite(y)):
                net = quantize_graph(graph, inputs(shape, 8))
                run_golden(net, net.quantize_input(x))
        except FpganetError as error:
            assert "\n" not in str(error) and str(error)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check()


def test_cli_compiles_runs_checks_and_estimates_a_graph(tmp_path, capfd):
    model = save(residual_model(), tmp_path / "residual.onnx")
    np.savez(tmp_path / "C.npz", x=inputs((3, 8, 8), 64))
    np.savez(tmp_path / "X.npz", x=inputs((3, 8, 8), 20), y=np.zeros(20, np.int64))
    assert main(["compile", str(model), "--calib", str(tmp_path / "C.npz"), "-o",
                 str(tmp_path / "OUT")]) == 0
    out, err = capfd.readouterr()
    assert " add " in out and "Traceback" not in err
    for backend in ("golden", "isa"):
        assert main(["run", str(tmp_path / "OUT"), "--inputs", str(tmp_path / "X.npz"),
                     "--backend", backend, "--out", str(tmp_path / f"{backend}.npz")]) == 0
    with np.load(tmp_path / "golden.npz") as golden, np.load(tmp_path / "isa.npz") as isa:
        assert np.array_equal(golden["q"], isa["q"])
    assert main(["check", str(tmp_path / "OUT"), "--inputs", str(tmp_path / "X.npz")]) == 0
    out, err = capfd.readouterr()
    assert " add " in out and " avgpool " in out and "check passed" in out
    assert main(["estimate", str(tmp_path / "OUT")]) == 0
    out, err = capfd.readouterr()
    assert "simulated" in out and "Traceback" not in err


def test_check_counts_average_pool_rounding_ties_as_agreeing():
    """With s_in = s_out (TFLite's average pools) a 2x2 mean lands exactly halfway between two
    codes whenever the window's sum is 2 mod 4: fpganet rounds it up, onnxruntime to even."""
    pool = QAvgPool(name="pool", in_shape=(1, 4, 4), out_shape=(1, 2, 2), kernel=(2, 2),
                    stride=(2, 2), pads=(0, 0, 0, 0), zp_in=0, zp_out=0, lo=-128, hi=127,
                    relu=False, mult=1 << 14, shift=16, s_in=0.5, s_out=0.5)
    net = QNetwork(layers=[pool], input_name="x", input_shape=(1, 4, 4), input_scale=0.5,
                   input_zp=0, output_name="y", output_shape=(1, 2, 2), output_scale=0.5,
                   output_zp=0)
    q = np.zeros((8, 1, 4, 4), np.int8)
    q[:, 0, 0, 0] = np.arange(8) * 4 + 2          # window sums 2, 6, 10, ...: halves 0.5, 1.5, ...
    (result,) = compare_layers(net, q)
    assert result.equal_fraction < 0.99 and result.max_abs_diff == 1
    assert result.at_boundary == result.elements - result.equal and result.passes()


@pytest.mark.parametrize("seed", range(12))
def test_check_explains_every_difference_of_a_residual_network(seed):
    """Over many draws of calibration and inputs, every difference from onnxruntime is 1 LSB
    across a rounding boundary between the exact and the fixed-point result (the add's integer
    weights are up to 0.4 % off the ratio of its scales: 1-3 % of its outputs)."""
    graph = import_model(residual_model())
    net = quantize_graph(graph, inputs((3, 8, 8), 64, seed=seed))
    for result in compare_layers(net, net.quantize_input(inputs((3, 8, 8), 20, seed=seed))):
        assert result.equal + result.at_boundary == result.elements, result


@pytest.mark.parametrize("fault", ["add weight", "conv multiplier", "pool multiplier"])
def test_check_fails_a_wrong_fixed_point_parameter(fault):
    """A boundary between the exact and the fixed-point result explains a difference only while
    the two lie less than a step apart: an add weight one off, or a multiplier 2 % off, fails."""
    graph = import_model(residual_model())
    net = quantize_graph(graph, inputs((3, 8, 8), 64))
    kind = {"add weight": QAdd, "conv multiplier": QConv, "pool multiplier": QAvgPool}[fault]
    index = next(i for i, layer in enumerate(net.layers) if isinstance(layer, kind))
    layer = net.layers[index]
    changed = (dataclasses.replace(layer, w_a=layer.w_a + 1) if fault == "add weight" else
               dataclasses.replace(layer, mult=np.round(np.asarray(layer.mult) * 1.02).astype(int)))
    net.layers[index] = changed
    result = compare_layers(net, net.quantize_input(inputs((3, 8, 8), 200)))[index]
    assert not result.passes(), result


@pytest.mark.parametrize("kind", ["residual", "mobilenet"])
def test_one_bit_multipliers_on_a_graph(kind):
    """At ``requant_mult_bits`` 1 every multiplier of the graph (convs, the residual add, the
    average pool) is a power of two, the program equals the golden model on the ISA
    simulator, and the answers stay close to the float model's; a multiplier with a lower
    bit set is refused by the back end, naming its layer."""
    model, shape, low, high = ((residual_model(), (3, 8, 8), -1.0, 1.0) if kind == "residual"
                               else (mobilenet_block(), (3, 9, 7), -3.0, 3.0))
    graph = import_model(model)
    config = AcceleratorConfig(requant_mult_bits=1)
    net = quantize_graph(graph, inputs(shape, 200, low, high), config=config)
    carriers = [layer for layer in net.layers if hasattr(layer, "mult")]
    assert {type(layer) for layer in carriers} & {QAdd, QAvgPool}
    assert all(np.all(np.asarray(layer.mult) == 1 << 14) for layer in carriers)
    x = inputs(shape, 300, low, high)
    q_in = net.quantize_input(x[:20])
    assert np.array_equal(run_isa(net, q_in)[0], run_golden(net, q_in))
    golden = run_golden(net, net.quantize_input(x)).reshape(len(x), -1).argmax(1)
    assert np.mean(run_float(graph, x).reshape(len(x), -1).argmax(1) == golden) > 0.9
    # At 3 bits an average pool's multiplier is exact too: its output scale was widened.
    three = quantize_graph(graph, inputs(shape, 200, low, high),
                           config=AcceleratorConfig(requant_mult_bits=3))
    for pool in (layer for layer in three.layers if isinstance(layer, QAvgPool)):
        real = pool.s_in / (pool.s_out * pool.count)
        assert pool.mult % 2**12 == 0 and abs(pool.mult * 2.0**-pool.shift / real - 1) < 1e-6
    index, layer = next((i, l) for i, l in enumerate(net.layers) if isinstance(l, (QAdd, QAvgPool)))
    layers = list(net.layers)
    layers[index] = dataclasses.replace(layer, mult=(1 << 14) + 1)
    with pytest.raises(FpganetError, match=f"^layer '{layer.name}': multiplier 16385 has more than "
                                           f"the 1 significant bits"):
        build_images(dataclasses.replace(net, layers=layers))
