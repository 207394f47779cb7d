"""Pass ``buffers``: where each step's weights and parameter entries go; what does not fit."""

from ...errors import FpganetError
from ..ir import capacity_error

__all__ = ["place_buffers"]


def place_buffers(plan):
    """Reads the steps (their weight words and parameter entries) and the allocation; writes
    each step's ``w_base`` and ``p_base``, ``plan.weight_words`` and ``plan.param_entries``.
    Refuses, in one line, everything that does not fit: the activation buffer (when no layout
    did), the weight buffer, the parameter buffer (a board that cannot hold a network says all
    it lacks)."""
    config, batch = plan.config, plan.batch
    shortfalls = []
    if not plan.allocation:
        shortfalls.append(capacity_error("activation buffer", plan.act_needed,
                                         config.act_buffer_bytes, config,
                                         "--act-buffer-bytes" if batch == 1 else
                                         f"--act-buffer-bytes, or a --batch below {batch}"))
    words = entries = 0
    for step in plan.steps:
        step.w_base, step.p_base = words, entries
        words += step.weight_words(config)
        entries += step.param_entries(config.rows)
    plan.weight_words, plan.param_entries = words, entries
    if words > config.weight_buffer_words:
        shortfalls.append(capacity_error("weight buffer", words * config.weight_word_bytes,
                                         config.weight_buffer_words * config.weight_word_bytes,
                                         config, "--weight-buffer-bytes",
                                         f"{words:,} words of {config.weight_word_bytes} bytes",
                                         f"{config.weight_buffer_words:,} words"))
    if entries > config.bias_buffer_words:
        shortfalls.append(capacity_error("parameter buffer", entries * 8,
                                         config.bias_buffer_words * 8, config, "--bias-buffer-words",
                                         f"{entries:,} entries of 8 bytes",
                                         f"{config.bias_buffer_words:,} entries"))
    if shortfalls:
        raise FpganetError("; ".join(str(error) for error in shortfalls))
