"""Batched dense layers (``fpganet compile --batch B``): the dense layers at the end of a network
run once for a group of B images, one array column per image.

Checked here: batch 1 is byte for byte what the compiler emitted before batching existed;
random networks and LeNet-5 at B in {2, cols} equal the golden model on the ISA simulator and
on the RTL (Verilator), the RTL's cycle counter equal to ``fpganet.perf``; the refusals;
``fpganet compile --batch`` and the consumers of a compiled directory."""

import hashlib
import json

import numpy as np
import pytest

from fpganet.backends import run_network
from fpganet.boards.icebreaker import DEFAULT_CONFIG as ICEBREAKER_CONFIG
from fpganet.cli import main
from fpganet.codegen import build_images, engine_conflicts, plan_network, read_images, run_isa
from fpganet.codegen.fuzz import _conv, random_case, random_network
from fpganet.codegen.plan import smallest_act_bytes
from fpganet.compiler import compile_model, write_compiled
from fpganet.config import AcceleratorConfig
from fpganet.datasets import mnist
from fpganet.errors import FpganetError
from fpganet.estimate.comparison import estimate
from fpganet.estimate.workload import simulated_cycles
from fpganet.golden import run_golden
from fpganet.isa import HostSpace
from fpganet.link import load_compiled_job
from fpganet.perf import program_cycles
from fpganet.qnet import QNetwork, QReshape
from fpganet.sim.fuzz_rtl import CONFIGS as RTL_CONFIGS
from fpganet.sim.rtl_backend import build_harness

#: LeNet-5 configurations of the batching report (docs/reference/compiler.md, "Batching").
CONFIGS = {
    "2x8": AcceleratorConfig(),
    "8x2": AcceleratorConfig(rows=8, cols=2, acc_width=24, weight_buffer_bytes=131072,
                             act_buffer_bytes=8192, bias_buffer_words=256, program_words=256),
    "8x8-requant2": AcceleratorConfig(rows=8, cols=8, requant_lanes=2, weight_buffer_bytes=131072,
                                      act_buffer_bytes=65536),
}

#: sha256 (first 16 digits) of program (3 images), weights, params and manifest section, computed
#: with the compiler before batching existed and recomputed when the region registers became
#: aliases of the engine's and STRIDE_Y became IN_ROWSTEP (other register numbers, values and
#: SETs): batch 1 must not change a byte. (Random case 5, a tight buffer, has the layout of the
#: allocator's best placement order, which came later.)
LENET_DIGESTS = {"2x8": "2efc6e494c408c93", "8x2": "3116731bcce4ff26",
                 "8x8-requant2": "2ea639f72deb9453"}
#: The same for the fpganet-mode cases of random_case(7, index) (the tflite-mode ones, every
#: third round of the arrays, came later). Cases 0, 15 and 18 recomputed when the border fills
#: of maps whose rows follow one another became 3 FILLs of the same bytes instead of 4
#: (program._fill_border); with the old _fill_border they give the old digests.
RANDOM_DIGESTS = {
    0: "0fccc09bffe83175", 1: "a72becd1d6f54828", 2: "a7727539339507c0", 3: "944814620d07704c",
    4: "c083affdb0dc6b27", 5: "4256d253f37ba96d", 6: "0fb755b4543579e7", 7: "eacb3d2f301500d5",
    12: "cfbcc626a3a27ceb", 13: "dd81cd48f3a69fe2", 14: "0010d9c819b2fa7b", 15: "bde023e4e5676971",
    16: "e80182eb74775edb", 17: "011a42839849bb92", 18: "c94937b992f99d0b", 19: "64cdee4b167e96e1",
}


def _digest(images):
    h = hashlib.sha256()
    for array in (images.program_for(3), images.weights, images.params):
        h.update(np.ascontiguousarray(array).tobytes())
    h.update(json.dumps(images.layout, sort_keys=True).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def lenet():
    return compile_model()


@pytest.fixture(scope="module")
def mnist_q(lenet):
    x, _ = mnist("eval", 40)
    q_in = lenet.quantize_input(x)
    return q_in, run_golden(lenet, q_in)


def _cycles_per_image(images, config):
    """Steady-state cycles per image: (2 groups - 1 group) / batch."""
    b = images.batch
    return (program_cycles(images.program_for(2 * b), config).total
            - program_cycles(images.program_for(b), config).total) / b


# Batch 1 is today's compiler ---------------------------------------------------------------

def test_batch_1_is_byte_identical_to_the_unbatched_compiler(lenet):
    for name, config in CONFIGS.items():
        assert _digest(build_images(lenet, 1, config)) == LENET_DIGESTS[name], name
        assert _digest(build_images(lenet, 1, config, batch=1)) == LENET_DIGESTS[name], name
    for index, expected in RANDOM_DIGESTS.items():
        case = random_case(7, index, binary=False)
        # The rounds that came to have packed_weights (cases 4-7) compiled without it before.
        config = case.config.replace(packed_weights=False)
        assert _digest(build_images(case.net, 2, config)) == expected, case.describe()


def test_batch_1_compiled_directory_is_unchanged(lenet, tmp_path):
    write_compiled(lenet, tmp_path / "default")
    write_compiled(lenet, tmp_path / "batch1", batch=1)
    for name in ("program.hex", "weights.hex", "params.hex", "manifest.json", "network.npz"):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "batch1" / name).read_bytes()
    section = json.loads((tmp_path / "batch1" / "manifest.json").read_text())["accelerator"]
    assert "batch" not in section and read_images(tmp_path / "batch1").batch == 1


# Random networks ---------------------------------------------------------------------------

def _random_batched(rng, config, batch, tight):
    """A random network with dense layers that the planner batches for ``config`` (drawn again
    until one does); ``tight``: the smallest activation buffer it fits, so maps share bytes."""
    while True:
        net = random_network(rng, config)
        try:
            need = smallest_act_bytes(net, config, batch=batch)
        except FpganetError:
            continue            # no dense layer at the end: nothing to batch
        if tight:
            config = config.replace(act_buffer_bytes=-(-need // config.act_banks) * config.act_banks)
        elif need > config.act_buffer_bytes:
            continue
        try:
            build_images(net, 1, config, batch=batch)
        except FpganetError:
            continue            # weights, parameters or program do not fit
        net.config = config
        return net, config


@pytest.mark.parametrize("array", ["2x8", "3x5", "4x4", "1x2"])
def test_random_batched_networks_on_isa_match_golden(array):
    rng = np.random.default_rng([2026, sum(map(ord, array))])
    base = AcceleratorConfig.parse_array(array, requant_lanes=1)
    for index in range(12):
        config = base
        if index % 3 == 2 and config.cols > 1:
            config = config.replace(requant_lanes=config.cols)
        batch = 2 if index % 2 else config.cols
        net, config = _random_batched(rng, config, batch, tight=index % 4 == 1)
        n = int(rng.integers(1, 2 * batch + 2))      # partial last groups too
        q_in = rng.integers(-128, 128, (n, *net.input_chw)).astype(np.int8)
        images = build_images(net, n, config, batch=batch)
        q, _ = run_isa(net, q_in, images=images)
        np.testing.assert_array_equal(q, run_golden(net, q_in), err_msg=f"{array} batch {batch}")
        plan = images.plan
        assert plan.group_steps and all(step.lanes == batch for step in plan.group_steps)
        if plan.pitches == "searched":
            # An odd image stride and interleaved outputs: the batched lanes never share a bank.
            conflicts = engine_conflicts(images.program_for(batch), config)
            pcs = [images.layout["layers"][s.layer_index]["steps"][0]["instructions"][1] - 1
                   for s in plan.group_steps]
            assert all(e["extra_cycles"] == 0 for e in conflicts if e["pc"] in pcs)


def test_batching_saves_cycles_on_a_dense_heavy_network():
    rng = np.random.default_rng(5)
    config = AcceleratorConfig()
    net, config = _random_batched(rng, config, 8, tight=False)
    one = _cycles_per_image(build_images(net, 1, config), config)
    eight = _cycles_per_image(build_images(net, 1, config, batch=8), config)
    dense = [s for s in plan_network(net, config).steps if s.kind == "dense"]
    assert dense and eight < one


# Refusals ----------------------------------------------------------------------------------

def test_refusals_are_one_line(lenet):
    config = AcceleratorConfig()
    with pytest.raises(FpganetError, match=r"--batch 9: must be 1\.\.8"):
        build_images(lenet, 1, config, batch=9)
    with pytest.raises(FpganetError, match=r"--batch 0: must be"):
        build_images(lenet, 1, config, batch=0)
    with pytest.raises(FpganetError) as error:
        build_images(lenet, 1, config, batch=8)
    message = str(error.value)
    assert message == ("activation buffer: network needs 9,080 bytes, the 2x8 configuration has "
                       "8,192 (--act-buffer-bytes, or a --batch below 8)")
    rng = np.random.default_rng(3)
    while True:
        net = random_network(rng, config)
        if not any(getattr(layer, "kind", "") == "dense" for layer in net.layers):
            break
    with pytest.raises(FpganetError, match="the network has no dense layer") as error:
        build_images(net, 1, config, batch=2)
    assert "\n" not in str(error.value)
    small = AcceleratorConfig(program_words=256)
    with pytest.raises(FpganetError, match=r"program memory: .*a --batch below 4"):
        build_images(lenet, 1, small, batch=4)


# LeNet-5 -----------------------------------------------------------------------------------

def test_lenet_batched_on_isa_matches_golden(lenet, mnist_q):
    q_in, expected = mnist_q
    for name, config in CONFIGS.items():
        for batch in sorted({2, config.cols}):
            if name == "2x8" and batch == 8:
                config = config.replace(act_buffer_bytes=16384)    # 8 copies do not fit 8 KiB
            images = build_images(lenet, len(q_in), config, batch=batch)
            q, _ = run_isa(lenet, q_in, images=images)
            np.testing.assert_array_equal(q, expected, err_msg=f"{name} batch {batch}")


def test_lenet_cycles_per_image(lenet):
    """The numbers docs/reference/compiler.md quotes."""
    measured = {}
    for name, config in {**CONFIGS, "2x8-16k": AcceleratorConfig(act_buffer_bytes=16384)}.items():
        for batch in sorted({1, 4 if name == "2x8" else config.cols, config.cols}):
            try:
                images = build_images(lenet, 1, config, batch=batch)
            except FpganetError:
                continue
            measured[name, batch] = _cycles_per_image(images, config)
    assert measured[("2x8", 1)] == 55960
    assert measured[("2x8", 4)] < 0.62 * measured[("2x8", 1)]
    assert ("2x8", 8) not in measured
    assert measured[("2x8-16k", 8)] < 0.55 * measured[("2x8-16k", 1)]
    assert measured[("8x2", 2)] < measured[("8x2", 1)]
    assert measured[("8x8-requant2", 8)] < 0.65 * measured[("8x8-requant2", 1)]


def test_batched_pair_reads_share_no_bank():
    """With pair products each image's lane reads two channels of its copy: the image stride
    (and the copy's channel stride) put all four bytes of a beat in different banks, so the
    iCEBreaker's batched dense layers gather a beat a cycle (an odd image stride with an odd
    channel stride made every beat take two cycles)."""
    config = ICEBREAKER_CONFIG
    images = build_images(compile_model(config=config), 1, config, batch=2)
    plan = images.plan
    pcs = [images.layout["layers"][s.layer_index]["steps"][0]["instructions"][1] - 1
           for s in plan.group_steps]
    conflicts = [e for e in engine_conflicts(images.program_for(2), config) if e["pc"] in pcs]
    assert len(conflicts) == 3 and all(e["extra_cycles"] == 0 for e in conflicts)
    slot = plan.slot_map
    assert (slot.copy_stride - slot.cstride) % config.act_banks


def test_estimate_uses_the_batched_program():
    """`fpganet estimate` of a directory compiled with --batch 2 counts the batched program's
    steady-state cycles per image (the board runs it two images a START); the per-layer
    cycles give the dense layers' a half each and add up with the rest to the total."""
    config = ICEBREAKER_CONFIG
    net = compile_model(config=config)
    result = estimate(net, board="icebreaker", program_batch=2)
    assert result.cycles.value == _cycles_per_image(build_images(net, 1, config, batch=2), config)
    assert result.cycles.value < _cycles_per_image(build_images(net, 1, config), config)
    assert any("--batch 2" in note for note in result.notes)
    alone = simulated_cycles(net, config)["per_layer"]
    dense = [i for i, layer in enumerate(net.layers) if getattr(layer, "kind", "") == "dense"]
    assert len(dense) == 3 and all(result.layer_cycles[i] < 0.55 * alone[i] for i in dense)
    assert sum(result.layer_cycles) < result.cycles.value


def test_compile_batch_and_the_consumers(lenet, tmp_path, mnist_q):
    out = tmp_path / "lenet-b4"
    assert main(["compile", "-o", str(out), "--batch", "4"]) == 0
    section = json.loads((out / "manifest.json").read_text())["accelerator"]
    assert section["batch"] == 4 and section["batching"]["dense_layers"] == ["gemm_19", "gemm_21",
                                                                              "gemm_23"]
    images = read_images(out)
    assert images.batch == 4
    x, _ = mnist("eval", 7)
    isa = run_network(lenet, x, backend="isa", compiled=out)
    golden = run_network(lenet, x, backend="golden")
    np.testing.assert_array_equal(isa.q, golden.q)
    job = load_compiled_job(out)          # one START runs one group of 4 images
    assert job.batch == 4 and job.memories[HostSpace.PROGRAM] == [
        int(word) for word in images.for_images(4).program]
    assert main(["compile", "-o", str(tmp_path / "no"), "--batch", "9"]) != 0
    assert not (tmp_path / "no").exists()


# RTL ---------------------------------------------------------------------------------------

def _check_on_rtl(build, net, q_in, batch):
    images = build_images(net, len(q_in), build.config, batch=batch)
    result = build.run(images.memories, images.pack_inputs(q_in))
    q, stamps = images.unpack_outputs(result.output)
    np.testing.assert_array_equal(q, run_golden(net, q_in))
    model = program_cycles(images.program_for(len(q_in)), build.config)
    assert result.cycles == model.total
    assert list(stamps) == list(model.stamps[:len(q_in)])
    return result


@pytest.mark.parametrize("name", ["2x8", "3x5-requant5"])
def test_random_batched_networks_on_rtl(name):
    config = RTL_CONFIGS[name]
    build = build_harness(config, sim="verilator")
    rng = np.random.default_rng([2027, sum(map(ord, name))])
    for index in range(4):
        batch = 2 if index % 2 else config.cols
        net, _ = _random_batched(rng, config, batch, tight=False)
        q_in = rng.integers(-128, 128, (batch + 1, *net.input_chw)).astype(np.int8)
        _check_on_rtl(build, net, q_in, batch)


def test_lenet_batched_on_rtl(lenet, mnist_q):
    """On the default 2x8 build (8 KiB of activations: batch 4 is the largest that fits with
    searched pitches)."""
    build = build_harness(AcceleratorConfig(), sim="verilator")
    q_in, _ = mnist_q
    _check_on_rtl(build, lenet, q_in[:5], 4)


def test_lenet_batch_cols_on_rtl(lenet, mnist_q):
    """Batch 8 = cols on a 2x8 array with 16 KiB of activations (8 slot copies do not fit the
    default 8 KiB): one more Verilator build (~30 s, cached in build/sim afterwards)."""
    build = build_harness(AcceleratorConfig(act_buffer_bytes=16384), sim="verilator")
    q_in, _ = mnist_q
    _check_on_rtl(build, lenet, q_in[:10], 8)


def test_lenet_batched_on_the_icebreakers_rtl():
    """The iCEBreaker's configuration at batch 2: its first conv and pool as CONV pools, pair
    products, the batch slot's image and channel strides for pair reads (29,369 cycles an
    image, 1,021 images/s at its 30 MHz)."""
    config = ICEBREAKER_CONFIG
    net = compile_model(config=config)
    x, _ = mnist("eval", 3)
    images = build_images(net, 1, config, batch=2)
    assert sum(step.pooled for step in images.plan.steps) == 1
    assert _cycles_per_image(images, config) == 29369
    _check_on_rtl(build_harness(config, sim="verilator"), net, net.quantize_input(x), 2)


def test_mlp_whose_input_is_the_batch_slot():
    """No conv layer: INPUT writes image j's copy of the slot directly."""
    rng = np.random.default_rng(11)
    config = AcceleratorConfig(rows=3, cols=5)
    shape = (3, 4, 5)
    layers = [QReshape(name="flatten", in_shape=shape, out_shape=(60, 1, 1), zp=-3, s=0.05)]
    zp, flat = -3, (60, 1, 1)
    for index, m in enumerate((17, 9, 4)):
        layer = _conv(rng, f"dense{index}", flat, zp, kind="dense", m=m)
        layers.append(layer)
        flat, zp = tuple(layer.out_shape), layer.zp_out
    net = QNetwork(layers=layers, input_name="x", input_shape=shape, input_scale=0.05, input_zp=-3,
                   output_name="y", output_shape=(4,), output_scale=0.05, output_zp=zp, config=config)
    net.validate()
    q_in = rng.integers(-128, 128, (7, *shape)).astype(np.int8)
    for batch in (2, 5):
        images = build_images(net, len(q_in), config, batch=batch)
        assert images.plan.slot_map is images.plan.input_map
        q, _ = run_isa(net, q_in, images=images)
        np.testing.assert_array_equal(q, run_golden(net, q_in))
