"""The functional ISA simulator against a direct numpy convolution, on a hand-written program."""

import dataclasses

import numpy as np
import pytest

from fpganet.codegen.fuzz import random_graph_network, random_network, signed_weights
from fpganet.codegen.images import build_images
from fpganet.codegen.plan import plan_network
from fpganet.codegen.run import run_isa
from fpganet.config import AcceleratorConfig
from fpganet.errors import FpganetError
from fpganet.golden import run_golden
from fpganet.isa import (INSTRUCTION_BITS, INSTRUCTION_LAYOUT, PARAM_LAYOUTS, TFLITE_MULT_TOP, Instruction, Opcode, Reg, decode,
                         encode, pack_nibbles, pack_param, pack_signs, unpack_nibbles, unpack_param,
                         unpack_signs)
from fpganet.isasim import IsaError, Machine
from fpganet.qnet import QConv


def reference_conv(x, w, bias, mult, shift, zp_in, zp_out, pad):
    M, C, k, _ = w.shape
    H, W = x.shape[1] + 2 * pad - k + 1, x.shape[2] + 2 * pad - k + 1
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad)), constant_values=zp_in)
    acc = np.zeros((M, H, W), np.int64)
    for ky in range(k):
        for kx in range(k):
            acc += np.einsum("mc,chw->mhw", w[:, :, ky, kx].astype(np.int64), xp[:, ky:ky + H, kx:kx + W])
    acc += bias[:, None, None]
    y = zp_out + ((acc * mult[:, None, None] + (1 << (shift - 1))[:, None, None]) >> shift[:, None, None])
    return np.clip(y, -128, 127)


def conv_program(C, H, W, M, k, pad, zp_in, zp_out, rows, lanes, pitch_extra=3):
    P, Hp = W + 2 * pad + pitch_extra, H + 2 * pad
    CS, OUT = Hp * P, 2048
    Ho, Wo = H + 2 * pad - k + 1, W + 2 * pad - k + 1
    K, npix, groups = C * k * k, Ho * Wo, -(-M // rows)
    prog = []

    def set_(reg, value):
        prog.append(Instruction(Opcode.SET, reg, value))

    for reg, value in [(Reg.IO_BASE, 0), (Reg.IO_CHANNELS, C), (Reg.IO_CSTRIDE, CS), (Reg.IO_ROWS, Hp),
                       (Reg.IO_PITCH, P), (Reg.IO_LEN, P), (Reg.FILL_VALUE, zp_in & 0xFF)]:
        set_(reg, value)
    prog.append(Instruction(Opcode.FILL))
    for reg, value in [(Reg.IO_BASE, pad * P + pad), (Reg.IO_ROWS, H), (Reg.IO_LEN, W)]:
        set_(reg, value)
    prog.append(Instruction(Opcode.INPUT))
    for reg, value in [(Reg.IN_BASE, 0), (Reg.IN_PITCH, P), (Reg.IN_CSTRIDE, CS), (Reg.IN_GSTEP, 0),
                       (Reg.K_C, C), (Reg.K_H, k), (Reg.K_W, k), (Reg.IN_ROWSTEP, P), (Reg.STRIDE_X, 1),
                       (Reg.OUT_W, Wo), (Reg.NPIX, npix), (Reg.LANES, lanes), (Reg.TILES, -(-npix // lanes)),
                       (Reg.GROUPS, groups), (Reg.M, M), (Reg.OUT_BASE, OUT), (Reg.OUT_PITCH, Wo),
                       (Reg.OUT_CSTRIDE, npix), (Reg.OUT_GSTEP, rows * npix), (Reg.W_BASE, 0),
                       (Reg.W_GSTEP, K), (Reg.P_BASE, 0),
                       (Reg.QUANT, (zp_out & 0xFF) | (0x80 << 8) | (0x7F << 16))]:
        set_(reg, value)
    prog.append(Instruction(Opcode.CONV))
    for reg, value in [(Reg.IO_BASE, OUT), (Reg.IO_CHANNELS, 1), (Reg.IO_ROWS, 1), (Reg.IO_LEN, M * npix)]:
        set_(reg, value)
    prog += [Instruction(Opcode.OUTPUT), Instruction(Opcode.END)]
    return prog, (Ho, Wo)


@pytest.mark.parametrize("C,H,W,M,k,pad,lanes", [(3, 6, 7, 5, 3, 1, 8), (1, 9, 5, 6, 5, 2, 3), (4, 4, 4, 2, 1, 0, 8)])
def test_conv_program_matches_numpy(C, H, W, M, k, pad, lanes):
    config = AcceleratorConfig(rows=2, cols=8)
    rng = np.random.default_rng(C * 100 + k)
    x = rng.integers(-128, 128, (C, H, W)).astype(np.int8)
    w = rng.integers(-127, 128, (M, C, k, k)).astype(np.int8)
    bias = rng.integers(-3000, 3000, M)
    mult = rng.integers(1 << 14, 1 << 15, M)
    shift = rng.integers(10, 16, M)
    zp_in, zp_out = 5, -3
    program, (Ho, Wo) = conv_program(C, H, W, M, k, pad, zp_in, zp_out, config.rows, lanes)
    machine = Machine(config)
    machine.program[:len(program)] = [encode(i) for i in program]
    groups, K = -(-M // config.rows), C * k * k
    padded = np.zeros((groups * config.rows, K), np.int8)
    padded[:M] = w.reshape(M, K)
    machine.weights[:groups * K] = padded.reshape(groups, config.rows, K).transpose(0, 2, 1).reshape(-1, config.rows)
    machine.params[:M] = [pack_param(int(b), int(m), int(s)) for b, m, s in zip(bias, mult, shift)]
    out = np.frombuffer(machine.run(x.tobytes()), np.int8).reshape(M, Ho, Wo)
    np.testing.assert_array_equal(out, reference_conv(x, w, bias, mult, shift, zp_in, zp_out, pad))


def test_diagonal_conv_is_a_depthwise_conv():
    """CONV diagonal: one weight word per kernel position, row i weighting only channel i of the
    walk, over C = 6 channels in groups of rows = 4 (IN_GSTEP steps to a group's channels); the
    same program without the mode, on a configuration without it, is refused."""
    config = AcceleratorConfig(rows=4, cols=8, diagonal_weights=True)
    rng = np.random.default_rng(7)
    C, H, W, k, pad, rows = 6, 5, 6, 3, 1, config.rows
    x = rng.integers(-128, 128, (C, H, W)).astype(np.int8)
    w = rng.integers(-127, 128, (C, 1, k, k)).astype(np.int8)
    bias, mult, shift = rng.integers(-3000, 3000, C), rng.integers(1 << 14, 1 << 15, C), rng.integers(10, 16, C)
    program, (Ho, Wo) = conv_program(C, H, W, C, k, pad, 5, -3, rows, 8)
    regs = {Reg.K_C: rows, Reg.W_GSTEP: k * k}
    conv = next(i for i, instruction in enumerate(program) if instruction.opcode is Opcode.CONV)
    cstride = next(p.value for p in program[:conv] if p.opcode is Opcode.SET and p.reg is Reg.IN_CSTRIDE)
    regs[Reg.IN_GSTEP] = rows * cstride
    program[conv:conv + 1] = [Instruction(Opcode.SET, reg, value) for reg, value in regs.items()] + \
        [Instruction(Opcode.CONV, diagonal=True)]
    machine = Machine(config)
    machine.program[:len(program)] = [encode(i) for i in program]
    words = np.zeros((2, k, k, rows), np.int8)          # group g, word (ky, kx), row i: channel g*rows + i
    for m in range(C):
        words[m // rows, :, :, m % rows] = w[m, 0]
    machine.weights[:words.size // rows] = words.reshape(-1, rows)
    machine.params[:C] = [pack_param(int(b), int(m), int(s)) for b, m, s in zip(bias, mult, shift)]
    # The last group also walks channels 6 and 7, past the map, which rows 2 and 3 (zero
    # weights, outputs past M) weight only.
    out = np.frombuffer(machine.run(x.tobytes()), np.int8).reshape(C, Ho, Wo)
    expected = np.concatenate([reference_conv(x[c:c + 1], w[c:c + 1], bias[c:c + 1], mult[c:c + 1],
                                              shift[c:c + 1], 5, -3, pad) for c in range(C)])
    np.testing.assert_array_equal(out, expected)
    plain = Machine(config.replace(diagonal_weights=False))
    plain.program[:len(program)] = [encode(i) for i in program]
    with pytest.raises(IsaError, match="no diagonal weight mode"):
        plain.run(x.tobytes())


@pytest.mark.parametrize("mode, bit, refusal", [("pool", 0b10, "no pooled writes"),
                                              ("packed", 0b100, "no packed weights"),
                                              ("binary", 0b1000, "no binary weights")])
def test_conv_mode_encoding_and_refusal(mode, bit, refusal):
    """CONV pool is operand bit 1, CONV packed bit 2 and CONV binary bit 3 (beside diagonal's
    bit 0), printed as such; a configuration without fused_max_pool, packed_weights or
    binary_weights refuses them."""
    for diagonal, on in ((False, True), (True, True), (True, False)):
        instruction = Instruction(Opcode.CONV, diagonal=diagonal, **{mode: on})
        assert decode(encode(instruction)) == instruction
    assert encode(Instruction(Opcode.CONV, **{mode: True})) & 0b1111 == bit
    assert str(Instruction(Opcode.CONV, diagonal=True, **{mode: True})) == f"CONV diagonal {mode}"
    with pytest.raises(ValueError, match=f"POOL has no {mode} mode"):
        encode(Instruction(Opcode.POOL, **{mode: True}))
    machine = Machine(AcceleratorConfig(rows=4, cols=2))
    machine.program[:2] = [encode(Instruction(Opcode.CONV, **{mode: True})), encode(Instruction(Opcode.END))]
    with pytest.raises(IsaError, match=f"^CONV {mode} at 0: the 4x2 configuration has {refusal}"):
        machine.run(b"")


def test_conv_packed_and_binary_at_once_is_refused():
    machine = Machine(AcceleratorConfig(rows=4, cols=2, packed_weights=True, binary_weights=True))
    machine.program[:2] = [encode(Instruction(Opcode.CONV, packed=True, binary=True)),
                           encode(Instruction(Opcode.END))]
    with pytest.raises(IsaError, match="^CONV at 0: packed and binary at once$"):
        machine.run(b"")


def test_pair_products_read_two_channels_a_word_and_refuse_weights_past_k_c():
    """With pair products a word holds channels 2c' and 2c' + 1 of a kernel position, each row's
    two bytes side by side: the same convolution as the reference. With an odd K_C the last
    pair's odd half is past K_C (its lanes do not read, the array multiplies a stale byte),
    so a non-zero weight byte there is a program error, not a result."""
    config = AcceleratorConfig(rows=2, cols=8, pair_products=True)
    rng = np.random.default_rng(11)
    C, H, W, M, k, pad, rows = 3, 5, 6, 3, 3, 1, config.rows
    x = rng.integers(-128, 128, (C, H, W)).astype(np.int8)
    w = rng.integers(-127, 128, (M, C, k, k)).astype(np.int8)
    bias, mult, shift = rng.integers(-3000, 3000, M), rng.integers(1 << 14, 1 << 15, M), rng.integers(10, 16, M)
    program, (Ho, Wo) = conv_program(C, H, W, M, k, pad, 5, -3, rows, 8)
    words_per_group = 2 * k * k                       # ceil(3 / 2) channel pairs x positions
    conv = next(i for i, instruction in enumerate(program) if instruction.opcode is Opcode.CONV)
    program.insert(conv, Instruction(Opcode.SET, Reg.W_GSTEP, words_per_group))
    groups = -(-M // rows)
    words = np.zeros((groups, 2, k, k, rows, 2), np.int8)     # group, pair, ky, kx, row, half
    for m in range(M):
        for c in range(C):
            words[m // rows, c // 2, :, :, m % rows, c % 2] = w[m, c]
    machine = Machine(config)
    machine.program[:len(program)] = [encode(i) for i in program]
    machine.weights[:groups * words_per_group] = words.reshape(-1, 2 * rows)
    machine.params[:M] = [pack_param(int(b), int(m), int(s)) for b, m, s in zip(bias, mult, shift)]
    out = np.frombuffer(machine.run(x.tobytes()), np.int8).reshape(M, Ho, Wo)
    np.testing.assert_array_equal(out, reference_conv(x, w, bias, mult, shift, 5, -3, pad))
    machine.weights[k * k + 4, 2 * 1 + 1] = 1        # group 0, pair 1, position 4, row 1, odd half
    machine.act[:] = 0
    with pytest.raises(IsaError, match="channel K_C = 3 .* not zero"):
        machine.run(x.tobytes())


def test_encoding_round_trips():
    for instruction in [Instruction(Opcode.SET, Reg.QUANT, 0xFF80FF), Instruction(Opcode.LOOP, target=513),
                        Instruction(Opcode.CONV), Instruction(Opcode.CONV, diagonal=True),
                        Instruction(Opcode.END)]:
        assert decode(encode(instruction)) == instruction
    assert unpack_param(pack_param(-5, 1 << 14, 62)) == (-5, 1 << 14, 62)


def test_encoding_is_the_layouts():
    """encode, decode, pack_param and unpack_param agree with the amaranth.lib.data layouts
    that the gateware reads."""
    assert INSTRUCTION_BITS == INSTRUCTION_LAYOUT.size == 64
    cases = [
        (Instruction(Opcode.SET, Reg.LOOP_COUNT, -5), {"set": {"reg": Reg.LOOP_COUNT, "value": 2**32 - 5}}),
        (Instruction(Opcode.SET, Reg.QUANT, 0xFF80FF), {"set": {"reg": Reg.QUANT, "value": 0xFF80FF}}),
        (Instruction(Opcode.LOOP, target=0xFFFF), {"loop": {"target": 0xFFFF}}),
        (Instruction(Opcode.STAMP), {}),
        (Instruction(Opcode.CONV, diagonal=True), {"conv": {"diagonal": 1}}),
    ]
    for instruction, operand in cases:
        word = encode(instruction)
        assert word == INSTRUCTION_LAYOUT.const({"opcode": instruction.opcode, "operand": operand}).as_value().value
        fields = INSTRUCTION_LAYOUT.from_bits(word)
        assert fields.opcode == instruction.opcode
        if instruction.opcode is Opcode.SET:
            assert (fields.operand.set.reg, fields.operand.set.value) == (instruction.reg, instruction.value % 2**32)
        if instruction.opcode is Opcode.LOOP:
            assert fields.operand.loop.target == instruction.target
    params = {"fpganet": [(-5, 1 << 14, 62), (2**31 - 1, 2**15 - 1, 1), (-2**31, 20000, 31)],
              "tflite": [(-5, 1 << 30, -31), (2**27 - 1, 2**31 - 1, 30), (-2**27, 1234567890, 0)]}
    for mode, cases in params.items():
        layout, top = PARAM_LAYOUTS[mode], TFLITE_MULT_TOP if mode == "tflite" else 0
        for bias, mult, shift in cases:
            word = pack_param(bias, mult, shift, mode)
            stored = {"bias": bias, "mult": mult - top, "shift": shift}
            assert word == layout.const(stored).as_value().value
            entry = layout.from_bits(word)
            assert (entry.bias, entry.mult + top, entry.shift) == (bias, mult, shift)
            assert unpack_param(word, mode) == (bias, mult, shift)
    for mode, (bias, mult, shift) in [("tflite", (2**27, 1 << 30, 0)), ("tflite", (0, 1 << 31, 0)),
                                      ("tflite", (0, 1 << 30, 31)), ("fpganet", (0, 1 << 15, 1))]:
        with pytest.raises(ValueError, match=f"outside the {mode} parameter entry"):
            pack_param(bias, mult, shift, mode)
    with pytest.raises(ValueError, match="does not fit 32 bits"):
        encode(Instruction(Opcode.SET, Reg.IN_BASE, 1 << 32))
    with pytest.raises(ValueError, match="does not fit 16 bits"):
        encode(Instruction(Opcode.LOOP, target=1 << 16))


def test_program_errors_are_reported():
    machine = Machine(AcceleratorConfig())
    machine.program[0] = encode(Instruction(Opcode.LOOP, target=0))
    machine.program[1] = encode(Instruction(Opcode.END))
    assert machine.run() == b""  # LOOP_COUNT 0: falls through
    for reg in (Reg.IO_CHANNELS, Reg.IO_ROWS, Reg.IO_LEN):
        machine.regs[reg] = 1
    machine.program[0] = encode(Instruction(Opcode.INPUT))
    with pytest.raises(IsaError, match="INPUT wants"):
        machine.run(b"")


def test_counts_beyond_the_hardware_registers_are_refused():
    """A count the hardware would hold modulo its count_width bits (14 with 8 KiB of
    activations), or a LOOP_COUNT beyond 16 bits, is an error, not a silently different run."""
    machine = Machine(AcceleratorConfig())
    for reg in (Reg.IO_CHANNELS, Reg.IO_ROWS):
        machine.regs[reg] = 1
    machine.regs[Reg.IO_LEN] = 1 << 14
    machine.program[0] = encode(Instruction(Opcode.FILL))
    machine.program[1] = encode(Instruction(Opcode.END))
    with pytest.raises(IsaError, match=r"^FILL: IO_LEN = 16,384 is beyond the hardware's 14-bit counts"):
        machine.run()
    machine.regs[Reg.IO_LEN] = (1 << 14) - 1
    assert machine.run() == b""
    machine.regs[Reg.LOOP_COUNT] = 1 << 16
    machine.program[0] = encode(Instruction(Opcode.LOOP, target=0))
    with pytest.raises(IsaError, match=r"^LOOP: LOOP_COUNT = 65,536 is beyond the hardware's 16-bit"):
        machine.run()


def test_packed_nibbles_keep_their_signs():
    """The nibbles round-trip with their signs, -8 and 7 included (an odd block's last high
    nibbles 0), and a weight outside 4 bits is not packed."""
    words = np.array([[-8, 7, 0], [1, -1, 5], [-3, 2, -8]], np.int8)
    packed = pack_nibbles(words)
    assert packed.shape == (2, 3)
    assert packed.view(np.uint8)[0].tolist() == [0x18, 0xF7, 0x50]
    np.testing.assert_array_equal(unpack_nibbles(packed), np.concatenate([words, np.zeros((1, 3), np.int8)]))
    with pytest.raises(ValueError, match=r"packed weights must lie in -8\.\.7, not -9\.\.6"):
        pack_nibbles(words - 1)


def test_binary_signs_round_trip_a_bit_a_beat():
    """Beat w's weights in bit w % 8 of word w // 8's bytes, 1 for +1 (a short block's last bits
    0, read back as -1); a weight other than -1 and +1 is refused."""
    words = np.array([[1, -1], [-1, -1], [1, 1], [1, -1], [-1, 1], [1, 1], [-1, -1], [1, -1],
                      [-1, 1]], np.int8)
    signs = pack_signs(words)
    assert signs.shape == (2, 2)
    assert signs.view(np.uint8).tolist() == [[0b10101101, 0b00110100], [0, 1]]
    np.testing.assert_array_equal(unpack_signs(signs)[:9], words)
    assert (unpack_signs(signs)[9:] == -1).all()
    with pytest.raises(ValueError, match=r"^binary weights must be -1 or \+1, not \[0\]$"):
        pack_signs(np.where(words > 0, words, 0))


@pytest.mark.parametrize("config", [AcceleratorConfig(rows=2, cols=8, binary_weights=True),
                                    AcceleratorConfig(rows=4, cols=4, pair_products=True,
                                                      packed_weights=True, binary_weights=True,
                                                      fused_max_pool=True)],
                         ids=["2x8", "4x4-pairs-packed-pooled"])
def test_binary_layers_take_an_eighth_of_the_weight_words_and_compute_the_same(config):
    """Every conv and dense layer's weights -1 or +1: each such step is CONV binary unless pair
    products would read a zero weight byte (an odd number of channels in the walk), its
    weight words an eighth (rounded up per block) of a byte a weight's; none is fused with a
    max-pool; the ISA simulator's outputs equal the golden model's."""
    rng = np.random.default_rng(5)
    checked = binary = 0
    for index in range(24):
        net = random_graph_network(rng, config) if index % 2 else random_network(rng, config)
        net = signed_weights(net, rng)
        try:
            images = build_images(net, 2, config)
        except FpganetError:
            continue                            # does not fit: drawn for another configuration
        steps = plan_network(net, config).steps
        for step in steps:
            signs = step.kind in ("conv", "dense") and set(np.unique(step.layer.weight)) <= {-1, 1}
            odd = config.pair_products and step.walk[0] % 2
            assert step.binary == bool(signs and not odd and not step.pooled)
            assert not (step.binary and step.pooled)
            if step.binary:
                beats = step.block_beats(config)
                assert step.group_words(config) == -(-beats // 8)
        assert any(i.binary for i in map(decode, images.program)) == any(s.binary for s in steps)
        binary += sum(step.binary for step in steps)
        q_in = rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8)
        np.testing.assert_array_equal(run_isa(net, q_in, images=images)[0], run_golden(net, q_in))
        checked += 1
    assert checked >= 8 and binary >= 8


@pytest.mark.parametrize("config", [AcceleratorConfig(rows=2, cols=8, packed_weights=True),
                                    AcceleratorConfig(rows=4, cols=4, pair_products=True,
                                                      diagonal_weights=True, packed_weights=True)],
                         ids=["2x8", "4x4-pairs-diagonal"])
def test_packed_layers_take_half_the_weight_words_and_compute_the_same(config):
    """Every conv of a random network narrowed to 4-bit weights: each step of the compile is
    CONV packed, its weight words half (rounded up per block) of the unpacked compile's, and
    the ISA simulator's outputs equal the golden model's, as they do unpacked."""
    rng = np.random.default_rng(3)
    checked = 0
    for index in range(24):
        net = random_graph_network(rng, config) if index % 2 else random_network(rng, config)
        net.layers = [dataclasses.replace(layer, weight=np.clip(layer.weight, -7, 7), weight_bits=4)
                      if isinstance(layer, QConv) else layer for layer in net.layers]
        try:
            packed = build_images(net, 2, config)
        except FpganetError:
            continue                            # does not fit: drawn for another configuration
        plain = build_images(net, 2, config.replace(packed_weights=False))
        steps = plan_network(net, config).steps
        assert [step.packed for step in steps] == [isinstance(step.layer, QConv) for step in steps]
        assert any(i.packed for i in map(decode, packed.program)) == any(s.packed for s in steps)
        for step in steps:
            if step.packed:
                beats = step.block_beats(config)
                blocks = step.weight_words(config) // step.group_words(config)
                assert step.group_words(config) == (beats + 1) // 2
                assert step.weight_words(config) == blocks * ((beats + 1) // 2)
        if any(step.packed for step in steps):
            assert len(packed.weights) < len(plain.weights)
        q_in = rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8)
        expected = run_golden(net, q_in)
        np.testing.assert_array_equal(run_isa(net, q_in, images=packed)[0], expected)
        np.testing.assert_array_equal(run_isa(net, q_in, images=plain)[0], expected)
        checked += 1
    assert checked >= 12


def test_ternary_pairs_compute_ternary_weights_and_refuse_others():
    """With ternary_pairs the array multiplies weights of -1, 0 and +1 only: a ternary network
    runs as on the pair array; the compiler refuses an int8 one in one line, and a weight
    outside -1..1 in the memory image is a program error, not a result."""
    from fpganet.codegen.fuzz import ternary_weights

    pairs = AcceleratorConfig(rows=4, cols=2, pair_products=True, weight_buffer_bytes=1 << 16)
    ternary = pairs.replace(ternary_pairs=True)
    rng = np.random.default_rng(5)
    net = random_network(rng, pairs)
    with pytest.raises(FpganetError, match="ternary pairs multiply -1, 0 and \\+1 only"):
        build_images(net, 1, ternary)
    net = ternary_weights(net, rng)
    q_in = rng.integers(-128, 128, (2, *net.input_chw)).astype(np.int8)
    images = build_images(net, 2, ternary)
    np.testing.assert_array_equal(run_isa(net, q_in, images=images)[0], run_golden(net, q_in))
    images.weights[:] = 2          # every weight 2: not what the array multiplies
    with pytest.raises(IsaError, match="weight 2 outside -1..1"):
        run_isa(net, q_in, images=images)
