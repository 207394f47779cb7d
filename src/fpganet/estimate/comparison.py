"""Putting it together: one estimate, as JSON, a text table, and a Markdown report with plots.

:func:`estimate` runs every model for a compiled network on a board and returns an
:class:`Estimate`; :meth:`Estimate.to_json` gives JSON in which every figure carries
its value, unit, source and basis; :meth:`Estimate.table` a plain-text table;
:func:`report` writes ``report.md``, ``estimate.json`` and PNG plots into a folder.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import FpganetError
from ..files import staged_directory
from ..qnet import short_name
from . import figures
from .activity import resolve_activity
from .asic import NODES, asic_projection, synthesize, synthesize_design
from .gpu import DEFAULT_GPUS, gpu_rows
from .layer_table import FUSED, layer_table, stored_weight_bytes
from .measure import measure_network
from .power import accelerator_power, canonical_resources, configured_resources, marlann_check
from .quantity import Quantity, quantity_dict, ratio
from .throughput import (BOARDS, HostLink, clock_quantity, device_family, fpga_performance,
                         load_board_report)
from .workload import Workload, cycles_per_image

__all__ = ["Estimate", "estimate", "report", "format_si", "REQUIRED_KEYS", "FORMAT"]

FORMAT = "fpganet-estimate/1"
#: Keys every estimate's JSON has at its top level (each a {value, unit, source, basis} figure,
#: ``gpus`` a list of rows with the same figures).
REQUIRED_KEYS = ("cycles_per_image", "images_per_s", "latency_s", "watts", "images_per_s_per_w",
                 "bottleneck", "gpus")
ROW_KEYS = ("cycles_per_image", "images_per_s", "latency_s", "watts", "images_per_s_per_w",
            "bottleneck")


@dataclass
class Estimate:
    """Everything one estimate found (build with :func:`estimate`)."""

    workload: Workload
    board: dict
    clock: Quantity
    cycles: Quantity
    layer_cycles: list
    layer_cycles_source: str
    performance: dict
    power: object
    fpga_row: dict
    fpga_extra_rows: list
    asic_rows: list
    gpu_rows: list
    measured: dict
    synthesis: object = None
    network: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    activity: object = None
    layer_table: object = None      # a LayerTable
    design: str = None              # what runs the network, when not the int8 array

    @property
    def design_name(self):
        return self.design or f"{self.workload.config.name} array"

    # JSON ------------------------------------------------------------------------------------

    def rows(self):
        """All comparison rows: the FPGA, the ASIC projections, the GPUs, the measured baselines."""
        return [self.fpga_row, *self.fpga_extra_rows, *self.asic_rows, *self.gpu_rows,
                *self.measured.get("rows", [])]

    def to_dict(self):
        row = self.fpga_row
        data = {"format": FORMAT,
                "network": self.network,
                "accelerator": {"config": self.workload.config.to_dict(), "board": self.board,
                                "clock_hz": self.clock, "design": self.design_name},
                **{key: row[key] for key in ROW_KEYS},
                "joules_per_image": row["joules_per_image"],
                "fpga": {"throughput": self.performance, "power": self.power.to_dict(),
                         "activity": self.activity.to_dict() if self.activity else None,
                         "what_if": [_row_dict(r) for r in self.fpga_extra_rows],
                         "layer_cycles": self.layer_cycles,
                         "layer_cycles_source": self.layer_cycles_source,
                         "layers": [layer.to_dict() for layer in self.workload.layers],
                         "layer_table": self.layer_table.to_dict() if self.layer_table else None,
                         "marlann_check": marlann_check()},
                "asic": [_row_dict(r) for r in self.asic_rows],
                "gpus": [_row_dict(r) for r in self.gpu_rows],
                "measured": {"rows": [_row_dict(r) for r in self.measured.get("rows", [])],
                             "skipped": self.measured.get("skipped", []),
                             "machine": self.measured.get("machine")},
                "synthesis": self.synthesis.to_dict() if self.synthesis is not None else None,
                "notes": self.notes,
                "sources": _sources()}
        return quantity_dict(data)

    def to_json(self, **kwargs):
        """Standard JSON: a figure that is not finite (none there to give) becomes null."""
        kwargs.setdefault("indent", 1)
        return json.dumps(_finite(self.to_dict()), allow_nan=False, **kwargs)

    def report(self, out_dir):
        """Write report.md, estimate.json and the plots into ``out_dir`` (see :func:`report`)."""
        return report(self, out_dir)

    # Text ------------------------------------------------------------------------------------

    def table(self):
        """Plain-text comparison table, one line per platform and regime."""
        header = ("platform", "regime", "images/s", "latency", "watts", "images/s/W", "bottleneck",
                  "source")
        lines = []
        for row in self.rows():
            lines.append((row["name"], row["regime"], _fmt(row["images_per_s"], ""),
                          _fmt(row["latency_s"], "s"), _fmt(row["watts"], "W"),
                          _fmt(row["images_per_s_per_w"], ""),
                          str(row["bottleneck"].value or "-"), _source_tag(row)))
        widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
        widths[-2] = min(widths[-2], 34)
        out = [f"fpganet estimate: {self.network['name']} ({self.network['macs']:,} MACs/image) on "
               f"{self.board['name']}, {self.design_name} at "
               f"{self.clock.value / 1e6:g} MHz",
               f"cycles per image: {self.cycles.value:,.0f} ({self.cycles.source}: "
               f"{self.cycles.basis})", ""]
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        out.append("  ".join("-" * w for w in widths))
        for line in lines:
            cells = [str(c)[:w].ljust(w) for c, w in zip(line, widths)]
            out.append("  ".join(cells).rstrip())
        out.append("")
        out.append("ranges in parentheses are low-high of the estimate; W: FPGA chip power, ASIC "
                   "dynamic power, GPU board/module power (see docs/guide/estimator.md)")
        if self.layer_table is not None:
            out += ["", *self.layer_table.text(), ""]
        for note in self.notes:
            out.append(f"note: {note}")
        for reason in self.measured.get("skipped", []):
            out.append(f"not measured: {reason}")
        return "\n".join(out)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _row_dict(row):
    return {key: value for key, value in row.items()}


def _sources():
    return {"reference_notes": figures.REFERENCE_NOTES,
            "ice40_power": figures.ICE40_POWER_SOURCE, "marlann": figures.MARLANN["source"],
            "energy": [figures.HOROWITZ, figures.TPUV4I],
            "gpu_datasheets": figures.GPUS[0].source,
            "mlperf": sorted({r.source for r in figures.MLPERF_OFFLINE.values()}),
            "ecp5": {"static": figures.ECP5_STATIC["source"],
                     "flip_flops": figures.ECP5_FLIP_FLOP["source"],
                     "dynamic": figures.ECP5_PLACEHOLDER["basis"]},
            "activity": {"default": figures.ACTIVITY["logic_basis"],
                         "simulated": "RTL toggle counts: fpganet.sim.activity (Verilator "
                                      "--coverage-toggle), with --activity rtl"},
            "host_link": figures.HOST_LINK["basis"],
            "gpu_kernel": figures.GPU_KERNEL_OVERHEAD["basis"]}


_PREFIXES = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "u"),
             (1e-9, "n"), (1e-12, "p")]


def format_si(value, unit=""):
    """``1234.5 -> '1.23 k'``, ``0.00012, 's' -> '120 us'``."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if value == 0:
        return f"0 {unit}".strip()
    if "^" in unit:                 # mm^2 and the like: no prefixes on top of the unit's own
        return f"{value:.3g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            break
    number = value / scale
    text = f"{number:.3g}"
    return f"{text} {prefix}{unit}".strip()


def _fmt(q, unit):
    if q is None or q.value is None:
        return "-"
    text = format_si(q.value, unit)
    if q.has_range and q.low != q.high:
        text += f" ({format_si(q.low, unit).replace(' ', '')}-{format_si(q.high, unit).replace(' ', '')})"
    return text


def _fmt_af(q):
    if q.low is not None and q.low != q.high:
        return f"{q.low:.3f}-{q.high:.3f}"
    return f"{q.value:.3f}"


def _source_tag(row):
    sources = sorted({row[k].source for k in ("images_per_s", "watts") if row[k] is not None})
    return "/".join(s for s in sources if s != "not available") or "n/a"


# The estimate ------------------------------------------------------------------------------

def estimate(net, *, board="icebreaker", board_report=None, clock_hz=None, link=None, cycles=None,
             layer_cycles=None, cycles_model="ideal", simulate=True, activity=None, measure=True,
             measure_options=None, synth=True, design=None, asic_clock_hz=500e6, asic_nodes=NODES,
             gpus=DEFAULT_GPUS, batch=None, cache_dir=None, progress=None, program_batch=1):
    """Estimate images/s, latency, watts and images/s/W of a compiled network, side by side.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
        From :func:`fpganet.compiler.load_compiled`.
    board : str
        ``"icebreaker"`` or ``"ulx3s"`` (:data:`fpganet.estimate.throughput.BOARDS`).
    board_report : str, os.PathLike or BoardReport, optional
        A boards ``report.json``: routed Fmax and resources.
    clock_hz : float, optional
        Accelerator clock (overrides the report's Fmax and the configuration's clock_hz).
    link : HostLink, optional
        Host link (default UART 3 Mbaud, 8N1).
    cycles : int, optional
        Cycles per image measured elsewhere (RTL simulation, the board).
    layer_cycles : list of int, optional
        Per-layer cycles measured elsewhere.
    cycles_model : str
        Fallback when fpganet.perf cannot time the network: ``"ideal"`` or ``"tiled"``.
    simulate : bool
        Time the back end's program with fpganet.perf (False: use the fallback).
    activity : None, str, float, (float, float), Activity or ActivityMeasurement, optional
        Switching activity for the FPGA power model (:mod:`fpganet.estimate.activity`):
        ``"rtl"`` measures it from toggle counts of the program on the accelerator's
        Verilog (Verilator; about a minute the first time, then stored in ``cache_dir``),
        ``"auto"`` uses a stored measurement if there is one, a number (or pair) is a
        logic activity factor given by the caller; None or ``"default"``: the stated
        default (Lattice's 15-25 %).
    measure : bool
        Time the network on this machine with onnxruntime (CPU, and CUDA when available).
    measure_options : dict, optional
        Passed to :func:`fpganet.estimate.measure.measure_network`.
    synth : bool
        Synthesize ``design`` with yosys for the ASIC gate count and area.
    design : str or Amaranth component, optional
        ``"accelerator"`` (default: ``fpganet.hdl.accelerator.Accelerator(config)``, about
        two minutes of yosys the first time, then found in ``cache_dir`` by the hash of the
        gateware sources and the configuration), ``"array"``
        (``fpganet.hdl.systolic.SystolicArray(config)``, seconds), Verilog text, or an
        Amaranth component.
    asic_clock_hz : float
        Assumed ASIC clock.
    asic_nodes : sequence of str
        ``"45nm"``, ``"7nm"``.
    gpus : sequence of str
        GPU keys (figures.GPUS).
    program_batch : int
        The ``--batch`` the network was compiled with. The FPGA and ASIC rows use that
        program's steady-state cycles per image (the board's driver runs its B images a START);
        a batched directory gets a note saying so.
    batch : int, optional
        The GPUs' large batch (default per GPU: the smallest of 256-65536 whose work hides
        the kernel-launch floor, :func:`fpganet.estimate.gpu.best_batch`).
    cache_dir : str or os.PathLike, optional
        Where synthesis results and RTL activity measurements are kept.
    progress : callable, optional
        ``progress(message)`` before a step that takes minutes (yosys, the Verilator build).

    Returns
    -------
    Estimate
    """
    if board not in BOARDS:
        raise FpganetError(f"unknown board '{board}' (known: {', '.join(BOARDS)})")
    board_info = dict(BOARDS[board], key=board)
    notes = []
    if program_batch > 1:
        notes.append(f"the directory was compiled with --batch {program_batch}: the FPGA and ASIC "
                     f"figures use the batched program's cycles per image, the one a board runs "
                     f"({program_batch} images a START); the switching activity (--activity rtl) "
                     f"is measured on its batch-1 program")
    config = net.config
    report_obj = None
    if board_report is not None:
        report_obj = (board_report if hasattr(board_report, "fmax_mhz")
                      else load_board_report(board_report))
        board_info["device"] = report_obj.device
        board_info["family"] = device_family(report_obj.device)
        board_info["report"] = report_obj.path
        if report_obj.board.lower() != board:
            notes.append(f"the board report is for '{report_obj.board}', not '{board}'")
        if report_obj.macs_per_cycle != config.macs_per_cycle:
            notes.append(f"the board report's design does {report_obj.macs_per_cycle} MACs per "
                         f"cycle; the network was compiled for {config.macs_per_cycle} "
                         f"({config.name})")
    workload = Workload.from_network(net, config)
    clock = clock_quantity(config, report_obj, clock_hz)
    cycles_q, per_layer, per_layer_source = cycles_per_image(
        workload, net, cycles=cycles, layer_cycles=layer_cycles, model=cycles_model,
        simulate=simulate, batch=program_batch)
    if cycles_q.extra.get("fallback") == "ideal":
        notes.append(f"cycles: the ideal fallback, not simulated; the tiled estimate is "
                     f"{workload.tiled_cycles:,} cycles "
                     f"({workload.tiled_cycles / workload.ideal_cycles:.2f}x)")
    elif cycles_q.source == "simulated":
        notes.append(f"cycles: simulated, {cycles_q.value:,} per image (the ideal MACs/(rows x "
                     f"cols) would be {workload.ideal_cycles:,.0f}, the tiled estimate "
                     f"{workload.tiled_cycles:,})")
    link = link or HostLink()
    performance = fpga_performance(workload, cycles_q, clock, link)
    if report_obj is not None:
        resources = canonical_resources(report_obj.used())
        resources_basis = f"routed design, {report_obj.path}"
    else:
        resources, resources_basis, note = configured_resources(board, config)
        if note:
            notes.append(note)
    try:
        activity = resolve_activity(activity, net, cache_dir=cache_dir, progress=progress)
    except ValueError as error:
        raise FpganetError(str(error)) from None
    notes.append(f"switching activity: {activity.source}, {activity.origin}"
                 + "".join(f"; {note}" for note in activity.notes))
    power, fpga_rows = fpga_rows_of(
        f"FPGA {board_info['device']} ({board}), {config.name} @ {clock.value / 1e6:g} MHz",
        board, cycles_q, performance, link,
        lambda performance: accelerator_power(
            workload, cycles_q, clock, performance, board_info["family"], resources=resources,
            resources_basis=resources_basis, oscillator_hz=board_info["oscillator_hz"],
            activity=activity))
    fpga_row = fpga_rows[0]
    synthesis = None
    if synth:
        design = design or "accelerator"
        if isinstance(design, str) and design in ("array", "accelerator"):
            synthesis, description = synthesize_design(design, config, cache_dir=cache_dir,
                                                       progress=progress)
        else:
            synthesis = synthesize(design, None if isinstance(design, str) else "top",
                                   cache_dir=cache_dir)
            description = f"the design given ('{synthesis.top}')"
        notes.append(f"ASIC gate count: {description} ({synthesis.origin})")
    asic_rows = []
    for node in asic_nodes:
        projection = asic_projection(workload, cycles_q, synthesis, node=node,
                                     clock_hz=asic_clock_hz)
        asic_rows.append({"name": f"ASIC {node}, {config.name} @ {asic_clock_hz / 1e6:g} MHz",
                          "key": f"asic-{node}", "kind": "asic", "regime": "batch 1 (streaming)",
                          "batch": 1, "power_boundary": "dynamic energy of the accelerator logic "
                                                        "and SRAM (no leakage, no I/O)",
                          **projection})
    gpu_list = gpu_rows(workload, gpus, batch=batch)
    measured = measured_rows(net, measure, measure_options)
    return Estimate(workload=workload, board=board_info, clock=clock, cycles=cycles_q,
                    layer_cycles=per_layer, layer_cycles_source=per_layer_source,
                    performance=performance, power=power, fpga_row=fpga_row,
                    fpga_extra_rows=fpga_rows[1:], asic_rows=asic_rows,
                    gpu_rows=gpu_list, measured=measured, synthesis=synthesis,
                    network=network_summary(workload, net),
                    notes=notes + [n for n in power.notes if "exceed" in n], activity=activity,
                    layer_table=layer_table(workload, cycles_q.value, per_layer, per_layer_source,
                                            cycles_q.extra.get("_layer_weight_bytes")
                                            or stored_weight_bytes(net, config, program_batch)))


def fpga_rows_of(name, board, cycles, performance, link, power_at):
    """The FPGA's power and rows: end to end, and where the host link is the bound, what the
    same chip would do with a link fast enough (SPI/QSPI, USB FIFO), its engine always busy.
    ``power_at(performance)`` is the chip's power estimate at that performance's ``duty``."""
    power = power_at(performance)
    watts = power.total()
    images = performance["images_per_s"]
    rows = [{"name": name, "key": f"fpga-{board}", "kind": "fpga",
             "regime": "batch 1 (streaming)", "batch": 1, "power_boundary": power.boundary,
             "cycles_per_image": cycles, "images_per_s": images,
             "latency_s": performance["latency_s"], "watts": watts,
             "images_per_s_per_w": ratio(images, watts, "images/s/W",
                                         "end-to-end images/s / chip power"),
             "joules_per_image": ratio(watts, images, "J", "chip power / end-to-end images/s"),
             "bottleneck": performance["bottleneck"]}]
    if performance["bottleneck"].value != "compute":
        busy = {"duty": Quantity(1.0, None, "estimated", "engine always busy")}
        watts_busy = power_at(busy).total()
        rate = performance["compute_images_per_s"]
        rows.append({
            "name": name, "key": f"fpga-{board}-compute-bound", "kind": "fpga",
            "regime": "compute-bound (faster link)", "batch": 1, "power_boundary": power.boundary,
            "cycles_per_image": cycles, "images_per_s": rate,
            "latency_s": performance["compute_s"], "watts": watts_busy,
            "images_per_s_per_w": ratio(rate, watts_busy, "images/s/W",
                                        "compute-bound images/s / chip power with the engine "
                                        "always busy"),
            "joules_per_image": ratio(watts_busy, rate, "J", "chip power / compute-bound images/s"),
            "bottleneck": Quantity("compute", None, "estimated",
                                   "if the host link kept up (a what-if: the link assumed is "
                                   f"{link.label})")})
    return power, rows


def measured_rows(net, measure, options):
    """The network timed on this machine with onnxruntime, or a record that it was not."""
    if not measure:
        return {"rows": [], "skipped": ["not requested (measure=False)"], "machine": None}
    return measure_network(net, **(options or {}))


def network_summary(workload, net):
    """The estimate's ``network`` section."""
    return {"name": workload.name, "macs": workload.macs, "ops": workload.ops,
            "weight_bytes": workload.weight_bytes, "input_bytes": workload.input_bytes,
            "output_bytes": workload.output_bytes, "layers": len(net.layers),
            "feature_map_bytes": workload.feature_map_bytes,
            "gpu_kernels": workload.gpu_kernels(), "source": net.source}


# Markdown + plots ----------------------------------------------------------------------------

def report(result, out_dir, inputs=()):
    """Write ``report.md``, ``estimate.json`` and the plots (PNG) of an :class:`Estimate`.

    The folder is built aside and renamed into place (:func:`fpganet.files.staged_directory`):
    an existing ``out_dir`` is replaced only when fpganet wrote all of it, and it never
    holds one of ``inputs`` (the compiled directory, the board report).

    Plots: ``efficiency.png`` (images/s/W on a log scale, every platform with a power
    figure), ``roofline.png`` (the GPUs' INT8 rooflines, the FPGA's host-link roofline and
    where the network sits), ``layers.png`` (cycles and multiplier utilization per layer); the
    last two for the int8 array only.

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    out = Path(out_dir)
    with staged_directory(out, inputs=inputs, what="report folder") as staging:
        names = ["estimate.json"]
        (staging / "estimate.json").write_text(result.to_json() + "\n")
        plots = []
        try:
            # Imported here, not at the top: matplotlib is slow to import.
            import matplotlib
        except ImportError:
            plot_note = "matplotlib is not installed: no plots"
        else:
            matplotlib.use("Agg", force=True)
            plot_note = None
            # The roofline and the per-layer plot draw the int8 array's multipliers.
            int8_only = ("roofline.png", "layers.png") if result.design else ()
            for name, function in (("efficiency.png", _plot_efficiency),
                                   ("roofline.png", _plot_roofline), ("layers.png", _plot_layers)):
                if name not in int8_only and function(result, staging / name):
                    plots.append(name)
        names.extend(plots)
        (staging / "report.md").write_text(_markdown(result, plots, plot_note))
        names.append("report.md")
    return [out / name for name in names]


def _md_table(rows):
    lines = ["| platform | regime | images/s | latency | W | images/s/W | bottleneck | source |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| " + " | ".join([
            row["name"], row["regime"], _fmt(row["images_per_s"], ""), _fmt(row["latency_s"], "s"),
            _fmt(row["watts"], "W"), _fmt(row["images_per_s_per_w"], ""),
            str(row["bottleneck"].value or "-"), _source_tag(row)]) + " |")
    return "\n".join(lines)


def _markdown(result, plots, plot_note):
    w = result.workload
    perf = result.performance
    power = result.power
    lines = [f"# Is an FPGA or ASIC worth it for {result.network['name']}?", "",
             f"{w.macs:,} MACs ({w.ops:,} ops) per image, {w.weight_bytes:,} B of "
             f"{w.weight_text}, {w.input_bytes:,} B in and {w.output_bytes:,} B out per image. "
             f"Accelerator: {result.design or f'{w.config.name} output-stationary array'} on the "
             f"{result.board['name']}, clock "
             f"{result.clock.value / 1e6:g} MHz ({result.clock.basis}).", "",
             "Every figure below carries its source in `estimate.json` (measured / simulated / "
             "published / estimated, with its basis); what the models rest on is in "
             "`docs/guide/estimator.md`.", "", "## Side by side", "", _md_table(result.rows()), "",
             "Ranges in parentheses are the low-high of an estimate. Power boundaries differ: "
             "FPGA = chip (core, PLL, I/O rails); ASIC = dynamic energy of logic and SRAM; GPU = "
             "board TDP or module power mode (MLPerf's boundary; an upper bound at batch 1); the "
             "measured CPU rows have no power figure.", ""]
    for note in result.notes:
        lines.append(f"- {note}")
    for reason in result.measured.get("skipped", []):
        lines.append(f"- not measured: {reason}")
    lines += ["", "## FPGA: throughput", "",
              f"- cycles per image: {result.cycles.value:,.0f} ({result.cycles.source}: "
              f"{result.cycles.basis})"]
    for key in ("compute_images_per_s", "link_images_per_s", "images_per_s", "latency_s",
                "setup_s"):
        q = perf[key]
        lines.append(f"- {key}: {_fmt(q, 's' if q.unit == 's' else '')} ({q.basis})")
    lines.append(f"- bottleneck: **{perf['bottleneck'].value}** ({perf['bottleneck'].basis})")
    if result.layer_table is not None:
        table = result.layer_table
        lines += ["", "## FPGA: per layer", "",
                  f"Cycles: {table.cycles_source}; utilization = MACs / (cycles x "
                  f"{table.macs_per_cycle}); weight bytes: {table.weight_bytes_source}; in/out "
                  f"B: the layer's input and output maps (int8); {FUSED}.", "",
                  *table.markdown()]
    lines += ["", "## FPGA: power", "", f"Boundary: {power.boundary}.", "",
              "| component | W (low-high) | basis |", "|---|---|---|"]
    for name, (lo, hi) in power.components.items():
        lines.append(f"| {name} | {format_si(lo, 'W')} - {format_si(hi, 'W')} | "
                     f"{power.bases[name]} |")
    lines.append(f"| **total** | **{format_si(power.low, 'W')} - {format_si(power.high, 'W')}** | "
                 f"midpoint {format_si(power.nominal, 'W')} |")
    lines += [""] + [f"- {note}" for note in power.notes]
    if result.activity is not None:
        act = result.activity.figures()
        lines += ["", f"Switching activity ({result.activity.source}, "
                      f"{result.activity.origin}): logic {_fmt_af(act['logic'])}, multiplier "
                      f"operands {_fmt_af(act['operands'])} transitions per bit per cycle. "
                      f"{act['logic'].basis}."]
        measurement = result.activity.measurement
        if measurement:
            lines += ["", "| block | flip-flop bits | flip-flop activity | signal bits | "
                          "signal activity |", "|---|---|---|---|---|"]
            for name, entry in measurement["blocks"].items():
                lines.append(f"| {name} | {entry['flipflop_bits']:,} | "
                             f"{entry['flipflop_activity']:.3f} | {entry['bits']:,} | "
                             f"{entry['activity']:.3f} |")
    lines += ["", "Model check against MARLANN's measured core power (iCE40UP5K, 16 MACs/cycle; "
                  "never fitted to it):", "",
              "| run | measured | model low-high | midpoint error |", "|---|---|---|---|"]
    for check in marlann_check():
        lines.append(f"| {check['name']} | {format_si(check['measured_w'], 'W')} | "
                     f"{format_si(check['low_w'], 'W')} - {format_si(check['high_w'], 'W')} | "
                     f"{100 * check['nominal_error']:+.0f} % |")
    if result.asic_rows or result.synthesis is not None:
        lines += ["", "## ASIC projection", ""]
    for row in result.asic_rows:
        lines.append(f"- **{row['name']}**: {_fmt(row['joules_per_image'], 'J')} per image, "
                     f"{_fmt(row['images_per_s_per_w'], '')} images/s/W, "
                     f"{_fmt(row['area_mm2'], 'mm^2')}")
        for part, q in row["energy_parts"].items():
            lines.append(f"  - {part}: {_fmt(q, 'J')} ({q.basis})")
        for part, q in row["area_parts"].items():
            lines.append(f"  - area {part}: {_fmt(q, 'mm^2')} ({q.basis})")
    if result.synthesis is not None:
        s = result.synthesis
        lines.append(f"- gate count: {s.nand2_eq:,.0f} NAND2-eq ({s.flipflops:,} flip-flops) for "
                     f"'{s.top}', {s.yosys.split('(')[0].strip()}")
    lines += ["", "## GPUs", "", figures.GPU_KERNEL_OVERHEAD["basis"] + ".", "",
              f"Per-kernel model: {figures.GPU_KERNEL_OVERHEAD['per_layer_kernels']}; this network: "
              f"{w.gpu_kernels()} dependent kernels. Large batch: the smallest of 256-65536 that "
              f"hides the kernel floor (in each row's basis) unless given, roofline with every "
              f"feature map through DRAM ({w.feature_map_bytes:,} B per image) and the efficiency "
              f"relative to peak that MLPerf ResNet-50 Offline shows.", ""]
    for row in result.gpu_rows:
        if row["regime"] == "large batch":
            lines.append(f"- {row['name']}: efficiency vs peak {100 * row['efficiency_vs_peak'].value:.0f} %"
                         f" ({row['efficiency_vs_peak'].basis}); {row['bottleneck'].value}")
    if result.measured.get("rows"):
        lines += ["", "## Measured on this machine", "", f"{result.measured['machine']}", ""]
        for row in result.measured["rows"]:
            lines.append(f"- {row['name']}, batch {row['batch']}: {_fmt(row['images_per_s'], '')} "
                         f"images/s, {_fmt(row['latency_s'], 's')} ({row['latency_s'].basis})")
    if plots or plot_note:
        lines += ["", "## Plots", ""]
        if plot_note:
            lines.append(plot_note)
        captions = {"efficiency.png": "images/s per watt (log scale; bars: low-high)",
                    "roofline.png": "rooflines: the GPUs' INT8 peak and DRAM bandwidth, the FPGA's "
                                    "peak and host link; points: this network",
                    "layers.png": f"per-layer cycles and multiplier utilization "
                                  f"({result.layer_cycles_source})"}
        for name in plots:
            lines += [f"![{captions[name]}]({name})", "", f"*{captions[name]}*", ""]
    lines += ["## Comparable accelerators", ""]
    for entry in figures.COMPARABLE_ACCELERATORS:
        lines.append(f"- {entry['name']}: {entry['what']} ({entry['source']})")
    return "\n".join(lines) + "\n"


_COLORS = {"fpga": "#1b9e77", "asic": "#7570b3", "gpu": "#d95f02", "measured": "#666666"}


def _plot_efficiency(result, path):
    import matplotlib.pyplot as plt

    rows = [r for r in result.rows() if r["images_per_s_per_w"].value]
    if not rows:
        return False
    rows.sort(key=lambda r: r["images_per_s_per_w"].value)
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    values = [r["images_per_s_per_w"].value for r in rows]
    lows = [r["images_per_s_per_w"].low if r["images_per_s_per_w"].has_range else v
            for r, v in zip(rows, values)]
    highs = [r["images_per_s_per_w"].high if r["images_per_s_per_w"].has_range else v
             for r, v in zip(rows, values)]
    errors = [[v - lo for v, lo in zip(values, lows)], [hi - v for v, hi in zip(values, highs)]]
    labels = [f"{r['name']} [{r['regime']}]" for r in rows]
    ax.barh(range(len(rows)), values, xerr=errors, color=[_COLORS[r["kind"]] for r in rows],
            capsize=2)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("images/s per W (log scale)")
    ax.set_title(f"{result.network['name']}: energy efficiency (power boundaries differ: see report)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_roofline(result, path):
    import matplotlib.pyplot as plt

    w = result.workload
    fig, ax = plt.subplots(figsize=(8, 5))
    intensity = np.logspace(-1, 5, 200)
    gpu_rows = [r for r in result.gpu_rows if r["regime"] == "large batch"]
    gpu_i = w.ops / w.feature_map_bytes if w.feature_map_bytes else None
    seen = set()
    for row in gpu_rows:
        roofline = (row["peak_int8_ops"], row["memory_bytes_per_s"])
        if roofline in seen:        # the same chip in another power mode
            continue
        seen.add(roofline)
        roof = np.minimum(row["peak_int8_ops"], row["memory_bytes_per_s"] * intensity)
        line, = ax.loglog(intensity, roof, lw=1, label=f"{row['name']} (INT8 peak, DRAM)")
        if gpu_i:
            ax.plot([gpu_i], [row["images_per_s"].value * w.ops], "o", color=line.get_color(), ms=4)
    f = result.clock.value
    peak = 2 * w.config.macs_per_cycle * f
    link_bytes = w.input_bytes + w.output_bytes
    bps = result.performance["link"]["bytes_per_s"]
    ax.loglog(intensity, np.minimum(peak, bps * intensity), "k--", lw=1.5,
              label=f"FPGA {w.config.name} @ {f / 1e6:g} MHz (peak, host link)")
    ax.plot([w.ops / link_bytes], [result.fpga_row["images_per_s"].value * w.ops], "ks", ms=6,
            label="FPGA: this network (end to end)")
    if gpu_i:
        ax.axvline(gpu_i, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("operational intensity (ops per byte off chip: DRAM for GPUs, host link for "
                  "the FPGA)", fontsize=8)
    ax.set_ylabel("ops/s")
    ax.set_title(f"Rooflines, and where {result.network['name']} sits (estimated; GPUs at "
                 f"large batch, the FPGA end to end)", fontsize=9)
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_layers(result, path):
    import matplotlib.pyplot as plt

    cycles = result.layer_cycles
    if not cycles:
        return False
    layers = result.workload.layers
    pairs = [(index, layer, c) for index, (layer, c) in enumerate(zip(layers, cycles))
             if layer.type != "reshape"]
    if not pairs:
        return False
    names = [f"{short_name(index, layer.name)} ({layer.type})" for index, layer, _ in pairs]
    pairs = [(layer, c) for _, layer, c in pairs]
    counts = [c for _, c in pairs]
    mpc = result.workload.config.macs_per_cycle
    util = [layer.macs / (c * mpc) if c and layer.macs else 0.0 for layer, c in pairs]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    top.bar(range(len(pairs)), counts, color="#1b9e77")
    top.set_ylabel("cycles")
    top.set_title(f"Per-layer cycles and multiplier utilization, {result.workload.config.name} "
                  f"array ({result.layer_cycles_source})", fontsize=9)
    bottom.bar(range(len(pairs)), [100 * u for u in util], color="#7570b3")
    bottom.set_ylabel("useful MACs / (cycles x rows x cols), %")
    bottom.set_ylim(0, 105)
    bottom.set_xticks(range(len(pairs)), names, fontsize=7, rotation=50, ha="right",
                      rotation_mode="anchor")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
