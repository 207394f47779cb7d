"""Memory images for the accelerator: from numpy memories (or an ISA ``Machine``) to host writes.

Shared by the RTL simulation harness (:mod:`fpganet.sim.rtl_backend`), the
amaranth.sim tests and, later, a board loader: a run loads its memories through
the host write port, one word per transfer.
"""

import numpy as np

from fpganet.isa import HostSpace

__all__ = ["images_from_machine", "host_writes", "weight_word"]


def weight_word(row_bytes):
    """The host data of a weight word: byte ``i`` (array row ``i``) in bits ``8i..8i+7``."""
    word = 0
    for i, value in enumerate(row_bytes):
        word |= (int(value) & 0xFF) << (8 * i)
    return word


def images_from_machine(machine):
    """``{HostSpace: array}`` of the memories of an :class:`fpganet.isasim.Machine`."""
    return {
        HostSpace.PROGRAM: machine.program,
        HostSpace.WEIGHTS: machine.weights,
        HostSpace.PARAMS: machine.params,
        HostSpace.ACTIVATIONS: machine.act,
    }


def host_writes(config, images, *, skip_zeros=True):
    """The ``(space, addr, data)`` transfers that load ``images`` into a freshly reset accelerator.

    ``images`` maps a :class:`~fpganet.isa.HostSpace` (or its name, any case) to:
    program words (uint64), weights (int8 ``[words, rows]``), parameter entries
    (uint64, :func:`fpganet.isa.pack_param`), activation bytes (int8, uint8 or ``bytes``);
    any sequence of integers works.
    With ``skip_zeros`` (the memories of a reset simulation are zero) zero words
    are not written.
    """
    writes = []
    for key, image in images.items():
        space = HostSpace[key.upper()] if isinstance(key, str) else HostSpace(key)
        if image is None:
            continue
        if isinstance(image, (bytes, bytearray, memoryview)):
            image = np.frombuffer(bytes(image), dtype=np.uint8)
        if space is HostSpace.WEIGHTS:
            image = np.asarray(image).reshape(-1, config.rows)
            if len(image) > config.weight_buffer_words:
                raise ValueError(f"weight image of {len(image)} words exceeds {config.weight_buffer_words}")
            nonzero = np.flatnonzero(image.any(axis=1)) if skip_zeros else range(len(image))
            writes += [(space, int(a), weight_word(image[a])) for a in nonzero]
            continue
        depth = {HostSpace.PROGRAM: config.program_words, HostSpace.PARAMS: config.bias_buffer_words,
                 HostSpace.ACTIVATIONS: config.act_buffer_bytes}[space]
        if space is HostSpace.ACTIVATIONS:
            values = [int(value) & 0xFF for value in np.asarray(image).reshape(-1)]
        else:
            # Python integers: a list mixing words above 2^63 with small ones would become float64.
            flat = image.reshape(-1) if isinstance(image, np.ndarray) else np.asarray(image, dtype=object).reshape(-1)
            values = [int(value) & 0xFFFF_FFFF_FFFF_FFFF for value in flat]
        if len(values) > depth:
            raise ValueError(f"{space.name.lower()} image of {len(values)} entries exceeds {depth}")
        writes += [(space, a, value) for a, value in enumerate(values) if value or not skip_zeros]
    return writes
