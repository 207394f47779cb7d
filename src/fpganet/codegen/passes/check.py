"""Pass ``check``: refuse a network the configuration cannot run, before any planning."""

import numpy as np

from ...errors import FpganetError
from ...qnet import QAdd, QConv

__all__ = ["check_network"]


def _check_mult_bits(net, config):
    """Every multiplier is a multiple of ``config.mult_step``: the requantizer reads only the
    top ``requant_mult_bits`` of each."""
    if config.mult_step == 1:        # whole multipliers; the tflite mode always has them
        return
    for layer in net.layers:
        mult = np.atleast_1d(getattr(layer, "mult", np.zeros(1, np.int64)))
        finer = np.flatnonzero(mult % config.mult_step)
        if finer.size:
            raise FpganetError(f"layer '{layer.name}': multiplier {int(mult[finer[0]])} has more "
                               f"than the {config.requant_mult_bits} significant bits this "
                               f"{config.name} configuration's requantizer keeps "
                               f"(--requant-mult-bits): compile the model for it")


def _check_weights(net, config):
    """Every weight the array multiplies is one it computes with exactly (with
    ``ternary_pairs``: -1, 0 and +1; an add's weights are its inputs' scales)."""
    for layer in net.layers:
        if isinstance(layer, QAdd):
            weight = np.array([layer.w_a, layer.w_b])
        else:
            weight = getattr(layer, "weight", None) if isinstance(layer, QConv) else None
        if weight is not None and not config.runs_weights(weight):
            raise FpganetError(f"layer '{layer.name}': weights {int(np.min(weight))}.."
                               f"{int(np.max(weight))}; the {config.name} configuration's ternary "
                               f"pairs multiply -1, 0 and +1 only (ternary_pairs): a binary or "
                               f"ternary network runs there")


def check_network(plan):
    """Reads ``plan.net``, ``plan.config`` and ``plan.batch``; writes nothing. Refuses (one
    :class:`~fpganet.errors.FpganetError` line) another requantization mode, an invalid network,
    operands other than int8, an accumulator a layer could overflow, multipliers finer than the
    requantizer keeps, weights the array cannot multiply (ternary pairs), and a batch outside
    1..cols."""
    net, config, batch = plan.net, plan.config, plan.batch
    if config.requant_mode != net.config.requant_mode:
        raise FpganetError(f"the network's multipliers are for the {net.config.requant_mode} "
                           f"requantization; this {config.name} configuration has the "
                           f"{config.requant_mode} one (--requant-mode)")
    net.validate()
    if config.operand_width != 8:
        raise FpganetError(f"the back end generates int8 programs; the {config.name} configuration "
                           f"has {config.operand_width}-bit operands (--operand-width)")
    for layer in net.conv_layers:
        layer.validate(config.acc_width, config.requant_mode)   # the no-overflow rule, the ranges
    _check_mult_bits(net, config)
    _check_weights(net, config)
    if not 1 <= batch <= config.cols:
        raise FpganetError(f"--batch {batch}: must be 1..{config.cols} (one image per array "
                           f"column; the {config.name} configuration has {config.cols})")
