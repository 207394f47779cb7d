"""``fpganet fuzz`` (RTL part): random networks on the accelerator's Verilog against the golden model.

Every network is data for the same simulator build, so each hardware
configuration is built once. A failure prints the seed and index that
regenerate the network.
"""

import sys
import time
import warnings

import numpy as np

from fpganet.codegen import build_images
from fpganet.codegen.fuzz import (random_graph_network, random_network, signed_weights,
                                  ternary_weights)
from fpganet.codegen.fuzz_qonnx import random_qonnx_network
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError, FpganetWarning
from fpganet.golden import run_golden
from fpganet.perf import program_cycles
from fpganet.sim.rtl_backend import build_harness

__all__ = ["CONFIGS", "random_fitting_network", "check_network", "main"]

#: Hardware configurations under test: the default, an odd-sized array whose
#: requantizer handles all five lanes at once in five pipeline stages (the multiply
#: split in two), a single PE, the iCEBreaker's shape with operands broadcast (and again
#: with 3-bit multipliers), four activation banks per lane (the ULX3S has two; again with
#: 1-bit multipliers, a shift), the tflite requantization mode, and the default's shape
#: with two requantizer lanes and the pipeline registers (as the ULX3S; as many banks as
#: lanes, so that bank conflicts are common). The two without ``mult`` in their names that
#: have four activation banks per lane or the pipeline registers run depthwise layers and
#: average pools as ``CONV diagonal`` (``diagonal_weights``) and have a result queue between
#: the array and the writer (``result_queue_rows``: two tiles' rows, and the pipelined one
#: three rows, so that it fills). Three have pair products (two channels a beat, two products a
#: PE): the iCEBreaker's 16-MAC shape, broadcast; a systolic 4x4 with two banks per lane, the
#: diagonal mode and a result queue; and the same 4x4 as the ULX3S's 128-MAC accelerator, with
#: the pipeline registers (one bank per lane, so that a lane's two reads often share a bank).
#: The degenerate shapes: a single row with a requantizer lane per column, a single column,
#: and the single PE with the pipeline registers (one lane, one bank). Five store the layers
#: of 4-bit weights or fewer packed (``packed_weights``, ``CONV packed``; a quarter of the
#: random layers have weights in -3..3): the broadcast 8x2, the 4x4 with sixteen banks, both
#: pipelined ones and the pooled pairs. Two have single-port activation banks
#: (``single_port_activations``, the engine held for each write): the iCEBreaker ResNet-8's
#: 4x2 shape, packed, and the 4x4 pairs with a result queue. Three also store layers of +-1
#: weights eight to a byte (``binary_weights``, ``CONV binary``; :func:`fuzz_rtl` signs a
#: quarter of their random layers' weights): the broadcast 8x2, the pipelined 4x4 pairs and
#: the single-port 4x2. One makes each pair PE's two products with one multiplier
#: (``ternary_pairs``: every weight of its networks -1, 0 or +1, half the layers +-1 and stored
#: eight to a byte).
CONFIGS = {
    "2x8": AcceleratorConfig(),
    "3x5-requant5": AcceleratorConfig(rows=3, cols=5, requant_lanes=5, requant_latency=5,
                                      weight_buffer_bytes=3 * 8192),
    "1x1": AcceleratorConfig(rows=1, cols=1, weight_buffer_bytes=8192, act_buffer_bytes=8192),
    "8x2-broadcast": AcceleratorConfig(rows=8, cols=2, acc_width=24, broadcast_operands=True,
                                       requant_latency=5, weight_buffer_bytes=8 * 8192,
                                       packed_weights=True, binary_weights=True),
    "4x4-banks16": AcceleratorConfig(rows=4, cols=4, requant_lanes=2, act_bank_factor=4,
                                     weight_buffer_bytes=4 * 8192, diagonal_weights=True,
                                     result_queue_rows=8, packed_weights=True),
    "8x2-broadcast-mult3": AcceleratorConfig(rows=8, cols=2, acc_width=24, broadcast_operands=True,
                                             requant_latency=5, requant_mult_bits=3,
                                             weight_buffer_bytes=8 * 8192),
    "4x4-banks16-mult1": AcceleratorConfig(rows=4, cols=4, requant_lanes=2, act_bank_factor=4,
                                           requant_mult_bits=1, weight_buffer_bytes=4 * 8192),
    "4x4-tflite": AcceleratorConfig(rows=4, cols=4, requant_lanes=2, requant_mode="tflite",
                                    requant_latency=6, weight_buffer_bytes=4 * 8192),
    "2x8-pipelined": AcceleratorConfig(requant_lanes=2, pipeline_registers=True,
                                       diagonal_weights=True, result_queue_rows=3,
                                       packed_weights=True),
    "4x2-pairs-broadcast": AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True,
                                             requant_latency=5, weight_buffer_bytes=8 * 8192,
                                             pair_products=True),
    "4x4-pairs-banks8": AcceleratorConfig(rows=4, cols=4, requant_lanes=2, act_bank_factor=2,
                                          weight_buffer_bytes=8 * 8192, diagonal_weights=True,
                                          result_queue_rows=8, pair_products=True),
    "4x4-pairs-pipelined": AcceleratorConfig(rows=4, cols=4, requant_lanes=2, pipeline_registers=True,
                                             weight_buffer_bytes=8 * 8192, diagonal_weights=True,
                                             result_queue_rows=3, pair_products=True,
                                             packed_weights=True, binary_weights=True),
    "4x2-pairs-pooled": AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True,
                                          weight_buffer_bytes=8 * 8192, act_bank_factor=2,
                                          pair_products=True, fused_max_pool=True,
                                          packed_weights=True),
    "4x2-pooled": AcceleratorConfig(rows=4, cols=2, fused_max_pool=True, weight_buffer_bytes=8192),
    "4x2-single-port": AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True,
                                         requant_latency=5, weight_buffer_bytes=8 * 8192,
                                         packed_weights=True, binary_weights=True,
                                         single_port_activations=True),
    "4x2-pairs-ternary": AcceleratorConfig(rows=4, cols=2, acc_width=24, broadcast_operands=True,
                                           requant_latency=5, weight_buffer_bytes=8 * 8192,
                                           pair_products=True, ternary_pairs=True,
                                           binary_weights=True),
    "4x4-pairs-single-port": AcceleratorConfig(rows=4, cols=4, act_bank_factor=2,
                                               weight_buffer_bytes=8 * 8192, diagonal_weights=True,
                                               result_queue_rows=8, pair_products=True,
                                               single_port_activations=True),
    "1x4-lanes4": AcceleratorConfig(rows=1, cols=4, requant_lanes=4, weight_buffer_bytes=8192),
    "4x1": AcceleratorConfig(rows=4, cols=1, weight_buffer_bytes=4 * 8192),
    "1x1-pipelined": AcceleratorConfig(rows=1, cols=1, pipeline_registers=True, weight_buffer_bytes=8192,
                                       act_buffer_bytes=8192),
}


def random_fitting_network(rng, config, graph=False):
    """A random network that fits ``config``: a chain (kernels 1..5, strides 1..2, padding, pools,
    dense layers) or, with ``graph``, a DAG (residual adds, depthwise and grouped convs, average
    pools; :func:`fpganet.codegen.fuzz.random_graph_network`).

    Whether it fits, every buffer, is the compiler's call: networks it refuses are drawn again.
    On a configuration with ``ternary_pairs`` every weight is -1, 0 or +1
    (:func:`~fpganet.codegen.fuzz.ternary_weights`).
    """
    while True:
        try:
            net = (random_graph_network if graph else random_network)(rng, config)
            if config.ternary_pairs:
                net = ternary_weights(net, rng)
            build_images(net, 1, config)
        except FpganetError:
            continue
        return net


def check_network(build, net, q_in):
    """Run ``net`` on ``q_in`` on the RTL; AssertionError unless outputs equal golden and cycles the model."""
    images = build_images(net, len(q_in), build.config)
    result = build.run(images.memories, images.pack_inputs(q_in))
    q, stamps = images.unpack_outputs(result.output)
    layers = ", ".join(f"{layer.name} {'x'.join(map(str, layer.out_shape))}" for layer in net.layers)
    expected = run_golden(net, q_in)
    if not np.array_equal(q, expected):
        raise AssertionError(f"{int(np.sum(q != expected))} output bytes differ from golden ({layers})")
    model = program_cycles(images.program_for(len(q_in)), build.config)
    if result.cycles != model.total or list(stamps) != list(model.stamps):
        raise AssertionError(f"RTL took {result.cycles} cycles, the model says {model.total} ({layers})")
    return result


def _qonnx_networks(networks):
    """Random QONNX networks per configuration beside ``networks`` int8 ones: one in four, if
    qonnx (the dev extra, their reference) is installed."""
    try:
        import qonnx  # noqa: F401
    except ImportError:
        return 0
    return (networks + 3) // 4


def fuzz_rtl(networks, seed=1, sim="verilator", out=None):
    """Check ``networks`` random networks per configuration of :data:`CONFIGS` on the RTL;
    returns the failures (each printed)."""
    out = out or sys.stdout
    failures = 0
    for name, config in CONFIGS.items():
        build = build_harness(config, sim=sim)
        start, cycles = time.perf_counter(), 0
        for index in range(networks):
            rng = np.random.default_rng([seed, index, sum(map(ord, name))])
            net = random_fitting_network(rng, config, graph=index % 2 == 1)
            if config.binary_weights:       # a quarter of the layers CONV binary
                net = signed_weights(net, np.random.default_rng([seed, index, 1]), share=0.25)
            q_in = rng.integers(-128, 128, (int(rng.integers(1, 4)), *net.input_chw)).astype(np.int8)
            try:
                cycles += check_network(build, net, q_in).cycles
            except AssertionError as error:
                failures += 1
                print(f"FAIL rtl {name} seed={seed} index={index}: {error}", file=out, flush=True)
        # QONNX layers compile in the fpganet requantization mode only (their weights are not
        # ternary).
        qonnx = (_qonnx_networks(networks) if config.requant_mode == "fpganet"
                 and not config.ternary_pairs else 0)
        for index in range(qonnx):
            rng = np.random.default_rng([seed, index, sum(map(ord, name)), 0x9077])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FpganetWarning)
                net, q_in = random_qonnx_network(rng, config)
            try:
                cycles += check_network(build, net, q_in).cycles
            except AssertionError as error:
                failures += 1
                print(f"FAIL rtl {name} qonnx seed={seed} index={index}: {error}", file=out,
                      flush=True)
        print(f"rtl {name}: {networks} random networks (every other one a graph) and {qonnx} "
              f"QONNX networks on the RTL ({sim}), {cycles:,} cycles, "
              f"{time.perf_counter() - start:.1f} s, {failures} failures so far", file=out,
              flush=True)
    return failures
