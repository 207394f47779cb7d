"""``fpganet fit``: every board's verdict on a model, with the estimate's figures."""

import dataclasses

import pytest

from fpganet.boards.build import BOARDS
from fpganet.cli import main
from fpganet.fit import fit, fit_one


@pytest.fixture(scope="module")
def lenet_fits():
    return fit()


def test_lenet5_fits_both_boards(lenet_fits):
    verdicts = {(row.board, row.configuration): row for row in lenet_fits}
    assert {board for board, _ in verdicts} == set(BOARDS)
    for name, board in BOARDS.items():
        row = verdicts[(name, "default")]
        assert row.fits, row
        assert "EBR, the device has" in row.why or "LC" in row.why or "LUT4" in row.why
        # The delivered rate is the compute-bound one or the host link's, whichever is lower.
        assert 0 < row.images_per_s <= row.compute_images_per_s
        assert row.compute_images_per_s == pytest.approx(board.default_config.clock_hz
                                                         / row.cycles_per_image, rel=1e-6)
        assert row.watts > 0
    # The 8x8 ULX3S takes fewer cycles an image than the 4x2 iCEBreaker.
    assert verdicts[("ulx3s", "default")].cycles_per_image < \
        verdicts[("icebreaker", "default")].cycles_per_image


def test_a_configuration_the_chip_cannot_hold_is_a_row_with_the_resource():
    board = BOARDS["icebreaker"]
    row = fit_one(board, "big", board.default_config.replace(act_buffer_bytes=16384))
    assert not row.fits and row.why.startswith("the design needs 46 EBR, the device has 30")
    assert row.cycles_per_image is None


def test_a_model_larger_than_the_buffers_is_a_row_with_the_reason():
    board = BOARDS["icebreaker"]
    row = fit_one(board, "small", board.default_config.replace(act_buffer_bytes=1024))
    assert not row.fits and "activation buffer" in row.why, row


def test_fit_prints_one_row_per_board_and_configuration(capsys, monkeypatch):
    lean = {name: dataclasses.replace(board, variants={}) for name, board in BOARDS.items()}
    monkeypatch.setattr("fpganet.fit.BOARDS", lean)
    assert main(["fit"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + len(BOARDS)
    assert all(" yes " in line for line in lines[1:]), lines


@pytest.mark.parametrize("argv, message", [
    (["fit", "/nonexistent/model.onnx"], "does not exist"),
    (["fit", "--calib", "/nonexistent/calib.npz"], "calib"),
])
def test_bad_input_is_one_line_and_status_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fpganet: error:") and message in err[0], err
    assert captured.out == ""
