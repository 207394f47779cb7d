"""The back end on the embedded LeNet-5: program on the ISA simulator vs the golden model,
layout and bank conflicts on 2x8, the compiled directory, capacity errors."""

import json
import re

import numpy as np
import pytest

from fpganet.codegen import (STAMP_BYTES, build_images, engine_conflicts, pack_weight_word,
                             read_images, run_isa)
from fpganet.cli import main
from fpganet.compiler import compile_model, load_compiled
from fpganet.config import AcceleratorConfig
from fpganet.datasets import mnist
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.isa import HostSpace, Opcode, Reg, decode
from fpganet.isasim import Machine

IMAGES = 300


@pytest.fixture(scope="module")
def lenet():
    return compile_model()


@pytest.fixture(scope="module")
def q_eval(lenet):
    x, _ = mnist("eval", limit=IMAGES)
    return lenet.quantize_input(x)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("backend") / "OUT"
    assert main(["compile", "-o", str(out), "--array", "2x8"]) == 0
    return out


def test_lenet_on_isasim_equals_golden(lenet, q_eval):
    q, stamps = run_isa(lenet, q_eval)
    np.testing.assert_array_equal(q, run_golden(lenet, q_eval))
    assert q.shape == (IMAGES, 10) and q.dtype == np.int8
    assert stamps.shape == (IMAGES,) and not stamps.any()   # isasim counts no cycles


def test_lenet_layout_on_2x8(lenet):
    images = build_images(lenet, 1, AcceleratorConfig(rows=2, cols=8))
    plan, config = images.plan, images.config
    conflicts = engine_conflicts(images.program, config)
    convs = [entry for entry in conflicts if entry["opcode"] == "CONV"]
    assert len(convs) == 5 and all(entry["extra_cycles"] == 0 for entry in convs)
    # The stride-1 convolutions read maps whose pitch is congruent to their output width.
    conv1, conv2 = (step for step in plan.steps if step.kind == "conv")
    assert conv1.src.pitch % 8 == 28 % 8 and conv1.src.pads == (2, 2, 2, 2)
    assert conv2.src.pitch % 8 == 10 % 8 and conv1.lanes == conv2.lanes == 8
    # Dense layers: one lane, K walk over the whole stored map (the flatten costs nothing).
    dense = [step for step in plan.steps if step.kind == "dense"]
    assert [step.lanes for step in dense] == [1, 1, 1]
    assert dense[0].src is plan.steps[3].dst and dense[0].k == 400
    assert plan.reshape_steps == {4: "free"}
    # Memory use (documented in the report): fits 8 KiB without re-filling borders per image.
    assert plan.act_bytes <= config.act_buffer_bytes
    assert plan.allocation in ("disjoint", "pinned-borders")
    assert not any(m.fill_per_image for m in plan.maps)
    assert plan.weight_bytes == sum(-(-l.out_shape[0] // 2) * 2 * l.k for l in lenet.conv_layers)
    assert plan.param_entries == 6 + 16 + 120 + 84 + 10
    assert len(images.program) <= 160
    section = images.layout
    assert section["activations"]["bytes"] == plan.act_bytes
    steps = [step for layer in section["layers"] for step in layer.get("steps", [])]
    assert [s["conflict_free"] for s in steps if s["kind"] == "conv"] == [True, True]


def test_program_structure_and_image_count(lenet, q_eval):
    images = build_images(lenet, 3)
    program = [decode(int(word)) for word in images.program]
    ops = [i.opcode for i in program]
    assert ops[-1] is Opcode.END and ops[-2] is Opcode.LOOP
    assert ops.count(Opcode.INPUT) == ops.count(Opcode.OUTPUT) == ops.count(Opcode.STAMP) == 1
    assert ops.count(Opcode.CONV) == 5 and ops.count(Opcode.POOL) == 2
    loop = program[-2].target
    assert all(op is not Opcode.INPUT for op in ops[:loop])       # prologue: constant FILLs
    assert program[images.loop_count_index] == program[images.loop_count_index].__class__(
        Opcode.SET, Reg.LOOP_COUNT, 2)
    # Only the LOOP_COUNT word depends on the number of images.
    other = images.for_images(7).program
    assert len(other) == len(images.program)
    assert [i for i in range(len(other)) if other[i] != images.program[i]] == [images.loop_count_index]
    # Zero images: the prologue and END; the accelerator sends nothing.
    machine = Machine(images.config)
    images.for_images(0).load(machine)
    assert machine.run(b"") == b""
    # The streams: C*H*W bytes in per image, 10 logits + a 4-byte stamp out.
    assert images.streams.input_bytes == 784 and images.streams.output_record_bytes == 10 + STAMP_BYTES
    data = images.pack_inputs(q_eval[:3])
    assert data == q_eval[:3].tobytes()
    with pytest.raises(FpganetError, match="reads 3 images"):
        images.pack_inputs(q_eval[:2])
    with pytest.raises(FpganetError, match="expected 42"):
        images.unpack_outputs(b"\0" * 41)


def test_host_writes_match_the_memories(lenet):
    images = build_images(lenet, 1)
    writes = list(images.host_writes())
    spaces = [space for space, _, _ in writes]
    assert spaces[-1] is HostSpace.PROGRAM and HostSpace.ACTIVATIONS not in spaces
    weights = [(a, w) for s, a, w in writes if s is HostSpace.WEIGHTS]
    assert len(weights) == len(images.weights) == images.plan.weight_words
    address, word = weights[30]
    assert word == pack_weight_word(images.weights[address])
    assert word & 0xFF == int(images.weights[address][0]) & 0xFF
    # Group 0 of conv1: word k holds weight[0, k] and weight[1, k].
    conv1 = lenet.layers[0].weight_matrix
    np.testing.assert_array_equal(images.weights[:25], conv1[:2].T)
    params = [w for s, _, w in writes if s is HostSpace.PARAMS]
    assert params[0] == int(images.params[0]) and len(params) == 236


def test_compiled_directory_holds_the_program(compiled, lenet, capfd, tmp_path):
    names = sorted(p.name for p in compiled.iterdir())
    assert names == sorted(["manifest.json", "network.npz", "program.hex", "weights.hex",
                            "params.hex", "memories.npz", "SHA256SUMS"])
    manifest = json.loads((compiled / "manifest.json").read_text())
    section = manifest["accelerator"]
    assert section["n_images"] == 1 and section["program"]["words"] == len(
        (compiled / "program.hex").read_text().split())
    assert all("instructions" in step for layer in section["layers"] for step in layer.get("steps", []))
    images = read_images(compiled)
    rebuilt = build_images(load_compiled(compiled), 1)
    np.testing.assert_array_equal(images.program, rebuilt.program)
    np.testing.assert_array_equal(images.weights, rebuilt.weights)
    np.testing.assert_array_equal(images.params, rebuilt.params)
    hex_words = [int(line, 16) for line in (compiled / "weights.hex").read_text().split()]
    assert hex_words == images.words(HostSpace.WEIGHTS)
    assert [int(line, 16) for line in (compiled / "program.hex").read_text().split()] == \
        [int(w) for w in images.program]
    capfd.readouterr()
    for backend in ("isa", "golden"):
        assert main(["run", str(compiled), "--limit", "25", "--backend", backend,
                     "--out", str(tmp_path / f"{backend}.npz")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "measured by the isa model on 25 images" in out
    assert "all 250 int8 outputs of the isa backend equal the golden model's, bit for bit" in out
    np.testing.assert_array_equal(np.load(tmp_path / "isa.npz")["q"], np.load(tmp_path / "golden.npz")["q"])


@pytest.mark.parametrize("flags,message", [
    (["--act-buffer-bytes", "4096"],
     r"activation buffer: network needs 5,\d{3} bytes, the 2x8 configuration has 4,096 "
     r"\(--act-buffer-bytes\)"),
    (["--weight-buffer-bytes", "32768"],
     r"weight buffer: network needs 61,470 bytes \(30,735 words of 2 bytes\), the 2x8 configuration "
     r"has 32,768 \(16,384 words, --weight-buffer-bytes\)"),
    (["--bias-buffer-words", "200"],
     r"parameter buffer: network needs 1,888 bytes \(236 entries of 8 bytes\), the 2x8 "
     r"configuration has 1,600 \(200 entries, --bias-buffer-words\)"),
    (["--program-words", "100"],
     r"program memory: network needs 1,\d{3} bytes \(1\d\d instructions of 8 bytes\), the 2x8 "
     r"configuration has 800 \(100 instructions, --program-words\)"),
])
def test_capacity_errors_leave_no_output(flags, message, capfd, tmp_path):
    status = main(["compile", "-o", str(tmp_path / "OUT"), *flags])
    out, err = capfd.readouterr()
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpganet: error: ")
    assert re.fullmatch(message, lines[0][len("fpganet: error: "):]), lines[0]
    assert list(tmp_path.iterdir()) == []


def test_no_program_quantizes_only(capfd, tmp_path):
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out), "--act-buffer-bytes", "4096", "--no-program"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["SHA256SUMS", "manifest.json", "network.npz"]
    with pytest.raises(FpganetError, match="no accelerator program"):
        read_images(out)
    capfd.readouterr()
    assert main(["run", str(out), "--limit", "2", "--backend", "isa"]) == 2
    assert "activation buffer: network needs" in capfd.readouterr().err


def test_clock_mhz_flag(capfd, tmp_path):
    assert main(["compile", "-o", str(tmp_path / "OUT"), "--clock-mhz", "12.5", "--array", "3x5"]) == 0
    manifest = json.loads((tmp_path / "OUT" / "manifest.json").read_text())
    assert manifest["config"]["clock_hz"] == 12.5e6 and manifest["config"]["rows"] == 3
    assert main(["compile", "-o", str(tmp_path / "OUT"), "--clock-mhz", "12", "--clock-hz", "5"]) == 2


def test_multiplier_bits_flag_and_check(lenet, capfd, tmp_path):
    """``--requant-mult-bits 1`` compiles LeNet-5 with power-of-two multipliers, which run on
    the ISA simulator as the golden model says; a network with 15-bit multipliers is refused
    by a configuration whose requantizer keeps fewer bits, naming the layer."""
    out = tmp_path / "OUT"
    assert main(["compile", "-o", str(out), "--requant-mult-bits", "1"]) == 0
    net = load_compiled(out)
    assert net.config.requant_mult_bits == 1
    assert all(np.all(layer.mult == 1 << 14) for layer in net.conv_layers)
    q = net.quantize_input(mnist("eval", limit=20)[0])
    np.testing.assert_array_equal(run_isa(net, q, read_images(out))[0], run_golden(net, q))
    with pytest.raises(FpganetError, match=r"^layer 'conv_11': multiplier \d+ has more than the 3 "
                                           r"significant bits this 2x8 configuration's requantizer "
                                           r"keeps \(--requant-mult-bits\)"):
        build_images(lenet, 1, AcceleratorConfig(requant_mult_bits=3))
    capfd.readouterr()
