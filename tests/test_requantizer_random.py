"""Randomized amaranth.sim test of the Requantizer against the numerics
contract (``fpganet.quantize.fixed_point.requantize``), streaming one set per cycle with the
extremes of every operand: ``acc + bias`` at both ends of the ``acc_width`` range the
no-overflow rule allows, ``mult`` 0 and ``2^15 - 1`` and every radix-4 digit pattern,
``shift`` 1..62, and bypass."""

import numpy as np
import pytest
from amaranth import Module, Signal, signed
from amaranth.sim import Simulator

from fpganet.config import AcceleratorConfig
from fpganet.hdl.postproc import (VARIANTS, BoothRequantizer, GenericRequantizer, Ice40DSPRequantizer,
                                  PipelinedBoothRequantizer, Requantizer, SplitProductRequantizer,
                                  booth_digits, booth_product, booth_rows, requantizer)
from fpganet.quantize.fixed_point import requantize

LANES = 2


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
    # zp/lo/hi/bypass are held per instruction: one batch each, drained in between.
    batches = [(zp, lo, hi, bypass, random_sets(rng, width, 150))
               for zp, lo, hi, bypass in [(0, -128, 127, 0), (-128, -128, 127, 0), (127, -128, 127, 0),
                                          (5, -20, 90, 0), (-3, 10, -10, 0), (17, -128, 127, 1)]]
    got = []

    async def driver(ctx):
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
    for (zp, lo, hi, bypass, sets), outputs in zip(batches, got):
        assert len(outputs) == len(sets)
        for (accs, bias, mult, shift), ys in zip(sets, outputs):
            if bypass:
                want = [((acc & 0xFF) ^ 0x80) - 0x80 for acc in accs]
            else:
                want = [contract(acc + bias, mult, shift, zp, lo, hi) for acc in accs]
            assert ys == want, (accs, bias, mult, shift, zp, lo, hi)


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
        ("PipelinedBoothRequantizer", 5), ("Ice40DSPRequantizer", 5)]
    for (multiplier, latency), cls in VARIANTS.items():
        config = AcceleratorConfig(acc_width=24, requant_latency=latency)
        assert type(requantizer(config, 2, multiplier=multiplier)) is cls
        assert cls(config, 2).latency == latency
    assert requantizer(AcceleratorConfig(acc_width=24, requant_latency=5), multiplier="ice40_dsp",
                       dsp_model=True).model
    with pytest.raises(ValueError, match=r"^multiplier must be one of \('generic', 'booth', "
                                         r"'ice40_dsp'\), not 'dsp'$"):
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
