"""Holding the engine for a cycle: what single-port activation banks need
(``config.single_port_activations``).

A single-port RAM reads or writes in a cycle. The result writer's byte write therefore takes a
cycle of its own, in which every flip-flop, memory port and DSP register of the engine (window
generator, array, max-pool unit, writer, result queue) keeps its value; in the next cycle the
engine does what it would have done, the write masked. The engine's timeline is the one of
dual-port banks with one cycle inserted per write, so :func:`fpganet.perf.engine_cycles`
adds :func:`fpganet.perf.engine_writes` and nothing else changes.
"""

from amaranth import *
from amaranth.hdl import EnableInserter, Instance

__all__ = ["EngineHold", "HOLDABLE_CELLS", "engine_hold"]

#: Vendor cells an engine may contain, and the port that enables their registers.
HOLDABLE_CELLS = {"SB_MAC16": "CE"}


class EngineHold(EnableInserter):
    """:class:`amaranth.hdl.EnableInserter` on domain ``sync`` that also ANDs ``enable`` into
    the clock enable of the vendor cells of :data:`HOLDABLE_CELLS` (an iCE40 array's
    SB_MAC16), whose registers Amaranth does not see.

    Raises
    ------
    ValueError
        For an instance of any other cell: its registers would run on while the engine holds.
    """

    def __init__(self, enable):
        super().__init__({"sync": enable})

    def on_fragment(self, fragment):
        new_fragment = super().on_fragment(fragment)
        if isinstance(new_fragment, Instance):
            port = HOLDABLE_CELLS.get(new_fragment.type)
            if port is None:
                raise ValueError(f"the engine cannot hold a {new_fragment.type} instance "
                                 f"(single_port_activations holds {', '.join(HOLDABLE_CELLS)})")
            value, kind = new_fragment.ports[port]
            new_fragment.ports[port] = (value & self.controls["sync"], kind)
        return new_fragment


def engine_hold(m, writer):
    """``(hold, written)`` for an engine whose ``writer`` writes single-port banks: ``hold``
    is high in a cycle in which the writer offers a byte write not yet done (the write is
    done then, and the engine held); ``written`` in the cycle after, in which the writer
    offers the same write again, to be masked."""
    hold, written = Signal(name="engine_hold"), Signal(name="engine_written")
    m.d.comb += hold.eq(writer.wr_en.any() & ~written)
    m.d.sync += written.eq(hold)
    return hold, written
