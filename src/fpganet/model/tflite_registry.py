"""The registry of TFLite op handlers: reader kind -> op code -> one small function.

A handler is ``handler(ctx, op)`` (:mod:`fpganet.model.tflite_ops`); each kind's supported
list and its refusal of any other op come from :data:`HANDLERS`.
"""

from dataclasses import dataclass

__all__ = ["HANDLERS", "TfliteOp", "tflite_handler", "supported", "MIXED"]

MIXED = "a mixed model; fpganet takes fully-int8 TFLite models, or float32 ones with --calib"


@dataclass(frozen=True)
class TfliteOp:
    """One op a reader kind takes: its handler, and whether the supported list names it (an
    op may have a handler only to refuse it with a better message)."""

    code: str
    handler: object
    listed: bool = True


#: Reader kind (``"int8"``, ``"float"``) -> op code -> :class:`TfliteOp`, in registration order.
HANDLERS = {"int8": {}, "float": {}}


def tflite_handler(code, *kinds, listed=True):
    """Register the decorated function as the handler of ``code`` for the reader ``kinds``."""
    def register(handler):
        for kind in kinds:
            if code in HANDLERS[kind]:
                raise ValueError(f"two {kind} handlers for TFLite op '{code}'")
            HANDLERS[kind][code] = TfliteOp(code, handler, listed)
        return handler
    return register


def supported(kind):
    """The op codes reader ``kind`` names as supported, in registration order."""
    return tuple(code for code, entry in HANDLERS[kind].items() if entry.listed)
