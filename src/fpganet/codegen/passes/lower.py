"""Pass ``lower``: the network's layers as engine steps over stored feature maps.

One handler per layer type (:data:`HANDLERS`). A reshape is folded into its reader: the
stored map is read in place where it can be (a dense layer reads any map as its whole
kernel; an unpadded reader reads a compact map through a view; ``INPUT`` writes the first
map in whatever shape its consumer wants), else a ``copy`` step (``POOL`` 1x1) moves it
into the padded layout its reader needs. Fusion, liveness, batching and layouts are later
passes.
"""

import numpy as np

from ...errors import FpganetError
from ...qnet import NETWORK_INPUT, QAdd, QAvgPool, QConv, QMaxPool, QReshape, output_zero_point
from ..ir import COUNT_LIMIT, POOL_PAD_VALUE, FeatureMap, Step, channel_tile

__all__ = ["lower", "HANDLERS"]


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


def _require(stored, layer):
    """``layer`` reads ``stored`` directly: its padding (the largest of the readers) and
    border value."""
    pads = tuple(int(p) for p in layer.pads)
    stored.pads = tuple(max(old, new) for old, new in zip(stored.pads, pads))
    pool = isinstance(layer, QMaxPool)
    if any(pads):
        stored.fill_demands.add(POOL_PAD_VALUE if pool else int(layer.zp_in))
    if stored.role in ("compact", "add") or pool:
        stored.role = "pool" if pool else "conv"


def _alias_of(stored, shape):
    stored.viewed = True
    alias = FeatureMap(f"{stored.name} as {'x'.join(map(str, shape))}", tuple(shape),
                       parent=stored, role="view")
    alias.set_pitch(shape[2])
    return alias


def _lanes(step, config):
    """Output pixels a tile computes: one array column each (a dense layer's one pixel: 1)."""
    return 1 if step.kind == "dense" else max(1, min(config.cols, step.npix))


class _Lowering:
    """The steps and maps so far, and per layer output ``(stored map, reshaped view of it or
    None, reshape layers folded so far)``."""

    def __init__(self, plan):
        self.plan, self.config, self.layers = plan, plan.config, list(plan.net.layers)
        net = plan.net
        plan.input_map = FeatureMap("input", tuple(net.input_chw), zero_point=int(net.input_zp))
        plan.maps.append(plan.input_map)
        self.values = {NETWORK_INPUT: (plan.input_map, None, [])}

    def append(self, kind, index, layer, src, dst, kernel, stride, out_hw, **fields):
        """A new step numbered after the last (fusion renumbers them), its lanes set."""
        step = Step(len(self.plan.steps) + 1, kind, index, layer, src, dst, tuple(kernel),
                    tuple(stride), tuple(out_hw), **fields)
        step.lanes = _lanes(step, self.config)
        self.plan.steps.append(step)
        return step

    def output(self, index, layer):
        dst = FeatureMap(layer.name, tuple(layer.out_shape), zero_point=int(output_zero_point(layer)))
        self.plan.maps.append(dst)
        self.values[index] = (dst, None, [])
        return dst

    def reshape(self, index, layer, sources):
        stored, _, pending = self.values[sources[0]]
        self.values[index] = (stored, tuple(layer.out_shape), pending + [index])

    def add(self, index, layer, sources):
        """A ``CONV`` over both maps in one flat walk: they and the output are tied to one
        geometry, and a group's last channel tile reads past each input."""
        rows = self.config.rows
        pair, folded = [], []
        for source in sources:
            stored, view, pending = self.values[source]
            if view is not None and view != stored.shape or stored.parent is not None:
                raise FpganetError(f"layer '{layer.name}': an add of a reshaped map, which "
                                   f"the accelerator cannot lay out for its flat walk")
            stored.read_channels = max(stored.read_channels, -(-stored.shape[0] // rows) * rows)
            if stored.role == "compact":
                stored.role = "add"
            pair.append(stored)
            folded += pending
        dst = self.output(index, layer)
        _merge_ties(*pair, dst)
        self.append("add", index, layer, pair[0], dst, (rows, 1), (1, 1), (1, 1),
                    folded_reshapes=folded, src_b=pair[1])

    def copy(self, stored, view, pending, reader):
        """A reshape into a padded conv/pool: a ``POOL`` 1x1 copies the compact view into a
        padded map, which the reader then reads."""
        copy_out = FeatureMap(f"{self.layers[pending[-1]].name} (copy)", view,
                              zero_point=stored.zero_point)
        _require(copy_out, reader)
        self.plan.maps.append(copy_out)
        self.append("copy", pending[-1], None, _alias_of(stored, view), copy_out, (1, 1), (1, 1),
                    view[1:], folded_reshapes=list(pending))
        return copy_out

    def engine_layer(self, index, layer, sources):
        """A conv, dense, grouped (depthwise, grouped conv, average pool) or max-pool step."""
        if isinstance(layer, QMaxPool):
            kind = "pool"
        elif isinstance(layer, QAvgPool) or layer.groups != 1:
            kind = "grouped"
        else:
            kind = "dense" if layer.kind == "dense" else "conv"
        kernel, stride, out_hw = tuple(layer.kernel), tuple(layer.stride), tuple(layer.out_shape[1:])
        current, view, pending = self.values[sources[0]]
        src, read_pads = current, tuple(int(p) for p in layer.pads)
        reshaped = view is not None and view != current.shape
        if kind != "grouped" and _dense_like(layer) and (reshaped or max(current.shape) >= COUNT_LIMIT):
            # The dense layer reads the stored map in place: its kernel is the whole map, the
            # k walk (c, y, x) is the NCHW flatten. The map stays compact, so any (C, H, W) with
            # the same product walks it in the same order: one within the 16-bit counts if needed.
            if max(current.shape) >= COUNT_LIMIT:
                src = _alias_of(current, _factor3(int(np.prod(current.shape))) or current.shape)
            kind, kernel, stride, out_hw = "dense", tuple(src.shape[1:]), (1, 1), (1, 1)
            read_pads = (0, 0, 0, 0)
        elif not reshaped:
            _require(current, layer)
        elif current is self.plan.input_map:
            current.shape = view      # INPUT writes the image in the shape its consumer reads
            _require(current, layer)
        elif not any(layer.pads):
            src, read_pads = _alias_of(current, view), None
        else:
            src, pending = self.copy(current, view, pending, layer), []
        tile = channel_tile(layer, self.config.rows) if kind == "grouped" else None
        if tile is not None:
            groups = -(-layer.out_shape[0] // self.config.rows)
            src.storage.read_channels = max(src.storage.read_channels,
                                            (groups - 1) * tile[1] + tile[0])
        config = self.config
        step = self.append(kind, index, layer, src, self.output(index, layer), kernel, stride,
                           out_hw, folded_reshapes=list(pending), read_pads=read_pads,
                           channel_tile=tile, diagonal=tile is not None and config.diagonal_weights
                           and _one_channel_each(layer),
                           rows_as_channels=config.pair_products and kind in ("conv", "dense")
                           and src.shape[0] == 1 and kernel[0] > 1)
        step.binary = _stores_binary(step, config)
        step.packed = not step.binary and isinstance(layer, QConv) \
            and config.stores_packed(layer.weight_bits)


def _stores_binary(step, config):
    """A conv or dense step whose weights are all -1 or +1 is a ``CONV binary`` where the
    configuration has it, unless with pair products the array would read a zero weight byte
    (the odd half of the last channel pair, with an odd number of channels in the walk)."""
    if step.kind not in ("conv", "dense") or config.pair_products and step.walk[0] % 2:
        return False
    return config.stores_binary(step.layer.weight_matrix)


def stores_binary_layer(layer, config):
    """:func:`_stores_binary` from the layer alone, before planning (the estimator's stored
    bytes, the compile printout): a conv's walk runs over its input channels, or over its
    kernel rows where one input channel has them walk as channels with pair products. A
    dense layer that reads a map in place walks a factored shape the plan chooses: not
    modelled."""
    if not isinstance(layer, QConv) or layer.groups != 1 or not config.stores_binary(layer.weight):
        return False
    channels = layer.in_shape[0]
    if channels == 1 and layer.kernel[0] > 1:
        channels = layer.kernel[0]
    return not (config.pair_products and channels % 2)


#: The lowering of each layer type (anything else is refused).
HANDLERS = {QReshape: _Lowering.reshape, QAdd: _Lowering.add, QConv: _Lowering.engine_layer,
            QMaxPool: _Lowering.engine_layer, QAvgPool: _Lowering.engine_layer}


def lower(plan):
    """Reads ``plan.net`` and ``plan.config``; writes ``plan.input_map``, ``plan.output_map``,
    ``plan.maps`` (every stored map, in production order: padding and border demands of their
    readers, the role that decides their layout, ties of an add's maps), ``plan.steps`` (one a
    layer, and a ``copy`` where a reshape feeds a padded reader; lanes set) and
    ``plan.reshape_steps`` (each reshape's cost: ``"free"`` or its copy step)."""
    lowering = _Lowering(plan)
    for index, layer in enumerate(lowering.layers):
        handler = next((handler for kind, handler in HANDLERS.items() if isinstance(layer, kind)),
                       None)
        if handler is None:
            raise FpganetError(f"layer '{getattr(layer, 'name', index)}': the accelerator has no "
                               f"instruction for a {type(layer).__name__}")
        handler(lowering, index, layer, plan.net.layer_inputs(index))
    plan.output_map, _, trailing = lowering.values[len(lowering.layers) - 1]
    for step in plan.steps:
        for index in step.folded_reshapes:
            plan.reshape_steps[index] = step if step.kind == "copy" else "free"
    for index in trailing:
        plan.reshape_steps[index] = "free"
