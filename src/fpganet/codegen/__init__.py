"""The compiler back end: a :class:`~fpganet.qnet.QNetwork` into a program and memory images.

docs/reference/architecture.md ("The accelerator") is the contract; this package produces
programs for it. The API a runner (the ISA simulator, the RTL simulator, a board
loader) needs::

    from fpganet.codegen import build_images

    images = build_images(net, n_images=len(q_in))       # MemoryImages (raises FpganetError
                                                           # if the network does not fit)
    for space, address, word in images.host_writes():    # weights, params, then program
        host_write(space, address, word)                  # (HostSpace, int, int)
    stream_in = images.pack_inputs(q_in)                   # bytes: per image C*H*W int8
    stream_out = ...                                       # what OUTPUT/STAMP sent
    q, stamps = images.unpack_outputs(stream_out)          # int8 [N, *output_shape], uint32 [N]

``images.memories`` gives the same contents as arrays (``{HostSpace: array}``),
``images.program_for(n)`` the program for another image count, and
:func:`read_images` reads what ``fpganet compile`` wrote into ``OUT/``.

Modules: :mod:`~fpganet.codegen.ir` (the intermediate form: plan, steps, maps),
:mod:`~fpganet.codegen.passes` (the compiler as named passes over it),
:mod:`~fpganet.codegen.plan` (runs the planning passes),
:mod:`~fpganet.codegen.program` (code generation, weight and parameter images),
:mod:`~fpganet.codegen.images` (memory images, streams, files),
:mod:`~fpganet.codegen.run` (the ``isa`` backend), :mod:`~fpganet.codegen.fuzz`
(random networks checked against the golden model).
"""

from .images import (STAMP_BYTES, MemoryImages, StreamLayout, build_images, engine_conflicts,
                     pack_weight_word, read_images)
from .plan import Plan, plan_network
from .run import run_isa

__all__ = ["build_images", "read_images", "MemoryImages", "StreamLayout", "run_isa", "plan_network",
           "Plan", "engine_conflicts", "pack_weight_word", "pack_inputs", "unpack_outputs",
           "STAMP_BYTES"]


def pack_inputs(images, q_in):
    """The input stream of int8 images ``[N, C, H, W]`` (``images``: MemoryImages or StreamLayout)."""
    return images.pack_inputs(q_in)


def unpack_outputs(images, data, n_images):
    """``(q int8 [N, *output_shape], stamps uint32 [N])`` from the output stream."""
    streams = images.streams if isinstance(images, MemoryImages) else images
    return streams.unpack_outputs(data, n_images)
