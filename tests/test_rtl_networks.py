"""Whole networks on the accelerator's generated Verilog against the golden model, bit for bit,
and the RTL's cycle counter against the performance model, exactly."""

import dataclasses

import numpy as np
import pytest

from fpganet.backends import run_network
from fpganet.codegen.fuzz import random_pooled_network, signed_weights
from fpganet.codegen.plan import plan_network
from fpganet.compiler import compile_model
from fpganet.datasets import mnist
from fpganet.errors import FpganetError
from fpganet.estimate.workload import simulated_cycles
from fpganet.qnet import QAvgPool, QConv, QNetwork
from fpganet.quantize.fixed_point import average_multiplier
from fpganet.sim.fuzz_rtl import CONFIGS, check_network, random_fitting_network
from fpganet.sim.rtl_backend import build_harness

NETWORKS_PER_CONFIG = 20


@pytest.mark.parametrize("name", ["2x8", "3x5-requant5", "8x2-broadcast", "8x2-broadcast-mult3",
                                  "2x8-pipelined", "4x2-pairs-broadcast", "4x4-pairs-pipelined",
                                  "4x2-single-port"])
def test_random_networks_on_rtl_match_golden(name):
    config = CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2026)
    for _ in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config)
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))


@pytest.mark.parametrize("name", ["2x8", "4x4-banks16", "4x4-banks16-mult1", "2x8-pipelined",
                                  "4x4-pairs-banks8", "4x4-pairs-pipelined", "4x2-single-port",
                                  "4x4-pairs-single-port"])
def test_random_graph_networks_on_rtl_match_golden(name):
    """DAGs: residual adds, depthwise and grouped convs, average pools, as CONVs with
    block-diagonal weights (or, with diagonal_weights, depthwise layers and average pools as
    CONV diagonal); four activation banks per lane and 1-bit multipliers; the pipeline
    registers; pair products, also with the pipeline registers; single-port banks, the engine
    held for each write (packed weights, and a result queue)."""
    config = CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2027)
    types, diagonal = set(), 0
    for _ in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config, graph=True)
        types |= {layer.type if getattr(layer, "groups", 1) == 1 else "grouped" for layer in net.layers}
        diagonal += sum(step.diagonal for step in plan_network(net, config).steps)
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))
    assert {"add", "grouped", "avgpool"} <= types
    assert (diagonal > 0) == config.diagonal_weights


@pytest.mark.parametrize("name", ["4x2-pairs-pooled", "4x2-pooled"])
def test_fused_max_pool_networks_on_rtl_match_golden(name):
    """A stride-1 conv and the 2x2 max-pool after it as CONV pools (fused_max_pool): the result
    writer's running maximum, the parameters of rows 0..rows-1 in every group; with pair
    products over one input channel the kernel's columns are the walk's channels."""
    config = CONFIGS[name]
    plans = _check_fitting(config, np.random.default_rng(2029), NETWORKS_PER_CONFIG,
                           lambda rng: random_pooled_network(rng, config))
    assert sum(any(step.pooled for step in steps) for steps in plans) >= NETWORKS_PER_CONFIG // 2


def _check_fitting(config, rng, networks, draw):
    """Check ``networks`` networks drawn by ``draw(rng)`` on ``config``'s RTL, skipping those
    that do not fit it; returns each checked network's steps."""
    build = build_harness(config, sim="verilator")
    plans = []
    while len(plans) < networks:
        net = draw(rng)
        try:
            steps = plan_network(net, config).steps
        except FpganetError:
            continue                    # does not fit
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))
        plans.append(steps)
    return plans


def _narrowed(net):
    """``net`` with every conv's weights clipped to -7..7 and declared 4-bit: CONV packed, on a
    configuration with packed_weights."""
    net.layers = [dataclasses.replace(layer, weight=np.clip(layer.weight, -7, 7), weight_bits=4)
                  if isinstance(layer, QConv) else layer for layer in net.layers]
    net.validate()
    return net


@pytest.mark.parametrize("name,shape", [("8x2-broadcast", "chain"), ("4x4-banks16", "graph"),
                                        ("4x4-pairs-pipelined", "graph"), ("4x2-pairs-pooled", "pooled")])
def test_packed_weight_networks_on_rtl_match_golden(name, shape):
    """Every conv at 4 bits, stored two weights a byte (CONV packed): the window's nibble select
    and its weight address stepping every other beat, back at each tile's (in the diagonal mode
    each channel's) start; with broadcast operands, arbitrated and scheduled banks, the pipeline
    registers, pair products and pooled writes."""
    config = CONFIGS[name]
    assert config.packed_weights

    def draw(rng):
        return _narrowed(random_pooled_network(rng, config) if shape == "pooled"
                         else random_fitting_network(rng, config, graph=shape == "graph"))

    plans = _check_fitting(config, np.random.default_rng(2030), NETWORKS_PER_CONFIG // 2, draw)
    kinds = {(step.kind, step.diagonal, step.pooled) for steps in plans for step in steps
             if step.packed}
    assert kinds
    if config.diagonal_weights:
        assert ("grouped", True, False) in kinds
    if shape == "pooled":
        assert any(pooled for _, _, pooled in kinds)


@pytest.mark.parametrize("name,shape", [("8x2-broadcast", "chain"), ("4x4-pairs-pipelined", "graph"),
                                        ("4x2-single-port", "chain")])
def test_binary_weight_networks_on_rtl_match_golden(name, shape):
    """Every conv and dense layer's weights -1 or +1, stored eight a byte (CONV binary): the
    window's bit select and its weight address stepping every eighth beat, back at each
    tile's start; with broadcast operands, scheduled banks, the pipeline registers, pair
    products (a walk of an odd number of channels stays a byte a weight) and the engine held
    for single-port writes."""
    config = CONFIGS[name]
    assert config.binary_weights
    plans = _check_fitting(config, np.random.default_rng(2031), NETWORKS_PER_CONFIG // 2,
                           lambda rng: signed_weights(random_fitting_network(
                               rng, config, graph=shape == "graph"), rng))
    assert sum(step.binary for steps in plans for step in steps) >= NETWORKS_PER_CONFIG // 2


def test_ternary_pair_networks_on_rtl_match_golden():
    """Each pair PE's two products from one multiplier (ternary_pairs), every weight -1, 0 or
    +1 (codegen.fuzz.ternary_weights): chains and graphs (adds of weights 1, depthwise and
    grouped convs), half the layers +-1 and stored eight a byte."""
    config = CONFIGS["4x2-pairs-ternary"]
    plans = _check_fitting(config, np.random.default_rng(2033), NETWORKS_PER_CONFIG // 2,
                           lambda rng: random_fitting_network(rng, config,
                                                             graph=rng.random() < 0.5))
    steps = [step for steps in plans for step in steps]
    assert any(step.binary for step in steps) and not all(step.binary for step in steps)


def test_random_networks_on_rtl_match_golden_in_the_tflite_mode():
    """The tflite requantization mode (TFLite's 31-bit multiplier, double and single rounding,
    TFLite's average pools: codegen.fuzz draws them) on chains and DAGs."""
    config = CONFIGS["4x4-tflite"]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2028)
    single = sum_codes = 0
    for index in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config, graph=index % 2 == 1)
        single += sum(bool(getattr(layer, "single_rounding", False)) for layer in net.layers)
        sum_codes += sum(bool(getattr(layer, "sum_codes", False)) for layer in net.layers)
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))
    assert single and sum_codes


def test_tflite_roundings_on_rtl_match_golden():
    """Both tflite roundings where they differ most (a right shift of 1 or 2: a quarter of
    the outputs differ between them), and a TFLite average pool, on the RTL: the single
    rounding is QUANT bit 24, which only a layer's own outputs show."""
    config = CONFIGS["4x4-tflite"]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2029)
    conv = QConv(name="conv", kind="conv", in_shape=(3, 6, 6), out_shape=(5, 6, 6), kernel=(1, 1),
                 stride=(1, 1), pads=(0, 0, 0, 0), zp_in=3, zp_out=-7, lo=-128, hi=127, relu=False,
                 weight=rng.integers(-2, 3, (5, 3, 1, 1)).astype(np.int8),
                 bias=rng.integers(-50, 50, 5).astype(np.int32),
                 mult=rng.integers(1 << 30, 1 << 31, 5).astype(np.int32),
                 shift=rng.integers(-2, 0, 5).astype(np.int32), s_in=0.05, s_out=0.05,
                 s_w=np.full(5, 0.01, np.float32))
    mult, shift = average_multiplier(4)
    pool = QAvgPool(name="pool", in_shape=(5, 6, 6), out_shape=(5, 3, 3), kernel=(2, 2),
                    stride=(2, 2), pads=(0, 0, 0, 0), zp_in=-7, zp_out=-7, lo=-128, hi=127,
                    relu=False, mult=mult, shift=shift, s_in=0.05, s_out=0.05, sum_codes=True)
    q_in = rng.integers(-128, 128, (2, 3, 6, 6)).astype(np.int8)
    outputs = {}
    for single in (False, True):
        for layers in ([conv], [conv, pool]):
            layers = [dataclasses.replace(layers[0], single_rounding=single), *layers[1:]]
            net = QNetwork(layers=layers, input_name="x", input_shape=(3, 6, 6), input_scale=0.05,
                           input_zp=3, output_name="y", output_shape=layers[-1].out_shape,
                           output_scale=0.05, output_zp=-7, config=config)
            net.validate()
            outputs[single, len(layers)] = check_network(build, net, q_in)
    # The two roundings gave different bytes here, so the check above tells them apart.
    assert outputs[False, 1].output != outputs[True, 1].output


def test_rtl_backend_through_cocotb_on_lenet(tmp_path):
    """`fpganet run --backend rtl`: LeNet-5 on Verilator through cocotb, equal to golden, cycles = model."""
    net = compile_model(out_dir=tmp_path / "lenet5")
    x, _ = mnist("eval", 5)
    rtl = run_network(net, x, backend="rtl", compiled=tmp_path / "lenet5")
    golden = run_network(net, x, backend="golden")
    np.testing.assert_array_equal(rtl.q, golden.q)
    cycles = rtl.extras["cycles"]
    assert len(cycles) == 5
    assert set(cycles[1:].tolist()) == {simulated_cycles(net, net.config)["total"]}
