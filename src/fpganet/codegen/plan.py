"""Planning: from a :class:`~fpganet.qnet.QNetwork` to engine steps and feature-map layouts.

The plan decides, for an :class:`~fpganet.config.AcceleratorConfig`:

* the **steps**: one engine instruction (``CONV`` or ``POOL``) per conv, dense or
  max-pool layer, plus a ``POOL`` 1x1 copy where a reshape cannot be a free view;
* the **layout** of every stored feature map in the activation buffer: padding
  (for the consumer: a conv's pads hold ``zp_in``, a padded max-pool's hold
  -128), ``pitch`` (chosen from ``act_banks`` candidates to minimise the bank
  conflicts of the consumer's reads and the producer's writes, as the cycle model counts
  them: :func:`fpganet.perf.gather_cycles`) and ``cstride`` (with pair products chosen too);
* the **allocation** (base address) of every map: disjoint if everything fits,
  else by liveness (a map's bytes are reused once it is dead), and whether a
  map's border is filled once before the image loop or again every image;
* where the weights (words of ``rows`` bytes) and parameter entries of each
  layer go.

Reshapes cost nothing when they can: the output of the network is sent in the
stored layout of the last map (``OUTPUT`` walks channel, row, byte: the NCHW
flatten); a dense layer after a flatten reads the stored map in place as one
``CONV`` whose kernel is the whole map; ``INPUT`` writes the first map in
whatever shape its consumer wants. Only a reshape feeding a padded conv/pool
that is not the input costs a copy (``POOL`` with a 1x1 window).

Everything that does not fit raises one :class:`~fpganet.errors.FpganetError`
line naming the buffer, the bytes needed and available, and the flag to change.

:func:`plan_network` runs the passes of :data:`fpganet.codegen.passes.PLAN_PASSES`, one
decision each, on the intermediate form of :mod:`fpganet.codegen.ir`; this module keeps the
names its users import.
"""

from .ir import (COUNT_LIMIT, POOL_PAD_VALUE, FeatureMap, Plan, Step, capacity_error, channel_tile,
                 format_plan, write_extra_cycles)
from .passes import ATTEMPTS, PLAN_PASSES, run_passes
from .passes.lower import stores_binary_layer

__all__ = ["FeatureMap", "Step", "Plan", "plan_network", "smallest_act_bytes", "ATTEMPTS",
           "write_extra_cycles", "capacity_error", "POOL_PAD_VALUE", "COUNT_LIMIT",
           "channel_tile", "format_plan", "PLAN_PASSES", "stores_binary_layer"]


def smallest_act_bytes(net, config=None, batch=1):
    """The fewest activation bytes any layout the planner tries needs for ``net`` (at ``batch``)."""
    config = (config or net.config).replace(act_buffer_bytes=1 << 30)
    return min(a["bytes"] for a in plan_network(net, config, explore=True, batch=batch).attempts)


def plan_network(net, config=None, explore=False, batch=1, dump=None):
    """Plan ``net`` for ``config`` (default: the configuration it was compiled for).

    The first layout of :data:`ATTEMPTS` that fits the activation buffer is taken
    (``explore``: every layout is still measured, in ``Plan.attempts``). ``batch`` > 1 runs the
    dense layers at the end of the network once for groups of ``batch`` images (1..cols).
    ``dump``: a text stream that gets the plan after each pass (``fpganet compile --dump-ir``).

    Returns
    -------
    Plan

    Raises
    ------
    fpganet.errors.FpganetError
        A layer the accelerator cannot run, or a network that does not fit the activation,
        weight or parameter buffer (one line naming the buffer, needed and available bytes).
    """
    plan = Plan(net, config or net.config, batch=batch, explore=explore)
    return run_passes(plan, PLAN_PASSES, dump)
