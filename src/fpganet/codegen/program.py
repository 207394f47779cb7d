"""Code generation: a :class:`~fpganet.codegen.plan.Plan` into a program and memory images.

The program (docs/reference/architecture.md, "Instruction set")::

    prologue   FILL of every padded map whose bytes nothing else uses (once)
               SET LOOP_COUNT n_images - 1
    loop:      FILL of the borders of padded maps that share bytes (per image), INPUT,
               per layer: SETs, CONV or POOL (borders of a shared map re-filled just before
               its producer), OUTPUT of the last map, STAMP
               LOOP loop
               END

A SET whose register is known to hold the value already is left out (the state at
the loop head is what the prologue and the end of the loop body agree on).

At batch B > 1 (:func:`fpganet.codegen.plan.plan_network`) one pass of the loop is a
group of B images::

    loop:      per image j: INPUT, the layers before the dense ones (the last of them
                            writes image j's copy of the dense layers' input map)
               the dense layers once, one lane per image
               per image j: OUTPUT of image j's outputs, STAMP
               LOOP loop
"""

import numpy as np

from ..errors import FpganetError
from ..isa import Instruction, Opcode, Reg, pack_nibbles, pack_param, pack_quant, pack_signs
from ..qnet import QAvgPool, QConv
from .ir import COUNT_LIMIT

__all__ = ["Emitter", "generate", "Program", "weight_image", "param_image",
           "COUNT_LIMIT"]

REG_LIMIT = 1 << 32
COUNT_REGS = frozenset({Reg.K_C, Reg.K_H, Reg.K_W, Reg.OUT_W, Reg.NPIX, Reg.TILES, Reg.GROUPS,
                        Reg.M, Reg.IO_CHANNELS, Reg.IO_ROWS, Reg.IO_LEN})


class Emitter:
    """Instructions with SETs of already-known register values left out."""

    def __init__(self, known=None, origin=0):
        self.instructions = []
        self.known = dict(known or {})
        self.written = {}
        self.origin = origin

    @property
    def pc(self):
        return self.origin + len(self.instructions)

    def set(self, reg, value, what):
        value = int(value)
        if not 0 <= value < REG_LIMIT:
            raise FpganetError(f"{what}: register {reg.name} would need the value {value:,}, "
                               f"which does not fit its 32 bits")
        if reg in COUNT_REGS and value >= COUNT_LIMIT:
            raise FpganetError(f"{what}: {reg.name} = {value:,} is beyond the hardware's 16-bit "
                               f"counts (at most {COUNT_LIMIT - 1:,})")
        self.written[reg] = value
        if self.known.get(reg) == value:
            return
        self.known[reg] = value
        self.instructions.append(Instruction(Opcode.SET, reg, value))

    def sets(self, values, what):
        for reg, value in values.items():
            self.set(reg, value, what)

    def op(self, opcode, target=0, diagonal=False, pool=False, packed=False, binary=False):
        self.instructions.append(Instruction(opcode, target=target, diagonal=diagonal, pool=pool,
                                             packed=packed, binary=binary))


def _largest_divisor(n, limit):
    """The largest divisor ``d < limit`` of ``n`` with ``n // d < limit``, or None."""
    for d in range(min(n, limit - 1), 0, -1):
        if n % d == 0:
            return d if n // d < limit else None
    return None


def region_runs(base, channels, cstride, rows, pitch, length):
    """The region as one or more ``(base, channels, cstride, rows, pitch, length)`` patterns that
    cover the same bytes in the same order: contiguous dimensions merged (a compact map is one
    run), and counts kept below :data:`COUNT_LIMIT` (a long run is folded into rows, too many
    channels are split over several instructions)."""
    if (rows == 1 or pitch == length) and (channels == 1 or cstride == rows * length):
        total = channels * rows * length
        if total < COUNT_LIMIT:
            return [(base, 1, 0, 1, 0, total)]
        d = _largest_divisor(total, COUNT_LIMIT)
        if d is not None:
            return [(base, 1, 0, total // d, d, d)]
        step = COUNT_LIMIT - 1
        return [(base + s, 1, 0, 1, 0, min(step, total - s)) for s in range(0, total, step)]
    if (rows == 1 or pitch == length) and rows * length < COUNT_LIMIT:
        length, rows, pitch = rows * length, 1, 0
    step = COUNT_LIMIT - 1
    return [(base + c * cstride, min(step, channels - c), cstride, rows, pitch, length)
            for c in range(0, channels, step)]


def _region(emit, opcode, base, channels, cstride, rows, pitch, length, what):
    """``opcode`` (FILL, INPUT, OUTPUT) over a region; IO_CSTRIDE and IO_PITCH are set only when
    more than one channel or row uses them."""
    for base, channels, cstride, rows, pitch, length in region_runs(base, channels, cstride, rows,
                                                                     pitch, length):
        emit.sets({Reg.IO_BASE: base, Reg.IO_CHANNELS: channels, Reg.IO_ROWS: rows,
                   Reg.IO_LEN: length}, what)
        if channels > 1:
            emit.set(Reg.IO_CSTRIDE, cstride, what)
        if rows > 1:
            emit.set(Reg.IO_PITCH, pitch, what)
        emit.op(opcode)


def _fill_whole(emit, m):
    emit.set(Reg.FILL_VALUE, m.fill & 0xFF, f"map '{m.name}'")
    _region(emit, Opcode.FILL, m.base, m.shape[0], m.cstride, m.padded_h, m.pitch, m.padded_w,
            f"map '{m.name}'")


def _fill_border(emit, m):
    """The border only (top rows, bottom rows, left and right columns): 1 to 4 FILLs. When the
    padded rows follow one another (``pitch`` is the padded width), a row's right border and
    the next row's left one are one run of bytes, as are the top rows and the first row's left
    border, and the last row's right border and the bottom rows: 3 FILLs of the same bytes,
    in fewer runs of a wide ``FILL`` (:func:`fpganet.perf.fill_runs`)."""
    pt, pl, pb, pr = m.pads
    c, h, w = m.shape
    emit.set(Reg.FILL_VALUE, m.fill & 0xFF, f"map '{m.name}'")
    if m.pitch == m.padded_w and h:
        first_right = m.base + pt * m.pitch + pl + w
        strips = [(m.base, 1, pt * m.pitch + pl), (first_right, h - 1, pr + pl),
                  (first_right + (h - 1) * m.pitch, 1, pr + pb * m.pitch)]
    else:
        strips = [(m.base, pt, m.padded_w), (m.base + (pt + h) * m.pitch, pb, m.padded_w),
                  (m.base + pt * m.pitch, h, pl), (m.base + pt * m.pitch + pl + w, h, pr)]
    for base, rows, length in strips:
        if rows and length:
            _region(emit, Opcode.FILL, base, c, m.cstride, rows, m.pitch, length, f"map '{m.name}'")


def _interior(emit, opcode, m, what, image=0):
    """``opcode`` over the interior of ``m`` (of image ``image``'s copy, for a batched map)."""
    _region(emit, opcode, m.origin + image * m.copy_stride, m.shape[0], m.cstride, m.shape[1],
            m.pitch, m.shape[2], what)


def add_order(step):
    """An add's two inputs in the order its walk reads them, lower address first (``IN_CSTRIDE``,
    the distance between them, is then not negative), each with its weight."""
    layer = step.layer
    pair = [(step.src, layer.w_a), (step.src_b, layer.w_b)]
    return sorted(pair, key=lambda entry: entry[0].base)


def _add_walk(step, config):
    """An add as a ``CONV``: the flat walk over rows pt .. pt+H-1 of the tied maps (one pixel
    per byte, ``OUT_W = NPIX``), beat ``(t, i)`` reading input t's channel ``g*rows + i``
    (``IN_CSTRIDE`` the distance between the inputs, ``IN_PITCH`` their channel stride).
    Returns the read registers and ``OUT_BASE``, the output's row pt."""
    (first, _), (second, _) = add_order(step)
    top = step.dst.pads[0] * step.dst.pitch
    reads = {Reg.IN_BASE: first.base + top, Reg.IN_PITCH: first.cstride,
             Reg.IN_CSTRIDE: second.base - first.base, Reg.IN_GSTEP: config.rows * first.cstride,
             Reg.K_C: 2, Reg.K_H: config.rows, Reg.K_W: 1, Reg.IN_ROWSTEP: first.cstride, Reg.STRIDE_X: 1,
             Reg.OUT_W: step.npix, Reg.NPIX: step.npix, Reg.LANES: step.lanes,
             Reg.TILES: step.tiles}
    return reads, step.dst.base + top


def _engine(emit, step, config, image=0):
    """``step``'s SETs and CONV/POOL; ``image``: which copy of a batch slot it writes."""
    src, dst = step.src, step.dst
    what = f"layer '{step.layer.name if step.layer is not None else step.dst.name}'"
    if step.pooled:
        _pooled_conv(emit, step, config, image, what)
        return
    if step.kind == "add":
        regs, out_base = _add_walk(step, config)
    else:
        regs = step.read_regs(src.pitch, base=step.read_base(), cstride=src.cstride)
        out_base = dst.origin + image * dst.copy_stride
    out = {Reg.OUT_BASE: out_base, Reg.OUT_PITCH: dst.pitch}
    if step.is_conv:
        layer = step.layer
        regs.update({Reg.GROUPS: step.groups(config.rows), Reg.M: layer.out_shape[0], **out,
                     Reg.OUT_CSTRIDE: dst.cstride, Reg.OUT_GSTEP: config.rows * dst.cstride,
                     Reg.W_BASE: step.w_base, Reg.W_GSTEP: 0 if step.shares_weights else step.group_words(config),
                     Reg.P_BASE: step.p_base, Reg.QUANT: _quant(layer)})
        opcode = Opcode.CONV
    else:
        del regs[Reg.IN_CSTRIDE]       # K_C = 1: POOL never uses it
        regs.update({Reg.IN_GSTEP: src.cstride, Reg.K_C: 1, Reg.GROUPS: dst.shape[0], **out,
                     Reg.OUT_GSTEP: dst.cstride})
        opcode = Opcode.POOL
    emit.sets(regs, what)
    emit.op(opcode, diagonal=step.diagonal, packed=step.packed, binary=step.binary)
    if step.kind == "add" and dst.padded and (dst.in_place_of is not None or any(
            m.fill != m.zero_point for m in (dst, *step.sources))):
        # The walk wrote the left and right borders with the weighted sum of the inputs' borders:
        # real zero, unless a border holds something else (a max-pool's -128); an output
        # written in place still has its input's top and bottom borders.
        _fill_border(emit, dst)


def _quant(layer):
    """``QUANT`` of a layer the array computes: its output zero point, clamp and rounding."""
    return pack_quant(layer.requant_zp, layer.lo, layer.hi, layer.single_rounding)


def _pooled_conv(emit, step, config, image, what):
    """A conv with its 2x2 max-pool: a ``CONV pool`` per ``rows / 2`` output channels. Array
    row ``2p + dx`` of pass ``k`` is channel ``m = k*rows/2 + p`` at output column ``2x + dx``,
    lane ``dy`` output row ``2y + dy``; the writer writes the pair's maximum at row ``2p + 1``'s
    address of lane 1, ``OUT_BASE + (2p + 1)*OUT_CSTRIDE + y*OUT_GSTEP + x*OUT_PITCH + 1``,
    which is the pooled map's ``(m, y, x)`` with ``OUT_CSTRIDE`` half its (even) channel stride."""
    src, dst, layer, rows = step.src, step.dst, step.layer, config.rows
    pairs, channels = rows // 2, layer.out_shape[0]
    regs = step.read_regs(src.pitch, base=step.read_base(), cstride=src.cstride)
    for k in range(step.passes(rows)):
        first = dst.origin + image * dst.copy_stride + k * pairs * dst.cstride
        regs.update({Reg.GROUPS: step.groups(rows), Reg.M: 2 * min(pairs, channels - k * pairs),
                     Reg.OUT_BASE: (first - dst.cstride // 2 - 1) % config.act_buffer_bytes,
                     Reg.OUT_PITCH: 1, Reg.OUT_CSTRIDE: dst.cstride // 2, Reg.OUT_GSTEP: dst.pitch,
                     Reg.W_BASE: step.w_base + k * step.group_words(config), Reg.W_GSTEP: 0,
                     Reg.P_BASE: step.p_base + k * rows, Reg.QUANT: _quant(layer)})
        emit.sets(regs, what)
        emit.op(Opcode.CONV, pool=True, packed=step.packed)


class Program:
    """Generated code: ``prologue`` and ``body`` instruction lists, and where each step went.

    The whole program for ``n`` images is ``prologue`` (its instruction ``loop_count_index``
    being ``SET LOOP_COUNT n-1``), ``body``, ``LOOP len(prologue)``, ``END``; for 0 images the
    prologue up to that SET, then ``END`` (see :meth:`fpganet.codegen.MemoryImages.program_for`).
    """

    def __init__(self, prologue, body, layer_ranges, loop_count_index):
        self.prologue = prologue
        self.body = body
        self.layer_ranges = layer_ranges            # step number -> (first, end) instruction index
        self.loop_count_index = loop_count_index


def _body(plan, known, origin):
    """The loop body: one image, or at batch B one group of B images (ranges: image 0's)."""
    emit = Emitter(known, origin)
    ranges = {}
    config = plan.config
    m = plan.input_map
    for image in range(plan.batch):
        first = emit.pc
        if m.fill_per_image:
            _fill_border(emit, m)
        _interior(emit, Opcode.INPUT, m, "input", image)
        ranges.setdefault(0, (first, emit.pc))
        for step in plan.image_steps:
            first = emit.pc
            if step.dst.fill_per_image and step.dst.in_place_of is None:
                _fill_border(emit, step.dst)
            _engine(emit, step, config, image)
            ranges.setdefault(step.number, (first, emit.pc))
    for step in plan.group_steps:
        first = emit.pc
        if step.dst.fill_per_image:
            _fill_border(emit, step.dst)
        _engine(emit, step, config)
        ranges[step.number] = (first, emit.pc)
    first = emit.pc
    for image in range(plan.batch):
        # Image by image, each with its STAMP: the stream is what batch 1 sends for B images.
        _interior(emit, Opcode.OUTPUT, plan.output_map, "output", image)
        emit.op(Opcode.STAMP)
    ranges[len(plan.steps) + 1] = (first, emit.pc + 1)   # + the LOOP
    return emit, ranges


def generate(plan):
    """The :class:`Program` of a plan."""
    prologue = Emitter()
    for m in plan.maps:
        if m.padded and not m.fill_per_image:
            _fill_whole(prologue, m)
    prologue.set(Reg.LOOP_COUNT, 0, "the image loop")
    loop_count_index = len(prologue.instructions) - 1
    # Registers the loop head can rely on: those the prologue leaves and the body ends with alike.
    first_pass, _ = _body(plan, {}, 0)
    start = {reg: value for reg, value in prologue.known.items()
             if reg is not Reg.LOOP_COUNT and first_pass.written.get(reg, value) == value}
    body, ranges = _body(plan, start, len(prologue.instructions))
    return Program(prologue.instructions, body.instructions, ranges, loop_count_index)


def _step_weights(step, rows):
    """int8 ``[words, rows]`` of one engine step: per group g of ``rows`` output channels, per
    beat k (order c, ky, kx of the walk), byte i the weight of output channel ``g*rows + i``
    (one group only when every group has the same weights)."""
    layer = step.layer
    groups, k = step.groups(rows), step.k
    if step.kind == "add":
        # Beat (t, i): input t's channel g*rows + i, weighted for array row i only.
        words = np.zeros((2, rows, rows), dtype=np.int8)
        for t, (_, weight) in enumerate(add_order(step)):
            words[t] = np.diag(np.full(rows, weight))
        return words.reshape(2 * rows, rows)
    if step.pooled:
        return _pooled_weights(step, rows)
    if step.kind in ("conv", "dense"):
        matrix = layer.weight_matrix
        m = matrix.shape[0]
        padded = np.zeros((groups * rows, k), dtype=np.int8)
        padded[:m] = matrix
        return padded.reshape(groups, rows, k).transpose(0, 2, 1).reshape(groups * k, rows)
    # grouped: block-diagonal, each tile over its K_C input channels from g * channel step.
    k_c, channel_step = step.channel_tile
    kh, kw = step.kernel
    if isinstance(layer, QAvgPool):
        weight, per_in, per_out, groups = np.ones((layer.in_shape[0], 1, kh, kw), np.int8), 1, 1, 1
    else:
        weight = layer.weight
        per_in = layer.in_shape[0] // layer.groups
        per_out = layer.out_shape[0] // layer.groups
    tiles = np.zeros((groups, k_c, kh, kw, rows), dtype=np.int8)
    for g in range(groups):
        for i in range(rows):
            m = g * rows + i
            if m >= weight.shape[0] or (isinstance(layer, QAvgPool) and i >= k_c):
                continue
            first = m // per_out * per_in            # the input channels of m's group
            for c in range(per_in):
                local = first + c - g * channel_step
                if 0 <= local < k_c:
                    tiles[g, local, :, :, i] = weight[m, c]
    if step.diagonal:
        # CONV diagonal: the block-diagonal tiles' diagonal, word (ky, kx) of group g holding
        # row i's weight for its own channel i (zero past K_C).
        words = np.zeros((groups, kh, kw, rows), dtype=np.int8)
        d = np.arange(min(rows, k_c))
        words[..., d] = tiles[:, d, :, :, d].transpose(1, 2, 3, 0)
        return words.reshape(groups * kh * kw, rows)
    return tiles.reshape(groups * k, rows)


def _pooled_rows(rows, channels):
    """A pooled conv's row pairs: the index of each pair's first row among all passes' rows
    (pass ``k``'s rows from ``k*rows``) and its output channel."""
    pairs = rows // 2
    channel = np.arange(channels)
    return channel // pairs * rows + channel % pairs * 2, channel


def _pooled_weights(step, rows):
    """A pooled conv's words (:func:`_pooled_conv`): per pass, per beat of the walk, row
    ``2p + dx`` the kernel of channel ``k*rows/2 + p`` shifted ``dx`` columns right in one a
    column wider (zero past the channels)."""
    weight = step.layer.weight
    channels, c, kh, kw = weight.shape
    passes = step.passes(rows)
    shifted = np.zeros((passes * rows, c, kh, kw + 1), dtype=np.int8)
    row, channel = _pooled_rows(rows, channels)
    for dx in (0, 1):
        shifted[row + dx, :, :, dx:dx + kw] = weight[channel]
    if step.walk[2] == 1:
        shifted = shifted[:, 0].transpose(0, 2, 1)          # the columns are the walk's channels
    matrix = shifted.reshape(passes, rows, -1)
    return matrix.transpose(0, 2, 1).reshape(-1, rows)


def _pair_words(step, words):
    """``words`` (``[words, rows]``, :func:`_step_weights`) for pair products: ``[words',
    2 * rows]``, channels ``2c'`` and ``2c' + 1`` of each kernel position in word ``c'``, row
    ``i``'s bytes ``2i`` (even) and ``2i + 1`` (odd), zero past ``K_C``. A diagonal word
    holds row ``i``'s one weight in both bytes: the window keeps the byte of the beat's
    channel that is ``i``."""
    if step.diagonal:
        return np.repeat(words, 2, axis=1)
    k_c, k_h, k_w = step.walk
    rows, positions = words.shape[1], k_h * k_w
    groups = len(words) // (k_c * positions)
    channels = np.zeros((groups, k_c + k_c % 2, positions, rows), dtype=np.int8)
    channels[:, :k_c] = words.reshape(groups, k_c, positions, rows)
    paired = channels.reshape(groups, -1, 2, positions, rows).transpose(0, 1, 3, 4, 2)
    return paired.reshape(-1, 2 * rows)


def _packed_words(step, words, config):
    """``words`` (a step's, one a beat) for ``CONV packed`` or ``CONV binary``: each block of
    :meth:`~fpganet.codegen.ir.Step.block_beats` beats in :attr:`~fpganet.codegen.ir.Step.
    beats_per_word` times fewer words (:func:`fpganet.isa.pack_nibbles`,
    :func:`fpganet.isa.pack_signs`). A binary step's zero bytes (rows past the layer's
    channels, which no write reads) are stored as -1."""
    beats = step.block_beats(config)
    if step.binary:
        words = np.where(words == 0, -1, words)
    pack = pack_signs if step.binary else pack_nibbles
    return np.concatenate([pack(words[first:first + beats])
                           for first in range(0, len(words), beats)])


def weight_image(plan):
    """int8 ``[words, weight_word_bytes]``: the steps' weight words (:func:`_step_weights`,
    paired by :func:`_pair_words` with pair products, packed by :func:`_packed_words` where the
    step is), each at its ``w_base``."""
    config = plan.config
    image = np.zeros((plan.weight_words, config.weight_word_bytes), dtype=np.int8)
    for step in plan.steps:
        words = step.weight_words(config)
        if words:
            step_words = _step_weights(step, config.rows)
            if config.pair_products:
                step_words = _pair_words(step, step_words)
            if step.packed or step.binary:
                step_words = _packed_words(step, step_words, config)
            image[step.w_base:step.w_base + words] = step_words
    return image


def param_image(plan):
    """uint64 parameter entries: per layer, per output channel, ``pack_param(bias, mult, shift)``
    in the configuration's requantization mode (an add's and an average pool's are the same
    for every channel)."""
    image = np.zeros(plan.param_entries, dtype=np.uint64)
    mode = plan.config.requant_mode
    for step in plan.steps:
        entries = step.param_entries(plan.config.rows)
        if not entries:
            continue
        layer = step.layer
        if step.pooled:
            # Rows 2p and 2p + 1 of pass k: channel k*rows/2 + p (other rows: the first's).
            channel = np.zeros(entries, dtype=np.int64)
            row, channel_of_row = _pooled_rows(plan.config.rows, layer.out_shape[0])
            channel[row], channel[row + 1] = channel_of_row, channel_of_row
            bias, mult, shift = layer.bias[channel], layer.mult[channel], layer.shift[channel]
        elif isinstance(layer, QConv):
            bias, mult, shift = layer.bias, layer.mult, layer.shift
        else:
            # The zero points folded in: the array sums the codes q, not q - zp.
            bias, mult, shift = ([value] * entries for value in (layer.bias, layer.mult, layer.shift))
        image[step.p_base:step.p_base + entries] = [
            pack_param(int(b), int(m), int(s), mode) for b, m, s in zip(bias, mult, shift)]
    return image
