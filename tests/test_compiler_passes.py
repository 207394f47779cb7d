"""The compiler pass by pass (fpganet.codegen.passes): each pass on a small network, what it
reads and what it writes, and `fpganet compile --dump-ir`."""

import ast
import pathlib

import numpy as np
import pytest

from fpganet.cli import main
from fpganet.codegen import build_images, run_isa
from fpganet.codegen.fuzz import _add, _conv
from fpganet.codegen.ir import Plan, format_plan
from fpganet.codegen.passes import PLAN_PASSES, choose_pitches, emit, format_emission, run_passes
from fpganet.codegen.plan import plan_network, smallest_act_bytes
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.qnet import NETWORK_INPUT, QMaxPool, QNetwork, QReshape

CONFIG = AcceleratorConfig(rows=4, cols=2, weight_buffer_bytes=4 * 8192)
POOLED = CONFIG.replace(fused_max_pool=True)
PASS_NAMES = [name for name, _ in PLAN_PASSES]


def network(layers, in_shape, config=CONFIG):
    last = layers[-1]
    out_shape = tuple(getattr(last, "out_shape", None) or last.in_shape)
    zp = getattr(last, "zp_out", getattr(last, "zp", 0))
    net = QNetwork(layers=layers, input_name="x", input_shape=in_shape, input_scale=0.05,
                   input_zp=3, output_name="y", output_shape=out_shape, output_scale=0.05,
                   output_zp=zp, config=config)
    net.validate()
    return net


def pool(name, in_shape, zp, pads=(0, 0, 0, 0), inputs=None):
    c, h, w = in_shape
    out = (c, (h + pads[0] + pads[2] - 2) // 2 + 1, (w + pads[1] + pads[3] - 2) // 2 + 1)
    return QMaxPool(name=name, in_shape=tuple(in_shape), out_shape=out, kernel=(2, 2),
                    stride=(2, 2), pads=pads, zp=zp, s=0.05, inputs=inputs)


def conv_pool_dense(config=CONFIG, seed=1):
    """conv (stride 1, 8x8 out) -> 2x2 max-pool -> flatten -> dense."""
    rng = np.random.default_rng(seed)
    conv = _conv(rng, "conv", (1, 8, 8), 3, m=2, kernel=(3, 3), pads=(1, 1, 1, 1))
    pooled = pool("pool", conv.out_shape, conv.zp_out)
    flat = QReshape(name="flatten", in_shape=pooled.out_shape, out_shape=(32, 1, 1),
                    zp=conv.zp_out, s=0.05)
    dense = _conv(rng, "dense", (32, 1, 1), conv.zp_out, kind="dense", m=5)
    return network([conv, pooled, flat, dense], (1, 8, 8), config)


def residual(reuse_first=False, seed=2):
    """conv0 -> conv1 -> add(conv0, conv1) [-> conv2 reading conv0 again]."""
    rng = np.random.default_rng(seed)
    conv0 = _conv(rng, "conv0", (2, 6, 6), 3, m=4, kernel=(1, 1))
    conv1 = _conv(rng, "conv1", (4, 6, 6), conv0.zp_out, m=4, kernel=(3, 3), pads=(1, 1, 1, 1))
    add = _add(rng, "add", (4, 6, 6), conv0.zp_out, conv1.zp_out, inputs=(0, 1))
    layers = [conv0, conv1, add]
    if reuse_first:
        rest = _conv(rng, "conv2", (4, 6, 6), conv0.zp_out, m=4, kernel=(1, 1), inputs=(0,))
        join = _add(rng, "join", (4, 6, 6), add.zp_out, rest.zp_out, inputs=(2, 3))
        layers += [rest, join]
    return network(layers, (2, 6, 6))


def planned(net, until, config=None, batch=1):
    """The plan after the passes up to and including ``until``."""
    plan = Plan(net, config or net.config, batch=batch)
    return run_passes(plan, PLAN_PASSES[:PASS_NAMES.index(until) + 1])


def named(plan, name):
    return next(m for m in plan.maps if m.name == name)


# check -------------------------------------------------------------------------------------

def test_check_refuses_before_any_planning():
    net = conv_pool_dense()
    with pytest.raises(FpganetError, match=r"--batch 3: must be 1\.\.2 "):
        planned(net, "check", batch=3)
    with pytest.raises(FpganetError, match="8-bit operands|--operand-width"):
        planned(net, "check", config=CONFIG.replace(operand_width=4))
    plan = planned(net, "check")
    assert plan.steps == [] and plan.maps == []


# lower -------------------------------------------------------------------------------------

def test_lower_makes_a_step_a_layer_and_folds_the_flatten():
    plan = planned(conv_pool_dense(), "lower")
    assert [(s.number, s.kind, s.layer.name) for s in plan.steps] == [
        (1, "conv", "conv"), (2, "pool", "pool"), (3, "dense", "dense")]
    assert [m.name for m in plan.maps] == ["input", "conv", "pool", "dense"]
    # The dense layer reads the pooled map in place: its kernel is the whole map.
    dense = plan.steps[2]
    assert dense.src is named(plan, "pool") and dense.kernel == (4, 4)
    assert plan.reshape_steps == {2: "free"}
    # The input is padded for the conv; liveness and layout are later passes.
    assert plan.input_map.pads == (1, 1, 1, 1) and plan.input_map.fill is None
    assert named(plan, "conv").producer is None and named(plan, "conv").pitch is None


def test_lower_copies_a_reshape_into_a_padded_conv():
    rng = np.random.default_rng(4)
    conv0 = _conv(rng, "conv0", (2, 4, 6), 3, m=2, kernel=(1, 1))
    reshape = QReshape(name="fold", in_shape=(2, 4, 6), out_shape=(4, 3, 4), zp=conv0.zp_out, s=0.05)
    conv1 = _conv(rng, "conv1", (4, 3, 4), conv0.zp_out, m=3, kernel=(3, 3), pads=(1, 1, 1, 1))
    plan = planned(network([conv0, reshape, conv1], (2, 4, 6)), "lower")
    assert [s.kind for s in plan.steps] == ["conv", "copy", "conv"]
    copy = plan.steps[1]
    assert plan.reshape_steps == {1: copy}
    assert copy.src.parent is named(plan, "conv0") and copy.dst.shape == (4, 3, 4)
    assert copy.dst.pads == (1, 1, 1, 1) and plan.steps[2].src is copy.dst


# fuse --------------------------------------------------------------------------------------

def test_fuse_runs_the_pool_inside_the_conv_on_a_pooled_configuration():
    plan = planned(conv_pool_dense(POOLED), "fuse")
    assert [(s.number, s.kind, s.pooled) for s in plan.steps] == [(1, "conv", True), (2, "dense", False)]
    conv = plan.steps[0]
    assert conv.pool_layer.name == "pool" and conv.dst.name == "pool" and conv.lanes == 2
    assert [m.name for m in plan.maps] == ["input", "pool", "dense"]
    unfused = planned(conv_pool_dense(CONFIG), "fuse")
    assert [s.kind for s in unfused.steps] == ["conv", "pool", "dense"]


def test_fuse_takes_one_pool_of_two_in_a_row():
    # conv -> pool -> pool: the second pool reads the first, not the conv (it was fused over the
    # first one, whose pooling was then lost).
    rng = np.random.default_rng(3)
    conv = _conv(rng, "conv", (1, 8, 8), 3, m=3, kernel=(1, 1))
    first = pool("pool0", conv.out_shape, conv.zp_out)
    second = pool("pool1", first.out_shape, conv.zp_out)
    net = network([conv, first, second], (1, 8, 8), POOLED)
    plan = planned(net, "fuse")
    assert [(s.kind, s.pool_layer and s.pool_layer.name) for s in plan.steps] == [
        ("conv", "pool0"), ("pool", None)]
    q_in = rng.integers(-128, 128, (2, 1, 8, 8)).astype(np.int8)
    out, _ = run_isa(net, q_in)
    np.testing.assert_array_equal(out, run_golden(net, q_in))


# borders -----------------------------------------------------------------------------------

def test_borders_fill_what_the_padded_readers_ask_for():
    rng = np.random.default_rng(5)
    conv = _conv(rng, "conv", (1, 6, 6), 3, m=2, kernel=(1, 1))
    padded = pool("pool", conv.out_shape, conv.zp_out, pads=(1, 1, 0, 0))
    net = network([conv, padded], (1, 6, 6))
    assert named(planned(net, "lower"), "conv").fill is None
    plan = planned(net, "borders")
    assert named(plan, "conv").fill == -128 and plan.input_map.fill is None
    # A conv with pads reading the same map wants its zero point there: refused.
    other = _conv(rng, "conv2", (2, 6, 6), conv.zp_out, m=2, kernel=(3, 3), pads=(1, 1, 1, 1),
                  inputs=(0,))
    assert other.zp_in != -128
    with pytest.raises(FpganetError, match="whose borders differ"):
        planned(network([conv, padded, other], (1, 6, 6)), "borders")


# liveness ----------------------------------------------------------------------------------

def test_liveness_numbers_producers_and_last_readers():
    plan = planned(conv_pool_dense(), "liveness")
    assert [(m.name, m.producer, m.last_use) for m in plan.maps] == [
        ("input", 0, 1), ("conv", 1, 2), ("pool", 2, 3), ("dense", 3, 4)]
    fused = planned(conv_pool_dense(POOLED), "liveness")
    assert [(m.name, m.producer, m.last_use) for m in fused.maps] == [
        ("input", 0, 1), ("pool", 1, 2), ("dense", 2, 3)]


# in-place ----------------------------------------------------------------------------------

def test_in_place_add_takes_an_input_that_dies_there():
    plan = planned(residual(), "liveness")
    add = plan.steps[-1]
    assert add.kind == "add" and add.dst.in_place_of is None
    plan = planned(residual(), "in-place")
    assert plan.steps[-1].dst.in_place_of is named(plan, "conv0")
    # conv0 is read again after the add: the add writes over conv1 instead.
    plan = planned(residual(reuse_first=True), "in-place")
    add = next(s for s in plan.steps if s.layer.name == "add")
    assert named(plan, "conv0").last_use > add.number
    assert add.dst.in_place_of is named(plan, "conv1")


# batch -------------------------------------------------------------------------------------

def test_batch_runs_the_dense_layers_once_per_group():
    plan = planned(conv_pool_dense(), "batch", batch=2)
    dense = plan.steps[2]
    assert plan.first_batched == 2 and plan.group_steps == [dense]
    assert dense.batched and dense.lanes == 2 and dense.out_hw == (1, 2)
    assert plan.slot_map is named(plan, "pool") and plan.slot_map.copies == 2
    assert dense.dst.interleaved and dense.dst.copies == 2
    assert planned(conv_pool_dense(), "batch").first_batched is None
    with pytest.raises(FpganetError, match="has no dense layer"):
        planned(residual(), "batch", batch=2)


# pitches -----------------------------------------------------------------------------------

def test_pitches_take_the_cheapest_candidate_and_compact_is_the_smallest():
    plan = planned(conv_pool_dense(), "pitches")
    for m in plan.maps:
        assert m.pitch >= m.padded_w and m.cstride >= m.packed_cstride(m.pitch)
        if m.pitch_costs:
            assert m.pitch_costs[m.pitch] == min(m.pitch_costs.values())
    assert plan.input_map.pitch_costs, "the conv's input is costed"
    choose_pitches(plan, search=False)
    for m in plan.maps:
        assert m.pitch == m.padded_w


# allocate ----------------------------------------------------------------------------------

def test_allocate_takes_the_first_layout_that_fits():
    net = residual()
    plan = planned(net, "allocate")
    assert plan.allocation == "disjoint" and plan.pitches == "searched"
    assert plan.attempts == [{"pitches": "searched", "allocation": "disjoint", "bytes": plan.act_bytes}]
    spans = sorted((m.base, m.base + m.span) for m in plan.maps if m.in_place_of is None)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    # At the fewest bytes any layout needs, the maps must share bytes.
    tight = CONFIG.replace(act_buffer_bytes=smallest_act_bytes(net, CONFIG))
    plan = planned(net, "allocate", config=tight)
    assert plan.allocation in ("pinned-borders", "liveness") and plan.act_bytes <= tight.act_buffer_bytes
    assert len(plan.attempts) > 1
    short = planned(net, "allocate", config=tight.replace(act_buffer_bytes=tight.act_buffer_bytes - 1))
    assert short.allocation == "" and len(short.attempts) == 6


# buffers -----------------------------------------------------------------------------------

def test_buffers_place_weights_and_refuse_all_that_is_short_in_one_line():
    plan = planned(conv_pool_dense(), "buffers")
    ends = [(s.w_base, s.w_base + s.weight_words(CONFIG)) for s in plan.steps]
    assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    assert plan.weight_words == ends[-1][1]
    small = CONFIG.replace(act_buffer_bytes=64, weight_buffer_bytes=4 * 8)
    with pytest.raises(FpganetError) as refusal:
        planned(conv_pool_dense(small), "buffers")
    message = str(refusal.value)
    assert "activation buffer" in message and "weight buffer" in message and "\n" not in message


# emit --------------------------------------------------------------------------------------

def test_emit_is_what_build_images_loads_and_prints_each_step():
    net = conv_pool_dense(POOLED)
    plan = plan_network(net)
    emission = emit(plan)
    images = build_images(net)
    np.testing.assert_array_equal(emission.weights, images.weights)
    np.testing.assert_array_equal(emission.params, images.params)
    assert len(emission.program.body) == len(images.body)
    text = format_emission(emission, plan)
    assert "; step 1 conv conv" in text and "; step 2 dense dense" in text
    assert "CONV pool" in text and "; OUTPUT" in text


# the flow ----------------------------------------------------------------------------------

def test_the_flow_is_named_and_each_pass_says_what_it_reads_and_writes():
    assert PASS_NAMES == ["check", "lower", "fuse", "borders", "liveness", "in-place", "batch",
                          "pitches", "allocate", "buffers"]
    for name, run in PLAN_PASSES:
        doc = run.__doc__ or ""
        assert "Reads" in doc and ("writes" in doc or "Refuses" in doc), name


def test_run_passes_dumps_one_section_per_pass():
    import io

    dump = io.StringIO()
    build_images(conv_pool_dense(POOLED), dump=dump)
    text = dump.getvalue()
    headers = [line for line in text.splitlines() if line.startswith("=== IR after pass")]
    assert headers == [f"=== IR after pass '{name}' ===" for name in PASS_NAMES + ["emit"]]
    assert format_plan(plan_network(conv_pool_dense(POOLED))) in text


def test_no_function_in_codegen_is_over_100_lines():
    import fpganet.codegen

    root = pathlib.Path(fpganet.codegen.__file__).parent
    long = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 100:
                    long.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines})")
    assert not long


# fpganet compile --dump-ir -----------------------------------------------------------------

def test_compile_dump_ir_prints_each_pass(capfd, tmp_path):
    out = tmp_path / "out"
    assert main(["compile", "-o", str(out), "--board", "icebreaker", "--dump-ir"]) == 0
    stdout, _ = capfd.readouterr()
    headers = [line for line in stdout.splitlines() if line.startswith("=== IR after pass")]
    assert headers == [f"=== IR after pass '{name}' ===" for name in PASS_NAMES + ["emit"]]
    # The plan after fusion: LeNet-5's first conv runs its pool (icebreaker: fused_max_pool).
    fused = stdout.split("=== IR after pass 'fuse' ===")[1].split("===")[0]
    assert "pool 'maxpool_13'" in fused
    assert stdout.index("=== IR after pass 'emit'") < stdout.index("compiled lenet.onnx")
    # The dump changes nothing in what is written.
    plain = tmp_path / "plain"
    assert main(["compile", "-o", str(plain), "--board", "icebreaker"]) == 0
    assert "=== IR" not in capfd.readouterr()[0]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in plain.iterdir())
    for path in out.iterdir():
        assert path.read_bytes() == (plain / path.name).read_bytes(), path.name


def test_a_refused_compile_dumps_the_passes_before_it_and_writes_nothing(capfd, tmp_path):
    out = tmp_path / "out"
    status = main(["compile", "-o", str(out), "--dump-ir", "--act-buffer-bytes", "1024"])
    stdout, stderr = capfd.readouterr()
    assert status == 2 and not out.exists()
    assert "=== IR after pass 'allocate' ===" in stdout and "after pass 'buffers'" not in stdout
    assert stderr.startswith("fpganet: error: activation buffer:") and stderr.count("\n") == 1
    status = main(["compile", "-o", str(out), "--dump-ir", "--no-program"])
    stdout, stderr = capfd.readouterr()
    assert status == 2 and not out.exists() and stdout == ""
    assert stderr.startswith("fpganet: error: --dump-ir") and stderr.count("\n") == 1
