"""Memory images for the accelerator's simulations: from numpy memories (or an ISA ``Machine``) to host writes.

Used by the RTL simulation harness (:mod:`fpganet.sim.rtl_backend`) and the
amaranth.sim tests: a run loads its memories through the host write port, one
word per transfer. The words, their packing and the load order are those of
every loader (:mod:`fpganet.codegen.images`, "Host words"); a simulation starts
from zeroed memories, so it leaves the zero words out.
"""

from fpganet.codegen.images import host_writes as _host_writes
from fpganet.codegen.images import machine_memories, pack_weight_word

__all__ = ["images_from_machine", "host_writes", "weight_word"]

#: The host data of a weight word: byte ``i`` (array row ``i``) in bits ``8i..8i+7``.
weight_word = pack_weight_word
#: ``{HostSpace: array}`` of the memories of an :class:`fpganet.isasim.Machine`.
images_from_machine = machine_memories


def host_writes(config, images, *, skip_zeros=True):
    """The ``(space, addr, data)`` transfers that load ``images`` into a freshly reset accelerator.

    ``images`` maps a :class:`~fpganet.isa.HostSpace` (or its name, any case) to:
    program words (uint64), weights (int8 ``[words, rows]``), parameter entries
    (uint64, :func:`fpganet.isa.pack_param`), activation bytes (int8, uint8 or ``bytes``);
    any sequence of integers works. The transfers come in
    :data:`fpganet.codegen.images.LOAD_ORDER`. With ``skip_zeros`` (the memories of
    a reset simulation are zero) zero words are not written. An image larger than
    its memory raises ValueError.
    """
    return _host_writes(images, config, skip_zeros=skip_zeros)
