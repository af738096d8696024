"""An audit of a file whose column and level names are attacks, checked on every surface.

The generated file's column names and level names carry HTML and JavaScript, spreadsheet formulas,
paths that walk out of a folder, terminal escape sequences (retitle, recolour, clear) and line breaks.
``disagg-eval audit`` runs on it in a subprocess (its real standard output and error), then:

- terminal: no control, format, private-use or unassigned character but the summary's own line breaks
  reaches standard output or error; the payloads are shown escaped (``\\x1b``, ``\\u202e``, ``\\U000e0041``);
- figures: labels with dollar signs are drawn as text (matplotlib would typeset ``$...$``), every
  SVG file is well-formed XML (a raw control character is not) without a script;
- file names: every file is inside ``--out`` and has a plain name (letters, digits, ``_-.``);
- CSV cells: none starts with ``=``, ``+``, ``-`` (but a number), ``@``, a tab or a carriage return;
  the parquet files keep the names as they are;
- the report: parsed as written, and as headless Chromium builds its DOM after running the page,
  holds exactly one script (the report's own), no event-handler attribute, no element from the
  data, every image decodes, and the payloads appear as text, each name as the terminal shows it (one
  rule: ``audit.text``); the SVG figures hold no script.
"""

from __future__ import annotations

import csv
import html
import html.parser
import os
import re
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit.text import UNSAFE_CATEGORIES, html_text, terminal_text
from test_audit_report import chromium, run_chromium

HTML = "<script>alert('col')</script>"
LEVEL_HTML = '<img src=x onerror="alert(1)">'
FORMULA = '=HYPERLINK("http://evil.example","click")'
TERMINAL = "\x1b]0;pwned\x07\x1b[31mred\x1b[2J"
LABEL = "@SUM(1+1)"
SCORE_PATH = "../../escape/risk"
SCORE_TERMINAL = f"{FORMULA}{TERMINAL}"  # a formula, then escape sequences
GROUP_HTML = HTML  # a group column name may not hold '=' (it separates attribute and level)
GROUP_TERMINAL = f"-sex{TERMINAL}\nfake line"  # starts with '-' (a formula to a spreadsheet)
# Invisible or misleading on a terminal and in a browser: a right-to-left override, a bell, tag characters
# (text no one sees), a private-use character (any icon a font puts there), a zero-width space.
HIDDEN = "txt.exe\u202egnp\x07\U000e0041\U000e0042\ue000\u200b"
LEVELS = [LEVEL_HTML, FORMULA, "../../etc/passwd", TERMINAL, "-1 + 2", "+cmd", "plain\r\nbreak", "Tab\tinside",
          "$\\frac{1}{0}$", "$5", HIDDEN]  # fmt: skip
SAFE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The generated file, the audit's folder and the finished process."""
    root = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(20250101)
    n = 800
    score = rng.random(n).round(3)
    frame = pd.DataFrame({
        LABEL: (rng.random(n) < score).astype(int),
        SCORE_PATH: score,
        SCORE_TERMINAL: np.clip(score + rng.normal(0, 0.1, n), 0, 1).round(3),
        GROUP_HTML: np.array(LEVELS)[np.arange(n) % len(LEVELS)],
        GROUP_TERMINAL: rng.choice([TERMINAL + "F", "M "], n),  # "M " is stripped to "M", with a note
    })  # fmt: skip
    data = root / "hostile.csv"
    frame.to_csv(data, index=False)
    out_dir = root / "out"
    argv = ["audit", str(data), "--label", LABEL, "--score", SCORE_PATH, "--score", SCORE_TERMINAL.replace(",", "\\,"),
            "--group", GROUP_HTML, f"--group={GROUP_TERMINAL}", "--metrics", "false_positive_rate,accuracy,auc",
            "--control", "none,R", "--n-resamples", "200", "--n-permutations", "100", "--max-leaf-nodes", "10",
            "--cv-folds", "2", "--crossfit-folds", "2", "--out", str(out_dir)]  # fmt: skip
    # a terminal wide enough that no name is wrapped: these tests read the names as escaped, whole
    env = dict(os.environ, COLUMNS="100000")
    proc = subprocess.run([sys.executable, "-m", "disaggregated_eval.audit.cli", *argv], capture_output=True,
                          text=True, cwd=root, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return root, out_dir, proc


def control_characters(text: str) -> set[str]:
    """Characters that no output may hold raw (the summary's own line breaks aside): every character of the
    categories ``text.UNSAFE_CATEGORIES`` (controls, format, private use, unassigned, surrogates, separators)."""
    return {c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES}


def test_terminal_output_carries_no_control_characters(hostile):
    _, _, proc = hostile
    assert control_characters(proc.stdout) == set()
    assert control_characters(proc.stderr) == set()
    assert "warning" not in proc.stderr  # e.g. matplotlib's "Glyph 27 missing" for a raw escape character
    # the payloads are there, visibly escaped
    assert 'click")\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[2J' in proc.stdout
    assert "-sex\\x1b]0;pwned" in proc.stdout and "\\nfake line" in proc.stdout
    assert "=plain\\r\\nbreak" in proc.stdout and "=Tab\\tinside" in proc.stdout
    # no line of the output starts with text from the data (a line break in a name cannot fake a row)
    assert not [line for line in proc.stdout.splitlines() if line.startswith("fake line")]
    assert "note: group column '-sex" in proc.stdout and "'M ' -> 'M'" in proc.stdout
    assert "txt.exe\\u202egnp\\x07\\U000e0041\\U000e0042\\ue000\\u200b" in proc.stdout  # issue 32, item 10


def test_report_shows_every_name_as_the_terminal_does(hostile):
    """One rule for the terminal and the report (issue 32, item 10): before, report.html held 1,400 raw
    right-to-left overrides, ESC, BEL, tag and private-use characters."""
    _, out_dir, proc = hostile
    page = (out_dir / "report.html").read_text(encoding="utf-8")
    assert control_characters(page) == set()
    for level in (HIDDEN, TERMINAL, "plain\r\nbreak"):
        shown = f"{GROUP_HTML}={level}"
        assert terminal_text(shown) in proc.stdout, level
        assert html_text(shown) in page, level


def test_every_file_is_inside_out_with_a_plain_name(hostile):
    root, out_dir, _ = hostile
    assert sorted(p.name for p in root.iterdir()) == ["hostile.csv", "out"]
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    # 9 tables (parquet and csv; selection empty without its options), report, manifest; 3 forest plots, a T_a
    # figure per control and model and a calibration figure per family of slices (2 attributes and their
    # intersection), as png and svg
    assert len(files) == 2 * 9 + 2 + 2 * (3 + 2 * 2 + 3)
    for path in files:
        assert path.resolve().is_relative_to(out_dir.resolve())
        assert all(SAFE_FILE.fullmatch(part) for part in path.relative_to(out_dir).parts), path


def test_no_csv_cell_can_run_as_a_formula_and_parquet_keeps_the_names(hostile):
    _, out_dir, _ = hostile
    for name in ("slices", "comparisons", "controlled"):
        with (out_dir / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        risky = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not re.fullmatch(
            r"-\d+(\.\d+)?(e-?\d+)?", c))]  # fmt: skip
        assert risky == [], (name, risky[:5])
        assert any(c.startswith("'=HYPERLINK") for c in cells), name  # the second model's name
        assert any(c.startswith("'-sex") for c in cells), name  # the second attribute's slices
        table = pd.read_parquet(out_dir / f"{name}.parquet")
        assert set(table["model"]) == {SCORE_PATH, SCORE_TERMINAL}
    for name in ("fairness", "calibration", "calibration_summary", "thresholds", "detectability"):
        with (out_dir / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        risky = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not re.fullmatch(
            r"-\d+(\.\d+)?(e-?\d+)?", c))]  # fmt: skip
        assert risky == [], (name, risky[:5])
    slices = pd.read_parquet(out_dir / "slices.parquet")
    assert f"{GROUP_HTML}={FORMULA}" in set(slices["slice"])
    assert f"{GROUP_HTML}={TERMINAL}" in set(slices["slice"])


class _Elements(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.images: list[str] = []
        self.body: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [(tag, k) for k, _ in attrs if k.lower().startswith("on")]
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        if tag == "body":
            self.body = dict(attrs)


def elements(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    return parser


def check_page(text: str) -> _Elements:
    page = elements(text)
    assert page.tags.count("script") == 1  # the report's own image check
    assert page.handlers == []
    assert page.images and all(src.startswith("data:image/svg+xml;base64,") for src in page.images)
    assert set(page.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "nav", "a", "sub",
                              "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "p", "b", "i", "pre", "figure", "div",
                              "img", "figcaption", "code", "details", "summary", "script", "span"}  # fmt: skip
    for payload in (HTML, LEVEL_HTML, FORMULA):  # shown as text
        assert html.escape(payload) in text or html.escape(payload, quote=False) in text, payload
    return page


def test_report_as_written_has_no_element_from_the_data(hostile):
    _, out_dir, _ = hostile
    check_page((out_dir / "report.html").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_report_dom_in_chromium_has_no_element_from_the_data(hostile, tmp_path):
    _, out_dir, _ = hostile
    exe = chromium()
    proc = run_chromium(exe, tmp_path, "--virtual-time-budget=10000", "--dump-dom",
                        (out_dir / "report.html").resolve().as_uri())  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = check_page(proc.stdout)
    assert page.body.get("data-images-ok") == f"{len(page.images)}/{len(page.images)}"


def test_svg_figures_are_xml_without_script(hostile):
    _, out_dir, _ = hostile
    texts = " ".join(p.read_text(encoding="utf-8") for p in (out_dir / "figures").glob("*.svg"))
    assert "\\x1b]0;pwned" in texts  # the second model's name, in its panel's title, escaped
    for svg in (out_dir / "figures").glob("*.svg"):
        root = ET.fromstring(svg.read_bytes())
        tags = {element.tag.rsplit("}", 1)[-1] for element in root.iter()}
        assert "script" not in tags and "foreignObject" not in tags, svg.name
        assert not [k for element in root.iter() for k in element.attrib if k.lower().startswith("on")]


def test_figure_labels_with_dollars_and_escapes_are_drawn_as_text():
    from disaggregated_eval.audit import audit
    from disaggregated_eval.audit.figure_rendering import figure_bytes
    from disaggregated_eval.audit.forest_figures import plot_forest

    rng = np.random.default_rng(5)
    levels = np.array(["$\\frac{1}{0}$", "$5", TERMINAL])
    data = pd.DataFrame({"y": rng.integers(0, 2, 300), "p": rng.random(300), "g": levels[np.arange(300) % 3]})
    result = audit(data, label="y", scores=["p"], groups=["g"], metrics=["accuracy"], n_resamples=200,
                   n_permutations=0)  # fmt: skip
    svg = figure_bytes(plot_forest(result))["svg"]  # savefig would raise on a '$' mathtext parse error
    ET.fromstring(svg)  # well-formed: no raw control character
    text = svg.decode("utf-8")
    assert "g=$\\frac{1}{0}$" in text and "g=$5" in text and "g=\\x1b]0;pwned\\x07" in text
