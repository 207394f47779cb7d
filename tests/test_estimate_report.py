"""The report: Markdown, JSON and PNG plots written; the text table; the report CLI."""

import json

import pytest

from fpganet.compiler import compile_model
from fpganet.estimate import estimate, report, report_main
from fpganet.estimate.comparison import format_si

SMALL_DESIGN = """
module systolic_array(input clk, input signed [7:0] a, input signed [7:0] b,
                      output reg signed [31:0] acc);
  always @(posedge clk) acc <= acc + a * b;
endmodule
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("lenet")
    return compile_model(out_dir=out), out


def test_report_writes_markdown_json_and_plots(compiled, tmp_path):
    net, _ = compiled
    result = estimate(net, measure=False, design=SMALL_DESIGN)
    written = {path.name for path in report(result, tmp_path / "rep")}
    assert written == {"estimate.json", "report.md", "efficiency.png", "roofline.png", "layers.png"}
    for name in written:
        assert (tmp_path / "rep" / name).stat().st_size > 500
    assert (tmp_path / "rep" / "efficiency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "rep" / "report.md").read_text()
    for needle in ("## Side by side", "NVIDIA T4", "MARLANN", "## ASIC projection",
                   "![", "host link"):
        assert needle in text, needle
    data = json.loads((tmp_path / "rep" / "estimate.json").read_text())
    assert data["synthesis"]["nand2_eq"] > 700
    assert data["asic"][0]["nand2_eq"]["source"] == "estimated"


def test_table_lists_every_platform(compiled):
    net, _ = compiled
    result = estimate(net, measure=False, synth=False, simulate=False)
    table = result.table()
    for row in result.rows():
        assert row["name"] in table
    assert "ideal, not simulated" in table
    assert "compute-bound (faster link)" in table


def test_report_main(compiled, tmp_path, capsys):
    _, out = compiled
    status = report_main([str(out), "-o", str(tmp_path / "r"), "--no-measure", "--no-synth",
                          "--clock-mhz", "24", "--baud", "12000000"])
    assert status == 0
    printed = capsys.readouterr().out
    assert "report.md" in printed and "roofline.png" in printed
    data = json.loads((tmp_path / "r" / "estimate.json").read_text())
    assert data["accelerator"]["clock_hz"]["value"] == 24e6
    assert data["fpga"]["throughput"]["link"]["baud"] == 12e6


def test_format_si():
    assert format_si(1234.5) == "1.23 k"
    assert format_si(0.00012, "s") == "120 us"
    assert format_si(0.44, "mm^2") == "0.44 mm^2"
    assert format_si(None) == "-"
