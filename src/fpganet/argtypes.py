"""argparse value types shared by the command lines (``type=`` callables with one-line errors)."""

import argparse
import math

__all__ = ["positive_int", "non_negative_int", "positive_float", "finite_float"]


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
