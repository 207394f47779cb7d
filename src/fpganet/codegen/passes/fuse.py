"""Pass ``fuse``: a 2x2 max-pool run inside the conv before it (``CONV pool``)."""

from collections import Counter
from dataclasses import replace

from ...isa import Reg
from ...perf import engine_beats

__all__ = ["fuse_max_pools"]


def _fuses(conv, pool_step, net, config, readers):
    """Whether the 2x2 max-pool of ``pool_step`` runs fused into ``conv``, the step before it:
    the configuration has the pooled writes, the pool reads that conv's output alone (not
    through a reshape), unpadded, with a 2x2 window and stride 2, the conv has stride 1 and
    an even output, and the fused walk takes fewer beats than the conv and the ``POOL`` (its
    kernel is a column wider: on LeNet-5's first layer 8,820 against 14,112; not on its
    second). A ``CONV binary`` is not fused: the wider kernel's weights hold zeros."""
    pool = pool_step.layer
    if not (config.fused_max_pool and config.rows >= 2 and conv.kind == "conv"
            and not conv.pooled and not conv.binary and pool_step.src is conv.dst
            and net.layer_inputs(pool_step.layer_index)[0] == conv.layer_index
            and readers[conv.layer_index] == 1):
        return False
    if (tuple(pool.kernel), tuple(pool.stride), any(pool.pads)) != ((2, 2), (2, 2), False):
        return False
    if config.act_buffer_bytes & (config.act_buffer_bytes - 1):
        return False            # the writes' bases wrap modulo the buffer, as the hardware's
    channels, height, width = conv.layer.out_shape
    if tuple(conv.stride) != (1, 1) or height % 2 or width % 2:
        return False
    fused = replace(conv, pool_layer=pool, rows_as_channels=False, pair_columns=config.pair_products)

    def beats(step):
        return engine_beats(dict(zip((Reg.K_C, Reg.K_H, Reg.K_W), step.walk)), config)

    rows, pixels, pooled = config.rows, height * width, height * width // 4
    unfused = (conv.groups(rows) * -(-pixels // min(config.cols, pixels)) * beats(conv)
               + channels * -(-pooled // min(config.cols, pooled)) * 4)
    return fused.passes(rows) * fused.groups(rows) * (width // 2) * beats(fused) < unfused


def fuse_max_pools(plan):
    """Reads ``plan.steps``, the layer graph and ``plan.config``; writes each fused conv step's
    ``pool_layer``, ``dst`` (the pool's map), ``pair_columns``, ``rows_as_channels`` (off) and
    ``lanes`` (2: a pair of output rows), drops the pool step and the conv's unpooled map from
    ``plan.steps`` and ``plan.maps``, and numbers the steps 1..n again."""
    net, config = plan.net, plan.config
    readers = Counter(source for index in range(len(net.layers)) for source in net.layer_inputs(index))
    kept = []
    for step in plan.steps:
        if step.kind == "pool" and kept and _fuses(kept[-1], step, net, config, readers):
            conv = kept[-1]
            plan.maps.remove(conv.dst)
            conv.dst, conv.pool_layer, conv.rows_as_channels = step.dst, step.layer, False
            conv.pair_columns, conv.lanes = config.pair_products, 2
            continue
        kept.append(step)
    for number, step in enumerate(kept, 1):
        step.number = number
    plan.steps = kept
