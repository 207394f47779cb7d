"""The embedded default model and data: LeNet-5 and the MNIST test images; and the MLPerf
Tiny networks and images of the project's shared test material.

``src/fpganet/data/lenet5-mnist/`` holds the outside LeNet-5 (``lenet.onnx``),
its licence, and the 10,000 MNIST test images (see ``SOURCE.md`` there). The
images are split once, for everyone: the first :data:`CALIB_COUNT` are the
calibration split, the rest the eval split on which accuracy is reported.

The MLPerf Tiny ResNet-8 and MobileNetV1-0.25 (Visual Wake Words), their 200 labelled test
images and their calibration images are not shipped: they are read where the project keeps
its shared test material, ``../shared/models/mlperf-tiny/`` beside the checkout (its
SOURCE.md gives their origin), or under ``$FPGANET_SHARED/models/mlperf-tiny/``.
"""

import os
from pathlib import Path

import numpy as np

from .errors import FpganetError

__all__ = ["LENET5_DIR", "LENET5_ONNX", "MNIST_NPZ", "CALIB_COUNT", "SPLITS", "MNIST_MEAN",
           "MNIST_STD", "preprocess_mnist", "mnist", "write_inputs", "MLPERF_TINY", "mlperf_tiny_dir",
           "mlperf_tiny_model", "mlperf_tiny", "QONNX_MODELS", "qonnx_model"]

LENET5_DIR = Path(__file__).resolve().parent / "data" / "lenet5-mnist"
LENET5_ONNX = LENET5_DIR / "lenet.onnx"
MNIST_NPZ = LENET5_DIR / "mnist_test.npz"
#: Images 0..CALIB_COUNT-1 calibrate; accuracy is measured on the others.
CALIB_COUNT = 500
#: Split name -> indices into the 10,000 test images.
SPLITS = {"calib": slice(0, CALIB_COUNT), "eval": slice(CALIB_COUNT, None), "all": slice(None)}
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def preprocess_mnist(images):
    """uint8 [N, 28, 28] pixels -> float32 [N, 1, 28, 28] as LeNet-5 expects.

    ``x / 255``, then ``(x - 0.1307) / 0.3081``, in float32.
    """
    x = np.asarray(images, dtype=np.float32) / np.float32(255)
    x = (x - np.float32(MNIST_MEAN)) / np.float32(MNIST_STD)
    return x.reshape(x.shape[0], 1, 28, 28)


def mnist(split="eval", limit=None, *, raw=False, unit=False):
    """Preprocessed MNIST test images from the embedded copy (with ``raw``: the pixels; with
    ``unit``: the pixels over 255).

    Parameters
    ----------
    split : {"eval", "calib", "all"}
        ``"calib"``: images 0..499 (calibration); ``"eval"``: 500..9999 (accuracy);
        ``"all"``: all 10,000.
    limit : int, optional
        Keep only the first ``limit`` images of the split.
    raw : bool
        The pixels as they are, 0..255, instead of :func:`preprocess_mnist`'s normalization
        (the embedded LeNet-5's; most other MNIST models want the pixels or ``x / 255``).
    unit : bool
        The pixels over 255, 0..1 in float32 (FINN's TFC networks, most MNIST models).

    Returns
    -------
    x : numpy.ndarray
        float32 [N, 1, 28, 28].
    y : numpy.ndarray
        int64 [N] labels.
    """
    if split not in SPLITS:
        raise FpganetError(f"unknown MNIST split '{split}'; choose from {', '.join(SPLITS)}")
    with np.load(MNIST_NPZ) as data:
        images, labels = data["x"][SPLITS[split]], data["y"][SPLITS[split]]
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    if raw and unit:
        raise FpganetError("MNIST images are raw pixels or pixels over 255, not both")
    if raw or unit:
        x = images.astype(np.float32) / (np.float32(255) if unit else np.float32(1))
        return x.reshape(-1, 1, 28, 28), labels.astype(np.int64)
    return preprocess_mnist(images), labels.astype(np.int64)


def write_inputs(path, x, y=None):
    """Write an inputs/calibration file: ``x`` (and ``y`` if given) in a ``.npz``."""
    arrays = {"x": np.asarray(x, dtype=np.float32)}
    if y is not None:
        arrays["y"] = np.asarray(y, dtype=np.int64)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return Path(path)


#: Model -> (float ONNX file, test set, calibration set, scale of the uint8 pixels the float
#: model expects: ResNet-8 takes raw 0..255, VWW pixel / 255).
MLPERF_TINY = {
    "resnet8": ("resnet8.onnx", "cifar10_ic01_200.npz", "cifar10_calib.npz", 1.0),
    "vww": ("vww_mobilenetv1_025.onnx", "vww01_200.npz", "vww01_calib.npz", 1.0 / 255.0),
}


def mlperf_tiny_dir():
    """Where the shared MLPerf Tiny material is: ``$FPGANET_SHARED/models/mlperf-tiny``, else
    ``shared/models/mlperf-tiny`` beside the checkout this package runs from."""
    shared = os.environ.get("FPGANET_SHARED") or Path(__file__).resolve().parents[3] / "shared"
    return Path(shared) / "models" / "mlperf-tiny"


#: FINN's QONNX networks in the shared material (``models/qonnx/``, its SOURCE.md): MNIST
#: MLPs with their preprocessing in the graph, taking raw pixels ``x / 255``.
QONNX_MODELS = {"tfc-w1a1": "TFC_1W1A.onnx", "tfc-w2a2": "TFC_2W2A.onnx"}


def qonnx_model(name):
    """Path of the shared QONNX network ``name`` (a key of :data:`QONNX_MODELS`)."""
    path = mlperf_tiny_dir().parent / "qonnx" / QONNX_MODELS[name]
    if not path.is_file():
        raise FpganetError(f"{path}: not found (the QONNX test material lives in the project's "
                           f"shared folder; set FPGANET_SHARED to the folder holding models/qonnx/)")
    return path


def _mlperf_file(name, directory):
    path = Path(directory or mlperf_tiny_dir()) / name
    if not path.is_file():
        raise FpganetError(f"{path}: not found (the MLPerf Tiny test material lives in the "
                           f"project's shared folder; set FPGANET_SHARED to the folder holding "
                           f"models/mlperf-tiny/)")
    return path


def mlperf_tiny_model(model, directory=None):
    """Path of the float ONNX file of ``model`` (a key of :data:`MLPERF_TINY`)."""
    return _mlperf_file(MLPERF_TINY[model][0], directory)


def mlperf_tiny(model, split="test", directory=None, layout="nchw"):
    """Images of ``model``'s ``split`` (``"test"`` or ``"calib"``) in the float model's input
    domain, in ``layout``: ``"nchw"`` as the float ONNX models take them, ``"nhwc"`` as the
    int8 TFLite models do.

    Returns
    -------
    x : numpy.ndarray
        float32 [N, 3, H, W] (the stored NHWC uint8 pixels, transposed and scaled), or
        [N, H, W, 3] (as stored, scaled) with ``layout="nhwc"``.
    y : numpy.ndarray or None
        int64 labels [N] (the test split only).
    """
    if layout not in ("nchw", "nhwc"):
        raise FpganetError(f"unknown layout '{layout}'; choose nchw or nhwc")
    if model not in MLPERF_TINY:
        raise FpganetError(f"unknown MLPerf Tiny model '{model}'; choose from {', '.join(MLPERF_TINY)}")
    _, test, calib, scale = MLPERF_TINY[model]
    with np.load(_mlperf_file(test if split == "test" else calib, directory)) as data:
        pixels = data["x"]
        labels = data["y"].astype(np.int64) if "y" in data.files else None
    x = pixels.astype(np.float32)
    if layout == "nchw":
        x = x.transpose(0, 3, 1, 2)
    if scale != 1.0:
        x = x * np.float32(scale)
    return np.ascontiguousarray(x, dtype=np.float32), labels
