"""The pages: generated ones current, figures from results rows, links that resolve, and the
README's commands running as written."""

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fpganet.config import AcceleratorConfig
from fpganet.results import (PLACEHOLDER, ResultsError, check_rows, find, format_value,
                             load_rows, make_row, render)

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_equal_their_rendering():
    for path, text in _generator().pages().items():
        assert (ROOT / path).read_text() == text, f"{path} is stale: run `make docs`"


#: A measured figure written by hand: a number or a range followed by one of the units pages
#: measure in.
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
HAND_FIGURE = re.compile(rf"(?<![\w.{{-]){_NUMBER}(?:\s*-\s*{_NUMBER})?\s*(?:%|MHz|mW|uW|nW|W\b|"
                         r"k? ?images/s|cycles|LUT4?s?\b|LCs?\b|FFs?\b|(?:logic )?cells\b|uJ|ms\b|"
                         r"GMAC/s)")


#: Pages the figure check skips for now: others are rewriting them.

#: page -> {figure as written: why it may stay}. Design facts and test parameters the code
#: does not hold in a form a page can be rendered from, and a published figure with its
#: source beside it; every other figure is a placeholder (``{{... | metric}}`` or
#: ``{{code: NAME}}``) or lives in the dated journal.
ALLOWED_FIGURES = {
    "docs/guide/estimator.md": {"12 MHz": "oscillator", "25 MHz": "oscillator",
                                "30-70 %": "Lattice's note"},
    "docs/reference/hostlink.md": {"12 MHz": "4 x 3 Mbaud", "4 cycles": "UART's minimum",
                                   "100 MHz": "clock range", "10 ms": "default",
                                   "1,100 cycles": "arithmetic", "40 MHz": "test's clock",
                                   "10 %": "test's bound", "2-3.5 %": "test's rates",
                                   "30 MHz": "the FT2232H's MPSSE clock, the iCEBreaker's clock",
                                   "1 %": "test's bound"},
    "docs/guide/hostlink.md": {"30 MHz": "the FT2232H's MPSSE clock"},
    "docs/reference/numerics.md": {"99 %": "check's bound"},
}


def _hand_figures(page, text):
    """The figures of ``text`` (a template or a written page) that are neither placeholders
    nor allowed on ``page``."""
    allowed = ALLOWED_FIGURES.get(page, {})
    text = _generator().CODE_VALUE.sub("", PLACEHOLDER.sub("", text))
    return [figure for figure in HAND_FIGURE.findall(text) if figure not in allowed]


def _checked_pages():
    """{page: text to check}: the templates, and the guide and reference pages that have none."""
    templates = ROOT / "docs" / "templates"
    pages = {template.relative_to(templates).as_posix(): template
             for template in templates.glob("*.md")}
    for page in [*ROOT.glob("docs/guide/*.md"), *ROOT.glob("docs/reference/*.md")]:
        name = page.relative_to(ROOT).as_posix()
        template = templates / page.relative_to(ROOT / "docs")
        pages[name] = template if template.exists() else page
    return {name: path.read_text() for name, path in pages.items()}


def test_pages_have_no_hand_copied_figures():
    found = {page: figures for page, text in _checked_pages().items()
             if (figures := _hand_figures(page, text))}
    assert not found, f"figures not from results rows (a placeholder, or the journal): {found}"


def test_hand_figure_pattern_finds_figures():
    assert HAND_FIGURE.findall("runs at 906 images/s and 23.9 mW, 30.5 MHz, 5,052 LC")
    assert HAND_FIGURE.findall("within 98.7-99.7 %, 380 cells, 14.5-29 nW") == \
        ["98.7-99.7 %", "380 cells", "14.5-29 nW"]
    assert not HAND_FIGURE.findall("Python 3.11+, a 4x2 array, 16 MACs/cycle, step 2")


def test_a_hand_figure_added_to_a_checked_page_is_found():
    pages = _checked_pages()
    assert {"README.md", "docs/guide/estimator.md", "docs/guide/boards.md",
            "docs/reference/numerics.md"} <= set(pages)
    for page, text in pages.items():
        assert _hand_figures(page, text + "\nIt closes at 51.7 MHz, 4,930 LC.\n") == \
            ["51.7 MHz", "4,930 LC"], page
    assert not _hand_figures("README.md", "{{lenet5 | icebreaker | batch 1 | top1}} % top-1, "
                                          "{{code: asic.clock}}\n")


def test_allowed_figures_are_on_their_pages():
    pages = _checked_pages()
    stale = {page: sorted(set(allowed) - set(HAND_FIGURE.findall(pages.get(page, ""))))
             for page, allowed in ALLOWED_FIGURES.items()}
    assert not any(stale.values()), f"allowed figures no page shows: {stale}"


def test_readme_is_a_short_guide():
    words = len((ROOT / "README.md").read_text().split())
    assert words < 1000, f"README.md has {words} words"


def test_every_results_row_is_used_or_listed():
    rows = load_rows(ROOT / "benchmarks" / "results")
    assert {row.network for row in rows} >= {"lenet5", "resnet8", "vww", "none"}
    assert {row.board for row in rows} >= {"icebreaker", "ulx3s"}
    _, used = render((ROOT / "docs" / "templates" / "README.md").read_text(), rows)
    assert used and all(row in rows for row in used)


def _without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _links(path):
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(path.read_text())):
        if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
            yield target.split("#")[0]


def _pages():
    return [ROOT / "README.md", *ROOT.glob("*/README.md"),
            *(page for page in ROOT.glob("docs/**/*.md") if "templates" not in page.parts)]


def test_links_between_pages_resolve():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in _pages()
              for target in _links(page) if not (page.parent / target).exists()]
    assert not broken, broken


def _section_anchors(path):
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped."""
    headings = re.findall(r"^#+ (.*)$", _without_code(path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in headings}


def test_links_to_sections_resolve():
    broken = []
    for page in _pages():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)",
                                         _without_code(page.read_text())):
            linked = page.parent / target if target else page
            if linked.suffix == ".md" and linked.exists() and \
                    anchor not in _section_anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, broken


def test_documents_named_in_the_code_exist():
    named = set()
    for source in [*ROOT.glob("src/**/*.py"), *ROOT.glob("hdl/*.py"), *ROOT.glob("sim/*.py"),
                   *ROOT.glob("boards/*.py"), *ROOT.glob("benchmarks/*.py"), ROOT / "Makefile"]:
        named |= set(re.findall(r"\b((?:docs|boards)/[\w/.-]+\.md)", source.read_text()))
    missing = sorted(name for name in named if not (ROOT / name).exists())
    assert not missing, missing


def test_every_configuration_field_has_its_paragraph():
    documented = {name for name, _, _, _ in _generator().config_fields()}
    fields = set(AcceleratorConfig.__dataclass_fields__)
    assert fields <= documented, sorted(fields - documented)


# --- the results format -------------------------------------------------------------------

def _row(**changes):
    fields = dict(network="lenet5", board="icebreaker", configuration="batch 1",
                  metric="images_per_s_compute", value=906.26, basis="estimated",
                  command="fpganet estimate OUT")
    fields.update(changes)
    return make_row(**fields)


def test_render_fills_placeholders_with_their_rows():
    rows = [_row(), _row(metric="watts_chip_compute", value=0.0232)]
    page, used = render("{{lenet5 | icebreaker | batch 1 | images_per_s_compute}} images/s, "
                        "{{lenet5|icebreaker|batch 1|watts_chip_compute :mW}}", rows)
    assert page == "906 images/s, 23.2 mW"
    assert used == rows


@pytest.mark.parametrize("template, message", [
    ("{{lenet5 | ulx3s | batch 1 | images_per_s_compute}}", "no results row"),
    ("{{lenet5 | icebreaker | images_per_s_compute}}", "a placeholder that is not"),
])
def test_render_refuses_what_it_cannot_fill(template, message):
    with pytest.raises(ResultsError, match=message):
        render(template, [_row()])


@pytest.mark.parametrize("changes, message", [
    (dict(metric="speed"), "unknown metric 'speed'"),
    (dict(basis="guessed"), "unknown basis 'guessed'"),
    (dict(basis="published"), "a published row names its source"),
    (dict(source="a datasheet"), "a published row names its source"),
    (dict(configuration="a | b"), "configuration must be"),
])
def test_rows_are_checked(changes, message):
    with pytest.raises(ResultsError, match=message):
        _row(**changes)


def test_results_files_refuse_wrong_units_fields_and_twins():
    good = _row().to_dict()
    with pytest.raises(ResultsError, match="is in 'images/s', not 'W'"):
        check_rows([{**good, "unit": "W"}], "f.json")
    with pytest.raises(ResultsError, match="exactly the fields"):
        check_rows([{**good, "extra": 1}], "f.json")
    with pytest.raises(ResultsError, match="two rows of"):
        check_rows([good, good], "f.json")
    assert find(check_rows([good], "f.json"), "lenet5", "icebreaker", "batch 1",
                "images_per_s_compute").value == pytest.approx(906.26)


def test_format_value_by_unit():
    assert format_value(_row(metric="top1", value=99.1263)) == "99.1"
    assert format_value(_row(metric="fmax_mhz", value=30.524)) == "30.5"
    assert format_value(_row(metric="luts", value=5052)) == "5,052"
    assert format_value(_row(metric="images_per_s_per_w_chip", value=40982.3), "k") == "41.0 k"
    assert format_value(_row(metric="watts_chip_compute", value=0.664), "mW") == "664 mW"


# --- the README's commands, as written --------------------------------------------------

def _readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Your model in four commands", 1)[1].split("```sh", 1)[1]
    block = block.split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines()
            if line.strip() and not line.startswith("source ")]


def test_readme_names_compile_golden_rtl_and_estimate():
    commands = [" ".join(shlex.split(line)[:2]) for line in _readme_commands()]
    assert commands[-4:] == ["fpganet compile", "fpganet run", "fpganet run", "fpganet estimate"]


def run_as_written(lines, folder):
    """Each shell line in ``folder`` with this Python's scripts first on PATH; each must exit
    0. Their standard outputs."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    outputs = []
    for line in lines:
        result = subprocess.run(shlex.split(line), cwd=folder, env=env, capture_output=True,
                                text=True, timeout=900)
        assert result.returncode == 0, f"{line}: {result.stderr}"
        outputs.append(result.stdout)
    return outputs


@pytest.mark.slow
def test_readme_commands_run_as_written(tmp_path):
    """In a folder of its own, with the checkout's ``src`` beside it as in a clone."""
    (tmp_path / "src").symlink_to(ROOT / "src")
    outputs = run_as_written(_readme_commands(), tmp_path)
    golden, rtl = outputs[-3], outputs[-2]
    assert "top-1 accuracy" in golden and "cycles" in rtl
    assert "images/s" in outputs[-1]


def test_board_rows_of_a_mode_build_are_its_own_configuration_and_keep_the_others(tmp_path):
    """``benchmarks/boards.py --requant-mode tflite`` records a tflite-mode build under its
    own configuration, beside the default's rows, and refuses a report of another mode."""
    spec = importlib.util.spec_from_file_location("boards_bench", ROOT / "benchmarks/boards.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from fpganet.boards.ulx3s import DEFAULT_CONFIG

    report = {"config": DEFAULT_CONFIG.replace(requant_mode="tflite").to_dict(),
              "fmax_mhz": 99.5, "clock": {"target_mhz": 100.0}, "runtime_s": 60.0,
              "timing_met": False, "resources": {"LUT4": {"used": 18000, "available": 83640}}}
    (tmp_path / "ulx3s").mkdir()
    (tmp_path / "ulx3s" / "report.json").write_text(json.dumps(report))
    output = tmp_path / "boards.json"
    kept = make_row("none", "ulx3s", "default", "luts", 17000, "routed", "fpganet synth")
    output.write_text(json.dumps([kept.to_dict()]))
    argv = ["--boards", "ulx3s", "--reports", str(tmp_path), "-o", str(output)]
    assert bench.main([*argv, "--requant-mode", "tflite"]) == 0
    rows = {row.key: row for row in check_rows(json.loads(output.read_text()), "boards.json")}
    assert rows[kept.key].value == 17000
    tflite = rows[("none", "ulx3s", "tflite requantization", "luts")]
    assert tflite.value == 18000 and tflite.command.endswith("--requant-mode tflite")
    assert bench.main(argv) == 2                   # a tflite-mode report is no default build


def test_the_readme_python_example_runs(tmp_path, monkeypatch):
    """The README's Python block, as written, in a folder laid out as its shell steps leave
    it (``build/calib.npz`` and ``build/test.npz`` from ``fpganet mnist``)."""
    from fpganet.cli import main

    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    (tmp_path / "src").symlink_to(ROOT / "src")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "build").mkdir()
    assert main(["mnist", "--split", "calib", "-o", "build/calib.npz"]) == 0
    assert main(["mnist", "--split", "eval", "--limit", "200", "-o", "build/test.npz"]) == 0
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["result"].accuracy(np.load("build/test.npz")["y"]) > 0.95
    assert (tmp_path / "build" / "lenet5-py" / "manifest.json").is_file()
