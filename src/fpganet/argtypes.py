"""argparse value types shared by the command lines (``type=`` callables with one-line errors),
and the flags of an :class:`~fpganet.config.AcceleratorConfig`."""

import argparse
import dataclasses
import math

from .config import AcceleratorConfig
from .errors import FpganetError
from .isa import REQUANT_MODES

__all__ = ["positive_int", "non_negative_int", "positive_float", "finite_float", "percent",
           "add_weight_bits_arguments", "add_config_arguments", "config_from_args"]


def positive_int(text):
    """An integer of at least 1."""
    return _int_at_least(text, 1)


def non_negative_int(text):
    """An integer of at least 0."""
    return _int_at_least(text, 0)


def _int_at_least(text, minimum):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
    return value


def positive_float(text):
    """A finite number greater than 0."""
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def finite_float(text):
    """A finite number (not inf, not nan)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def percent(text):
    """A percentage from 0 to 100, returned as a fraction."""
    value = finite_float(text)
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, not {text}")
    return value / 100


# Weight widths (compile, fit) ------------------------------------------------------------

def add_weight_bits_arguments(parser):
    """``--weight-bits N`` and ``--layer-weight-bits LAYER=N[,...]`` (a float model's)."""
    from .quantize.rounding import DEFAULT_WEIGHT_BITS

    parser.add_argument("--weight-bits", type=_weight_bits, default=DEFAULT_WEIGHT_BITS,
                        metavar="N",
                        help="a float model's weights: N-bit codes in -(2**(N-1)-1)..2**(N-1)-1, "
                             "2..8 (default 8), one int8 each in memory, or two a byte at 4 "
                             "bits and fewer with --packed-weights")
    parser.add_argument("--layer-weight-bits", type=_layer_weight_bits, metavar="LAYER=N[,...]",
                        help="per-layer widths overriding --weight-bits, each layer by its "
                             "name or its number as fpganet compile prints them (0=8,13=8)")


def _weight_bits(text):
    from .quantize.rounding import WEIGHT_BITS

    value = positive_int(text)
    if value not in WEIGHT_BITS:
        raise argparse.ArgumentTypeError(f"must be from {WEIGHT_BITS.start} to "
                                         f"{WEIGHT_BITS.stop - 1}, not {value}")
    return value


def _layer_weight_bits(text):
    from .quantize.rounding import parse_layer_weight_bits

    try:
        return parse_layer_weight_bits(text)
    except FpganetError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# Accelerator configuration flags (compile, synth, dse ...) -------------------------------

def add_config_arguments(parser, requant_mode_default=None):
    """Add ``--array RxC`` and one flag per :class:`AcceleratorConfig` field (``--acc-width``...).
    ``requant_mode_default``: what ``--requant-mode``'s help says its default is, where the
    command picks one other than the field's."""
    group = parser.add_argument_group("accelerator configuration (stored in the manifest)")
    group.add_argument("--array", metavar="RxC", help="systolic array rows x columns, e.g. 2x8")
    for field in dataclasses.fields(AcceleratorConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.name == "requant_mode":
            group.add_argument(flag, dest=f"config_{field.name}", choices=REQUANT_MODES,
                               help=f"default {requant_mode_default or field.default}")
            continue
        if field.type in (bool, "bool"):
            group.add_argument(flag, dest=f"config_{field.name}", type=_yes_no, metavar="yes|no",
                               help=f"default {'yes' if field.default else 'no'}")
            continue
        kind = (positive_float if field.type in (float, "float") else
                non_negative_int if field.default == 0 else positive_int)
        default = ("the requantization mode's: 4 (fpganet) or 6 (tflite)"
                   if field.name == "requant_latency" else field.default)
        group.add_argument(flag, dest=f"config_{field.name}", type=kind, metavar="N",
                           help=f"default {default}")
    group.add_argument("--clock-mhz", dest="config_clock_mhz", type=positive_float, metavar="F",
                       help="the clock in MHz (instead of --clock-hz)")


def _yes_no(text):
    value = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected yes or no, not {text!r}")
    return value


def config_from_args(args):
    """The :class:`AcceleratorConfig` the flags of :func:`add_config_arguments` describe."""
    values = {field.name: getattr(args, f"config_{field.name}")
              for field in dataclasses.fields(AcceleratorConfig)
              if getattr(args, f"config_{field.name}", None) is not None}
    if getattr(args, "config_clock_mhz", None) is not None:
        if "clock_hz" in values:
            raise FpganetError("give either --clock-hz or --clock-mhz, not both")
        values["clock_hz"] = args.config_clock_mhz * 1e6
    if getattr(args, "array", None):
        if "rows" in values or "cols" in values:
            raise FpganetError("give either --array or --rows/--cols, not both")
        return AcceleratorConfig.parse_array(args.array, **values)
    return AcceleratorConfig(**values)
