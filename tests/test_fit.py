"""``fpganet fit``: every board's verdict on a model, with the estimate's figures."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from fpganet.boards.build import BOARDS
from fpganet.cli import main
from fpganet.datasets import LENET5_ONNX, mnist
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


def test_fit_on_ray_gives_the_rows_of_fit(tmp_path, capsys):
    """A real local Ray instance, in a process of its own as `fpganet dse`'s tests run it:
    the model travels as bytes and the calibration inputs as an array, and every row equals
    the one computed here."""
    pytest.importorskip("ray", reason="fit --ray needs the optional extra 'dse'")
    x, _ = mnist("calib")
    np.savez(tmp_path / "calib.npz", x=x[:64])
    argv = ["fit", str(LENET5_ONNX), "--calib", str(tmp_path / "calib.npz")]
    assert main(argv) == 0
    here = capsys.readouterr().out
    env = dict(os.environ, RAY_DISABLE_IMPORT_WARNING="1", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    result = subprocess.run([sys.executable, "-m", "fpganet", *argv, "--ray"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == here


def test_fit_at_an_address_that_is_not_a_cluster_is_one_line(capsys):
    pytest.importorskip("ray", reason="fit --address needs the optional extra 'dse'")
    assert main(["fit", "--address", "not a cluster"]) == 2
    assert capsys.readouterr().err == ("fpganet: error: --address 'not a cluster' is not a Ray "
                                       "address (HOST:PORT, ray://HOST:PORT, auto or local)\n")


def test_weight_bits_reach_every_compile(capsys):
    """``--weight-bits``: a configuration whose weight buffer holds LeNet-5's weights packed at
    4 bits and not at 8 (ULX3S, 48 KiB, packed_weights) fits at 4 bits only; a width the
    compiler refuses is one line, status 2."""
    board = BOARDS["ulx3s"]
    config = board.default_config.replace(weight_buffer_bytes=48 * 1024, packed_weights=True)
    at_8 = fit_one(board, "small", config)
    assert not at_8.fits and "weight buffer" in at_8.why, at_8
    assert fit_one(board, "small", config, weight_bits=4).fits
    assert main(["fit", "--weight-bits", "9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--weight-bits: must be from 2 to 8, not 9" in err, err
