"""The per-layer table: op, MACs, cycles, utilization, weight and activation bytes.

One row per layer of the network, a row for the cycles outside the engine (SET, INPUT,
OUTPUT, STAMP, LOOP) when the per-layer cycles come with the total they add up to, and a
total row. The cycles are those the estimate uses (:func:`fpganet.estimate.workload.
cycles_per_image`: ``fpganet.perf`` timing the back end's program, whose total equals the
RTL's cycle counter by test), never a second model. Utilization is
``MACs / (cycles x rows x cols)``; weight bytes are those the layer's steps take in the
weight memory image (padded to whole words, an add's identity weights included);
activation bytes are the layer's input and output maps (unpadded int8 tensors).
"""

from dataclasses import dataclass

from ..codegen.plan import plan_network
from ..errors import FpganetError
from ..qnet import short_name

__all__ = ["LayerTable", "layer_table", "stored_weight_bytes", "plan_weight_bytes", "COLUMNS"]

#: Each row's keys, in the order the table shows them.
COLUMNS = ("index", "layer", "op", "macs", "cycles", "utilization", "weight_bytes",
           "act_in_bytes", "act_out_bytes")
_HEADINGS = ("layer", "op", "MACs", "cycles", "util", "weight B", "in B", "out B")
OUTSIDE_ENGINE = "(outside the engine)"
NAME_WIDTH = 28     # "index name", cut (qnet.short_name)
FUSED = "0 cycles: run inside the layer before (a fused max-pool) or free (a reshape)"


def stored_weight_bytes(net, config, batch=1):
    """Bytes of the weight memory image each layer of ``net`` takes on ``config`` (the
    back end's plan at ``batch``), or None when the back end refuses the network."""
    try:
        plan = plan_network(net, config, batch=batch)
    except FpganetError:
        return None
    return plan_weight_bytes(plan, config, len(net.layers))


def plan_weight_bytes(plan, config, layers):
    """:func:`stored_weight_bytes` of a plan made already (of a network of ``layers``)."""
    per_layer = [0] * layers
    for step in plan.steps:
        per_layer[step.layer_index] += step.weight_words(config) * config.weight_word_bytes
    return per_layer


@dataclass
class LayerTable:
    """Rows (dicts with :data:`COLUMNS`), the total row, and where the figures come from."""

    rows: list
    total: dict
    cycles_source: str
    weight_bytes_source: str
    macs_per_cycle: int

    def to_dict(self):
        return {"columns": list(COLUMNS), "rows": self.rows, "total": self.total,
                "cycles_source": self.cycles_source,
                "weight_bytes_source": self.weight_bytes_source,
                "utilization": f"MACs / (cycles x {self.macs_per_cycle} MACs per cycle)"}

    def _cells(self):
        def number(value):
            if value is None:
                return "-"
            return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"

        def percent(value):
            return "-" if value is None else f"{100 * value:.1f} %"

        return [(row["layer"] if row["index"] is None else short_name(row["index"], row["layer"],
                                                                        NAME_WIDTH), row["op"],
                 number(row["macs"]), number(row["cycles"]), percent(row["utilization"]),
                 number(row["weight_bytes"]), number(row["act_in_bytes"]),
                 number(row["act_out_bytes"]))
                for row in [*self.rows, self.total]]

    def text(self):
        """Lines for the terminal: a heading, the columns aligned, the total row last."""
        cells = self._cells()
        widths = [max(len(line[i]) for line in [_HEADINGS, *cells]) for i in range(len(_HEADINGS))]
        left = (0, 1)       # the names align left, the numbers right

        def line(values):
            return "  ".join(v.ljust(w) if i in left else v.rjust(w)
                             for i, (v, w) in enumerate(zip(values, widths))).rstrip()

        rule = "  ".join("-" * w for w in widths)
        return [f"per layer (cycles: {self.cycles_source}; utilization = MACs / (cycles x "
                f"{self.macs_per_cycle});", f"  weight bytes: {self.weight_bytes_source}; in/out "
                f"B: the layer's input and output maps; {FUSED}):",
                line(_HEADINGS), rule, *map(line, cells[:-1]), rule, line(cells[-1])]

    def markdown(self):
        """A Markdown table, the total row in bold."""
        cells = self._cells()
        lines = ["| " + " | ".join(_HEADINGS) + " |",
                 "|" + "|".join("---" if i in (0, 1) else "--:" for i in range(len(_HEADINGS))) + "|"]
        lines += ["| " + " | ".join(line) + " |" for line in cells[:-1]]
        lines.append("| " + " | ".join(f"**{v}**" if v else "" for v in cells[-1]) + " |")
        return lines


def layer_table(workload, total_cycles, layer_cycles, cycles_source, weight_bytes=None):
    """The table of ``workload`` (:class:`fpganet.estimate.workload.Workload`).

    ``total_cycles``: cycles per image (the estimate's); ``layer_cycles``: per layer, with
    ``cycles_source`` (as :func:`~fpganet.estimate.workload.cycles_per_image` returns them).
    Where the per-layer cycles are the ones the total is made of (simulated or given), the
    difference is a row of its own and the rows add up to ``total_cycles``; where they are
    the tiled estimate, the total row is their sum. ``weight_bytes``: per layer, from
    :func:`stored_weight_bytes`; None: the int8 weights (no weight image).
    """
    macs_per_cycle = workload.config.macs_per_cycle

    def utilization(macs, cycles):
        return macs / (cycles * macs_per_cycle) if cycles else None

    if weight_bytes is None:
        weight_bytes = [layer.weight_bytes for layer in workload.layers]
        weight_source = "int8 weights (the back end refuses the network: no weight image)"
    else:
        weight_source = "as stored in the weight memory image"
    rows = []
    for index, (work, cycles, stored) in enumerate(zip(workload.layers, layer_cycles,
                                                       weight_bytes)):
        rows.append({"index": index, "layer": work.name, "op": work.type, "macs": work.macs,
                     "cycles": cycles, "utilization": utilization(work.macs, cycles),
                     "weight_bytes": stored, "act_in_bytes": work.act_in_bytes,
                     "act_out_bytes": work.act_out_bytes})
    engine = sum(layer_cycles)
    if cycles_source.startswith("estimated"):
        total_cycles = engine
    else:
        rows.append({"index": None, "layer": OUTSIDE_ENGINE, "op": "control/io", "macs": 0,
                     "cycles": total_cycles - engine, "utilization": None, "weight_bytes": 0,
                     "act_in_bytes": None, "act_out_bytes": None})
    macs = sum(row["macs"] for row in rows)
    total = {"index": None, "layer": "total", "op": "", "macs": macs, "cycles": total_cycles,
             "utilization": utilization(macs, total_cycles),
             "weight_bytes": sum(weight_bytes), "act_in_bytes": None, "act_out_bytes": None}
    return LayerTable(rows=rows, total=total, cycles_source=cycles_source,
                      weight_bytes_source=weight_source, macs_per_cycle=macs_per_cycle)
