"""The chip limits a board's build would meet, checked before any tool runs
(:mod:`fpganet.boards.resources`): counts against the routed reports, refusals in one line."""

import json
from pathlib import Path

import pytest

from fpganet.boards.build import BOARDS, Refused, check_buildable
from fpganet.boards.resources import block_rams, resource_needs
from fpganet.cli import main

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "boards.json"

#: benchmarks/results/boards.json metric -> the board's resource name.
ROUTED_METRICS = {"icebreaker": {"brams": "EBR", "dsps": "DSP", "sprams": "SPRAM"},
                  "ulx3s": {"brams": "EBR", "dsps": "MULT18"}}


def _routed_default(board):
    rows = json.loads(RESULTS.read_text())
    return {row["metric"]: row["value"] for row in rows
            if row["board"] == board and row["configuration"] == "default"
            and row["basis"] == "routed"}


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_the_default_counts_equal_the_routed_report(board):
    """Block RAM, SPRAM and DSP of the board's default equal its routed build's (committed
    rows); the logic estimate of the default is the routed count, with no warning."""
    routed = _routed_default(board)
    needs = check_buildable(BOARDS[board], BOARDS[board].default_config)
    counts = {need.name: need.used for need in needs.exact}
    for metric, name in ROUTED_METRICS[board].items():
        assert counts[name] == routed[metric], (name, counts)
    assert needs.logic.used == routed["luts"] == BOARDS[board].routed_logic
    assert needs.logic_warning() is None and needs.refusal() is None


def test_the_ulx3s_tflite_mode_needs_its_measured_blocks():
    """The tflite requantization on the ULX3S: 198 EBR (its 64-bit parameter entries) and 136
    MULT18X18D (four a lane), as nextpnr packed it (docs/journal/boards.md)."""
    board = BOARDS["ulx3s"]
    needs = resource_needs(board, board.default_config.replace(requant_mode="tflite"))
    assert {need.name: need.used for need in needs.exact} == {"EBR": 198, "MULT18": 136}


@pytest.mark.parametrize("width, depth, ice40, ecp5", [
    (8, 2048, 4, 1), (8, 4096, 8, 2), (64, 256, 4, 2), (53, 4096, 54, 12), (128, 2048, 64, 15),
    (4, 4096, 4, 1), (260, 7, 0, 0)])
def test_block_rams_take_the_cheapest_shape(width, depth, ice40, ecp5):
    assert block_rams("ice40", width, depth) == ice40
    assert block_rams("ecp5", width, depth) == ecp5


def test_a_second_read_port_doubles_the_blocks():
    assert block_rams("ice40", 8, 512, read_ports=2) == 2


def test_an_act_buffer_the_up5k_cannot_hold_is_refused_by_compile(tmp_path, capsys):
    """The case nextpnr refused after synthesis (46 EBR of 30): compile says it, in one line,
    status 2, nothing written."""
    status = main(["compile", "--board", "icebreaker", "--act-buffer-bytes", "16384",
                   "-o", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fpganet: error:"), err
    assert "needs 46 EBR, the device has 30 (act 32," in err[0]
    assert not (tmp_path / "out").exists()


def test_ulx3s_weights_beyond_its_block_ram_are_refused():
    board = BOARDS["ulx3s"]
    with pytest.raises(Refused, match=r"needs 307 EBR, the device has 208 \(weights 256,"):
        check_buildable(board, board.default_config.replace(weight_buffer_bytes=512 * 1024))


def test_synth_refuses_before_its_tools(tmp_path, capsys):
    """fpganet synth makes the same check before it writes anything."""
    status = main(["synth", "--board", "ulx3s", "--weight-buffer-bytes", str(512 * 1024),
                   "-o", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs 307 EBR, the device has 208" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_smaller_buffer_than_the_default_builds():
    board = BOARDS["icebreaker"]
    needs = check_buildable(board, board.default_config.replace(act_buffer_bytes=4096))
    assert {need.name: need.used for need in needs.exact}["EBR"] == 22


def test_logic_near_the_device_warns_in_one_line():
    """A result queue on the UP5K is flip-flops (no LUT RAM): the estimate passes the device
    within its margin, and the warning says so; the default has no warning."""
    board = BOARDS["icebreaker"]
    needs = check_buildable(board, board.default_config.replace(result_queue_rows=8))
    assert needs.logic.used > board.routed_logic
    warning = needs.logic_warning()
    assert warning and "\n" not in warning and "LC, the device has 5,280" in warning


def test_compile_warns_once_about_tight_logic(tmp_path, capsys):
    status = main(["compile", "--board", "icebreaker", "--requant-mult-bits", "4",
                   "-o", str(tmp_path / "out")])
    assert status == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "may not place" in line]
    assert len(warnings) == 1 and warnings[0].startswith("fpganet: warning:"), warnings
