"""Property-based tests of the bad-input contract (docs/reference/errors.md), with hypothesis.

Random command lines over a sandbox of real files (a small model, calibration and input
files, a compiled directory, folders and files fpganet did not write, damaged files), and
random malformed ONNX models fed to the importer. Every case must either succeed, or end
in exit status 2 with one ``fpganet: error:`` line and the sandbox exactly as it was:
nothing created, changed or removed, no traceback, no hang (a time limit per case).

``make test`` runs a few hundred cases, the same ones each time (FPGANET_PROPERTY_EXAMPLES,
default 30 command lines; FPGANET_PROPERTY_MODEL_EXAMPLES, default 600 models);
``make fuzz`` runs many more, new ones each run (FPGANET_PROPERTY_RANDOM=1).
"""

import contextlib
import io
import json
import os
import shutil
import signal
import tempfile

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx_builders import init, make, node, save, weights
from tree import snapshot

from fpganet.cli import main
from fpganet.errors import FpganetError
from fpganet.files import verify_directory
from fpganet.model import import_model

EXAMPLES = int(os.environ.get("FPGANET_PROPERTY_EXAMPLES", "30"))
MODEL_EXAMPLES = int(os.environ.get("FPGANET_PROPERTY_MODEL_EXAMPLES", "600"))
#: make fuzz sets this: new random cases each run instead of the same derandomized ones.
DERANDOMIZE = not os.environ.get("FPGANET_PROPERTY_RANDOM")
#: Seconds one case may take before it counts as a hang.
CASE_LIMIT_S = 60


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    def expire(signum, frame):
        raise Hang(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def tiny_model():
    """Conv 3x3 (1 -> 3) Relu MaxPool Flatten Gemm (-> 4) on [N, 1, 8, 8]."""
    return make([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
                 node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                 node("Flatten", ["p"], ["f"]), node("Gemm", ["f", "g", "gb"], ["y"], transB=1)],
                [init("w", weights((3, 1, 3, 3), 1)), init("g", weights((4, 48), 2)),
                 init("gb", weights((4,), 3, 0.1))], in_shape=("N", 1, 8, 8))


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """The files every random command line may name."""
    root = tmp_path_factory.mktemp("sandbox")
    rng = np.random.default_rng(0)
    save(tiny_model(), root / "tiny.onnx")
    np.savez(root / "calib.npz", x=rng.random((40, 1, 8, 8), dtype=np.float32))
    np.savez(root / "X.npz", x=rng.random((6, 1, 8, 8), dtype=np.float32),
             y=rng.integers(0, 4, 6))
    np.savez(root / "results.npz", accuracy=np.float32(0.9))          # the user's own
    (root / "garbage.onnx").write_bytes(rng.bytes(300))
    (root / "trunc.onnx").write_bytes((root / "tiny.onnx").read_bytes()[:150])
    (root / "empty.npz").write_bytes(b"")
    (root / "space.toml").write_text('[space]\narray = ["2x8", "4x4"]\n')
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("the user's notes")
    (root / "mine" / "manifest.json").write_text('{"name": "a web app"}')
    (root / "report.json").write_text(json.dumps({
        "board": "icebreaker", "device": "iCE40UP5K", "fmax_mhz": 23.9, "macs_per_cycle": 8,
        "toolchain": {}, "resources": {"LC": {"used": 4701, "available": 5280}}}))
    with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):
        assert main(["compile", "tiny.onnx", "--calib", "calib.npz", "-o", "OUT"]) == 0
    return root


HOSTILE_PATHS = ["tiny.onnx", "calib.npz", "X.npz", "OUT", "mine", "mine/notes.txt",
                 "report.json", "results.npz", "garbage.onnx", "trunc.onnx", "empty.npz",
                 "missing", "new/deeper/x", "OUT/network.npz", "OUT/manifest.json", ".", "-", "",
                 "n" * 300]
HOSTILE_NUMBERS = ["0", "-1", "3.5", "1e9", "1e400", "inf", "-inf", "nan", "abc", "", "0x10",
                   "99999999999999999999"]
HOSTILE_ARRAYS = ["0x8", "8x0", "x", "64x65", "-2x8", "2x2x2"]


def mostly(good, hostile):
    """Values from ``good`` about three times in four, else from ``hostile``: most command
    lines then run to the end, and the rest probe one bad value at a time."""
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good),
                     st.sampled_from(hostile))


def number(*good):
    return mostly([str(value) for value in good], HOSTILE_NUMBERS)


def path(*good):
    return mostly(list(good), HOSTILE_PATHS)


def flags(options, max_size=3):
    """Any subset of ``options`` (flag -> strategy of its value, None for a bare flag)."""
    def build(chosen):
        return st.tuples(*[st.just([flag]) if options[flag] is None
                           else options[flag].map(lambda value, flag=flag: [flag, value])
                           for flag in chosen])
    return (st.lists(st.sampled_from(sorted(options)), unique=True, max_size=max_size)
            .flatmap(build).map(lambda groups: [item for group in groups for item in group]))


def one(strategy):
    return strategy.map(lambda value: [value])


CONFIG_FLAGS = {"--array": mostly(["2x8", "1x1", "4x4", "3x5", "8x2"], HOSTILE_ARRAYS),
                "--rows": number(1, 2, 4), "--cols": number(2, 8),
                "--acc-width": number(24, 32), "--act-buffer-bytes": number(4096, 8192, 64),
                "--clock-mhz": number(18, 40.5), "--requant-lanes": number(1, 2),
                "--board": mostly(["icebreaker", "ulx3s"], ["x"])}

COMPILE = st.tuples(
    st.just(["compile"]), one(path("tiny.onnx")),
    mostly([["--calib", "calib.npz"]], [[]] + [["--calib", p] for p in HOSTILE_PATHS]),
    st.just(["-o"]), one(path("new", "OUT", "fresh/out")),
    flags({**CONFIG_FLAGS,
           "--method": mostly(["mse", "minmax", "percentile:99", "kl"], ["percentile:x", "bogus"]),
           "--calib-limit": number(10, 40), "--images": number(1, 3), "--batch": number(1, 2),
           "--no-program": None, "--weight-bits": number(8, 4, 2),
           "--layer-weight-bits": mostly(["conv_c=3", "gemm_y=5,conv_c=8"],
                                         ["maxpool_p=4", "nope=4", "conv_c=", "conv_c=9", ","]),
           "--weight-rounding": mostly(["nearest", "gptq"], ["bogus"]),
           "--engine": mostly(["int8", "binary"], ["ternary"]), "--pe": number(1, 4),
           "--simd": number(8, 16)}))

RUN = st.tuples(st.just(["run"]), one(path("OUT")),
                mostly([["--inputs", "X.npz"]], [[]] + [["--inputs", p] for p in HOSTILE_PATHS]),
                flags({"--backend": mostly(["golden", "isa"], ["verilog"]),
                       "--limit": number(1, 3), "--out": path("r.npz", "OUT/r.npz")}))

CHECK = st.tuples(st.just(["check"]), one(path("OUT")),
                  st.tuples(st.just("--inputs"), path("X.npz", "calib.npz")).map(list),
                  flags({"--limit": number(2, 5), "--model": path("tiny.onnx")}))

ESTIMATE_FLAGS = {"--board": mostly(["icebreaker", "ulx3s"], ["pynq"]),
                  "--report": path("report.json"), "--clock-mhz": number(18, 30),
                  "--baud": number(115200, 3e6), "--cycles": number(5000),
                  "--activity": mostly(["default", "auto", "0.2"], ["0", "2", "nan", "x"]),
                  "--asic-clock-mhz": number(500), "--batch": number(1, 64)}
ESTIMATE = st.tuples(st.just(["estimate"]), one(path("OUT")),
                     st.just(["--no-measure", "--no-synth"]),
                     flags({**ESTIMATE_FLAGS, "--json": None}))
REPORT = st.tuples(st.just(["report"]), one(path("OUT")),
                   st.just(["--no-measure", "--no-synth"]), st.just(["-o"]),
                   one(path("rep", "OUT/rep")), flags(ESTIMATE_FLAGS, max_size=2))
MNIST = st.tuples(st.just(["mnist"]),
                  flags({"--split": mostly(["calib", "eval"], ["x"]), "--limit": number(3)}),
                  st.just(["-o"]), one(path("m.npz", "OUT/m.npz")))
BOARD = st.tuples(st.just(["board"]), st.sampled_from([["ping"], ["status"], ["run", "OUT"]]),
                  st.just(["--port"]), st.sampled_from([["missing"], ["X.npz"], [""]]),
                  flags({"--timeout": number(0.2), "--baud": number(115200),
                         "--out": path("b.npz")}))

VERILOG = st.tuples(st.just(["verilog", "-o"]), one(path("v", "OUT/v")),
                   flags({"--array": CONFIG_FLAGS["--array"]}))
FUZZ = st.tuples(st.just(["fuzz", "--networks", "0"]),
                 flags({"--cases": number(1, 2), "--seed": number(3),
                        "--arrays": mostly(["2x8", "1x1,3x5"], ["2x8,zz", ""])}))

# Every dse command line names an address that is no Ray cluster's, so that no case starts
# Ray: valid inputs end at that refusal, hostile ones at theirs, each before Ray would start.
DSE = st.tuples(st.just(["dse", "--board", "icebreaker", "--space"]), one(path("space.toml")),
                mostly([[]], [["tiny.onnx", "--calib", "calib.npz"], ["tiny.onnx"],
                              ["garbage.onnx"], ["tiny.onnx", "--calib", "X.npz"]]),
                st.just(["-o"]), one(path("d", "OUT/d")),
                st.tuples(st.just("--cache"), path("cache", "mine/notes.txt/cache")).map(list),
                st.tuples(st.just("--address"),
                          st.sampled_from(["not a cluster", "127.0.0.1:1", "host:0"])).map(list),
                flags({"--max-points": number(2, 1000), "--timeout": number(1)}))

COMMAND_LINES = st.one_of(COMPILE, RUN, CHECK, ESTIMATE, REPORT, MNIST, BOARD, VERILOG, FUZZ,
                          DSE).map(
    lambda parts: [item for part in parts for item in part])


def output_of(argv):
    """The output path a command line names (what it may create or replace)."""
    for flag in ("-o", "--out"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return argv[argv.index(flag) + 1]
    return None


def run_in(directory, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(directory), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), time_limit(CASE_LIMIT_S):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=COMMAND_LINES)
def test_command_lines_keep_the_contract(sandbox, argv):
    work = tempfile.mkdtemp(prefix="case-", dir=sandbox.parent)
    try:
        shutil.copytree(sandbox, work, dirs_exist_ok=True)
        before = snapshot(work)
        status, out, err = run_in(work, argv)
        event(f"{argv[0]} exit {status}")
        after = snapshot(work)
        assert "Traceback" not in out + err, (argv, err)
        assert status in (0, 1, 2), (argv, status, err)
        if status == 2:
            lines = err.strip().splitlines()
            assert len(lines) >= 1 and lines[-1].startswith("fpganet: error: "), (argv, err)
            assert all(line.startswith("fpganet: ") for line in lines), (argv, err)
            assert after == before, (argv, "changed files on an error",
                                     sorted(set(after.items()) ^ set(before.items()), key=str)[:4])
            return
        assert all(line.startswith("fpganet: ") for line in err.splitlines()), (argv, err)
        # Success: only the named output is new or replaced; everything else is as it was.
        target = output_of(argv)
        target = os.path.normpath(target) if target else None
        for name, data in before.items():
            inside = target is not None and (name.rstrip("/") == target
                                             or name.startswith(target + os.sep))
            if not inside:
                assert after.get(name, "gone") == data, (argv, name)
        for name in set(after) - set(before):
            # The output itself, what is inside it, or a folder created to hold it.
            assert target is not None and (name.rstrip("/") == target
                                           or name.startswith(target + os.sep)
                                           or target.startswith(name)), (argv, name)
        if argv[0] in ("compile", "report", "verilog"):
            verify_directory(os.path.join(work, target))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# The importer on malformed models ---------------------------------------------------------------

OPS = ["Conv", "Relu", "MaxPool", "Gemm", "Flatten", "Reshape", "BatchNormalization", "Add",
       "MatMul", "Softmax", "Dropout", "Identity", "Transpose", "AveragePool", "Sigmoid",
       "Concat", "Clip"]
VALUES = st.sampled_from([0.0, 1.0, -1.0, 0.5, 1e-30, 3e38, np.inf, -np.inf, np.nan])
SHAPE = st.lists(st.integers(0, 6), min_size=1, max_size=4)
ATTRIBUTES = {
    "kernel_shape": st.lists(st.integers(-1, 5), min_size=1, max_size=3),
    "strides": st.lists(st.integers(-1, 3), min_size=1, max_size=3),
    "pads": st.lists(st.integers(-2, 3), min_size=1, max_size=5),
    "group": st.integers(-1, 4), "axis": st.integers(-3, 3),
    "alpha": VALUES, "beta": VALUES, "epsilon": VALUES,
    "transB": st.integers(0, 1), "perm": st.lists(st.integers(-1, 3), min_size=1, max_size=4),
    "dilations": st.lists(st.integers(0, 2), min_size=2, max_size=2),
}


def _valid_chain(draw):
    """Nodes and initializers of a small valid CNN on [N, 2, 8, 8] (Conv, BN, Relu, pools, Gemm)."""
    nodes, inits, current, channels = [], [], "x", 2
    for index in range(draw(st.integers(1, 3))):
        out = draw(st.integers(1, 4))
        inits += [init(f"w{index}", weights((out, channels, 3, 3), index)),
                  init(f"b{index}", weights((out,), index + 10, 0.1))]
        nodes.append(node("Conv", [current, f"w{index}", f"b{index}"], [f"c{index}"],
                          pads=[1, 1, 1, 1]))
        current, channels = f"c{index}", out
        if draw(st.booleans()):
            inits += [init(f"{k}{index}", np.abs(weights((out,), index + 20)) + 0.5)
                      for k in ("g", "m", "v")] + [init(f"o{index}", weights((out,), 30))]
            nodes.append(node("BatchNormalization", [current, f"g{index}", f"o{index}",
                                                     f"m{index}", f"v{index}"], [f"n{index}"]))
            current = f"n{index}"
        nodes.append(node("Relu", [current], [f"r{index}"]))
        current = f"r{index}"
    nodes.append(node("MaxPool", [current], ["p"], kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(node("Flatten", ["p"], ["f"]))
    inits += [init("fw", weights((3, channels * 16), 40)), init("fb", weights((3,), 41))]
    nodes.append(node("Gemm", ["f", "fw", "fb"], ["y"], transB=1))
    return nodes, inits


@st.composite
def malformed_models(draw):
    """A valid small CNN with up to three mutations: an op, attribute, initializer, edge (a
    cycle), input shape or opset changed to something random."""
    nodes, inits = _valid_chain(draw)
    shape, opset = [2, 8, 8], 13
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["op", "attribute", "initializer", "edge", "shape", "opset"]))
        target = nodes[draw(st.integers(0, len(nodes) - 1))]
        if kind == "op":
            target.op_type = draw(st.sampled_from(OPS))
        elif kind == "attribute":
            key = draw(st.sampled_from(sorted(ATTRIBUTES)))
            value = draw(ATTRIBUTES[key])
            kept = [a for a in target.attribute if a.name != key]
            del target.attribute[:]
            target.attribute.extend([*kept, helper.make_attribute(key, value)])
        elif kind == "initializer":
            index = draw(st.integers(0, len(inits) - 1))
            fill = draw(VALUES)
            new_shape = draw(st.one_of(st.just(list(inits[index].dims)), SHAPE))
            inits[index] = numpy_helper.from_array(np.full(new_shape, fill, np.float32),
                                                   inits[index].name)
        elif kind == "edge":
            later = nodes[draw(st.integers(0, len(nodes) - 1))]
            target.input[0] = later.output[0]          # a cycle, or a skip, or a self-loop
        elif kind == "shape":
            shape = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
        else:
            opset = draw(st.sampled_from([7, 11, 17, 28, 29, 99]))
    graph = helper.make_graph(nodes, "random",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@settings(max_examples=MODEL_EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.too_slow])
@given(model=malformed_models())
def test_the_importer_accepts_or_refuses_in_one_line(model):
    with time_limit(CASE_LIMIT_S):
        try:
            graph = import_model(model)
        except FpganetError as error:
            assert "\n" not in str(error) and str(error)
            event("refused")
            return
    event("imported")
    for layer in graph.layers:
        assert all(int(d) >= 1 for d in layer.out_shape), layer
        for role in ("weight", "bias"):
            values = getattr(layer, role, None)
            if values is not None:
                assert np.all(np.isfinite(values)), (layer.name, role)


def test_a_truncated_model_file_is_refused(sandbox, tmp_path):
    data = (sandbox / "tiny.onnx").read_bytes()
    for cut in range(1, len(data), max(1, len(data) // 40)):
        (tmp_path / "cut.onnx").write_bytes(data[:cut])
        status, out, err = run_in(tmp_path, ["compile", "cut.onnx", "--calib",
                                             str(sandbox / "calib.npz"), "-o", "OUT"])
        assert status == 2 and err.startswith("fpganet: error: "), (cut, err)
        assert sorted(os.listdir(tmp_path)) == ["cut.onnx"]
