"""The result writer: output addresses, post-processing and the scatter into the activation banks.

It takes the result rows of the systolic array (``CONV``: ``rows`` rows per tile)
or of the max-pool unit (``POOL``: one row per tile), in tile order, and for
each row walks its lanes ``requant_lanes`` at a time (a *lane group*)::

    CONV: act[OUT_BASE + g*OUT_GSTEP + i*OUT_CSTRIDE + out_off[j]] = requantize(sum[i][j])
          for rows i with g*rows + i < M and valid lanes j
    POOL: act[OUT_BASE + g*OUT_GSTEP + out_off[j]] = max[j]           for valid lanes j

and, with ``config.fused_max_pool``, the pooled ``CONV``: rows ``i < M`` of every group read
the parameters at ``P_BASE + i``, and each pair of rows ``2p, 2p + 1`` writes one byte, the
maximum of both rows' requantized bytes over the tile's valid lanes, at row ``2p + 1``'s address
of the tile's last lane (a running maximum beside the write; no cycle changes).

with ``out_off[j] = oy*OUT_PITCH + ox`` of pixel ``n = t*LANES + j`` kept as running
sums (no division, no multiplier).

Timing, all of it fixed by the registers:

* A lane group takes ``max(1, most written lanes in one bank)`` cycles: written
  lanes (valid pixel, live channel) that share a bank are sent down the
  pipeline in successive cycles, each with the lanes it serves, so nothing
  downstream ever stalls. With ``requant_lanes == 1`` every group takes 1 cycle.
* A row takes the sum of its groups' cycles, ``ceil(LANES / requant_lanes)``
  groups; it is taken from the result stream (``ready``) in the cycle of its
  final group, and the next row is processed from the next cycle.
* The bytes are written :attr:`latency` cycles after their group's cycle, and
  ``done`` pulses in the cycle of the final write.

Two variants (:func:`result_writer` picks one) differ in how a lane group's writes are ordered:

* :class:`~fpganet.hdl.scatter_arbitrated.ArbitratedResultWriter` arbitrates the banks for
  the group being written (``config.bank_access`` ``"arbitrated"``);
* :class:`~fpganet.hdl.scatter_scheduled.ScheduledResultWriter` walks up to two lane groups
  ahead of the group being written, into a queue that carries each group's addresses, flags
  and bank schedule (the lowest-lane-first order: the same cycles), so that the first row
  may come no earlier than four cycles after ``start`` (``config.bank_access``
  ``"scheduled"``).

The parts they share are :class:`~fpganet.hdl.scatter_base.ResultWriter`'s.

The parameter entry of the next row's channel is read when a row is taken, so
it is ready when the next row starts (and in the cycle after ``start`` for the
first). ``start`` is registered on entry: the first row can come no earlier than
the window generator's set-up plus one tile of beats after it.
"""

from fpganet.config import AcceleratorConfig

from .scatter_arbitrated import ArbitratedResultWriter
from .scatter_base import ResultWriter
from .scatter_scheduled import ScheduledResultWriter

__all__ = ["ArbitratedResultWriter", "ResultWriter", "ScheduledResultWriter", "result_writer"]


def result_writer(config, *, requant_multiplier="generic", requant_dsp_model=False):
    """The result writer variant for ``config``.

    Parameters
    ----------
    config : AcceleratorConfig
    requant_multiplier, requant_dsp_model
        The requantizer's (:class:`~fpganet.hdl.scatter_base.ResultWriter`).

    Returns
    -------
    ResultWriter
        The :attr:`~fpganet.config.AcceleratorConfig.bank_access` variant: a
        :class:`ScheduledResultWriter` or an :class:`ArbitratedResultWriter`.
    """
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
    variant = ScheduledResultWriter if config.bank_access == "scheduled" else ArbitratedResultWriter
    return variant(config, requant_multiplier=requant_multiplier,
                   requant_dsp_model=requant_dsp_model)
