"""Benchmark results: the rows that every figure on a page comes from.

A benchmark (``benchmarks/*.py``, ``fpganet synth`` through ``benchmarks/boards.py``)
writes its figures as a list of rows into ``benchmarks/results/NAME.json``. A row is one
figure with what it is of and where it comes from:

``network``, ``board``, ``configuration``
    What was measured: ``lenet5`` on the ``icebreaker``'s default configuration at
    ``batch 2``. ``board`` is ``none`` for a configuration that is no board's (``make
    sim``'s 2x8).
``metric``, ``value``, ``unit``
    One of :data:`METRICS`; its unit is fixed by the metric.
``basis``
    One of :data:`BASES`: how the figure was obtained. A ``published`` row names its
    ``source``.
``command``, ``commit``, ``date``
    What to run to measure it again, on which commit it was measured, and when.

Pages (``README.md``, ``docs/results.md``) are rendered from templates whose figures are
placeholders, ``{{network | board | configuration | metric}}`` (optionally ``:FORMAT``
before the closing braces); :func:`render` fills them in, and a test checks that every
committed page equals its rendering.
"""

import json
import re
import subprocess
from dataclasses import asdict, dataclass
from datetime import date as _date
from pathlib import Path

from fpganet.errors import FpganetError
from fpganet.files import write_text_atomic

__all__ = ["BASES", "METRICS", "FIELDS", "Row", "ResultsError", "make_row", "check_rows",
           "write_rows", "load_rows", "find", "format_value", "render"]


class ResultsError(FpganetError):
    """A results file or a page template that does not follow the format."""


#: basis -> what a figure of that basis rests on.
BASES = {
    "rtl": "measured on the accelerator's generated Verilog (Verilator)",
    "model": "computed by fpganet's own models: the integer golden model (the RTL equals it "
             "bit for bit, by test) or the cycle model (the RTL's cycle counter equals it, "
             "by test)",
    "routed": "a nextpnr report of a routed build (`fpganet synth`)",
    "estimated": "fpganet's estimator (`fpganet estimate`): a model, not a measurement",
    "published": "a published figure; the row's `source` names where",
}

#: metric -> (unit, meaning). Chip and board power are different metrics, never compared.
METRICS = {
    "top1": ("%", "top-1 accuracy against the labels"),
    "agreement_top1": ("%", "images whose answer equals the reference runtime's"),
    "agreement_outputs": ("%", "int8 outputs exactly equal to the reference runtime's"),
    "macs_per_image": ("MACs", "multiply-accumulates of one image"),
    "rtl_bit_exact": ("%", "images whose int8 outputs on the RTL equal the golden model's"),
    "rtl_cycles_exact": ("%", "images whose cycles on the RTL equal the cycle model's"),
    "cycles_per_image": ("cycles", "accelerator clock cycles an image (steady state)"),
    "images_per_s_compute": ("images/s", "images a second when the accelerator is the bound"),
    "images_per_s_delivered": ("images/s", "images a second delivered over the host link"),
    "watts_chip_compute": ("W", "FPGA chip power (core, PLL and I/O rails) at the compute bound"),
    "watts_chip_delivered": ("W", "FPGA chip power at the host link's rate"),
    "images_per_s_per_w_chip": ("images/s/W", "compute-bound images a second per chip watt"),
    "uj_per_inference_chip": ("uJ", "chip energy of one inference at the compute bound"),
    "watts_board": ("W", "a GPU board's or module's power (its TDP or measured draw)"),
    "uj_per_inference_board": ("uJ", "a whole board's energy of one inference (MLPerf Tiny's "
                                     "measurement)"),
    "images_per_s_per_w_board": ("images/s/W", "images a second per board watt"),
    "clock_mhz": ("MHz", "the clock a build targets"),
    "fmax_mhz": ("MHz", "the routed design's highest clock (nextpnr's timing analysis)"),
    "luts": ("LUT4", "4-input lookup tables (iCE40 logic cells, ECP5 LUT4)"),
    "luts_available": ("LUT4", "the device's 4-input lookup tables"),
    "ffs": ("FF", "flip-flops"),
    "dsps": ("DSP", "multiplier blocks (iCE40 SB_MAC16, ECP5 MULT18X18D)"),
    "brams": ("BRAM", "block RAMs (iCE40 EBR, ECP5 DP16KD)"),
    "sprams": ("SPRAM", "iCE40UP single-port 256 kbit RAMs"),
    "build_s": ("s", "seconds of yosys and nextpnr for one build"),
    "seed": ("", "the placement seed of the build a row reports (nextpnr --seed)"),
    "weight_bytes": ("bytes", "the weight memory image of the compiled network (the compiler's "
                              "plan, in whole weight words)"),
}

FIELDS = ("network", "board", "configuration", "metric", "value", "unit", "basis", "command",
          "commit", "date")


@dataclass(frozen=True)
class Row:
    """One figure; see the module's docstring for the fields."""
    network: str
    board: str
    configuration: str
    metric: str
    value: float
    unit: str
    basis: str
    command: str
    commit: str
    date: str
    source: str = None

    @property
    def key(self):
        return (self.network, self.board, self.configuration, self.metric)

    def to_dict(self):
        data = asdict(self)
        if data["source"] is None:
            del data["source"]
        return data


def _head_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make_row(network, board, configuration, metric, value, basis, command, *, source=None,
             commit=None, date=None):
    """A checked :class:`Row` of today on this checkout's commit, the unit the metric's."""
    row = Row(network, board, configuration, metric, float(value), METRICS.get(metric, ("?",))[0],
              basis, command, commit or _head_commit(), date or _date.today().isoformat(), source)
    _check_row(row, "a new row")
    return row


def _check_row(row, where):
    def refuse(what):
        raise ResultsError(f"{where}: {what}")
    for name in ("network", "board", "configuration", "command", "commit", "date"):
        text = getattr(row, name)
        if not isinstance(text, str) or not text or "|" in text or "}}" in text:
            refuse(f"{name} must be a non-empty string without '|' or '}}}}', not {text!r}")
    if row.metric not in METRICS:
        refuse(f"unknown metric {row.metric!r} (known: {', '.join(METRICS)})")
    if row.unit != METRICS[row.metric][0]:
        refuse(f"{row.metric} is in {METRICS[row.metric][0]!r}, not {row.unit!r}")
    if row.basis not in BASES:
        refuse(f"unknown basis {row.basis!r} (known: {', '.join(BASES)})")
    if (row.basis == "published") != bool(row.source):
        refuse("a published row names its source, and only a published row has one")
    if not isinstance(row.value, (int, float)) or row.value != row.value:
        refuse(f"value must be a number, not {row.value!r}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.date):
        refuse(f"date must be YYYY-MM-DD, not {row.date!r}")


def check_rows(data, where):
    """:class:`Row` objects of a results file's parsed JSON (a list of objects), checked."""
    if not isinstance(data, list):
        raise ResultsError(f"{where}: a results file is a JSON list of rows")
    rows = []
    for index, item in enumerate(data):
        if not isinstance(item, dict) or set(FIELDS) - set(item) or \
                set(item) - set(FIELDS) - {"source"}:
            raise ResultsError(f"{where}: row {index} must have exactly the fields "
                               f"{', '.join(FIELDS)} (and 'source' when published)")
        row = Row(**item)
        _check_row(row, f"{where}: row {index}")
        rows.append(row)
    keys = [row.key for row in rows]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ResultsError(f"{where}: two rows of {' | '.join(twice[0])}")
    return rows


def write_rows(path, rows):
    """Write ``rows`` as ``path`` (built aside, renamed into place), sorted by their key."""
    rows = sorted(rows, key=lambda row: row.key)
    check_rows([row.to_dict() for row in rows], str(path))
    text = "[\n" + ",\n".join(json.dumps(row.to_dict()) for row in rows) + "\n]\n"
    write_text_atomic(Path(path), text)


def load_rows(directory):
    """Every row of ``directory/*.json``; no key may appear in two files."""
    rows, seen = [], {}
    for path in sorted(Path(directory).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ResultsError(f"{path}: not a readable JSON file ({error})") from None
        for row in check_rows(data, str(path)):
            if row.key in seen:
                raise ResultsError(f"{' | '.join(row.key)} is in both {seen[row.key]} and {path}")
            seen[row.key] = path
            rows.append(row)
    return rows


def find(rows, network, board, configuration, metric):
    """The one row of that key."""
    key = (network, board, configuration, metric)
    for row in rows:
        if row.key == key:
            return row
    raise ResultsError(f"no results row {' | '.join(key)}")


def format_value(row, spec=None):
    """``row.value`` as a page shows it. ``spec`` is a Python format spec (``,.0f``), ``mW``
    (a W figure in milliwatts, three significant digits) or ``k`` (thousands, ``43.4 k``);
    without one the metric's unit chooses."""
    value = row.value
    if spec == "mW":
        return f"{_significant(value * 1e3)} mW"
    if spec == "k":
        return f"{value / 1e3:,.1f} k"
    if spec:
        return format(value, spec)
    if row.unit in ("%", "MHz"):
        return f"{value:.1f}"
    if row.unit != "W" and (abs(value) >= 100 or value == int(value)):
        return f"{value:,.0f}"
    return _significant(value)


def _significant(value, digits=3):
    text = f"{value:.{digits}g}"
    if "e" in text:
        return f"{value:,.0f}"
    whole = float(text)
    return f"{whole:,.0f}" if abs(whole) >= 10 ** (digits - 1) else text


#: ``{{network | board | configuration | metric}}`` or ``{{... | metric :SPEC}}``.
PLACEHOLDER = re.compile(r"\{\{\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*\|"
                         r"\s*([a-z0-9_]+)\s*(?::\s*([^{}\s]+)\s*)?\}\}")


def render(template, rows):
    """``template`` with each placeholder replaced by its row's value (:func:`format_value`).

    Returns
    -------
    str
        The page.
    list of Row
        The rows it used, in order.
    """
    used = []

    def fill(match):
        network, board, configuration, metric, spec = match.groups()
        row = find(rows, network, board, configuration, metric)
        used.append(row)
        return format_value(row, spec)
    page = PLACEHOLDER.sub(fill, template)
    if "{{" in page:
        line = page[:page.index("{{")].count("\n") + 1
        raise ResultsError(f"line {line}: a placeholder that is not "
                           "{{network | board | configuration | metric}}")
    return page, used
