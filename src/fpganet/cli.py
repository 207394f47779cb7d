# amaranth: UnusedElaboratable=no
# (the binary engine is built here only for its timing model)
"""The ``fpganet`` command line: a thin layer over the Python API.

Subcommands register themselves with :func:`command`, so that later ones
(an RTL backend for ``run``, ``synth``, ``estimate``) are one decorated
function each; accelerator parameters are added to any subcommand with
:func:`add_config_arguments` and read back with :func:`config_from_args`.

User errors (:class:`~fpganet.errors.FpganetError`, a bad flag, a bad
configuration) print one line, ``fpganet: error: <message>``, on stderr and
exit with status 2 (docs/reference/errors.md; :mod:`fpganet.command_line` prints them).
``fpganet check``, ``sim``, ``bench`` and ``fuzz`` exit with 1 when what they
check fails.
"""

import argparse
import importlib
import importlib.util
import os
import sys

import numpy as np

from . import __version__
from .argtypes import (add_config_arguments, add_weight_bits_arguments, config_from_args,
                       non_negative_int, percent, positive_int)
from .backends import BACKENDS, run_network
from .boards.build import BOARDS, Refused, check_buildable, model_requant_config, warn_logic
from .boards.build import add_variant_argument
from .boards.build import config_from_args as board_config_from_args
from .boards.build import configure as configure_synth
from .boards.build import run as run_synth
from .codegen.binary_images import DEFAULT_FOLD, is_binary_compiled, read_binary_images
from .codegen.fuzz import ARRAYS
from .codegen.images import NoProgramError, read_images
from .codegen.plan import stores_binary_layer
from .command_line import EXIT_CHECK_FAILED, PROG, Parser, run_command_line
from .compiler import DEFAULT_MIN_AGREEMENT, ENGINES, compile_model, load_compiled, read_inputs
from .config import AcceleratorConfig, ConfigError
from .datasets import MNIST_MEAN, MNIST_STD, SPLITS, mnist
from .errors import FpganetError
from .isa import PACKED_WEIGHT_BITS
from .estimate.cli import (configure_estimate_parser, configure_report_parser, run_estimate,
                           run_report)
from .files import check_output_file, write_npz
from .golden import run_golden
from .hdl.binary_engine import BinaryNetworkEngine
from .link.cli import add_arguments, run_command
from .model import file_sha256
from .model.ir import input_text
from .quantize import DEFAULT_METHOD, METHODS
from .quantize.rounding import ROUNDINGS

__all__ = ["main", "build_parser", "command", "COMMANDS", "add_config_arguments",
           "config_from_args"]

#: name -> (help, configure(parser), run(args) -> exit status)
COMMANDS = {}


def command(name, help):
    """Register a subcommand: decorate ``run(args)``; its ``configure`` is given as attribute."""
    def register(run):
        COMMANDS[name] = (help, getattr(run, "configure", None), run)
        return run
    return register


def arguments(configure):
    """Attach ``configure(parser)`` to a subcommand's ``run`` function (use under ``@command``)."""
    def attach(run):
        run.configure = configure
        return run
    return attach


# compile -----------------------------------------------------------------------------------

def _configure_compile(parser):
    parser.add_argument("model", nargs="?", metavar="MODEL.onnx",
                        help="ONNX or TFLite model (a pre-quantized one, QDQ ONNX or fully-int8 "
                             "TFLite, keeps its own scales and zero points: no --calib); "
                             "omitted: the embedded LeNet-5 with its MNIST calibration split")
    parser.add_argument("--calib", metavar="CALIB.npz",
                        help="calibration inputs: array 'x', float32 [N, ...] shaped as the "
                             "model's input (its own layout: NHWC for TFLite) in its input "
                             "domain (required with a float MODEL; with a pre-quantized one "
                             "they measure its agreement with its own runtime where the target "
                             "changes its arithmetic)")
    parser.add_argument("--min-agreement", type=percent, default=DEFAULT_MIN_AGREEMENT,
                        metavar="PERCENT",
                        help=f"refuse a pre-quantized model whose arithmetic the target changes "
                             f"(multipliers rounded, or another requantization than its "
                             f"runtime's) when it keeps its runtime's arg-max on fewer of the "
                             f"--calib inputs (default {100 * DEFAULT_MIN_AGREEMENT:g})")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="output directory (manifest.json, network.npz); written atomically")
    parser.add_argument("--method", default=DEFAULT_METHOD,
                        help=f"calibration method: {', '.join(sorted(METHODS))} "
                             f"(percentile:P for another percentile); default {DEFAULT_METHOD}")
    parser.add_argument("--calib-limit", type=positive_int, metavar="N",
                        help="use only the first N calibration samples")
    add_weight_bits_arguments(parser)
    parser.add_argument("--weight-rounding", choices=sorted(ROUNDINGS),
                        help="how the weights are rounded: nearest, or gptq (from the "
                             "calibration inputs; slower); default nearest when every layer "
                             "has 8 bits, gptq below")
    parser.add_argument("--images", type=positive_int, default=1, metavar="N",
                        help="images the accelerator program processes per run (default 1; "
                             "fpganet.codegen.read_images(OUT).for_images(N) changes it)")
    parser.add_argument("--batch", type=positive_int, default=1, metavar="B",
                        help="run the dense layers once for groups of B images, one array column "
                             "each (1..cols; default 1). The streams stay per image; the activation "
                             "buffer holds B copies of the dense layers' input")
    parser.add_argument("--no-program", action="store_true",
                        help="quantize only: write no accelerator program or memory images (a "
                             "network that does not fit the configuration is then accepted)")
    parser.add_argument("--engine", choices=ENGINES, default="int8",
                        help="int8: the systolic array's program (default); binary: a network of "
                             "binary dense layers and convolutions (weights +-1, one-bit "
                             "activations, as FINN's TFC_1W1A) as the XNOR-popcount engine's "
                             "memory images; lowbit: one of 2-4-bit layers (as FINN's "
                             "TFC_2W2A) as the low-bit engine's, its products in logic cells")
    parser.add_argument("--pe", type=positive_int, metavar="P",
                        help=f"binary or lowbit engine: output channels a cycle (default "
                             f"{DEFAULT_FOLD[0]})")
    parser.add_argument("--simd", type=positive_int, metavar="S",
                        help=f"binary or lowbit engine: inputs a cycle, a multiple of P whose "
                             f"input bits are whole bytes (default {DEFAULT_FOLD[1]})")
    parser.add_argument("--host-weights", action="store_true",
                        help="binary or lowbit engine: its weights loaded over the link into "
                             "the configuration's weight buffer (the iCEBreaker's SPRAMs) "
                             "instead of held in the bitstream; a weight word, P x S x the "
                             "weight bits, must be the buffer's")
    parser.add_argument("--board", choices=_board_names(),
                        help="start from the configuration that 'fpganet synth --board B' builds "
                             "(the flags below change it, as they do for synth)")
    add_variant_argument(parser)
    parser.add_argument("--dump-ir", action="store_true",
                        help="print the compiler's intermediate form after each pass (check, "
                             "lower, fuse, ..., emit; one '=== IR after pass' section each) on "
                             "standard output, before the summary; a refused compile prints the "
                             "passes before the refusal and writes nothing")
    add_config_arguments(parser, requant_mode_default=(
        "the model's: tflite for an int8 TFLite model where the target builds it (not the "
        "iCEBreaker: there fpganet, with a warning), else fpganet"))


def _storage(widths, config, net=None):
    """How weight codes of ``widths`` are stored on ``config``: a byte each, or packed (the
    layers of +-1 weights of ``net`` eight to a byte with ``binary_weights``)."""
    if net is not None and any(stores_binary_layer(layer, config) for layer in net.conv_layers):
        return "those of -1 and +1 stored eight to a byte where the walk allows, the others " + \
            _storage(widths, config).replace("each stored", "stored")
    if not config.stores_packed(min(widths)):
        return "each stored in a byte"
    if config.stores_packed(max(widths)):
        return "stored two to a byte"
    return f"those of {PACKED_WEIGHT_BITS} bits or fewer stored two to a byte, the others in a byte"


def _board_names():
    return sorted(BOARDS)


def _compile_config(args):
    """The configuration of a compile command line: the board's, or the defaults, plus flags.
    A board refuses a configuration its build would refuse (``Board.refuse``, a chip resource
    it lacks) and warns when the logic estimate is tight (:func:`~fpganet.boards.build.check_buildable`)."""
    if getattr(args, "board", None):
        board = BOARDS[args.board]
        config = board_config_from_args(board, args)
        try:
            warn_logic(check_buildable(board, config))
        except Refused as refusal:
            raise FpganetError(f"{refusal} ('fpganet synth --board {args.board}' refuses this "
                               f"configuration)") from None
        return config
    if getattr(args, "variant", None) is not None:
        raise FpganetError("--variant names a configuration of a board: give --board too")
    return config_from_args(args)


def _model_requant_config(args, config):
    """The configuration to compile ``args.model`` with, and why it is not in the model's own
    runtime's requantization mode (:func:`~fpganet.compiler.runtime_requant_mode`) if it is
    not. With no ``--requant-mode`` the mode follows the model, as if that flag named it,
    when the target builds it (the ``--board``'s ``Board.requant_modes``, the configuration's
    other flags); else ``config`` stays. A given ``--requant-mode`` wins."""
    if args.config_requant_mode is not None:
        return config, None
    return model_requant_config(
        args.model, config, BOARDS[args.board] if args.board else None,
        lambda mode: _compile_config(argparse.Namespace(**{**vars(args),
                                                           "config_requant_mode": mode})))


def _engine_fold(args):
    """``(unit, pe, simd)`` of ``--engine binary`` or ``lowbit``, or None; the flags that have
    no meaning for the engine chosen are refused."""
    if args.engine == "int8":
        if args.pe is not None or args.simd is not None or args.host_weights:
            raise FpganetError("--pe, --simd and --host-weights are the binary or low-bit "
                               "engine's: give them with --engine binary or --engine lowbit")
        return None
    for flag, given in (("--batch", args.batch != 1), ("--images", args.images != 1),
                        ("--no-program", args.no_program), ("--dump-ir", args.dump_ir)):
        if given:
            raise FpganetError(f"{flag} is the int8 array's program's; the {args.engine} engine "
                               f"runs one vector a START (--engine {args.engine})")
    return (args.engine, args.pe or DEFAULT_FOLD[0], args.simd or DEFAULT_FOLD[1],
            args.host_weights)


@command("compile", help="quantize an ONNX model (or take a fully-int8 TFLite model) into an int8 "
                         "network for the accelerator")
@arguments(_configure_compile)
def _run_compile(args):
    engine = _engine_fold(args)
    asked = _compile_config(args)
    config, not_runtime_mode = _model_requant_config(args, asked)
    net = compile_model(args.model, args.calib, args.output, config=config, method=args.method,
                        calib_limit=args.calib_limit, program=not args.no_program,
                        n_images=args.images, batch=args.batch,
                        dump_ir=sys.stdout if args.dump_ir else None, board=args.board,
                        weight_bits=args.weight_bits, layer_weight_bits=args.layer_weight_bits,
                        weight_rounding=args.weight_rounding, not_runtime_mode=not_runtime_mode,
                        min_agreement=args.min_agreement, engine=engine)
    source = net.source
    print(f"compiled {source['file']} ({'embedded' if source['embedded'] else source['path']}) "
          f"into {args.output}")
    print(f"  {len(net.layers)} layers, {net.macs:,} MACs per sample, "
          f"{sum(l.weight.size for l in net.conv_layers):,} weights, for the "
          f"{f'{engine[0]} engine' if engine else f'{net.config.name} array'}")
    if net.calibration["method"] in ("qdq", "tflite", "qonnx"):
        print(f"  quantization: as given by the model ({net.calibration['data']}); no calibration")
    if net.calibration["method"] == "qonnx":
        widths = sorted({layer.weight_bits for layer in net.conv_layers})
        inexact = net.calibration["inexact_channels"]
        fitted = (f"{inexact} channel(s) fitted inexactly (see the warning)" if inexact else
                  "every channel fitted exactly")
        # An engine stores its own fold (its memory images print below).
        storage = f"the {engine[0]} engine's fold" if engine else _storage(widths, config, net)
        print(f"  weight codes of {'/'.join(map(str, widths))} bits, {storage}; {fitted}")
    elif net.calibration["method"] not in ("qdq", "tflite"):
        print(f"  calibration: {net.calibration['method']} on {net.calibration['samples']} "
              f"samples ({net.calibration['data']})")
    if "weight_rounding" in net.calibration:   # an int8 compile prints as it did
        widths = sorted({layer.weight_bits for layer in net.conv_layers})
        packed = (f", {_storage(widths, config)}" if config.stores_packed(min(widths))
                  and not engine else "")
        print(f"  weights: {'/'.join(map(str, widths))} bits, "
              f"{net.calibration['weight_rounding']} rounding{packed}")
    if agreement := net.calibration.get("agreement"):
        print(f"  answers: {100 * agreement['argmax']:.1f} % of the {agreement['samples']} inputs "
              f"of {agreement['inputs']} keep {agreement['runtime']}'s arg-max "
              f"({agreement['why']})")
    if config.requant_mode != asked.requant_mode:
        print(f"  requantization: {config.requant_mode}, the model's own runtime's arithmetic "
              f"(--requant-mode {asked.requant_mode} for the other)")
    if source.get("dropped_output_op"):
        print(f"  the final {source['dropped_output_op']} was dropped: outputs are logits")
    # An NCHW input's line is as it was before layouts were recorded.
    layout = "" if net.input_layout == "nchw" else \
        f"{input_text(net.input_shape, net.input_layout)}; "
    print(f"  input: {layout}scale {net.input_scale:.6g}, zero point {net.input_zp}; "
          f"output: scale {net.output_scale:.6g}, zero point {net.output_zp}")
    for index, layer in enumerate(net.layers):
        shapes = f"{'x'.join(map(str, layer.in_shape))} -> {'x'.join(map(str, layer.out_shape))}"
        if layer.type == "conv":
            extra = (f"k {layer.kernel[0]}x{layer.kernel[1]} s {layer.stride[0]} "
                     f"zp {layer.zp_in}->{layer.zp_out}{' relu' if layer.relu else ''} "
                     f"{layer.macs:,} MACs"
                     f"{'' if layer.weight_bits == 8 else f' w{layer.weight_bits}'}")
            kind = layer.kind
        else:
            extra, kind = "", layer.type
        print(f"  {index:2d} {kind:8s} {layer.name:20s} {shapes:22s} {extra}")
    if engine is not None:
        _print_engine(args.output, net)
    elif not args.no_program:
        _print_program(args.output)
        if args.batch > 1:
            print(f"  batch: the dense layers run once per group of {args.batch} images")
    return 0


def _print_program(out_dir):
    """Summary of the accelerator section of a compiled directory's manifest."""
    layout = read_images(out_dir).layout
    act, weights, params, program = (layout[key] for key in ("activations", "weights", "params",
                                                              "program"))
    print(f"  accelerator program for {layout['n_images']} image(s): {program['words']:,} of "
          f"{program['capacity']:,} instruction words; activations {act['bytes']:,} of "
          f"{act['capacity']:,} bytes ({act['allocation']}, {act['pitches']} pitches); weights "
          f"{weights['bytes']:,} of {weights['capacity_bytes']:,} bytes; parameters "
          f"{params['entries']:,} of {params['capacity_entries']:,} entries")
    for layer in layout["layers"]:
        for step in layer.get("steps", []):
            conflicts = step["read_conflict_cycles"]
            print(f"  {layer['index']:2d} {step['kind']:8s} instructions {step['instructions'][0]}.."
                  f"{step['instructions'][1] - 1}, {step['lanes']} lanes, input pitch "
                  f"{step['src']['pitch']}, "
                  f"{'no bank conflicts' if conflicts == 0 else f'{conflicts:,} bank-conflict cycles'}")


def _print_engine(out_dir, net):
    """Summary of the engine section of a directory compiled for the binary or low-bit
    engine."""
    images = read_binary_images(out_dir, net)
    layout, folded = images.layout, images.folded
    cycles = BinaryNetworkEngine(folded).cycles_per_vector()
    print(f"  {folded.description} (pe x simd): "
          f"{layout['weight_words']:,} weight words of {folded.word_bits[0]} bits, "
          f"{layout['threshold_words']:,} threshold words; {images.input_bytes} input bytes and "
          f"{images.output_bytes} output bytes a vector; "
          f"{cycles:,} cycles a vector (modelled)")
    for layer in layout["layers"]:
        print(f"  {layer['name']:20s} {layer['k']:5d} -> {layer['m']:4d}  {layer['groups']} "
              f"group(s) x {layer['beats']} beat(s), {layer['output']} out")


# run ---------------------------------------------------------------------------------------

def _load_inputs(args, net):
    """``x``, ``y`` from --inputs, or the embedded MNIST eval split for the embedded LeNet-5."""
    if args.inputs is not None:
        x, y = read_inputs(args.inputs, net.input_shape, input_name=net.input_name,
                           layout=net.input_layout)
        where = f"'{args.inputs}'"
    else:
        if not net.source.get("embedded"):
            raise FpganetError("--inputs X.npz is required (the network is not the embedded "
                               "LeNet-5, whose MNIST eval split would be the default)")
        x, y = mnist("eval")
        where = "the embedded MNIST eval split (test images 500..9999)"
    if args.limit is not None:
        x = x[:args.limit]
        y = None if y is None else y[:args.limit]
    return x, y, where


def _configure_run(parser):
    parser.add_argument("compiled", metavar="OUT", help="directory written by fpganet compile")
    parser.add_argument("--inputs", metavar="X.npz",
                        help="array 'x' float32 [N, ...] shaped as the model's input (its own "
                             "layout: NHWC for TFLite) in its input domain, optional labels "
                             "'y' [N]; default for the embedded LeNet-5: MNIST eval split")
    parser.add_argument("--backend", default="golden", choices=sorted(BACKENDS),
                        help="; ".join(f"{name}: {desc}" for name, (_, desc) in sorted(BACKENDS.items())))
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N inputs")
    parser.add_argument("--out", metavar="R.npz",
                        help="write 'logits' (float32 [N, classes]) and 'q' (int8 [N, classes])")


@command("run", help="run a compiled network on inputs with a backend")
@arguments(_configure_run)
def _run_run(args):
    net = load_compiled(args.compiled)
    if args.out:
        check_output_file(args.out, inputs=(args.inputs, args.compiled))
    x, y, where = _load_inputs(args, net)
    result = run_network(net, x, backend=args.backend, compiled=args.compiled)
    if args.backend != "golden":
        golden = run_network(net, x, backend="golden").q
        differ = int(np.sum((result.q != golden).reshape(len(x), -1).any(axis=1)))
        if differ:
            raise FpganetError(f"the {args.backend} backend's outputs differ from the golden "
                               f"model's on {differ} of {len(x)} inputs")
        print(f"all {result.q.size:,} int8 outputs of the {args.backend} backend equal the "
              f"golden model's, bit for bit")
    if args.out:
        write_npz(args.out, "run", inputs=(args.inputs, args.compiled), logits=result.logits,
                  q=result.q, **result.extras)
    count = x.shape[0]
    if y is not None:
        correct = int(np.sum(result.predictions == y))
        print(f"top-1 accuracy {100 * correct / count:.2f} % ({correct} of {count} correct), "
              f"measured by the {args.backend} model on {count} images of {where}")
    else:
        print(f"ran {count} inputs of {where} on the {args.backend} backend (no labels 'y', "
              f"no accuracy)")
    if "cycles" in result.extras:
        cycles = np.asarray(result.extras["cycles"])
        batch = _compiled_batch(args.compiled)
        if batch > 1:
            # The images of a group share the dense layers: only the group's total means anything.
            print(f"cycles per image {int(cycles.sum()) / len(cycles):,.0f} (all {len(cycles)} "
                  f"images' cycles / {len(cycles)}; simulated by the "
                  f"{args.backend} backend; batch {batch}: the dense layers run once per group of "
                  f"{batch} images)")
        elif is_binary_compiled(args.compiled):
            print(f"cycles per image {int(np.median(cycles)):,} (median; simulated by the "
                  f"{args.backend} backend: the engine's stamp, START to the last output "
                  f"byte, one image a START)")
        else:
            steady = cycles[1:] if len(cycles) > 1 else cycles
            print(f"cycles per image {int(np.median(steady)):,} (median; simulated by the "
                  f"{args.backend} backend; the first image, whose count includes the program's "
                  f"prologue: {int(cycles[0]):,})")
    if args.out:
        extra = "".join(f", {name}" for name in result.extras)
        print(f"wrote {args.out} (logits float32 {list(result.logits.shape)}, q int8{extra})")
    return 0


def _compiled_batch(compiled):
    """The ``--batch`` a compiled directory was made with (1 without a program)."""
    try:
        return read_images(compiled).batch
    except NoProgramError:
        return 1


# check -------------------------------------------------------------------------------------

def _configure_check(parser):
    parser.add_argument("compiled", metavar="OUT", help="directory written by fpganet compile")
    parser.add_argument("--inputs", metavar="X.npz", help="as for 'run'")
    parser.add_argument("--limit", type=positive_int, default=1000, metavar="N",
                        help="inputs to compare (default 1000)")
    parser.add_argument("--model", metavar="MODEL",
                        help="float source model (default: the path in the manifest, if its "
                             "SHA-256 still matches); for an int8 TFLite network, the TFLite "
                             "model LiteRT runs (a float ONNX model gives the float comparison)")


@command("check", help="compare the golden model with its reference (onnxruntime; LiteRT for "
                       "an int8 TFLite model), layer by layer and end to end")
@arguments(_configure_check)
def _run_check(args):
    # Imported here, not at the top: the ONNX export is slow to import (`fpganet --help`).
    from .qdq_export import CHECK_BOUND, compare_layers, run_onnx, to_onnx

    net = load_compiled(args.compiled)
    if args.model is not None and not os.path.isfile(args.model):
        raise FpganetError(f"--model '{args.model}' does not exist or is not a file")
    x, y, where = _load_inputs(args, net)
    if net.calibration.get("method") == "qonnx":
        return _check_qonnx(net, args.model, x, y, where)
    if net.calibration.get("method") == "tflite":
        return _check_litert(net, args.model, x, y, where)
    if args.model is not None:
        _check_source_model(args.model, net, x[:1])
    q_in = net.quantize_input(x)
    q_out, outputs = run_golden(net, q_in, layer_outputs=True)
    print(f"golden model vs onnxruntime on {x.shape[0]} inputs of {where}, each layer fed the "
          f"same int8 input:")
    results = compare_layers(net, q_in, outputs)
    failed = [r.name for r in _print_layers(results, [CHECK_BOUND] * len(results))]
    golden_pred = q_out.reshape(len(q_out), -1).argmax(1)
    ort_q, _ = run_onnx(to_onnx(net), {net.input_name: x})
    print(f"  int8 network in onnxruntime: {100 * np.mean(ort_q == q_out):.2f} % of outputs equal, "
          f"arg-max agreement {100 * np.mean(ort_q.reshape(len(ort_q), -1).argmax(1) == golden_pred):.2f} %")
    _float_comparison(net, args.model, x, y, golden_pred)
    if failed:
        # The table stays on stdout; the verdict is the one error line (exit 2).
        raise FpganetError(f"check failed: {len(failed)} layer(s) differ from onnxruntime beyond "
                           f"the bound ({CHECK_BOUND[2]}): "
                           f"{', '.join(failed)}")
    print("check passed")
    return 0


def _print_layers(results, bounds):
    """Print one line per layer (:class:`~fpganet.qdq_export.LayerAgreement`), each against its
    ``(min_equal, max_diff, text)`` bound; returns those that fail it."""
    failed = []
    for result, (min_equal, max_diff, text) in zip(results, bounds):
        passed = result.passes(min_equal, max_diff)
        if not passed:
            failed.append(result)
        explained = (f" ({result.at_boundary:,} of the differences across a rounding boundary)"
                     if result.at_boundary else "")
        print(f"  {result.index:2d} {result.type:8s} {result.name:20s} "
              f"{100 * result.equal_fraction:9.4f} % equal, max |diff| {result.max_abs_diff} LSB"
              f"{explained}{'' if passed else f'  FAIL (needs {text})'}")
    return failed


def _float_comparison(net, given, x, y, golden_pred):
    """The float source model's (``given``, else the manifest's) arg-max against the golden
    model's (and top-1 with labels)."""
    from .qdq_export import run_source_model

    model = given or net.source.get("path")
    if not given and net.source.get("format") == "tflite":
        # onnxruntime runs ONNX; a TFLite source is no float model to it.
        print(f"  source model {net.source.get('file')} is TFLite: no float comparison "
              f"(--model FLOAT.onnx gives one)")
    elif model and os.path.isfile(model) and (given or file_sha256(model) == net.source.get("sha256")):
        float_pred = run_source_model(model, x).reshape(len(x), -1).argmax(1)
        print(f"  float model ({os.path.basename(model)}) in onnxruntime: arg-max agreement with "
              f"golden {100 * np.mean(float_pred == golden_pred):.2f} %")
        if y is not None:
            print(f"  top-1 accuracy: float {100 * np.mean(float_pred == y):.2f} %, golden int8 "
                  f"{100 * np.mean(golden_pred == y):.2f} %")
    else:
        print("  float model not found (or changed since compiling): no float comparison")


def _check_litert(net, model, x, y, where):
    """``check`` of an int8 TFLite network: each layer, and the network's outputs, against
    LiteRT's reference kernels on the source model (its own runtime)."""
    from .model.tflite_import import is_tflite, tflite_layer_tensors

    if not _has_module("ai_edge_litert"):
        raise FpganetError("checking an int8 TFLite network runs LiteRT's reference kernels, "
                           "its reference: pip install ai-edge-litert (fpganet's dev extra)")
    from .model.litert_reference import compare_with_litert

    float_model = None
    if model is not None and not is_tflite(model):
        _check_source_model(model, net, x[:1])
        float_model, model = model, None
    source = net.source.get("path")
    if model is None and (not source or not os.path.isfile(source)
                          or file_sha256(source) != net.source.get("tflite_sha256")):
        raise FpganetError(f"the TFLite source model '{source}' is missing or changed since "
                           f"compiling (--model MODEL.tflite names it)")
    model = model or source
    try:
        tensors = tflite_layer_tensors(model)
    except FpganetError as error:
        raise FpganetError(f"--model '{model}': {error}") from None
    if tensors.names != [layer.name for layer in net.layers]:
        raise FpganetError(f"--model '{model}' is not the compiled network's source: its "
                           f"layers are not the network's")
    comparison = compare_with_litert(net, model, x, tensors)
    print(f"golden model vs LiteRT's reference kernels on {x.shape[0]} inputs of {where}, each "
          f"layer fed LiteRT's int8 input of it ({net.config.requant_mode} requantization):")
    failed = _print_layers(comparison.layers, comparison.bounds)
    print(f"  int8 network in LiteRT: {100 * comparison.outputs_equal:.2f} % of outputs equal, "
          f"arg-max agreement {100 * comparison.agreement:.2f} %")
    if y is not None:
        print(f"  top-1 accuracy: LiteRT {100 * np.mean(comparison.litert_pred == y):.2f} %, "
              f"golden {100 * np.mean(comparison.golden_pred == y):.2f} %")
    if float_model is not None:
        _float_comparison(net, float_model, x, y, comparison.golden_pred)
    if failed:
        # The table stays on stdout; the verdict is the one error line (exit 2).
        # By index and kind: a TFLite layer's name is its tensor's, often long.
        raise FpganetError(f"check failed: {len(failed)} layer(s) differ from LiteRT's "
                           f"reference kernels beyond their bound: "
                           f"{', '.join(f'{r.index} ({r.type})' for r in failed)}")
    print("check passed")
    return 0


def _check_qonnx(net, model, x, y, where):
    """``check`` of a QONNX network: every quantized tensor and the logits against qonnx's own
    executor on the source model (onnxruntime cannot run its quantizers)."""
    if not _has_module("qonnx"):
        raise FpganetError("checking a QONNX network runs qonnx's executor, its reference: "
                           "pip install qonnx (fpganet's dev extra)")
    from .model.onnx_import import load_onnx
    from .model.qonnx_reference import compare_with_qonnx

    model = model or net.source.get("path")
    if not model or not os.path.isfile(model) or (
            model == net.source.get("path") and file_sha256(model) != net.source.get("sha256")):
        raise FpganetError(f"the QONNX source model '{model}' is missing or changed since "
                           f"compiling (--model MODEL.onnx names it)")
    graph = load_onnx(model)
    if (graph.quantization or {}).get("arithmetic") != "qonnx" \
            or tuple(graph.input_shape) != tuple(net.input_shape):
        raise FpganetError(f"--model '{model}' is not the compiled network's source: not a "
                           f"QONNX model taking {list(net.input_shape)}")
    try:
        comparison = compare_with_qonnx(net, graph, model, x)
    except AssertionError as error:
        raise FpganetError(f"--model '{model}' is not the compiled network's source: "
                           f"{error}") from None
    print(f"golden model vs qonnx's executor on {x.shape[0]} inputs of {where}:")
    for node, name, equal, largest, allowed in comparison.layers:
        note = ("" if allowed == 0 else " (past an inexact layer)" if allowed is None else
                f" (inexact fit: up to {allowed:g} allowed)")
        print(f"  {name or 'the input':24s} {node:32s} {100 * equal:9.4f} % of levels equal, "
              f"max |diff| {largest:g} level(s){note}")
    bound = ("" if comparison.logit_bound is None else
             f" (bound {comparison.logit_bound:.4g})")
    print(f"  logits: max |diff| {comparison.logit_error:.4g}{bound}, arg-max agreement "
          f"{100 * comparison.agreement:.2f} %")
    if y is not None:
        print(f"  top-1 accuracy: qonnx {100 * np.mean(comparison.reference_pred == y):.2f} %, "
              f"golden {100 * np.mean(comparison.golden_pred == y):.2f} %")
    failures = comparison.failures()
    if failures:
        raise FpganetError(f"check failed: {'; '.join(failures)}")
    print("check passed")
    return 0


def _check_source_model(model, net, x):
    """Refuse, before any work, a float model that cannot be the compiled network's source."""
    from .qdq_export import run_source_model

    outputs = run_source_model(model, x)
    if outputs.size != int(np.prod(net.output_shape)):
        raise FpganetError(f"--model '{model}' gives {list(outputs.shape[1:])} outputs per input, "
                           f"the compiled network {list(net.output_shape)}: is it another model?")


# mnist -------------------------------------------------------------------------------------

def _configure_mnist(parser):
    parser.add_argument("--split", default="eval", choices=list(SPLITS),
                        help="calib: test images 0..499; eval: 500..9999; all (default eval)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N images")
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--raw", action="store_true",
                       help="the pixels, 0..255, instead of the embedded LeNet-5's normalization "
                            "((x / 255 - 0.1307) / 0.3081)")
    scale.add_argument("--unit", action="store_true",
                       help="the pixels over 255, 0..1 (FINN's TFC networks, most MNIST models)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.npz",
                        help="write 'x' float32 [N, 1, 28, 28] and 'y' labels")


@command("mnist", help="write embedded MNIST test images (normalized for LeNet-5, or --raw, or "
                       "--unit) as an inputs/calibration file")
@arguments(_configure_mnist)
def _run_mnist(args):
    x, y = mnist(args.split, args.limit, raw=args.raw, unit=args.unit)
    write_npz(args.output, "mnist", x=x, y=y)
    kind = ("raw pixels 0..255" if args.raw else "pixels over 255, 0..1" if args.unit else
            f"normalized as the embedded LeNet-5 wants: (x / 255 - {MNIST_MEAN}) / {MNIST_STD}; "
            f"--raw for the pixels, --unit for them over 255")
    print(f"wrote {args.output}: {x.shape[0]} images of the {args.split} split, float32 "
          f"[N, 1, 28, 28], {kind}")
    return 0


# estimate / report -------------------------------------------------------------------------

@command("estimate", help="images/s, latency, watts and images/s/W: the FPGA, an ASIC and GPUs")
@arguments(configure_estimate_parser)
def _run_estimate(args):
    return run_estimate(args)


@command("report", help="write the estimate as Markdown with PNG plots")
@arguments(configure_report_parser)
def _run_report(args):
    return run_report(args)


# synth -------------------------------------------------------------------------------------

@command("synth", help="build a board's bitstream with yosys and nextpnr; write report.json")
@arguments(configure_synth)
def _run_synth(args):
    return run_synth(args)


# fit ---------------------------------------------------------------------------------------

@command("fit", help="which boards hold a model, and how fast: fits or not and why, cycles, "
                     "images/s and watts per board")
@arguments(lambda parser: _module("fpganet.fit").configure(parser))
def _run_fit(args):
    return _module("fpganet.fit").run(args)


# dse ---------------------------------------------------------------------------------------

@command("dse", help="design-space exploration on Ray: compile, time and estimate every point "
                     "of a parameter space (--synth: board builds too)")
@arguments(lambda parser: _module("fpganet.dse").configure(parser))
def _run_dse(args):
    return _module("fpganet.dse").run(args)


# board -------------------------------------------------------------------------------------

@command("board", help="run a compiled network on an FPGA board over its UART (run, ping, status)")
@arguments(add_arguments)
def _run_board(args):
    return run_command(args)


# sim / verilog / bench / fuzz: the Makefile's targets --------------------------------------

@command("sim", help="the main job: LeNet-5 on MNIST through the accelerator's generated Verilog, "
                     "checked against the golden model")
@arguments(lambda parser: _module("fpganet.sim.main").configure(parser))
def _run_sim(args):
    return _module("fpganet.sim.main").run(args)


@command("verilog", help="write the generated Verilog and its configuration into a folder")
@arguments(lambda parser: _module("fpganet.hdl.export").configure(parser))
def _run_verilog(args):
    return _module("fpganet.hdl.export").run(args)


@command("bench", help="simulation-speed and LeNet-5 RTL benchmarks, as JSON reports")
@arguments(lambda parser: _module("fpganet.sim.bench").configure(parser))
def _run_bench(args):
    return _module("fpganet.sim.bench").run(args)


@command("activity", help="switching activity of a network on the accelerator's Verilog "
                          "(toggle counts), as the estimator's --activity rtl measures it")
@arguments(lambda parser: _module("fpganet.sim.activity").configure(parser))
def _run_activity(args):
    return _module("fpganet.sim.activity").run(args)


def _configure_fuzz(parser):
    parser.add_argument("--cases", type=non_negative_int, default=200, metavar="N",
                        help="random networks on the ISA simulator (default 200; 0 skips them)")
    parser.add_argument("--networks", type=non_negative_int, default=40, metavar="N",
                        help="random networks per configuration on the RTL (default 40; 0 skips)")
    parser.add_argument("--engines", type=non_negative_int, default=0, metavar="N",
                        help="random binary and low-bit networks on the network engine's RTL, "
                             "a build each (default 0)")
    parser.add_argument("--seed", type=non_negative_int, default=1, help="(default 1)")
    parser.add_argument("--first", type=non_negative_int, default=0, metavar="I",
                        help="index of the first ISA case (to replay a failure)")
    parser.add_argument("--arrays", default=",".join(ARRAYS), metavar="RxC,...",
                        help="ISA cases' array shapes (default %(default)s)")
    parser.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                        help="RTL simulator (default verilator)")


@command("fuzz", help="random networks compiled and run on the ISA simulator and the RTL, "
                      "each against the golden model (and the RTL against the cycle model)")
@arguments(_configure_fuzz)
def _run_fuzz(args):
    arrays = tuple(args.arrays.split(","))
    for array in arrays:
        AcceleratorConfig.parse_array(array)        # one line for a bad shape, before any work
    failures = 0
    if args.cases:
        failures += _module("fpganet.codegen.fuzz").fuzz_isa(args.cases, args.seed, args.first,
                                                             arrays)
        if _has_module("qonnx"):     # the dev extra: the QONNX networks' reference
            failures += _module("fpganet.codegen.fuzz_qonnx").fuzz_qonnx_isa(
                (args.cases + 3) // 4, args.seed, arrays)
    if args.networks:
        failures += _module("fpganet.sim.fuzz_rtl").fuzz_rtl(args.networks, args.seed, args.sim)
    if args.engines:
        failures += _module("fpganet.sim.fuzz_engine").fuzz_engine(args.engines, args.seed,
                                                                    args.sim)
    return EXIT_CHECK_FAILED if failures else 0


def _module(name):
    return importlib.import_module(name)


def _has_module(name):
    return importlib.util.find_spec(name) is not None


# Entry point -------------------------------------------------------------------------------

def build_parser():
    """The argparse parser with every registered subcommand."""
    parser = Parser(prog=PROG, description="From a trained CNN (ONNX) to an int8 systolic-array "
                                            "accelerator.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help, configure, _) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help, description=help)
        if configure:
            configure(sub)
    return parser


def main(argv=None):
    """Run the command line; returns the exit status (0, 1 for a failed check, 2 for an error,
    130 interrupted, 143 terminated)."""
    return run_command_line(build_parser, lambda args: COMMANDS[args.command][2](args), argv)


if __name__ == "__main__":
    sys.exit(main())
