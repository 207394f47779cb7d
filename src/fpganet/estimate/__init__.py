"""Is an FPGA or ASIC worth it for my network, compared with a GPU?

Images/s, latency, watts and images/s per watt of a compiled network (a
``fpganet compile`` output directory) on the project's accelerator on an FPGA
board, projected to an ASIC, and on GPUs, resting on the project's own numbers
(cycles from ``fpganet.perf``, switching activity from RTL toggle counts, routed
Fmax and resources from a boards report, onnxruntime timings on this machine) and
on published figures,
each cited (:mod:`fpganet.estimate.figures`). Every figure is a
:class:`~fpganet.estimate.quantity.Quantity`: value, unit, source (measured /
simulated / published / estimated) and basis. See docs/guide/estimator.md.

Modules:

- :mod:`~fpganet.estimate.figures` the published figures, as data, with sources;
- :mod:`~fpganet.estimate.workload` per-layer work and cycles per image;
- :mod:`~fpganet.estimate.layer_table` the per-layer table (op, MACs, cycles, utilization, bytes);
- :mod:`~fpganet.estimate.throughput` compute-, link- and end-to-end images/s, latency;
- :mod:`~fpganet.estimate.power` FPGA power (iCE40UP5K measured; ECP5 static from the
  data sheet, dynamic terms placeholders);
- :mod:`~fpganet.estimate.activity` the switching activity it uses (RTL toggle counts
  from :mod:`fpganet.sim.activity`, a given figure, or the stated default);
- :mod:`~fpganet.estimate.asic` yosys gate count, area and energy per image;
- :mod:`~fpganet.estimate.gpu` GPU batch-1 and large-batch estimates;
- :mod:`~fpganet.estimate.measure` onnxruntime timings on this machine;
- :mod:`~fpganet.estimate.comparison` the estimate, JSON, text table, Markdown and plots;
- :mod:`~fpganet.estimate.cli` ``fpganet estimate`` and ``fpganet report``.
"""

import importlib

_LAZY = {
    "estimate": "fpganet.estimate.comparison",
    "report": "fpganet.estimate.comparison",
    "Estimate": "fpganet.estimate.comparison",
    "REQUIRED_KEYS": "fpganet.estimate.comparison",
    "Quantity": "fpganet.estimate.quantity",
    "estimate_main": "fpganet.estimate.cli",
    "report_main": "fpganet.estimate.cli",
    "configure_estimate_parser": "fpganet.estimate.cli",
    "run_estimate": "fpganet.estimate.cli",
    "configure_report_parser": "fpganet.estimate.cli",
    "run_report": "fpganet.estimate.cli",
}

__all__ = list(_LAZY)


def __getattr__(name):
    # Loaded on first use, so that ``python -m fpganet.estimate.cli`` and the light modules
    # (figures, quantity) do not pull in the rest.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fpganet.estimate' has no attribute {name!r}")
