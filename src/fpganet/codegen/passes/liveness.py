"""Pass ``liveness``: which step writes each stored map and which reads it last."""

__all__ = ["mark_liveness"]


def mark_liveness(plan):
    """Reads ``plan.steps``; writes every map's ``producer`` (the number of the step that
    writes it; 0: ``INPUT``) and ``last_use`` (the last step that reads it, through a view
    too; ``n + 1``: ``OUTPUT``; read by nothing: its producer, live only while written)."""
    for m in plan.maps:
        m.producer = m.last_use = None
    plan.input_map.producer = 0
    for step in plan.steps:
        step.dst.producer = step.number
        for source in step.sources:
            stored = source.storage
            stored.last_use = max(stored.last_use or 0, step.number)
    plan.output_map.last_use = len(plan.steps) + 1
    for m in plan.maps:
        if m.last_use is None:
            m.last_use = m.producer
