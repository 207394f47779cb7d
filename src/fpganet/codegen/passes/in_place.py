"""Pass ``in-place``: an add's output written over an input that dies at the add."""

__all__ = ["place_adds_in_place"]


def place_adds_in_place(plan):
    """Reads the add steps and their maps' liveness; writes the output map's ``in_place_of``
    (the first input whose last reader is the add, else None). Element (c, y, x) of the output
    is written in the tile that reads it from both inputs, so the output may take the bytes of
    an input that dies there."""
    for step in plan.steps:
        if step.kind == "add":
            step.dst.in_place_of = next(
                (source for source in step.sources if source.last_use == step.number
                 and source.copies == 1 and source is not step.dst), None)
