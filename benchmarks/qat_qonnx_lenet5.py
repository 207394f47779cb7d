"""Brevitas quantization-aware training of LeNet-5 at W4A4, W2A2 and W1A1, exported as QONNX and
compiled by fpganet without calibration.

The network is LeNet-5's shape (conv 5x5 6 -> pool -> conv 5x5 16 -> pool -> 120 -> 84 -> 10)
built as FINN's Brevitas examples build theirs (``brevitas_examples.bnn_pynq``): the pixels in
0..1 through an unsigned 8-bit quantizer of scale 1/255, each conv and
dense layer without a bias, a batch norm, then the activation quantizer (``N`` bits signed in
-1..1, or at one bit the sign, QONNX's ``BipolarQuant``); the weights ``N`` bits in -1..1, or at
one bit their sign; an 8-bit quantizer on the logits (in -8..8). Trained from scratch on the 60,000 MNIST
training images (Adam, cosine-decayed), exported with Brevitas's ``export_qonnx``, cleaned up
with qonnx's ``cleanup_model``, compiled by ``fpganet compile`` (no ``--calib``), and run on
fpganet's golden model and on qonnx's executor. Measured on the 10,000 MNIST test images
(top-1 of each, and their arg-max agreement on the first ``--agree-images``).

MNIST is by Yann LeCun, Corinna Cortes and Christopher J.C. Burges: the training files come
as ``benchmarks/qat_lenet5.py`` fetches them (``--data-dir``, checked against their SHA-256).

Usage::

    pip install --target DIR torch==2.13.0 brevitas==0.13.4     # or: pip install -e '.[qat]'
    PYTHONPATH=DIR .venv/bin/python benchmarks/qat_qonnx_lenet5.py [--epochs 20] [--data-dir D]

Writes ``OUT/lenet5_<w>.onnx`` (cleaned QONNX), ``OUT/<w>/`` (compiled) and rows of
``benchmarks/results/qat.json``.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from qat_lenet5 import BadInput, fit_epochs, mnist_train_pixels  # noqa: E402

from fpganet import datasets  # noqa: E402
from fpganet.compiler import compile_model  # noqa: E402
from fpganet.errors import FpganetError  # noqa: E402
from fpganet.files import write_text_atomic  # noqa: E402
from fpganet.golden import run_golden  # noqa: E402
from fpganet.results import check_rows, make_row, write_rows  # noqa: E402

ROWS = HERE / "results" / "qat.json"
#: name -> (weight bits, activation bits).
PRECISIONS = {"w4a4": (4, 4), "w2a2": (2, 2), "w1a1": (1, 1)}
COMMAND = "python benchmarks/qat_qonnx_lenet5.py"


def lenet5(weight_bits, act_bits):
    """LeNet-5's shape in Brevitas layers, FINN's way (the module's docstring)."""
    import torch
    from brevitas.core.bit_width import BitWidthImplType
    from brevitas.core.quant import QuantType
    from brevitas.core.restrict_val import FloatToIntImplType, RestrictValueType
    from brevitas.core.scaling import ScalingImplType
    from brevitas.core.zero_point import ZeroZeroPoint
    from brevitas.inject import ExtendedInjector
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear
    from brevitas.quant.solver import ActQuantSolver, WeightQuantSolver
    from dependencies import value
    from torch import nn

    class Common(ExtendedInjector):
        bit_width_impl_type = BitWidthImplType.CONST
        scaling_impl_type = ScalingImplType.CONST
        restrict_scaling_type = RestrictValueType.FP
        zero_point_impl = ZeroZeroPoint
        float_to_int_impl_type = FloatToIntImplType.ROUND
        scaling_per_output_channel = False
        narrow_range = True
        signed = True

        @value
        def quant_type(bit_width):
            return QuantType.BINARY if bit_width == 1 else QuantType.INT

    class WeightQuant(Common, WeightQuantSolver):
        scaling_const = 1.0

    class ActQuant(Common, ActQuantSolver):
        min_val = -1.0
        max_val = 1.0

    def act(bits, **more):
        return QuantIdentity(act_quant=ActQuant, bit_width=bits, **more)

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            # The pixels as they are, 0..255 over 255: code 0 is black, which a padded conv
            # pads with (FINN's CNV maps them to 2x - 1, but pads nothing).
            self.input = act(8, min_val=0.0, max_val=1.0, signed=False, narrow_range=False)
            self.features = nn.ModuleList([
                QuantConv2d(1, 6, 5, padding=2, bias=False, weight_quant=WeightQuant,
                            weight_bit_width=weight_bits),
                nn.BatchNorm2d(6), act(act_bits), nn.MaxPool2d(2),
                QuantConv2d(6, 16, 5, bias=False, weight_quant=WeightQuant,
                            weight_bit_width=weight_bits),
                nn.BatchNorm2d(16), act(act_bits), nn.MaxPool2d(2)])
            self.classifier = nn.ModuleList([
                QuantLinear(400, 120, bias=False, weight_quant=WeightQuant,
                            weight_bit_width=weight_bits),
                nn.BatchNorm1d(120), act(act_bits),
                QuantLinear(120, 84, bias=False, weight_quant=WeightQuant,
                            weight_bit_width=weight_bits),
                nn.BatchNorm1d(84), act(act_bits),
                QuantLinear(84, 10, bias=False, weight_quant=WeightQuant,
                            weight_bit_width=weight_bits),
                nn.BatchNorm1d(10), act(8, min_val=-8.0, max_val=8.0)])

        def forward(self, x):           # pixels in 0..1
            x = self.input(x)
            for layer in self.features:
                x = layer(x)
            x = torch.flatten(x, 1)
            for layer in self.classifier:
                x = layer(x)
            return x

    model = LeNet5()
    # Weights spread over the quantizer's -1..1, as FINN's examples start theirs (PyTorch's
    # default of about 1/sqrt(fan-in) would round to 0 at 2-4 bits); the batch norms scale.
    for module in model.modules():
        if isinstance(module, (QuantConv2d, QuantLinear)):
            nn.init.uniform_(module.weight.data, -1.0, 1.0)
    return model


def train(model, x, y, epochs, batch, lr, seed):
    """Adam with a cosine-decayed learning rate, shuffled with ``seed``; mean loss an epoch."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    return fit_epochs(model, optimizer, torch.from_numpy(x), torch.from_numpy(y), epochs, batch,
                      generator)


def export(model, path):
    """The trained model as cleaned-up QONNX (Brevitas's export, qonnx's cleanup)."""
    import torch
    from brevitas.export import export_qonnx
    from qonnx.util.cleanup import cleanup

    model.eval()
    raw = path.with_suffix(".raw.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_qonnx(model, input_t=torch.zeros(1, 1, 28, 28), export_path=str(raw), dynamo=False)
    cleanup(str(raw), out_file=str(path))
    raw.unlink()


def measure(name, args, x_train, y_train, x_test, y_test, out):
    """Train, export and compile one precision; its results."""
    import torch
    from fpganet.model.qonnx_reference import qonnx_execute

    weight_bits, act_bits = PRECISIONS[name]
    torch.manual_seed(args.seed)
    model = lenet5(weight_bits, act_bits)
    started = time.perf_counter()
    losses = train(model, x_train, y_train, args.epochs, args.batch_size, args.lr, args.seed)
    train_s = time.perf_counter() - started
    model.eval()
    with torch.no_grad():
        torch_pred = np.concatenate([model(torch.from_numpy(x_test[i:i + 1000])).argmax(1).numpy()
                                     for i in range(0, len(x_test), 1000)])
    path = out / f"lenet5_{name}.onnx"
    export(model, path)
    net = compile_model(path, None, out / name)          # no calibration: the model's own scales
    golden = run_golden(net, net.quantize_input(x_test)).reshape(len(x_test), -1).argmax(1)
    agree = min(args.agree_images, len(x_test))
    reference = qonnx_execute(path, x_test[:agree]).reshape(agree, -1).argmax(1)
    return {"weight_bits": weight_bits, "act_bits": act_bits, "epochs": args.epochs,
            "losses": losses, "train_s": round(train_s, 1),
            "torch_top1": float(np.mean(torch_pred == y_test)),
            "golden_top1": float(np.mean(golden == y_test)),
            "qonnx_agreement": float(np.mean(golden[:agree] == reference)),
            "agreement_images": agree}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default=",".join(PRECISIONS),
                        help=f"comma-separated, of {', '.join(PRECISIONS)}")
    parser.add_argument("--data-dir", default="~/.cache/fpganet/mnist",
                        help="MNIST training files, downloaded there if missing")
    parser.add_argument("-o", "--output", default="build/qat-qonnx-lenet5")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--train-limit", type=int, help="first N training images only")
    parser.add_argument("--agree-images", type=int, default=2000,
                        help="test images qonnx's executor runs (it takes about 20 ms each)")
    parser.add_argument("--rows", default=str(ROWS), help="results file (its other rows kept)")
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "threads", "agree_images"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.train_limit is not None and args.train_limit < 1:
        parser.error("--train-limit must be at least 1")
    if not args.lr > 0:
        parser.error("--lr must be a positive number")
    names = args.precisions.split(",")
    if unknown := [name for name in names if name not in PRECISIONS]:
        parser.error(f"--precisions: unknown {unknown[0]!r} (known: {', '.join(PRECISIONS)})")
    try:
        import torch
        import brevitas  # noqa: F401
        import onnxoptimizer  # noqa: F401   (Brevitas's QONNX export asks for it)
        import qonnx  # noqa: F401
    except ImportError as error:
        print(f"qat_qonnx_lenet5: error: {error.name} is not installed (the module's usage)",
              file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    try:
        pixels, y_train = mnist_train_pixels(args.data_dir)
        x_train = (pixels.astype(np.float32) / 255)[:, None]     # 0..1, [N, 1, 28, 28]
        if args.train_limit:
            x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]
        x_test, y_test = datasets.mnist("all", unit=True)
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        results, rows = {}, []
        for name in names:
            print(f"{name}: training on {len(x_train)} images", flush=True)
            results[name] = result = measure(name, args, x_train, y_train, x_test, y_test, out)
            print(f"{name}: top-1 {100 * result['golden_top1']:.2f} % (fpganet golden, compiled "
                  f"without calibration), {100 * result['torch_top1']:.2f} % (Brevitas); "
                  f"qonnx's executor agrees on {100 * result['qonnx_agreement']:.2f} % of "
                  f"{result['agreement_images']}", flush=True)
            configuration = f"brevitas qat {name}, {args.epochs} epochs"
            command = (f"{COMMAND} --precisions {name} --epochs {args.epochs}; fpganet run OUT "
                       f"--backend golden  # on the 10,000 MNIST test images")
            rows += [make_row("lenet5", "none", configuration, "top1",
                              100 * result["golden_top1"], "model", command),
                     make_row("lenet5", "none", configuration, "agreement_top1",
                              100 * result["qonnx_agreement"], "model",
                              f"{command}; qonnx's execute_onnx on the first "
                              f"{result['agreement_images']}")]
        write_text_atomic(out / "results.json", json.dumps(results, indent=2))
        rows_path = Path(args.rows)
        new_keys = {row.key for row in rows}
        kept = [row for row in (check_rows(json.loads(rows_path.read_text()), str(rows_path))
                                if rows_path.exists() else []) if row.key not in new_keys]
        write_rows(rows_path, kept + rows)
    except (BadInput, FpganetError, OSError) as error:
        print(f"qat_qonnx_lenet5: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
