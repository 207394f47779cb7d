"""FINN's CNV-W1A1, as BNN-PYNQ trained and published it (tests/outside), through fpganet: the
QONNX model ``benchmarks/cnv_bnn_pynq.py`` builds computes FINN's arithmetic on qonnx's own
executor, and compiled for the ULX3S's ``binary-weights`` variant its +-1 weights take a bit
each (``CONV binary``), every activation level equal to qonnx's. Its RTL runs, over 200 test
images, are ``benchmarks/networks.py``'s (``--networks cnv-w1a1 --rtl-images 200``)."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from fpganet.boards.ulx3s import BINARY_WEIGHTS_CONFIG
from fpganet.codegen.binary import (codes_of_counts, fold_network, lower_binary_network,
                                    run_binary_network)
from fpganet.codegen.fuzz_engine import expected_totals
from fpganet.codegen.plan import plan_network
from fpganet.codegen.run import run_isa
from fpganet.compiler import compile_model
from fpganet.datasets import mlperf_tiny, mlperf_tiny_dir
from fpganet.golden import run_golden
from fpganet.hdl.binary_engine import BinaryNetworkEngine
from fpganet.model.onnx_import import load_onnx

ROOT = Path(__file__).resolve().parents[1]
DEER = ROOT / "tests" / "outside" / "bnn_pynq_deer.bin"
_spec = importlib.util.spec_from_file_location("cnv_bnn_pynq", ROOT / "benchmarks" / "cnv_bnn_pynq.py")
cnv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cnv)


@pytest.fixture(scope="module")
def layers():
    return cnv.load_parameters()


@pytest.fixture(scope="module")
def model(layers, tmp_path_factory):
    path = tmp_path_factory.mktemp("cnv") / "cnv_w1a1.onnx"
    onnx.save(cnv.cnv_qonnx(layers), path)
    return path


@pytest.fixture(scope="module")
def pixels():
    """uint8 [N, 32, 32, 3]: BNN-PYNQ's deer, then CIFAR-10 test images where the shared
    material is at hand."""
    raw = np.fromfile(DEER, dtype=np.uint8)
    deer = raw[1:].reshape(3, 32, 32).transpose(1, 2, 0)[None]
    if not mlperf_tiny_dir().is_dir():
        return deer
    x, _ = mlperf_tiny("resnet8", "test", layout="nhwc")
    return np.concatenate([deer, x[:7].astype(np.uint8)])


def _unit(pixels):
    return (pixels.transpose(0, 3, 1, 2) / 255).astype(np.float32)


def test_the_layers_are_bnn_pynqs_cnv(layers):
    """Nine layers of +-1 weights, the shapes of BNN-PYNQ's ``config.h``; thresholds for all
    but the last."""
    shapes = [weights.shape for weights, _ in layers]
    assert shapes == [(64, 27), (64, 576), (128, 576), (128, 1152), (256, 1152), (256, 2304),
                      (512, 256), (512, 512), (10, 512)]
    assert all(set(np.unique(weights)) == {-1, 1} for weights, _ in layers)
    assert [t is None for _, t in layers] == [False] * 8 + [True]


def test_bnn_pynqs_own_test_image_is_a_deer(layers):
    """BNN-PYNQ's tests/test_qnn.py expects class 4 for its deer image."""
    raw = np.fromfile(DEER, dtype=np.uint8)
    logits = cnv.reference_logits(layers, raw[1:].reshape(3, 32, 32).transpose(1, 2, 0)[None])
    assert logits.argmax() == 4


def test_the_qonnx_model_is_finns_arithmetic_on_qonnxs_executor(layers, model, pixels):
    pytest.importorskip("qonnx")
    from fpganet.model.qonnx_reference import qonnx_execute

    np.testing.assert_array_equal(qonnx_execute(model, _unit(pixels)),
                                  cnv.reference_logits(layers, pixels))


def test_on_the_ulx3s_binary_weights_variant(model, pixels):
    """Every layer but the first (three input channels: an odd walk for pair products) is a
    ``CONV binary``, the weights 195,328 bytes where a byte a weight would take 1,546,496;
    every level equals qonnx's executor's; the ISA simulator equals the golden model."""
    config = BINARY_WEIGHTS_CONFIG
    net = compile_model(model, None, config=config)
    plan = plan_network(net, config)
    engine = [step for step in plan.steps if step.kind in ("conv", "dense")]
    assert [step.binary for step in engine] == [False] + [True] * 8
    assert plan.weight_words * config.weight_word_bytes == 195_328
    q_in = net.quantize_input(_unit(pixels))
    np.testing.assert_array_equal(run_isa(net, q_in[:1])[0], run_golden(net, q_in[:1]))
    if importlib.util.find_spec("qonnx") is None:
        return
    from fpganet.model.qonnx_reference import compare_with_qonnx

    comparison = compare_with_qonnx(net, load_onnx(model), model, _unit(pixels))
    assert comparison.failures() == []
    assert [largest for *_, largest, _ in comparison.layers] == [0] * 9
    assert comparison.agreement == 1.0


def test_its_binary_layers_on_the_binary_engine(model, pixels):
    """Layers 2-9 lowered for the binary engine from the first layer's output bits: their
    convolutions, fused pools and dense layers give the golden model's logits, and so do the
    totals the engine must give at a 64x64 fold (padding included). With FPGANET_MLPERF_RTL=1
    the engine's Verilog runs them (``benchmarks/cnv_engine.py`` runs more images)."""
    net = compile_model(model, None, config=BINARY_WEIGHTS_CONFIG)
    layers = lower_binary_network(net, start=1)
    assert [(layer.name, layer.pool) for layer in layers if layer.pool > 1] == \
        [("conv1", 2), ("conv3", 2)]
    q_in = net.quantize_input(_unit(pixels))
    logits, outputs = run_golden(net, q_in, layer_outputs=True)
    bits = (outputs[0] - layers[0].in_lo).astype(np.uint8)
    logits = logits.reshape(len(q_in), -1)
    assert np.array_equal(run_binary_network(layers, outputs[0]), logits)
    folded = fold_network(layers, 64, 64)
    totals = expected_totals(folded, layers, bits)
    assert np.array_equal(codes_of_counts(layers[-1], totals[:, :10]), logits)
    if not os.environ.get("FPGANET_MLPERF_RTL"):
        return
    spec = importlib.util.spec_from_file_location("cnv_engine", ROOT / "benchmarks" / "cnv_engine.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ok, cycles = bench.engine_rtl(folded, layers, bits[:2], logits[:2])
    assert ok and cycles == BinaryNetworkEngine(folded).cycles_per_vector()
