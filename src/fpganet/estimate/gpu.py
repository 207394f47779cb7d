"""GPU estimates for the user's network: batch 1 (latency floor) and large batch (roofline).

Batch 1::

    latency = kernels x t_kernel + ops / (peak INT8 x e)

``kernels`` counts the dependent kernels of one inference (one per conv/dense
layer with bias, requantization and ReLU fused, one per pooling layer, quantize
and dequantize, two copies); ``t_kernel`` = 5 us (2-10 us) per dependent kernel;
``e`` is the efficiency relative to peak that the GPU's MLPerf ResNet-50 Offline
result shows (samples/s x 8.2 GOP / peak). Checked against MLPerf SingleStream.

Large batch ``B`` (by default the smallest of 256, 512, ... 65536 whose work
hides the kernel floor twice over at 10 us per kernel)::

    per image = max(ops / (peak INT8 x e), bytes / memory bandwidth)
    batch time = max(kernels x t_kernel, B x per image)

``bytes`` = every layer's int8 input and output feature map through DRAM (no
reuse in cache: pessimistic for bandwidth) + the weights once per batch. Both
are bounds a real deployment approaches from below: small layers fill a large
GPU poorly, so the MLPerf efficiency (ResNet-50's big layers) is optimistic.

Power: the board TDP (or the module power mode, or MLPerf's wall measurement for
the MaxQ row), the boundary MLPerf's own samples/s/W figures use. At batch 1 a
GPU draws less than its TDP: its images/s/W there is a lower bound.
"""

from .figures import GPU_KERNEL_OVERHEAD, GPUS, MLPERF_OFFLINE, RESNET50_GOP, gpu
from .quantity import Quantity, missing, ratio

__all__ = ["gpu_rows", "batch1_latency", "large_batch", "best_batch", "DEFAULT_GPUS",
           "BATCH_CANDIDATES"]

#: GPUs reported by default (figures.GPUS keys).
DEFAULT_GPUS = ("t4", "a100-sxm", "a100-pcie", "h100-sxm", "h100-pcie", "l4", "agx-orin",
                "agx-orin-maxq", "orin-nano")
#: Large batches tried when none is given.
BATCH_CANDIDATES = tuple(2 ** k for k in range(8, 17))


def _efficiency(spec):
    """Efficiency relative to peak of the MLPerf result this GPU borrows (its own, or a kin's)."""
    result = MLPERF_OFFLINE[spec.mlperf]
    return result.efficiency, result


def batch1_latency(ops, kernels, spec, kernel_s=None):
    """Batch-1 latency (low, nominal, high) in seconds for ``ops`` operations in ``kernels`` kernels."""
    t = GPU_KERNEL_OVERHEAD
    nominal_k = kernel_s if kernel_s is not None else t["seconds"]
    lo_k, hi_k = (nominal_k, nominal_k) if kernel_s is not None else t["range"]
    eff, _ = _efficiency(spec)
    compute = ops / (spec.peak_int8_ops * eff)
    return kernels * lo_k + compute, kernels * nominal_k + compute, kernels * hi_k + compute, compute


def large_batch(ops, bytes_per_image, weight_bytes, kernels, spec, batch, kernel_s=None):
    """Large-batch batch time (low, nominal, high) in seconds, and what bounds it."""
    t = GPU_KERNEL_OVERHEAD
    nominal_k = kernel_s if kernel_s is not None else t["seconds"]
    lo_k, hi_k = (nominal_k, nominal_k) if kernel_s is not None else t["range"]
    eff, _ = _efficiency(spec)
    compute = ops / (spec.peak_int8_ops * eff)
    memory = (bytes_per_image + weight_bytes / batch) / spec.memory_bytes_per_s
    per_image = max(compute, memory)
    work = batch * per_image
    times = tuple(max(kernels * k, work) for k in (lo_k, nominal_k, hi_k))
    if kernels * nominal_k > work:
        bound = "kernel-launch floor (the whole batch is too little work)"
    elif memory >= compute:
        bound = "DRAM bandwidth (roofline)"
    else:
        bound = "compute (peak INT8 x MLPerf efficiency)"
    return times, bound, compute, memory


def best_batch(ops, bytes_per_image, weight_bytes, kernels, spec, kernel_s=None,
               candidates=BATCH_CANDIDATES):
    """The smallest candidate batch whose work is at least twice the kernel floor at its
    high end (10 us per kernel), so that the floor is hidden; else the largest candidate."""
    high_k = kernel_s if kernel_s is not None else GPU_KERNEL_OVERHEAD["range"][1]
    for b in candidates:
        _, _, compute, memory = large_batch(ops, bytes_per_image, weight_bytes, kernels, spec, b,
                                            kernel_s)
        if b * max(compute, memory) >= 2 * kernels * high_k:
            return b
    return candidates[-1]


def gpu_rows(workload, gpus=DEFAULT_GPUS, *, batch=None, kernel_s=None):
    """Batch-1 and large-batch rows for each GPU.

    Parameters
    ----------
    workload : Workload
    gpus : sequence of str
        Keys of figures.GPUS.
    batch : int, optional
        Large batch size; default :func:`best_batch` per GPU.
    kernel_s : float, optional
        Fixed per-kernel time instead of the 2-10 us range.

    Returns
    -------
    list of dict
        Each with ``name``, ``key``, ``regime``, ``batch``, ``power_boundary`` and the
        Quantities ``cycles_per_image`` (not applicable), ``images_per_s``, ``latency_s``,
        ``watts``, ``images_per_s_per_w``, ``bottleneck``, ``efficiency_vs_peak``.
    """
    specs = {spec.key: spec for spec in GPUS}
    unknown = [key for key in gpus if key not in specs]
    if unknown:
        raise KeyError(f"unknown GPU(s) {', '.join(unknown)}; known: {', '.join(specs)}")
    ops = workload.ops
    kernels = workload.gpu_kernels()
    rows = []
    for key in gpus:
        spec = specs[key]
        eff, result = _efficiency(spec)
        unverified = bool(spec.unverified)
        eff_q = Quantity(eff, None, "estimated",
                         f"MLPerf ResNet-50 Offline {result.system} {result.round}: "
                         f"{result.offline_samples_per_s:,} samples/s x {RESNET50_GOP} GOP / "
                         f"{gpu(result.gpu).int8_tops:g} TOPS peak INT8 ({result.source})"
                         + ("" if result.gpu == spec.key else
                            f"; no MLPerf result for the {spec.name}: borrowed"),
                         unverified=unverified)
        watts = Quantity(float(spec.tdp_w), "W", "published",
                         f"{spec.power_boundary} ({spec.source})",
                         unverified="tdp_w" in spec.unverified)
        not_applicable = missing("cycles", "not applicable to a GPU")
        kernel_basis = (f"{kernels} dependent kernels ({GPU_KERNEL_OVERHEAD['per_layer_kernels']}) x "
                        f"{'%g us' % (kernel_s * 1e6) if kernel_s is not None else '5 us (2-10 us)'}"
                        f" ({GPU_KERNEL_OVERHEAD['basis']})")
        # Batch 1.
        lo, nominal, hi, compute = batch1_latency(ops, kernels, spec, kernel_s)
        latency = Quantity(nominal, "s", "estimated",
                           f"{kernel_basis} + {ops:,} ops / ({spec.int8_tops:g} TOPS x "
                           f"{100 * eff:.1f} %)", lo, hi, unverified)
        images = ratio(Quantity(1.0, None, "estimated", ""), latency, "images/s", "1 / latency")
        floor = kernels * (kernel_s if kernel_s is not None else GPU_KERNEL_OVERHEAD["seconds"])
        bottleneck = ("kernel-launch latency floor" if floor >= compute else
                      "compute (peak INT8 x MLPerf efficiency)")
        rows.append(_row(spec, "batch 1", 1, not_applicable, images, latency, watts,
                         Quantity(bottleneck, None, "estimated",
                                  f"floor {floor * 1e6:.0f} us vs compute {compute * 1e6:.2f} us"),
                         eff_q, "board/module power limit: an upper bound at batch 1, where the GPU "
                                "draws less (its images/s/W is a lower bound)"))
        # Large batch.
        args = (ops, workload.feature_map_bytes, workload.weight_bytes, kernels, spec)
        size = batch or best_batch(*args, kernel_s=kernel_s)
        (t_lo, t_nom, t_hi), bound, compute, memory = large_batch(*args, size, kernel_s)
        latency = Quantity(t_nom, "s", "estimated",
                           f"batch of {size}{'' if batch else ' (smallest of 256-65536 hiding the floor)'}: "
                           f"max({kernel_basis}, {size} x max(compute "
                           f"{compute * 1e9:.3g} ns, DRAM {memory * 1e9:.3g} ns per image: "
                           f"{workload.feature_map_bytes:,} B of int8 feature maps at "
                           f"{spec.memory_gbps:g} GB/s + weights once per batch))",
                           t_lo, t_hi, unverified)
        images = Quantity(size / t_nom, "images/s", "estimated", "batch / batch time",
                          size / t_hi, size / t_lo, unverified)
        rows.append(_row(spec, "large batch", size, not_applicable, images, latency, watts,
                         Quantity(bound, None, "estimated",
                                  f"compute {compute * 1e9:.3g} ns vs DRAM {memory * 1e9:.3g} ns "
                                  f"per image; kernel floor {kernels} kernels per batch"),
                         eff_q, "the power boundary of the GPU's MLPerf samples/s/W figure"))
    return rows


def _row(spec, regime, batch, cycles, images, latency, watts, bottleneck, eff, power_note):
    return {"name": spec.name, "key": spec.key, "kind": "gpu", "regime": regime, "batch": batch,
            "power_boundary": spec.power_boundary, "power_note": power_note,
            "cycles_per_image": cycles, "images_per_s": images, "latency_s": latency,
            "watts": watts,
            "images_per_s_per_w": ratio(images, watts, "images/s/W",
                                        f"images/s / W ({spec.power_boundary})"),
            "bottleneck": bottleneck, "efficiency_vs_peak": eff,
            "peak_int8_ops": spec.peak_int8_ops, "memory_bytes_per_s": spec.memory_bytes_per_s,
            "notes": spec.notes}
