"""Measure the network with onnxruntime on this machine: CPU, and a CUDA GPU when there is one.

Two models are timed: the float source model (when its file is still there and
unchanged; its batch dimension is freed so batch 1 can run) and the int8 network
as standard ONNX quantized operators (:func:`fpganet.qdq_export.to_onnx`).
Each is run at batch 1 (latency: median of repeated runs) and at a large batch
(throughput: batch / median time), after warm-up runs. The rows are labelled
"measured on this machine" with the processor, core count and onnxruntime
version. Power is not measured (no power meter): their watts are "not available".
"""

import os
import platform
import statistics
import time

import numpy as np

from ..model import file_sha256
from .quantity import Quantity, missing

__all__ = ["measure_network", "machine_description", "time_run", "free_batch_dimension",
           "DEFAULT_BATCHES"]

DEFAULT_BATCHES = (1, 256)


def machine_description():
    """Processor model, logical cores, OS: for the 'measured on this machine' label."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} logical cores available, {platform.system()}"


def time_run(function, min_time_s=0.3, min_runs=3, max_runs=1000, warmup=2):
    """Median wall time of ``function()`` (seconds) and the number of timed runs."""
    for _ in range(warmup):
        function()
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < min_time_s):
        t0 = time.perf_counter()
        function()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


def free_batch_dimension(model):
    """A copy of an ONNX model whose first input and output dimension is symbolic ``N``."""
    # Imported here, not at the top: onnx is slow to import.
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "N"
    return model


def _session(model_bytes, provider):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model_bytes, options, providers=[provider])


def _label(provider):
    import onnxruntime

    where = "CPU" if provider == "CPUExecutionProvider" else "CUDA GPU"
    return (f"{where} ({machine_description() if where == 'CPU' else provider}), onnxruntime "
            f"{onnxruntime.__version__} {provider}")


def _measure(model_bytes, what, provider, input_name, sample, batches, min_time_s, fixed_batch):
    rows, problems = [], []
    try:
        session = _session(model_bytes, provider)
    except Exception as error:     # onnxruntime raises its own exception types
        return [], [f"{what}: onnxruntime cannot load it on {provider} ({type(error).__name__})"]
    label = _label(provider)
    for batch in batches:
        run_batch = fixed_batch or batch
        x = np.repeat(sample, run_batch, axis=0).astype(np.float32)
        try:
            median, runs = time_run(lambda: session.run(None, {input_name: x}), min_time_s)
        except Exception as error:
            problems.append(f"{what} at batch {run_batch}: {type(error).__name__}")
            continue
        basis = (f"measured on this machine: {label}; {what}; batch {run_batch}, median of {runs} "
                 f"runs after 2 warm-up runs")
        regime = "batch 1" if run_batch == 1 else "large batch"
        latency = Quantity(median, "s", "measured", basis)
        images = Quantity(run_batch / median, "images/s", "measured", basis)
        rows.append({"name": f"{'CPU' if provider == 'CPUExecutionProvider' else 'CUDA GPU'}, "
                             f"{what}", "kind": "measured", "regime": regime, "batch": run_batch,
                     "machine": label, "power_boundary": "not measured",
                     "cycles_per_image": missing("cycles", "not applicable"),
                     "images_per_s": images, "latency_s": latency,
                     "watts": missing("W", "not measured: no power meter on this machine"),
                     "images_per_s_per_w": missing("images/s/W", "no power measurement"),
                     "bottleneck": missing(None, "measured, not analysed")})
        if fixed_batch:
            break
    return rows, problems


def measure_network(net, *, batches=DEFAULT_BATCHES, min_time_s=0.3, float_model=None,
                    providers=None, int8=True):
    """Time the network on this machine with onnxruntime.

    Parameters
    ----------
    net : fpganet.qnet.QNetwork
    batches : sequence of int
        Batch sizes (1 for latency, a large one for throughput).
    min_time_s : float
        Least time spent timing each (model, batch).
    float_model : str or os.PathLike, optional
        The float ONNX model; default the manifest's source path if it still has the
        recorded SHA-256.
    providers : sequence of str, optional
        Default: CPU, plus CUDA when onnxruntime offers ``CUDAExecutionProvider``.
    int8 : bool
        Also time the int8 QLinear export.

    Returns
    -------
    dict
        ``rows`` (list of measured rows), ``skipped`` (reasons), ``machine``.
    """
    import onnx
    import onnxruntime

    from ..qdq_export import to_onnx

    available = onnxruntime.get_available_providers()
    if providers is None:
        providers = ["CPUExecutionProvider"]
        if "CUDAExecutionProvider" in available:
            providers.append("CUDAExecutionProvider")
    skipped = []
    if "CUDAExecutionProvider" not in available:
        skipped.append("CUDA: onnxruntime offers no CUDAExecutionProvider on this machine "
                       f"(providers: {', '.join(available)})")
    rng = np.random.default_rng(0)
    sample = rng.standard_normal((1, *net.input_shape)).astype(np.float32)
    models = []
    path = float_model or (net.source or {}).get("path")
    if not float_model and (net.source or {}).get("format") == "tflite":
        # onnxruntime times ONNX; a TFLite source is no float model to it.
        skipped.append(f"float model: the source model {net.source.get('file')} is TFLite, "
                       f"which onnxruntime does not run")
    elif path and os.path.isfile(path) and (float_model or file_sha256(path) == net.source.get("sha256")):
        source = onnx.load(str(path))
        declared = source.graph.input[0].type.tensor_type.shape.dim
        fixed = declared[0].dim_value if declared and declared[0].dim_value > 0 else None
        freed = free_batch_dimension(source)
        models.append(("float32 source model " + os.path.basename(str(path)),
                       freed.SerializeToString(), source.graph.input[0].name,
                       source.SerializeToString(), fixed))
    else:
        skipped.append("float model: the source model file is missing or changed since compiling")
    if int8:
        models.append(("int8 QLinear export (fpganet.qdq_export)", to_onnx(net).SerializeToString(),
                       net.input_name, None, None))
    rows = []
    for provider in providers:
        for what, data, input_name, original, fixed in models:
            found, problems = _measure(data, what, provider, input_name, sample, batches, min_time_s,
                                       None)
            if problems and original is not None and fixed:
                # The model would not run with a free batch: time it at its declared batch.
                found, more = _measure(original, f"{what} (declared batch {fixed})", provider,
                                       input_name, sample, batches, min_time_s, fixed)
                problems = [f"{p}; timed at its declared batch {fixed} instead" for p in problems] + more
            rows.extend(found)
            skipped.extend(problems)
    return {"rows": rows, "skipped": skipped, "machine": machine_description()}
