"""The engine's window generator: im2col address generation and the banked gather.

It walks the engine loops of docs/reference/architecture.md ("Instruction set") exactly::

    for g in range(GROUPS):
        for t in range(TILES):
            lanes j: n = t*LANES + j, valid_j = n < NPIX, in_off[j] = oy*IN_ROWSTEP + ox*STRIDE_X
            for c, ky, kx (kx fastest): beat k
                b[j] = act[IN_BASE + g*IN_GSTEP + c*IN_CSTRIDE + ky*IN_PITCH + kx + in_off[j]]
                a    = weights[W_BASE + g*W_GSTEP + k]

and sends one operand beat per ``(g, t, k)`` to the systolic array (``CONV``) or the
max-pool unit (``POOL``), ``last`` on the final beat of a tile. No
multiplier is used per beat: every address is a running sum.

Stages (each a register boundary):

* **lane walker**: computes the lane addresses ``IN_BASE + g*IN_GSTEP + in_off[j]``
  and validity of the *next* tile, one lane per cycle. It starts in the cycle
  after a tile's first beat enters the gather stage, so a tile can follow the
  previous one ``LANES + 1`` cycles after it started at the earliest.
* **gather** (``S1``): holds one beat while its lanes read the activation banks, one lane
  per bank a cycle, lowest lane first; invalid lanes do not read. A beat occupies the stage
  for ``max(1, most valid lanes in one bank)`` cycles (with ``config.pair_products``, the
  most reads in one bank). The weight word is read in the same cycles.
* **output** (``S2``): the bytes arrive (``config.act_read_latency`` cycles after their
  read) and the beat is offered on ``operands``, ``config.operand_latency`` cycles after
  its last gather cycle.

Back-pressure: while an offered beat is not taken (the array holds a tile's ``last`` beat
until the previous tile's results are out), the stages freeze and the memory read ports
hold their data. Timing is therefore a pure function of the registers: see
:mod:`fpganet.perf`.

Two variants (:func:`window_generator` picks one) differ in how the gather serves the banks:

* :class:`~fpganet.hdl.window_arbitrated.ArbitratedWindowGenerator` arbitrates them each
  cycle (``config.bank_access`` ``"arbitrated"``);
* :class:`~fpganet.hdl.window_scheduled.ScheduledWindowGenerator` follows each tile's bank
  schedule, which the lane walker computes ahead, in the same order and so the same cycles,
  with registered operands and a skid register behind the offer
  (``config.bank_access`` ``"scheduled"``).

The stages they share are :class:`~fpganet.hdl.window_base.WindowGenerator`'s.
"""

from fpganet.config import AcceleratorConfig

from .window_arbitrated import ArbitratedWindowGenerator
from .window_base import WindowGenerator
from .window_scheduled import ScheduledWindowGenerator

__all__ = ["ArbitratedWindowGenerator", "ScheduledWindowGenerator", "WindowGenerator",
           "window_generator"]


def window_generator(config):
    """The window generator variant for ``config``.

    Parameters
    ----------
    config : AcceleratorConfig

    Returns
    -------
    WindowGenerator
        The :attr:`~fpganet.config.AcceleratorConfig.bank_access` variant: a
        :class:`ScheduledWindowGenerator` or an :class:`ArbitratedWindowGenerator`.
    """
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
    if config.bank_access == "scheduled":
        return ScheduledWindowGenerator(config)
    return ArbitratedWindowGenerator(config)
