"""The embedded default model and data: LeNet-5 and the MNIST test images.

``src/fpganet/data/lenet5-mnist/`` holds the outside LeNet-5 (``lenet.onnx``),
its licence, and the 10,000 MNIST test images (see ``SOURCE.md`` there). The
images are split once, for everyone: the first :data:`CALIB_COUNT` are the
calibration split, the rest the eval split on which accuracy is reported.
"""

from pathlib import Path

import numpy as np

from .errors import FpganetError

__all__ = ["LENET5_DIR", "LENET5_ONNX", "MNIST_NPZ", "CALIB_COUNT", "SPLITS", "MNIST_MEAN",
           "MNIST_STD", "preprocess_mnist", "mnist", "write_inputs"]

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


def mnist(split="eval", limit=None):
    """Preprocessed MNIST test images from the embedded copy.

    Parameters
    ----------
    split : {"eval", "calib", "all"}
        ``"calib"``: images 0..499 (calibration); ``"eval"``: 500..9999 (accuracy);
        ``"all"``: all 10,000.
    limit : int, optional
        Keep only the first ``limit`` images of the split.

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
    return preprocess_mnist(images), labels.astype(np.int64)


def write_inputs(path, x, y=None):
    """Write an inputs/calibration file: ``x`` (and ``y`` if given) in a ``.npz``."""
    arrays = {"x": np.asarray(x, dtype=np.float32)}
    if y is not None:
        arrays["y"] = np.asarray(y, dtype=np.int64)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return Path(path)
