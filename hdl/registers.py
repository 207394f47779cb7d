"""The engine registers as the hardware holds them, and address widths shared by the blocks.

``SET`` writes a 32-bit value; the hardware keeps only the bits it uses:

* activation addresses, pitches and strides: :func:`act_addr_width` bits. Every
  activation address is computed modulo the buffer size, and ``a*b mod 2^n``
  depends only on ``a`` and ``b`` mod ``2^n``, so keeping the low bits is exact
  (the ISA's "addresses modulo the buffer sizes") when the buffer size is a power
  of two;
* weight words and parameter entries likewise, in :func:`weight_addr_width` and
  :func:`param_addr_width` bits;
* counts (``K_C, K_H, K_W, OUT_W, NPIX, TILES, GROUPS, M`` and the region counts):
  :data:`COUNT_WIDTH` bits; ``LANES``: enough bits for ``cols``;
* ``QUANT`` 24 bits, ``FILL_VALUE`` 8 bits, ``LOOP_COUNT`` all 32.

A program whose values do not fit (a count of 65,536 or more, ``LANES`` outside
``1..cols``) is outside what the hardware runs; :func:`fpganet.perf.check_registers`
reports it.
"""

from amaranth.lib import data
from amaranth.utils import ceil_log2

from fpganet.isa import Reg

__all__ = ["COUNT_WIDTH", "act_addr_width", "weight_addr_width", "param_addr_width",
           "program_addr_width", "bank_bits", "bank_word_width", "register_widths",
           "register_layout"]

#: Bits of every count register (loop bounds of the engine and of the region instructions).
COUNT_WIDTH = 16


def act_addr_width(config):
    """Bits of an activation byte address."""
    return max(1, ceil_log2(config.act_buffer_bytes))


def weight_addr_width(config):
    """Bits of a weight word address."""
    return max(1, ceil_log2(config.weight_buffer_words))


def param_addr_width(config):
    """Bits of a parameter entry address."""
    return max(1, ceil_log2(config.bias_buffer_words))


def program_addr_width(config):
    """Bits of an instruction address."""
    return max(1, ceil_log2(config.program_words))


def bank_bits(config):
    """Low address bits that select the activation bank (``act_banks`` is a power of two)."""
    return ceil_log2(config.act_banks)


def bank_word_width(config):
    """Bits of a word address inside one activation bank."""
    return max(1, act_addr_width(config) - bank_bits(config))


def lanes_width(config):
    """Bits of ``LANES`` (``1..cols``)."""
    return config.cols.bit_length()


def register_widths(config):
    """``{Reg: bits}``: how many low bits of each register the hardware keeps."""
    aw, ww, pw = act_addr_width(config), weight_addr_width(config), param_addr_width(config)
    widths = {
        Reg.IN_BASE: aw, Reg.IN_PITCH: aw, Reg.IN_CSTRIDE: aw, Reg.IN_GSTEP: aw,
        Reg.K_C: COUNT_WIDTH, Reg.K_H: COUNT_WIDTH, Reg.K_W: COUNT_WIDTH,
        Reg.STRIDE_Y: aw, Reg.STRIDE_X: aw,
        Reg.OUT_W: COUNT_WIDTH, Reg.NPIX: COUNT_WIDTH, Reg.LANES: lanes_width(config),
        Reg.TILES: COUNT_WIDTH, Reg.GROUPS: COUNT_WIDTH, Reg.M: COUNT_WIDTH,
        Reg.OUT_BASE: aw, Reg.OUT_PITCH: aw, Reg.OUT_CSTRIDE: aw, Reg.OUT_GSTEP: aw,
        Reg.W_BASE: ww, Reg.W_GSTEP: ww, Reg.P_BASE: pw, Reg.QUANT: 24,
        Reg.IO_BASE: aw, Reg.IO_CHANNELS: COUNT_WIDTH, Reg.IO_CSTRIDE: aw,
        Reg.IO_ROWS: COUNT_WIDTH, Reg.IO_PITCH: aw, Reg.IO_LEN: COUNT_WIDTH,
        Reg.FILL_VALUE: 8, Reg.LOOP_COUNT: 32,
    }
    assert set(widths) == set(Reg)
    return widths


def register_layout(config):
    """``data.StructLayout`` of the register file, one field per :class:`~fpganet.isa.Reg`
    named in lower case (``in_base``, ``k_c``...)."""
    return data.StructLayout({reg.name.lower(): width for reg, width in register_widths(config).items()})
