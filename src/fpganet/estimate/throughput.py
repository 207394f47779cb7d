"""Throughput and latency of the accelerator on a board: compute, host link, end to end.

Inputs: a :class:`~fpganet.estimate.workload.Workload`, the cycles per image
(a :class:`~fpganet.estimate.quantity.Quantity`), the clock (the routed Fmax of
a boards ``report.json``, a clock given by the user, or the configuration's
``clock_hz``) and the host link (:class:`HostLink`, a UART by default).

* compute-bound images/s = clock / cycles per image;
* link-bound images/s = link bytes/s / bytes per image (input and output flow
  at the same time on a full-duplex link, so the larger of the two counts);
  if the weights do not fit the weight buffer they are streamed with every
  image;
* end to end = the lower of the two, and the *bottleneck* names which;
* latency of one image = input transfer + compute + output transfer (the
  accelerator's INPUT, engine and OUTPUT instructions do not overlap).
"""

import json
import math
import os
from dataclasses import dataclass, field

from ..boards.build import BOARDS as BOARD_REGISTRY
from ..codegen.images import STAMP_BYTES
from ..errors import FpganetError
from ..link.protocol import FRAME_OVERHEAD
from .figures import HOST_LINK, SPI_LINK
from .quantity import Quantity, missing

__all__ = ["BOARDS", "BoardReport", "load_board_report", "HostLink", "clock_quantity",
           "fpga_performance", "device_family", "REPORT_KEYS"]

#: The names the estimator's reports print for the boards of the registry.
_BOARD_NAMES = {"icebreaker": "1BitSquared iCEBreaker (iCE40UP5K-SG48)",
                "ulx3s": "Radiona ULX3S (ECP5 LFE5U-85F)"}
#: Boards the project targets, from the board registry (:data:`fpganet.boards.build.BOARDS`):
#: ``device``, ``family``, the on-board oscillator ``oscillator_hz`` (its platform's default
#: clock; a different clock needs the PLL) and ``name``.
BOARDS = {name: {"device": board.device, "family": board.family,
                 "oscillator_hz": float(board.platform().default_clk_frequency),
                 "name": _BOARD_NAMES.get(name, board.description)}
          for name, board in BOARD_REGISTRY.items()}

REPORT_KEYS = ("board", "device", "fmax_mhz", "macs_per_cycle", "resources", "toolchain")


@dataclass
class BoardReport:
    """A boards build report (``report.json``): what the router achieved for one board."""

    board: str
    device: str
    fmax_mhz: float
    macs_per_cycle: int
    resources: dict          # name -> {"used": int, "available": int}
    toolchain: object
    path: str = None
    extra: dict = field(default_factory=dict)

    @property
    def family(self):
        return device_family(self.device)

    def used(self):
        """``{resource name: cells used}``: nextpnr's raw ``utilization`` table when the report
        has one, else its ``resources``."""
        table = self.extra.get("utilization")
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            table = self.resources
        return {name: int(entry.get("used") or 0) for name, entry in table.items()}

    @property
    def board_clock_mhz(self):
        """The clock the board build targets (its PLL output, else the target), or None."""
        clock = self.extra.get("clock")
        if isinstance(clock, dict):
            for key in ("pll_mhz", "target_mhz"):
                if isinstance(clock.get(key), (int, float)) and clock[key] > 0:
                    return float(clock[key])
        return None


def device_family(device):
    """The family (``"ice40"``, ``"ecp5"``) of a board in the registry with ``device``.

    The power models are those of the registered boards' devices (``iCE40UP5K``,
    ``LFE5U-85F``); case, ``-`` and ``_`` are ignored.

    Raises
    ------
    fpganet.errors.FpganetError
        No registered board has that device.
    """
    def plain(name):
        return str(name).lower().replace("-", "").replace("_", "")

    for board in BOARD_REGISTRY.values():
        if plain(board.device) == plain(device):
            return board.family
    known = ", ".join(sorted({board.device for board in BOARD_REGISTRY.values()}))
    raise FpganetError(f"no power model for device '{device}' (known: {known})")


def load_board_report(path):
    """Read and check a boards ``report.json`` (as ``fpganet synth`` writes it).

    Every field the estimator reads is checked for type, finiteness and range:
    ``board`` and ``device`` strings (a device with a power model), ``fmax_mhz`` null or a
    positive number, ``macs_per_cycle`` a positive integer, ``resources`` (and
    ``utilization`` when present) mapping names to ``{"used": N, "available": N}`` with
    non-negative integers, ``clock.pll_mhz``/``clock.target_mhz`` null or positive.
    JSON's non-standard ``NaN``/``Infinity`` are refused.

    Raises
    ------
    fpganet.errors.FpganetError
        Missing file, bad JSON, or a key missing or out of range (named).
    """
    path = os.fspath(path)

    def refuse_constant(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        with open(path) as handle:
            data = json.load(handle, parse_constant=refuse_constant)
    except OSError as error:
        raise FpganetError(f"cannot read the board report '{path}': {error.strerror}") from None
    except (ValueError, RecursionError) as error:
        raise FpganetError(f"the board report '{path}' is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise FpganetError(f"the board report '{path}' is not a JSON object")
    absent = [key for key in REPORT_KEYS if key not in data]
    if absent:
        raise FpganetError(f"the board report '{path}' lacks the key(s) {', '.join(absent)} "
                           f"(expected {', '.join(REPORT_KEYS)})")

    def bad(key, expected):
        value = json.dumps(data.get(key) if "." not in key else None)
        return FpganetError(f"the board report '{path}': '{key}' must be {expected}"
                            + ("" if "." in key else f", not {value[:40]}"))

    for key in ("board", "device"):
        if not isinstance(data[key], str) or not data[key]:
            raise bad(key, "a non-empty string")
    fmax = data["fmax_mhz"]
    if fmax is not None and not _positive_number(fmax):
        raise bad("fmax_mhz", "null or a positive finite number of MHz")
    macs = data["macs_per_cycle"]
    if not isinstance(macs, int) or isinstance(macs, bool) or macs < 1:
        raise bad("macs_per_cycle", "a positive integer")
    for key in ("resources", "utilization"):
        if key == "utilization" and key not in data:
            continue
        table = data[key]
        if not isinstance(table, dict):
            raise bad(key, 'an object mapping each resource to {"used": N, "available": N}')
        for name, entry in table.items():
            if not isinstance(entry, dict) or "used" not in entry:
                raise bad(f"{key}.{name}", 'an object {"used": N, "available": N}')
            for field_name in ("used", "available"):
                value = entry.get(field_name)
                if field_name == "available" and value is None:
                    continue
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise bad(f"{key}.{name}.{field_name}", "a non-negative integer")
    clock = data.get("clock")
    if clock is not None:
        if not isinstance(clock, dict):
            raise bad("clock", "an object")
        for key in ("pll_mhz", "target_mhz"):
            if clock.get(key) is not None and not _positive_number(clock[key]):
                raise bad(f"clock.{key}", "null or a positive finite number of MHz")
    device_family(data["device"])
    return BoardReport(board=data["board"], device=data["device"],
                       fmax_mhz=None if fmax is None else float(fmax), macs_per_cycle=macs,
                       resources=data["resources"], toolchain=data["toolchain"],
                       path=path, extra={k: v for k, v in data.items() if k not in REPORT_KEYS})


def _positive_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


@dataclass(frozen=True)
class HostLink:
    """The link that carries images in and results out.

    Parameters
    ----------
    name : str
    baud : float
        Symbols (bits) per second on the wire.
    bits_per_byte : int
        Wire bits per payload byte (8N1 UART: 10).
    full_duplex : bool
        Input and output flow at the same time.
    basis : str
        What the figures rest on.
    """

    name: str = HOST_LINK["name"]
    baud: float = HOST_LINK["baud"]
    bits_per_byte: int = HOST_LINK["bits_per_byte"]
    full_duplex: bool = True
    basis: str = HOST_LINK["basis"]
    overhead_in: object = None      # bytes per image host -> board beyond the image (None: protocol)
    overhead_out: object = None     # bytes per image board -> host beyond the output (None: protocol)
    #: Seconds the host adds per transaction, and transactions per image (the SPI link's).
    turnaround_s: float = 0.0
    transactions_per_image: float = 0.0

    @classmethod
    def spi(cls, sck_hz=None, images_per_start=1):
        """The SPI link (:data:`fpganet.estimate.figures.SPI_LINK`) at ``sck_hz``, its
        transactions shared by the ``images_per_start`` images of a START."""
        link = SPI_LINK
        sck_hz = link["sck_hz"] if sck_hz is None else sck_hz
        # Half duplex: the host sends a request's bytes and reads its reply's after them.
        return cls(name="SPI", baud=sck_hz, bits_per_byte=link["bits_per_byte"],
                   full_duplex=False, basis=link["basis"], turnaround_s=link["turnaround_s"],
                   transactions_per_image=link["transactions_per_start"] / images_per_start)

    def overheads(self):
        """``(to board, to host, basis)``: bytes per image the link protocol adds."""
        if self.overhead_in is not None or self.overhead_out is not None:
            return (self.overhead_in or 0, self.overhead_out or 0,
                    "per-image overhead bytes given by the caller")
        return protocol_overhead()

    @property
    def bytes_per_s(self):
        return self.baud / self.bits_per_byte

    @property
    def label(self):
        if self.name == "SPI":
            return f"SPI {self.baud / 1e6:g} MHz"
        return f"{self.name} {self.baud / 1e6:g} Mbaud"

    def to_dict(self):
        to_board, to_host, overhead_basis = self.overheads()
        return {"name": self.name, "baud": self.baud, "bits_per_byte": self.bits_per_byte,
                "full_duplex": self.full_duplex, "bytes_per_s": self.bytes_per_s,
                "turnaround_s": self.turnaround_s,
                "transactions_per_image": self.transactions_per_image,
                "overhead_bytes_per_image": {"to_board": to_board, "to_host": to_host,
                                             "basis": overhead_basis},
                "basis": self.basis}


def protocol_overhead():
    """Bytes per image the project's host-link protocol adds: ``(to board, to host, basis)``.

    Host to board: a SEND_INPUT frame around the image and a READ_OUTPUT request (max,
    wait_for); board to host: the SEND_INPUT ACK, the READ_OUTPUT reply's framing and the
    4-byte cycle stamp the program sends after each image's output.
    """
    return (2 * FRAME_OVERHEAD + 4, 2 * FRAME_OVERHEAD + STAMP_BYTES,
            f"fpganet.link.protocol frames ({FRAME_OVERHEAD} bytes each): SEND_INPUT + READ_OUTPUT "
            f"request (4-byte payload) to the board; SEND_INPUT ACK + READ_OUTPUT reply + the "
            f"{STAMP_BYTES}-byte cycle stamp to the host, per image")


def clock_quantity(config, report=None, clock_hz=None):
    """The accelerator clock as a Quantity: the user's; else the board report's clock (its PLL
    output, capped by the routed Fmax); else the configuration's clock_hz."""
    if clock_hz is not None:
        return Quantity(float(clock_hz), "Hz", "estimated", "clock given by the user")
    if report is not None:
        target = report.board_clock_mhz
        fmax = report.fmax_mhz
        where = f"boards report '{report.path}' ({report.device})"
        if fmax is None and target is None:
            raise FpganetError(f"the {where} gives neither an Fmax nor a clock: give --clock-mhz")
        if fmax is None:
            return Quantity(target * 1e6, "Hz", "estimated",
                            f"the board clock of the {where}; no routed Fmax in it")
        if target is None or fmax <= target:
            why = ("routed Fmax (nextpnr static timing)" if target is None else
                   f"routed Fmax (nextpnr static timing), below the board clock {target:g} MHz: "
                   f"timing not met there")
            return Quantity(fmax * 1e6, "Hz", "estimated", f"{why}, {where}")
        return Quantity(target * 1e6, "Hz", "estimated",
                        f"the board clock {target:g} MHz (PLL) of the {where}; routed Fmax "
                        f"{fmax:g} MHz meets it")
    return Quantity(float(config.clock_hz), "Hz", "estimated",
                    f"assumed: the configuration's clock_hz ({config.clock_hz / 1e6:g} MHz), not a "
                    f"routed Fmax (no boards report given)")


def fpga_performance(workload, cycles, clock, link=None):
    """Compute-, link- and end-to-end images/s, latency and bottleneck.

    Parameters
    ----------
    workload : Workload
    cycles : Quantity
        Cycles per image.
    clock : Quantity
        Hz.
    link : HostLink, optional

    Returns
    -------
    dict
        Quantities ``compute_images_per_s``, ``link_images_per_s``, ``images_per_s``,
        ``latency_s``, ``compute_s``, ``link_in_s``, ``link_out_s``, ``duty`` (fraction of
        time the engine computes at the end-to-end rate), ``bottleneck``, ``setup_s``
        (loading the weights once), and ``link`` (its description).
    """
    link = link or HostLink()
    f = clock.value
    c = cycles.value
    compute_s = Quantity(c / f, "s", "estimated", f"cycles per image / clock = {c:,.0f} / "
                                                  f"{f / 1e6:g} MHz ({cycles.source} cycles)")
    compute_ips = Quantity(f / c, "images/s", "estimated",
                           f"clock / cycles per image ({cycles.source} cycles)")
    to_board, to_host, overhead_basis = link.overheads()
    in_bytes = workload.input_bytes + to_board
    out_bytes = workload.output_bytes + to_host
    weight_note = "weights resident on chip, loaded once"
    if not workload.weights_fit_on_chip:
        in_bytes += workload.weight_bytes + workload.param_bytes
        weight_note = (f"weights ({workload.weight_bytes:,} B) exceed the weight buffer "
                       f"({workload.config.weight_buffer_bytes:,} B): streamed with every image")
    bps = link.bytes_per_s
    per_image = max(in_bytes, out_bytes) if link.full_duplex else in_bytes + out_bytes
    waits = link.turnaround_s * link.transactions_per_image
    turnaround = (f"; {link.transactions_per_image:g} transactions per image, "
                  f"{link.turnaround_s * 1e6:g} us of host turnaround each" if waits else "")
    link_ips = Quantity(1 / (per_image / bps + waits), "images/s", "estimated",
                        f"{link.label}, {link.bits_per_byte} bits per byte = {bps:,.0f} B/s over "
                        f"{in_bytes:,} B in, {out_bytes:,} B out per image "
                        f"({'full duplex: the larger counts' if link.full_duplex else 'half duplex'}"
                        f"; {overhead_basis}){turnaround}; {weight_note}")
    t_in = Quantity(in_bytes / bps, "s", "estimated", f"{in_bytes:,} B at {bps:,.0f} B/s")
    t_out = Quantity(out_bytes / bps, "s", "estimated", f"{out_bytes:,} B at {bps:,.0f} B/s")
    if compute_ips.value <= link_ips.value:
        rate, bottleneck = compute_ips.value, "compute"
        why = "the engine is slower than the host link"
    else:
        rate, bottleneck = link_ips.value, f"host link ({link.label})"
        why = "the host link delivers images more slowly than the engine computes them"
    images = Quantity(rate, "images/s", "estimated",
                      "end to end: the lower of compute-bound and link-bound images/s (transfers "
                      "of the next image overlap compute, double-buffered)")
    io = cycles.extra.get("io_cycles", 0) if cycles.extra else 0
    latency = Quantity(t_in.value + (c - io) / f + t_out.value, "s", "estimated",
                       "one image: input transfer + compute + output transfer (INPUT, engine and "
                       "OUTPUT instructions do not overlap"
                       + (f"; the {io:,} cycles of INPUT/OUTPUT at one byte per cycle are replaced "
                          f"by the link's transfer times)" if io else ")"))
    duty = Quantity(min(1.0, rate * compute_s.value), None, "estimated",
                    "fraction of time the engine computes at the end-to-end rate")
    setup_bytes = workload.setup_bytes
    setup = (Quantity(setup_bytes / bps, "s", "estimated",
                      f"once per session: {setup_bytes:,} B of weights and parameters over the link"
                      if setup_bytes else "nothing is loaded: the weights are in the bitstream")
             if workload.weights_fit_on_chip else
             missing("s", "weights are streamed with every image"))
    return {"compute_images_per_s": compute_ips, "link_images_per_s": link_ips,
            "images_per_s": images, "latency_s": latency, "compute_s": compute_s,
            "link_in_s": t_in, "link_out_s": t_out, "duty": duty,
            "bottleneck": Quantity(bottleneck, None, "estimated", why), "setup_s": setup,
            "link": link.to_dict()}
