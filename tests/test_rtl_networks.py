"""Whole networks on the accelerator's generated Verilog against the golden model, bit for bit,
and the RTL's cycle counter against the performance model, exactly."""

import numpy as np
import pytest

from fpganet.backend import build_images
from fpganet.backend.fuzz import random_network
from fpganet.backend.plan import smallest_act_bytes
from fpganet.config import AcceleratorConfig
from fpganet.golden import run_golden
from fpganet.perf import program_cycles
from fpganet.sim.rtl_backend import build_harness, run_network_rtl

#: Hardware configurations under test: one build each, every network is data.
CONFIGS = {
    "2x8": AcceleratorConfig(),
    "3x5-requant5": AcceleratorConfig(rows=3, cols=5, requant_lanes=5, weight_buffer_bytes=3 * 8192),
}
NETWORKS_PER_CONFIG = 6


def random_fitting_network(rng, config):
    """A random network (kernels 1..5, strides 1..2, padding, pools, dense layers) that fits ``config``."""
    while True:
        net = random_network(rng, config)
        if smallest_act_bytes(net, config) <= config.act_buffer_bytes:
            return net


@pytest.mark.parametrize("name", list(CONFIGS))
def test_random_networks_on_rtl_match_golden(name):
    config = CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng(2026)
    for index in range(NETWORKS_PER_CONFIG):
        net = random_fitting_network(rng, config)
        q_in = rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8)
        images = build_images(net, len(q_in), config)
        result = build.run(images.memories, images.pack_inputs(q_in))
        q, stamps = images.unpack_outputs(result.output)
        layers = ", ".join(f"{layer.name} {'x'.join(map(str, layer.out_shape))}" for layer in net.layers)
        np.testing.assert_array_equal(q, run_golden(net, q_in), err_msg=f"network {index}: {layers}")
        model = program_cycles(images.program_for(len(q_in)), config)
        assert result.cycles == model.total, f"network {index}: RTL {result.cycles}, model {model.total}"
        assert list(stamps) == list(model.stamps), f"network {index}: STAMP values differ from the model"


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
