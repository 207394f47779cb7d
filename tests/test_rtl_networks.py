"""Whole networks on the accelerator's generated Verilog against the golden model, bit for bit,
and the RTL's cycle counter against the performance model, exactly."""

import numpy as np
import pytest

from fpganet.sim.fuzz_rtl import CONFIGS, check_network, random_fitting_network
from fpganet.sim.rtl_backend import build_harness

NETWORKS_PER_CONFIG = 20


@pytest.mark.parametrize("name", ["2x8", "3x5-requant5", "8x2-broadcast"])
def test_random_networks_on_rtl_match_golden(name):
    config = CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2026)
    for _ in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config)
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))


@pytest.mark.parametrize("name", ["2x8", "4x4-banks16"])
def test_random_graph_networks_on_rtl_match_golden(name):
    """DAGs: residual adds, depthwise and grouped convs, average pools, as CONVs with
    block-diagonal weights; and four activation banks per lane."""
    config = CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2027)
    types = set()
    for _ in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config, graph=True)
        types |= {layer.type if getattr(layer, "groups", 1) == 1 else "grouped" for layer in net.layers}
        check_network(build, net, rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8))
    assert {"add", "grouped", "avgpool"} <= types


def test_rtl_backend_through_cocotb_on_lenet(tmp_path):
    """`fpganet run --backend rtl`: LeNet-5 on Verilator through cocotb, equal to golden, cycles = model."""
    from fpganet.backends import run_network
    from fpganet.compiler import compile_model
    from fpganet.datasets import mnist
    from fpganet.estimate.workload import simulated_cycles

    net = compile_model(out_dir=tmp_path / "lenet5")
    x, _ = mnist("eval", 5)
    rtl = run_network(net, x, backend="rtl", compiled=tmp_path / "lenet5")
    golden = run_network(net, x, backend="golden")
    np.testing.assert_array_equal(rtl.q, golden.q)
    cycles = rtl.extras["cycles"]
    assert len(cycles) == 5
    assert set(cycles[1:].tolist()) == {simulated_cycles(net, net.config)["total"]}
