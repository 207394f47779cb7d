"""The ``isa`` backend: the compiled program on the functional ISA simulator."""

import numpy as np

from ..isasim import Machine
from .binary_images import is_binary_compiled, read_binary_images, run_folded
from .images import NoProgramError, build_images, read_images

__all__ = ["run_isa", "backend"]


def run_isa(net, q_in, images=None, config=None):
    """Run ``net`` on int8 images ``[N, C, H, W]`` through its program on :class:`fpganet.isasim.Machine`.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    q_in : numpy.ndarray
        int8 [N, *net.input_chw].
    images : fpganet.codegen.MemoryImages, optional
        Run these (any ``n_images``: it is set to N) instead of building them from ``net``.
        A batched program (``images.batch`` > 1) runs N images too: the last group is padded
        with zero images whose outputs are dropped (:meth:`MemoryImages.pack_inputs`).
    config : fpganet.config.AcceleratorConfig, optional
        Build for this configuration instead of ``net.config``.

    Returns
    -------
    q : numpy.ndarray
        int8 [N, *net.output_shape].
    stamps : numpy.ndarray
        uint32 [N] (zeros: the functional simulator does not count cycles).
    """
    q_in = np.asarray(q_in)
    n = len(q_in)
    images = (images or build_images(net, n, config)).for_images(n)
    machine = Machine(images.config)
    images.load(machine)
    data = machine.run(images.pack_inputs(q_in))
    return images.unpack_outputs(data, n)


def backend(net, q_in, **options):
    """The ``isa`` entry of :data:`fpganet.backends.BACKENDS`: int8 in, int8 out.

    Options: ``images`` (MemoryImages to run), ``compiled`` (a compiled directory: run the
    images it holds, if it has any; the binary engine's arithmetic on its memory words for one
    compiled with ``--engine binary``, :func:`~fpganet.codegen.binary_images.run_folded`),
    ``config`` (build for another configuration).
    """
    images = options.get("images")
    compiled = options.get("compiled")
    if images is None and compiled is not None and is_binary_compiled(compiled):
        return run_folded(read_binary_images(compiled, net), q_in)
    if images is None and compiled is not None and options.get("config") is None:
        try:
            images = read_images(compiled)
        except NoProgramError:
            images = None      # compiled with --no-program: build the program here
    q, _ = run_isa(net, q_in, images=images, config=options.get("config"))
    return q
