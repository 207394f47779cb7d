"""The compiler's intermediate form: a :class:`Plan` of engine :class:`Step` s over stored
:class:`FeatureMap` s, which every pass of :mod:`fpganet.codegen.passes` reads and fills in.

A plan starts as the network and the configuration alone; lowering adds the steps and maps,
later passes their fusion, batching, pitches, addresses and weight and parameter places
(:data:`fpganet.codegen.passes.PLAN_PASSES`). :func:`format_plan` prints it as text, one line
a map and a step, which is what ``fpganet compile --dump-ir`` shows after each pass.
"""

from dataclasses import dataclass, field

import numpy as np

from ..config import AcceleratorConfig
from ..errors import FpganetError
from ..isa import BINARY_WEIGHT_BEATS, Reg
from ..qnet import QAvgPool

__all__ = ["FeatureMap", "Step", "Plan", "format_plan", "write_extra_cycles", "capacity_error",
           "channel_tile", "POOL_PAD_VALUE", "COUNT_LIMIT"]

#: Border value before a padded max-pool: the int8 minimum never wins a window (pads < kernel).
POOL_PAD_VALUE = -128


def _prod(shape):
    return int(np.prod(shape, dtype=np.int64))


@dataclass(eq=False)
class FeatureMap:
    """A feature map stored in the activation buffer.

    Interior element ``(c, y, x)`` is at ``origin + c*cstride + y*pitch + x``;
    element ``(c, y, x)`` of the *padded* map is at ``base + c*cstride + y*pitch + x``.
    ``fill`` is the border value (None: no border). An alias (``parent`` set) is
    another shape's view of a compact parent's bytes (a reshape).
    """

    name: str
    shape: tuple
    pads: tuple = (0, 0, 0, 0)
    fill: int = None
    pitch: int = None
    cstride: int = None
    base: int = None
    parent: "FeatureMap" = None
    producer: int = None            # step number that writes it (0: INPUT)
    last_use: int = None            # last step number that reads it (n + 1: OUTPUT)
    role: str = "compact"           # who decided the layout: compact, conv, pool
    fill_per_image: bool = False
    # Batching (--batch B): a map held for ``copies`` images, image j's map ``j*copy_stride``
    # bytes after image 0's (the slot of the last map before the dense layers: copies side by
    # side; a dense layer's output: images interleaved, copy_stride 1, cstride B).
    copies: int = 1
    copy_stride: int = 0
    interleaved: bool = False
    # The code of real zero: the border value when no reader asks for another.
    zero_point: int = None
    # Channels readers may address (a grouped or add step's last channel tile reads past the
    # map with zero weights): the allocation keeps them clear of what the same step writes.
    read_channels: int = 0
    # Maps an add reads and writes element by element in one flat walk: one pitch and padding.
    tie: list = None
    # Border values asked for by the readers (a conv's zero point, a max-pool's -128).
    fill_demands: set = field(default_factory=set)
    # Read through another shape's view (a reshape): must stay compact.
    viewed: bool = False
    # An add's output written over one of its inputs, which dies there (same layout, same bytes).
    in_place_of: "FeatureMap" = None
    # Filled in by the pitch search.
    pitch_costs: dict = field(default_factory=dict)

    @property
    def padded_h(self):
        return self.shape[1] + self.pads[0] + self.pads[2]

    @property
    def padded_w(self):
        return self.shape[2] + self.pads[1] + self.pads[3]

    @property
    def padded(self):
        return any(self.pads)

    def packed_cstride(self, pitch):
        """The channel stride of tightly packed channels at ``pitch`` (the last row's pitch
        slack is not needed)."""
        return (self.padded_h - 1) * int(pitch) + self.padded_w

    def set_pitch(self, pitch, cstride_slack=0):
        # Channels only share a beat at the same (y, x): one channel a beat, cstride does not
        # change bank conflicts and the channels are packed; with pair products a beat reads
        # channels c and c + 1, and ``cstride_slack`` bytes more move c + 1's banks.
        self.pitch = int(pitch)
        self.cstride = self.packed_cstride(pitch) + int(cstride_slack)

    @property
    def image_span(self):
        """Bytes from ``base`` to the last byte of one image's padded map (and of the channels
        past it that a reader addresses)."""
        channels = max(self.shape[0], self.read_channels)
        return (channels - 1) * self.cstride + (self.padded_h - 1) * self.pitch + self.padded_w

    @property
    def span(self):
        """Bytes from ``base`` to the last byte of the padded map (of the last image's copy)."""
        return self.image_span + (self.copies - 1) * self.copy_stride

    @property
    def origin(self):
        """Address of interior element (0, 0, 0)."""
        return self.base + self.pads[0] * self.pitch + self.pads[1]

    @property
    def storage(self):
        return self.parent if self.parent is not None else self

    def describe(self):
        entry = {"name": self.name, "shape": list(self.shape), "base": self.base,
                 "origin": self.origin, "pads": list(self.pads), "pitch": self.pitch,
                 "cstride": self.cstride, "bytes": self.span}
        if self.copies > 1:        # only batched plans say so: batch 1 manifests stay as they were
            entry.update(images=self.copies, image_stride=self.copy_stride,
                         image_layout="interleaved" if self.interleaved else "side by side")
        if self.parent is not None:
            entry["view_of"] = self.parent.name
        elif self.in_place_of is not None:
            entry["in_place_of"] = self.in_place_of.name
        else:
            entry.update(fill=self.fill, fill_per_image=self.fill_per_image if self.padded else None,
                         layout=self.role, live=[self.producer, self.last_use])
        return entry


@dataclass(eq=False)
class Step:
    """One engine instruction.

    ``kind``: ``conv`` (a QConv over a spatial map), ``dense`` (a QConv whose kernel is
    the whole stored input map, one output pixel), ``grouped`` (a depthwise or grouped QConv,
    or a QAvgPool: a ``CONV`` over each tile's own input channels, block-diagonal weights),
    ``add`` (a QAdd: a ``CONV`` over both maps in one flat walk, each array row weighting its
    own channel of the two), ``pool`` (QMaxPool) or ``copy`` (a POOL with a 1x1 window that
    moves a reshaped map into a padded layout).
    """

    number: int                     # 1..n (0 is INPUT, n + 1 is OUTPUT)
    kind: str
    layer_index: int
    layer: object
    src: FeatureMap
    dst: FeatureMap
    kernel: tuple
    stride: tuple
    out_hw: tuple
    lanes: int = 1
    w_base: int = 0
    p_base: int = 0
    folded_reshapes: list = field(default_factory=list)
    # A dense layer run once for a group of images (--batch): image j is "output pixel" j.
    batched: bool = False
    # The padding the layer reads its source with (None: the map's own, as stored).
    read_pads: tuple = None
    # grouped: (K_C, input channels from one group of rows output channels to the next).
    channel_tile: tuple = None
    # add: the second input.
    src_b: FeatureMap = None
    # grouped, one input channel per output channel (depthwise, an average pool), on a
    # configuration with diagonal_weights: a CONV diagonal, one weight word per kernel position.
    diagonal: bool = False
    # conv/dense over one input channel on a configuration with pair_products: the walk takes
    # the kernel's rows as its channels (K_C = K_H, IN_CSTRIDE = IN_PITCH, K_H = 1), so that a
    # beat pairs two kernel rows instead of the one channel with nothing.
    rows_as_channels: bool = False
    # conv with the 2x2 max-pool after it fused (config.fused_max_pool): CONV pools, one per
    # rows/2 output channels (:meth:`passes`), each engine group a pair of output rows (two
    # lanes), each array row one of a pair of output columns of a channel (the kernel one
    # column wider, shifted by the column); the writer keeps the maximum of each row pair.
    pool_layer: object = None
    pair_columns: bool = False          # pooled, one input channel, pair products
    # A layer of 4-bit weights or fewer on a configuration with packed_weights: a CONV packed,
    # two beats to a weight word (:meth:`group_words`); of +-1 weights with binary_weights, a
    # CONV binary, eight.
    packed: bool = False
    binary: bool = False

    @property
    def pooled(self):
        return self.pool_layer is not None

    def passes(self, rows):
        """Engine instructions of the step: a pooled conv's ``CONV pool`` per ``rows / 2``
        output channels, else 1."""
        return -(-self.layer.out_shape[0] // (rows // 2)) if self.pooled else 1

    @property
    def sources(self):
        return [self.src] if self.src_b is None else [self.src, self.src_b]

    @property
    def npix(self):
        return self.out_hw[0] * self.out_hw[1]

    @property
    def tiles(self):
        return -(-self.npix // self.lanes)

    @property
    def k_c(self):
        if self.kind in ("conv", "dense"):
            return self.src.shape[0]
        if self.kind == "grouped":
            return self.channel_tile[0]
        return 2 if self.kind == "add" else 1

    @property
    def k(self):
        if self.pooled:
            return _prod(self.walk)
        return self.k_c * self.kernel[0] * self.kernel[1]

    @property
    def is_conv(self):
        """The step is a ``CONV`` (the array multiplies: weights and parameter entries), not a
        ``POOL`` (max pooling, a copy)."""
        return self.kind in ("conv", "dense", "grouped", "add")

    @property
    def shares_weights(self):
        """Every group of rows output channels has the same weights (``W_GSTEP = 0``): an
        average pool's ones, an add's two input weights."""
        return self.kind == "add" or isinstance(self.layer, QAvgPool)

    def groups(self, rows):
        if self.pooled:
            return self.out_hw[0] // 2          # pairs of output rows
        if self.is_conv:
            return -(-self.layer.out_shape[0] // rows)
        return self.dst.shape[0]

    @property
    def walk(self):
        """``(K_C, K_H, K_W)`` of the engine's walk (:attr:`rows_as_channels`; a pooled conv's
        kernel is a column wider, and over one input channel with pair products its columns are
        the walk's channels)."""
        if self.pooled:
            if self.src.shape[0] == 1 and self.pair_columns:
                return self.kernel[1] + 1, self.kernel[0], 1
            return self.k_c, self.kernel[0], self.kernel[1] + 1
        if self.rows_as_channels:
            return self.kernel[0], 1, self.kernel[1]
        return self.k_c, self.kernel[0], self.kernel[1]

    def block_beats(self, config):
        """Beats of one block of weight words, the walk the weight address goes through once
        and goes back to the start of: a tile's (a channel's in the diagonal mode); with
        ``config.pair_products`` two channels of the walk share a beat."""
        k_c, k_h, k_w = self.walk
        return k_h * k_w if self.diagonal else -(-k_c // config.products_per_pe) * k_h * k_w

    def group_words(self, config):
        """Weight words of one group of output channels (``W_GSTEP`` unless shared): a block's
        beats, as many words (rounded up) as :attr:`beats_per_word` divides them into."""
        return -(-self.block_beats(config) // self.beats_per_word)

    @property
    def beats_per_word(self):
        """Beats one weight word holds: a ``CONV packed``'s two, a ``CONV binary``'s eight."""
        return BINARY_WEIGHT_BEATS if self.binary else 2 if self.packed else 1

    def weight_words(self, config):
        if not self.is_conv:
            return 0
        words = self.group_words(config)
        if self.pooled:
            return self.passes(config.rows) * words
        return words if self.shares_weights else self.groups(config.rows) * words

    def param_entries(self, rows):
        """Parameter entries, with ``rows`` array rows (a pooled conv's: ``rows`` a pass, each
        channel's twice)."""
        if self.pooled:
            return self.passes(rows) * rows
        return self.layer.out_shape[0] if self.is_conv else 0

    def read_base(self):
        """``IN_BASE``: element (0, 0, 0) of the source as the layer pads it."""
        src = self.src
        if self.read_pads is None:
            return src.base
        return src.origin - self.read_pads[0] * src.pitch - self.read_pads[1]

    def read_regs(self, pitch, base=0, cstride=0):
        """Engine registers that determine the read addresses, for a source map of ``pitch``."""
        gstep = self.channel_tile[1] * cstride if self.kind == "grouped" else 0
        k_c, k_h, k_w = self.walk
        if self.pooled:
            # Group: a pair of output rows; tile: a pair of output columns, lane j row 2y + j.
            width = self.out_hw[1]
            return {Reg.IN_BASE: base, Reg.IN_PITCH: pitch,
                    Reg.IN_CSTRIDE: 1 if k_w == 1 else cstride, Reg.IN_GSTEP: 2 * pitch,
                    Reg.K_C: k_c, Reg.K_H: k_h, Reg.K_W: k_w, Reg.IN_ROWSTEP: 2,
                    Reg.STRIDE_X: pitch, Reg.OUT_W: 2, Reg.NPIX: width, Reg.LANES: 2,
                    Reg.TILES: width // 2}
        return {Reg.IN_BASE: base, Reg.IN_PITCH: pitch, Reg.IN_CSTRIDE: pitch if self.rows_as_channels
                else cstride, Reg.IN_GSTEP: gstep, Reg.K_C: k_c, Reg.K_H: k_h, Reg.K_W: k_w,
                Reg.IN_ROWSTEP: self.stride[0] * pitch, Reg.STRIDE_X: self.stride[1],
                Reg.OUT_W: self.out_hw[1], Reg.NPIX: self.npix, Reg.LANES: self.lanes,
                Reg.TILES: self.tiles}


def write_extra_cycles(out_w, npix, lanes, pitch, banks, chunk):
    """Bank-conflict cycles of one result row's writes, all tiles: lanes go ``chunk`` at a time.

    The post-processing unit writes ``requant_lanes`` results per cycle; lanes of one chunk that
    share a bank cost a cycle each.
    """
    if chunk <= 1 or banks == 1:
        return 0
    tiles = -(-npix // lanes)
    width = -(-lanes // chunk) * chunk
    n = np.arange(tiles)[:, None] * lanes + np.arange(width)[None, :]
    valid = (n < npix) & (np.arange(width)[None, :] < lanes)
    oy, ox = np.divmod(n, out_w)
    bank = (oy * pitch + ox) % banks
    bank = np.where(valid, bank, banks + np.arange(width)[None, :])  # invalid lanes never collide
    bank = bank.reshape(tiles, width // chunk, chunk)
    bank = np.sort(bank, axis=2)
    extra = 0
    for d in range(1, chunk):
        # a chunk with a bank used by more than d lanes costs one more cycle
        extra += int((bank[:, :, d:] == bank[:, :, :-d]).any(axis=2).sum())
    return extra


def capacity_error(buffer, needed, available, config, flag, needed_units="", available_units=""):
    """The one-line refusal of a network that does not fit ``buffer``, e.g.
    ``activation buffer: network needs 9,344 bytes, the 2x8 configuration has 8,192
    (--act-buffer-bytes)``; ``*_units`` add the count in the buffer's own words."""
    needed_units = f" ({needed_units})" if needed_units else ""
    available_units = f"{available_units}, " if available_units else ""
    return FpganetError(f"{buffer}: network needs {needed:,} bytes{needed_units}, the {config.name} "
                        f"configuration has {available:,} ({available_units}{flag})")


@dataclass
class Plan:
    """Steps, feature maps and allocation of a network on one accelerator configuration.

    Attributes
    ----------
    net : fpganet.qnet.QNetwork
    config : fpganet.config.AcceleratorConfig
    steps : list of Step
        At batch B > 1 the steps from ``first_batched`` on (the dense layers) run once per group
        of B images with one lane per image; the ones before once per image.
    maps : list of FeatureMap
        Stored maps (no aliases), in production order.
    input_map : FeatureMap
        Written by INPUT (its interior, channel, row, byte order: the NCHW bytes of an image).
    output_map : FeatureMap
        Sent by OUTPUT (same order: the NCHW flatten of the network output).
    allocation : str
        ``disjoint``, ``pinned-borders`` (padded maps disjoint, others reused by liveness) or
        ``liveness``; ``pitches``: ``searched`` or ``compact`` (fallback when nothing else fit).
    act_bytes : int
        Highest activation address used + 1.
    weight_words, param_entries : int
    reshape_steps : dict
        Layer index of each reshape -> ``"free"`` or the copy Step.
    attempts : list of dict
        The layouts the allocation tried and the bytes each needs; ``act_needed`` the fewest.
    explore : bool
        The allocation measures every layout, not only up to the first that fits.
    """

    net: object
    config: AcceleratorConfig
    steps: list = field(default_factory=list)
    maps: list = field(default_factory=list)
    input_map: FeatureMap = None
    output_map: FeatureMap = None
    allocation: str = ""
    pitches: str = ""
    act_bytes: int = 0
    weight_words: int = 0
    param_entries: int = 0
    reshape_steps: dict = field(default_factory=dict)
    attempts: list = field(default_factory=list)
    batch: int = 1
    first_batched: int = None
    explore: bool = False
    act_needed: int = None

    @property
    def image_steps(self):
        """Steps run once per image (all of them at batch 1)."""
        return self.steps if self.first_batched is None else self.steps[:self.first_batched]

    @property
    def group_steps(self):
        """Steps run once per group of :attr:`batch` images: the dense layers (none at batch 1)."""
        return [] if self.first_batched is None else self.steps[self.first_batched:]

    @property
    def slot_map(self):
        """The map the first dense layer reads, held for every image of a group (or None)."""
        return None if self.first_batched is None else self.steps[self.first_batched].src.storage

    @property
    def weight_bytes(self):
        return self.weight_words * self.config.weight_word_bytes

    @property
    def param_bytes(self):
        return self.param_entries * 8

    @property
    def input_bytes(self):
        return _prod(self.input_map.shape)

    @property
    def output_bytes(self):
        return _prod(self.output_map.shape)



#: The hardware's count registers hold 16 bits (``fpganet.hdl.registers.COUNT_WIDTH``).
COUNT_LIMIT = 1 << 16


def channel_tile(layer, rows):
    """``(K_C, channel step)`` of a grouped step: the input channels one group of ``rows``
    output channels reads, and how far the next group's start is. When the output channels of
    a tile span whole channel groups, each tile reads only theirs; otherwise every tile walks
    all input channels (zero weights outside the group)."""
    c, m = layer.in_shape[0], layer.out_shape[0]
    groups = getattr(layer, "groups", c)          # an average pool is depthwise
    per_in, per_out = c // groups, m // groups
    if m <= rows or rows % per_out:
        return c, 0
    return rows // per_out * per_in, rows // per_out * per_in


# Text form ---------------------------------------------------------------------------------
#
# Maps are named %0, %1, ... in production order (layer names can be long: a TFLite tensor's
# holds every op fused into it); each map's line gives its name once.

def _shape(shape):
    return "x".join(map(str, shape))


def _unset(value):
    return "?" if value is None else value


def _map_line(m, ref):
    """One stored map: geometry, border, layout and liveness (``?``: not decided yet)."""
    words = [f"{ref(m)} {_shape(m.shape)}"]
    if m.padded:
        words.append(f"pads {','.join(map(str, m.pads))} fill {_unset(m.fill)}"
                     f"{' per image' if m.fill_per_image else ''}")
    words.append(f"pitch {_unset(m.pitch)} cstride {_unset(m.cstride)} base {_unset(m.base)}")
    words.append(f"live {_unset(m.producer)}..{_unset(m.last_use)} layout {m.role}")
    if m.copies > 1:
        words.append(f"x{m.copies} images {'interleaved' if m.interleaved else 'side by side'} "
                     f"stride {m.copy_stride}")
    if m.in_place_of is not None:
        words.append(f"in place of {ref(m.in_place_of)}")
    if m.tie:
        words.append("tied to " + ",".join(ref(other) for other in m.tie if other is not m))
    if m.viewed:
        words.append("viewed")
    return "  ".join(words + [f"'{m.name}'"])


def _step_line(step, config, placed, ref):
    """One step: its instruction, what it reads and writes, its walk and where its weights go."""
    flags = [name for name in ("batched", "diagonal", "rows_as_channels", "pair_columns", "packed",
                                "binary")
             if getattr(step, name)]
    if step.pooled:
        flags.append(f"pool '{step.pool_layer.name}'")
    sources = ", ".join(ref(m) for m in step.sources)
    words = [f"{step.number:3d} {step.kind:7s} {sources} -> {ref(step.dst)}",
             f"kernel {_shape(step.kernel)} stride {_shape(step.stride)} out {_shape(step.out_hw)} "
             f"lanes {step.lanes}"]
    if step.read_pads is not None and any(step.read_pads):
        words.append(f"read pads {','.join(map(str, step.read_pads))}")
    if step.is_conv:
        # Before the buffers pass, the sizes alone.
        words.append(f"weights {step.w_base if placed else '?'}+{step.weight_words(config)} "
                     f"params {step.p_base if placed else '?'}+{step.param_entries(config.rows)}")
    if step.folded_reshapes:
        words.append(f"reshapes {step.folded_reshapes}")
    what = step.layer.name if step.layer is not None else "reshape copy"
    return "  ".join(words + flags + [f"'{what}'"])


def format_plan(plan):
    """The plan as text: a header, the stored maps (production order, ``%i``), then the steps.
    A view of another map's bytes (a reshape) is written ``%i as CxHxW``."""
    config = plan.config
    ids = {id(m): f"%{number}" for number, m in enumerate(plan.maps)}

    def ref(m):
        if m.parent is not None:
            return f"{ref(m.parent)} as {_shape(m.shape)}"
        return ids.get(id(m), "%?")

    lines = [f"plan: {len(plan.net.layers)} layers on the {config.name} configuration, "
             f"batch {plan.batch}"]
    if plan.allocation:
        lines.append(f"layout: pitches {plan.pitches}, allocation {plan.allocation}, "
                     f"{plan.act_bytes:,} of {config.act_buffer_bytes:,} activation bytes")
    placed = bool(plan.weight_words or plan.param_entries)
    if placed:
        lines.append(f"buffers: {plan.weight_words:,} weight words, {plan.param_entries:,} "
                     f"parameter entries")
    lines.append(f"maps ({len(plan.maps)}):")
    lines += [f"  {_map_line(m, ref)}" for m in plan.maps]
    lines.append(f"steps ({len(plan.steps)}):")
    lines += [f"  {_step_line(step, config, placed, ref)}" for step in plan.steps]
    return "\n".join(lines) + "\n"
