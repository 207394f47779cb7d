"""Pass ``batch``: the dense layers at the end of the network run once for a group of images."""

from ...errors import FpganetError

__all__ = ["batch_dense_layers"]


def _batch_steps(steps, batch):
    """Run the dense layers at the end of ``steps`` once for ``batch`` images; returns the index
    of the first of them.

    The images are the layer's output pixels (``NPIX = OUT_W = LANES = batch``): the first
    dense layer reads image j's copy of its input map ``j*copy_stride`` bytes on
    (``STRIDE_X``), every batched layer writes image j's outputs at ``+ j`` (interleaved maps),
    which the next one reads with ``STRIDE_X = 1``.
    """
    first = next((i for i, step in enumerate(steps) if step.kind == "dense"), None)
    if first is None:
        raise FpganetError(f"--batch {batch}: the network has no dense layer; batching runs the "
                           f"dense layers of several images at once (use --batch 1)")
    for index, step in enumerate(steps[first:], first):
        name = step.layer.name if step.layer is not None else step.dst.name
        if step.kind != "dense" or step.out_hw != (1, 1):
            raise FpganetError(f"--batch {batch}: layer '{name}' ({step.kind}) follows the first "
                               f"dense layer; batching needs the dense layers at the end of the "
                               f"network (use --batch 1)")
        if index > first and (step.src is not steps[index - 1].dst or step.kernel != (1, 1)):
            raise FpganetError(f"--batch {batch}: dense layer '{name}' reads a reshaped map of the "
                               f"previous dense layer, which batching cannot lay out (use --batch 1)")
    slot = steps[first].src.storage
    slot.copies = batch
    for step in steps[first:]:
        step.batched, step.lanes, step.out_hw = True, batch, (1, batch)
        step.dst.copies, step.dst.interleaved = batch, True
    return first



def batch_dense_layers(plan):
    """Reads ``plan.batch`` and ``plan.steps``; at batch B > 1 writes ``plan.first_batched``,
    the batched steps' ``batched``, ``lanes`` and ``out_hw`` (one lane, one output pixel an
    image), the slot map's ``copies`` (its input, held for B images side by side) and the
    batched outputs' ``copies`` and ``interleaved``. Refuses a network whose dense layers are
    not at its end, or read a reshaped map of the dense layer before."""
    if plan.batch > 1:
        plan.first_batched = _batch_steps(plan.steps, plan.batch)
