"""Random networks compiled for several array shapes, run on the ISA simulator, bit-exact
against the golden model (the generator lives in fpganet.codegen.fuzz; ``python -m
fpganet.codegen.fuzz --cases N --seed S`` runs more)."""

import numpy as np
import pytest
from onnx_builders import save, small_cnn

from fpganet.codegen import build_images, engine_conflicts, plan_network, run_isa
from fpganet.codegen.fuzz import ARRAYS, check_case, random_case
from fpganet.codegen.plan import smallest_act_bytes
from fpganet.codegen.program import COUNT_LIMIT, region_runs
from fpganet.compiler import compile_model
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.isa import Reg
from fpganet.isasim import region_addresses
from fpganet.qnet import QConv, QMaxPool, QNetwork, QReshape

SEED = 20240611
CASES = 320


@pytest.mark.parametrize("first", range(0, CASES, 20))
def test_random_networks_bit_exact(first):
    for index in range(first, first + 20):
        case = random_case(SEED, index, graph=index % 2 == 1)
        images = check_case(case)
        if not case.net.is_chain:
            continue     # a map read by several layers has one pitch cost for all of them
        plan = images.plan
        # What the planner predicted for the reads equals what the program measures.
        measured = engine_conflicts(images.program, case.config)
        engine = [step for step in plan.steps]
        assert len(measured) == len(engine)
        for step, entry in zip(engine, measured):
            if plan.pitches == "searched" and step.src.pitch_costs and case.config.requant_lanes == 1:
                assert entry["extra_cycles"] == step.src.pitch_costs[step.src.pitch], case.describe()
            # A stride-1 conv/pool over a searched pitch never conflicts (P = OUT_W mod banks).
            if (plan.pitches == "searched" and step.kind in ("conv", "pool") and step.stride == (1, 1)
                    and step.src.parent is None and case.config.requant_lanes == 1):
                assert entry["extra_cycles"] == 0, case.describe()


def test_generator_covers_the_interesting_cases():
    kinds, allocations, per_image, arrays = set(), set(), 0, set()
    for index in range(CASES):
        case = random_case(SEED, index)
        plan = plan_network(case.net, case.config)
        kinds |= {step.kind for step in plan.steps}
        kinds |= {"view" for step in plan.steps if step.src.parent is not None and step.kind != "copy"}
        allocations.add(plan.allocation)
        per_image += sum(m.fill_per_image for m in plan.maps)
        arrays.add(case.config.name)
    assert kinds == {"conv", "dense", "pool", "copy", "view"}
    assert {"disjoint", "liveness"} <= allocations and per_image > 10
    assert arrays == set(ARRAYS)
    graph_kinds, refills = set(), 0
    for index in range(CASES // 4):
        case = random_case(SEED, index, graph=True)
        plan = plan_network(case.net, case.config)
        graph_kinds |= {step.kind for step in plan.steps}
        refills += sum(m.fill_per_image for m in plan.maps)
    assert {"add", "grouped", "conv", "pool"} <= graph_kinds and refills > 5


def test_cases_reproduce():
    a, b = random_case(7, 3), random_case(7, 3)
    assert a.describe() == b.describe() and np.array_equal(a.q_in, b.q_in)


@pytest.mark.parametrize("array", ["2x8", "3x5", "4x4", "1x1"])
def test_onnx_cnn_compiled_for_each_array(array, tmp_path):
    """Conv (3x2 kernel, stride 2, asymmetric pads), padded conv, padded max-pool, flatten, two
    dense layers (11 and 4): from ONNX through the quantizer, then the program."""
    rng = np.random.default_rng(5)
    model = save(small_cnn(in_channels=3, size=9), tmp_path / "cnn.onnx")
    calib = rng.normal(0, 1, (64, 3, 9, 9)).astype(np.float32)
    config = AcceleratorConfig.parse_array(array)
    net = compile_model(model, calib, tmp_path / "OUT", config=config)
    x = rng.normal(0, 1, (12, 3, 9, 9)).astype(np.float32)
    q_in = net.quantize_input(x)
    q, _ = run_isa(net, q_in)
    np.testing.assert_array_equal(q, run_golden(net, q_in))
    pool = next(m for m in build_images(net, 1).plan.maps if m.fill == -128)
    assert pool.padded


def _conv(name, in_shape, m, kernel, pads, zp_in, rng, kind="conv", stride=(1, 1)):
    c, h, w = in_shape
    ho = (h + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
    wo = (w + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
    return QConv(name=name, kind=kind, in_shape=in_shape, out_shape=(m, ho, wo), kernel=kernel,
                 stride=stride, pads=pads, zp_in=zp_in, zp_out=3, lo=-128, hi=127, relu=False,
                 weight=rng.integers(-127, 128, (m, c, *kernel)).astype(np.int8),
                 bias=rng.integers(-999, 999, m).astype(np.int32),
                 mult=rng.integers(1 << 14, 1 << 15, m).astype(np.int32),
                 shift=np.full(m, 17, np.int32), s_in=0.1, s_out=0.1, s_w=np.ones(m, np.float32))


def test_reshape_into_padded_conv_is_a_copy_and_tight_buffers_refill_borders():
    rng = np.random.default_rng(11)
    c1 = _conv("c1", (2, 6, 5), 4, (3, 3), (1, 1, 1, 1), -7, rng)
    r = QReshape(name="r", in_shape=(4, 6, 5), out_shape=(5, 4, 6), zp=3, s=0.1)
    c2 = _conv("c2", (5, 4, 6), 3, (3, 2), (2, 0, 1, 1), 3, rng, stride=(1, 2))
    p = QMaxPool(name="p", in_shape=c2.out_shape, out_shape=(3, 3, 2), kernel=(2, 2), stride=(2, 2),
                 pads=(1, 1, 0, 0), zp=3, s=0.1)
    net = QNetwork(layers=[c1, r, c2, p], input_name="x", input_shape=(2, 6, 5), input_scale=0.1,
                   input_zp=-7, output_name="y", output_shape=(3, 3, 2), output_scale=0.1, output_zp=3)
    q_in = rng.integers(-128, 128, (4, 2, 6, 5)).astype(np.int8)
    expected = run_golden(net, q_in)
    plan = plan_network(net)
    assert [s.kind for s in plan.steps] == ["conv", "copy", "conv", "pool"]
    assert plan.allocation == "disjoint" and not any(m.fill_per_image for m in plan.maps)
    np.testing.assert_array_equal(run_isa(net, q_in)[0], expected)
    tight = net.config.replace(act_buffer_bytes=smallest_act_bytes(net))
    plan = plan_network(net, tight)
    assert plan.allocation == "liveness" and any(m.fill_per_image for m in plan.maps)
    np.testing.assert_array_equal(run_isa(net, q_in, config=tight)[0], expected)
    with pytest.raises(FpganetError, match="activation buffer: network needs"):
        plan_network(net, tight.replace(act_buffer_bytes=tight.act_buffer_bytes - 1))


def test_long_maps_stay_within_the_16_bit_counts():
    """A dense layer over 70,000 inputs walks its compact input map as (C, H, W) with every
    count below 2**16 (the hardware's count registers); INPUT is folded into rows likewise."""
    rng = np.random.default_rng(3)
    dense = _conv("wide", (70_000, 1, 1), 3, (1, 1), (0, 0, 0, 0), 0, rng, kind="dense")
    dense.weight[:] = rng.integers(-1, 2, dense.weight.shape)
    net = QNetwork(layers=[dense], input_name="x", input_shape=(70_000,), input_scale=0.1,
                   input_zp=0, output_name="y", output_shape=(3,), output_scale=0.1, output_zp=3,
                   config=AcceleratorConfig(act_buffer_bytes=1 << 17, weight_buffer_bytes=1 << 19))
    q_in = rng.integers(-128, 128, (1, 70_000, 1, 1)).astype(np.int8)
    np.testing.assert_array_equal(run_isa(net, q_in)[0], run_golden(net, q_in))
    step = plan_network(net).steps[0]
    assert step.kind == "dense" and max(step.src.shape) < 1 << 16


def test_layers_beyond_the_hardware_counts_are_refused():
    """A 1x1 conv over a 1x70,000 row has 70,000 output pixels per row: OUT_W has 16 bits."""
    rng = np.random.default_rng(3)
    conv = _conv("long", (1, 1, 70_000), 1, (1, 1), (0, 0, 0, 0), 0, rng)
    net = QNetwork(layers=[conv], input_name="x", input_shape=(1, 1, 70_000), input_scale=0.1,
                   input_zp=0, output_name="y", output_shape=(1, 1, 70_000), output_scale=0.1,
                   output_zp=3, config=AcceleratorConfig(act_buffer_bytes=1 << 18))
    with pytest.raises(FpganetError, match=r"^layer 'long': OUT_W = 70,000 is beyond the "
                                           r"hardware's 16-bit counts \(at most 65,535\)$"):
        build_images(net, 1)


def test_programs_are_accepted_by_the_performance_model():
    perf = pytest.importorskip("fpganet.perf")
    if not hasattr(perf, "program_cycles"):
        pytest.skip("fpganet.perf has no program_cycles yet")
    for index in range(0, 40, 3):
        case = random_case(SEED, index)
        images = build_images(case.net, 2, case.config)
        result = perf.program_cycles(images.program, case.config)
        assert len(result.stamps) == 2 and result.total > 0


def test_region_runs_cover_the_same_bytes_in_order():
    def addresses(base, channels, cstride, rows, pitch, length):
        regs = {Reg.IO_BASE: base, Reg.IO_CHANNELS: channels, Reg.IO_CSTRIDE: cstride,
                Reg.IO_ROWS: rows, Reg.IO_PITCH: pitch, Reg.IO_LEN: length}
        return region_addresses(regs, 1 << 40)

    rng = np.random.default_rng(1)
    regions = [(7, 3, 40, 4, 10, 10), (0, 5, 12, 3, 4, 4), (3, 2, 50, 3, 9, 7), (0, 1, 0, 1, 0, 70_001),
               (0, 70_000, 1, 1, 1, 1), (5, 1, 0, 2, 70_000, 70_000), (0, 70_003, 2, 1, 1, 1)]
    regions += [(int(rng.integers(0, 50)), int(rng.integers(1, 5)), int(rng.integers(1, 40)),
                 int(rng.integers(1, 5)), int(rng.integers(1, 9)), int(rng.integers(1, 9)))
                for _ in range(50)]
    for region in regions:
        runs = region_runs(*region)
        assert all(max(r[1], r[3], r[5]) < COUNT_LIMIT for r in runs), region
        np.testing.assert_array_equal(np.concatenate([addresses(*r) for r in runs]), addresses(*region))


def test_a_map_read_through_a_reshape_and_by_a_padded_layer_is_refused_in_one_line():
    from fpganet.codegen.fuzz import _conv

    rng = np.random.default_rng(5)
    first = _conv(rng, "first", (3, 4, 4), 0, m=2)
    padded = _conv(rng, "padded", (2, 4, 4), first.zp_out, m=2, kernel=(3, 3), pads=(1, 1, 1, 1),
                   inputs=(0,))
    view = QReshape(name="view", in_shape=(2, 4, 4), out_shape=(8, 4, 1), zp=first.zp_out, s=0.05,
                    inputs=(0,))
    viewer = _conv(rng, "viewer", (8, 4, 1), first.zp_out, m=2, inputs=(2,))
    net = QNetwork(layers=[first, padded, view, viewer], input_name="x", input_shape=(3, 4, 4),
                   input_scale=0.05, input_zp=0, output_name="y", output_shape=(2, 4, 1),
                   output_scale=0.05, output_zp=viewer.zp_out, config=AcceleratorConfig())
    net.validate()
    with pytest.raises(FpganetError, match="read through a reshape and by a padded layer") as error:
        build_images(net)
    assert "\n" not in str(error.value)
