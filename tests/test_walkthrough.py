"""The user guide's walk-through (docs/guide/your-model.md, "The commands"), run as written on
a model built here: fit, compile, run on all three backends, check, estimate."""

import shlex
from pathlib import Path

import numpy as np
import pytest
from onnx_builders import save
from test_docs import run_as_written
from test_graph_networks import inputs, residual_model

ROOT = Path(__file__).resolve().parent.parent


def walkthrough_commands():
    text = (ROOT / "docs" / "guide" / "your-model.md").read_text()
    block = text.split("## The commands", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_walkthrough_is_fit_compile_run_check_estimate():
    steps = [" ".join(shlex.split(line)[:2]) for line in walkthrough_commands()]
    assert steps == ["fpganet fit", "fpganet compile", "fpganet run", "fpganet run", "fpganet run",
                     "fpganet check", "fpganet estimate"]


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path):
    """A residual CNN (conv, add, global average pool, dense) as MODEL.onnx, random
    calibration and test inputs; every line exits 0, and the backends agree."""
    save(residual_model(), tmp_path / "MODEL.onnx")
    np.savez(tmp_path / "CALIB.npz", x=inputs((3, 8, 8), 64))
    np.savez(tmp_path / "TEST.npz", x=inputs((3, 8, 8), 20), y=np.zeros(20, np.int64))
    fit, _, golden, isa, rtl, check, estimate = run_as_written(walkthrough_commands(), tmp_path)
    assert "icebreaker" in fit.lower() and "check passed" in check and "images/s" in estimate
    assert "equal the golden model" in isa or "bit for bit" in isa
    with np.load(tmp_path / "R.npz") as r:
        assert r["q"].shape[0] == 20 and "cycles" in r
