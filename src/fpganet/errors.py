"""The one exception type that reaches the user.

Everything that can go wrong because of what the user gave us (a model file, a
calibration file, an input file, a flag) raises :class:`FpganetError` with a
one-line message that names the offending thing exactly: the ONNX node and its
op, the missing key, the shape that was expected. The command line prints it as
``fpganet: error: <message>`` and exits with status 2, never with a traceback.
A traceback therefore always means a bug in fpganet, not bad input.
"""

__all__ = ["FpganetError", "FpganetWarning", "one_line"]


def one_line(text):
    """Collapse a message from a library (protobuf, numpy, OS) onto one line."""
    return " ".join(str(text).split())


class FpganetError(Exception):
    """A user-facing error; ``str(error)`` is a single line."""

    def __init__(self, message):
        super().__init__(one_line(message))


class FpganetWarning(UserWarning):
    """Something the user gave is accepted but looks wrong (degenerate calibration data,
    inputs outside the calibrated range); the command line prints it as one line,
    ``fpganet: warning: <message>``, on stderr and goes on."""
