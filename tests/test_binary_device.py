"""The binary engine behind the device ports: amaranth.sim runs of START, input bytes, counts
and stamp as the host link sees them, and TFC_1W1A over the UART pins with the real driver
(Verilator)."""

import json

import numpy as np
import pytest
from amaranth.sim import Simulator
from test_binary_layers import needs_tfc, tfc_w1a1
from test_system_uart import BAUD, CLOCK_HZ, TIMEOUT_CYCLES, build_system, failure_report

from fpganet.codegen.binary import codes_of_counts, fold_network, run_binary
from fpganet.codegen.binary_images import build_binary_images, run_folded
from fpganet.codegen.fuzz_engine import expected_totals, random_binary_network, random_map_network
from fpganet.config import AcceleratorConfig
from fpganet.golden import run_golden
from fpganet.hdl.binary_device import COUNT_BYTES, STAMP_BYTES, BinaryDevice


def pack_bytes(bits):
    """A vector's bits as the device's input bytes."""
    return np.packbits(np.asarray(bits, np.uint8), bitorder="little").tobytes()


def unpack_counts(device, data):
    """The counts [groups * pe] of one vector's output bytes (stamp excluded)."""
    return np.frombuffer(data[:device.output_bytes], "<u2").astype(np.int64)


def run_device(device, vectors, rng=None, stall=0.0):
    """Each vector (its bits, or its input bytes) through one START in amaranth.sim: its
    output bytes (stamp included)."""
    outputs = []

    async def testbench(ctx):
        for vector in vectors:
            data = list(vector if isinstance(vector, bytes) else pack_bytes(vector))
            ctx.set(device.start, 1)
            await ctx.tick()
            ctx.set(device.start, 0)
            received = []
            for _ in range(100_000):
                ctx.set(device.input.valid, bool(data) and (rng is None or rng.random() >= stall))
                ctx.set(device.input.payload, data[0] if data else 0)
                ready = rng is None or rng.random() >= stall
                ctx.set(device.output.ready, ready)
                if data and ctx.get(device.input.valid) and ctx.get(device.input.ready):
                    data.pop(0)
                if ready and ctx.get(device.output.valid):
                    received.append(ctx.get(device.output.payload))
                await ctx.tick()
                if ctx.get(device.done):
                    break
            assert not ctx.get(device.busy)
            outputs.append(bytes(received))

    sim = Simulator(device)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return outputs


@pytest.mark.parametrize("widths, pe, simd, stall", [
    ((20, 12, 7), 4, 8, 0.0), ((70, 33, 33, 5), 8, 16, 0.0), ((40, 16, 10), 2, 32, 0.4)])
def test_device_counts_and_stamp(widths, pe, simd, stall):
    """Counts equal the binary layers'; with input and output never waiting the stamp equals
    :meth:`BinaryDevice.stamp_cycles`."""
    rng = np.random.default_rng(sum(widths))
    layers = random_binary_network(rng, widths)
    device = BinaryDevice(fold_network(layers, pe, simd), AcceleratorConfig())
    vectors = rng.integers(0, 2, (3, widths[0])).astype(np.uint8)
    outputs = run_device(device, vectors, rng if stall else None, stall)
    for vector, data in zip(vectors, outputs, strict=True):
        assert len(data) == device.output_bytes + STAMP_BYTES
        bits = vector[None]
        for layer in layers[:-1]:
            bits = run_binary(layer, bits)
        counts = unpack_counts(device, data)[:layers[-1].m]
        assert np.array_equal(codes_of_counts(layers[-1], counts[None]),
                              run_binary(layers[-1], bits))
        if not stall:
            assert int.from_bytes(data[-STAMP_BYTES:], "little") == device.stamp_cycles()


@pytest.mark.parametrize("unit, seed", [("binary", 3), ("lowbit", 4)])
def test_a_small_cnn_through_the_device_equals_the_golden_model(unit, seed):
    """A random CNN (convolutions, a max pool, dense layers) compiled for an engine: its input
    map sent as the engine stores it (``pack_inputs``), the counts give the golden model's
    codes, as the engine's words unpacked do (``run_folded``), and the stamp equals the
    device's model."""
    rng = np.random.default_rng(seed)
    plan = [("conv", 12, 3), ("pool", 2), ("conv", 9, 2), ("flatten",), ("dense", 5)]
    input_bits = 1 if unit == "binary" else 2
    net = random_map_network(rng, unit, (5, 8, 8), plan, input_bits)
    images = build_binary_images(net, 4, 16, unit)
    assert images.folded.layers[0].is_map and images.layout["layers"][0]["pool"] == 2
    device = BinaryDevice(images.folded, AcceleratorConfig())
    q = (rng.integers(0, 1 << input_bits, (2, 5, 8, 8)) + net.input_lo).astype(np.int8)
    outputs = run_device(device, [images.pack_inputs(q[i:i + 1]) for i in range(2)])
    codes = images.decode([data[:device.output_bytes] for data in outputs])
    golden = run_golden(net, q).reshape(codes.shape)
    assert np.array_equal(codes, golden) and np.array_equal(run_folded(images, q), golden)
    assert {int.from_bytes(data[-STAMP_BYTES:], "little") for data in outputs} == \
        {device.stamp_cycles()}


def test_device_parameters_are_checked():
    rng = np.random.default_rng(0)
    layers = random_binary_network(rng, (16, 4))
    with pytest.raises(ValueError, match="^simd must be a multiple of 8 for a byte input of 1-bit elements, not 4$"):
        BinaryDevice(fold_network(layers, 4, 4), AcceleratorConfig())
    assert COUNT_BYTES == 2


@needs_tfc
def test_tfc_w1a1_over_the_uart_pins():
    """TFC_1W1A (8 x 32 binary MACs a cycle) behind the host link in Verilator, three MNIST
    images sent through the UART rx pin by the real driver: the counts give the golden
    model's logits, and each stamp equals the device's model (the input waits in the link's
    FIFO before START)."""
    net, layers, q, bits = tfc_w1a1(3)
    folded = fold_network(layers, 8, 32)
    config = AcceleratorConfig()
    device = BinaryDevice(folded, config)
    counts = expected_totals(folded, layers, bits)
    logits = codes_of_counts(layers[-1], counts[:, :layers[-1].m])
    assert np.array_equal(logits, run_golden(net, q).reshape(3, -1))
    expected = [vector.astype("<u2").tobytes().hex() for vector in counts]
    build = build_system(config, lambda c: BinaryDevice(folded, c), "binary_system")
    env = {"FPGANET_TB": json.dumps({
        "config": config.to_dict(), "clock_hz": CLOCK_HZ, "baud": BAUD,
        "timeout_cycles": TIMEOUT_CYCLES, "inputs": [pack_bytes(v).hex() for v in bits],
        "expected": expected, "stamp": device.stamp_cycles()})}
    result = build.run("fpganet.sim.tb_binary_system", None, env)
    assert result.ok, failure_report(result)
    assert result.passed == ["vectors_over_the_uart_pins"]
