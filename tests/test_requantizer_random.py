"""Randomized amaranth.sim test of the Requantizer against the numerics
contract (``fpganet.quantize.fixed_point.requantize``), streaming one set per cycle with the
extremes of every operand: ``acc + bias`` at both ends of the ``acc_width`` range the
no-overflow rule allows, ``mult`` 0 and ``2^15 - 1`` and every radix-4 digit pattern,
``shift`` 1..62, and bypass.

The ``tflite`` mode's TfliteRequantizer against ``requantize_tflite`` the same way, with
random parameters and the edge cases of TFLite's two roundings (ties of both signs at the
high multiply and at the divide, every exponent, saturation); tests/faults.py's divide
that rounds negative ties toward +inf must fail the same check."""

import functools
import numpy as np
import pytest
from amaranth import Module, Signal, signed
from amaranth.sim import Simulator

from fpganet.config import AcceleratorConfig
from fpganet.hdl.fabric_arith import booth_digits, booth_product, booth_rows
from fpganet.hdl.postproc import (VARIANTS, BoothRequantizer, GenericRequantizer, Ice40DSPRequantizer,
                                  PipelinedBoothRequantizer, Requantizer, SplitProductRequantizer,
                                  TfliteRequantizer, requantizer)
from fpganet.isa import PARAM_LAYOUTS, TFLITE_MULT_TOP
from fpganet.quantize.fixed_point import multiply_tflite, requantize, requantize_tflite

from faults import TiesTowardInfinityDivide

LANES = 2

#: (zp, lo, hi, bypass) of each batch: held per instruction, so one batch each, drained in
#: between; lo > hi gives hi.
HELD = [(0, -128, 127, 0), (-128, -128, 127, 0), (127, -128, 127, 0), (5, -20, 90, 0),
        (-3, 10, -10, 0), (17, -128, 127, 1)]


def contract(total, mult, shift, zp, lo, hi):
    return int(requantize(np.array([[[total]]]), [mult], [shift], zp, lo, hi)[0, 0, 0])


def random_sets(rng, width, count):
    """``count`` sets ``(accs, bias, mult, shift)`` with ``acc + bias`` in ``acc_width`` bits."""
    top = 1 << (width - 1)
    ends = [-top, -top + 1, -1, 0, 1, top - 2, top - 1]
    mults = [0, 1, 2, 3, (1 << 15) - 1, 1 << 14, (1 << 14) - 1, 0x5555, 0x2AAA, 0x6666, 0x1999,
             0x7FFE, 0x6000, 0x3FFF, 0x7777, 0x4BBB]
    sets = []
    for _ in range(count):
        bias = int(rng.choice([0, -top + 1, top - 1, int(rng.integers(-top + 1, top))]))
        accs = []
        for _ in range(LANES):
            total = int(rng.choice(ends)) if rng.random() < 0.4 else int(rng.integers(-top, top))
            accs.append(total - bias)
        # acc itself is an acc_width accumulator: keep it in range too.
        accs = [min(max(acc, -top), top - 1) for acc in accs]
        mult = int(rng.choice(mults)) if rng.random() < 0.3 else int(rng.integers(0, 1 << 15))
        shift = int(rng.choice([1, 2, 15, 30, 38, 39, 40, 61, 62])) if rng.random() < 0.3 \
            else int(rng.integers(1, 63))
        sets.append((accs, bias, mult, shift))
    return sets


@pytest.mark.parametrize("width,latency,multiplier", [
    (24, 4, "generic"), (32, 4, "generic"), (16, 5, "generic"), (24, 5, "generic"), (32, 5, "generic"),
    (16, 4, "booth"), (24, 4, "booth"), (32, 4, "booth"),
    (16, 5, "booth"), (24, 5, "booth"), (32, 5, "booth"),
    (16, 5, "ice40_dsp"), (24, 5, "ice40_dsp"), (31, 5, "ice40_dsp"),
])
def test_requantizer_streams_the_contract(width, latency, multiplier):
    dut = requantizer(AcceleratorConfig(acc_width=width, requant_latency=latency), LANES,
                      multiplier=multiplier, dsp_model=True)
    assert type(dut) is VARIANTS[multiplier, latency] and dut.latency == latency
    rng = np.random.default_rng(width)
    batches = [(*held, random_sets(rng, width, 150)) for held in HELD]
    assert mismatches(dut, batches, contract) == []


def stream(dut, batches, single=False):
    """Stream each batch's sets ``(accs, bias, mult, shift)`` through ``dut``, one per cycle
    under the batch's held ``zp, lo, hi, bypass`` (and ``single``, for the tflite variant);
    the outputs of each batch."""
    got = []

    async def driver(ctx):
        if single:
            ctx.set(dut.single, 1)
        for zp, lo, hi, bypass, sets in batches:
            ctx.set(dut.zp, zp)
            ctx.set(dut.lo, lo)
            ctx.set(dut.hi, hi)
            ctx.set(dut.bypass, bypass)
            outputs = []
            for cycle in range(len(sets) + dut.latency):
                if cycle < len(sets):
                    accs, bias, mult, shift = sets[cycle]
                    ctx.set(dut.i_valid, 1)
                    ctx.set(dut.acc, accs)
                    ctx.set(dut.bias, bias)
                    ctx.set(dut.mult, mult)
                    ctx.set(dut.shift, shift)
                else:
                    ctx.set(dut.i_valid, 0)
                await ctx.tick()
                if ctx.get(dut.o_valid):
                    outputs.append([ctx.get(dut.y[lane]) for lane in range(LANES)])
            got.append(outputs)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.run()
    return got


def mismatches(dut, batches, reference, single=False):
    """The sets of ``batches`` whose bytes from ``dut`` differ from ``reference(total, mult,
    shift, zp, lo, hi)`` (``acc``'s low byte in bypass): ``(set, held, got, wanted)``."""
    wrong = []
    for (zp, lo, hi, bypass, sets), outputs in zip(batches, stream(dut, batches, single)):
        assert len(outputs) == len(sets)
        for (accs, bias, mult, shift), ys in zip(sets, outputs):
            if bypass:
                want = [((acc & 0xFF) ^ 0x80) - 0x80 for acc in accs]
            else:
                want = [reference(acc + bias, mult, shift, zp, lo, hi) for acc in accs]
            if ys != want:
                wrong.append(((accs, bias, mult, shift), (zp, lo, hi, bypass), ys, want))
    return wrong


@pytest.mark.parametrize("multiplier,width,latency,bits", [
    ("shift_add", 24, 4, 1), ("shift_add", 24, 5, 1), ("shift_add", 24, 4, 2),
    ("shift_add", 16, 5, 3), ("shift_add", 24, 5, 4), ("shift_add", 32, 4, 4),
    ("shift_add", 20, 5, 8), ("shift_add", 32, 4, 15), ("shift_add", 24, 5, 15),
    ("generic", 16, 4, 1), ("generic", 24, 4, 3), ("generic", 16, 5, 1), ("generic", 24, 5, 14),
    ("generic", 32, 5, 3)])
def test_narrow_multipliers_stream_the_contract(multiplier, width, latency, bits):
    """The shift-and-add product, and the generic ``*`` and split product by the top bits,
    for multipliers of ``bits`` significant bits (top bit set, the bits below ``15 - bits``
    zero, as the compiler makes them), every digit pattern; widths up to 17 take the split
    product's single ``*``."""
    config = AcceleratorConfig(acc_width=width, requant_latency=latency, requant_mult_bits=bits)
    dut = requantizer(config, LANES, multiplier=multiplier)
    assert type(dut) is VARIANTS[multiplier, latency] and dut.latency == latency
    rng = np.random.default_rng(100 * width + bits)
    step = config.mult_step
    edges = [1 << 14, (1 << 15) - step, ((1 << 14) + step) & 0x7FFF | 1 << 14, 0x5555 | 1 << 14, 0x6AAA]
    batches = []
    for held in HELD:
        sets = []
        for accs, bias, mult, shift in random_sets(rng, width, 150):
            mult = int(rng.choice(edges)) if rng.random() < 0.2 else mult | 1 << 14
            sets.append((accs, bias, mult // step * step, shift))
        batches.append((*held, sets))
    assert mismatches(dut, batches, contract) == []


@pytest.mark.parametrize("width", [16, 24, 32])
@pytest.mark.parametrize("pipelined", [False, True])
def test_booth_product_is_exact(width, pipelined):
    """The radix-4 product tree alone, against Python's product, streaming one pair per
    cycle: the requantized byte above saturates for most products and hides their bits."""
    m = Module()
    x = Signal(signed(width))
    mult = Signal(15)
    product = Signal(signed(width + 15))
    digits = booth_digits(mult)
    rows = [Signal(signed(width + 1), name=f"row{k}") for k in range(len(digits))]
    negs = [Signal(name=f"neg{k}") for k in range(len(digits))]
    m.d.sync += [row.eq(value) for row, value in zip(rows, booth_rows(x, digits))]
    m.d.sync += [neg.eq(digit[2]) for neg, digit in zip(negs, digits)]
    m.d.sync += product.eq(booth_product(m, rows, negs, width + 15, pipelined=pipelined, name="t"))
    latency = 3 if pipelined else 2
    rng = np.random.default_rng(width + pipelined)
    top = 1 << (width - 1)
    xs = [-top, -top + 1, -1, 0, 1, top - 1] + [int(v) for v in rng.integers(-top, top, 400)]
    mults = [0, 1, 2, 3, (1 << 15) - 1, 0x5555, 0x2AAA, 0x6666, 0x7FFE, 0x6000, 0x3FFF] \
        + [int(v) for v in rng.integers(0, 1 << 15, 400)]
    pairs = [(a, b) for a in xs[:6] for b in mults[:11]] + list(zip(xs, mults))
    got = []

    async def driver(ctx):
        for cycle in range(len(pairs) + latency):
            if cycle < len(pairs):
                ctx.set(x, pairs[cycle][0])
                ctx.set(mult, pairs[cycle][1])
            await ctx.tick()
            if cycle + 1 >= latency:
                got.append(ctx.get(product))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.run()
    assert got[:len(pairs)] == [a * b for a, b in pairs]


def test_requantizer_variants_state_their_latency():
    """One component per product, each with its latency; requantizer() picks the one the
    configuration asks for, and the checks name what is wrong."""
    assert [(cls.__name__, cls.latency) for cls in VARIANTS.values()] == [
        ("GenericRequantizer", 4), ("SplitProductRequantizer", 5), ("BoothRequantizer", 4),
        ("PipelinedBoothRequantizer", 5), ("Ice40DSPRequantizer", 5), ("ShiftAddRequantizer", 4),
        ("PipelinedShiftAddRequantizer", 5), ("TfliteRequantizer", 6)]
    for (multiplier, latency), cls in VARIANTS.items():
        config = AcceleratorConfig(acc_width=24, requant_latency=latency,
                                   requant_mode=cls.requant_mode)
        assert type(requantizer(config, 2, multiplier=multiplier)) is cls
        assert cls(config, 2).latency == latency
    assert requantizer(AcceleratorConfig(acc_width=24, requant_latency=5), multiplier="ice40_dsp",
                       dsp_model=True).model
    with pytest.raises(ValueError, match=r"^multiplier must be one of \('generic', 'booth', "
                                         r"'ice40_dsp', 'shift_add'\), not 'dsp'$"):
        requantizer(AcceleratorConfig(), multiplier="dsp")
    with pytest.raises(ValueError, match="^multiplier 'ice40_dsp' needs requant_latency 5, not 4$"):
        requantizer(AcceleratorConfig(), multiplier="ice40_dsp")
    with pytest.raises(TypeError, match="^config must be an AcceleratorConfig, not None$"):
        requantizer(None)
    with pytest.raises(ValueError, match="^BoothRequantizer has latency 4: it needs "
                                         "requant_latency 4, not 5$"):
        BoothRequantizer(AcceleratorConfig(requant_latency=5))
    with pytest.raises(ValueError, match="^lanes must be a positive integer, not 0$"):
        GenericRequantizer(AcceleratorConfig(), 0)
    with pytest.raises(ValueError, match="^Ice40DSPRequantizer takes acc_width up to 31, not 32$"):
        Ice40DSPRequantizer(AcceleratorConfig(requant_latency=5))
    with pytest.raises(TypeError, match="^Requantizer is the variants' base"):
        Requantizer(AcceleratorConfig())


# The tflite requantization mode ---------------------------------------------------------------

TFLITE = AcceleratorConfig().replace(requant_mode="tflite")


def tflite_contract(total, mult, shift, zp, lo, hi, single=False):
    """``requantize_tflite`` of one value; ``mult`` as the port takes it, ``M - 2**30``."""
    return int(requantize_tflite(np.array([[[total]]]), [TFLITE_MULT_TOP + mult], [shift],
                                 zp, lo, hi, single)[0, 0, 0])


def tflite_set(totals, bias, M, shift, width):
    """A set for the ports: ``acc = total - bias`` (``bias`` 0 where that leaves ``acc_width``
    bits), ``mult = M - 2**30``."""
    assert TFLITE_MULT_TOP <= M < 2 * TFLITE_MULT_TOP and -31 <= shift <= 30
    top = 1 << (width - 1)
    if any(not -top <= total - bias < top for total in totals):
        bias = 0
    return [total - bias for total in totals], bias, M - TFLITE_MULT_TOP, shift


def tflite_random_sets(rng, width, count):
    """``count`` random sets: ``shift`` in -31..30, ``acc + bias`` within ``acc_width`` bits and
    shifted left by ``max(shift, 0)`` within int32, a third of them at those ends."""
    bias_top = 1 << 27
    sets = []
    for _ in range(count):
        shift = int(rng.integers(-31, 31))
        top = min(1 << (width - 1), 1 << (31 - max(shift, 0)))
        ends = [-top, -top + 1, -1, 0, 1, top - 1]
        totals = [int(rng.choice(ends)) if rng.random() < 0.3 else int(rng.integers(-top, top))
                  for _ in range(LANES)]
        bias = int(rng.choice([0, -bias_top, bias_top - 1, int(rng.integers(-bias_top, bias_top))]))
        M = int(rng.choice([TFLITE_MULT_TOP, 2 * TFLITE_MULT_TOP - 1])) if rng.random() < 0.2 \
            else int(rng.integers(TFLITE_MULT_TOP, 2 * TFLITE_MULT_TOP))
        sets.append(tflite_set(totals, bias, M, shift, width))
    return sets


def tflite_edge_sets(width):
    """The cases each rounding turns on, a different channel's parameters every cycle."""
    sets = []
    # Ties at the high multiply: x * M = odd * 2**30, for shift 0 (no divide) and shifts
    # whose left shift makes them.
    for a in range(0, 12):
        for odd in (1, 3, 5):
            M = ((1 << a) + odd % (1 << a) if a else 1) << (30 - a)     # odd * 2**(30-a)
            for left in range(0, min(a, 3) + 1):
                x = (odd * 2 + 1) << (a - left)         # (x << left) * M = odd' * 2**30
                if x << left < 1 << 31:
                    sets.append(tflite_set([x, -x], 12345, M, left, width))
    # Ties at the divide, both signs: with M = 2**30 and x = 2h, high = h; h = (2k+1) 2**(r-1).
    for right in range(1, 32):
        for k in (0, 1, 2, 7):
            h = (2 * k + 1) << (right - 1)
            if 2 * h < 1 << 31:
                sets.append(tflite_set([2 * h, -2 * h], -777, TFLITE_MULT_TOP, -right, width))
        sets.append(tflite_set([-(1 << 31), (1 << 31) - 2], 0, TFLITE_MULT_TOP, -right, width))
    # Every exponent with small values (the left shift keeps them within int32).
    for shift in range(-31, 31):
        top = 1 << (31 - max(shift, 0))
        for small in (1, 2, 3, 127, 1000):
            x = min(small, top - 1)
            for M in (TFLITE_MULT_TOP, 2 * TFLITE_MULT_TOP - 1, 1518500250):
                sets.append(tflite_set([x, -min(small, top)], 0, M, shift, width))
    # Saturation: the largest products either way, a divide too small to bring them back.
    for shift in (0, 5, -1, -8, -20):
        top = 1 << (31 - max(shift, 0))
        sets.append(tflite_set([top - 1, -top], 1 << 20, 2 * TFLITE_MULT_TOP - 1, shift, width))
    # Values that are not int32 for a narrow accumulator are left out.
    top = 1 << (width - 1)
    return [s for s in sets if all(-top <= acc + s[1] < top for acc in s[0])]


def test_multiply_tflite_edges_are_ties():
    """The edge cases hit what they are named after: exact halves at each rounding."""
    sets = tflite_edge_sets(32)
    high_ties = divide_ties = 0
    for accs, bias, mult, shift in sets:
        for acc in accs:
            x, M = acc + bias, TFLITE_MULT_TOP + mult
            left, right = max(shift, 0), max(-shift, 0)
            high_ties += ((x << left) * M) % (1 << 31) == 1 << 30
            high = int(multiply_tflite(x << left, M, 0))
            divide_ties += right > 0 and high % (1 << right) == 1 << (right - 1) and high < 0
    assert high_ties >= 100 and divide_ties >= 60


@pytest.mark.parametrize("width", [16, 24, 32])
def test_tflite_requantizer_streams_the_contract(width):
    dut = requantizer(TFLITE.replace(acc_width=width), LANES)
    assert type(dut) is TfliteRequantizer and dut.latency == 6
    rng = np.random.default_rng(100 + width)
    edges = tflite_edge_sets(width)
    batches = [(*held, (edges if not held[3] else []) + tflite_random_sets(rng, width, 120))
               for held in HELD]
    assert mismatches(dut, batches, tflite_contract) == []


@pytest.mark.parametrize("width", [24, 32])
def test_tflite_requantizer_rounds_once_when_single(width):
    """``single`` held (QUANT bit 24): TFLite's single-rounding multiply, the same sets."""
    dut = requantizer(TFLITE.replace(acc_width=width), LANES)
    rng = np.random.default_rng(200 + width)
    batches = [(*held, (tflite_edge_sets(width) if not held[3] else [])
                + tflite_random_sets(rng, width, 120)) for held in HELD]
    reference = functools.partial(tflite_contract, single=True)
    assert mismatches(dut, batches, reference, single=True) == []
    # The sets tell the two roundings apart: the double-rounding reference fails here.
    assert mismatches(dut, batches[:1], tflite_contract, single=True) != []


def test_tflite_check_catches_a_divide_rounding_ties_up():
    """tests/faults.py's requantizer, whose divide rounds negative ties toward +inf, fails
    the check above, at the negative ties and nowhere else."""
    batches = [(0, -128, 127, 0, tflite_edge_sets(32))]
    wrong = mismatches(TiesTowardInfinityDivide(TFLITE, LANES), batches, tflite_contract)
    assert len(wrong) > 20
    for (accs, bias, mult, shift), _, ys, want in wrong:
        assert shift < 0
        for acc, y, w in zip(accs, ys, want):
            high = int(multiply_tflite((acc + bias), TFLITE_MULT_TOP + mult, 0))
            assert y == w or (high < 0 and high % (1 << -shift) == 1 << (-shift - 1) and y == w + 1)


def test_requantizer_ports_follow_the_parameter_entry():
    """Each mode's requantizer takes the fields of that mode's parameter entry; a variant
    refuses the other mode's configuration."""
    for config in (AcceleratorConfig(), TFLITE):
        dut = requantizer(config, LANES)
        for name, field in PARAM_LAYOUTS[config.requant_mode]:
            assert getattr(dut, name).shape() == field.shape
    with pytest.raises(ValueError, match="^GenericRequantizer computes the fpganet requantization: "
                                         "it needs requant_mode 'fpganet', not 'tflite'$"):
        GenericRequantizer(TFLITE.replace(requant_latency=6))
    with pytest.raises(ValueError, match="^TfliteRequantizer computes the tflite requantization: "
                                         "it needs requant_mode 'tflite', not 'fpganet'$"):
        TfliteRequantizer(AcceleratorConfig())
    for multiplier in ("booth", "ice40_dsp"):
        with pytest.raises(ValueError, match="^the tflite requantization mode has the generic "
                                             f"multiplier only, not '{multiplier}'$"):
            requantizer(TFLITE, multiplier=multiplier)
