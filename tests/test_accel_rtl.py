"""Whole programs on the accelerator's generated Verilog (Verilator; Icarus when installed),
through the free-running harness of fpganet.sim.rtl_backend: the output bytes equal the ISA
simulator's, and the cycle count (the `cycles` port and every STAMP) equals the perf model's."""

import shutil

import numpy as np
import pytest

from fpganet import perf
from fpganet.config import AcceleratorConfig
from fpganet.isasim import Machine
from fpganet.sim.rtl_backend import RtlError, build_harness, run_machine, run_program

from accel_programs import conv_layer_program, lenet_program, pool_layer_program
from test_accel_pysim import LAYERS, control_program, isasim_conv_machine

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog (iverilog) is not installed")


def reference(config, builder_or_machine, input_bytes):
    machine = builder_or_machine.machine() if hasattr(builder_or_machine, "machine") else builder_or_machine
    timing = perf.program_cycles(machine.program, config)
    copy = Machine(config, program=machine.program.copy(), weights=machine.weights.copy(),
                   params=machine.params.copy(), act=machine.act.copy())
    return timing.with_stamps(copy.run(input_bytes)), timing


def check_rtl(config, builder_or_machine, input_bytes, sim="verilator"):
    machine = builder_or_machine.machine() if hasattr(builder_or_machine, "machine") else builder_or_machine
    want, timing = reference(config, machine, input_bytes)
    result = run_machine(machine, input_bytes, sim=sim)
    assert result.output == want
    assert result.cycles == timing.total
    return result, timing


@pytest.fixture(scope="module")
def default_build():
    return build_harness(AcceleratorConfig(), sim="verilator")


def test_lenet_like_network_over_two_images(default_build):
    """conv-pool-conv-pool-dense x3, LOOP over 2 images, OUTPUT and STAMP per image."""
    config = AcceleratorConfig()
    builder, x = lenet_program(config, images=2)
    want, timing = reference(config, builder, x)
    result = default_build.run(builder.images(), x)
    assert result.output == want                    # logits and STAMP values
    assert result.cycles == timing.total
    assert len(timing.stamps) == 3 and len(result.output) == 4 + 2 * (10 + 4)
    # The conv layers keep the array busy.
    layers = perf.layer_summaries(timing, config)
    assert [layer["opcode"] for layer in layers[:7]] == ["CONV", "POOL", "CONV", "POOL", "CONV", "CONV", "CONV"]
    print("LeNet-like on 2x8:", [(layer["opcode"], layer["cycles"], round(layer["utilization"], 3))
                                 for layer in layers[:7]], "total", timing.total)


def test_isasim_conv_programs_on_verilog(default_build):
    config = AcceleratorConfig()
    for shape in [(3, 6, 7, 5, 3, 1, 8), (1, 9, 5, 6, 5, 2, 3), (4, 4, 4, 2, 1, 0, 8)]:
        machine, x = isasim_conv_machine(config, *shape)
        check_rtl(config, machine, x)


def test_layer_programs_on_verilog(default_build):
    config = AcceleratorConfig()
    for case, (overrides, kind, shape) in enumerate(LAYERS):
        if overrides:
            continue
        shape = dict(shape)
        if kind == "conv":
            builder, x = conv_layer_program(config, shape.pop("C"), shape.pop("H"), shape.pop("W"),
                                            shape.pop("M"), shape.pop("k"), shape.pop("pad"), seed=case, **shape)
        else:
            builder, x = pool_layer_program(config, shape.pop("C"), shape.pop("H"), shape.pop("W"),
                                            shape.pop("k"), shape.pop("stride"), seed=case, **shape)
        check_rtl(config, builder, x)
    check_rtl(config, control_program(config), np.arange(18, dtype=np.uint8).tobytes())


@pytest.mark.parametrize("ready,valid", [(0x5A5A_F00F, None), (None, 0x3333_0F0F), (0x1248_8421, 0x7777_7777)])
def test_stream_back_pressure_on_verilog(default_build, ready, valid):
    """Stalls on the output stream and gaps on the input stream change timing, not bytes."""
    config = AcceleratorConfig()
    builder, x = lenet_program(config, images=1)
    want, timing = reference(config, builder, x)
    result = default_build.run(builder.images(), x, ready_pattern=ready, input_pattern=valid)
    assert timing.without_stamps(result.output) == timing.without_stamps(want)
    assert result.cycles > timing.total


def test_timeout_is_reported(default_build):
    config = AcceleratorConfig()
    builder, x = lenet_program(config, images=1)
    with pytest.raises(RtlError, match="did not finish"):
        default_build.run(builder.images(), x, max_cycles=1000)


@needs_icarus
def test_programs_on_icarus():
    config = AcceleratorConfig()
    builder, x = conv_layer_program(config, 2, 5, 6, 3, 3, 1, seed=4)
    check_rtl(config, builder, x, sim="icarus")
    builder, x = pool_layer_program(config, 2, 6, 6, 2, 2, seed=5)
    check_rtl(config, builder, x, sim="icarus")
    output, cycles = run_program(config, control_program(config).images(), bytes(range(18)), sim="icarus")
    assert cycles == perf.program_cycles(control_program(config).words(), config).total


def test_another_configuration_on_verilator():
    """3x4 array, two requantizers, a LeNet-like image and a pooling layer."""
    config = AcceleratorConfig(rows=3, cols=4, requant_lanes=2, weight_buffer_bytes=3 * 32768)
    builder, x = lenet_program(config, images=1)
    check_rtl(config, builder, x)
    builder, x = pool_layer_program(config, 3, 7, 7, 3, 2, pad=1, seed=2)
    check_rtl(config, builder, x)
