"""Hand-written accelerator programs for the hardware tests: conv, pool, dense, LeNet-like.

:class:`ProgramBuilder` emits SET/opcode sequences from feature-map descriptions
(:class:`FMap`) and collects the weight and parameter images, so that tests can
run the same program on the ISA simulator, the perf model and the RTL.
"""

from dataclasses import dataclass

import numpy as np

from fpganet.config import AcceleratorConfig
from fpganet.isa import HostSpace, Instruction, Opcode, Reg, encode, pack_param
from fpganet.isasim import Machine


@dataclass(frozen=True)
class FMap:
    """A stored (padded) feature map: element (c, y, x) of the padded map at
    ``base + c*cstride + y*pitch + x``; ``pad = (top, left, bottom, right)``."""
    base: int
    C: int
    H: int
    W: int
    pitch: int = None
    cstride: int = None
    pad: tuple = (0, 0, 0, 0)

    def __post_init__(self):
        if self.pitch is None:
            object.__setattr__(self, "pitch", self.padded_w)
        if self.cstride is None:
            object.__setattr__(self, "cstride", self.padded_h * self.pitch)

    @property
    def padded_h(self):
        return self.H + self.pad[0] + self.pad[2]

    @property
    def padded_w(self):
        return self.W + self.pad[1] + self.pad[3]

    @property
    def interior(self):
        """Address of element (0, 0, 0) of the unpadded map."""
        return self.base + self.pad[0] * self.pitch + self.pad[1]

    @property
    def end(self):
        return self.base + (self.C - 1) * self.cstride + self.padded_h * self.pitch


def scale_shift(K, target=50.0, x_abs=64.0, w_abs=64.0):
    """A shift that maps a K-term dot product of typical magnitudes to about ``target``."""
    typical = np.sqrt(K) * x_abs * w_abs * (1 << 14)
    return int(np.clip(np.round(np.log2(typical / target)), 1, 62))


class ProgramBuilder:
    """Builds a program plus its weight and parameter images for one configuration."""

    def __init__(self, config=None, rng=None):
        self.config = config or AcceleratorConfig()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.program = []
        self.weights = []          # arrays [words, rows]
        self.params = []           # uint64 entries
        self.weight_words = 0
        self.regs = {}

    # -- raw instructions ---------------------------------------------------------------
    def set(self, reg, value):
        self.program.append(Instruction(Opcode.SET, reg, int(value) & 0xFFFF_FFFF))
        self.regs[reg] = value

    def sets(self, **values):
        for name, value in values.items():
            self.set(Reg[name.upper()], value)

    def op(self, opcode, target=0):
        self.program.append(Instruction(opcode, target=target) if opcode is Opcode.LOOP else Instruction(opcode))

    @property
    def here(self):
        return len(self.program)

    # -- regions ------------------------------------------------------------------------
    def region(self, opcode, base, channels, cstride, rows, pitch, length, value=None):
        self.sets(io_base=base, io_channels=channels, io_cstride=cstride, io_rows=rows, io_pitch=pitch,
                  io_len=length)
        if value is not None:
            self.set(Reg.FILL_VALUE, value & 0xFF)
        self.op(opcode)

    def fill_map(self, fmap, value):
        """FILL the whole padded map."""
        self.region(Opcode.FILL, fmap.base, fmap.C, fmap.cstride, fmap.padded_h, fmap.pitch, fmap.padded_w, value)

    def input_map(self, fmap):
        """INPUT the interior, C x H x W bytes."""
        self.region(Opcode.INPUT, fmap.interior, fmap.C, fmap.cstride, fmap.H, fmap.pitch, fmap.W)

    def output_map(self, fmap):
        self.region(Opcode.OUTPUT, fmap.interior, fmap.C, fmap.cstride, fmap.H, fmap.pitch, fmap.W)

    # -- engine -------------------------------------------------------------------------
    def _walk(self, inp, out, kh, kw, sy, sx, lanes):
        Ho = (inp.padded_h - kh) // sy + 1
        Wo = (inp.padded_w - kw) // sx + 1
        assert (Ho, Wo) == (out.H, out.W), f"output map {out.H}x{out.W}, expected {Ho}x{Wo}"
        npix = Ho * Wo
        lanes = lanes or min(self.config.cols, npix)
        self.sets(in_base=inp.base, in_pitch=inp.pitch, in_cstride=inp.cstride, k_h=kh, k_w=kw,
                  in_rowstep=sy * inp.pitch, stride_x=sx, out_w=Wo, npix=npix, lanes=lanes, tiles=-(-npix // lanes),
                  out_base=out.interior, out_pitch=out.pitch, out_cstride=out.cstride)

    def conv(self, inp, out, w, bias=None, mult=None, shift=None, *, stride=(1, 1), zp_out=0, lo=-128,
             hi=127, lanes=None):
        """CONV: ``w`` int8 [M, C, kh, kw]; ``inp`` stored padded; results into ``out``'s interior."""
        rows = self.config.rows
        M, C, kh, kw = w.shape
        assert C == inp.C and M == out.C
        K = C * kh * kw
        rng = self.rng
        bias = rng.integers(-2000, 2000, M) if bias is None else np.asarray(bias)
        step = self.config.mult_step        # the top requant_mult_bits bits only
        mult = rng.integers(1 << 14, 1 << 15, M) // step * step if mult is None else np.asarray(mult)
        shift = np.full(M, scale_shift(K)) if shift is None else np.asarray(shift)
        groups = -(-M // rows)
        padded = np.zeros((groups * rows, K), np.int8)
        padded[:M] = w.reshape(M, K)
        words = padded.reshape(groups, rows, K).transpose(0, 2, 1).reshape(-1, rows)
        w_base, p_base = self.weight_words, len(self.params)
        self.weights.append(words)
        self.weight_words += len(words)
        self.params += [pack_param(int(b), int(m), int(s)) for b, m, s in zip(bias, mult, shift)]
        self._walk(inp, out, kh, kw, *stride, lanes)
        self.sets(in_gstep=0, k_c=C, groups=groups, m=M, out_gstep=rows * out.cstride, w_base=w_base,
                  w_gstep=K, p_base=p_base, quant=(zp_out & 0xFF) | (lo & 0xFF) << 8 | (hi & 0xFF) << 16)
        self.op(Opcode.CONV)

    def dense(self, inp, out_base, w, **options):
        """A dense layer: CONV whose kernel is the whole stored input map, one pixel, one lane."""
        M = w.shape[0]
        w4 = w.reshape(M, inp.C, inp.H, inp.W)
        unpadded = FMap(inp.interior, inp.C, inp.H, inp.W, inp.pitch, inp.cstride)
        out = FMap(out_base, M, 1, 1, 1, 1)
        self.conv(unpadded, out, w4, lanes=1, **options)
        return out

    def pool(self, inp, out, k, stride, lanes=None):
        """POOL (max) over k x k windows; one group per channel."""
        self._walk(inp, out, k, k, stride, stride, lanes)
        self.sets(in_gstep=inp.cstride, k_c=1, groups=inp.C, out_gstep=out.cstride)
        self.op(Opcode.POOL)

    # -- result -------------------------------------------------------------------------
    def words(self):
        return [encode(instruction) for instruction in self.program]

    def images(self):
        config = self.config
        program = np.zeros(config.program_words, np.uint64)
        words = self.words()
        assert len(words) <= config.program_words
        program[:len(words)] = words
        weights = np.zeros((config.weight_buffer_words, config.rows), np.int8)
        if self.weights:
            stacked = np.concatenate(self.weights)
            weights[:len(stacked)] = stacked
        params = np.zeros(config.bias_buffer_words, np.uint64)
        params[:len(self.params)] = self.params
        return {HostSpace.PROGRAM: program, HostSpace.WEIGHTS: weights, HostSpace.PARAMS: params,
                HostSpace.ACTIVATIONS: np.zeros(config.act_buffer_bytes, np.int8)}

    def machine(self):
        images = self.images()
        return Machine(self.config, program=images[HostSpace.PROGRAM].copy(),
                       weights=images[HostSpace.WEIGHTS].copy(), params=images[HostSpace.PARAMS].copy(),
                       act=images[HostSpace.ACTIVATIONS].copy())


def random_weights(rng, *shape):
    return rng.integers(-127, 128, shape).astype(np.int8)


def conv_layer_program(config, C, H, W, M, k, pad, *, stride=1, lanes=None, pitch=None, seed=0,
                       zp_in=5, zp_out=-3, relu=False):
    """FILL, INPUT, one CONV, OUTPUT, END. Returns ``(builder, input_bytes)``."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(config, rng)
    inp = FMap(0, C, H, W, pitch=pitch, pad=(pad, pad, pad, pad))
    Ho, Wo = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    out = FMap(inp.end + 16, M, Ho, Wo)
    assert out.end <= config.act_buffer_bytes
    b.fill_map(inp, zp_in)
    b.input_map(inp)
    b.conv(inp, out, random_weights(rng, M, C, k, k), stride=(stride, stride), zp_out=zp_out,
           lo=zp_out if relu else -128, lanes=lanes)
    b.output_map(out)
    b.op(Opcode.END)
    return b, rng.integers(-128, 128, C * H * W).astype(np.int8).tobytes()


def pool_layer_program(config, C, H, W, k, stride, *, pad=0, lanes=None, pitch=None, seed=0):
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(config, rng)
    inp = FMap(0, C, H, W, pitch=pitch, pad=(pad, pad, pad, pad))
    Ho, Wo = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    out = FMap(inp.end + 8, C, Ho, Wo)
    b.fill_map(inp, -128)
    b.input_map(inp)
    b.pool(inp, out, k, stride, lanes)
    b.output_map(out)
    b.op(Opcode.END)
    return b, rng.integers(-128, 128, C * H * W).astype(np.int8).tobytes()


def lenet_program(config, images=2, *, seed=0, stamps=True):
    """A LeNet-5-shaped network (random weights) over ``images`` inputs with LOOP and STAMP.

    Layout (8 KiB buffer): conv1 input 1x32x32 padded, pitch 36 (conflict-free
    for 28-wide output rows on 8 banks); conv1 out 6x28x28; pool1 out 6x14x14
    pitch 18 (conflict-free for conv2's 10-wide rows); conv2 out 16x10x10;
    pool2 out 16x5x5; dense 400-120-84-10. Per image: OUTPUT 10 bytes, STAMP.
    Returns ``(builder, input_bytes)``.
    """
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(config, rng)
    x = FMap(0, 1, 28, 28, pitch=36, pad=(2, 2, 2, 2))
    c1 = FMap(x.end, 6, 28, 28)
    p1 = FMap(c1.end, 6, 14, 14, pitch=18)
    c2 = FMap(c1.base, 16, 10, 10)
    p2 = FMap(c2.end, 16, 5, 5)
    assert p1.end <= config.act_buffer_bytes
    zp = -128
    b.fill_map(x, -7)
    if stamps:
        b.op(Opcode.STAMP)
    b.set(Reg.LOOP_COUNT, images - 1)
    top = b.here
    b.input_map(x)
    b.conv(x, c1, random_weights(rng, 6, 1, 5, 5), zp_out=zp, lo=zp)
    b.pool(c1, p1, 2, 2)
    b.conv(p1, c2, random_weights(rng, 16, 6, 5, 5), zp_out=zp, lo=zp)
    b.pool(c2, p2, 2, 2)
    d1 = b.dense(p2, p2.end, random_weights(rng, 120, 400), zp_out=zp, lo=zp)
    d2 = b.dense(d1, d1.end, random_weights(rng, 84, 120), zp_out=zp, lo=zp)
    d3 = b.dense(d2, d2.end, random_weights(rng, 10, 84), zp_out=3)
    b.output_map(d3)
    if stamps:
        b.op(Opcode.STAMP)
    b.op(Opcode.LOOP, target=top)
    b.op(Opcode.END)
    inputs = rng.integers(-128, 128, images * 28 * 28).astype(np.int8).tobytes()
    return b, inputs
