"""What one image costs: per-layer MACs, memory traffic, host bytes and cycles.

A :class:`Workload` is computed from a compiled network (:class:`fpganet.qnet.QNetwork`)
and the accelerator configuration. Cycles come from the project's performance
model ``fpganet.perf`` timing the back end's program (:func:`simulated_cycles`);
when that cannot run (a network the back end refuses, or ``simulate=False``) from
one of two labelled fallbacks, neither simulated:

``ideal``
    ``MACs / (rows * cols)``: every multiplier busy every cycle (an upper
    bound on speed that no real array reaches);
``tiled``
    the engine loop of docs/reference/architecture.md counted tile by tile: each tile of
    ``rows`` output channels x ``LANES`` output pixels streams ``K`` beats, at
    least ``min_tile_cycles = array_latency + rows`` and at least the
    post-processing time ``rows * LANES / requant_lanes``; a dense layer at
    batch 1 uses one lane. Bank conflicts, FILL, INPUT/OUTPUT and instruction
    overheads are not counted.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from .. import perf
from ..codegen import build_images
from ..codegen.plan import channel_tile, stores_binary_layer
from ..config import AcceleratorConfig
from ..errors import FpganetError
from ..isa import BINARY_WEIGHT_BEATS, PACKED_WEIGHT_BITS
from .layer_table import plan_weight_bytes
from .quantity import Quantity

__all__ = ["LayerWork", "Workload", "simulated_cycles", "cycles_per_image", "CYCLE_MODELS"]

CYCLE_MODELS = ("ideal", "tiled")

#: What :func:`simulated_cycles` expects of ``fpganet.perf``.

@dataclass
class LayerWork:
    """One layer's work per image on a ``rows x cols`` array.

    Attributes
    ----------
    name, type : str
        Layer name; ``"conv"``, ``"dense"``, ``"maxpool"`` or ``"reshape"``.
    macs : int
        Useful multiply-accumulates.
    weight_bytes : int
        int8 weights (0 for pooling and reshapes).
    act_in_bytes, act_out_bytes : int
        int8 feature map read and written (unpadded tensor sizes).
    k, groups, tiles, lanes : int
        Reduction length, output-channel tiles (pool: channels), pixel tiles, lanes used.
    beats : int
        Operand beats into the engine (``groups * tiles * k``).
    weight_word_reads : int
        Weight-buffer words read (one per conv/dense beat).
    act_reads, act_writes : int
        Activation-buffer bytes gathered (valid lanes only) and written back.
    ideal_cycles : float
        ``macs / (rows * cols)``.
    tiled_cycles : int
        The tile-by-tile count (module docstring).
    """

    name: str
    type: str
    macs: int = 0
    weight_bytes: int = 0
    act_in_bytes: int = 0
    act_out_bytes: int = 0
    k: int = 0
    groups: int = 0
    tiles: int = 0
    lanes: int = 0
    beats: int = 0
    weight_word_reads: int = 0
    act_reads: int = 0
    act_writes: int = 0
    ideal_cycles: float = 0.0
    tiled_cycles: int = 0

    def to_dict(self):
        return dict(self.__dict__)


@dataclass
class Workload:
    """Per-image work of a network on an accelerator configuration.

    Build it with :meth:`from_network`. All counts are per image.
    """

    name: str
    config: AcceleratorConfig
    layers: list
    input_bytes: int
    output_bytes: int
    param_bytes: int
    notes: list = field(default_factory=list)

    @classmethod
    def from_network(cls, net, config=None):
        """Count the work of ``net`` (a :class:`fpganet.qnet.QNetwork`) on ``config``.

        ``config`` defaults to the configuration the network was compiled for.
        """
        config = config or net.config
        layers = [_layer_work(layer, config) for layer in net.layers]
        convs = [layer for layer in net.layers if layer.type == "conv"]
        name = (net.source or {}).get("file") or net.input_name
        work = cls(name=name, config=config, layers=layers,
                   input_bytes=int(np.prod(net.input_chw)),
                   output_bytes=int(np.prod(net.output_shape)),
                   param_bytes=8 * sum(layer.out_shape[0] for layer in convs))
        packed = any(config.stores_packed(layer.weight_bits) for layer in convs)
        binary = any(stores_binary_layer(layer, config) for layer in convs)
        stored = ([f"those of {PACKED_WEIGHT_BITS} bits or fewer two to a byte"] * packed
                  + ["those of -1 and +1 eight"] * binary)
        if stored:
            work.weight_text = f"weights ({', '.join(stored)})"
        return work

    # Totals ----------------------------------------------------------------------------------

    @property
    def macs(self):
        return sum(layer.macs for layer in self.layers)

    @property
    def ops(self):
        """Operations per image, counting a MAC as two (multiply and add), as MLPerf's 8.2 GOP does."""
        return 2 * self.macs

    @property
    def weight_bytes(self):
        return sum(layer.weight_bytes for layer in self.layers)

    @property
    def weight_word_reads(self):
        return sum(layer.weight_word_reads for layer in self.layers)

    @property
    def act_reads(self):
        return sum(layer.act_reads for layer in self.layers)

    @property
    def act_writes(self):
        return sum(layer.act_writes for layer in self.layers)

    @property
    def beats(self):
        return sum(layer.beats for layer in self.layers)

    @property
    def ideal_cycles(self):
        return self.macs / self.config.macs_per_cycle

    @property
    def tiled_cycles(self):
        return sum(layer.tiled_cycles for layer in self.layers)

    @property
    def compute_layers(self):
        """Layers that run on the engine (conv, dense, maxpool)."""
        return [layer for layer in self.layers if layer.type != "reshape"]

    @property
    def feature_map_bytes(self):
        """int8 activation bytes read and written by all layers: a GPU's DRAM traffic per image
        when no layer's output stays in cache (reshapes move nothing)."""
        return sum(layer.act_in_bytes + layer.act_out_bytes for layer in self.compute_layers)

    @property
    def weights_fit_on_chip(self):
        return self.weight_bytes <= self.config.weight_buffer_bytes

    @property
    def setup_bytes(self):
        """Bytes the host loads once per session before the first image."""
        return self.weight_bytes + self.param_bytes

    #: How the report names the weights.
    weight_text = "int8 weights"

    def gpu_kernels(self):
        """Dependent GPU kernels per inference: one per conv/dense/pool layer, quantize + dequantize,
        and two copies (see figures.GPU_KERNEL_OVERHEAD)."""
        return len(self.compute_layers) + 2 + 2

    def summary(self):
        """Plain data for JSON."""
        return {"name": self.name, "macs": self.macs, "ops": self.ops,
                "weight_bytes": self.weight_bytes, "param_bytes": self.param_bytes,
                "input_bytes": self.input_bytes, "output_bytes": self.output_bytes,
                "weight_word_reads": self.weight_word_reads, "weight_word_bytes":
                self.config.weight_word_bytes, "act_reads": self.act_reads,
                "act_writes": self.act_writes, "feature_map_bytes": self.feature_map_bytes,
                "layers": [layer.to_dict() for layer in self.layers]}


def _stored_weight_bytes(layer, config):
    """Bytes a conv's weights take: one a weight, half as many (rounded up) where the
    configuration packs the layer (``CONV packed``: ``packed_weights`` and weights of
    :data:`fpganet.isa.PACKED_WEIGHT_BITS` bits or fewer)."""
    size = int(layer.weight.size)
    if stores_binary_layer(layer, config):
        return -(-size // BINARY_WEIGHT_BEATS)
    return -(-size // 2) if config.stores_packed(layer.weight_bits) else size


def _layer_work(layer, config):
    rows, cols = config.rows, config.cols
    min_tile = config.array_latency + rows      # SystolicArray.min_tile_cycles (docs/reference/architecture.md)
    drain = config.array_latency + rows         # the last tile's results leave the array
    out_c, out_h, out_w = layer.out_shape
    npix = out_h * out_w
    work = LayerWork(name=layer.name, type=getattr(layer, "kind", layer.type),
                     act_in_bytes=int(np.prod(layer.in_shape)),
                     act_out_bytes=int(np.prod(layer.out_shape)))
    if layer.type == "reshape":
        work.act_in_bytes = work.act_out_bytes = 0
        return work
    lanes = min(cols, npix)
    tiles = math.ceil(npix / lanes)
    if layer.type in ("conv", "add", "avgpool"):
        # Grouped, depthwise, average pool and add run block-diagonal: each group of rows
        # output channels walks its own input channels (fpganet.codegen.plan).
        groups = math.ceil(out_c / rows)
        if layer.type == "add":
            k = 2 * rows        # one flat walk over both maps (the pitch's slack ignored)
        elif layer.type == "avgpool" or layer.groups != 1:
            k = channel_tile(layer, rows)[0] * layer.kernel[0] * layer.kernel[1]
        else:
            k = layer.k
        post = math.ceil(rows * lanes / config.requant_lanes)
        work.macs = int(layer.macs)
        work.weight_bytes = _stored_weight_bytes(layer, config) if layer.type == "conv" else 0
        work.weight_word_reads = groups * tiles * k
        work.act_reads = groups * k * npix
        work.act_writes = out_c * npix
        tile_cycles = max(k, min_tile, post)
    else:                               # max pooling: one channel per group, K = kh * kw
        k = layer.kernel[0] * layer.kernel[1]
        groups = out_c
        work.act_reads = groups * k * npix
        work.act_writes = out_c * npix
        tile_cycles = max(k, math.ceil(lanes / config.requant_lanes))
    work.k, work.groups, work.tiles, work.lanes = k, groups, tiles, lanes
    work.beats = groups * tiles * k
    work.ideal_cycles = work.macs / config.macs_per_cycle
    work.tiled_cycles = groups * tiles * tile_cycles + drain
    return work


# Cycles ----------------------------------------------------------------------------------

def simulated_cycles(net, config=None, batch=1):
    """Cycles per image from the project's performance model (equal to the RTL's by test).

    The compiler back end's program (``fpganet.codegen.build_images``, at ``batch``) timed by
    ``fpganet.perf.program_cycles``: cycles per image = ((program for 2B images) - (program
    for B images)) / B, the steady state of the loop; per-layer cycles from the first pass's
    CONV/POOL instructions mapped to layers through the instruction ranges of the plan's steps
    (a step run once for B images counting a B-th; a conv's fused max-pool counting as the
    conv's).


    Returns
    -------
    dict or None
        ``total``, ``per_layer`` (list or None), ``io_cycles`` (INPUT and OUTPUT cycles
        per image, streams never stalling), ``basis``; or None when the back end
        refuses the network for ``config``, with its reason in
        ``simulated_cycles.last_reason``.
    """
    config = config or net.config
    simulated_cycles.last_reason = None
    try:
        return _program_cycles(net, config, perf, batch)
    except FpganetError as error:
        simulated_cycles.last_reason = f"no simulated cycles: {' '.join(str(error).split())}"
        return None


simulated_cycles.last_reason = None


def _program_cycles(net, config, perf, batch):
    images = build_images(net, n_images=batch, config=config, batch=batch)
    one = perf.program_cycles(images.program_for(batch), config)
    two = perf.program_cycles(images.program_for(2 * batch), config)

    def per_image(cycles):
        return int(cycles) // batch if cycles % batch == 0 else cycles / batch

    total = per_image(two.total - one.total)
    per_image_ops = {}
    for name, cycles in two.by_opcode().items():
        per_image_ops[name] = per_image(cycles - one.by_opcode().get(name, 0))
    io = per_image_ops.get("INPUT", 0) + per_image_ops.get("OUTPUT", 0)
    engine = {r.pc: r.cycles for r in one.instructions if r.opcode.name in ("CONV", "POOL")}
    plan = images.plan
    per_layer = [0] * len(net.layers)
    for entry in images.layout["layers"]:
        for step in entry.get("steps", []):
            first, end = step["instructions"]
            per_layer[entry["index"]] += sum(engine.get(pc, 0) for pc in range(first, end))
    for step in plan.group_steps:
        per_layer[step.layer_index] = per_image(per_layer[step.layer_index])
    other = total - sum(per_layer)
    program = ("program for 2 images - program for 1" if batch == 1 else
               f"(program for {2 * batch} images - program for {batch}) / {batch}, compiled with "
               f"--batch {batch}")
    basis = (f"fpganet.perf.program_cycles on the fpganet.codegen program (equal to the RTL "
             f"cycle counter by test): steady-state cycles per image = {program}; {other:,} of "
             f"them outside the engine (SET, INPUT, OUTPUT, STAMP, LOOP), of which INPUT and "
             f"OUTPUT at one byte per cycle {io:,}")
    return {"total": total, "per_layer": per_layer, "io_cycles": io, "basis": basis,
            "by_opcode": per_image_ops,
            "weight_bytes": plan_weight_bytes(plan, config, len(net.layers))}


def cycles_per_image(workload, net=None, *, cycles=None, layer_cycles=None, model="ideal",
                     cycles_source="simulated", cycles_basis=None, simulate=True, batch=1):
    """The cycles per image to use, as a Quantity, and per-layer cycles with their source.

    Order of preference: ``cycles``/``layer_cycles`` given by the caller (e.g. measured
    on the board or in RTL simulation, labelled ``cycles_source`` with ``cycles_basis``);
    ``fpganet.perf`` (simulated); the ``model`` fallback (estimated, "ideal, not
    simulated" or "tiled, not simulated"). Where no per-layer cycles come with the
    total, the tiled estimate's per-layer cycles are returned, labelled so.
    ``simulate=False`` skips fpganet.perf (forces the fallback); ``batch``: the program's
    (``--batch``).

    Returns
    -------
    total : Quantity
    per_layer : list of int
    per_layer_source : str
        ``"given"``, ``"simulated (engine instructions per layer)"`` or
        ``"estimated (tiled, not simulated)"``.
    """
    if model not in CYCLE_MODELS:
        raise ValueError(f"cycle model must be one of {CYCLE_MODELS}, not {model!r}")
    tiled_layers = [layer.tiled_cycles for layer in workload.layers]
    if layer_cycles is not None:
        layer_cycles = [int(c) for c in layer_cycles]
        if len(layer_cycles) != len(workload.layers):
            raise ValueError(f"layer_cycles has {len(layer_cycles)} entries; the network has "
                             f"{len(workload.layers)} layers")
        if cycles is None:
            cycles = sum(layer_cycles)
    if cycles is not None:
        total = Quantity(int(cycles), "cycles", cycles_source,
                         cycles_basis or "given by the caller (RTL simulation or the board's "
                                         "cycle counter)")
        if layer_cycles is None:
            return total, tiled_layers, "estimated (tiled, not simulated)"
        return total, layer_cycles, "given"
    reason = "fpganet.perf not consulted (no network given)"
    if net is not None and not simulate:
        reason = "the simulated cycles were not asked for"
    elif net is not None:
        found = simulated_cycles(net, workload.config, batch)
        if found is not None:
            # The plan's stored weight bytes ride along, for the layer table (planned once).
            total = Quantity(found["total"], "cycles", "simulated", found["basis"],
                             extra={"io_cycles": found["io_cycles"],
                                    "_layer_weight_bytes": found["weight_bytes"]})
            if found["per_layer"] is None:
                return total, tiled_layers, "estimated (tiled, not simulated)"
            return total, found["per_layer"], "simulated (engine instructions per layer)"
        reason = simulated_cycles.last_reason
    if model == "ideal":
        total = Quantity(workload.ideal_cycles, "cycles", "estimated",
                         f"ideal, not simulated: MACs / (rows x cols) = {workload.macs:,} / "
                         f"{workload.config.macs_per_cycle} (every multiplier busy every cycle; "
                         f"{reason})",
                         extra={"fallback": "ideal"})
    else:
        total = Quantity(workload.tiled_cycles, "cycles", "estimated",
                         f"tiled, not simulated: engine tiles counted per layer, "
                         f"max(K, array latency + rows, rows x lanes / requant_lanes) cycles per tile; "
                         f"bank conflicts, FILL, INPUT/OUTPUT and instruction overheads not "
                         f"counted ({reason})",
                         extra={"fallback": "tiled"})
    return total, tiled_layers, "estimated (tiled, not simulated)"
