"""Planning: from a :class:`~fpganet.qnet.QNetwork` to engine steps and feature-map layouts.

The plan decides, for an :class:`~fpganet.config.AcceleratorConfig`:

* the **steps**: one engine instruction (``CONV`` or ``POOL``) per conv, dense or
  max-pool layer, plus a ``POOL`` 1x1 copy where a reshape cannot be a free view;
* the **layout** of every stored feature map in the activation buffer: padding
  (for the consumer: a conv's pads hold ``zp_in``, a padded max-pool's hold
  -128), ``pitch`` (chosen from ``act_banks`` candidates to minimise the bank
  conflicts of the consumer's reads and the producer's writes, as the cycle model counts
  them: :func:`fpganet.perf.gather_cycles`) and ``cstride`` (with pair products chosen too);
* the **allocation** (base address) of every map: disjoint if everything fits,
  else by liveness (a map's bytes are reused once it is dead), and whether a
  map's border is filled once before the image loop or again every image;
* where the weights (words of ``rows`` bytes) and parameter entries of each
  layer go.

Reshapes cost nothing when they can: the output of the network is sent in the
stored layout of the last map (``OUTPUT`` walks channel, row, byte: the NCHW
flatten); a dense layer after a flatten reads the stored map in place as one
``CONV`` whose kernel is the whole map; ``INPUT`` writes the first map in
whatever shape its consumer wants. Only a reshape feeding a padded conv/pool
that is not the input costs a copy (``POOL`` with a 1x1 window).

Everything that does not fit raises one :class:`~fpganet.errors.FpganetError`
line naming the buffer, the bytes needed and available, and the flag to change.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from ..config import AcceleratorConfig
from ..errors import FpganetError
from ..isa import Reg
from ..perf import engine_beats, gather_cycles, pair_beats
from ..qnet import NETWORK_INPUT, QAdd, QAvgPool, QConv, QMaxPool, QReshape, output_zero_point

__all__ = ["FeatureMap", "Step", "Plan", "plan_network", "smallest_act_bytes", "ATTEMPTS",
           "write_extra_cycles", "capacity_error", "POOL_PAD_VALUE", "COUNT_LIMIT",
           "channel_tile"]

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

    def group_words(self, config):
        """Weight words of one group of output channels (``W_GSTEP`` unless shared); with
        ``config.pair_products`` two channels of the walk share a word."""
        k_c, k_h, k_w = self.walk
        return k_h * k_w if self.diagonal else -(-k_c // config.products_per_pe) * k_h * k_w

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
    """

    net: object
    config: AcceleratorConfig
    steps: list
    maps: list
    input_map: FeatureMap
    output_map: FeatureMap
    allocation: str = ""
    pitches: str = ""
    act_bytes: int = 0
    weight_words: int = 0
    param_entries: int = 0
    reshape_steps: dict = field(default_factory=dict)
    attempts: list = field(default_factory=list)
    batch: int = 1
    first_batched: int = None

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


# Lowering ----------------------------------------------------------------------------------

#: The hardware's count registers hold 16 bits (``fpganet.hdl.registers.COUNT_WIDTH``).
COUNT_LIMIT = 1 << 16


def _factor3(n):
    """``(c, h, w)`` with ``c*h*w == n``, each below :data:`COUNT_LIMIT`, w largest; or None."""
    for w in range(min(n, COUNT_LIMIT - 1), 0, -1):
        if n % w == 0:
            rest = n // w
            for h in range(min(rest, COUNT_LIMIT - 1), 0, -1):
                if rest % h == 0:
                    return (rest // h, h, w) if rest // h < COUNT_LIMIT else None
    return None


def _dense_like(layer):
    """A QConv that reads a (K, 1, 1) map with a 1x1 kernel and no padding: one dot product."""
    return (isinstance(layer, QConv) and tuple(layer.in_shape[1:]) == (1, 1)
            and tuple(layer.kernel) == (1, 1) and not any(layer.pads))


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


def _one_channel_each(layer):
    """Output channel ``m`` reads input channel ``m`` only (a depthwise convolution with one
    output channel per group, an average pool): a grouped step's block-diagonal weights are
    then diagonal."""
    return isinstance(layer, QAvgPool) or layer.in_shape[0] == layer.groups == layer.out_shape[0]


def _merge_ties(*maps):
    tie = []
    for m in maps:
        for member in m.tie or [m]:
            if member not in tie:
                tie.append(member)
    for member in tie:
        member.tie = tie


def _settle_borders(maps):
    """Padding and border value of every stored map, once all its readers are known.

    Maps an add ties together take the largest padding of the group (the flat walk needs one
    geometry). A border holds what its padded readers ask for: a conv's zero point, a max
    pool's -128, or the zero point when only the tie pads it.
    """
    for m in maps:
        if m.tie:
            m.pads = tuple(max(member.pads[i] for member in m.tie) for i in range(4))
    for m in maps:
        if m.viewed and m.padded:
            raise FpganetError(f"map '{m.name}' is read through a reshape and by a padded layer "
                               f"(or an add), which need different layouts; the accelerator "
                               f"stores one layout per map")
        if not m.padded:
            m.fill = None
            continue
        if len(m.fill_demands) > 1:
            raise FpganetError(f"map '{m.name}' is read by a padded max-pool and a padded conv, "
                               f"whose borders differ (-128 and the zero point {m.zero_point}); "
                               f"the accelerator stores one border per map")
        m.fill = next(iter(m.fill_demands), m.zero_point)


def _lower(net, config):
    """Steps and maps, layouts not yet chosen (``role`` says who decides each)."""
    layers = list(net.layers)
    steps, maps = [], []
    input_map = FeatureMap("input", tuple(net.input_chw), producer=0, zero_point=int(net.input_zp))
    maps.append(input_map)
    # Per layer output: (stored map, reshaped view of it or None, reshape layers folded so far).
    values = {NETWORK_INPUT: (input_map, None, [])}
    readers = {}
    for index in range(len(layers)):
        for source in net.layer_inputs(index):
            readers[source] = readers.get(source, 0) + 1

    def require(stored, layer):
        """``layer`` reads ``stored`` directly: its padding (the largest of the readers) and
        border value."""
        pads = tuple(int(p) for p in layer.pads)
        stored.pads = tuple(max(old, new) for old, new in zip(stored.pads, pads))
        pool = isinstance(layer, QMaxPool)
        if any(pads):
            stored.fill_demands.add(POOL_PAD_VALUE if pool else int(layer.zp_in))
        if stored.role in ("compact", "add") or pool:
            stored.role = "pool" if pool else "conv"

    def read(stored, number):
        stored.storage.last_use = max(stored.storage.last_use or 0, number)

    def alias_of(stored, shape):
        stored.viewed = True
        alias = FeatureMap(f"{stored.name} as {'x'.join(map(str, shape))}", tuple(shape),
                           parent=stored, role="view")
        alias.set_pitch(shape[2])
        return alias

    for index, layer in enumerate(layers):
        sources = net.layer_inputs(index)
        if isinstance(layer, QReshape):
            stored, _, pending = values[sources[0]]
            values[index] = (stored, tuple(layer.out_shape), pending + [index])
            continue
        number = len(steps) + 1
        dst = FeatureMap(layer.name, tuple(layer.out_shape), producer=number,
                         zero_point=int(output_zero_point(layer)))
        if isinstance(layer, QAdd):
            pair, folded = [], []
            for source in sources:
                stored, view, pending = values[source]
                if view is not None and view != stored.shape or stored.parent is not None:
                    raise FpganetError(f"layer '{layer.name}': an add of a reshaped map, which "
                                       f"the accelerator cannot lay out for its flat walk")
                read(stored, number)
                stored.read_channels = max(stored.read_channels,
                                           -(-stored.shape[0] // config.rows) * config.rows)
                if stored.role == "compact":
                    stored.role = "add"
                pair.append(stored)
                folded += pending
            _merge_ties(*pair, dst)
            maps.append(dst)
            steps.append(Step(number, "add", index, layer, pair[0], dst, (config.rows, 1), (1, 1),
                              (1, 1), folded_reshapes=folded, src_b=pair[1]))
            values[index] = (dst, None, [])
            continue
        if not isinstance(layer, (QConv, QMaxPool, QAvgPool)):
            raise FpganetError(f"layer '{getattr(layer, 'name', index)}': the accelerator has no "
                               f"instruction for a {type(layer).__name__}")
        if isinstance(layer, QMaxPool) and _fuses(steps, values[sources[0]], layer, config,
                                                   readers[sources[0]]):
            conv = steps[-1]
            maps.remove(conv.dst)
            dst = FeatureMap(layer.name, tuple(layer.out_shape), producer=conv.number,
                             zero_point=int(output_zero_point(layer)))
            maps.append(dst)
            conv.dst, conv.pool_layer, conv.rows_as_channels = dst, layer, False
            conv.pair_columns = config.pair_products
            values[index] = (dst, None, [])
            continue
        if isinstance(layer, QMaxPool):
            kind = "pool"
        elif isinstance(layer, QAvgPool) or layer.groups != 1:
            kind = "grouped"
        else:
            kind = "dense" if layer.kind == "dense" else "conv"
        kernel, stride, out_hw = tuple(layer.kernel), tuple(layer.stride), tuple(layer.out_shape[1:])
        current, view, pending = values[sources[0]]
        src = current
        read_pads = tuple(int(p) for p in layer.pads)
        reshaped = view is not None and view != current.shape
        if kind != "grouped" and _dense_like(layer) and (reshaped or max(current.shape) >= COUNT_LIMIT):
            # The dense layer reads the stored map in place: its kernel is the whole map, the
            # k walk (c, y, x) is the NCHW flatten. The map stays compact, so any (C, H, W) with
            # the same product walks it in the same order: one within the 16-bit counts if needed.
            if max(current.shape) >= COUNT_LIMIT:
                src = alias_of(current, _factor3(_prod(current.shape)) or current.shape)
            kind, kernel, stride, out_hw = "dense", tuple(src.shape[1:]), (1, 1), (1, 1)
            read_pads = (0, 0, 0, 0)
        elif not reshaped:
            require(current, layer)
        elif current is input_map:
            current.shape = view      # INPUT writes the image in the shape its consumer reads
            require(current, layer)
        elif not any(layer.pads):
            src, read_pads = alias_of(current, view), None
        else:
            # A reshape into a padded conv/pool: copy the compact view into a padded map.
            copy_out = FeatureMap(f"{layers[pending[-1]].name} (copy)", view, producer=number,
                                  zero_point=current.zero_point)
            require(copy_out, layer)
            maps.append(copy_out)
            read(current, number)
            steps.append(Step(number, "copy", pending[-1], None, alias_of(current, view), copy_out,
                              (1, 1), (1, 1), tuple(view[1:]), folded_reshapes=list(pending)))
            pending = []
            src = current = copy_out
            number = len(steps) + 1
            dst.producer = number
        read(src, number)
        tile = channel_tile(layer, config.rows) if kind == "grouped" else None
        if tile is not None:
            groups = -(-layer.out_shape[0] // config.rows)
            src.storage.read_channels = max(src.storage.read_channels,
                                            (groups - 1) * tile[1] + tile[0])
        maps.append(dst)
        steps.append(Step(number, kind, index, layer, src, dst, kernel, stride, out_hw,
                          folded_reshapes=list(pending), read_pads=read_pads,
                          channel_tile=tile, diagonal=tile is not None and config.diagonal_weights
                          and _one_channel_each(layer),
                          rows_as_channels=config.pair_products and kind in ("conv", "dense")
                          and src.shape[0] == 1 and kernel[0] > 1))
        values[index] = (dst, None, [])
    output_map, _, trailing = values[len(layers) - 1]
    output_map.last_use = len(steps) + 1
    for m in maps:
        if m.last_use is None:
            m.last_use = m.producer        # read by nothing: live only while written
    _settle_borders(maps)
    for step in steps:
        if step.kind == "add":
            # Element (c, y, x) of the output is written in the tile that reads it from both
            # inputs, so the output may take the bytes of an input that dies at the add.
            step.dst.in_place_of = next(
                (source for source in step.sources if source.last_use == step.number
                 and source.copies == 1 and source is not step.dst), None)
    for step in steps:
        step.lanes = 1 if step.kind == "dense" else max(1, min(config.cols, step.npix))
        if step.pooled:
            step.lanes = 2
    return steps, maps, input_map, output_map, trailing


def _fuses(steps, source, pool, config, readers):
    """Whether the 2x2 max-pool ``pool`` runs fused into the conv step before it (``CONV
    pool``): the configuration has the pooled writes, the pool reads that conv's map alone,
    unpadded, with a 2x2 window and stride 2, the conv has stride 1 and an even output, and the
    fused walk takes fewer beats than the conv and the ``POOL`` (its kernel is a column wider:
    on LeNet-5's first layer 8,820 against 14,112; not on its second)."""
    stored, view, _ = source
    if not (config.fused_max_pool and config.rows >= 2 and steps and steps[-1].kind == "conv"
            and view is None and steps[-1].dst is stored and readers == 1 and stored.parent is None):
        return False
    if (tuple(pool.kernel), tuple(pool.stride), any(pool.pads)) != ((2, 2), (2, 2), False):
        return False
    if config.act_buffer_bytes & (config.act_buffer_bytes - 1):
        return False            # the writes' bases wrap modulo the buffer, as the hardware's
    conv = steps[-1]
    channels, height, width = conv.layer.out_shape
    if tuple(conv.stride) != (1, 1) or height % 2 or width % 2:
        return False
    fused = replace(conv, pool_layer=pool, rows_as_channels=False, pair_columns=config.pair_products)

    def beats(step):
        return engine_beats(dict(zip((Reg.K_C, Reg.K_H, Reg.K_W), step.walk)), config)

    rows, pixels, pooled = config.rows, height * width, height * width // 4
    unfused = (conv.groups(rows) * -(-pixels // min(config.cols, pixels)) * beats(conv)
               + channels * -(-pooled // min(config.cols, pooled)) * 4)
    return fused.passes(rows) * fused.groups(rows) * (width // 2) * beats(fused) < unfused


def _batch_steps(steps, batch):
    """Run the dense layers at the end of ``steps`` once for ``batch`` images; returns the index
    of the first of them.

    The images are the layer's output pixels (``NPIX = OUT_W = LANES = batch``): the first
    dense layer reads image j's copy of its input map ``j*copy_stride`` bytes on
    (``STRIDE_X``), every batched layer writes image j's outputs at ``+ j`` (interleaved maps),
    which the next one reads with ``STRIDE_X = 1``.
    """
    first = next((i for i, step in enumerate(steps) if step.kind == "dense"), None)
    if first is None:
        raise FpganetError(f"--batch {batch}: the network has no dense layer; batching runs the "
                           f"dense layers of several images at once (use --batch 1)")
    for index, step in enumerate(steps[first:], first):
        name = step.layer.name if step.layer is not None else step.dst.name
        if step.kind != "dense" or step.out_hw != (1, 1):
            raise FpganetError(f"--batch {batch}: layer '{name}' ({step.kind}) follows the first "
                               f"dense layer; batching needs the dense layers at the end of the "
                               f"network (use --batch 1)")
        if index > first and (step.src is not steps[index - 1].dst or step.kernel != (1, 1)):
            raise FpganetError(f"--batch {batch}: dense layer '{name}' reads a reshaped map of the "
                               f"previous dense layer, which batching cannot lay out (use --batch 1)")
    slot = steps[first].src.storage
    slot.copies = batch
    for step in steps[first:]:
        step.batched, step.lanes, step.out_hw = True, batch, (1, batch)
        step.dst.copies, step.dst.interleaved = batch, True
    return first


# Pitch search ------------------------------------------------------------------------------

def _read_cost(step, pitch, config, cstride):
    """Bank-conflict cycles of ``step``'s reads from a source map of ``pitch`` and channel
    stride ``cstride`` (all groups): the cycle model's gather cycles beyond one a beat."""
    if step.batched or step.kind == "add":
        # A batched dense layer's lanes are images: they differ by the image stride, not the
        # pitch; an add's lanes read consecutive bytes.
        return 0
    regs = step.read_regs(pitch, cstride=cstride)
    tiles = gather_cycles(regs, config)
    return (int(tiles.sum() - tiles.size * engine_beats(regs, config)) * step.groups(config.rows)
            * step.passes(config.rows))


def _reads_channel_pairs(step, config):
    """``step``'s beats read two channels a lane (:func:`fpganet.perf.pair_beats`), so its
    source's channel stride moves the second read's banks."""
    if step.batched or step.kind == "add":
        return False
    return pair_beats(step.read_regs(1), config)[0] > 0


def _write_cost(step, pitch, config):
    """Bank-conflict cycles of ``step``'s result writes into a destination map of ``pitch``."""
    if step.kind == "add":
        return 0                     # consecutive bytes
    per_row = write_extra_cycles(step.out_hw[1], step.npix, step.lanes, pitch, config.act_banks,
                                 config.requant_lanes)
    return per_row * step.dst.shape[0]


def _choose_pitches(steps, maps, config, search):
    """Pitch of every stored map: its direct readers' reads plus the producer's writes, fewest
    conflict cycles, then the smallest pitch; ``search=False``: the smallest pitch. Maps an add
    ties together get one pitch, chosen for all of them. With ``config.pair_products`` and a
    reader whose beats read two channels, the channel stride too: packed, or up to
    ``act_banks - 1`` bytes more (the same for the tied maps); fewest conflict cycles, then the
    smallest pitch, then the smallest channel stride. A compact map (read by dense layers only)
    keeps its pitch and gets the channel stride search alone."""
    readers, producers = {}, {id(step.dst): step for step in steps}
    for step in steps:
        for source in step.sources:
            readers.setdefault(id(source), []).append(step)
    done = set()
    for stored in maps:
        if id(stored) in done:
            continue
        group = stored.tie or [stored]
        done.update(id(member) for member in group)
        smallest = max(member.padded_w for member in group)
        for member in group:
            member.pitch_costs = {}
        costed = [member for member in group if member.role in ("conv", "pool")
                  and readers.get(id(member))]
        pair_read = any(_reads_channel_pairs(step, config)
                        for member in group for step in readers.get(id(member), []))
        # A pooled conv writes channel c's bytes at rows 2c + 1 of a half channel stride.
        even = any(id(member) in producers and producers[id(member)].pooled for member in group)

        def odd_cstrides(pitch, slack):
            return even and any((member.packed_cstride(pitch) + slack) % 2 for member in group)

        if not search or not (costed or pair_read) or any(member.viewed for member in group):
            for member in group:
                member.set_pitch(smallest, int(odd_cstrides(smallest, 0)))
            continue
        best = None
        slacks = range(config.act_banks if pair_read else 2 if even else 1)
        # A compact map (a dense layer's input) keeps its pitch; its channel stride may move.
        pitches = range(smallest, smallest + (config.act_banks if costed else 1))
        for pitch in pitches:
            writes = sum(_write_cost(producers[id(member)], pitch, config) for member in group
                         if id(member) in producers)
            at_pitch = None
            for slack in slacks:
                if odd_cstrides(pitch, slack):
                    continue
                cost = writes + sum(_read_cost(step, pitch, config, member.packed_cstride(pitch) + slack)
                                    for member in group for step in readers.get(id(member), []))
                if at_pitch is None or cost < at_pitch[0]:
                    at_pitch = (cost, pitch, slack)
                if cost == 0:
                    break
            for member in costed:
                member.pitch_costs[pitch] = at_pitch[0]
            if best is None or at_pitch[0] < best[0]:
                best = at_pitch
            if best[0] == 0:
                break
        for member in group:
            member.set_pitch(best[1], best[2])
    for step in steps:
        if step.kind == "add":
            # The flat walk: rows pt .. pt+H-1 of the padded maps, all pitch bytes of each but
            # the last, whose walk ends at the right border.
            dst = step.dst
            step.out_hw = (1, (dst.shape[1] - 1) * dst.pitch + dst.padded_w)
            step.lanes = max(1, min(config.cols, step.npix))
    for stored in maps:
        if stored.interleaved:
            # Image j's channel c at origin + c*B + j: a batched dense layer writes, and the next
            # one reads, B consecutive bytes, which fall in B different banks (B <= act_banks).
            stored.cstride, stored.copy_stride = stored.copies, 1
        elif stored.copies > 1:
            reader = next(step for step in steps if step.batched and step.src.storage is stored)
            stored.copy_stride = _image_stride(stored, reader, config, search)


def _image_stride(slot, reader, config, search):
    """Bytes between the images' copies of ``slot``, which the batched dense layer ``reader``
    reads with lane j at ``j*stride``: from the copy's span up, the first stride that puts the
    lanes' reads in different banks (with pair products each lane reads two channels, and the
    slot's channel stride may move too: up to ``act_banks - 1`` bytes more), else the one with
    the fewest conflict cycles, as the cycle model counts them; ``search=False``: the span."""
    if not search:
        return slot.image_span
    banks, pitch = config.act_banks, slot.pitch
    regs = reader.read_regs(pitch, cstride=slot.cstride)
    slacks = range(banks) if pair_beats(regs, config)[0] else range(1)
    best = None
    for slack in slacks:
        slot.set_pitch(pitch, slack)
        span = slot.image_span
        for stride in range(span, span + banks):
            regs.update({Reg.IN_CSTRIDE: slot.cstride, Reg.STRIDE_X: stride})
            cost = int(gather_cycles(regs, config).sum() - engine_beats(regs, config))
            if best is None or cost < best[0]:
                best = (cost, slack, stride)
            if cost == 0:
                break
        if best[0] == 0:
            break
    slot.set_pitch(pitch, best[1])
    return best[2]


# Allocation --------------------------------------------------------------------------------

#: Orders in which the first fit places maps; the one that needs the fewest bytes wins (ties:
#: the first). Largest first packs chains well; in production order, maps of a residual network
#: that live side by side stack the way they are born.
PLACEMENT_ORDERS = {
    "largest first": lambda m: (-m.span, m.producer),
    "production order": lambda m: (m.producer, -m.span),
    "longest lived first": lambda m: (m.producer - m.last_use, -m.span, m.producer),
}


def _first_fit(maps, interval, order):
    placed = []
    for m in sorted(maps, key=order):
        start, stop = interval(m)
        busy = sorted((p.base, p.base + p.span) for p in placed
                      if interval(p)[0] <= stop and start <= interval(p)[1])
        offset = 0
        for lo, hi in busy:
            if offset + m.span <= lo:
                break
            offset = max(offset, hi)
        m.base = offset
        placed.append(m)
    return max((m.base + m.span for m in maps), default=0)


def _host(m):
    """The map whose bytes ``m`` occupies: itself, or what it was written over in place."""
    while m.in_place_of is not None:
        m = m.in_place_of
    return m


def _allocate(maps, mode):
    """Base addresses by first fit in the best of :data:`PLACEMENT_ORDERS`; returns the bytes
    used. ``mode``: disjoint, pinned-borders, liveness. A map written in place takes its
    host's bytes, which stay busy until the last of them dies."""
    end = max(m.last_use for m in maps) + 1
    last_use = {}
    for m in maps:
        host = _host(m)
        last_use[id(host)] = max(last_use.get(id(host), 0), m.last_use)
    hosts = [m for m in maps if m.in_place_of is None]

    def interval(m):
        if mode == "disjoint" or (mode == "pinned-borders" and m.padded):
            return (-1, end)
        if m.copies > 1 and not m.interleaved:
            # The batch slot: image j's copy must survive the next images' layers, from INPUT on.
            return (0, m.last_use)
        return (m.producer, last_use[id(m)])

    used = {name: _first_fit(hosts, interval, order) for name, order in PLACEMENT_ORDERS.items()}
    best = min(used, key=used.get)
    if best != list(used)[-1]:
        _first_fit(hosts, interval, PLACEMENT_ORDERS[best])
    for m in maps:
        m.base = _host(m).base
    for m in maps:
        m.fill_per_image = m.padded and any(
            other is not m and other.base < m.base + m.span and m.base < other.base + other.span
            for other in maps)
    return used[best]


# The plan ----------------------------------------------------------------------------------

#: Layouts tried in order until one fits the activation buffer: (search pitches, allocation).
ATTEMPTS = ((True, "disjoint"), (True, "pinned-borders"), (True, "liveness"),
            (False, "disjoint"), (False, "pinned-borders"), (False, "liveness"))


def smallest_act_bytes(net, config=None, batch=1):
    """The fewest activation bytes any layout the planner tries needs for ``net`` (at ``batch``)."""
    config = (config or net.config).replace(act_buffer_bytes=1 << 30)
    return min(a["bytes"] for a in plan_network(net, config, explore=True, batch=batch).attempts)


def _check_mult_bits(net, config):
    """Every multiplier is a multiple of ``config.mult_step``: the requantizer reads only the
    top ``requant_mult_bits`` of each."""
    if config.mult_step == 1:        # whole multipliers; the tflite mode always has them
        return
    for layer in net.layers:
        mult = np.atleast_1d(getattr(layer, "mult", np.zeros(1, np.int64)))
        finer = np.flatnonzero(mult % config.mult_step)
        if finer.size:
            raise FpganetError(f"layer '{layer.name}': multiplier {int(mult[finer[0]])} has more "
                               f"than the {config.requant_mult_bits} significant bits this "
                               f"{config.name} configuration's requantizer keeps "
                               f"(--requant-mult-bits): compile the model for it")


def plan_network(net, config=None, explore=False, batch=1):
    """Plan ``net`` for ``config`` (default: the configuration it was compiled for).

    The first layout of :data:`ATTEMPTS` that fits the activation buffer is taken
    (``explore``: every layout is still measured, in ``Plan.attempts``). ``batch`` > 1 runs the
    dense layers at the end of the network once for groups of ``batch`` images (1..cols).

    Returns
    -------
    Plan

    Raises
    ------
    fpganet.errors.FpganetError
        A layer the accelerator cannot run, or a network that does not fit the activation,
        weight or parameter buffer (one line naming the buffer, needed and available bytes).
    """
    config = config or net.config
    if config.requant_mode != net.config.requant_mode:
        raise FpganetError(f"the network's multipliers are for the {net.config.requant_mode} "
                           f"requantization; this {config.name} configuration has the "
                           f"{config.requant_mode} one (--requant-mode)")
    net.validate()
    if config.operand_width != 8:
        raise FpganetError(f"the back end generates int8 programs; the {config.name} configuration "
                           f"has {config.operand_width}-bit operands (--operand-width)")
    for layer in net.conv_layers:
        layer.validate(config.acc_width, config.requant_mode)   # the no-overflow rule, the ranges
    _check_mult_bits(net, config)
    if not 1 <= batch <= config.cols:
        raise FpganetError(f"--batch {batch}: must be 1..{config.cols} (one image per array "
                           f"column; the {config.name} configuration has {config.cols})")
    steps, maps, input_map, output_map, trailing = _lower(net, config)
    plan = Plan(net, config, steps, maps, input_map, output_map, batch=batch)
    if batch > 1:
        plan.first_batched = _batch_steps(steps, batch)
    for step in steps:
        for index in step.folded_reshapes:
            plan.reshape_steps[index] = step if step.kind == "copy" else "free"
    for index in trailing:
        plan.reshape_steps[index] = "free"

    best = None
    for search, mode in ATTEMPTS:
        _choose_pitches(steps, maps, config, search)
        used = _allocate(maps, mode)
        pitches = "searched" if search else "compact"
        plan.attempts.append({"pitches": pitches, "allocation": mode, "bytes": used})
        best = used if best is None else min(best, used)
        if used <= config.act_buffer_bytes and not plan.allocation:
            plan.allocation, plan.pitches, plan.act_bytes = mode, pitches, used
            if not explore:
                break
    if explore and plan.allocation:
        search, mode = next(a for a in ATTEMPTS if a[1] == plan.allocation and
                            ("searched" if a[0] else "compact") == plan.pitches)
        _choose_pitches(steps, maps, config, search)
        _allocate(maps, mode)
    # Every buffer that is too small, in one line: a board that cannot hold a network says
    # all it lacks.
    shortfalls = []
    if not plan.allocation:
        shortfalls.append(capacity_error("activation buffer", best, config.act_buffer_bytes, config,
                                         "--act-buffer-bytes" if batch == 1 else
                                         f"--act-buffer-bytes, or a --batch below {batch}"))
    for step in steps:
        if step.src.parent is not None:
            step.src.base = step.src.parent.base
        if step.batched:
            step.stride = (1, step.src.storage.copy_stride)

    words = entries = 0
    for step in steps:
        step.w_base, step.p_base = words, entries
        words += step.weight_words(config)
        entries += step.param_entries(config.rows)
    plan.weight_words, plan.param_entries = words, entries
    if words > config.weight_buffer_words:
        shortfalls.append(capacity_error("weight buffer", words * config.weight_word_bytes,
                                         config.weight_buffer_words * config.weight_word_bytes,
                                         config, "--weight-buffer-bytes",
                                         f"{words:,} words of {config.weight_word_bytes} bytes",
                                         f"{config.weight_buffer_words:,} words"))
    if entries > config.bias_buffer_words:
        shortfalls.append(capacity_error("parameter buffer", entries * 8,
                                         config.bias_buffer_words * 8, config, "--bias-buffer-words",
                                         f"{entries:,} entries of 8 bytes",
                                         f"{config.bias_buffer_words:,} entries"))
    if shortfalls:
        raise FpganetError("; ".join(str(error) for error in shortfalls))
    return plan
