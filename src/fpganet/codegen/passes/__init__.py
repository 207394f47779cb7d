"""The compiler back end as named passes over one intermediate form, in the manner of FINN's
transformations: each pass is a function of a :class:`~fpganet.codegen.ir.Plan` in its own
module, whose docstring says what it reads and writes.

:data:`PLAN_PASSES` is the build flow, in order:

``check``      refuse what the configuration cannot run (:mod:`.check`)
``lower``      layers into steps and stored maps, reshapes folded (:mod:`.lower`)
``fuse``       2x2 max-pools into the conv before them (:mod:`.fuse`)
``borders``    padding and border value of each map (:mod:`.borders`)
``liveness``   each map's producer and last reader (:mod:`.liveness`)
``in-place``   an add's output over an input that dies there (:mod:`.in_place`)
``batch``      the dense layers once per group of images (:mod:`.batch`)
``pitches``    pitch and channel stride search (:mod:`.pitches`)
``allocate``   base addresses, first layout that fits (:mod:`.allocate`)
``buffers``    weight and parameter places, the capacity refusal (:mod:`.buffers`)

then ``emit`` (:mod:`.emit`): the program and the weight and parameter images.
:func:`run_passes` runs them, and with ``dump`` writes the plan after each pass
(:func:`~fpganet.codegen.ir.format_plan`), which ``fpganet compile --dump-ir`` prints.
"""

from ..ir import format_plan
from .allocate import ATTEMPTS, allocate
from .batch import batch_dense_layers
from .borders import settle_borders
from .buffers import place_buffers
from .check import check_network
from .emit import Emission, emit, format_emission
from .fuse import fuse_max_pools
from .in_place import place_adds_in_place
from .liveness import mark_liveness
from .lower import lower
from .pitches import choose_pitches, search_pitches

__all__ = ["PLAN_PASSES", "EMIT_PASS", "run_passes", "dump_section", "ATTEMPTS", "Emission",
           "emit", "format_emission", "check_network", "lower", "fuse_max_pools",
           "settle_borders", "mark_liveness", "place_adds_in_place", "batch_dense_layers",
           "search_pitches", "choose_pitches", "allocate", "place_buffers"]

#: The planning flow: (name, pass) in the order they run.
PLAN_PASSES = (
    ("check", check_network),
    ("lower", lower),
    ("fuse", fuse_max_pools),
    ("borders", settle_borders),
    ("liveness", mark_liveness),
    ("in-place", place_adds_in_place),
    ("batch", batch_dense_layers),
    ("pitches", search_pitches),
    ("allocate", allocate),
    ("buffers", place_buffers),
)

#: The name of the last pass (:func:`emit`), after the planning flow.
EMIT_PASS = "emit"


def dump_section(dump, name, text):
    """Write one pass's form into the text stream ``dump`` (None: nothing)."""
    if dump is not None:
        dump.write(f"=== IR after pass '{name}' ===\n{text}\n")


def run_passes(plan, passes=PLAN_PASSES, dump=None):
    """Run ``passes`` on ``plan`` in order; with ``dump`` (a text stream) write the plan after
    each. A pass that refuses raises :class:`~fpganet.errors.FpganetError`; the sections of the
    passes before it are written."""
    for name, run in passes:
        run(plan)
        dump_section(dump, name, format_plan(plan))
    return plan
