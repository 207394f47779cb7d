"""Build generated Verilog for a simulator once, and run cocotb testbenches on it.

A build is keyed by the hash of the Verilog text, the simulator and its
arguments, and kept under ``build/sim/``: a second test of the same design, or
the same design in a later ``make test``, reuses the compiled simulator (a
Verilator build costs tens of seconds on two cores; a run costs far less).
"""

import fcntl
import hashlib
import json
import os
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import wiring

from fpganet.hdl import export
from fpganet.sim.toolchain import ensure_simulator

__all__ = ["SIMULATORS", "default_simulator", "generate_verilog", "clock_harness", "SimBuild", "build",
           "CocotbResult", "failure_report", "verilator_main"]

SIMULATORS = ("verilator", "icarus")

# Amaranth's Verilog trips Verilator's lint on widths and unused bits; they are
# intended (sign extension and truncation are explicit in the netlist).
# The PyPI wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I (its build machine's
# configure did not detect GCC's "-include"): once a model is large enough for Verilator
# to split it into fast and slow files, the precompiled header goes to the compiler as a
# file name and the build fails ("Vtop__pch.h.fast: linker input file not found").
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNUSEDSIGNAL",
                  "-Wno-UNOPTFLAT", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                  "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")

# Under Verilog-2005 rules Icarus turns a declaration's initial value into a
# time-0 assignment, which wakes the `always @*` blocks that Yosys's Verilog
# backend makes sensitive to one such register; under the runner's default
# -g2012 nothing wakes them and combinational outputs stay X until an input moves.
ICARUS_ARGS = ("-g2005",)

#: What a Verilator executable's C++ main can do besides clocking the model to $finish.
VERILATOR_MAIN_FEATURES = ("count_busy", "timed_run")


def verilator_main(model, feature=None):
    """The text of ``sim/verilator_main.cpp`` for the Verilated class ``model`` (``V<top>``),
    with one of :data:`VERILATOR_MAIN_FEATURES` switched on (see the file's head)."""
    if feature is not None and feature not in VERILATOR_MAIN_FEATURES:
        raise ValueError(f"feature must be one of {VERILATOR_MAIN_FEATURES}, not {feature!r}")
    defines = [f"#define FPGANET_MODEL {model}\n"]
    if feature is not None:
        defines.append(f"#define FPGANET_{feature.upper()}\n")
    return "".join(defines) + (Path(__file__).parent / "verilator_main.cpp").read_text()


def default_simulator():
    """The simulator named by ``$SIM`` (``verilator`` unless set)."""
    sim = os.environ.get("SIM", "verilator") or "verilator"
    if sim not in SIMULATORS:
        raise RuntimeError(f"SIM={sim!r} is not supported: use one of {', '.join(SIMULATORS)}")
    return sim


def repository_root():
    return Path(__file__).resolve().parent.parent


def default_build_root():
    """``$FPGANET_BUILD_DIR``, else the checkout's ``build/``, else (an installed fpganet with
    no checkout around it) ``~/.cache/fpganet/build``."""
    root = os.environ.get("FPGANET_BUILD_DIR")
    if root:
        return Path(root)
    if (repository_root() / "pyproject.toml").is_file():
        return repository_root() / "build"
    return Path.home() / ".cache" / "fpganet" / "build"


def generate_verilog(component, name):
    """Verilog text of an Amaranth component, its ports named after its signature
    (:func:`fpganet.hdl.export.convert`: refused if part of it would never run in a
    simulator)."""
    return export.convert(component, name)


def clock_harness(component, core_name, name, *, period_ns=10, reset_cycles=2):
    """Verilog of a top-level ``name`` that clocks and resets ``core_name`` by itself.

    The clock is generated inside the simulator (``always #``), so a run in
    which Python only waits for an output costs no Python call per cycle. The
    other ports of ``component`` pass through unchanged.
    """
    ports = []
    for path, member in component.signature.members.flatten():
        if member.is_port:
            ports.append(("__".join(map(str, path)), member.flow, Shape.cast(member.shape).width))
    declarations = [f"  {'input' if flow == wiring.In else 'output'} "
                    f"{f'[{width - 1}:0] ' if width > 1 else ''}{port}"
                    for port, flow, width in ports]
    connections = [f".{port}({port})" for port, _, _ in ports]
    half = period_ns / 2
    return "\n".join([
        "`timescale 1ns/1ps",
        f"module {name}(",
        ",\n".join(declarations),
        ");",
        "  reg clk = 1'b0;",
        "  reg rst = 1'b1;",
        f"  always #{half:g} clk = ~clk;",
        f"  initial #{period_ns * reset_cycles + half:g} rst = 1'b0;",
        f"  {core_name} core(.clk(clk), .rst(rst), {', '.join(connections)});",
        "endmodule",
        "",
    ])


@contextmanager
def _locked(directory):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class CocotbResult:
    """Outcome of one cocotb run: test names that passed and failed, and the results file."""
    passed: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    results_xml: Path = None

    @property
    def ok(self):
        return bool(self.passed) and not self.failed


@dataclass
class SimBuild:
    """A compiled simulation of one top-level, ready to run cocotb testbenches."""
    sim: str
    toplevel: str
    directory: Path

    def _runner(self):
        # Imported here, not at the top: cocotb is slow to import.
        from cocotb_tools.runner import get_runner
        return get_runner(self.sim)

    def run(self, test_module, testcase=None, env=None, *, seed=None, log_file=None,
            waves=False, test_dir=None, plusargs=()):
        """Run cocotb test module ``test_module`` on this build; return a :class:`CocotbResult`.

        ``env`` goes to the testbench as environment variables (the testbench
        reads its parameters from them).
        """
        ensure_simulator(self.sim)
        runner = self._runner()
        test_dir = Path(test_dir) if test_dir else self.directory / "run"
        test_dir.mkdir(parents=True, exist_ok=True)
        results_xml = test_dir / f"results-{os.getpid()}.xml"
        if results_xml.exists():
            results_xml.unlink()
        try:
            self._test(runner, test_module, testcase, env, seed, log_file, waves, test_dir,
                       results_xml, plusargs)
        except SystemExit:
            pass  # the runner exits on failed tests; the results file says which
        return _read_results(results_xml)

    def _test(self, runner, test_module, testcase, env, seed, log_file, waves, test_dir,
              results_xml, plusargs):
        runner.test(
            test_module=test_module,
            hdl_toplevel=self.toplevel,
            hdl_toplevel_lang="verilog",
            testcase=testcase,
            build_dir=self.directory,
            test_dir=test_dir,
            results_xml=str(results_xml),
            extra_env={key: str(value) for key, value in (env or {}).items()},
            seed=seed,
            log_file=log_file,
            waves=waves,
            plusargs=list(plusargs),
            timescale=("1ns", "1ps") if self.sim == "icarus" else None,
        )


def failure_report(result):
    """Which cocotb tests of ``result`` (a :class:`CocotbResult`) failed and their assertion
    messages, from the results file."""
    if not result.results_xml.exists():
        return f"the simulation did not finish (no {result.results_xml})"
    messages = []
    for case in ElementTree.parse(result.results_xml).getroot().iter("testcase"):
        for problem in (case.find("failure"), case.find("error")):
            if problem is not None:
                messages.append(f"{case.get('name')}: {problem.get('message') or problem.text}")
    return "; ".join(messages) or f"no test passed (see {result.results_xml})"


def _read_results(results_xml):
    result = CocotbResult(results_xml=results_xml)
    if not results_xml.exists():
        return result
    for case in ElementTree.parse(results_xml).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        (result.failed if failed else result.passed).append(case.get("name"))
    return result


def _verilator_runner(ports_only):
    from cocotb_tools.runner import Verilator

    class SplitModelVerilator(Verilator):
        """cocotb's Verilator runner, whose own make (not Verilator's -MAKEFLAGS) builds a
        model large enough to be split: it needs the precompiled header's flag too
        (VERILATOR_ARGS). With ``ports_only``, only the top-level ports are visible to VPI,
        which is all a free-running testbench touches; the runner's default (every signal
        public) stops Verilator from optimizing the design and costs ~30 % of its speed."""

        def _build_command(self):
            commands = super()._build_command()
            if ports_only:
                commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            commands[1] = [*commands[1], "CFG_CXXFLAGS_PCH_I=-include"]
            return commands

    return SplitModelVerilator()


def build(component, toplevel, *, sim=None, build_root=None, free_running=False, verbose=False):
    """Generate Verilog for ``component`` and compile it for ``sim``, reusing an identical build.

    With ``free_running``, the design is wrapped in :func:`clock_harness`: the
    simulator clocks it, only its ports are visible, and a testbench just
    waits on its outputs. Returns a :class:`SimBuild`.
    """
    sim = sim or default_simulator()
    ensure_simulator(sim)
    sources = {}
    if free_running:
        core = f"{toplevel}_core"
        sources[f"{core}.v"] = generate_verilog(component, core)
        sources[f"{toplevel}.v"] = clock_harness(component, core, toplevel)
    else:
        sources[f"{toplevel}.v"] = generate_verilog(component, toplevel)
    if sim == "verilator":
        args = list(VERILATOR_ARGS)
        if free_running:
            args += ["--timing", "-CFLAGS", "-std=c++20", "--public-depth", "1"]
    else:
        args = list(ICARUS_ARGS)
    key = hashlib.sha256(json.dumps([sim, toplevel, sources, args]).encode()).hexdigest()[:16]
    directory = (Path(build_root) if build_root else default_build_root()) / "sim" / f"{toplevel}-{sim}-{key}"
    with _locked(directory):
        stamp = directory / ".built"
        if not stamp.exists():
            paths = []
            for filename, text in sources.items():
                (directory / filename).write_text(text)
                paths.append(directory / filename)
            if sim == "verilator":
                runner = _verilator_runner(ports_only=free_running)
            else:
                from cocotb_tools.runner import get_runner
                runner = get_runner(sim)
            runner.build(
                sources=paths,
                hdl_toplevel=toplevel,
                build_dir=directory,
                build_args=args,
                timescale=("1ns", "1ps") if sim == "icarus" else None,
                always=True,
                verbose=verbose,
                log_file=directory / "build.log",
            )
            stamp.write_text(key)
    return SimBuild(sim, toplevel, directory)
