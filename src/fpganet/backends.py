"""Execution backends: who runs a compiled network on int8 inputs.

A backend is a callable ``backend(net, q_in, **options) -> q_out``: it gets the
int8 input feature maps [N, C, H, W] that the host quantized
(:meth:`fpganet.qnet.QNetwork.quantize_input`) and returns the raw int8
outputs [N, *net.output_shape], or ``(q_out, extras)`` with a dict of further
per-input arrays (the RTL backend returns ``cycles`` per image). The host dequantizes. ``golden`` is the numpy
reference; a simulator of the RTL plugs in with :func:`register_backend`
(or an entry in :data:`BACKENDS`), and must return exactly what ``golden``
returns.

Entries may be ``"module:attribute"`` strings, imported on first use, so that
``fpganet run --backend golden`` never imports a simulator.

``fpganet run OUT`` passes the option ``compiled=OUT`` (the compiled directory),
so that a backend can run the program and memory images written there
(:func:`fpganet.codegen.read_images`); ``isa`` and ``rtl`` do. A program compiled
with ``--batch B`` runs any number of images there: its images pad the last group
of B and drop the padding's outputs, so a backend sees per-image streams as at
batch 1. Backends ignore options they do not know.
"""

import importlib
from dataclasses import dataclass, field

import numpy as np

from .errors import FpganetError

__all__ = ["BACKENDS", "register_backend", "get_backend", "run_network", "RunResult"]

#: Backend name -> callable or "module:attribute"; with a one-line description.
BACKENDS = {
    "golden": ("fpganet.golden:backend", "numpy integer model, the definition of the numerics"),
    "isa": ("fpganet.codegen.run:backend", "the compiled program on the functional ISA simulator "
                                           "(fpganet.isasim)"),
    "rtl": ("fpganet.sim.rtl_backend:backend", "the compiled program on the accelerator's generated "
                                               "Verilog (Verilator through cocotb; SIM=icarus)"),
}


def register_backend(name, target, description=""):
    """Add (or replace) a backend.

    Parameters
    ----------
    name : str
        As given to ``--backend``.
    target : callable or str
        ``backend(net, q_in, **options) -> int8 [N, *net.output_shape]``, or
        ``"module:attribute"`` naming it.
    description : str
    """
    BACKENDS[name] = (target, description)


def get_backend(name):
    """The callable registered as ``name``."""
    if name not in BACKENDS:
        raise FpganetError(f"unknown backend '{name}'; available: {', '.join(sorted(BACKENDS))}")
    target = BACKENDS[name][0]
    if isinstance(target, str):
        module, _, attribute = target.partition(":")
        target = getattr(importlib.import_module(module), attribute)
    return target


@dataclass
class RunResult:
    """Outputs of :func:`run_network`.

    Attributes
    ----------
    q : numpy.ndarray
        int8 [N, *output_shape], the network's raw output.
    logits : numpy.ndarray
        float32 [N, *output_shape], ``s_out * (q - zp_out)``.
    backend : str
    extras : dict
        Further per-input arrays the backend returned (``cycles`` from ``rtl``).
    """

    q: np.ndarray
    logits: np.ndarray
    backend: str
    extras: dict = field(default_factory=dict)

    @property
    def predictions(self):
        """Arg-max over the class axis of the raw output (ties: lowest index, as numpy)."""
        return self.q.reshape(self.q.shape[0], -1).argmax(axis=1)

    def accuracy(self, labels):
        """Top-1 accuracy against integer labels [N]."""
        labels = np.asarray(labels)
        return float(np.mean(self.predictions == labels)) if labels.size else float("nan")


def run_network(net, x, backend="golden", limit=None, **options):
    """Quantize float inputs on the host, run a backend, dequantize.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    x : numpy.ndarray
        float32 [N, *net.input_shape] in the model's input domain.
    backend : str
        A key of :data:`BACKENDS`.
    limit : int, optional
        Only the first ``limit`` inputs.
    **options
        Passed to the backend.

    Returns
    -------
    RunResult
    """
    function = get_backend(backend)
    if limit is not None:
        x = x[:limit]
    q_in = net.quantize_input(x)
    returned = function(net, q_in, **options)
    q, extras = returned if isinstance(returned, tuple) else (returned, {})
    q = np.asarray(q)
    expected = (x.shape[0], *net.output_shape)
    if q.dtype != np.int8 or q.shape != expected:
        raise FpganetError(f"backend '{backend}' returned {q.dtype} {list(q.shape)}, expected int8 "
                           f"{list(expected)}")
    return RunResult(q=q, logits=net.dequantize_output(q), backend=backend, extras=dict(extras))
